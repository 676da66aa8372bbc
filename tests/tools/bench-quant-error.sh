#!/bin/sh
# holo-bench quant-error on the golden tiny models (tests/fixtures/models): the table's rows in
# the documented order and format, the reference's rerun exact, q8 closer than q4, each format's
# weights no worse than GGML's of the same bits (Q8_0, Q4_0: the quantizers' own error, exact
# arithmetic), q4's logits no worse than Q4_0's and q8's within 5% of Q8_0's (q8 and Q8_0 share
# their scales and differ by one code in a few percent of the weights, so their logits errors
# differ by noise either way: 0.98x to 1.02x measured), the runs with the lm_head quantized too,
# and bad arguments refused with a sentence. The asserted comparisons are fp32-precision rows,
# whose weights are dequantized exactly (no kernel's rounding decides them).
# usage: bench-quant-error.sh HOLO_BENCH OUT SOURCE_ROOT
set -eu
bench=$1 out=$2 root=$3
num='-?[0-9]+\.[0-9]+'
sci='[0-9]\.[0-9]{3}e[-+][0-9]{2}'
# the field of a row: row WEIGHTS PRECISION LM_HEAD COLUMN
field() {
	awk -v w="$1" -v p="$2" -v h="$3" -v c="$4" '
		$1 == "weights" && $2 == "precision" { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$1 == w && $2 == p && $3 == h { print $(col[c]); found = 1; exit }
		END { if (!found) exit 1 }' "$out" || { echo "no row $1 $2 $3" >&2; exit 1; }
}
# awk's verdict on an expression of numbers
holds() {
	awk "BEGIN { exit !($1) }" || { echo "fails: $1 ($2)" >&2; exit 1; }
}
for model in tiny-mamba tiny-aliases tiny-tied; do
	"$bench" quant-error --model "$root/tests/fixtures/models/$model" --tokens 256 --threads 2 >"$out"
	cat "$out"
	grep -Eq "^model: .*/$model \(bf16 weights\), pattern [-M*]+$" "$out"
	grep -Eq "^reference: the weights as stored, fp32 precision" "$out"
	grep -Eq "^weights +precision +lm_head +cos_mean +cos_min +nmse +kl_mean +top1 +nmse/ggml +kl/ggml +w_nmse +w/ggml +seconds$" "$out"
	# the order: the rerun, bf16 precision, GGML's, then ours (q8 and q4 at least)
	rows=$(awk '$1 == "weights" { on = 1; next } on && NF == 0 { exit } on { printf "%s/%s/%s ", $1, $2, $3 }' "$out")
	case "$rows" in
	"stored/fp32/stored stored/bf16/stored Q8_0/fp32/stored Q8_0/bf16/stored Q8_0/fp32/Q8_0 Q8_0/bf16/Q8_0 Q4_0/fp32/stored Q4_0/bf16/stored Q4_0/fp32/Q4_0 Q4_0/bf16/Q4_0 q8/fp32/stored q8/bf16/stored q8/fp32/q8 q8/bf16/q8 q4/fp32/stored q4/bf16/stored q4/fp32/q4 q4/bf16/q4 "*) ;;
	*) echo "rows: $rows" >&2; exit 1 ;;
	esac
	grep -Eq "^q8 +fp32 +stored +$num +$num +$sci +-?$sci +$num +$num +$num +$sci +$num +$num$" "$out"
	# the reference against its rerun: exact
	grep -Eq "^stored +fp32 +stored +1\.000000 +1\.000000 +0\.000e\+00 +0\.000e\+00 +1\.0000 +- +- +- +- +$num$" "$out"
	# fewer bits, more error
	holds "$(field q8 fp32 stored cos_min) > $(field q4 fp32 stored cos_min)" "q8 vs q4 least cosine"
	holds "$(field q8 fp32 stored cos_mean) > $(field q4 fp32 stored cos_mean)" "q8 vs q4 mean cosine"
	holds "$(field q8 fp32 stored nmse) < $(field q4 fp32 stored nmse)" "q8 vs q4 nmse"
	holds "$(field q8 fp32 stored cos_min) > 0.995" "q8 least cosine (0.9991 measured)"
	# against GGML on the same weights
	holds "$(field q8 fp32 stored w/ggml) <= 1" "q8's weights vs Q8_0's"
	holds "$(field q4 fp32 stored w/ggml) <= 1" "q4's weights vs Q4_0's"
	holds "$(field q8 fp32 stored nmse) <= $(field Q8_0 fp32 stored nmse) * 1.05" "q8 vs Q8_0 logits nmse"
	holds "$(field q4 fp32 stored nmse) <= $(field Q4_0 fp32 stored nmse)" "q4 vs Q4_0 logits nmse"
	holds "$(field q4 fp32 stored kl_mean) <= $(field Q4_0 fp32 stored kl_mean)" "q4 vs Q4_0 kl"
	holds "$(field q4 fp32 stored nmse/ggml) <= 1" "q4's printed ratio"
	# the lm_head quantized too: the logits move
	for f in q8 q4 Q8_0 Q4_0; do
		holds "$(field $f fp32 $f nmse) != $(field $f fp32 stored nmse)" "$f's lm_head in the logits"
	done
	grep -Eq "^goal q8 as accurate as Q8_0 \(fp32 precision\): logits nmse $num(e-?[0-9]+)?x, kl .*: (holds|holds for the weights, not the logits)$" "$out"
	grep -Eq "^goal q4 as accurate as Q4_0 \(fp32 precision\): .*: holds$" "$out"
done
# --no-head: no lm_head rows; --decode 0: the prefill alone
"$bench" quant-error --model "$root/tests/fixtures/models/tiny-mamba" --tokens 8 --decode 0 --no-head >"$out"
grep -Eq "; 8 positions of prefill and 0 decode steps" "$out"
! grep -Eq "^(q8 +(fp32|bf16) +q8|Q4_0 +(fp32|bf16) +Q4_0) " "$out"
grep -Eq "^q4 +bf16 +stored " "$out"
# bad arguments: exit 2 (1 for a model that does not load) and a sentence naming what is wrong
refused() {
	want=$1 pattern=$2
	shift 2
	rc=0
	"$bench" quant-error "$@" >/dev/null 2>"$out.err" || rc=$?
	cat "$out.err"
	[ "$rc" = "$want" ] || { echo "exit $rc, want $want: $*" >&2; exit 1; }
	grep -q -e "$pattern" "$out.err" || { echo "no '$pattern' for: $*" >&2; exit 1; }
}
tiny=$root/tests/fixtures/models/tiny-mamba
refused 2 "give one of --model DIR and --random-config FILE"
refused 2 "give one of --model DIR and --random-config FILE" --model "$tiny" --random-config "$root/tools/bench/tiny-vl-config.json"
refused 2 "--tokens '0' is not a count from 1 to 4096" --model "$tiny" --tokens 0
refused 2 "--tokens '4097' is not a count" --model "$tiny" --tokens 4097
refused 2 "--tokens '12x' is not a count" --model "$tiny" --tokens 12x
refused 2 "--decode '1025' is not a count from 0 to 1024" --model "$tiny" --decode 1025
refused 2 "--seed '-1' is not a number" --model "$tiny" --seed -1
refused 2 "--threads '0' is not a count" --model "$tiny" --threads 0
refused 2 "--pattern is for --random-config's model" --model "$tiny" --pattern M
refused 2 "--pattern 'MX-' is not 1 to 64 layers of M, \\* and -" --random-config "$root/tools/bench/tiny-vl-config.json" --pattern MX-
refused 2 "unknown option or missing value: '--bogus'" --model "$tiny" --bogus
refused 2 "unexpected argument 'extra'" --model "$tiny" extra
refused 1 "/nonexistent" --model /nonexistent
refused 1 "/nonexistent.json" --random-config /nonexistent.json
echo "bench-quant-error: ok"
