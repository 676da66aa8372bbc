/* engine: the vision tower's and projector's tensors, found by name in the checkpoint and
 * checked against each other and config.json (model.md 1.1, 1.3, 3.2, 3.3). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "loader.h"
#include "quant.h"
#include "vision_weights.h"

static void shape_str(const struct tensor *t, char *buf, size_t len)
{
	size_t o = 0;

	o += (size_t)snprintf(buf + o, len - o, "[");
	for (int i = 0; i < t->ndim && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

/* Checks that t is present with shape [d0] (d1 < 0) or [d0, d1]. */
static int want(const struct tensor *t, const char *name, int64_t d0, int64_t d1, char *errbuf, size_t errlen)
{
	int ndim = d1 < 0 ? 1 : 2;
	char got[96];

	if (!t->data)
		return st_errorf(errbuf, errlen, -EINVAL, "vision tensor '%s' is missing", name);
	if (t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1))
		return 0;
	shape_str(t, got, sizeof(got));
	if (ndim == 1)
		return st_errorf(errbuf, errlen, -EINVAL, "vision tensor '%s' has shape %s, expected [%lld]",
				 name, got, (long long)d0);
	return st_errorf(errbuf, errlen, -EINVAL, "vision tensor '%s' has shape %s, expected [%lld, %lld]",
			 name, got, (long long)d0, (long long)d1);
}

static bool dim_ok(int64_t d, int64_t max)
{
	return d >= 1 && d <= max;
}

int vision_weights_check(struct vision_weights *w, char *errbuf, size_t errlen)
{
	char name[128], got[96];
	int64_t D, in, p, grid, side, M;
	int r;

	if (!w->embedder.data || w->embedder.ndim != 2)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "vision tensor 'patch_generator.embedder.weight' is missing or not 2-D");
	D = w->embedder.shape[0];
	in = w->embedder.shape[1];
	if (!dim_ok(D, VISION_MAX_DIM))
		return st_errorf(errbuf, errlen, -EFBIG, "vision width %lld is over the limit of %d",
				 (long long)D, VISION_MAX_DIM);
	p = (int64_t)llround(sqrt((double)in / 3.0));
	if (p < 1 || 3 * p * p != in || p > VISION_MAX_PATCH)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "patch embedder has %lld inputs, not 3 x patch^2 for a patch of at most %d",
				 (long long)in, VISION_MAX_PATCH);
	if (w->patch && w->patch != p)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config patch_size %d does not match the embedder's %lld inputs", w->patch,
				 (long long)in);
	w->patch = (int)p;
	w->width = (int)D;

	if (!w->pos_embed.data)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "vision tensor 'patch_generator.pos_embed' is missing");
	shape_str(&w->pos_embed, got, sizeof(got));
	if (!((w->pos_embed.ndim == 3 && w->pos_embed.shape[0] == 1 && w->pos_embed.shape[2] == D) ||
	      (w->pos_embed.ndim == 2 && w->pos_embed.shape[1] == D)))
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"vision tensor 'patch_generator.pos_embed' has shape %s, expected [1, N, %lld]", got,
			(long long)D);
	grid = w->pos_embed.shape[w->pos_embed.ndim - 2];
	side = (int64_t)llround(sqrt((double)grid));
	if (side * side != grid)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "position embedding has %lld entries, not a square grid", (long long)grid);
	if (side > VISION_MAX_POS_GRID)
		return st_errorf(errbuf, errlen, -EFBIG, "position grid %lldx%lld is over the limit of %d",
				 (long long)side, (long long)side, VISION_MAX_POS_GRID);
	w->pos_rows = w->pos_cols = (int)side;

	if (!w->cls_token.data || w->cls_token.ndim != 2 || w->cls_token.shape[1] != D ||
	    w->cls_token.shape[0] < 1)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"vision tensor 'patch_generator.cls_token.token' is missing or not [T, %lld]",
			(long long)D);
	if (w->cls_token.shape[0] > VISION_MAX_PREFIX)
		return st_errorf(errbuf, errlen, -EFBIG, "%lld prefix tokens are over the limit of %d",
				 (long long)w->cls_token.shape[0], VISION_MAX_PREFIX);
	w->n_prefix = (int)w->cls_token.shape[0];

	if (w->heads < 1 || D % w->heads != 0)
		return st_errorf(errbuf, errlen, -EINVAL, "vision width %lld is not divisible into %d heads",
				 (long long)D, w->heads);
	w->head_dim = (int)(D / w->heads);
	if (w->depth < 1 || w->depth > VISION_MAX_DEPTH || !w->blocks)
		return st_errorf(errbuf, errlen, -EINVAL, "vision tower has %d blocks", w->depth);

	M = w->blocks[0].fc1_w.data && w->blocks[0].fc1_w.ndim == 2 ? w->blocks[0].fc1_w.shape[0] : 0;
	if (!dim_ok(M, VISION_MAX_DIM))
		return st_errorf(errbuf, errlen, M ? -EFBIG : -EINVAL,
				 "vision MLP size %lld is missing or over the limit of %d", (long long)M,
				 VISION_MAX_DIM);
	w->mlp = (int)M;
	for (int i = 0; i < w->depth; i++) {
		const struct vision_block *b = &w->blocks[i];
		const struct {
			const struct tensor *t;
			const char *suffix;
			int64_t d0, d1;
		} checks[] = {
			{&b->norm1_w, "norm1.weight", D, -1},	  {&b->norm1_b, "norm1.bias", D, -1},
			{&b->qkv_w, "attn.qkv.weight", 3 * D, D}, {&b->qkv_b, "attn.qkv.bias", 3 * D, -1},
			{&b->proj_w, "attn.proj.weight", D, D},	  {&b->proj_b, "attn.proj.bias", D, -1},
			{&b->norm2_w, "norm2.weight", D, -1},	  {&b->norm2_b, "norm2.bias", D, -1},
			{&b->fc1_w, "mlp.fc1.weight", M, D},	  {&b->fc1_b, "mlp.fc1.bias", M, -1},
			{&b->fc2_w, "mlp.fc2.weight", D, M},	  {&b->fc2_b, "mlp.fc2.bias", D, -1},
		};

		for (size_t k = 0; k < ARRAY_SIZE(checks); k++) {
			snprintf(name, sizeof(name), "blocks.%d.%s", i, checks[k].suffix);
			r = want(checks[k].t, name, checks[k].d0, checks[k].d1, errbuf, errlen);
			if (r < 0)
				return r;
		}
	}
	if (!!w->norm_w.data != !!w->norm_b.data)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "the final vision norm has only one of weight and bias");
	if (w->norm_w.data) {
		if ((r = want(&w->norm_w, "norm.weight", D, -1, errbuf, errlen)) < 0 ||
		    (r = want(&w->norm_b, "norm.bias", D, -1, errbuf, errlen)) < 0)
			return r;
	}

	if (w->shuffle < 1 || w->shuffle > 8)
		return st_errorf(errbuf, errlen, -EINVAL, "pixel-shuffle factor %d is not supported",
				 w->shuffle);
	w->proj_in = (int)D * w->shuffle * w->shuffle;
	if ((r = want(&w->mlp1_norm, "mlp1.0.weight", w->proj_in, -1, errbuf, errlen)) < 0)
		return r;
	if (!w->mlp1_fc1.data || w->mlp1_fc1.ndim != 2 || !dim_ok(w->mlp1_fc1.shape[0], VISION_MAX_DIM))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "vision tensor 'mlp1.1.weight' is missing or too large");
	w->proj_hidden = (int)w->mlp1_fc1.shape[0];
	if ((r = want(&w->mlp1_fc1, "mlp1.1.weight", w->proj_hidden, w->proj_in, errbuf, errlen)) < 0)
		return r;
	if (!w->mlp1_fc3.data || w->mlp1_fc3.ndim != 2 || !dim_ok(w->mlp1_fc3.shape[0], VISION_MAX_DIM))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "vision tensor 'mlp1.3.weight' is missing or too large");
	w->out_dim = (int)w->mlp1_fc3.shape[0];
	return want(&w->mlp1_fc3, "mlp1.3.weight", w->out_dim, w->proj_hidden, errbuf, errlen);
}

void vision_weights_finish(struct vision_weights *w)
{
	free(w->blocks);
	w->blocks = NULL;
}

/* Heads of the timm ViTs RADIO is built on, for configs that only name the model. */
static const struct {
	const char *prefix;
	int heads;
} timm_heads[] = {
	{"vit_huge_", 16}, {"vit_large_", 16}, {"vit_base_", 12}, {"vit_small_", 6}, {"vit_tiny_", 3},
};

static int config_heads(const json_t *root, int *ret, char *errbuf, size_t errlen)
{
	const json_t *vc = json_object_get(root, "vision_config");
	const json_t *args = vc ? json_object_get(vc, "args") : NULL;
	const json_t *model = args ? json_object_get(args, "model") : NULL;
	const char *name;
	double v;

	if (vc && model_config_number(vc, "num_attention_heads", &v) == 0) {
		if (v < 1 || v > 4096 || v != floor(v))
			return st_errorf(errbuf, errlen, -EINVAL,
					 "vision_config.num_attention_heads is not a head count");
		*ret = (int)v;
		return 0;
	}
	name = json_is_string(model) ? json_string_value(model) : NULL;
	if (name)
		for (size_t i = 0; i < ARRAY_SIZE(timm_heads); i++)
			if (strncmp(name, timm_heads[i].prefix, strlen(timm_heads[i].prefix)) == 0) {
				*ret = timm_heads[i].heads;
				return 0;
			}
	return st_errorf(errbuf, errlen, -EINVAL,
			 "config.json: cannot tell the vision heads (no vision_config.num_attention_heads, "
			 "vision_config.args.model '%s' unknown)",
			 name ? name : "(none)");
}

static int config_shuffle(const json_t *root, int *ret, char *errbuf, size_t errlen)
{
	const json_t *ps = json_object_get(root, "ps_version");
	double ratio = 0.5;
	int r;

	if (ps && !(json_is_string(ps) && strcmp(json_string_value(ps), "v2") == 0))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: ps_version %s is not supported (only \"v2\")",
				 json_is_string(ps) ? json_string_value(ps) : "(not a string)");
	r = model_config_number(root, "downsample_ratio", &ratio);
	if (r < 0 && r != -ENOENT)
		return st_errorf(errbuf, errlen, r, "config.json: downsample_ratio is not a number");
	if (!(ratio > 0) || fabs(1.0 / ratio - round(1.0 / ratio)) > 1e-9 || round(1.0 / ratio) > 8)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: downsample_ratio %g is not 1/k for a small k", ratio);
	*ret = (int)round(1.0 / ratio);
	return 0;
}

static int find(const struct model_files *files, const char *name, struct tensor *t, bool optional,
		char *errbuf, size_t errlen)
{
	int r = model_files_find(files, name, t);

	if (r == -ENOENT && optional) {
		memset(t, 0, sizeof(*t));
		return 0;
	}
	if (r < 0)
		return st_errorf(errbuf, errlen, r, "vision tensor '%s' is missing", name);
	return 0;
}

int vision_weights_load(struct vision_weights *w, const struct model_files *files, char *errbuf, size_t errlen)
{
	const json_t *root = model_files_config_json(files);
	struct tensor probe;
	char name[192];
	double patch = 0;
	int r, depth = 0;

	memset(w, 0, sizeof(*w));
	if (model_files_find(files, VISION_PREFIX "patch_generator.embedder.weight", &probe) == -ENOENT)
		return st_errorf(errbuf, errlen, -ENOENT, "the checkpoint has no vision tower");
	if (!root)
		return st_errorf(errbuf, errlen, -EINVAL, "config.json is not available");
	if ((r = config_heads(root, &w->heads, errbuf, errlen)) < 0 ||
	    (r = config_shuffle(root, &w->shuffle, errbuf, errlen)) < 0)
		return r;
	if (model_config_number(root, "patch_size", &patch) == 0) {
		if (!(patch >= 1 && patch <= VISION_MAX_PATCH && patch == floor(patch)))
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: patch_size %g is not supported", patch);
		w->patch = (int)patch;
	}

	while (depth <= VISION_MAX_DEPTH) {
		snprintf(name, sizeof(name), VISION_PREFIX "blocks.%d.norm1.weight", depth);
		if (model_files_find(files, name, &probe) < 0)
			break;
		depth++;
	}
	if (depth > VISION_MAX_DEPTH)
		return st_errorf(errbuf, errlen, -EFBIG, "the vision tower has more than %d blocks",
				 VISION_MAX_DEPTH);
	if (depth == 0)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "vision tensor '" VISION_PREFIX "blocks.0.norm1.weight' is missing");
	w->depth = depth;
	w->blocks = calloc((size_t)depth, sizeof(*w->blocks));
	if (!w->blocks)
		return st_errorf(errbuf, errlen, -ENOMEM, "out of memory");

	if ((r = find(files, VISION_PREFIX "patch_generator.embedder.weight", &w->embedder, false, errbuf,
		      errlen)) < 0 ||
	    (r = find(files, VISION_PREFIX "patch_generator.pos_embed", &w->pos_embed, false, errbuf,
		      errlen)) < 0 ||
	    (r = find(files, VISION_PREFIX "patch_generator.cls_token.token", &w->cls_token, false, errbuf,
		      errlen)) < 0 ||
	    (r = find(files, VISION_PREFIX "norm.weight", &w->norm_w, true, errbuf, errlen)) < 0 ||
	    (r = find(files, VISION_PREFIX "norm.bias", &w->norm_b, true, errbuf, errlen)) < 0 ||
	    (r = find(files, "mlp1.0.weight", &w->mlp1_norm, false, errbuf, errlen)) < 0 ||
	    (r = find(files, "mlp1.1.weight", &w->mlp1_fc1, false, errbuf, errlen)) < 0 ||
	    (r = find(files, "mlp1.3.weight", &w->mlp1_fc3, false, errbuf, errlen)) < 0)
		goto fail;
	for (int i = 0; i < depth; i++) {
		struct vision_block *b = &w->blocks[i];
		const struct {
			struct tensor *t;
			const char *suffix;
		} names[] = {
			{&b->norm1_w, "norm1.weight"},	  {&b->norm1_b, "norm1.bias"},
			{&b->qkv_w, "attn.qkv.weight"},	  {&b->qkv_b, "attn.qkv.bias"},
			{&b->proj_w, "attn.proj.weight"}, {&b->proj_b, "attn.proj.bias"},
			{&b->norm2_w, "norm2.weight"},	  {&b->norm2_b, "norm2.bias"},
			{&b->fc1_w, "mlp.fc1.weight"},	  {&b->fc1_b, "mlp.fc1.bias"},
			{&b->fc2_w, "mlp.fc2.weight"},	  {&b->fc2_b, "mlp.fc2.bias"},
		};

		for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
			snprintf(name, sizeof(name), VISION_PREFIX "blocks.%d.%s", i, names[k].suffix);
			if ((r = find(files, name, names[k].t, false, errbuf, errlen)) < 0)
				goto fail;
		}
	}
	r = vision_weights_check(w, errbuf, errlen);
	if (r < 0)
		goto fail;
	return 0;
fail:
	vision_weights_finish(w);
	return r;
}

/* ---- position embedding ---------------------------------------------------------------------- */

/* n values of t from element `offset` on, as fp32: F32, BF16 or F16 (each exact). */
static void tensor_to_f32(const struct tensor *t, size_t offset, size_t n, float *dst)
{
	if (t->dtype == TENSOR_BF16) {
		for (size_t i = 0; i < n; i++)
			dst[i] = bf16_to_f32(((const uint16_t *)t->data)[offset + i]);
	} else if (t->dtype == TENSOR_F16) {
		for (size_t i = 0; i < n; i++)
			dst[i] = quant_f16_to_f32(((const uint16_t *)t->data)[offset + i]);
	} else {
		memcpy(dst, (const float *)t->data + offset, n * sizeof(float));
	}
}

/* torch's upsample_bilinear2d (align_corners=False) source index and weight for one axis. */
static void linear_tap(int n_in, int n_out, int i, int *ret_i0, int *ret_i1, float *ret_l1)
{
	float scale = (float)n_in / (float)n_out;
	float src = scale * ((float)i + 0.5f) - 0.5f;
	int i0;
	float l1;

	if (src < 0.0f)
		src = 0.0f;
	i0 = MIN((int)floorf(src), n_in - 1);
	l1 = CLAMP(src - (float)i0, 0.0f, 1.0f);
	*ret_i0 = i0;
	*ret_i1 = i0 + (i0 < n_in - 1 ? 1 : 0);
	*ret_l1 = l1;
}

int vision_pos_embed(const struct vision_weights *w, int rows, int cols, float *dst)
{
	size_t D = (size_t)w->width;
	int m = MAX(rows, cols);
	float *cell;

	if (rows < 1 || cols < 1 || !dst)
		return -EINVAL;
	if (rows == w->pos_rows && cols == w->pos_cols) {
		tensor_to_f32(&w->pos_embed, 0, (size_t)rows * (size_t)cols * D, dst);
		return 0;
	}
	cell = malloc(sizeof(float) * 4 * D);
	if (!cell)
		return -ENOMEM;
	/* In CPE mode the grid is resized to m x m and the top-left rows x cols window is kept
	 * (a final resize to rows x cols would be a no-op then). */
	for (int i = 0; i < rows; i++) {
		int y0, y1;
		float ly;

		linear_tap(w->pos_rows, m, i, &y0, &y1, &ly);
		for (int j = 0; j < cols; j++) {
			int x0, x1;
			float lx;
			float *o = dst + ((size_t)i * (size_t)cols + (size_t)j) * D;

			linear_tap(w->pos_cols, m, j, &x0, &x1, &lx);
			tensor_to_f32(&w->pos_embed, ((size_t)y0 * w->pos_cols + x0) * D, D, cell);
			tensor_to_f32(&w->pos_embed, ((size_t)y0 * w->pos_cols + x1) * D, D, cell + D);
			tensor_to_f32(&w->pos_embed, ((size_t)y1 * w->pos_cols + x0) * D, D, cell + 2 * D);
			tensor_to_f32(&w->pos_embed, ((size_t)y1 * w->pos_cols + x1) * D, D, cell + 3 * D);
			/* torch's order: the width taps inside, then the height taps, multiply-adds fused */
			for (size_t d = 0; d < D; d++) {
				float top = fmaf(cell[D + d], lx, cell[d] * (1.0f - lx));
				float bot = fmaf(cell[3 * D + d], lx, cell[2 * D + d] * (1.0f - lx));

				o[d] = fmaf(bot, ly, top * (1.0f - ly));
			}
		}
	}
	free(cell);
	return 0;
}
