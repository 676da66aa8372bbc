/* The profile counters and graph capture of the cuda module (cuda/profile.c, cuda/graph.c), on a
 * device in `gpu` (77 without one) and on the emulation in `gpu-emu`, through the module's RMSNorm
 * launcher:
 *  - profiling off: begin/end do nothing and the report has no lines;
 *  - on: one line per call site with the number of launches (kernels) or calls (GEMM sites) in
 *    first-call order, in the `kernel NAME launches=N ms=T` / `gemm SITE calls=N ms=T` format;
 *    clearing zeroes them; a nested begin is refused;
 *  - a captured graph replays the launches on whatever its buffers hold at replay time, bit for
 *    bit what the same launches give when run eagerly. */
#include "common.h"
#include "gpu.h"
#include "gpu_internal.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TEST_DEFINE_GLOBALS;

enum { ROWS = 3, COLS = 70 };

static void fill(float *x, int n, unsigned seed)
{
	srand(seed);
	for (int i = 0; i < n; i++)
		x[i] = (float)rand() / RAND_MAX * 4.0f - 2.0f;
}

/* x -> y -> z: two launches, the second reading the first's output */
static int two_norms(struct gpu_context *g, const float *x, const float *w, float *y, float *z)
{
	int r = gpu_launch_rmsnorm_f32(g->stream, x, w, y, ROWS, COLS, 1e-5f);
	return r < 0 ? r : gpu_launch_rmsnorm_f32(g->stream, y, w, z, ROWS, COLS, 1e-5f);
}

static void test_profile(struct gpu_context *g, float *x, float *w, float *y)
{
	char **lines = NULL;
	CHECK(!gpu_profile_enabled(g));
	CHECK_INT_EQ(gpu_profile_begin(g, GPU_PROFILE_KERNEL, "rmsnorm"), 0);
	CHECK_INT_EQ(gpu_profile_end(g), 0);
	CHECK_INT_EQ(gpu_profile_report(g, &lines), 0);
	CHECK(lines == NULL);

	REQUIRE(gpu_profile_enable(g, true) == 0);
	CHECK(gpu_profile_enabled(g));
	CHECK_INT_EQ(gpu_profile_report(g, &lines), 0);
	REQUIRE(lines);
	CHECK(lines[0] == NULL);
	gpu_profile_lines_free(lines);

	for (int i = 0; i < 3; i++) {
		CHECK_INT_EQ(gpu_profile_begin(g, GPU_PROFILE_KERNEL, "rmsnorm"), 0);
		CHECK_INT_EQ(gpu_launch_rmsnorm_f32(g->stream, x, w, y, ROWS, COLS, 1e-5f), 0);
		CHECK_INT_EQ(gpu_profile_end(g), 0);
		if (i == 0) {
			CHECK_INT_EQ(gpu_profile_begin(g, GPU_PROFILE_GEMM, "lm_head"), 0);
			CHECK_INT_EQ(gpu_profile_begin(g, GPU_PROFILE_GEMM, "nested"), -EINVAL);
			CHECK_INT_EQ(gpu_launch_rmsnorm_f32(g->stream, x, w, y, ROWS, COLS, 1e-5f), 0);
			CHECK_INT_EQ(gpu_profile_end(g), 0);
		}
	}
	CHECK_INT_EQ(gpu_profile_end(g), -EINVAL);
	CHECK_INT_EQ(gpu_profile_report(g, &lines), 2);
	REQUIRE(lines);
	unsigned long long n = 0;
	double ms = -1;
	CHECK_INT_EQ(sscanf(lines[0], "kernel rmsnorm launches=%llu ms=%lf", &n, &ms), 2);
	CHECK_INT_EQ((int)n, 3);
	CHECK(ms >= 0);
	CHECK_INT_EQ(sscanf(lines[1], "gemm lm_head calls=%llu ms=%lf", &n, &ms), 2);
	CHECK_INT_EQ((int)n, 1);
	CHECK(lines[2] == NULL);
	gpu_profile_lines_free(lines);

	gpu_profile_clear(g);
	CHECK_INT_EQ(gpu_profile_report(g, &lines), 0);
	gpu_profile_lines_free(lines);
	CHECK_INT_EQ(gpu_profile_enable(g, false), 0);
	CHECK(!gpu_profile_enabled(g));
}

static void test_graph(struct gpu_context *g, float *x, float *w, float *y, float *z)
{
	size_t bytes = sizeof(float) * ROWS * COLS;
	float *hx = xmalloc(bytes), *eager = xmalloc(bytes), *replay = xmalloc(bytes);

	REQUIRE(gpu_graph_begin(g) == 0);
	CHECK_INT_EQ(two_norms(g, x, w, y, z), 0);
	struct gpu_graph *graph = NULL;
	REQUIRE(gpu_graph_end(g, &graph) == 0);
	REQUIRE(graph);

	/* each replay sees the input written just before it */
	for (unsigned round = 0; round < 3; round++) {
		fill(hx, ROWS * COLS, 100 + round);
		REQUIRE(gpu_copy_to_device(g, x, hx, bytes) == 0);
		REQUIRE(gpu_memset(g, z, 0xff, bytes) == 0);
		CHECK_INT_EQ(gpu_graph_launch(g, graph), 0);
		REQUIRE(gpu_copy_to_host(g, replay, z, bytes) == 0);
		REQUIRE(gpu_memset(g, z, 0xff, bytes) == 0);
		CHECK_INT_EQ(two_norms(g, x, w, y, z), 0);
		REQUIRE(gpu_copy_to_host(g, eager, z, bytes) == 0);
		CHECK(memcmp(replay, eager, bytes) == 0);
	}
	gpu_graph_destroy(graph);
	gpu_graph_destroy(NULL);

	/* an aborted capture leaves the stream usable */
	REQUIRE(gpu_graph_begin(g) == 0);
	CHECK_INT_EQ(two_norms(g, x, w, y, z), 0);
	CHECK_INT_EQ(gpu_graph_abort(g), 0);
	CHECK_INT_EQ(two_norms(g, x, w, y, z), 0);
	CHECK_INT_EQ(gpu_synchronize(g), 0);
	free(hx), free(eager), free(replay);
}

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	struct gpu_context *g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	size_t bytes = sizeof(float) * ROWS * COLS;
	float hw[COLS], hx[ROWS * COLS];
	fill(hw, COLS, 1);
	fill(hx, ROWS * COLS, 2);
	void *x, *w, *y, *z;
	REQUIRE(gpu_alloc(g, bytes, &x) == 0 && gpu_alloc(g, sizeof(hw), &w) == 0);
	REQUIRE(gpu_alloc(g, bytes, &y) == 0 && gpu_alloc(g, bytes, &z) == 0);
	REQUIRE(gpu_copy_to_device(g, x, hx, bytes) == 0 && gpu_copy_to_device(g, w, hw, sizeof(hw)) == 0);

	test_profile(g, x, w, y);
	test_graph(g, x, w, y, z);

	gpu_free(g, x), gpu_free(g, w), gpu_free(g, y), gpu_free(g, z);
	gpu_context_destroy(g);
	return test_exit();
}
