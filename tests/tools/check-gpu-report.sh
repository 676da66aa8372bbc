#!/bin/sh
# Checks a report of tools/gpu-check.sh (its gpu-check.json) against what the script promises:
# every step in order with pass, fail or skip and its seconds; the failures listed exactly for
# the steps that failed and the result following them; every figure a number (or null, in a
# step that failed for it) with a unit and its goal; a bench-gpu-FORMAT step for each weight format
# (bf16, q8, q4, fp8); and each step that passed holding its figures (the benches' names, the
# weight bytes a decode token reads, fp8's FP8 GEMM rate, the goals of the decode and prefill
# fractions, the vLLM reference at 100 sessions, the agent step's roofline).
# With `pass`, the run must have passed: every step but the emulation's sanitizer (skipped) and
# fp8's bench on a device below compute capability 8.9 (skipped, saying so).
# Prints each problem; exit 1 when there is one. Needs jq.
# usage: check-gpu-report.sh REPORT.json emulated|device [pass]
set -u
report=$1 mode=$2 want=${3:-}
command -v jq >/dev/null 2>&1 || { echo "check-gpu-report: jq is missing"; exit 2; }
jq -e . "$report" >/dev/null || { echo "check-gpu-report: $report is not JSON"; exit 1; }

# shellcheck disable=SC2016
problems=$(jq -r --arg mode "$mode" --arg want "$want" '
def need($step; $names): (.figures | map(.name)) as $have | $names[]
	| select(. as $n | $have | index([$n]) | not) | "\($step): figure \(.) missing";
def goal($f; $op; $v): if ($f.goal.op != $op or $f.goal.value != $v) then
	"figure \($f.name): goal \($f.goal) is not \($op)\($v)" else empty end;
. as $r
| ["tools", "device", "build", "gpu-suite", "sanitizer"] as $head
| ["bench-serve", "bench-agent"] as $tail
| ["bench-gpu-bf16", "bench-gpu-q8", "bench-gpu-q4", "bench-gpu-fp8"] as $formats
| ($r.steps | map(.name)) as $names
| (if $r.tool != "tools/gpu-check.sh" or $r.version != 1 then "tool or version wrong" else empty end),
  (if $r.mode != $mode then "mode \($r.mode), expected \($mode)" else empty end),
  (if ($r.date | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T")) | not then "no date" else empty end),
  (if ($r.commit | type) != "string" or $r.commit == "" then "no commit" else empty end),
  (if ($r.seconds | type) != "number" then "no total seconds" else empty end),
  (if $names != $head + $formats + $tail
   then "steps \($names), expected \($head + $formats + $tail)" else empty end),
  ($r.steps[] | select(([.status] | inside(["pass", "fail", "skip"])) | not)
   | "\(.name): status \(.status)"),
  ($r.steps[] | select((.seconds | type) != "number") | "\(.name): no seconds"),
  ($r.steps | map(select(.status == "fail") | .name)) as $failed
  | ($r.failures | map(split(":")[0])) as $listed
  | (if ($failed - $listed) != [] then "failed steps \($failed - $listed) not in failures" else empty end),
    (if ($listed - $failed) != [] then "failures of \($listed - $failed), which did not fail" else empty end),
    (if ($r.result == "pass") != ($failed == []) then "result \($r.result) with failed steps \($failed)" else empty end),
  ($r.steps[] | .name as $n | .status as $status | .figures[]
   | (if (.name | type) != "string" or (.unit | type) != "string" then "\($n): a figure without name or unit" else empty end),
     (if (.value | type) != "number" and (.value != null or $status != "fail")
      then "\($n): figure \(.name) is not a number" else empty end),
     (if .goal != null and ((.goal.op | IN(">=", "<=")) | not) then "\($n): figure \(.name): goal \(.goal)" else empty end),
     (if (.goal == null) != (.met == null) then "\($n): figure \(.name): goal and met disagree" else empty end)),
  ($r.steps[] | select(.status == "pass") | . as $s
   | if .name == "gpu-suite" then need(.name; ["suite.passed", "suite.failed", "suite.skipped"])
     elif (.name | startswith("bench-gpu-")) then (.name | ltrimstr("bench-gpu-")) as $f
       | need(.name; ["gpu.copy", "gpu.gemm", "gpu.\($f).prefill", "gpu.\($f).prefill_of_gemm",
                      "gpu.\($f).decode", "gpu.\($f).decode_bytes", "gpu.\($f).decode_of_roofline",
                      "gpu.\($f).state", "gpu.\($f).vision", "gpu.\($f).vision_of_gemm"]
                     + (if $f == "fp8" then ["gpu.gemm_fp8"] else [] end)),
         (.figures[] | select(.name == "gpu.\($f).decode_of_roofline") | goal(.; ">="; 85)),
         (.figures[] | select(.name == "gpu.\($f).prefill_of_gemm") | goal(.; ">="; 60))
     elif .name == "bench-serve" then
       need(.name; [[1, 8, 32, 100][] | "serve.sessions\(.).tok_s", "serve.sessions\(.).step_ms"]),
       (.figures[] | select(.name == "serve.sessions100.tok_s") | goal(.; ">="; 8900))
     elif .name == "bench-agent" then
       need(.name; [["vision", "prefill", "decode", "sum", "roofline", "of_roofline"][]
                    | "agent.step2.\(.)"]),
       (.figures[] | select(.name == "agent.step2.of_roofline") | goal(.; "<="; 1.2))
     else empty end),
  (if $want == "pass" then
     (if $r.result != "pass" then "result \($r.result): \($r.failures)" else empty end),
     ($r.steps[] | select(.status != "pass")
      | select(($mode == "emulated" and .name == "sanitizer" and .status == "skip") | not)
      | select((.name == "bench-gpu-fp8" and .status == "skip"
                and (.message | test("compute capability 8.9 or newer"))) | not)
      | "\(.name): \(.status), expected pass")
   else empty end)
' "$report") || { echo "check-gpu-report: jq failed on $report"; exit 1; }
if [ -n "$problems" ]; then
	echo "$problems" | sed 's/^/check-gpu-report: /'
	exit 1
fi
echo "check-gpu-report: $report: $(jq -r '"\(.result), \(.steps | length) steps, \([.steps[].figures[]] | length) figures"' "$report")"
