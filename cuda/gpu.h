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
