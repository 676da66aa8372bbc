/* gpu-emu suite: the emulation aborts a broken kernel with a message that names the source lines
 * involved: a divergent barrier, deadlocks (a lane named in a mask that exits; a barrier against
 * a warp collective; lanes that disagree on the mask), a mask that does not name its caller, lanes
 * of one mask in collectives of different kinds, a thread overflowing its fiber stack,
 * a kernel argument pointing into another device's memory (HOLOD_GPU_EMU_DEVICES=2), and (when
 * built with ASan) an
 * out-of-bounds read reported at the kernel's source file. Each case runs in a child process (this
 * program re-executed with the case's name); the parent checks that it died and what it said.
 * Lanes of a warp that meet in different wmma calls (an mma_sync against a load) abort too, and
 * so does the launch of a kernel without a register budget line (run without the suite's budget).
 * The lines are found by the markers in this file's comments. */
#include "klaunch.h"
#include "test.h"
#include "test-spawn.h"

#include <mma.h>

#include <string>

TEST_DEFINE_GLOBALS;

static __global__ void divergent_kernel(void)
{
	if (threadIdx.x < 40)
		__syncthreads(); /* MARK_DIVERGENT_A */
	else
		__syncthreads(); /* MARK_DIVERGENT_B */
}

static __global__ void exited_lane_kernel(float *out)
{
	float v = threadIdx.x;
	if (threadIdx.x % 32 < 16)
		return;
	v += __shfl_xor_sync(0xffffffffu, v, 1); /* MARK_EXITED_SHFL */
	out[threadIdx.x] = v;
}

static __global__ void barrier_vs_warp_kernel(float *out)
{
	float v = threadIdx.x;
	if (threadIdx.x == 0)
		__syncthreads(); /* MARK_BVW_BAR */
	else
		v = __shfl_down_sync(0xffffffffu, v, 1); /* MARK_BVW_SHFL */
	out[threadIdx.x] = v;
}

/* Lane 31 names only lanes 0 and 31; the others name the whole warp: no mask is complete. */
static __global__ void mask_disagree_kernel(int *out)
{
	unsigned mask = threadIdx.x == 31 ? 0x80000001u : 0xffffffffu;
	out[threadIdx.x] = __ballot_sync(mask, 1); /* MARK_DISAGREE */
}

/* The upper half of the warp votes while the lower half shuffles, with the same mask. */
static __global__ void mixed_kinds_kernel(int *out)
{
	int v = threadIdx.x;
	if (threadIdx.x % 32 < 16)
		v = __shfl_xor_sync(0xffffffffu, v, 1); /* MARK_MIXED_SHFL */
	else
		v = __ballot_sync(0xffffffffu, v & 1); /* MARK_MIXED_BALLOT */
	out[threadIdx.x] = v;
}

static __global__ void foreign_mask_kernel(int *out)
{
	out[threadIdx.x] = __ballot_sync(0x0000ffffu, 1); /* MARK_FOREIGN */
}

static __global__ void oob_kernel(const float *in, float *out, int n)
{
	out[threadIdx.x] = in[threadIdx.x + n]; /* MARK_OOB */
}

/* 256 KiB of locals against a 64 KiB fiber stack (HOLOD_GPU_EMU_STACK, set by the parent). */
static __global__ void stack_kernel(float *out, int n)
{
	volatile char buf[256 << 10];
	for (int i = 0; i < n; i++)
		buf[i] = (char)i;
	out[threadIdx.x] = buf[n / 2];
}

/* Half the warp loads a fragment while the other half multiplies: one WMMA collective, two calls. */
static __global__ void wmma_mismatch_kernel(const __nv_bfloat16 *a, float *out)
{
	using namespace nvcuda;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::fill_fragment(fa, __float2bfloat16(0.0f));
	wmma::fill_fragment(fb, __float2bfloat16(0.0f));
	wmma::fill_fragment(acc, 0.0f);
	if (threadIdx.x < 16)
		wmma::load_matrix_sync(fa, a, 16); /* MARK_WMMA_LOAD */
	else
		wmma::mma_sync(acc, fa, fb, acc); /* MARK_WMMA_MMA */
	out[threadIdx.x] = acc.x[0];
}

/* No budget line names it (the parent runs this case without tests/gpu-emu/resource-budget.txt,
 * whose last line gives every test kernel one). */
static __global__ void unbudgeted_kernel(float *out)
{
	out[threadIdx.x] = 1.0f;
}

static int child(const char *name)
{
	float *f;
	int *i;
	REQUIRE(cudaMalloc((void **)&f, 64 * sizeof(float)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&i, 64 * sizeof(int)) == cudaSuccess);
	std::string n = name;
	if (n == "divergent")
		klaunch(divergent_kernel, dim3(2), dim3(64), 0, 0);
	else if (n == "exited")
		klaunch(exited_lane_kernel, dim3(1), dim3(64), 0, 0, f);
	else if (n == "barrier-vs-warp")
		klaunch(barrier_vs_warp_kernel, dim3(1), dim3(32), 0, 0, f);
	else if (n == "mask-disagree")
		klaunch(mask_disagree_kernel, dim3(1), dim3(32), 0, 0, i);
	else if (n == "mixed-kinds")
		klaunch(mixed_kinds_kernel, dim3(1), dim3(64), 0, 0, i);
	else if (n == "foreign-mask")
		klaunch(foreign_mask_kernel, dim3(1), dim3(32), 0, 0, i);
	else if (n == "stack")
		klaunch(stack_kernel, dim3(1), dim3(4), 0, 0, f, 256 << 10);
	else if (n == "foreign-device") {
		/* f lives on device 0; the kernel runs on device 1 (the parent set two devices) */
		REQUIRE(cudaSetDevice(1) == cudaSuccess);
		klaunch(foreign_mask_kernel, dim3(1), dim3(32), 0, 0, i); /* MARK_FOREIGN_DEVICE */
	} else if (n == "oob")
		klaunch(oob_kernel, dim3(1), dim3(64), 0, 0, (const float *)f, f, 1);
	else if (n == "wmma-mismatch")
		klaunch(wmma_mismatch_kernel, dim3(1), dim3(32), 0, 0, (const __nv_bfloat16 *)f, f);
	else if (n == "unbudgeted")
		klaunch(unbudgeted_kernel, dim3(1), dim3(32), 0, 0, f);
	fprintf(stderr, "child %s: the kernel ran to its end\n", name);
	return 0;
}

/* "file:line" of the marker in this source file. */
static std::string site(const char *marker)
{
	FILE *fp = fopen(__FILE__, "r");
	REQUIRE(fp);
	char buf[512];
	int line = 0, found = 0;
	while (fgets(buf, sizeof(buf), fp)) {
		line++;
		if (strstr(buf, marker) && !strstr(buf, "site(\"")) {
			found = line;
			break;
		}
	}
	fclose(fp);
	REQUIRE(found);
	return std::string(__FILE__) + ":" + std::to_string(found);
}

/* Runs the case in a child; returns what it printed and checks that it died of SIGABRT. */
static std::string run_child(const char *name)
{
	std::string out;
	int status = test_spawn_self(name, NULL, &out);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
		fprintf(stderr, "case %s: the child did not abort (status 0x%x); it said:\n%s\n", name,
			status, out.c_str());
		test_failures++;
	}
	return out;
}

static void expect(const std::string &out, const std::string &what, const char *name)
{
	if (out.find(what) == std::string::npos) {
		fprintf(stderr, "case %s: expected \"%s\" in:\n%s\n", name, what.c_str(), out.c_str());
		test_failures++;
	}
}

int main(int argc, char **argv)
{
	if (argc == 2)
		return child(argv[1]);
	/* ASan reports by exiting unless told to abort (meson's test environment tells it). */
	setenv("ASAN_OPTIONS", "abort_on_error=1", 0);
	std::string out = run_child("divergent");
	expect(out, "divergent __syncthreads", "divergent");
	expect(out, site("MARK_DIVERGENT_A"), "divergent");
	expect(out, site("MARK_DIVERGENT_B"), "divergent");
	expect(out, "divergent_kernel", "divergent");

	out = run_child("exited");
	expect(out, "deadlock", "exited");
	expect(out, site("MARK_EXITED_SHFL"), "exited");
	expect(out, "__shfl_xor_sync", "exited");
	expect(out, "have exited", "exited");

	out = run_child("barrier-vs-warp");
	expect(out, "deadlock", "barrier-vs-warp");
	expect(out, site("MARK_BVW_BAR"), "barrier-vs-warp");
	expect(out, site("MARK_BVW_SHFL"), "barrier-vs-warp");

	out = run_child("mask-disagree");
	expect(out, "deadlock", "mask-disagree");
	expect(out,
	       "31 lane(s) of warp 0 wait in __ballot_sync at " + site("MARK_DISAGREE") +
		       " with mask 0xffffffff",
	       "mask-disagree");
	expect(out,
	       "1 lane(s) of warp 0 wait in __ballot_sync at " + site("MARK_DISAGREE") +
		       " with mask 0x80000001",
	       "mask-disagree");

	out = run_child("mixed-kinds");
	expect(out, "mismatched warp collectives", "mixed-kinds");
	expect(out, "__shfl_xor_sync at " + site("MARK_MIXED_SHFL"), "mixed-kinds");
	expect(out, "__ballot_sync at " + site("MARK_MIXED_BALLOT"), "mixed-kinds");
	expect(out, "mixed_kinds_kernel", "mixed-kinds");

	out = run_child("foreign-mask");
	expect(out, site("MARK_FOREIGN"), "foreign-mask");
	expect(out, "does not name it", "foreign-mask");

	setenv("HOLOD_GPU_EMU_STACK", "64K", 1);
	out = run_child("stack");
	unsetenv("HOLOD_GPU_EMU_STACK");
#if defined(__SANITIZE_ADDRESS__)
	expect(out, "stack-overflow", "stack"); /* ASan's report, at the kernel's frame */
	expect(out, "in stack_kernel " __FILE__, "stack");
#else
	expect(out, "overflowed its 64 KiB fiber stack", "stack");
	expect(out, "stack_kernel", "stack");
#endif

	setenv("HOLOD_GPU_EMU_DEVICES", "2", 1);
	out = run_child("foreign-device");
	unsetenv("HOLOD_GPU_EMU_DEVICES");
	expect(out, site("MARK_FOREIGN_DEVICE"), "foreign-device");
	expect(out, "argument 0 points into device 0's memory, the kernel runs on device 1", "foreign-device");

	out = run_child("wmma-mismatch");
	expect(out, "mismatched wmma calls", "wmma-mismatch");
	expect(out, "lane 0 is in a load or store at " + site("MARK_WMMA_LOAD"), "wmma-mismatch");
	expect(out, "is in mma_sync at " + site("MARK_WMMA_MMA"), "wmma-mismatch");

	/* the launch check needs every kernel's register budget, as the nvcc build does */
	std::string budget = getenv("HOLOD_GPU_EMU_BUDGET") ? getenv("HOLOD_GPU_EMU_BUDGET") : "";
	unsetenv("HOLOD_GPU_EMU_BUDGET");
	out = run_child("unbudgeted");
	if (!budget.empty())
		setenv("HOLOD_GPU_EMU_BUDGET", budget.c_str(), 1);
	expect(out, "kernel 'unbudgeted_kernel' (sm_90) has no line in cuda/resource-budget.txt",
	       "unbudgeted");

#if defined(__SANITIZE_ADDRESS__)
	out = run_child("oob");
	expect(out, "heap-buffer-overflow", "oob");
	expect(out, site("MARK_OOB"), "oob");
#else
	fprintf(stderr, "not built with AddressSanitizer: the out-of-bounds case is not run\n");
#endif
	return test_exit();
}
