#!/bin/sh
# holo-bench agent --device-spec CARD --weights (issue 29): the CUDA backend's memory plan of
# Holotron-12B (tools/bench/holotron-12b-config.json) on each card, one line per format with
# `fits` or `does not fit`, the sessions of 32768 tokens that fit and the predicted step.
#   24 GB cards (RTX 3090, RTX 4090): bf16 does not fit (its weights alone are 22.9 GiB), q8 and
#   q4 fit, fp8 fits on the 4090 (sm_89) and does not run on the 3090 (sm_86, no FP8);
#   H200: every format fits, more sessions in q4 than in bf16;
#   --weights picks the lines; an unknown card or format is a usage error.
# usage: bench-agent-plan.sh HOLO_BENCH OUT
B=$1
OUT=$2
fail() { echo "FAIL: $*"; exit 1; }
line() { # CARD FORMAT -> the plan line
	grep "^$1 $2: " "$OUT"
}
sessions() { # CARD FORMAT -> sessions that fit
	line "$1" "$2" | sed -n 's/.*; \([0-9]*\) sessions of 32768 tokens fit; .*/\1/p'
}
for card in rtx3090 rtx4090 rtx5090 l4 h100 h200; do
	"$B" agent --device-spec $card >"$OUT" 2>&1 || fail "$card: exit $?: $(cat "$OUT")"
	cat "$OUT"
	for f in bf16 q8 q4 fp8; do
		[ "$(line $card $f | wc -l)" = 1 ] || fail "$card: no single $f line"
	done
	line $card q4 | grep -Eq "^$card q4: fits: [0-9.]+ GiB of weights \(q4\) \+ [0-9.]+ GiB of vision tower \+ 1 session of 32768 tokens \([0-9.]+ GiB each\) \+ .* = [0-9.]+ GiB; [0-9]+ sessions of 32768 tokens fit; predicted step 2: [0-9.]+ ms \(vision [0-9.]+ \+ prefill [0-9.]+ \+ decode [0-9.]+\)$" ||
		fail "$card: the q4 line"
	line $card q8 | grep -q "^$card q8: fits: " || fail "$card: q8 does not fit"
	case $card in
	rtx3090|rtx4090|l4)
		line $card bf16 | grep -q "^$card bf16: does not fit: 22.9 GiB of weights (bf16) + " ||
			fail "$card: bf16 fits a 24 GB card"
		[ "$(sessions $card bf16)" = 0 ] || fail "$card: bf16 sessions"
		[ "$(sessions $card q8)" -ge 1 ] || fail "$card: no q8 session" ;;
	h100|h200)
		line $card bf16 | grep -q "^$card bf16: fits: " || fail "$card: bf16 does not fit"
		[ "$(sessions $card q4)" -gt "$(sessions $card bf16)" ] || fail "$card: q4 sessions" ;;
	esac
	case $card in
	rtx3090)
		line $card fp8 | grep -q "^rtx3090 fp8: does not run: sm_86 has no FP8 tensor cores (fp8 needs sm_89 or later): use q8 or q4$" ||
			fail "fp8 on the 3090" ;;
	*)
		line $card fp8 | grep -q "^$card fp8: fits: [0-9.]* GiB of weights (fp8) + " ||
			fail "$card: fp8 does not fit"
		# fp8 prefill runs at the FP8 tensor rate, twice bf16's or more
		p8=$(line $card fp8 | sed -n 's/.*prefill \([0-9.]*\) .*/\1/p')
		p16=$(line $card bf16 | sed -n 's/.*prefill \([0-9.]*\) .*/\1/p')
		awk -v a="$p8" -v b="$p16" 'BEGIN { exit !(a > 0 && a * 1.9 < b) }' ||
			fail "$card: fp8 prefill $p8 ms, bf16 $p16 ms" ;;
	esac
done
"$B" agent --device-spec rtx4090 --weights q4,fp8 >"$OUT" 2>&1 || fail "--weights q4,fp8: exit $?"
[ "$(grep -c '^rtx4090 ' "$OUT")" = 2 ] && line rtx4090 q4 >/dev/null && line rtx4090 fp8 >/dev/null ||
	fail "--weights q4,fp8 shows: $(grep '^rtx4090 ' "$OUT")"
"$B" agent --device-spec rtx4090 --weights fp16 >"$OUT" 2>&1 && fail "--weights fp16 accepted"
grep -q "'fp16' is not a valid value" "$OUT" || fail "--weights fp16: $(head -1 "$OUT")"
"$B" agent --device-spec rtx2080 >"$OUT" 2>&1 && fail "--device-spec rtx2080 accepted"
# gpu-check's quantized benches run Holotron-12B's first 18 layers (its config beside the
# whole one): the same shapes, 5.0 GiB of q8 weights (18 of the 62 layers' records, plus the
# embeddings and the lm_head, which every layer count keeps)
"$B" agent --device-spec h100 --weights q8 \
	--config "$(dirname "$0")/../../tools/bench/holotron-12b-18layers-config.json" >"$OUT" 2>&1 ||
	fail "the 18-layer config: exit $?: $(cat "$OUT")"
grep -q "^h100 q8: fits: 5.0 GiB of weights (q8) + 2.9 GiB of vision tower + " "$OUT" ||
	fail "the 18-layer config's plan: $(cat "$OUT")"
exit 0
