/* Entry points of holo-bench's commands: argv[0] is the command name. Return an exit code. */
#pragma once

int bench_x11_main(int argc, char **argv);
int bench_engine_main(int argc, char **argv);
int bench_policy_main(int argc, char **argv);
int bench_vision_main(int argc, char **argv);
int bench_gpu_main(int argc, char **argv);

/* Helpers the areas share (holo-bench.c). */
/* CPU seconds this process has used (all threads). */
double bench_cpu_seconds(void);
/* Prints "load average: 1m 5m 15m" (or "unknown"): the runs share their machine. */
void bench_print_load(void);
