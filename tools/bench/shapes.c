/* holo-bench's models from a config.json's shapes (shapes.h). */
#include "shapes.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "lm.h"

#define MAX_CONFIG_BYTES (1u << 20)

/* ViT shapes timm names; config.json gives only the name. */
static const struct {
	const char *name;
	int width, depth, mlp, heads;
} vits[] = {
	{"vit_huge_patch16_224", 1280, 32, 5120, 16},
	{"vit_tiny_test", 64, 2, 256, 4}, /* the test fixtures' (tools/gen_tiny_vision.py) */
};

static int get_int(const json_t *o, const char *key, int *ret)
{
	double v;
	if (model_config_number(o, key, &v) < 0 || v != floor(v) || v < 1 || v > 1e9)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

/* The ViT and projector shapes of a NemotronH_Nano_VL_V2 config.json. */
static int vit_from_config(const json_t *root, struct bench_shapes *s, char *err, size_t errlen)
{
	const json_t *vc = json_object_get(root, "vision_config");
	const json_t *args = vc ? json_object_get(vc, "args") : NULL;
	const char *model = args ? json_string_value(json_object_get(args, "model")) : NULL;
	struct roofline_vit *v = &s->vit;
	double ratio;
	size_t i;

	if (!model) {
		snprintf(err, errlen, "no vision_config.args.model");
		return -EINVAL;
	}
	for (i = 0; i < ARRAY_SIZE(vits); i++)
		if (strcmp(vits[i].name, model) == 0)
			break;
	if (i == ARRAY_SIZE(vits)) {
		snprintf(err, errlen, "ViT '%s' has no known depth and MLP width", model);
		return -EINVAL;
	}
	*v = (struct roofline_vit){.width = vits[i].width, .depth = vits[i].depth, .mlp = vits[i].mlp};
	s->vit_heads = vits[i].heads;
	if (json_object_get(vc, "num_attention_heads") &&
	    get_int(vc, "num_attention_heads", &s->vit_heads) < 0) {
		snprintf(err, errlen, "vision_config.num_attention_heads is not a count");
		return -EINVAL;
	}
	int width, reg = 1, cpe = 0;
	if (get_int(root, "vit_hidden_size", &width) < 0 || width != v->width ||
	    get_int(root, "force_image_size", &v->tile) < 0 || get_int(root, "patch_size", &v->patch) < 0 ||
	    get_int(root, "projector_hidden_size", &v->proj_hidden) < 0 ||
	    model_config_number(root, "downsample_ratio", &ratio) < 0 || ratio <= 0 || ratio > 1) {
		snprintf(err, errlen,
			 "vit_hidden_size (%d for %s), force_image_size, patch_size, "
			 "projector_hidden_size or downsample_ratio missing or out of range",
			 v->width, model);
		return -EINVAL;
	}
	v->shuffle = (int)lround(1 / ratio);
	if (v->tile % (v->patch * v->shuffle)) {
		snprintf(err, errlen, "tile %d is not a multiple of patch %d x shuffle %d", v->tile, v->patch,
			 v->shuffle);
		return -EINVAL;
	}
	/* a class token per teacher (or one), padded with registers to register_multiple */
	const json_t *teachers = json_object_get(args, "teachers");
	int n_cls = json_is_true(json_object_get(args, "cls_token_per_teacher")) && teachers ?
			    (int)json_array_size(teachers) :
			    1;
	if (json_object_get(args, "register_multiple") && get_int(args, "register_multiple", &reg) < 0) {
		snprintf(err, errlen, "vision_config.args.register_multiple is not a count");
		return -EINVAL;
	}
	v->prefix = (n_cls + reg - 1) / reg * reg;
	/* the position grid RADIO's CPE interpolates from (only a random tower needs it) */
	if (json_object_get(args, "cpe_max_size") &&
	    (get_int(args, "cpe_max_size", &cpe) < 0 || cpe % v->patch)) {
		snprintf(err, errlen,
			 "vision_config.args.cpe_max_size is not a multiple of the "
			 "patch %d",
			 v->patch);
		return -EINVAL;
	}
	s->pos_grid = cpe / v->patch;
	s->max_tiles = 12;
	if (json_object_get(root, "max_num_tiles") && get_int(root, "max_num_tiles", &s->max_tiles) < 0) {
		snprintf(err, errlen, "max_num_tiles is not a count");
		return -EINVAL;
	}
	s->use_thumbnail = !json_is_false(json_object_get(root, "use_thumbnail"));
	int id;
	s->image_token = get_int(root, "img_context_token_id", &id) == 0 ? id : -ENOENT;
	return 0;
}

int bench_shapes_read(const char *path, struct bench_shapes *ret, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rbe");
	if (!f) {
		int r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	char *buf = xmalloc(MAX_CONFIG_BYTES + 1);
	size_t len = fread(buf, 1, MAX_CONFIG_BYTES + 1, f);
	int r = ferror(f) ? -EIO : len > MAX_CONFIG_BYTES ? -EFBIG : 0;
	fclose(f);
	char why[256] = "";
	json_t *root = NULL;
	memset(ret, 0, sizeof(*ret));
	if (r == 0)
		r = model_config_load_json(buf, len, &root, why, sizeof(why));
	if (r >= 0)
		r = model_config_from_json(root, &ret->mc, why, sizeof(why));
	if (r >= 0 && ret->mc.vocab_size < 1)
		r = -EINVAL, snprintf(why, sizeof(why), "no vocab_size");
	if (r >= 0)
		ret->has_vision = vit_from_config(root, ret, ret->vision_err, sizeof(ret->vision_err)) == 0;
	if (r < 0)
		snprintf(err, errlen, "%s: %s", path, why[0] ? why : strerror(-r));
	json_decref(root);
	free(buf);
	return r < 0 ? r : 0;
}

void bench_shapes_roofline_lm(const struct bench_shapes *s, struct roofline_lm *ret)
{
	const struct lm_config *l = &s->mc.lm;
	*ret = (struct roofline_lm){
		.pattern = l->pattern,
		.hidden = l->hidden,
		.vocab = s->mc.vocab_size,
		.intermediate = l->intermediate,
		.n_heads = l->n_heads,
		.n_kv_heads = l->n_kv_heads,
		.head_dim = l->head_dim,
		.m_heads = l->m_heads,
		.m_head_dim = l->m_head_dim,
		.m_groups = l->m_groups,
		.m_state = l->m_state,
		.m_conv_kernel = l->m_conv_kernel,
		.weight_bytes = 2,
		.state_bytes = 4,
		.kv_bytes = 2,
	};
}

void bench_shapes_lm_spec(const struct bench_shapes *s, struct lm_random_spec *ret)
{
	const struct lm_config *l = &s->mc.lm;
	*ret = (struct lm_random_spec){
		.pattern = l->pattern,
		.hidden = l->hidden,
		.vocab = s->mc.vocab_size,
		.intermediate = l->intermediate,
		.n_heads = l->n_heads,
		.n_kv_heads = l->n_kv_heads,
		.head_dim = l->head_dim,
		.m_heads = l->m_heads,
		.m_head_dim = l->m_head_dim,
		.m_groups = l->m_groups,
		.m_state = l->m_state,
		.m_conv_kernel = l->m_conv_kernel,
		.m_chunk = l->m_chunk,
		.dtype = TENSOR_BF16,
		.seed = 1,
	};
}

void bench_shapes_vision_spec(const struct bench_shapes *s, struct lm_random_vision_spec *ret)
{
	*ret = (struct lm_random_vision_spec){
		.width = s->vit.width,
		.depth = s->vit.depth,
		.heads = s->vit_heads,
		.mlp = s->vit.mlp,
		.patch = s->vit.patch,
		.n_prefix = s->vit.prefix,
		.pos_grid = s->pos_grid,
		.shuffle = s->vit.shuffle,
		.proj_hidden = s->vit.proj_hidden,
		.image_token = s->image_token,
		.seed = 2,
	};
	engine_vision_preprocess_defaults(&ret->pre);
	ret->pre.tile_size = s->vit.tile;
	ret->pre.max_tiles = s->max_tiles;
	ret->pre.use_thumbnail = s->use_thumbnail;
}

struct engine_image *bench_synthetic_screen(int w, int h)
{
	size_t stride = (size_t)w * 3;
	uint8_t *px = malloc(stride * (size_t)h);
	if (!px)
		return NULL;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			uint8_t *p = px + (size_t)y * stride + (size_t)x * 3;
			bool line = x % 97 == 0 || y % 61 == 0;
			p[0] = line ? 20 : (uint8_t)(x * 255 / w);
			p[1] = line ? 20 : (uint8_t)(y * 255 / h);
			p[2] = line ? 20 : (uint8_t)((x ^ y) & 0xff);
		}
	struct engine_image *img = engine_image_from_rgb(w, h, stride, px);
	free(px);
	return img;
}
