/* Host side of the CUDA backend: device discovery, contexts, error translation. */
#include "gpu.h"
#include "gpu_internal.h"

#include "common.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sticky error that broke the context (cudaSuccess: none); gpu_device_reset() clears it. */
static _Atomic int device_fault = cudaSuccess;

static bool is_sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorLaunchTimeout:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorAssert:
	case cudaErrorECCUncorrectable:
		return true;
	default:
		return false;
	}
}

int gpu_translate_error(int err, const char *file, int line, const char *what)
{
	cudaError_t e = (cudaError_t)err;
	if (e == cudaSuccess)
		return 0;
	int none = cudaSuccess;
	if (is_sticky(e) && atomic_compare_exchange_strong(&device_fault, &none, (int)e))
		log_error("%s:%d: %s: %s: the CUDA context is unusable until the device is reset", file, line,
			  what, cudaGetErrorString(e));
	int r = e == cudaErrorMemoryAllocation ? -ENOMEM :
		(e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice) ?
						 -ENODEV :
						 -EIO;
	log_debug("%s:%d: %s: %s", file, line, what, cudaGetErrorString(e));
	return r;
}

int gpu_device_count(void)
{
	int n = gpu_device_count_why(NULL, 0);
	return n > 0 ? n : 0;
}

/* The driver series each CUDA major version's runtime needs (NVIDIA's CUDA toolkit release
 * notes, "CUDA Driver" table: minimum driver for the toolkit's minor version compatibility). */
static const char *driver_series(int cuda_major)
{
	switch (cuda_major) {
	case 12:
		return "R525";
	case 13:
		return "R580";
	default:
		return NULL;
	}
}

int gpu_device_count_why(char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e == cudaSuccess && n > 0)
		return n;
	int drv = 0, rt = 0, r = 0;
	char none[1];
	if (!why || !len)
		why = none, len = sizeof(none);
	if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv) == cudaSuccess &&
	    cudaRuntimeGetVersion(&rt) == cudaSuccess && drv > 0) {
		const char *series = driver_series(rt / 1000);
		r = -ENXIO;
		snprintf(why, len,
			 "the NVIDIA driver is too old for this build: it supports CUDA %d.%d, the CUDA "
			 "runtime holod was built with is %d.%d%s%s%s",
			 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
			 series ? " (it needs driver " : "", series ? series : "", series ? " or newer)" : "");
	} else if (e == cudaSuccess || e == cudaErrorNoDevice) {
		snprintf(why, len, "no CUDA device is present");
	} else if (e == cudaErrorInsufficientDriver) {
		snprintf(why, len,
			 "no CUDA device is present (no NVIDIA driver is loaded, or one too old for CUDA "
			 "%d.%d)",
			 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
	} else {
		snprintf(why, len, "CUDA cannot list the devices: %s (%s)", cudaGetErrorName(e),
			 cudaGetErrorString(e));
	}
	(void)cudaGetLastError(); /* the failed calls leave nothing sticky behind */
	return r;
}

int gpu_device_info(int device, struct gpu_device_info *ret)
{
	struct cudaDeviceProp p;
	int r = GPU_CHECK(cudaGetDeviceProperties(&p, device));
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", p.name);
	ret->compute_major = p.major;
	ret->compute_minor = p.minor;
	ret->total_memory = p.totalGlobalMem;
	ret->multiprocessors = p.multiProcessorCount;
	return 0;
}

bool gpu_device_fault(char *buf, size_t len)
{
	cudaError_t e = (cudaError_t)atomic_load(&device_fault);
	if (e == cudaSuccess)
		return false;
	if (buf && len)
		snprintf(buf, len, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
	return true;
}

int gpu_device_reset(int device)
{
	/* a broken context may fail this too: the reset below is what repairs it */
	(void)cudaSetDevice(device);
	int r = GPU_CHECK(cudaDeviceReset());
	if (r >= 0)
		atomic_store(&device_fault, cudaSuccess);
	return r;
}

bool gpu_devices_emulated(void)
{
#ifdef HOLOD_GPU_EMULATED
	return true;
#else
	return false;
#endif
}

int gpu_bind(struct gpu_context *g)
{
	if (!g)
		return -EINVAL;
	int cur = -1;
	if (cudaGetDevice(&cur) == cudaSuccess && cur == g->device)
		return 0;
	return GPU_CHECK(cudaSetDevice(g->device));
}

struct gpu_context *gpu_context_create(int device)
{
	if (device < 0 || device >= gpu_device_count()) {
		errno = ENODEV;
		return NULL;
	}
	struct gpu_context *g = xcalloc(1, sizeof(*g));
	g->device = device;
	/* Every call binds its own device (gpu_bind), so the caller's current device does not
	 * matter. The emulated build puts it back as it was, so that the gpu suite's -device1 tests
	 * (device 1 of two) see any call that forgets to bind; the real build leaves device set:
	 * since CUDA 12 cudaSetDevice creates the device's primary context at once, and restoring
	 * device 0 on a thread that never chose one would take memory on GPU 0 (which may be
	 * another process's, or barred from compute). */
	int prev = -1;
#ifdef HOLOD_GPU_EMULATED
	if (cudaGetDevice(&prev) != cudaSuccess)
		prev = -1;
#endif
	int r = GPU_CHECK(cudaSetDevice(device));
	if (r < 0)
		goto fail;
	cudaStream_t s;
	r = GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	if (r < 0)
		goto fail;
	g->stream = s;
	if (prev >= 0 && prev != device)
		(void)cudaSetDevice(prev);
	return g;
fail:
	if (prev >= 0 && prev != device)
		(void)cudaSetDevice(prev);
	free(g);
	errno = -r;
	return NULL;
}

void gpu_context_destroy(struct gpu_context *g)
{
	if (!g)
		return;
	(void)gpu_bind(g);
	gpu_profile_free(g);
	if (g->stream)
		cudaStreamDestroy((cudaStream_t)g->stream);
	free(g);
}

int gpu_rmsnorm_f32(struct gpu_context *g, const float *x, const float *w, float *out, int rows, int cols,
		    float eps)
{
	GPU_BIND_OR_RETURN(g);
	size_t n;
	if (rows <= 0 || cols <= 0 || !size_mul_ok((size_t)rows, (size_t)cols, &n) ||
	    !size_mul_ok(n, sizeof(float), &n))
		return -EINVAL;
	cudaStream_t s = (cudaStream_t)g->stream;
	float *dx = NULL, *dw = NULL, *dout = NULL;
	int r = GPU_CHECK(cudaMallocAsync((void **)&dx, n, s));
	if (r < 0)
		goto free_none;
	r = GPU_CHECK(cudaMallocAsync((void **)&dout, n, s));
	if (r < 0)
		goto free_x;
	r = GPU_CHECK(cudaMallocAsync((void **)&dw, (size_t)cols * sizeof(float), s));
	if (r < 0)
		goto free_out;
	r = GPU_CHECK(cudaMemcpyAsync(dx, x, n, cudaMemcpyHostToDevice, s));
	if (r >= 0)
		r = GPU_CHECK(cudaMemcpyAsync(dw, w, (size_t)cols * sizeof(float), cudaMemcpyHostToDevice, s));
	if (r >= 0)
		r = gpu_launch_rmsnorm_f32(g->stream, dx, dw, dout, rows, cols, eps);
	if (r >= 0)
		r = GPU_CHECK(cudaMemcpyAsync(out, dout, n, cudaMemcpyDeviceToHost, s));
	if (r >= 0)
		r = GPU_CHECK(cudaStreamSynchronize(s));
	cudaFreeAsync(dw, s);
free_out:
	cudaFreeAsync(dout, s);
free_x:
	cudaFreeAsync(dx, s);
	cudaStreamSynchronize(s);
free_none:
	return r;
}
