/* engine: the RADIO ViT and the mlp1 projector on the CUDA device (vision_cuda.h; issue 12),
 * the same steps as vision_vit.c and vision_project.c over all tiles of an observation in one
 * batch.
 *
 * Precision: matrices (embedder, qkv, proj, fc1, fc2, mlp1's two) are uploaded in the chosen
 * precision, vectors (norms, biases, prefix tokens, the position grid) in fp32. In fp32 every
 * GEMM is fp32 (no TF32); in bf16 the GEMM inputs (patches, LayerNorm outputs, attention output,
 * GELU and ReLU² outputs, the shuffled tokens) are written in bf16 by the kernel before the GEMM,
 * and everything else stays fp32: the residual stream, q/k/v and the softmax.
 *
 * GELU: fc1's bias and the exact (erf) GELU, the CPU's (vision_cpu.h, model.md 1.3), run in
 * gpu_bias_act(GPU_ACT_GELU_ERF), never in a cuBLASLt GELU epilogue: that one is the tanh form,
 * up to 4.7e-4 away (docs/design/gpu-testing.md, cuBLASLt semantics; test-gpu-vision's
 * check_mlp_gelu fails with it).
 *
 * DESIGN (threads): a struct vision_cuda belongs to the thread that owns its gpu_context; its
 * activation buffers grow to the largest tile count seen and are reused, and the rows of the
 * last encode stay in device memory until the next one.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "image.h"
#include "vision_weights.h"
#include "vision_cuda.h"

struct vc_block {
	void *qkv_w, *proj_w, *fc1_w, *fc2_w;
	float *n1w, *n1b, *qkvb, *projb, *n2w, *n2b, *fc1b, *fc2b;
};

struct vision_cuda {
	struct gpu_context *g;
	struct gpu_blas *blas;
	const struct vision_weights *w; /* borrowed; not read by vision_cuda_destroy() */
	int depth;
	enum gpu_dtype dt; /* GEMM inputs and matrices */
	int grid, n;	   /* patches per tile side, patches per tile */
	int L;		   /* tokens per tile: prefix + patches */
	int tokens;	   /* projector rows per tile */
	/* weights */
	void *embedder, *fc1, *fc3;
	float *pos, *prefix, *norm_w, *norm_b, *mlp1_norm;
	struct vc_block *blocks;
	/* activations, for cap tiles */
	int cap;
	int n_pix; /* tiles vision_cuda_preprocess() left in pix */
	/* the screenshot: page-locked staging and its device copy, for rgb_cap bytes */
	uint8_t *staging, *rgb;
	size_t rgb_cap;
	float *pix, *emb, *x, *qkv, *hid, *feat, *h, *rows;
	void *patches, *a, *att, *hidb, *px, *hb;
};

static size_t dt_size(enum gpu_dtype dt)
{
	return dt == GPU_DTYPE_BF16 ? 2 : 4;
}

/* Uploads t (any stored dtype) as dt; *ret is the device copy. */
static int upload(struct vision_cuda *vc, const struct tensor *t, enum gpu_dtype dt, void **ret)
{
	size_t n = t->nbytes / (t->dtype == TENSOR_F32 ? 4 : 2);
	float *tmp = malloc(sizeof(float) * n);
	uint16_t *narrow = dt == GPU_DTYPE_BF16 ? malloc(sizeof(uint16_t) * n) : NULL;
	int r = -ENOMEM;

	if (!tmp || (dt == GPU_DTYPE_BF16 && !narrow))
		goto out;
	cpu_tensor_to_f32(t, 0, n, tmp);
	for (size_t i = 0; narrow && i < n; i++)
		narrow[i] = f32_to_bf16(tmp[i]);
	r = gpu_alloc(vc->g, n * dt_size(dt), ret);
	if (r == 0)
		r = gpu_copy_to_device(vc->g, *ret, narrow ? (const void *)narrow : (const void *)tmp,
				       n * dt_size(dt));
out:
	free(tmp);
	free(narrow);
	return r;
}

static int upload_f32(struct vision_cuda *vc, const struct tensor *t, float **ret)
{
	return upload(vc, t, GPU_DTYPE_F32, (void **)ret);
}

static void free_buffers(struct vision_cuda *vc)
{
	void *bufs[] = {vc->pix,  vc->emb,     vc->x, vc->qkv, vc->hid,	 vc->feat, vc->h,
			vc->rows, vc->patches, vc->a, vc->att, vc->hidb, vc->px,   vc->hb};

	for (size_t i = 0; i < ARRAY_SIZE(bufs); i++)
		gpu_free(vc->g, bufs[i]);
	vc->pix = vc->emb = vc->x = vc->qkv = vc->hid = vc->feat = vc->h = vc->rows = NULL;
	vc->patches = vc->a = vc->att = vc->hidb = vc->px = vc->hb = NULL;
	vc->cap = 0;
	vc->n_pix = 0;
}

void vision_cuda_destroy(struct vision_cuda *vc)
{
	if (!vc)
		return;
	free_buffers(vc);
	gpu_host_free(vc->g, vc->staging);
	gpu_free(vc->g, vc->rgb);
	if (vc->blocks) {
		for (int i = 0; i < vc->depth; i++) {
			struct vc_block *b = &vc->blocks[i];
			void *p[] = {b->qkv_w, b->proj_w, b->fc1_w, b->fc2_w, b->n1w,  b->n1b,
				     b->qkvb,  b->projb,  b->n2w,   b->n2b,   b->fc1b, b->fc2b};

			for (size_t k = 0; k < ARRAY_SIZE(p); k++)
				gpu_free(vc->g, p[k]);
		}
		free(vc->blocks);
	}
	gpu_free(vc->g, vc->embedder);
	gpu_free(vc->g, vc->fc1);
	gpu_free(vc->g, vc->fc3);
	gpu_free(vc->g, vc->pos);
	gpu_free(vc->g, vc->prefix);
	gpu_free(vc->g, vc->norm_w);
	gpu_free(vc->g, vc->norm_b);
	gpu_free(vc->g, vc->mlp1_norm);
	gpu_blas_destroy(vc->blas);
	free(vc);
}

static int upload_weights(struct vision_cuda *vc, const float *pos)
{
	const struct vision_weights *w = vc->w;
	size_t pos_bytes = sizeof(float) * (size_t)vc->n * w->width;
	int r;

	if ((r = upload(vc, &w->embedder, vc->dt, &vc->embedder)) < 0 ||
	    (r = upload(vc, &w->mlp1_fc1, vc->dt, &vc->fc1)) < 0 ||
	    (r = upload(vc, &w->mlp1_fc3, vc->dt, &vc->fc3)) < 0 ||
	    (r = upload_f32(vc, &w->cls_token, &vc->prefix)) < 0 ||
	    (r = upload_f32(vc, &w->mlp1_norm, &vc->mlp1_norm)) < 0)
		return r;
	if (w->norm_w.data && ((r = upload_f32(vc, &w->norm_w, &vc->norm_w)) < 0 ||
			       (r = upload_f32(vc, &w->norm_b, &vc->norm_b)) < 0))
		return r;
	if ((r = gpu_alloc(vc->g, pos_bytes, (void **)&vc->pos)) < 0 ||
	    (r = gpu_copy_to_device(vc->g, vc->pos, pos, pos_bytes)) < 0)
		return r;
	for (int i = 0; i < w->depth; i++) {
		const struct vision_block *s = &w->blocks[i];
		struct vc_block *b = &vc->blocks[i];

		if ((r = upload(vc, &s->qkv_w, vc->dt, &b->qkv_w)) < 0 ||
		    (r = upload(vc, &s->proj_w, vc->dt, &b->proj_w)) < 0 ||
		    (r = upload(vc, &s->fc1_w, vc->dt, &b->fc1_w)) < 0 ||
		    (r = upload(vc, &s->fc2_w, vc->dt, &b->fc2_w)) < 0 ||
		    (r = upload_f32(vc, &s->norm1_w, &b->n1w)) < 0 ||
		    (r = upload_f32(vc, &s->norm1_b, &b->n1b)) < 0 ||
		    (r = upload_f32(vc, &s->qkv_b, &b->qkvb)) < 0 ||
		    (r = upload_f32(vc, &s->proj_b, &b->projb)) < 0 ||
		    (r = upload_f32(vc, &s->norm2_w, &b->n2w)) < 0 ||
		    (r = upload_f32(vc, &s->norm2_b, &b->n2b)) < 0 ||
		    (r = upload_f32(vc, &s->fc1_b, &b->fc1b)) < 0 ||
		    (r = upload_f32(vc, &s->fc2_b, &b->fc2b)) < 0)
			return r;
	}
	return gpu_synchronize(vc->g);
}

struct vision_cuda *vision_cuda_create(struct gpu_context *g, const struct backend_vision_tower *t,
				       enum engine_precision precision)
{
	if (!t) {
		errno = EINVAL;
		return NULL;
	}
	return vision_cuda_create_grid(g, t->w, t->grid, t->pos, precision);
}

struct vision_cuda *vision_cuda_create_grid(struct gpu_context *g, const struct vision_weights *w, int grid,
					    const float *pos, enum engine_precision precision)
{
	struct vision_cuda *vc;
	int r;

	if (!g || !w || !pos || grid < 1 || grid % w->shuffle != 0 || w->head_dim > GPU_VISION_MAX_HEAD_DIM ||
	    w->patch > GPU_VISION_MAX_PATCH || w->proj_in > GPU_VISION_MAX_DIM ||
	    (precision != ENGINE_PRECISION_BF16 && precision != ENGINE_PRECISION_FP32)) {
		errno = EINVAL;
		return NULL;
	}
	vc = calloc(1, sizeof(*vc));
	if (!vc) {
		errno = ENOMEM;
		return NULL;
	}
	vc->g = g;
	vc->w = w;
	vc->depth = w->depth;
	vc->dt = precision == ENGINE_PRECISION_BF16 ? GPU_DTYPE_BF16 : GPU_DTYPE_F32;
	vc->grid = grid;
	vc->n = grid * grid;
	vc->L = w->n_prefix + vc->n;
	vc->tokens = (grid / w->shuffle) * (grid / w->shuffle);
	vc->blocks = calloc((size_t)w->depth, sizeof(*vc->blocks));
	vc->blas = gpu_blas_create(g);
	if (!vc->blocks || !vc->blas) {
		r = -ENOMEM;
		goto fail;
	}
	r = upload_weights(vc, pos);
	if (r < 0)
		goto fail;
	return vc;
fail:
	vision_cuda_destroy(vc);
	errno = -r;
	return NULL;
}

static int alloc_buffers(struct vision_cuda *vc, int tiles)
{
	const struct vision_weights *w = vc->w;
	const size_t D = (size_t)w->width, M = (size_t)w->mlp, p = (size_t)w->patch;
	const size_t rows = (size_t)tiles * vc->L, pr = (size_t)tiles * vc->n,
		     tr = (size_t)tiles * vc->tokens;
	const size_t dsz = dt_size(vc->dt);
	struct {
		void **ptr;
		size_t bytes;
	} b[] = {
		{(void **)&vc->pix, sizeof(float) * pr * 3 * p * p},
		{&vc->patches, dsz * pr * 3 * p * p},
		{(void **)&vc->emb, sizeof(float) * pr * D},
		{(void **)&vc->x, sizeof(float) * rows * D},
		{&vc->a, dsz * rows * D},
		{(void **)&vc->qkv, sizeof(float) * rows * 3 * D},
		{&vc->att, dsz * rows * D},
		{(void **)&vc->hid, sizeof(float) * rows * M},
		{&vc->hidb, dsz * rows * M},
		{(void **)&vc->feat, sizeof(float) * rows * D},
		{&vc->px, dsz * tr * (size_t)w->proj_in},
		{(void **)&vc->h, sizeof(float) * tr * (size_t)w->proj_hidden},
		{&vc->hb, dsz * tr * (size_t)w->proj_hidden},
		{(void **)&vc->rows, sizeof(float) * tr * (size_t)w->out_dim},
	};
	int r;

	if (tiles <= vc->cap)
		return 0;
	free_buffers(vc);
	for (size_t i = 0; i < ARRAY_SIZE(b); i++)
		if ((r = gpu_alloc(vc->g, b[i].bytes, b[i].ptr)) < 0) {
			free_buffers(vc);
			return r;
		}
	vc->cap = tiles;
	return 0;
}

/* Runs `call` (an operation queued on the context's stream, returning 0 or -errno) as the
 * profile site `name` (gpu.h: a no-op while profiling is off); returns from the caller on an
 * error. */
#define STEP(kind, name, call)                                                                               \
	do {                                                                                                 \
		int e_;                                                                                      \
		if ((r = gpu_profile_begin(g, kind, name)) < 0)                                              \
			return r;                                                                            \
		r = (call);                                                                                  \
		e_ = gpu_profile_end(g);                                                                     \
		if (r < 0 || (r = e_) < 0)                                                                   \
			return r;                                                                            \
	} while (0)
#define KERNEL(name, call) STEP(GPU_PROFILE_KERNEL, name, call)
#define GEMM(name, call) STEP(GPU_PROFILE_GEMM, name, call)

/* The ViT and the projector on the tiles at pix (device): the rows land in `out` and the final
 * features in vc->feat (or vc->x without a final norm). Profile sites are named after the
 * kernel (vision_*) or the weight (gemm vision.*, mlp1.*). */
static int run(struct vision_cuda *vc, int tiles, const float *pix, float *out)
{
	const struct vision_weights *w = vc->w;
	const int D = w->width, M = w->mlp, L = vc->L, T = w->n_prefix, pp3 = 3 * w->patch * w->patch;
	const int rows = tiles * L, pr = tiles * vc->n, tr = tiles * vc->tokens;
	const int P = w->proj_in, H = w->proj_hidden;
	const enum gpu_dtype dt = vc->dt, f32 = GPU_DTYPE_F32;
	struct gpu_context *g = vc->g;
	struct gpu_blas *bl = vc->blas;
	/* fp32: the GELU and ReLU² run in place, their outputs feed the GEMMs as they are */
	void *hidb = dt == GPU_DTYPE_F32 ? (void *)vc->hid : vc->hidb;
	void *hb = dt == GPU_DTYPE_F32 ? (void *)vc->h : vc->hb;
	const float *feat = vc->x;
	int r;

	KERNEL("vision_patchify",
	       gpu_vision_patchify(g, pix, tiles, vc->grid, vc->grid, w->patch, vc->patches, dt));
	GEMM("vision.embedder",
	     gpu_gemm(bl, vc->embedder, dt, D, pp3, vc->patches, (size_t)pp3, pr, vc->emb, f32, D, false));
	KERNEL("vision_tokens", gpu_vision_tokens(g, vc->emb, vc->pos, vc->prefix, tiles, vc->n, T, D, vc->x));
	for (int i = 0; i < w->depth; i++) {
		const struct vc_block *b = &vc->blocks[i];

		KERNEL("vision_layernorm",
		       gpu_layernorm(g, vc->x, D, b->n1w, b->n1b, rows, D, VISION_LN_EPS, vc->a, dt, D));
		GEMM("vision.qkv", gpu_gemm(bl, b->qkv_w, dt, 3 * D, D, vc->a, D, rows, vc->qkv, f32,
					    (size_t)3 * D, false));
		KERNEL("vision_bias", gpu_bias_act(g, vc->qkv, (size_t)3 * D, b->qkvb, rows, 3 * D,
						   GPU_ACT_NONE, vc->qkv, f32, (size_t)3 * D));
		KERNEL("vision_attention",
		       gpu_vision_attention(g, vc->qkv, tiles, L, D, w->heads, vc->att, dt));
		GEMM("vision.proj", gpu_gemm(bl, b->proj_w, dt, D, D, vc->att, D, rows, vc->x, f32, D, true));
		KERNEL("vision_bias",
		       gpu_bias_act(g, vc->x, D, b->projb, rows, D, GPU_ACT_NONE, vc->x, f32, D));
		KERNEL("vision_layernorm",
		       gpu_layernorm(g, vc->x, D, b->n2w, b->n2b, rows, D, VISION_LN_EPS, vc->a, dt, D));
		GEMM("vision.fc1", gpu_gemm(bl, b->fc1_w, dt, M, D, vc->a, D, rows, vc->hid, f32, M, false));
		KERNEL("vision_bias_gelu",
		       gpu_bias_act(g, vc->hid, M, b->fc1b, rows, M, GPU_ACT_GELU_ERF, hidb, dt, M));
		GEMM("vision.fc2", gpu_gemm(bl, b->fc2_w, dt, D, M, hidb, M, rows, vc->x, f32, D, true));
		KERNEL("vision_bias",
		       gpu_bias_act(g, vc->x, D, b->fc2b, rows, D, GPU_ACT_NONE, vc->x, f32, D));
	}
	if (vc->norm_w) {
		KERNEL("vision_layernorm", gpu_layernorm(g, vc->x, D, vc->norm_w, vc->norm_b, rows, D,
							 VISION_LN_EPS, vc->feat, f32, D));
		feat = vc->feat;
	}
	KERNEL("vision_shuffle_norm",
	       gpu_vision_shuffle_norm(g, feat + (size_t)T * D, (size_t)L * D, tiles, vc->grid, vc->grid, D,
				       w->shuffle, vc->mlp1_norm, VISION_RMS_EPS, vc->px, dt));
	GEMM("mlp1.fc1", gpu_gemm(bl, vc->fc1, dt, H, P, vc->px, (size_t)P, tr, vc->h, f32, (size_t)H, false));
	KERNEL("relu2", gpu_relu2(g, vc->h, hb, dt, (size_t)tr * H));
	GEMM("mlp1.fc3", gpu_gemm(bl, vc->fc3, dt, w->out_dim, H, hb, (size_t)H, tr, out, f32,
				  (size_t)w->out_dim, false));
	return 0;
}

int vision_cuda_encode(struct vision_cuda *vc, const float *pixels, int n_tiles, const float **ret_rows)
{
	size_t tile_floats = (size_t)3 * vc->n * vc->w->patch * vc->w->patch;
	int r;

	if (!pixels || n_tiles < 1 || n_tiles > VISION_CUDA_MAX_TILES || !ret_rows)
		return -EINVAL;
	if ((r = alloc_buffers(vc, n_tiles)) < 0)
		return r;
	if ((r = gpu_copy_to_device(vc->g, vc->pix, pixels, sizeof(float) * tile_floats * n_tiles)) < 0 ||
	    (r = run(vc, n_tiles, vc->pix, vc->rows)) < 0)
		return r;
	vc->n_pix = n_tiles;
	*ret_rows = vc->rows;
	return 0;
}

int vision_cuda_download(struct vision_cuda *vc, int n_tiles, float *rows, float *features)
{
	const struct vision_weights *w = vc->w;
	const size_t D = (size_t)w->width;
	const float *feat = vc->norm_w ? vc->feat : vc->x;
	int r;

	if (n_tiles < 1 || n_tiles > vc->cap)
		return -EINVAL;
	if (rows && (r = gpu_copy_to_host(vc->g, rows, vc->rows,
					  sizeof(float) * (size_t)n_tiles * vc->tokens * w->out_dim)) < 0)
		return r;
	for (int t = 0; features && t < n_tiles; t++)
		if ((r = gpu_copy_to_host(vc->g, features + (size_t)t * vc->n * D,
					  feat + ((size_t)t * vc->L + w->n_prefix) * D,
					  sizeof(float) * (size_t)vc->n * D)) < 0)
			return r;
	return 0;
}

/* ---- preprocessing on the device ------------------------------------------------------------- */

/* The host's weight table for n_in -> n_out on the device (the identity when the size stays, as
 * the CPU then skips the axis). *ret_mem is the one allocation holding it. */
static int upload_axis(struct gpu_context *g, int n_in, int n_out, struct gpu_resize_axis *ret, void **ret_mem)
{
	struct image_resize_axis ax = {0};
	size_t ints, bytes;
	char *host = NULL, *dev = NULL;
	int r;

	if (n_in == n_out) {
		ax.n_out = n_out;
		ax.taps = 1;
		ax.first = malloc(sizeof(int) * (size_t)n_out);
		ax.count = malloc(sizeof(int) * (size_t)n_out);
		ax.w = malloc(sizeof(float) * (size_t)n_out);
		if (!ax.first || !ax.count || !ax.w) {
			r = -ENOMEM;
			goto out;
		}
		for (int i = 0; i < n_out; i++) {
			ax.first[i] = i;
			ax.count[i] = 1;
			ax.w[i] = 1.0f;
		}
	} else if ((r = image_resize_axis_init(&ax, n_in, n_out)) < 0) {
		goto out;
	}
	ints = sizeof(int32_t) * (size_t)n_out;
	bytes = 2 * ints + sizeof(float) * (size_t)n_out * (size_t)ax.taps;
	host = malloc(bytes);
	if (!host) {
		r = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < n_out; i++) {
		((int32_t *)host)[i] = ax.first[i];
		((int32_t *)(host + ints))[i] = ax.count[i];
	}
	memcpy(host + 2 * ints, ax.w, sizeof(float) * (size_t)n_out * (size_t)ax.taps);
	if ((r = gpu_alloc(g, bytes, (void **)&dev)) < 0)
		goto out;
	if ((r = gpu_copy_to_device(g, dev, host, bytes)) < 0) {
		gpu_free(g, dev);
		goto out;
	}
	*ret = (struct gpu_resize_axis){.n_out = n_out,
					.taps = ax.taps,
					.first = (const int32_t *)dev,
					.count = (const int32_t *)(dev + ints),
					.w = (const float *)(dev + 2 * ints)};
	*ret_mem = dev;
out:
	image_resize_axis_free(&ax);
	free(host);
	return r;
}

/* The image on the device resized to cols x rows tiles at out (engine_vision_preprocess()'s
 * resize, cut and normalisation). */
static int resize_tiles(struct vision_cuda *vc, const uint8_t *rgb, const struct engine_image *img, int ts,
			int cols, int rows, const struct gpu_image_norm *norm, float *out)
{
	struct gpu_resize_axis aw, ah;
	void *mw = NULL, *mh = NULL;
	float *tmp = NULL;
	int r;

	if ((r = upload_axis(vc->g, img->width, cols * ts, &aw, &mw)) < 0 ||
	    (r = upload_axis(vc->g, img->height, rows * ts, &ah, &mh)) < 0 ||
	    (r = gpu_alloc(vc->g, sizeof(float) * 3 * (size_t)img->height * (size_t)cols * ts,
			   (void **)&tmp)) < 0)
		goto out;
	r = gpu_image_resize_tiles(vc->g, rgb, img->width, img->height, &aw, &ah, ts, cols, rows, norm, tmp,
				   out);
out:
	gpu_free(vc->g, tmp);
	gpu_free(vc->g, mw);
	gpu_free(vc->g, mh);
	return r;
}

/* Uploads img and resizes, cuts and normalises its grid's tiles into pix (device, grid->n_tiles
 * tiles). */
static int preprocess_into(struct vision_cuda *vc, const struct engine_image *img,
			   const struct engine_vision_preprocess *p, const struct engine_vision_grid *grid,
			   float *pix)
{
	const int ts = vc->grid * vc->w->patch;
	const size_t rgb_bytes = (size_t)img->width * (size_t)img->height * 3;
	const size_t tile_floats = (size_t)3 * ts * ts;
	struct gpu_image_norm norm;
	uint8_t *rgb = NULL;
	int r;

	for (int c = 0; c < 3; c++) {
		norm.mean[c] = p->mean[c];
		norm.std[c] = p->std[c];
	}
	/* the screenshot crosses the bus once, from page-locked memory; both resizes read it on
	 * the device */
	if (rgb_bytes > vc->rgb_cap) {
		gpu_host_free(vc->g, vc->staging);
		gpu_free(vc->g, vc->rgb);
		vc->staging = vc->rgb = NULL;
		vc->rgb_cap = 0;
		if ((r = gpu_host_alloc(vc->g, rgb_bytes, (void **)&vc->staging)) < 0 ||
		    (r = gpu_alloc(vc->g, rgb_bytes, (void **)&vc->rgb)) < 0)
			return r;
		vc->rgb_cap = rgb_bytes;
	}
	rgb = vc->rgb;
	memcpy(vc->staging, img->rgb, rgb_bytes);
	if ((r = gpu_copy_to_device(vc->g, rgb, vc->staging, rgb_bytes)) < 0)
		return r;
	if (grid->cols * grid->rows == 1) {
		r = resize_tiles(vc, rgb, img, ts, 1, 1, &norm, pix);
	} else {
		r = resize_tiles(vc, rgb, img, ts, grid->cols, grid->rows, &norm, pix);
		if (r == 0 && grid->thumbnail)
			r = resize_tiles(vc, rgb, img, ts, 1, 1, &norm,
					 pix + (size_t)(grid->n_tiles - 1) * tile_floats);
	}
	return r;
}

/* The grid engine_vision_preprocess() chooses for img with p, after checking p against the
 * encoder. */
static int preprocess_grid(struct vision_cuda *vc, const struct engine_image *img,
			   const struct engine_vision_preprocess *p, struct engine_vision_grid *ret)
{
	const int ts = vc->grid * vc->w->patch;

	if (!img || !img->rgb || !p || p->tile_size != ts)
		return -EINVAL;
	for (int c = 0; c < 3; c++)
		if (!(p->std[c] != 0.0f) || !isfinite(p->std[c]) || !isfinite(p->mean[c]))
			return -EINVAL;
	return engine_vision_select_grid(img->width, img->height, ts, p->max_tiles, p->use_thumbnail, ret);
}

int vision_cuda_preprocess(struct vision_cuda *vc, const struct engine_image *img,
			   const struct engine_vision_preprocess *p, struct engine_vision_grid *ret_grid)
{
	struct engine_vision_grid grid;
	int r;

	if (!ret_grid)
		return -EINVAL;
	if ((r = preprocess_grid(vc, img, p, &grid)) < 0 || (r = alloc_buffers(vc, grid.n_tiles)) < 0 ||
	    (r = preprocess_into(vc, img, p, &grid, vc->pix)) < 0)
		return r;
	vc->n_pix = grid.n_tiles;
	*ret_grid = grid;
	return 0;
}

int vision_cuda_preprocess_to(struct vision_cuda *vc, const struct engine_image *img,
			      const struct engine_vision_preprocess *p, int n_tiles, float *pix)
{
	struct engine_vision_grid grid;
	int r;

	if (!pix)
		return -EINVAL;
	if ((r = preprocess_grid(vc, img, p, &grid)) < 0)
		return r;
	if (grid.n_tiles != n_tiles)
		return -EINVAL;
	return preprocess_into(vc, img, p, &grid, pix);
}

int vision_cuda_download_pixels(struct vision_cuda *vc, int n_tiles, float *pixels)
{
	size_t tile_floats = (size_t)3 * vc->n * vc->w->patch * vc->w->patch;

	if (!pixels || n_tiles < 1 || n_tiles > vc->n_pix)
		return -EINVAL;
	return gpu_copy_to_host(vc->g, pixels, vc->pix, sizeof(float) * tile_floats * (size_t)n_tiles);
}

int vision_cuda_encode_image(struct vision_cuda *vc, const struct engine_image *img,
			     const struct engine_vision_preprocess *p, struct engine_vision_grid *ret_grid,
			     const float **ret_rows)
{
	struct engine_vision_grid grid;
	int r;

	if (!ret_rows || !ret_grid)
		return -EINVAL;
	if ((r = vision_cuda_preprocess(vc, img, p, &grid)) < 0 ||
	    (r = run(vc, grid.n_tiles, vc->pix, vc->rows)) < 0)
		return r;
	*ret_grid = grid;
	*ret_rows = vc->rows;
	return 0;
}

int vision_cuda_encode_tiles(struct vision_cuda *vc, const float *pix, int n_tiles, float *out)
{
	int r;

	if (!pix || !out || n_tiles < 1 || n_tiles > VISION_CUDA_MAX_TILES)
		return -EINVAL;
	if ((r = alloc_buffers(vc, n_tiles)) < 0)
		return r;
	return run(vc, n_tiles, pix, out);
}
