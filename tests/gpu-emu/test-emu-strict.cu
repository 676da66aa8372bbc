/* gpu-emu suite: what the emulated runtime refuses of host code, as the real runtime does:
 *  - two devices (HOLOD_GPU_EMU_DEVICES=2, set here) with a current device per host thread:
 *    memory on the device current at cudaMalloc, a stream's kernels refused from another current
 *    device, events recorded only on their device's streams, graphs launched on theirs;
 *  - strict capture: potentially unsafe calls (cudaMalloc, cudaFree, synchronous copies, device
 *    syncs) during a ThreadLocal capture on its thread, or a Global one on any thread, fail and
 *    invalidate it; Relaxed allows them; a captured copy from pageable host memory fails;
 *  - lazy module loading: a kernel first used inside a capture fails it (a driver before CUDA
 *    12.3), unless it ran before or cudaFuncGetAttributes loaded it.
 * Runs in the order HOLOD_GPU_EMU_ORDER names. */
#include "klaunch.h"
#include "test.h"

#include <pthread.h>
#include <stdlib.h>

TEST_DEFINE_GLOBALS;

static __global__ void add_kernel(int *out, int v)
{
	if (threadIdx.x == 0 && blockIdx.x == 0)
		*out += v;
}

static __global__ void never_run_kernel(int *out)
{
	if (threadIdx.x == 0)
		*out = 7;
}

static __global__ void preloaded_kernel(int *out)
{
	if (threadIdx.x == 0)
		*out = 9;
}

static int read_int(const int *d)
{
	int v = -1;
	REQUIRE(cudaMemcpy(&v, d, sizeof(v), cudaMemcpyDeviceToHost) == cudaSuccess);
	return v;
}

static void *thread_device(void *arg)
{
	int *ret = (int *)arg;
	REQUIRE(cudaGetDevice(ret) == cudaSuccess);
	return NULL;
}

static void check_devices(void)
{
	int n = 0, d = -1;
	CHECK_INT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
	CHECK_INT_EQ(n, 2);
	CHECK_INT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
	(void)cudaGetLastError();
	CHECK_INT_EQ(cudaSetDevice(1), cudaSuccess);
	CHECK_INT_EQ(cudaGetDevice(&d), cudaSuccess);
	CHECK_INT_EQ(d, 1);
	/* the current device is per host thread: a new thread starts on device 0 */
	pthread_t t;
	int other = -1;
	REQUIRE(pthread_create(&t, NULL, thread_device, &other) == 0);
	REQUIRE(pthread_join(t, NULL) == 0);
	CHECK_INT_EQ(other, 0);

	/* each device has its own memory */
	size_t free0, free1, total;
	int *p1;
	CHECK_INT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
	REQUIRE(cudaMalloc((void **)&p1, 1 << 20) == cudaSuccess);
	size_t free1b;
	CHECK_INT_EQ(cudaMemGetInfo(&free1b, &total), cudaSuccess);
	CHECK(free1b + (1 << 20) == free1);
	REQUIRE(cudaSetDevice(0) == cudaSuccess);
	CHECK_INT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
	CHECK(free0 == total);

	/* a stream of device 1 takes kernels only while device 1 is current */
	cudaStream_t s1;
	cudaEvent_t e1;
	REQUIRE(cudaSetDevice(1) == cudaSuccess);
	REQUIRE(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
	REQUIRE(cudaEventCreate(&e1) == cudaSuccess);
	REQUIRE(cudaMemset(p1, 0, sizeof(int)) == cudaSuccess);
	REQUIRE(cudaSetDevice(0) == cudaSuccess);
	(void)cudaGetLastError();
	klaunch(add_kernel, dim3(1), dim3(32), 0, s1, p1, 5);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
	CHECK_INT_EQ(read_int(p1), 0); /* the grid did not run */
	/* copies may cross devices (unified addressing) */
	int five = 5;
	CHECK_INT_EQ(cudaMemcpyAsync(p1, &five, sizeof(int), cudaMemcpyHostToDevice, s1), cudaSuccess);
	CHECK_INT_EQ(read_int(p1), 5);
	/* an event of device 1 is recorded only on device 1's streams */
	CHECK_INT_EQ(cudaEventRecord(e1, 0), cudaErrorInvalidResourceHandle); /* device 0's default */
	(void)cudaGetLastError();
	REQUIRE(cudaSetDevice(1) == cudaSuccess);
	CHECK_INT_EQ(cudaEventRecord(e1, s1), cudaSuccess);
	klaunch(add_kernel, dim3(1), dim3(32), 0, s1, p1, 1);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	CHECK_INT_EQ(read_int(p1), 6);

	/* a graph instantiated on device 1 launches only there */
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	REQUIRE(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
	klaunch(add_kernel, dim3(1), dim3(32), 0, s1, p1, 10);
	REQUIRE(cudaStreamEndCapture(s1, &graph) == cudaSuccess);
	REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
	REQUIRE(cudaSetDevice(0) == cudaSuccess);
	CHECK_INT_EQ(cudaGraphLaunch(exec, s1), cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();
	REQUIRE(cudaSetDevice(1) == cudaSuccess);
	CHECK_INT_EQ(cudaGraphLaunch(exec, s1), cudaSuccess);
	CHECK_INT_EQ(read_int(p1), 16);
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	cudaEventDestroy(e1);
	cudaStreamDestroy(s1);
	CHECK_INT_EQ(cudaFree(p1), cudaSuccess);
	REQUIRE(cudaSetDevice(0) == cudaSuccess);
}

struct other_thread {
	cudaError_t malloc_result;
};

static void *malloc_on_other_thread(void *arg)
{
	struct other_thread *o = (struct other_thread *)arg;
	void *p = NULL;
	o->malloc_result = cudaMalloc(&p, 256);
	if (p)
		cudaFree(p);
	return NULL;
}

/* Begins a capture on s in `mode`, runs `unsafe` (0: cudaMalloc, 1: cudaFree, 2: cudaMemcpy,
 * 3: cudaDeviceSynchronize, 4: cudaMemset, 5: cudaMallocHost) and returns what it returned and
 * what cudaStreamEndCapture returned. */
static void capture_with(cudaStream_t s, enum cudaStreamCaptureMode mode, int unsafe, int *dev,
			 cudaError_t *ret_call, cudaError_t *ret_end)
{
	void *p = NULL;
	int host = 0;
	if (unsafe == 1)
		REQUIRE(cudaMalloc(&p, 64) == cudaSuccess);
	REQUIRE(cudaStreamBeginCapture(s, mode) == cudaSuccess);
	klaunch(add_kernel, dim3(1), dim3(32), 0, s, dev, 1);
	switch (unsafe) {
	case 0:
		*ret_call = cudaMalloc(&p, 64);
		break;
	case 1:
		*ret_call = cudaFree(p);
		break;
	case 2:
		*ret_call = cudaMemcpy(&host, dev, sizeof(int), cudaMemcpyDeviceToHost);
		break;
	case 3:
		*ret_call = cudaDeviceSynchronize();
		break;
	case 4:
		*ret_call = cudaMemset(dev, 0, sizeof(int));
		break;
	default:
		*ret_call = cudaMallocHost(&p, 64);
		break;
	}
	cudaGraph_t g = NULL;
	*ret_end = cudaStreamEndCapture(s, &g);
	if (g)
		cudaGraphDestroy(g);
	(void)cudaGetLastError();
	/* what a refused call did not do, do now */
	if (unsafe == 5 && *ret_call == cudaSuccess)
		cudaFreeHost(p);
	else if (unsafe == 1 && *ret_call != cudaSuccess)
		cudaFree(p);
	else if (unsafe == 0 && *ret_call == cudaSuccess)
		cudaFree(p);
}

static void check_strict_capture(void)
{
	cudaStream_t s;
	int *dev;
	REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dev, sizeof(int)) == cudaSuccess);
	klaunch(add_kernel, dim3(1), dim3(32), 0, s, dev, 1); /* loaded */
	for (int unsafe = 0; unsafe < 6; unsafe++) {
		cudaError_t call, end;
		capture_with(s, cudaStreamCaptureModeThreadLocal, unsafe, dev, &call, &end);
		if (call != cudaErrorStreamCaptureUnsupported || end != cudaErrorStreamCaptureInvalidated)
			fprintf(stderr, "unsafe call %d in a ThreadLocal capture: %d, end %d\n", unsafe, call,
				end);
		CHECK_INT_EQ(call, cudaErrorStreamCaptureUnsupported);
		CHECK_INT_EQ(end, cudaErrorStreamCaptureInvalidated);
		capture_with(s, cudaStreamCaptureModeGlobal, unsafe, dev, &call, &end);
		CHECK_INT_EQ(call, cudaErrorStreamCaptureUnsupported);
		CHECK_INT_EQ(end, cudaErrorStreamCaptureInvalidated);
		capture_with(s, cudaStreamCaptureModeRelaxed, unsafe, dev, &call, &end);
		CHECK_INT_EQ(call, cudaSuccess);
		CHECK_INT_EQ(end, cudaSuccess);
	}

	/* another thread's cudaMalloc breaks a Global capture, not a ThreadLocal one */
	for (int global = 0; global < 2; global++) {
		REQUIRE(cudaStreamBeginCapture(s, global ? cudaStreamCaptureModeGlobal :
							   cudaStreamCaptureModeThreadLocal) == cudaSuccess);
		struct other_thread o = {cudaSuccess};
		pthread_t t;
		REQUIRE(pthread_create(&t, NULL, malloc_on_other_thread, &o) == 0);
		REQUIRE(pthread_join(t, NULL) == 0);
		cudaGraph_t g = NULL;
		cudaError_t end = cudaStreamEndCapture(s, &g);
		if (g)
			cudaGraphDestroy(g);
		(void)cudaGetLastError();
		CHECK_INT_EQ(o.malloc_result, global ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
		CHECK_INT_EQ(end, global ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
	}

	/* captured copies: pinned host memory only */
	int pageable = 3, *pinned;
	REQUIRE(cudaMallocHost((void **)&pinned, sizeof(int)) == cudaSuccess);
	*pinned = 4;
	for (int pin = 0; pin < 2; pin++) {
		REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
		cudaError_t call = cudaMemcpyAsync(dev, pin ? pinned : &pageable, sizeof(int),
						   cudaMemcpyHostToDevice, s);
		cudaGraph_t g = NULL;
		cudaError_t end = cudaStreamEndCapture(s, &g);
		CHECK_INT_EQ(call, pin ? cudaSuccess : cudaErrorStreamCaptureUnsupported);
		CHECK_INT_EQ(end, pin ? cudaSuccess : cudaErrorStreamCaptureInvalidated);
		if (g) {
			cudaGraphExec_t x;
			REQUIRE(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
			REQUIRE(cudaGraphLaunch(x, s) == cudaSuccess);
			CHECK_INT_EQ(read_int(dev), 4);
			cudaGraphExecDestroy(x);
			cudaGraphDestroy(g);
		}
		(void)cudaGetLastError();
	}
	CHECK_INT_EQ(cudaFreeHost(pinned), cudaSuccess);
	CHECK_INT_EQ(cudaFree(dev), cudaSuccess);
	cudaStreamDestroy(s);
}

static void check_lazy_loading(void)
{
	cudaStream_t s;
	int *dev;
	REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dev, sizeof(int)) == cudaSuccess);
	/* never launched: its first use inside a capture fails it */
	REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
	klaunch(never_run_kernel, dim3(1), dim3(32), 0, s, dev);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
	cudaGraph_t g = NULL;
	CHECK_INT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
	(void)cudaGetLastError();
	/* cudaFuncGetAttributes loads it */
	struct cudaFuncAttributes a;
	CHECK_INT_EQ(cudaFuncGetAttributes(&a, preloaded_kernel), cudaSuccess);
	REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
	klaunch(preloaded_kernel, dim3(1), dim3(32), 0, s, dev);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	CHECK_INT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
	cudaGraphExec_t x;
	REQUIRE(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
	REQUIRE(cudaGraphLaunch(x, s) == cudaSuccess);
	CHECK_INT_EQ(read_int(dev), 9);
	cudaGraphExecDestroy(x);
	cudaGraphDestroy(g);
	/* loading is per device: device 1 has not loaded it */
	REQUIRE(cudaSetDevice(1) == cudaSuccess);
	cudaStream_t s1;
	int *dev1;
	REQUIRE(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dev1, sizeof(int)) == cudaSuccess);
	REQUIRE(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
	klaunch(preloaded_kernel, dim3(1), dim3(32), 0, s1, dev1);
	CHECK_INT_EQ(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
	CHECK_INT_EQ(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
	(void)cudaGetLastError();
	cudaFree(dev1);
	cudaStreamDestroy(s1);
	REQUIRE(cudaSetDevice(0) == cudaSuccess);
	cudaFree(dev);
	cudaStreamDestroy(s);
}

int main(void)
{
	setenv("HOLOD_GPU_EMU_DEVICES", "2", 1);
	setenv("HOLOD_GPU_EMU_CAPTURE_LOAD", "fail", 1);
	check_devices();
	check_strict_capture();
	check_lazy_loading();
	return test_exit();
}
