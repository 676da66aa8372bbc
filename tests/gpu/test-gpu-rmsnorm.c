/* gpu suite: the RMSNorm kernel against the CPU backend's own RMSNorm (cpu_rmsnorm_rows, the
 * one the CPU forward runs). Skips (77) without a GPU; on the emulation it runs in every thread
 * order. Tolerance: 1e-5 relative + 1e-6 absolute (a tree reduction on the device, a sequential
 * fp32 sum on the CPU). */
#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "test.h"

#include <stdlib.h>

TEST_DEFINE_GLOBALS;

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	struct gpu_context *g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	static const int shapes[][2] = {{1, 64}, {7, 5120}, {33, 1000}, {4, 1}};
	for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		float *x = xmalloc(sizeof(float) * rows * cols), *w = xmalloc(sizeof(float) * cols);
		float *got = xmalloc(sizeof(float) * rows * cols),
		      *want = xmalloc(sizeof(float) * rows * cols);
		srand(1234 + (unsigned)s);
		for (int i = 0; i < rows * cols; i++)
			x[i] = (float)rand() / RAND_MAX * 4.0f - 2.0f;
		for (int i = 0; i < cols; i++)
			w[i] = (float)rand() / RAND_MAX + 0.5f;
		CHECK_INT_EQ(gpu_rmsnorm_f32(g, x, w, got, rows, cols, 1e-5f), 0);
		cpu_rmsnorm_rows(x, want, w, rows, cols, 1e-5f);
		for (int i = 0; i < rows * cols; i++)
			CHECK_NEAR(got[i], want[i], 1e-6 + 1e-5 * fabs(want[i]));
		free(x), free(w), free(got), free(want);
	}
	CHECK_INT_EQ(gpu_rmsnorm_f32(g, NULL, NULL, NULL, 0, 4, 1e-5f), -EINVAL);
	/* no context: refused before anything reads it (gpu_bind) */
	float one = 1;
	CHECK_INT_EQ(gpu_rmsnorm_f32(NULL, &one, &one, &one, 1, 1, 1e-5f), -EINVAL);
	gpu_context_destroy(g);
	return test_exit();
}
