/* gpu-emu suite: stream capture records launches (arguments by value), copies, memsets and event
 * records; replaying the instantiated graph equals running the same work eagerly. Runs in the
 * order HOLOD_GPU_EMU_ORDER names. */
#include "klaunch.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

enum { N = 300 };

static __global__ void axpb_kernel(float *x, float a, float b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * a + b;
}

/* The sequence: x = 0; x = x * 2 + b; y = x; y = y * 3 + 1; x = x * 2 + b. */
static void enqueue(cudaStream_t s, float *x, float *y, float b, cudaEvent_t e)
{
	cudaMemsetAsync(x, 0, N * sizeof(float), s);
	klaunch(axpb_kernel, dim3((N + 127) / 128), dim3(128), 0, s, x, 2.0f, b, (int)N);
	cudaMemcpyAsync(y, x, N * sizeof(float), cudaMemcpyDeviceToDevice, s);
	klaunch(axpb_kernel, dim3((N + 63) / 64), dim3(64), 0, s, y, 3.0f, 1.0f, (int)N);
	cudaEventRecord(e, s);
	klaunch(axpb_kernel, dim3((N + 127) / 128), dim3(128), 0, s, x, 2.0f, b, (int)N);
}

int main(void)
{
	cudaStream_t s;
	cudaEvent_t e0, e1;
	REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
	REQUIRE(cudaEventCreate(&e0) == cudaSuccess);
	REQUIRE(cudaEventCreate(&e1) == cudaSuccess);
	float *x, *y, hx[N], hy[N], ex[N], ey[N];
	REQUIRE(cudaMalloc((void **)&x, sizeof(hx)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&y, sizeof(hy)) == cudaSuccess);

	/* eager */
	enqueue(s, x, y, 5.0f, e0);
	cudaStreamSynchronize(s);
	cudaMemcpy(ex, x, sizeof(ex), cudaMemcpyDeviceToHost);
	cudaMemcpy(ey, y, sizeof(ey), cudaMemcpyDeviceToHost);
	CHECK_NEAR(ex[0], 15.0, 0);
	CHECK_NEAR(ey[N - 1], 16.0, 0);

	/* captured: nothing runs until the graph is launched */
	cudaMemset(x, 0xff, sizeof(hx));
	enum cudaStreamCaptureStatus st;
	CHECK_INT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
	CHECK_INT_EQ(st, cudaStreamCaptureStatusNone);
	CHECK_INT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	float b = 5.0f;
	enqueue(s, x, y, b, e1);
	b = 100.0f; /* arguments were captured by value */
	CHECK_INT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
	CHECK_INT_EQ(st, cudaStreamCaptureStatusActive);
	cudaGraph_t graph;
	CHECK_INT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(hx, x, sizeof(hx), cudaMemcpyDeviceToHost);
	CHECK(isnan(hx[0]));
	cudaGraphExec_t exec;
	CHECK_INT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
	CHECK_INT_EQ(cudaGraphDestroy(graph), cudaSuccess); /* the executable graph keeps its own copy */
	for (int rep = 0; rep < 2; rep++) {
		cudaMemset(y, 0xff, sizeof(hy));
		CHECK_INT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
		CHECK_INT_EQ(cudaStreamSynchronize(s), cudaSuccess);
		cudaMemcpy(hx, x, sizeof(hx), cudaMemcpyDeviceToHost);
		cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
		for (int i = 0; i < N; i++) {
			CHECK_NEAR(hx[i], ex[i], 0);
			CHECK_NEAR(hy[i], ey[i], 0);
		}
	}
	float ms = -1;
	CHECK_INT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess); /* e1 was recorded by the replay */
	CHECK(ms >= 0);
	CHECK_INT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);

	/* synchronising a capturing stream invalidates the capture */
	CHECK_INT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	CHECK_INT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
	CHECK_INT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
	CHECK_INT_EQ(st, cudaStreamCaptureStatusInvalidated);
	CHECK_INT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
	/* stream-ordered allocation is not captured (no graph memory nodes): the capture fails */
	void *tmp = NULL;
	CHECK_INT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	CHECK_INT_EQ(cudaMallocAsync(&tmp, 64, s), cudaErrorStreamCaptureUnsupported);
	CHECK_INT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
	/* the legacy stream cannot capture */
	CHECK_INT_EQ(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal),
		     cudaErrorStreamCaptureUnsupported);
	cudaGetLastError();

	cudaFree(x);
	cudaFree(y);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaStreamDestroy(s);
	return test_exit();
}
