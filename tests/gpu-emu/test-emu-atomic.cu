/* gpu-emu suite: atomics return the old value and keep their semantics across every thread of
 * several blocks. Runs in the order HOLOD_GPU_EMU_ORDER names. */
#include "klaunch.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

struct counters {
	int i_add;
	unsigned u_add;
	float f_add;
	double d_add;
	int i_max, i_min;
	unsigned u_max;
	int cas_sum;
	unsigned bits_or, bits_and;
	int exch;
	float f_max; /* through an atomicCAS loop, as kernels write it */
};

static __device__ float atomic_max_float(float *p, float v)
{
	int *ip = (int *)p;
	int old = *ip, assumed;
	do {
		assumed = old;
		if (__int_as_float(assumed) >= v)
			break;
		old = atomicCAS(ip, assumed, __float_as_int(v));
	} while (old != assumed);
	return __int_as_float(old);
}

/* Each thread takes a ticket: the old values of atomicAdd are a permutation of 0..n-1. */
static __global__ void atomic_kernel(struct counters *c, int *tickets, int *seen)
{
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	int ticket = atomicAdd(&c->i_add, 1);
	tickets[t] = ticket;
	atomicAdd(&seen[ticket], 1);
	atomicAdd(&c->u_add, 2);
	atomicAdd(&c->f_add, 0.5f);
	atomicAdd(&c->d_add, 0.25);
	atomicMax(&c->i_max, t * 3 - 100);
	atomicMin(&c->i_min, 50 - t);
	atomicMax(&c->u_max, (unsigned)t);
	atomicOr(&c->bits_or, 1u << (t % 32));
	atomicAnd(&c->bits_and, ~(1u << (t % 16)));
	atomicExch(&c->exch, t);
	atomic_max_float(&c->f_max, (float)(t % 97) * 0.5f);
	/* increment through compare-and-swap */
	int old = c->cas_sum, assumed;
	do {
		assumed = old;
		old = atomicCAS(&c->cas_sum, assumed, assumed + t);
	} while (old != assumed);
}

int main(void)
{
	int blocks = 5, threads = 200, n = blocks * threads;
	struct counters h = {}, *dc;
	h.i_max = -1000;
	h.i_min = 1000;
	h.bits_and = 0xffffffffu;
	h.exch = -1;
	h.f_max = -1.0f;
	int *dt, *dseen;
	REQUIRE(cudaMalloc((void **)&dc, sizeof(h)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dt, sizeof(int) * n) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dseen, sizeof(int) * n) == cudaSuccess);
	cudaMemcpy(dc, &h, sizeof(h), cudaMemcpyHostToDevice);
	cudaMemset(dseen, 0, sizeof(int) * n);
	klaunch(atomic_kernel, dim3(blocks), dim3(threads), 0, 0, dc, dt, dseen);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	int *tickets = (int *)malloc(sizeof(int) * n), *seen = (int *)malloc(sizeof(int) * n);
	cudaMemcpy(&h, dc, sizeof(h), cudaMemcpyDeviceToHost);
	cudaMemcpy(tickets, dt, sizeof(int) * n, cudaMemcpyDeviceToHost);
	cudaMemcpy(seen, dseen, sizeof(int) * n, cudaMemcpyDeviceToHost);
	for (int i = 0; i < n; i++) {
		CHECK_INT_EQ(seen[i], 1);
		CHECK(tickets[i] >= 0 && tickets[i] < n);
	}
	CHECK_INT_EQ(h.i_add, n);
	CHECK_INT_EQ(h.u_add, 2 * n);
	CHECK_NEAR(h.f_add, 0.5 * n, 0);
	CHECK_NEAR(h.d_add, 0.25 * n, 0);
	CHECK_INT_EQ(h.i_max, (n - 1) * 3 - 100);
	CHECK_INT_EQ(h.i_min, 50 - (n - 1));
	CHECK_INT_EQ(h.u_max, n - 1);
	CHECK_INT_EQ(h.bits_or, 0xffffffffu);
	CHECK_INT_EQ(h.bits_and, 0xffff0000u);
	CHECK(h.exch >= 0 && h.exch < n);
	CHECK_NEAR(h.f_max, 48.0, 0);
	CHECK_INT_EQ(h.cas_sum, n * (n - 1) / 2);
	free(tickets);
	free(seen);
	cudaFree(dc);
	cudaFree(dt);
	cudaFree(dseen);
	return test_exit();
}
