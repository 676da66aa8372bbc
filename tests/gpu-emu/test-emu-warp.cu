/* gpu-emu suite: warp collectives over the lanes of their mask only (warp size 32), with widths,
 * partial masks, a partial last warp, and the reduction tail where only warp 0 shuffles (which
 * HIP-CPU gets wrong, gpu-testing.md). Runs in the order HOLOD_GPU_EMU_ORDER names. */
#include "klaunch.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

enum { SHFL, SHFL_W8, UP, UP_W8, DOWN, DOWN_W8, XOR, XOR_W16, NCASES };

/* out[case * n + t] for every thread t of one block. */
static __global__ void shuffle_kernel(int *out)
{
	int n = blockDim.x, t = threadIdx.x, lane = t % 32, v = 1000 + t;
	out[SHFL * n + t] = __shfl_sync(0xffffffffu, v, 5);
	out[SHFL_W8 * n + t] = __shfl_sync(0xffffffffu, v, 3, 8);
	out[UP * n + t] = __shfl_up_sync(0xffffffffu, v, 3);
	out[UP_W8 * n + t] = __shfl_up_sync(0xffffffffu, v, 2, 8);
	out[DOWN * n + t] = __shfl_down_sync(0xffffffffu, v, 4);
	out[DOWN_W8 * n + t] = __shfl_down_sync(0xffffffffu, v, 1, 8);
	out[XOR * n + t] = __shfl_xor_sync(0xffffffffu, v, 7);
	out[XOR_W16 * n + t] = __shfl_xor_sync(0xffffffffu, v, 16, 16);
	(void)lane;
}

static int want_shuffle(int c, int t)
{
	int lane = t % 32, base = t - lane, v = 1000 + t;
	switch (c) {
	case SHFL:
		return 1000 + base + 5;
	case SHFL_W8:
		return 1000 + base + (lane & ~7) + 3;
	case UP:
		return lane >= 3 ? v - 3 : v;
	case UP_W8:
		return lane % 8 >= 2 ? v - 2 : v;
	case DOWN:
		return lane + 4 < 32 ? v + 4 : v;
	case DOWN_W8:
		return lane % 8 + 1 < 8 ? v + 1 : v;
	case XOR:
		return 1000 + base + (lane ^ 7);
	/* lane ^ 16 leaves the 16-lane segment: a later segment gives the caller's own value, an
	 * earlier one may be read (CUDA programming guide, __shfl_xor_sync) */
	case XOR_W16:
		return lane < 16 ? v : v - 16;
	}
	return -1;
}

/* Only the lower half of each warp takes part: the mask names lanes 0..15, the others skip. */
static __global__ void partial_mask_kernel(int *out)
{
	int lane = threadIdx.x % 32;
	int v = lane + 1;
	if (lane < 16) {
		for (int o = 8; o > 0; o >>= 1)
			v += __shfl_xor_sync(0x0000ffffu, v, o);
		unsigned b = __ballot_sync(0x0000ffffu, lane % 3 == 0);
		int any = __any_sync(0x0000ffffu, lane == 9);
		int all = __all_sync(0x0000ffffu, lane < 16);
		int none = __any_sync(0x0000ffffu, lane > 20);
		__syncwarp(0x0000ffffu);
		out[threadIdx.x] = v * 1000000 + (int)(b & 0xffff) * 10 + any * 4 + all * 2 + none;
	} else {
		/* The lanes that took this branch together. */
		out[threadIdx.x] = -(int)(__activemask() >> 16);
	}
}

/* Lanes 0..19 exit first; the rest see them gone in __activemask and vote among themselves. */
static __global__ void exited_lanes_kernel(unsigned *out)
{
	int lane = threadIdx.x % 32;
	if (lane < 20)
		return;
	unsigned active = __activemask();
	unsigned b = __ballot_sync(0xfff00000u, 1);
	out[threadIdx.x] = active == b ? active : 0;
}

/* The reduction tail: every warp reduces, lane 0 of each writes shared memory, then only warp 0
 * shuffles the partial sums (with the full mask) while the other warps skip it. */
static __global__ void block_reduce_kernel(const float *x, float *out)
{
	__shared__ float partial[32];
	float v = x[blockIdx.x * blockDim.x + threadIdx.x];
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0)
		partial[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			v += __shfl_down_sync(0xffffffffu, v, o);
		if (lane == 0)
			out[blockIdx.x] = v;
	}
}

/* A block of 48 threads: warp 1 has 16 lanes, and a mask naming exactly them works. */
static __global__ void partial_warp_kernel(double *out)
{
	double v = threadIdx.x * 0.5;
	unsigned mask = threadIdx.x < 32 ? 0xffffffffu : 0x0000ffffu;
	for (int o = threadIdx.x < 32 ? 16 : 8; o > 0; o >>= 1)
		v += __shfl_xor_sync(mask, v, o);
	out[threadIdx.x] = v;
}

/* 16-bit types move through shuffles intact. */
static __global__ void bf16_kernel(__nv_bfloat16 *out)
{
	__nv_bfloat16 v = __float2bfloat16((float)threadIdx.x);
	out[threadIdx.x] = __shfl_sync(0xffffffffu, v, 31 - threadIdx.x);
}

template <typename T> static T *dev_alloc(size_t n)
{
	T *p = NULL;
	REQUIRE(cudaMalloc((void **)&p, n * sizeof(T)) == cudaSuccess);
	return p;
}

static void test_shuffles(void)
{
	int n = 64;
	int *d = dev_alloc<int>((size_t)NCASES * n), h[NCASES * 64];
	klaunch(shuffle_kernel, dim3(1), dim3(n), 0, 0, d);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int c = 0; c < NCASES; c++)
		for (int t = 0; t < n; t++)
			if (h[c * n + t] != want_shuffle(c, t)) {
				fprintf(stderr, "case %d thread %d: got %d, want %d\n", c, t, h[c * n + t],
					want_shuffle(c, t));
				test_failures++;
			}
	cudaFree(d);
}

static void test_partial_mask(void)
{
	int *d = dev_alloc<int>(64), h[64];
	klaunch(partial_mask_kernel, dim3(1), dim3(64), 0, 0, d);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	unsigned ballot = 0;
	for (int l = 0; l < 16; l++)
		if (l % 3 == 0)
			ballot |= 1u << l;
	for (int t = 0; t < 64; t++) {
		int lane = t % 32;
		if (lane < 16)
			CHECK_INT_EQ(h[t], 136 * 1000000 + (int)ballot * 10 + 4 + 2 + 0);
		else
			CHECK_INT_EQ(h[t], -0xffff);
	}
	cudaFree(d);
}

static void test_exited_lanes(void)
{
	unsigned *d = dev_alloc<unsigned>(32), h[32];
	klaunch(exited_lanes_kernel, dim3(1), dim3(32), 0, 0, d);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int t = 20; t < 32; t++)
		CHECK_INT_EQ(h[t], 0xfff00000u);
	cudaFree(d);
}

static void test_block_reduce(void)
{
	static const int sizes[] = {32, 96, 256, 1024};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int n = sizes[s], blocks = 3;
		float *h = (float *)malloc(sizeof(float) * n * blocks), out[3];
		for (int i = 0; i < n * blocks; i++)
			h[i] = (float)(i % 7) - 2.0f;
		float *dx = dev_alloc<float>((size_t)n * blocks), *dout = dev_alloc<float>(blocks);
		cudaMemcpy(dx, h, sizeof(float) * n * blocks, cudaMemcpyHostToDevice);
		klaunch(block_reduce_kernel, dim3(blocks), dim3(n), 0, 0, dx, dout);
		CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
		cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost);
		for (int b = 0; b < blocks; b++) {
			double want = 0;
			for (int i = 0; i < n; i++)
				want += h[b * n + i];
			CHECK_NEAR(out[b], want, 0); /* small integers: exact in any order */
		}
		free(h);
		cudaFree(dx);
		cudaFree(dout);
	}
}

static void test_partial_warp(void)
{
	double *d = dev_alloc<double>(48), h[48];
	klaunch(partial_warp_kernel, dim3(1), dim3(48), 0, 0, d);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int t = 0; t < 32; t++)
		CHECK_NEAR(h[t], 0.5 * (31 * 32 / 2), 0);
	for (int t = 32; t < 48; t++)
		CHECK_NEAR(h[t], 0.5 * (32 * 16 + 15 * 16 / 2), 0);
	cudaFree(d);
}

static void test_bf16(void)
{
	__nv_bfloat16 *d = dev_alloc<__nv_bfloat16>(32), h[32];
	klaunch(bf16_kernel, dim3(1), dim3(32), 0, 0, d);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int t = 0; t < 32; t++)
		CHECK_NEAR(__bfloat162float(h[t]), 31 - t, 0);
	cudaFree(d);
}

int main(void)
{
	test_shuffles();
	test_partial_mask();
	test_exited_lanes();
	test_block_reduce();
	test_partial_warp();
	test_bf16();
	return test_exit();
}
