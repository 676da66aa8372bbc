/* holo-bench: benchmarks for holod's hot paths. Each area registers one entry point; results
 * are printed as ratios to a reference measured in the same run (see docs/benchmarks.md). */
#include "common.h"
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct command {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
#ifdef HOLO_BENCH_X11
	{"x11", bench_x11_main, "screen capture (SHM, XGetImage), PNG encoding, click round trip"},
#endif
#ifdef HOLO_BENCH_ENGINE
	{"engine", bench_engine_main, "prefill/decode tokens/s, peak RSS, memory bandwidth ceiling"},
	{"gemv", bench_gemv_main,
	 "decode GEMV on bf16, q8 and q4 weights (12B-like matrix) vs the read bandwidth"},
	{"quant-error", bench_quant_error_main,
	 "logits error of each weight format vs fp32, beside GGML's Q8_0 and Q4_0"},
#endif
#ifdef HOLO_BENCH_VISION
	{"vision", bench_vision_main, "vision encoder + projector ms/tile (RADIO-H), prompt tokens per step"},
#endif
#ifdef HOLO_BENCH_GPU
	{"gpu", bench_gpu_main,
	 "LM decode vs the copy-bandwidth roofline, prefill vs the bf16 GEMM rate, vision per tile (CUDA)"},
#endif
#ifdef HOLO_BENCH_AGENT
	{"agent", bench_agent_main,
	 "one agent step's roofline on a GPU from the real shapes (--device-spec rtx4090, h100...; "
	 "--weights: what fits)"},
#endif
#ifdef HOLO_BENCH_SERVE
	{"serve", bench_serve_main,
	 "aggregate decode tokens/s of 1..16 sessions batched, 12B roofline at 100"},
#endif
#ifdef HOLO_BENCH_POLICY
	{"policy", bench_policy_main, "constrained-decoding mask cost per token (131072-id vocabulary)"},
#endif
};

double bench_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void bench_print_load(void)
{
	double l[3];

	if (getloadavg(l, 3) == 3)
		printf("load average: %.2f %.2f %.2f\n", l[0], l[1], l[2]);
	else
		printf("load average: unknown\n");
}

void bench_figure(const char *name, double value, const char *unit, const char *goal_op, double goal)
{
	printf("figure name=%s value=%.6g unit=%s", name, value, unit);
	if (goal_op)
		printf(" goal=%s%.6g", goal_op, goal);
	printf("\n");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-bench COMMAND [OPTIONS]\n\ncommands:\n");
	for (const struct command *c = commands; c != commands + ARRAY_SIZE(commands); c++)
		fprintf(f, "  %-11s %s\n", c->name, c->help);
	fprintf(f, "\n'holo-bench COMMAND --help' lists a command's options.\n");
}

int main(int argc, char **argv)
{
	log_set_program_name("holo-bench");
	log_setup_from_env();
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (const struct command *c = commands; c != commands + ARRAY_SIZE(commands); c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->main(argc - 1, argv + 1);
	fprintf(stderr, "holo-bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
