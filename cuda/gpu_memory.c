/* Device memory and transfers on a context's stream (gpu.h), with CUDA errors translated. */
#include "gpu.h"
#include "gpu_internal.h"

#include <cuda_runtime.h>
#include <errno.h>

#include "common.h"

int gpu_memory_info(struct gpu_context *g, size_t *ret_free, size_t *ret_total)
{
	GPU_BIND_OR_RETURN(g);
	size_t free_b = 0, total_b = 0;
	int r = GPU_CHECK(cudaMemGetInfo(&free_b, &total_b));
	if (r < 0)
		return r;
	*ret_free = free_b;
	*ret_total = total_b;
	return 0;
}

int gpu_alloc(struct gpu_context *g, size_t bytes, void **ret_ptr)
{
	GPU_BIND_OR_RETURN(g);
	if (bytes == 0 || !ret_ptr)
		return -EINVAL;
	void *p = NULL;
	/* cudaMalloc, not the stream-ordered allocator: these blocks live long (weights, session
	 * state) and must be usable on any stream at once */
	int r = GPU_CHECK(cudaMalloc(&p, bytes));
	if (r < 0)
		return r;
	*ret_ptr = p;
	return 0;
}

void gpu_free(struct gpu_context *g, void *ptr)
{
	if (!ptr)
		return;
	/* cudaFree synchronises with the device, so queued work using ptr has finished; the
	 * device is set first because memory may be freed by another thread than the one that
	 * allocated it (engine_rows under the backend's lock) */
	(void)gpu_bind(g);
	(void)GPU_CHECK(cudaFree(ptr));
}

int gpu_host_alloc(struct gpu_context *g, size_t bytes, void **ret_ptr)
{
	GPU_BIND_OR_RETURN(g);
	if (bytes == 0 || !ret_ptr)
		return -EINVAL;
	void *p = NULL;
	int r = GPU_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
	if (r < 0)
		return r;
	*ret_ptr = p;
	return 0;
}

void gpu_host_free(struct gpu_context *g, void *ptr)
{
	if (!ptr)
		return;
	/* a queued copy may still read it */
	(void)gpu_bind(g);
	(void)GPU_CHECK(cudaStreamSynchronize((cudaStream_t)g->stream));
	(void)GPU_CHECK(cudaFreeHost(ptr));
}

static int copy(struct gpu_context *g, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
		bool wait)
{
	if (bytes == 0)
		return 0;
	if (!dst || !src)
		return -EINVAL;
	cudaStream_t s = (cudaStream_t)g->stream;
	gpu_profile_copy(g, (int)kind, bytes);
	int r = GPU_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
	if (r >= 0 && wait)
		r = GPU_CHECK(cudaStreamSynchronize(s));
	return r;
}

int gpu_copy_to_device(struct gpu_context *g, void *dst, const void *src, size_t bytes)
{
	GPU_BIND_OR_RETURN(g);
	return copy(g, dst, src, bytes, cudaMemcpyHostToDevice, true);
}

int gpu_copy_to_host(struct gpu_context *g, void *dst, const void *src, size_t bytes)
{
	GPU_BIND_OR_RETURN(g);
	return copy(g, dst, src, bytes, cudaMemcpyDeviceToHost, true);
}

int gpu_copy_on_device(struct gpu_context *g, void *dst, const void *src, size_t bytes)
{
	GPU_BIND_OR_RETURN(g);
	return copy(g, dst, src, bytes, cudaMemcpyDeviceToDevice, false);
}

int gpu_memset(struct gpu_context *g, void *dst, int byte, size_t bytes)
{
	GPU_BIND_OR_RETURN(g);
	if (bytes == 0)
		return 0;
	if (!dst)
		return -EINVAL;
	return GPU_CHECK(cudaMemsetAsync(dst, byte, bytes, (cudaStream_t)g->stream));
}

int gpu_synchronize(struct gpu_context *g)
{
	GPU_BIND_OR_RETURN(g);
	return GPU_CHECK(cudaStreamSynchronize((cudaStream_t)g->stream));
}

int gpu_context_device(const struct gpu_context *g)
{
	return g->device;
}
