#!/bin/sh
# holo-bench serve on a tiny random model: one line per session count in the documented format
# (the first count's speedup 1.00), a --mixed line per count, the roofline of Holotron-12B's
# shapes at 100 sessions on both devices with the figures of the committed config (test-roofline
# checks the formulas), and session lists that are not ascending from 1 refused; the cost of a
# session's creation and snapshot in the documented format; random weights of a config's shapes
# (--random-config) with a reference rate for the largest count, and the figure lines. BACKEND
# (default cpu): cuda runs the sessions' batched steps on the CUDA backend (the emulation in the
# emulated build).
# usage: bench-serve.sh HOLO_BENCH OUT [BACKEND]
set -eu
bench=$1 out=$2 backend=${3:-cpu}
tiny=hidden=64,vocab=256,intermediate=96,heads=4,kv_heads=2,head_dim=16,m_heads=8,m_head_dim=8,m_groups=2,m_state=16,chunk=8,pattern=M*-M
"$bench" serve --backend "$backend" --random "$tiny" --sessions 1,2,3 --prompt 5 --decode 2 --rounds 3 \
	--mixed 7 >"$out"
cat "$out"
num='[0-9]+\.[0-9]+'
grep -Eq "^sessions=1 tok/s=$num speedup=1\.00 step_ms=$num cpu_tok/s=$num$" "$out"
grep -Eq "^sessions=2 tok/s=$num speedup=$num step_ms=$num cpu_tok/s=$num$" "$out"
grep -Eq "^sessions=3 tok/s=$num speedup=$num step_ms=$num cpu_tok/s=$num$" "$out"
test "$(grep -c '^sessions=' "$out")" = 3
grep -Eq "^state session_create_ms=$num context=4096 snapshot_ms=$num restore_ms=$num snapshot_MiB=$num tokens=[0-9]+$" "$out"
# a prefill chunk of 7 tokens beside each count's decoders, in their forward and apart
grep -Eq "^mixed sessions=1 chunk=7 together_ms=$num apart_ms=$num speedup=$num$" "$out"
grep -Eq "^mixed sessions=3 chunk=7 together_ms=$num apart_ms=$num speedup=$num$" "$out"
test "$(grep -c '^mixed sessions=' "$out")" = 3
# 23.28 GB of weights once, 100 x 302 MB of fp32 state read and written, 100 x 4097 bf16 KV rows
grep -Eq "^roofline device=h200 sessions=100 context=4096 tok/s=7555 step_ms=13\.24 weights_GB=23\.28 state_GB=30\.19 kv_GB=10\.07 bound=memory ssm_state=fp32$" "$out"
grep -Eq "^roofline device=h100 sessions=100 context=4096 tok/s=5273 step_ms=18\.96 .* ssm_state=fp32$" "$out"
# the SSM state in bf16: its 29.36 GB halved, the conv window's 0.83 GB kept
grep -Eq "^roofline device=h200 sessions=100 context=4096 tok/s=9826 step_ms=10\.18 weights_GB=23\.28 state_GB=15\.51 kv_GB=10\.07 bound=memory ssm_state=bf16$" "$out"
test "$(grep -c '^roofline device=' "$out")" = 4
# the sessions with a bf16 SSM state
"$bench" serve --backend "$backend" --ssm-state bf16 --random "$tiny" --sessions 1,2 --prompt 5 \
	--decode 2 --rounds 1 >"$out.bf16"
grep -q "SSM state bf16" "$out.bf16"
grep -Eq "^sessions=2 tok/s=$num speedup=$num step_ms=$num cpu_tok/s=$num$" "$out.bf16"
# random weights of a config's shapes, the largest count against a reference rate
config=$HOLOD_SOURCE_ROOT/tools/bench/tiny-vl-config.json
"$bench" serve --backend "$backend" --random-config "$config" --sessions 1,2 --prompt 3 \
	--decode 2 --rounds 1 --reference 8900 >"$out.config"
grep -q "^random model of the shapes of $config: pattern M-M\*-M, hidden 64, vocab 256, intermediate 128, dtype bf16$" "$out.config"
grep -Eq "^sessions=1 tok/s=$num speedup=1\.00 step_ms=$num cpu_tok/s=$num$" "$out.config"
grep -Eq "^sessions=2 tok/s=$num speedup=$num step_ms=$num cpu_tok/s=$num reference=8900 ratio=$num$" "$out.config"
v='[0-9.]+(e[-+][0-9]+)?'
grep -Eq "^figure name=serve.sessions1.tok_s value=$v unit=tok/s$" "$out.config"
grep -Eq "^figure name=serve.sessions2.tok_s value=$v unit=tok/s goal=>=8900$" "$out.config"
grep -Eq "^figure name=serve.sessions2.step_ms value=$v unit=ms$" "$out.config"
! "$bench" serve --random "$tiny" --random-config "$config" >/dev/null 2>&1
! "$bench" serve --random "$tiny" --ssm-state fp16 >/dev/null 2>&1
! "$bench" serve --random "$tiny" --mixed -1 >/dev/null 2>&1
! "$bench" serve --random "$tiny" --sessions 2,4 >/dev/null 2>&1
! "$bench" serve --random "$tiny" --sessions 1,4,2 >/dev/null 2>&1
! "$bench" serve --random "$tiny" --sessions 1,300 >/dev/null 2>&1
