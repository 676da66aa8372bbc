/* Entry points of holo-bench's commands: argv[0] is the command name. Return an exit code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

int bench_x11_main(int argc, char **argv);
int bench_engine_main(int argc, char **argv);
int bench_gemv_main(int argc, char **argv);
int bench_quant_error_main(int argc, char **argv);
int bench_policy_main(int argc, char **argv);
int bench_vision_main(int argc, char **argv);
int bench_gpu_main(int argc, char **argv);
int bench_agent_main(int argc, char **argv);
int bench_serve_main(int argc, char **argv);

/* Helpers the areas share (holo-bench.c). */
/* CPU seconds this process has used (all threads). */
double bench_cpu_seconds(void);
/* Prints "load average: 1m 5m 15m" (or "unknown"): the runs share their machine. */
void bench_print_load(void);
/* Prints one figure as a line that tools/gpu-check.sh's report collects (every key=value, names
 * and units without spaces):
 *   figure name=NAME value=V unit=UNIT [goal=OPX]
 * OP is ">=" or "<=" (goal_op NULL: no goal), X the goal in the same unit. */
void bench_figure(const char *name, double value, const char *unit, const char *goal_op, double goal);

/* engine.c: the default random model of holo-bench engine (a ~0.7B bf16 Nemotron-H), and
 * --random's key=value list over it (spec is cut up; sp->pattern may point into it). 0 or
 * -EINVAL. */
struct lm_random_spec;
void bench_engine_default_spec(struct lm_random_spec *ret);
int bench_engine_parse_spec(char *spec, struct lm_random_spec *sp);

/* engine_gemm.c: seconds the matrix products of an n_prompt-token prefill of m take alone, in
 * bf16 (oneDNN) or fp32, after a warm-up pass, on the matrices b's forward reads (its copies in
 * 2 MiB pages, backend_cpu_weights(); NULL b: m's own); their flops in *ret_flop. -errno on
 * failure, -EOPNOTSUPP for a holo-quantize checkpoint (its matrices are q8/q4 records). */
struct engine_model;
struct engine_backend;
double bench_gemm_only_seconds(const struct engine_model *m, const struct engine_backend *b, bool bf16,
			       int n_prompt, double *ret_flop);

/* gpu.c (builds with CUDA): bytes per second a device-to-device copy of `bytes` moves (read +
 * write, `rounds` copies after a warm-up), and flops per second of the bf16 product
 * y[rows][out] = W[out][in] x[rows][in] with fp32 output through gpu_gemm (cuBLASLt); its FP8
 * twin through gpu_gemm_fp8 (cuBLASLt's FP8 matmul: e4m3 W and x with device scales, fp32 sums
 * and output; a device of sm_89 or newer, in, out and rows multiples of 16). -errno. */
struct gpu_context;
int bench_gpu_copy_rate(struct gpu_context *g, size_t bytes, int rounds, double *ret);
int bench_gpu_gemm_rate(struct gpu_context *g, int out, int in, int rows, int rounds, double *ret);
int bench_gpu_gemm_fp8_rate(struct gpu_context *g, int out, int in, int rows, int rounds, double *ret);

/* agent_history.c: holo-bench agent --history (the tokens each history mode prefills per step,
 * with DIR's shapes and predicted for config's; dev may be NULL). Returns the exit code. */
struct roofline_device;
int bench_agent_history(const char *model_dir, const char *config, int sw, int sh, int max_tiles, size_t k,
			long long cap, long long step_tokens, size_t n_steps,
			const struct roofline_device *dev);
