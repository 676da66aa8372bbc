// Image preprocessing of the vision encoder on the device (gpu.h, "image preprocessing"):
// torchvision's antialiased bicubic resize as two separable passes over weight tables the host
// computed (engine/image/image_resize.c's), the cut into tiles and the normalisation.
#include "gpu.h"
#include "gpu_internal.h"
#include "klaunch.h"

#include <cuda_runtime.h>
#include <errno.h>

static constexpr int PRE_THREADS = 256;

/* Width pass: rgb [in_h][in_w][3] bytes to tmp [3][in_h][n_out] floats, value / 255 (ToTensor)
 * filtered as the CPU's apply_tap() does (first product, then fused multiply-adds).
 * Grid (ceil(n_out / PRE_THREADS), in_h, 3). */
static __global__ void pre_resize_w_kernel(const uint8_t *__restrict__ rgb, int in_w, int in_h, int n_out,
					   int taps, const int32_t *__restrict__ first,
					   const int32_t *__restrict__ count, const float *__restrict__ w,
					   float *__restrict__ tmp)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, c = blockIdx.z;
	if (x >= n_out)
		return;
	const uint8_t *row = rgb + (size_t)y * in_w * 3 + c;
	const float *wx = w + (size_t)x * taps;
	int f = first[x], n = count[x];
	float acc = 0.0f;
	if (n > 0) {
		acc = ((float)row[(size_t)f * 3] / 255.0f) * wx[0];
		for (int j = 1; j < n; j++)
			acc = fmaf((float)row[(size_t)(f + j) * 3] / 255.0f, wx[j], acc);
	}
	tmp[((size_t)c * in_h + y) * n_out + x] = acc;
}

/* Height pass, tiling and normalisation: tmp [3][in_h][out_w] to the tiles of a cols x rows grid
 * of ts-pixel tiles, out [cols * rows][3][ts][ts], (v - mean) / std. Grid (ceil(out_w /
 * PRE_THREADS), out_h, 3). */
static __global__ void pre_resize_h_kernel(const float *__restrict__ tmp, int in_h, int out_w, int taps,
					   const int32_t *__restrict__ first,
					   const int32_t *__restrict__ count, const float *__restrict__ w,
					   int ts, int cols, struct gpu_image_norm norm,
					   float *__restrict__ out)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, c = blockIdx.z;
	if (x >= out_w)
		return;
	const float *col = tmp + (size_t)c * in_h * out_w + x;
	const float *wy = w + (size_t)y * taps;
	int f = first[y], n = count[y];
	float acc = 0.0f;
	if (n > 0) {
		acc = col[(size_t)f * out_w] * wy[0];
		for (int j = 1; j < n; j++)
			acc = fmaf(col[(size_t)(f + j) * out_w], wy[j], acc);
	}
	int t = (y / ts) * cols + x / ts;
	out[(((size_t)t * 3 + c) * ts + y % ts) * ts + x % ts] = (acc - norm.mean[c]) / norm.std[c];
}

static bool axis_ok(const struct gpu_resize_axis *a, int n_in)
{
	return a && a->n_out >= 1 && a->taps >= 1 && a->first && a->count && a->w && n_in >= 1 &&
	       (int64_t)a->n_out * a->taps <= GPU_MAX_ROWS;
}

extern "C" int gpu_image_resize_tiles(struct gpu_context *g, const uint8_t *rgb, int in_w, int in_h,
				      const struct gpu_resize_axis *ax_w, const struct gpu_resize_axis *ax_h,
				      int ts, int cols, int rows, const struct gpu_image_norm *norm,
				      float *tmp, float *out)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !rgb || !norm || !tmp || !out || in_w < 1 || in_h < 1 || in_w > GPU_IMAGE_MAX_SIDE ||
	    in_h > GPU_IMAGE_MAX_SIDE || ts < 1 || cols < 1 || rows < 1 || !axis_ok(ax_w, in_w) ||
	    !axis_ok(ax_h, in_h) || (int64_t)cols * ts != ax_w->n_out || (int64_t)rows * ts != ax_h->n_out ||
	    ax_h->n_out > 65535)
		return -EINVAL;
	for (int c = 0; c < 3; c++)
		if (!(norm->std[c] != 0.0f))
			return -EINVAL;
	cudaStream_t st = (cudaStream_t)g->stream;
	klaunch(pre_resize_w_kernel,
		dim3((unsigned)((ax_w->n_out + PRE_THREADS - 1) / PRE_THREADS), (unsigned)in_h, 3),
		dim3(PRE_THREADS), 0, st, rgb, in_w, in_h, ax_w->n_out, ax_w->taps, ax_w->first, ax_w->count,
		ax_w->w, tmp);
	int r = GPU_CHECK(cudaGetLastError());
	if (r < 0)
		return r;
	klaunch(pre_resize_h_kernel,
		dim3((unsigned)((ax_w->n_out + PRE_THREADS - 1) / PRE_THREADS), (unsigned)ax_h->n_out, 3),
		dim3(PRE_THREADS), 0, st, tmp, in_h, ax_w->n_out, ax_h->taps, ax_h->first, ax_h->count,
		ax_h->w, ts, cols, *norm, out);
	return GPU_CHECK(cudaGetLastError());
}
