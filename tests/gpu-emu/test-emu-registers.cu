/* gpu-emu suite: the launch check against the register file. A block needs its warps times the
 * kernel's budgeted registers per thread (rounded up to a multiple of 8, allocated per warp of 32)
 * and an SM has 65536: past that the launch fails with cudaErrorLaunchOutOfResources, reported
 * by cudaGetLastError(), and the grid does not run. The budgets of these kernels are in
 * tests/gpu-emu/resource-budget.txt (HOLOD_GPU_EMU_BUDGET), found by the kernel's demangled name
 * as tools/check-gpu-resources.sh finds a cubin's kernels in cuda/resource-budget.txt, with the
 * line's architecture matched against the emulated one. Runs in the order HOLOD_GPU_EMU_ORDER
 * names. */
#include "klaunch.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

/* Each counts the threads that ran. */
static __global__ void regs72_kernel(int *count)
{
	atomicAdd(count, 1);
}

static __global__ void regs65_kernel(int *count)
{
	atomicAdd(count, 1);
}

/* 64 registers on sm_80, 72 on the others. */
static __global__ void arch_kernel(int *count)
{
	atomicAdd(count, 1);
}

/* Budgeted as named_kernel<int,3>: the demangled name without parameters and spaces. */
template <typename T, int N> static __global__ void named_kernel(int *count)
{
	atomicAdd(count, (int)sizeof(T) * N / 12);
}

static int *counter;

/* Launches `kernel` with one block of `block` threads; returns cudaGetLastError() and sets *ran to
 * the number of threads that ran. The kernel reaches klaunch through a variable: the emulation
 * finds its name by its address. */
static cudaError_t launch(void (*kernel)(int *), dim3 block, int *ran)
{
	REQUIRE(cudaMemset(counter, 0, sizeof(int)) == cudaSuccess);
	klaunch(kernel, dim3(1), block, 0, 0, counter);
	cudaError_t e = cudaGetLastError();
	*ran = -1;
	REQUIRE(cudaMemcpy(ran, counter, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
	return e;
}

static void expect(void (*kernel)(int *), dim3 block, bool fits, const char *what)
{
	int ran;
	cudaError_t e = launch(kernel, block, &ran);
	int threads = (int)(block.x * block.y * block.z);
	if (e != (fits ? cudaSuccess : cudaErrorLaunchOutOfResources) || ran != (fits ? threads : 0)) {
		fprintf(stderr, "%s at %u x %u x %u threads: %s, %d threads ran; expected %s\n", what,
			block.x, block.y, block.z, cudaGetErrorName(e), ran,
			fits ? "all to run" : "cudaErrorLaunchOutOfResources, none ran");
		test_failures++;
	}
}

int main(void)
{
	REQUIRE(cudaMalloc((void **)&counter, sizeof(int)) == cudaSuccess);
	/* 72 registers: 2304 per warp, 28 warps fit in 65536 (64512), 29 do not (66816). */
	expect(regs72_kernel, dim3(896), true, "72 registers");
	expect(regs72_kernel, dim3(928), false, "72 registers");
	/* warps are allocated whole: 897 threads are 29 warps, though 897 x 72 = 64584 would fit */
	expect(regs72_kernel, dim3(897), false, "72 registers");
	/* every dimension counts */
	expect(regs72_kernel, dim3(32, 28), true, "72 registers");
	expect(regs72_kernel, dim3(32, 2, 15), false, "72 registers");
	/* 65 registers are allocated as 72: 928 threads x 65 = 60320 would fit */
	expect(regs65_kernel, dim3(896), true, "65 registers");
	expect(regs65_kernel, dim3(928), false, "65 registers");
	/* the error is read once, then cleared; the next launch that fits runs */
	int ran;
	REQUIRE(cudaMemset(counter, 0, sizeof(int)) == cudaSuccess);
	klaunch(regs72_kernel, dim3(2), dim3(1024), 0, 0, counter);
	CHECK_INT_EQ(cudaPeekAtLastError(), cudaErrorLaunchOutOfResources);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorLaunchOutOfResources);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	CHECK_STR_EQ(cudaGetErrorString(cudaErrorLaunchOutOfResources),
		     "too many resources requested for launch");
	CHECK_INT_EQ(launch(regs72_kernel, dim3(64), &ran), cudaSuccess);
	CHECK_INT_EQ(ran, 64);
	/* the budget line's architecture: 72 registers on sm_90, 64 on sm_80 (1024 x 64 = 65536 fits) */
	expect(arch_kernel, dim3(1024), false, "arch_kernel on sm_90");
	CHECK_INT_EQ(gpu_emu_set_arch(8), 0);
	expect(arch_kernel, dim3(1024), true, "arch_kernel on sm_80");
	expect(regs72_kernel, dim3(1024), false, "72 registers on sm_80");
	CHECK_INT_EQ(gpu_emu_set_arch(9), 0);
	expect(arch_kernel, dim3(1024), false, "arch_kernel on sm_90 again");
	/* 255 registers (256 allocated): 8 warps fit, 9 do not */
	expect(named_kernel<int, 3>, dim3(256), true, "named_kernel<int,3>");
	expect(named_kernel<int, 3>, dim3(257), false, "named_kernel<int,3>");
	cudaFree(counter);
	return test_exit();
}
