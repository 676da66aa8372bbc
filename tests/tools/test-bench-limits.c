/* holo-bench's measurements of the machine's limits (tools/bench/machine.c) count what they
 * claim: a bandwidth pass reads every word of its buffer exactly once (the sum of a known
 * buffer), a peak kernel executes the instructions its flop count assumes (every accumulator
 * ends at iterations x its gain per instruction, exact in fp32), and the measurements return
 * sane numbers with 1 and 2 threads. Units this CPU lacks are reported as skipped. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "cpu.h"
#include "machine.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static void test_bandwidth(void)
{
	/* not a multiple of the pass's task size: rounded down, and the sum says what was read */
	struct bench_bw *bw = bench_bw_create(((size_t)3 << 20) + 1000);
	REQUIRE(bw);
	size_t bytes = bench_bw_bytes(bw);
	CHECK(bytes <= ((size_t)3 << 20) + 1000 && bytes > ((size_t)3 << 20) - 65536);
	uint64_t n = bytes / 8;
	for (int pass = 0; pass < 2; pass++) {
		double rate = bench_bw_pass(bw);
		CHECK(rate > 0);
		CHECK(bench_bw_last_sum(bw) == n * (n + 1) / 2);
	}
	bench_bw_destroy(bw);
	CHECK(bench_bw_create(100) == NULL);
}

static void test_peak_kernels(void)
{
	static const struct {
		const char *unit;
		double flops_per_iter; /* instructions per iteration x flops per instruction */
	} units[] = {
		{"amx", 4 * 16.0 * 16 * 32 * 2},
		{"avx512bf16", 12 * 32.0 * 2},
		{"fma", 12 * 8.0 * 2},
	};
	int ran = 0;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		for (long iters = 1; iters <= 20001; iters += 20000) {
			float acc = -1;
			double flops = -1;
			int r = bench_peak_kernel(units[i].unit, iters, &acc, &flops);
			if (r == -ENOTSUP) {
				if (iters == 1)
					printf("peak unit %s: skipped (not available here)\n", units[i].unit);
				continue;
			}
			CHECK_INT_EQ(r, 0);
			CHECK(acc == bench_peak_gain(units[i].unit) * (float)iters);
			CHECK(flops == units[i].flops_per_iter * (double)iters);
			if (iters == 1) {
				printf("peak unit %s: tested\n", units[i].unit);
				ran++;
			}
		}
	}
	struct bench_peak pk;
	int r = bench_bf16_peak(NULL, 0.01, &pk);
	if (ran) {
		CHECK_INT_EQ(r, 0);
		CHECK(pk.flops_per_s > 1e8);
	} else {
		CHECK_INT_EQ(r, -ENOTSUP);
	}
	CHECK_INT_EQ(bench_bf16_peak("no-such-unit", 0.01, &pk), -ENOTSUP);
}

static void test_pool_wake(void)
{
	double hot = -1, cold = -1;
	bench_pool_wake(5, &hot, &cold);
	CHECK(hot >= 0 && hot < 1.0);
	CHECK(cold >= 0 && cold < 1.0);
}

int main(void)
{
	for (int threads = 1; threads <= 2; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		test_bandwidth();
		test_peak_kernels();
		test_pool_wake();
	}
	return test_exit();
}
