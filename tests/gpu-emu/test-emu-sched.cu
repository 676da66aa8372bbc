/* gpu-emu suite: the fiber scheduler: built-in variables, __syncthreads and its variants, the
 * thread order exposing a missing barrier, and the cost of resuming a thread (printed).
 * Runs in the order HOLOD_GPU_EMU_ORDER names (meson registers it once per order). */
#include "klaunch.h"
#include "test.h"

#include <time.h>

TEST_DEFINE_GLOBALS;

/* Every thread writes where it is: catches a wrong threadIdx/blockIdx after a switch. */
static __global__ void whoami_kernel(uint4 *out)
{
	unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
	unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
	unsigned nt = blockDim.x * blockDim.y * blockDim.z;
	__syncthreads(); /* the variables must survive a switch */
	out[b * nt + t] = make_uint4(threadIdx.x | threadIdx.y << 10 | threadIdx.z << 20,
				     blockIdx.x | blockIdx.y << 10 | blockIdx.z << 20, nt,
				     gridDim.x * gridDim.y * gridDim.z);
}

/* Tree reduction in shared memory: wrong without every barrier. */
static __global__ void block_sum_kernel(const float *x, float *out, int n)
{
	__shared__ float s[256];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	s[threadIdx.x] = i < n ? x[i] : 0.0f;
	__syncthreads();
	for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
		if (threadIdx.x < stride)
			s[threadIdx.x] += s[threadIdx.x + stride];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = s[0];
}

/* Each thread reads its neighbour's value: needs the barrier between write and read. */
template <bool with_barrier> static __global__ void rotate_kernel(const int *in, int *out)
{
	__shared__ int s[128];
	s[threadIdx.x] = in[threadIdx.x] * 2;
	if (with_barrier)
		__syncthreads();
	out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

static __global__ void vote_kernel(int *out)
{
	int even = threadIdx.x % 2 == 0;
	int c = __syncthreads_count(even);
	int a = __syncthreads_and(threadIdx.x < 1000);
	int o = __syncthreads_or(threadIdx.x == 5);
	int none = __syncthreads_or(0);
	out[threadIdx.x] = c * 1000 + a * 100 + o * 10 + none;
}

/* Threads that return early no longer count towards the barrier. */
static __global__ void early_exit_kernel(int *out, int live)
{
	__shared__ int s[64];
	if ((int)threadIdx.x >= live)
		return;
	s[threadIdx.x] = (int)threadIdx.x;
	__syncthreads();
	out[threadIdx.x] = s[live - 1 - threadIdx.x];
}

static __global__ void barrier_loop_kernel(int iters)
{
	for (int i = 0; i < iters; i++)
		__syncthreads();
}

template <typename T> static T *dev_alloc(size_t n)
{
	T *p = NULL;
	REQUIRE(cudaMalloc((void **)&p, n * sizeof(T)) == cudaSuccess);
	return p;
}

static void test_whoami(void)
{
	dim3 grid(3, 2, 2), block(8, 4, 2);
	size_t n = 12 * 64;
	uint4 *d = dev_alloc<uint4>(n);
	klaunch(whoami_kernel, grid, block, 0, 0, d);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	uint4 *h = (uint4 *)malloc(n * sizeof(uint4));
	CHECK_INT_EQ(cudaMemcpy(h, d, n * sizeof(uint4), cudaMemcpyDeviceToHost), cudaSuccess);
	for (unsigned b = 0; b < 12; b++)
		for (unsigned t = 0; t < 64; t++) {
			uint4 v = h[b * 64 + t];
			unsigned tx = t % 8, ty = t / 8 % 4, tz = t / 32, bx = b % 3, by = b / 3 % 2,
				 bz = b / 6;
			CHECK_INT_EQ(v.x, tx | ty << 10 | tz << 20);
			CHECK_INT_EQ(v.y, bx | by << 10 | bz << 20);
			CHECK_INT_EQ(v.z, 64);
			CHECK_INT_EQ(v.w, 12);
		}
	free(h);
	cudaFree(d);
}

static void test_block_sum(void)
{
	int n = 1000, blocks = 4;
	float *h = (float *)malloc(n * sizeof(float)), out[4];
	for (int i = 0; i < n; i++)
		h[i] = (float)(i % 17);
	float *dx = dev_alloc<float>(n), *dout = dev_alloc<float>(blocks);
	cudaMemcpy(dx, h, n * sizeof(float), cudaMemcpyHostToDevice);
	klaunch(block_sum_kernel, dim3(blocks), dim3(256), 0, 0, dx, dout, n);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost);
	for (int b = 0; b < blocks; b++) {
		double want = 0;
		for (int i = b * 256; i < (b + 1) * 256 && i < n; i++)
			want += h[i];
		CHECK_NEAR(out[b], want, 0);
	}
	free(h);
	cudaFree(dx);
	cudaFree(dout);
}

/* Returns the number of wrong outputs. */
static int run_rotate(bool with_barrier)
{
	int h[128], out[128];
	for (int i = 0; i < 128; i++)
		h[i] = i;
	int *din = dev_alloc<int>(128), *dout = dev_alloc<int>(128);
	cudaMemcpy(din, h, sizeof(h), cudaMemcpyHostToDevice);
	if (with_barrier)
		klaunch(rotate_kernel<true>, dim3(1), dim3(128), 0, 0, din, dout);
	else
		klaunch(rotate_kernel<false>, dim3(1), dim3(128), 0, 0, din, dout);
	cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost);
	cudaFree(din);
	cudaFree(dout);
	int wrong = 0;
	for (int i = 0; i < 128; i++)
		wrong += out[i] != 2 * ((i + 1) % 128);
	return wrong;
}

/* The correct kernel passes in every order; the one missing its barrier fails in at least one. */
static void test_missing_barrier(void)
{
	enum gpu_emu_order saved = gpu_emu_get_order();
	static const enum gpu_emu_order orders[] = {GPU_EMU_ORDER_FORWARD, GPU_EMU_ORDER_REVERSE,
						    GPU_EMU_ORDER_RANDOM};
	int caught = 0;
	for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
		gpu_emu_set_order(orders[i], 42);
		CHECK_INT_EQ(run_rotate(true), 0);
		int wrong = run_rotate(false);
		fprintf(stderr, "order %zu: the kernel without its barrier got %d of 128 outputs wrong\n", i,
			wrong);
		caught += wrong > 0;
	}
	CHECK(caught >= 1);
	gpu_emu_set_order(saved, 7);
}

static void test_votes(void)
{
	int *d = dev_alloc<int>(96), h[96];
	klaunch(vote_kernel, dim3(1), dim3(96), 0, 0, d);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 96; i++)
		CHECK_INT_EQ(h[i], 48 * 1000 + 100 + 10 + 0);
	cudaFree(d);
}

static void test_early_exit(void)
{
	int *d = dev_alloc<int>(64), h[64];
	klaunch(early_exit_kernel, dim3(1), dim3(64), 0, 0, d, 40);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 40; i++)
		CHECK_INT_EQ(h[i], 39 - i);
	cudaFree(d);
}

static void measure_switch(void)
{
	int iters = 50, threads = 1024;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	klaunch(barrier_loop_kernel, dim3(1), dim3(threads), 0, 0, iters);
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	/* Each thread is resumed once per barrier (and once to start): one switch, from the thread
	 * before it in the pass, plus the barrier's bookkeeping. */
	fprintf(stderr, "resumption: %.1f ns (%d threads x %d barriers)\n",
		ns / ((double)threads * (iters + 1)), threads, iters);
}

int main(void)
{
	int n = 0;
	CHECK_INT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
	CHECK_INT_EQ(n, 1);
	test_whoami();
	test_block_sum();
	test_missing_barrier();
	test_votes();
	test_early_exit();
	measure_switch();
	return test_exit();
}
