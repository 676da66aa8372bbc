/* engine: the reference image processor (model.md 4.1): grid choice, antialiased bicubic
 * resize, tiles, thumbnail, normalization.
 *
 * The resize reproduces torch's CPU `_upsample_bicubic2d_aa` for float tensors, which is what
 * torchvision's Resize(BICUBIC) runs on the processor's float image (antialias is the default
 * since torchvision 0.17). It is PIL's separable resampling filter:
 *   scale   = in / out                                   (float)
 *   support = 2 * max(scale, 1)                           (Keys cubic, a = -0.5, radius 2)
 *   center  = scale * (i + 0.5); taps x in [trunc(center - support + 0.5),
 *                                          trunc(center + support + 0.5)) clipped to the input
 *   w(x)    = cubic((x - center + 0.5) / max(scale, 1)), normalized to sum 1
 * first along the width, then along the height, with a float intermediate; no clamping, no
 * rounding. Each step keeps torch's types: float where torch has `scalar_t`, double where a
 * double literal promotes the expression. What remains is the order of float additions inside
 * torch's vectorised loops and any FMA contraction in its build: differences of a few ulp,
 * measured against torchvision in tests/image (max |diff| recorded there).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "image.h"

/* Keys' cubic convolution kernel with a = -0.5, in float as torch's aa_filter<float>, with the
 * multiply-adds fused as the compiler fuses them in torch's AVX2/AVX-512 kernels (which is what
 * makes the weights agree bit for bit; plain float arithmetic is off by up to ~10 ulp). */
static float cubic_filter(float x)
{
	const float a = -0.5f;

	x = fabsf(x);
	if (x < 1.0f)
		return fmaf(fmaf(a + 2, x, -(a + 3)) * x, x, 1.0f);
	if (x < 2.0f)
		return fmaf(fmaf(fmaf(a, x, -(5 * a)), x, 8 * a), x, -(4 * a));
	return 0.0f;
}

void image_resize_axis_free(struct image_resize_axis *ax)
{
	free(ax->first);
	free(ax->count);
	free(ax->w);
}

int image_resize_axis_init(struct image_resize_axis *ax, int n_in, int n_out)
{
	float scale = (float)n_in / (float)n_out;
	float support = scale >= 1.0f ? 2.0f * scale : 2.0f;
	float invscale = scale >= 1.0f ? (float)(1.0 / (double)scale) : 1.0f;
	int taps = (int)ceilf(support) * 2 + 1;

	memset(ax, 0, sizeof(*ax));
	ax->n_out = n_out;
	ax->taps = taps;
	ax->first = malloc(sizeof(int) * (size_t)n_out);
	ax->count = malloc(sizeof(int) * (size_t)n_out);
	ax->w = calloc((size_t)n_out * (size_t)taps, sizeof(float));
	if (!ax->first || !ax->count || !ax->w) {
		image_resize_axis_free(ax);
		return -ENOMEM;
	}
	for (int i = 0; i < n_out; i++) {
		float center = (float)((double)scale * ((double)i + 0.5));
		int64_t lo = (int64_t)((double)(center - support) + 0.5);
		int64_t hi = (int64_t)((double)(center + support) + 0.5);
		float *w = ax->w + (size_t)i * (size_t)taps;
		float total = 0.0f;
		int64_t n;

		lo = MAX(lo, 0);
		n = MIN(hi, (int64_t)n_in) - lo;
		n = CLAMP(n, 0, (int64_t)taps);
		for (int64_t j = 0; j < n; j++) {
			float x = (float)(((double)((float)(j + lo) - center) + 0.5) * (double)invscale);
			w[j] = cubic_filter(x);
			total += w[j];
		}
		if (total != 0.0f)
			for (int64_t j = 0; j < n; j++)
				w[j] /= total;
		ax->first[i] = (int)lo;
		ax->count[i] = (int)n;
	}
	return 0;
}

/* out[i] = sum_j in[(first_i + j) * stride] * w_ij, accumulated as torch does. Always inlined
 * so that it is compiled for the caller's target clone. */
static inline __attribute__((always_inline)) float apply_tap(const struct image_resize_axis *ax, int i,
							     const float *in, size_t stride)
{
	const float *w = ax->w + (size_t)i * (size_t)ax->taps;
	const float *p = in + (size_t)ax->first[i] * stride;
	int n = ax->count[i];
	float acc;

	if (n == 0)
		return 0.0f;
	acc = p[0] * w[0];
	for (int j = 1; j < n; j++)
		acc = fmaf(p[(size_t)j * stride], w[j], acc);
	return acc;
}

/* The separable resize of `channels` planes; row_fn(ctx, c, y, buf) supplies input row y of
 * channel c as in_w floats (it may return a pointer into the source instead of filling buf). */
typedef const float *row_fn_t(const void *ctx, int c, int y, float *buf);

/* Cloned for x86-64 CPUs with FMA so that fmaf() is one instruction there (and a libm call
 * elsewhere). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("fma", "default")))
#endif
static int
resize_planes(row_fn_t *row_fn, const void *ctx, int channels, int in_h, int in_w, float *dst, int out_h,
	      int out_w)
{
	struct image_resize_axis ax_w = {0}, ax_h = {0};
	float *tmp = NULL, *rowbuf = NULL;
	size_t plane_tmp = (size_t)in_h * (size_t)out_w;
	size_t plane_out = (size_t)out_h * (size_t)out_w;
	bool do_w = in_w != out_w, do_h = in_h != out_h;
	int r = -ENOMEM;

	if (channels < 1 || in_h < 1 || in_w < 1 || out_h < 1 || out_w < 1)
		return -EINVAL;
	/* torch skips an axis whose size does not change; its filter there is the identity. */
	if (do_w && image_resize_axis_init(&ax_w, in_w, out_w) < 0)
		goto out;
	if (do_h && image_resize_axis_init(&ax_h, in_h, out_h) < 0)
		goto out;
	rowbuf = malloc(sizeof(float) * (size_t)in_w);
	if (!rowbuf)
		goto out;
	if (do_h) {
		tmp = malloc(sizeof(float) * plane_tmp * (size_t)channels);
		if (!tmp)
			goto out;
	}

	for (int c = 0; c < channels; c++) {
		/* Width pass into tmp (or straight into dst when the height stays). */
		float *wout = do_h ? tmp + plane_tmp * (size_t)c : dst + plane_out * (size_t)c;

		for (int y = 0; y < in_h; y++) {
			const float *row = row_fn(ctx, c, y, rowbuf);
			float *o = wout + (size_t)y * (size_t)out_w;

			if (do_w)
				for (int x = 0; x < out_w; x++)
					o[x] = apply_tap(&ax_w, x, row, 1);
			else
				memcpy(o, row, sizeof(float) * (size_t)out_w);
		}
		if (!do_h)
			continue;
		for (int y = 0; y < out_h; y++) {
			float *o = dst + plane_out * (size_t)c + (size_t)y * (size_t)out_w;

			for (int x = 0; x < out_w; x++)
				o[x] = apply_tap(&ax_h, y, wout + x, (size_t)out_w);
		}
	}
	r = 0;
out:
	image_resize_axis_free(&ax_w);
	image_resize_axis_free(&ax_h);
	free(tmp);
	free(rowbuf);
	return r;
}

struct planar_src {
	const float *data;
	int h, w;
};

static const float *planar_row(const void *ctx, int c, int y, float *buf)
{
	const struct planar_src *s = ctx;

	return s->data + ((size_t)c * (size_t)s->h + (size_t)y) * (size_t)s->w;
}

int image_resize_f32(const float *src, int channels, int in_h, int in_w, float *dst, int out_h, int out_w)
{
	struct planar_src s = {.data = src, .h = in_h, .w = in_w};

	if (!src || !dst)
		return -EINVAL;
	return resize_planes(planar_row, &s, channels, in_h, in_w, dst, out_h, out_w);
}

struct rgb8_src {
	const struct engine_image *img;
	float lut[256];
};

static const float *rgb8_row(const void *ctx, int c, int y, float *buf)
{
	const struct rgb8_src *s = ctx;
	const uint8_t *p = s->img->rgb + (size_t)y * (size_t)s->img->width * 3 + c;

	for (int x = 0; x < s->img->width; x++)
		buf[x] = s->lut[p[(size_t)x * 3]];
	return buf;
}

int image_resize_rgb8(const struct engine_image *img, float *dst, int out_h, int out_w)
{
	struct rgb8_src s = {.img = img};

	if (!img || !dst)
		return -EINVAL;
	/* ToTensor(): uint8 -> float, then a float division by 255. */
	for (int v = 0; v < 256; v++)
		s.lut[v] = (float)v / 255.0f;
	return resize_planes(rgb8_row, &s, 3, img->height, img->width, dst, out_h, out_w);
}

/* ---- grid choice --------------------------------------------------------------------------- */

/* The reference ranks the grids (i, j), i * j <= max_tiles, by tile count; within one count its
 * order comes from a Python set and differs with max_tiles. That order cannot matter: two grids
 * with the same count tie only at the midpoint of their ratios, and for every budget up to
 * ENGINE_VISION_MAX_TILES some other grid is strictly closer there (checked exhaustively with
 * exact fractions). Grids with different counts keep the reference's ascending order, which is
 * what the equal-ratio rule depends on. */
int engine_vision_select_grid(int width, int height, int tile_size, int max_tiles, bool use_thumbnail,
			      struct engine_vision_grid *ret_grid)
{
	double aspect, area, best_diff = INFINITY;
	int best_i = 1, best_j = 1;

	if (width < 1 || height < 1 || tile_size < 1 || tile_size > ENGINE_VISION_MAX_TILE_SIZE ||
	    max_tiles < 1 || max_tiles > ENGINE_VISION_MAX_TILES || !ret_grid)
		return -EINVAL;
	aspect = (double)width / (double)height;
	area = (double)width * (double)height;
	for (int n = 1; n <= max_tiles; n++) {
		for (int i = 1; i <= n; i++) {
			int j = n / i;
			double diff;

			if (i * j != n)
				continue;
			diff = fabs(aspect - (double)i / (double)j);
			if (diff < best_diff) {
				best_diff = diff;
				best_i = i;
				best_j = j;
			} else if (diff == best_diff &&
				   area > 0.5 * tile_size * tile_size * (double)i * (double)j) {
				best_i = i;
				best_j = j;
			}
		}
	}
	ret_grid->cols = best_i;
	ret_grid->rows = best_j;
	ret_grid->thumbnail = use_thumbnail && best_i * best_j != 1;
	ret_grid->n_tiles = best_i * best_j + (ret_grid->thumbnail ? 1 : 0);
	return 0;
}

/* ---- preprocessing ------------------------------------------------------------------------- */

void engine_vision_preprocess_defaults(struct engine_vision_preprocess *p)
{
	*p = (struct engine_vision_preprocess){
		.tile_size = 512,
		.max_tiles = 12,
		.use_thumbnail = true,
		.mean = {0.48145466f, 0.4578275f, 0.40821073f},
		.std = {0.26862954f, 0.26130258f, 0.27577711f},
	};
}

static void normalize_tile(float *tile, size_t plane, const struct engine_vision_preprocess *p)
{
	for (int c = 0; c < 3; c++) {
		float *v = tile + plane * (size_t)c;

		for (size_t k = 0; k < plane; k++)
			v[k] = (v[k] - p->mean[c]) / p->std[c];
	}
}

int image_vision_preprocess_to(const struct engine_image *img, const struct engine_vision_preprocess *p,
			       const struct engine_vision_grid *grid, float *pixels)
{
	const size_t ts = (size_t)p->tile_size, plane = ts * ts, tile_floats = 3 * plane;
	float *full = NULL;
	int r;

	if (grid->cols * grid->rows == 1) {
		r = image_resize_rgb8(img, pixels, p->tile_size, p->tile_size);
		if (r < 0)
			return r;
	} else {
		size_t fw = ts * (size_t)grid->cols, fh = ts * (size_t)grid->rows;

		full = malloc(sizeof(float) * 3 * fw * fh);
		if (!full)
			return -ENOMEM;
		r = image_resize_rgb8(img, full, (int)fh, (int)fw);
		if (r < 0) {
			free(full);
			return r;
		}
		/* Tile t covers columns (t % cols) * ts and rows (t / cols) * ts of the grid. */
		for (int t = 0; t < grid->cols * grid->rows; t++) {
			size_t x0 = (size_t)(t % grid->cols) * ts, y0 = (size_t)(t / grid->cols) * ts;
			float *tile = pixels + (size_t)t * tile_floats;

			for (int c = 0; c < 3; c++)
				for (size_t y = 0; y < ts; y++)
					memcpy(tile + plane * (size_t)c + y * ts,
					       full + (size_t)c * fw * fh + (y0 + y) * fw + x0,
					       sizeof(float) * ts);
		}
		free(full);
		if (grid->thumbnail) {
			r = image_resize_rgb8(img, pixels + (size_t)(grid->n_tiles - 1) * tile_floats,
					      p->tile_size, p->tile_size);
			if (r < 0)
				return r;
		}
	}
	for (int t = 0; t < grid->n_tiles; t++)
		normalize_tile(pixels + (size_t)t * tile_floats, plane, p);
	return 0;
}

int engine_vision_preprocess(const struct engine_image *img, const struct engine_vision_preprocess *p,
			     struct engine_vision_grid *ret_grid, float **ret_pixels)
{
	struct engine_vision_grid grid;
	float *pixels = NULL;
	size_t tile_floats, total;
	int r;

	if (!img || !p || !ret_grid || !ret_pixels)
		return -EINVAL;
	for (int c = 0; c < 3; c++)
		if (!(p->std[c] != 0.0f) || !isfinite(p->std[c]) || !isfinite(p->mean[c]))
			return -EINVAL;
	r = engine_vision_select_grid(img->width, img->height, p->tile_size, p->max_tiles, p->use_thumbnail,
				      &grid);
	if (r < 0)
		return r;

	tile_floats = 3 * (size_t)p->tile_size * (size_t)p->tile_size;
	if (!size_mul_ok(tile_floats, (size_t)grid.n_tiles, &total) ||
	    !size_mul_ok(total, sizeof(float), &total))
		return -ENOMEM;
	pixels = malloc(total);
	if (!pixels)
		return -ENOMEM;
	if ((r = image_vision_preprocess_to(img, p, &grid, pixels)) < 0) {
		free(pixels);
		return r;
	}
	*ret_grid = grid;
	*ret_pixels = pixels;
	return 0;
}
