/* gpu-emu suite: the emulated runtime: launch-limit refusals (threads, block and grid dims,
 * dynamic shared memory with and without the opt-in attribute, sm_90 and sm_80), NaN poisoning of
 * device memory and of static and dynamic shared memory, out-of-memory past the configured
 * device memory, streams and events. Runs in the order HOLOD_GPU_EMU_ORDER names. */
#include "klaunch.h"
#include "test.h"

#include <stdint.h>
#include <time.h>

TEST_DEFINE_GLOBALS;

static __global__ void touch_kernel(int *out)
{
	if (out && threadIdx.x == 0 && blockIdx.x == 0)
		*out += 1;
}

/* Uses all of its dynamic shared memory: writes every float, then sums them. */
static __global__ void dyn_smem_kernel(float *out, int n)
{
	GPU_DYNAMIC_SHARED(float, s);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s[i] = 1.0f;
	__syncthreads();
	if (threadIdx.x == 0) {
		float sum = 0;
		for (int i = 0; i < n; i++)
			sum += s[i];
		*out = sum;
	}
}

/* Where the block's dynamic shared memory starts, mod 64 (GPU_DYNAMIC_SHARED promises 32,
 * what WMMA needs, and the emulation gives exactly that: 32 mod 64). */
static __global__ void dyn_smem_align_kernel(unsigned *out)
{
	GPU_DYNAMIC_SHARED(unsigned char, s);
	if (threadIdx.x == 0)
		*out = (unsigned)((uintptr_t)s % 64);
}

/* Reads shared memory before writing it: every block must see NaN, although the previous block
 * wrote the same variables. */
static __global__ void smem_poison_kernel(float *out)
{
	__shared__ float st[64];
	GPU_DYNAMIC_SHARED(float, dyn);
	out[blockIdx.x * 2 * blockDim.x + threadIdx.x] = st[threadIdx.x];
	out[(blockIdx.x * 2 + 1) * blockDim.x + threadIdx.x] = dyn[threadIdx.x];
	__syncthreads();
	st[threadIdx.x] = 1.0f;
	dyn[threadIdx.x] = 2.0f;
}

/* Reads device memory nobody wrote. */
static __global__ void read_kernel(const float *in, float *out)
{
	out[threadIdx.x] = in[threadIdx.x] * 2.0f;
}

__constant__ float coeffs[4];
__constant__ int offset_c;
__device__ int counter_d;

static __global__ void __launch_bounds__(128) constant_kernel(float *out)
{
	out[threadIdx.x] = coeffs[threadIdx.x % 4] + (float)offset_c;
	if (threadIdx.x == 0)
		counter_d += 1;
}

static cudaError_t launch(dim3 grid, dim3 block, size_t smem)
{
	klaunch(touch_kernel, grid, block, smem, 0, (int *)NULL);
	return cudaGetLastError();
}

static void test_launch_limits(void)
{
	CHECK_INT_EQ(launch(dim3(1), dim3(1024), 0), cudaSuccess);
	CHECK_INT_EQ(launch(dim3(1), dim3(1025), 0), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess); /* read once, then cleared */
	CHECK_INT_EQ(launch(dim3(1), dim3(32, 32, 2), 0), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(launch(dim3(1), dim3(1, 1, 65), 0), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(launch(dim3(1), dim3(1, 1, 64), 0), cudaSuccess);
	CHECK_INT_EQ(launch(dim3(1), dim3(0), 0), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(launch(dim3(0), dim3(1), 0), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(launch(dim3(1, 65536), dim3(1), 0), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(launch(dim3(1, 1, 65536), dim3(1), 0), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(launch(dim3(2, 3, 4), dim3(1), 0), cudaSuccess);
	/* A refused launch does not run: the kernel would have incremented the counter. */
	int *d, h = 0;
	REQUIRE(cudaMalloc((void **)&d, sizeof(int)) == cudaSuccess);
	cudaMemset(d, 0, sizeof(int));
	klaunch(touch_kernel, dim3(1), dim3(2000), 0, 0, d);
	CHECK_INT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
	klaunch(touch_kernel, dim3(1), dim3(32), 0, 0, d);
	cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
	CHECK_INT_EQ(h, 1);
	cudaFree(d);
}

static float run_dyn(size_t bytes)
{
	float *d, h = -1;
	REQUIRE(cudaMalloc((void **)&d, sizeof(float)) == cudaSuccess);
	klaunch(dyn_smem_kernel, dim3(1), dim3(128), bytes, 0, d, (int)(bytes / sizeof(float)));
	cudaError_t e = cudaGetLastError();
	cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost);
	cudaFree(d);
	return e == cudaSuccess ? h : -(float)e;
}

static void test_dynamic_smem_limits(void)
{
	const size_t K = 1024;
	CHECK_NEAR(run_dyn(48 * K), 12 * K, 0);
	CHECK_NEAR(run_dyn(48 * K + 4), -(float)cudaErrorInvalidValue, 0);
	/* sm_90: opt in to 227 KiB, and not a byte more. */
	CHECK_INT_EQ(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					  227 * K + 4),
		     cudaErrorInvalidValue);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
	CHECK_INT_EQ(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					  227 * K),
		     cudaSuccess);
	CHECK_NEAR(run_dyn(227 * K), 227 * K / 4, 0);
	CHECK_NEAR(run_dyn(227 * K + 4), -(float)cudaErrorInvalidValue, 0);
	/* The attribute belongs to that kernel only. */
	CHECK_INT_EQ(launch(dim3(1), dim3(1), 48 * K + 4), cudaErrorInvalidValue);
	/* sm_80: 163 KiB at most. */
	CHECK_INT_EQ(gpu_emu_set_arch(8), 0);
	struct cudaDeviceProp p;
	CHECK_INT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
	CHECK_INT_EQ(p.major, 8);
	CHECK_INT_EQ(p.sharedMemPerBlockOptin, 163 * K);
	CHECK_INT_EQ(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					  164 * K),
		     cudaErrorInvalidValue);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
	CHECK_INT_EQ(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					  163 * K),
		     cudaSuccess);
	CHECK_NEAR(run_dyn(163 * K), 163 * K / 4, 0);
	CHECK_INT_EQ(gpu_emu_set_arch(9), 0);
	CHECK_INT_EQ(gpu_emu_set_arch(7), -EINVAL);
	cudaGetLastError();
}

/* Every size of dynamic shared memory starts 32-byte aligned and no more (32 mod 64), whatever
 * the host heap holds (a plain malloc'd buffer was 16 mod 32 for some sizes, and WMMA kernels
 * then aborted; one aligned by chance to more would hide a kernel assuming more). */
static void test_dynamic_smem_alignment(void)
{
	unsigned *d, h;
	REQUIRE(cudaMalloc((void **)&d, sizeof(unsigned)) == cudaSuccess);
	void *noise[64];
	for (int i = 0; i < 64; i++) {
		/* odd-sized host allocations between the launches move where the heap's next block is */
		noise[i] = malloc((size_t)(i * 24 + 8));
		REQUIRE(noise[i]);
		size_t bytes = (size_t)(16 + i * 48);
		klaunch(dyn_smem_align_kernel, dim3(2), dim3(32), bytes, 0, d);
		CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
		h = 999;
		CHECK_INT_EQ(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
		if (h != 32)
			fprintf(stderr, "dynamic shared memory of %zu bytes at %u mod 64\n", bytes, h);
		CHECK_INT_EQ(h, 32);
	}
	for (int i = 0; i < 64; i++)
		free(noise[i]);
	cudaFree(d);
}

static void test_device_properties(void)
{
	struct cudaDeviceProp p;
	CHECK_INT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
	CHECK_INT_EQ(p.major, 9);
	CHECK_INT_EQ(p.minor, 0);
	CHECK_INT_EQ(p.multiProcessorCount, 132);
	CHECK_INT_EQ(p.warpSize, 32);
	CHECK_INT_EQ(p.maxThreadsPerBlock, 1024);
	CHECK_INT_EQ(p.sharedMemPerBlock, 48 * 1024);
	CHECK_INT_EQ(p.sharedMemPerBlockOptin, 227 * 1024);
	CHECK(strstr(p.name, "emulation") != NULL);
	CHECK_INT_EQ(cudaGetDeviceProperties(&p, 1), cudaErrorInvalidDevice);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
	CHECK_INT_EQ(cudaSetDevice(0), cudaSuccess);
	int dev = -1;
	CHECK_INT_EQ(cudaGetDevice(&dev), cudaSuccess);
	CHECK_INT_EQ(dev, 0);
	CHECK_STR_EQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
	CHECK_STR_EQ(cudaGetErrorString(cudaErrorInvalidConfiguration), "invalid configuration argument");
}

static void test_smem_poison(void)
{
	int blocks = 3, n = 64;
	float *d, h[3 * 2 * 64];
	REQUIRE(cudaMalloc((void **)&d, sizeof(h)) == cudaSuccess);
	klaunch(smem_poison_kernel, dim3(blocks), dim3(n), n * sizeof(float), 0, d);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int i = 0; i < blocks * 2 * n; i++)
		CHECK(isnan(h[i]));
	cudaFree(d);
}

static void test_device_poison(void)
{
	float *in, *out, h[32];
	REQUIRE(cudaMalloc((void **)&in, sizeof(h)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&out, sizeof(h)) == cudaSuccess);
	CHECK_INT_EQ((uintptr_t)in % 256, 0); /* CUDA's alignment guarantee */
	CHECK_INT_EQ((uintptr_t)out % 256, 0);
	unsigned char raw[sizeof(h)];
	cudaMemcpy(raw, in, sizeof(raw), cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < sizeof(raw); i++)
		CHECK_INT_EQ(raw[i], 0xff);
	klaunch(read_kernel, dim3(1), dim3(32), 0, 0, (const float *)in, out);
	cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 32; i++)
		CHECK(isnan(h[i]));
	/* bf16 read before write is NaN too */
	__nv_bfloat16 b;
	cudaMemcpy(&b, in, sizeof(b), cudaMemcpyDeviceToHost);
	CHECK(isnan(__bfloat162float(b)));
	cudaFree(in);
	cudaFree(out);
}

static void test_out_of_memory(void)
{
	const size_t M = 1 << 20;
	gpu_emu_set_memory_limit(64 * M);
	size_t free_b = 0, total = 0;
	CHECK_INT_EQ(cudaMemGetInfo(&free_b, &total), cudaSuccess);
	CHECK_INT_EQ(total, 64 * M);
	CHECK_INT_EQ(free_b, 64 * M);
	void *a = NULL, *b = NULL;
	CHECK_INT_EQ(cudaMalloc(&a, 48 * M), cudaSuccess);
	CHECK_INT_EQ(cudaMemGetInfo(&free_b, &total), cudaSuccess);
	CHECK_INT_EQ(free_b, 16 * M);
	CHECK_INT_EQ(cudaMalloc(&b, 32 * M), cudaErrorMemoryAllocation);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
	CHECK_INT_EQ(cudaMallocAsync(&b, 16 * M + 1, 0), cudaErrorMemoryAllocation);
	CHECK_INT_EQ(cudaMallocAsync(&b, 16 * M, 0), cudaSuccess);
	CHECK_INT_EQ(cudaFreeAsync(b, 0), cudaSuccess);
	CHECK_INT_EQ(cudaFree(a), cudaSuccess);
	CHECK_INT_EQ(cudaFree(a), cudaErrorInvalidDevicePointer); /* twice */
	CHECK_INT_EQ(cudaMemGetInfo(&free_b, &total), cudaSuccess);
	CHECK_INT_EQ(free_b, 64 * M);
	cudaGetLastError();
	gpu_emu_set_memory_limit((size_t)80 << 30);
}

static void test_streams_events(void)
{
	cudaStream_t s;
	cudaEvent_t start, stop, untimed;
	CHECK_INT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	CHECK_INT_EQ(cudaEventCreate(&start), cudaSuccess);
	CHECK_INT_EQ(cudaEventCreate(&stop), cudaSuccess);
	CHECK_INT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
	float ms = -1;
	CHECK_INT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady); /* not recorded */
	int *d, h = 0;
	REQUIRE(cudaMalloc((void **)&d, sizeof(int)) == cudaSuccess);
	CHECK_INT_EQ(cudaMemsetAsync(d, 0, sizeof(int), s), cudaSuccess);
	struct timespec a, b, outer_a, outer_b;
	clock_gettime(CLOCK_MONOTONIC, &outer_a);
	CHECK_INT_EQ(cudaEventRecord(start, s), cudaSuccess);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < 5; i++)
		klaunch(touch_kernel, dim3(4), dim3(256), 0, s, d);
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK_INT_EQ(cudaEventRecord(stop, s), cudaSuccess);
	clock_gettime(CLOCK_MONOTONIC, &outer_b);
	CHECK_INT_EQ(cudaEventRecord(untimed, s), cudaSuccess);
	CHECK_INT_EQ(cudaStreamWaitEvent(s, stop, 0), cudaSuccess);
	CHECK_INT_EQ(cudaMemcpyAsync(&h, d, sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
	CHECK_INT_EQ(cudaStreamSynchronize(s), cudaSuccess);
	CHECK_INT_EQ(cudaStreamQuery(s), cudaSuccess);
	CHECK_INT_EQ(cudaEventSynchronize(stop), cudaSuccess);
	CHECK_INT_EQ(h, 5);
	CHECK_INT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
	double host_ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	double outer_ms = (double)(outer_b.tv_sec - outer_a.tv_sec) * 1e3 +
			  (double)(outer_b.tv_nsec - outer_a.tv_nsec) / 1e6;
	/* The event times are host times taken when recorded: between the inner clock readings
	 * (around the work) and the outer ones (around the records), whatever the scheduler does. */
	CHECK(ms >= 0 && ms >= host_ms - 0.01 && ms <= outer_ms + 0.01);
	CHECK_INT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
	CHECK_INT_EQ(cudaDeviceSynchronize(), cudaSuccess);
	cudaGetLastError();
	cudaFree(d);
	cudaEventDestroy(start);
	cudaEventDestroy(stop);
	cudaEventDestroy(untimed);
	CHECK_INT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

/* __constant__ / __device__ variables through the symbol API, as host code writes it for nvcc. */
static void test_symbols(void)
{
	const float c[4] = {1, 2, 3, 4};
	const int off = 10, zero = 0;
	CHECK_INT_EQ(cudaMemcpyToSymbol(coeffs, c, sizeof(c)), cudaSuccess);
	CHECK_INT_EQ(cudaMemcpyToSymbol(offset_c, &off, sizeof(off)), cudaSuccess);
	CHECK_INT_EQ(cudaMemcpyToSymbolAsync(counter_d, &zero, sizeof(zero), 0, cudaMemcpyHostToDevice, 0),
		     cudaSuccess);
	float *d, h[8];
	REQUIRE(cudaMalloc((void **)&d, sizeof(h)) == cudaSuccess);
	klaunch(constant_kernel, dim3(3), dim3(8), 0, 0, d);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 8; i++)
		CHECK_NEAR(h[i], c[i % 4] + 10, 0);
	int count = -1;
	CHECK_INT_EQ(cudaMemcpyFromSymbol(&count, counter_d, sizeof(count)), cudaSuccess);
	CHECK_INT_EQ(count, 3);
	void *addr = NULL;
	CHECK_INT_EQ(cudaGetSymbolAddress(&addr, coeffs), cudaSuccess);
	float third = 0;
	CHECK_INT_EQ(cudaMemcpy(&third, (float *)addr + 2, sizeof(third), cudaMemcpyDeviceToHost),
		     cudaSuccess);
	CHECK_NEAR(third, 3, 0);
	cudaFree(d);
}

static void test_copies(void)
{
	int *d, h[64], back[64];
	for (int i = 0; i < 64; i++)
		h[i] = i * i;
	REQUIRE(cudaMalloc((void **)&d, sizeof(h)) == cudaSuccess);
	CHECK_INT_EQ(cudaMemcpy(d, h, sizeof(h), cudaMemcpyDefault), cudaSuccess);
	CHECK_INT_EQ(cudaMemcpy(d + 32, d, 32 * sizeof(int), cudaMemcpyDeviceToDevice), cudaSuccess);
	CHECK_INT_EQ(cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost), cudaSuccess);
	for (int i = 0; i < 64; i++)
		CHECK_INT_EQ(back[i], (i % 32) * (i % 32));
	/* 2D: a 4x3 window out of an 8-wide host matrix into a 5-wide device one */
	CHECK_INT_EQ(cudaMemcpy2D(d, 5 * sizeof(int), h, 8 * sizeof(int), 4 * sizeof(int), 3,
				  cudaMemcpyHostToDevice),
		     cudaSuccess);
	CHECK_INT_EQ(cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost), cudaSuccess);
	for (int r = 0; r < 3; r++)
		for (int c = 0; c < 4; c++)
			CHECK_INT_EQ(back[r * 5 + c], h[r * 8 + c]);
	CHECK_INT_EQ(cudaMemcpy(d, h, sizeof(h), (enum cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
	CHECK_INT_EQ(cudaMemcpy(NULL, h, sizeof(h), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
	cudaGetLastError();
	void *pinned = NULL;
	CHECK_INT_EQ(cudaMallocHost(&pinned, 100), cudaSuccess);
	CHECK_INT_EQ(cudaFreeHost(pinned), cudaSuccess);
	CHECK_INT_EQ(cudaHostAlloc(&pinned, 100, cudaHostAllocDefault), cudaSuccess);
	CHECK_INT_EQ(cudaFreeHost(pinned), cudaSuccess);
	cudaFree(d);
}

int main(void)
{
	test_device_properties();
	test_launch_limits();
	test_dynamic_smem_limits();
	test_dynamic_smem_alignment();
	test_smem_poison();
	test_device_poison();
	test_out_of_memory();
	test_streams_events();
	test_copies();
	test_symbols();
	return test_exit();
}
