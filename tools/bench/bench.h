/* Entry points of holo-bench's commands: argv[0] is the command name. Return an exit code. */
#pragma once

#include <stdbool.h>

int bench_x11_main(int argc, char **argv);
int bench_engine_main(int argc, char **argv);
int bench_policy_main(int argc, char **argv);
int bench_vision_main(int argc, char **argv);
int bench_gpu_main(int argc, char **argv);
int bench_agent_main(int argc, char **argv);

/* Helpers the areas share (holo-bench.c). */
/* CPU seconds this process has used (all threads). */
double bench_cpu_seconds(void);
/* Prints "load average: 1m 5m 15m" (or "unknown"): the runs share their machine. */
void bench_print_load(void);

/* engine_gemm.c: seconds the matrix products of an n_prompt-token prefill of m take alone, in
 * bf16 (oneDNN) or fp32, after a warm-up pass; their flops in *ret_flop. -errno on failure. */
struct engine_model;
double bench_gemm_only_seconds(const struct engine_model *m, bool bf16, int n_prompt,
			       double *ret_flop);
