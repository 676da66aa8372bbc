/* gpu: the CUDA backend (prefix gpu_, since cuda* is NVIDIA's namespace).
 *
 * The one public header of the cuda module; no CUDA types appear here. Built only when the
 * `cuda` feature is enabled and nvcc is found; nothing in holod requires a GPU to build or test.
 *
 * Threads: a struct gpu_context owns one device, one stream and its allocations, and belongs to
 * the engine thread; other threads hand work to that thread (conventions.md).
 * Errors: int functions return >= 0 or a negative errno; CUDA errors become -EIO (kernel or
 * driver failure), -ENOMEM (allocation), -ENODEV (no device), with a debug log naming the CUDA
 * error at file:line.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct gpu_context;

struct gpu_device_info {
	char name[256];
	int compute_major, compute_minor;
	size_t total_memory;
	int multiprocessors;
};

/* Number of usable CUDA devices; 0 when there is none or no driver (never an error). */
int gpu_device_count(void);
int gpu_device_info(int device, struct gpu_device_info *ret);

/* NULL + errno (ENODEV when the device does not exist). */
struct gpu_context *gpu_context_create(int device);
void gpu_context_destroy(struct gpu_context *g);

/* RMSNorm over rows: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w, fp32 in and out,
 * host buffers (copied to and from the device). The CPU reference is gpu_ref_rmsnorm_f32. */
int gpu_rmsnorm_f32(struct gpu_context *g, const float *x, const float *w, float *out, int rows,
		    int cols, float eps);
void gpu_ref_rmsnorm_f32(const float *x, const float *w, float *out, int rows, int cols, float eps);

/* ---- device memory (gpu_memory.c) ----
 * Device pointers are opaque `void *` here; they are valid only on the context's device and
 * only for these functions and the module's kernels. Every function runs on the context's
 * stream, in order: copies to and from the host return when the host buffer may be reused (and,
 * from the device, holds the data); device-to-device copies and memsets are queued, and
 * gpu_synchronize() waits for them. Errors are -ENOMEM (allocation), -EINVAL (a bad argument),
 * -EIO (a device failure). */

/* The device's free and total memory in bytes, as the driver reports them now. */
int gpu_memory_info(struct gpu_context *g, size_t *ret_free, size_t *ret_total);
/* Allocates `bytes` (> 0) of device memory, 256-byte aligned, contents undefined. */
int gpu_alloc(struct gpu_context *g, size_t bytes, void **ret_ptr);
/* Accepts NULL. The memory may still be in use by queued work: it is freed in stream order. */
void gpu_free(struct gpu_context *g, void *ptr);
int gpu_copy_to_device(struct gpu_context *g, void *dst, const void *src, size_t bytes);
int gpu_copy_to_host(struct gpu_context *g, void *dst, const void *src, size_t bytes);
int gpu_copy_on_device(struct gpu_context *g, void *dst, const void *src, size_t bytes);
int gpu_memset(struct gpu_context *g, void *dst, int byte, size_t bytes);
int gpu_synchronize(struct gpu_context *g);
/* The device index the context was created for. */
int gpu_context_device(const struct gpu_context *g);
