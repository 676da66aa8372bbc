/* engine: the public vision handle: image -> tiles -> ViT -> projector rows for the language
 * model (model.md 4).
 *
 * DESIGN (threads): a struct engine_vision is immutable after engine_vision_create() (its
 * position embedding for the tile size is computed there, once); the encode functions allocate
 * their buffers per call and run the ops they are handed (select/select_vision.c: a backend's,
 * or the host's, whose work runs on the CPU pool), so several threads may encode at once (the
 * pool serialises their jobs).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "backend.h"
#include "image.h"
#include "loader.h"
#include "vision.h"

#define VISION_PREPROCESSOR_MAX_BYTES (1u << 20) /* preprocessor_config.json size */

struct engine_vision {
	struct vision_weights w;
	int32_t image_token; /* config's img_context_token_id, or -ENOENT */
	struct engine_vision_preprocess pre;
	int grid; /* patches per tile side */
	int tokens_per_tile;
	float *pos;			   /* position embedding of a grid x grid tile */
	uint64_t id;			   /* unique per handle in the process (engine_vision_id()) */
	void *owned;			   /* the tensors' memory of a tower built in memory, else NULL */
	struct backend_vision_tower tower; /* what the backends' vision ops read (vision_tower()) */
};

static _Atomic uint64_t next_vision_id = 1;

/* The preprocessing fields of a config object, on top of what *p holds: `size_key`
 * (config.json's force_image_size, preprocessor_config.json's image_size), max_num_tiles,
 * use_thumbnail, norm_mean, norm_std. `file` names the file in messages. */
static int read_preprocess(const json_t *root, const char *file, const char *size_key,
			   struct engine_vision_preprocess *p, char *errbuf, size_t errlen)
{
	const struct {
		const char *key;
		float *dst;
	} vecs[] = {{"norm_mean", p->mean}, {"norm_std", p->std}};
	const json_t *thumb = json_object_get(root, "use_thumbnail");
	double v;
	int r;

	if (!json_is_object(root))
		return st_errorf(errbuf, errlen, -EINVAL, "%s: not a JSON object", file);
	r = model_config_number(root, size_key, &v);
	if (r == 0) {
		if (!(v >= 1 && v <= ENGINE_VISION_MAX_TILE_SIZE && v == floor(v)))
			return st_errorf(errbuf, errlen, -EINVAL, "%s: %s %g is not supported", file,
					 size_key, v);
		p->tile_size = (int)v;
	} else if (r != -ENOENT) {
		return st_errorf(errbuf, errlen, -EINVAL, "%s: %s is not a number", file, size_key);
	}
	r = model_config_number(root, "max_num_tiles", &v);
	if (r == 0) {
		if (!(v >= 1 && v <= ENGINE_VISION_MAX_TILES && v == floor(v)))
			return st_errorf(errbuf, errlen, -EINVAL, "%s: max_num_tiles %g is outside 1..%d",
					 file, v, ENGINE_VISION_MAX_TILES);
		p->max_tiles = (int)v;
	} else if (r != -ENOENT) {
		return st_errorf(errbuf, errlen, -EINVAL, "%s: max_num_tiles is not a number", file);
	}
	if (thumb) {
		if (!json_is_boolean(thumb))
			return st_errorf(errbuf, errlen, -EINVAL, "%s: use_thumbnail is not a boolean", file);
		p->use_thumbnail = json_is_true(thumb);
	}
	for (size_t k = 0; k < ARRAY_SIZE(vecs); k++) {
		const json_t *a = json_object_get(root, vecs[k].key);

		if (!a)
			continue;
		if (!json_is_array(a) || json_array_size(a) != 3)
			return st_errorf(errbuf, errlen, -EINVAL, "%s: %s is not 3 numbers", file,
					 vecs[k].key);
		for (size_t c = 0; c < 3; c++) {
			const json_t *e = json_array_get(a, c);

			if (!json_is_number(e) || !isfinite(json_number_value(e)) ||
			    (vecs[k].dst == p->std && !(json_number_value(e) > 0)))
				return st_errorf(errbuf, errlen, -EINVAL, "%s: %s[%zu] is not usable", file,
						 vecs[k].key, c);
			vecs[k].dst[c] = (float)json_number_value(e);
		}
	}
	return 0;
}

/* img_context_token_id (older configs: image_context_token_id), when the config has one. */
static int config_image_token(const json_t *root, int32_t *ret, char *errbuf, size_t errlen)
{
	static const char *const keys[] = {"img_context_token_id", "image_context_token_id"};
	double id;

	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		int r = model_config_number(root, keys[k], &id);

		if (r == -ENOENT)
			continue;
		if (r < 0 || !(id >= 0 && id < (double)INT32_MAX && id == floor(id)))
			return st_errorf(errbuf, errlen, -EINVAL, "config.json: %s is not a token id",
					 keys[k]);
		*ret = (int32_t)id;
		return 0;
	}
	*ret = -ENOENT;
	return 0;
}

void engine_vision_destroy(struct engine_vision *v)
{
	if (!v)
		return;
	vision_weights_finish(&v->w);
	free(v->pos);
	free(v->owned);
	free(v);
}

/* What every handle derives once its weights, preprocessing and image token are set: the
 * projector's width against the LM's, the tile grid and its position embedding, the id. */
static int vision_finish_create(struct engine_vision *v, int lm_hidden, char *errbuf, size_t errlen)
{
	if (v->w.out_dim != lm_hidden)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "the projector gives %d-wide embeddings, the language model takes %d",
				 v->w.out_dim, lm_hidden);
	if (v->pre.tile_size % (v->w.patch * v->w.shuffle) != 0)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "tile size %d is not a multiple of patch %d x pixel-shuffle %d",
				 v->pre.tile_size, v->w.patch, v->w.shuffle);
	v->grid = v->pre.tile_size / v->w.patch;
	v->tokens_per_tile = (v->grid / v->w.shuffle) * (v->grid / v->w.shuffle);
	v->pos = malloc(sizeof(float) * (size_t)v->grid * v->grid * v->w.width);
	if (!v->pos)
		return st_errorf(errbuf, errlen, -ENOMEM, "out of memory");
	int r = vision_pos_embed(&v->w, v->grid, v->grid, v->pos);
	if (r < 0)
		return st_errorf(errbuf, errlen, r, "position embedding: %s", strerror(-r));
	v->id = atomic_fetch_add(&next_vision_id, 1);
	v->tower = (struct backend_vision_tower){.w = &v->w,
						 .id = v->id,
						 .grid = v->grid,
						 .tokens_per_tile = v->tokens_per_tile,
						 .pos = v->pos,
						 .pre = &v->pre};
	return 0;
}

struct engine_vision *vision_create_from_weights(struct vision_weights *w, void *owned,
						 const struct engine_vision_preprocess *pre,
						 int32_t image_token, int lm_hidden, char *errbuf,
						 size_t errlen)
{
	struct engine_vision *v = calloc(1, sizeof(*v));
	int r;

	if (!v) {
		vision_weights_finish(w);
		free(owned);
		errno = ENOMEM;
		st_errorf(errbuf, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	v->w = *w;
	w->blocks = NULL; /* the handle's now */
	v->owned = owned;
	v->image_token = image_token;
	v->pre = *pre;
	r = vision_weights_check(&v->w, errbuf, errlen);
	if (r >= 0 && (pre->tile_size < 1 || pre->tile_size > ENGINE_VISION_MAX_TILE_SIZE ||
		       pre->max_tiles < 1 || pre->max_tiles > ENGINE_VISION_MAX_TILES))
		r = st_errorf(errbuf, errlen, -EINVAL, "tile size %d or tile budget %d out of range",
			      pre->tile_size, pre->max_tiles);
	if (r >= 0)
		r = vision_finish_create(v, lm_hidden, errbuf, errlen);
	if (r < 0) {
		engine_vision_destroy(v);
		errno = -r;
		return NULL;
	}
	return v;
}

struct engine_vision *engine_vision_create(const struct engine_model *model, char *errbuf, size_t errlen)
{
	struct engine_vision *v;
	int r;

	if (!model || !model->files) {
		errno = EINVAL;
		st_errorf(errbuf, errlen, -EINVAL, "no model");
		return NULL;
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		errno = ENOMEM;
		st_errorf(errbuf, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	r = vision_weights_load(&v->w, model->files, errbuf, errlen);
	if (r < 0)
		goto fail;
	r = config_image_token(model_files_config_json(model->files), &v->image_token, errbuf, errlen);
	if (r < 0)
		goto fail;
	engine_vision_preprocess_defaults(&v->pre);
	r = read_preprocess(model_files_config_json(model->files), "config.json", "force_image_size", &v->pre,
			    errbuf, errlen);
	if (r < 0)
		goto fail;
	if (model_files_dir(model->files)) {
		char *pre_path = path_join(model_files_dir(model->files), "preprocessor_config.json");

		if (access(pre_path, F_OK) == 0)
			r = engine_vision_read_preprocessor_config(v, pre_path, errbuf, errlen);
		free(pre_path);
		if (r < 0)
			goto fail;
	}
	r = vision_finish_create(v, model->cfg.hidden, errbuf, errlen);
	if (r < 0)
		goto fail;
	return v;
fail:
	engine_vision_destroy(v);
	errno = -r;
	return NULL;
}

void engine_vision_get_preprocess(const struct engine_vision *v, struct engine_vision_preprocess *ret)
{
	*ret = v->pre;
}

const struct backend_vision_tower *vision_tower(const struct engine_vision *v)
{
	return &v->tower;
}

const struct vision_weights *engine_vision_weights(const struct engine_vision *v)
{
	return &v->w;
}

uint64_t engine_vision_id(const struct engine_vision *v)
{
	return v->id;
}

int engine_vision_grid_side(const struct engine_vision *v)
{
	return v->grid;
}

const float *engine_vision_pos_grid(const struct engine_vision *v)
{
	return v->pos;
}

int32_t engine_vision_image_token(const struct engine_vision *v)
{
	return v->image_token;
}

int engine_vision_tokens_per_tile(const struct engine_vision *v)
{
	return v->tokens_per_tile;
}

int engine_vision_embed_dim(const struct engine_vision *v)
{
	return v->w.out_dim;
}

/* n floats in the memory the ops work in (vision.device: the device's), copied from host when
 * non-NULL; vmem_free() gives them back. */
static int vmem_alloc(const struct backend_ops *ops, struct engine_backend *b, size_t n, const float *host,
		      float **ret)
{
	if (ops->vision.device)
		return ops->rows_alloc(b, n, host, ret);
	if (!(*ret = malloc(sizeof(float) * n)))
		return -ENOMEM;
	if (host)
		memcpy(*ret, host, sizeof(float) * n);
	return 0;
}

static void vmem_free(const struct backend_ops *ops, struct engine_backend *b, float *p)
{
	if (ops->vision.device)
		ops->rows_free(b, p);
	else
		free(p);
}

/* The one encode of whole tiles: n_tiles tiles at pix into rows at out, both in the ops'
 * memory, in calls of at most vision.max_tiles tiles. */
static int encode_tiles(const struct backend_ops *ops, struct engine_backend *b,
			const struct engine_vision *v, const float *pix, int n_tiles, float *out)
{
	const size_t tile_floats = (size_t)3 * v->pre.tile_size * v->pre.tile_size,
		     tile_out = (size_t)v->tokens_per_tile * (size_t)v->w.out_dim;
	int r = 0;

	for (int t = 0; r == 0 && t < n_tiles; t += ops->vision.max_tiles) {
		int n = MIN(n_tiles - t, ops->vision.max_tiles);
		r = ops->vision_encode_tiles(b, &v->tower, pix + (size_t)t * tile_floats, n,
					     out + (size_t)t * tile_out, NULL, 0);
	}
	return r;
}

int vision_encode_on(const struct backend_ops *ops, struct engine_backend *b, const struct engine_vision *v,
		     const float *pixels, int n_tiles, float *out)
{
	const size_t tile_floats = v ? (size_t)3 * v->pre.tile_size * v->pre.tile_size : 0;
	float *pix = NULL, *rows = NULL;
	int r;

	if (!v || !pixels || !out || n_tiles < 0)
		return -EINVAL;
	if (n_tiles == 0)
		return 0;
	if (b && n_tiles > VISION_MAX_ENCODE_TILES)
		return -EINVAL;
	if (!ops->vision.device)
		return encode_tiles(ops, b, v, pixels, n_tiles, out);
	/* the tiles to the device and the rows back */
	const size_t n_out = (size_t)n_tiles * (size_t)v->tokens_per_tile * (size_t)v->w.out_dim;
	if ((r = vmem_alloc(ops, b, tile_floats * (size_t)n_tiles, pixels, &pix)) == 0 &&
	    (r = vmem_alloc(ops, b, n_out, NULL, &rows)) == 0 &&
	    (r = encode_tiles(ops, b, v, pix, n_tiles, rows)) == 0)
		r = ops->rows_read(b, rows, n_out, out);
	vmem_free(ops, b, rows);
	vmem_free(ops, b, pix);
	return r;
}

int vision_encode_image_on(const struct backend_ops *ops, struct engine_backend *b,
			   const struct engine_vision *v, const struct engine_image *img, int max_tiles,
			   struct engine_vision_grid *ret_grid, struct engine_rows **ret_rows)
{
	struct engine_vision_preprocess p;
	struct engine_vision_grid grid;
	struct engine_rows *rows;
	float *pix = NULL, *data = NULL;
	size_t n_rows;
	int r;

	if (!v || !img || !img->rgb || !ret_grid || !ret_rows)
		return -EINVAL;
	p = v->pre;
	if (max_tiles < 0 || max_tiles > p.max_tiles)
		return -EINVAL;
	if (max_tiles > 0)
		p.max_tiles = max_tiles;
	for (int c = 0; c < 3; c++)
		if (!(p.std[c] != 0.0f) || !isfinite(p.std[c]) || !isfinite(p.mean[c]))
			return -EINVAL;
	if ((r = engine_vision_select_grid(img->width, img->height, p.tile_size, p.max_tiles, p.use_thumbnail,
					   &grid)) < 0)
		return r;
	if (grid.n_tiles < 1 || grid.n_tiles > VISION_MAX_ENCODE_TILES)
		return -EINVAL;
	n_rows = (size_t)grid.n_tiles * (size_t)v->tokens_per_tile;
	if ((r = vmem_alloc(ops, b, (size_t)3 * p.tile_size * p.tile_size * (size_t)grid.n_tiles, NULL,
			    &pix)) < 0)
		return r;
	if ((r = ops->vision_preprocess(b, &v->tower, img, &p, grid.n_tiles, pix)) == 0 &&
	    (r = vmem_alloc(ops, b, n_rows * (size_t)v->w.out_dim, NULL, &data)) == 0)
		r = encode_tiles(ops, b, v, pix, grid.n_tiles, data);
	vmem_free(ops, b, pix);
	if (r < 0) {
		if (data)
			vmem_free(ops, b, data);
		return r;
	}
	rows = ops->vision.device ? backend_rows_wrap(b, NULL, data, n_rows, v->w.out_dim) :
				    backend_rows_wrap(NULL, data, NULL, n_rows, v->w.out_dim);
	if (!rows) {
		r = -errno;
		vmem_free(ops, b, data);
		return r;
	}
	*ret_grid = grid;
	*ret_rows = rows;
	return 0;
}

int engine_vision_splice_rows(const int32_t *tokens, size_t n, int32_t image_token,
			      const struct engine_rows *const *images, size_t n_images,
			      struct engine_row_ref *refs, char *errbuf, size_t errlen)
{
	size_t count = 0, n_rows = 0, k = 0, row = 0;

	if ((n && (!tokens || !refs)) || (n_images && !images))
		return st_errorf(errbuf, errlen, -EINVAL, "bad arguments");
	for (size_t i = 0; i < n_images; i++) {
		if (!images[i])
			return st_errorf(errbuf, errlen, -EINVAL, "bad arguments");
		n_rows += images[i]->n_rows;
	}
	for (size_t i = 0; i < n; i++)
		count += tokens[i] == image_token;
	if (count != n_rows)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "the prompt has %zu image-context tokens (id %d) but the images give %zu "
				 "embeddings",
				 count, (int)image_token, n_rows);
	for (size_t i = 0; i < n; i++) {
		if (tokens[i] != image_token) {
			refs[i] = (struct engine_row_ref){0};
			continue;
		}
		while (row == images[k]->n_rows) {
			k++;
			row = 0;
		}
		refs[i] = (struct engine_row_ref){.rows = images[k], .row = row++};
	}
	return 0;
}

int engine_vision_splice(const int32_t *tokens, size_t n, int32_t image_token, const float *rows,
			 size_t n_rows, size_t dim, const float **embeds, char *errbuf, size_t errlen)
{
	size_t used = 0, count = 0;

	if ((n && (!tokens || !embeds)) || (n_rows && !rows) || dim == 0)
		return st_errorf(errbuf, errlen, -EINVAL, "bad arguments");
	for (size_t i = 0; i < n; i++)
		count += tokens[i] == image_token;
	if (count != n_rows)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "the prompt has %zu image-context tokens (id %d) but the images give %zu "
				 "embeddings",
				 count, (int)image_token, n_rows);
	for (size_t i = 0; i < n; i++)
		embeds[i] = tokens[i] == image_token ? rows + dim * used++ : NULL;
	return 0;
}

int engine_vision_read_preprocessor_config(struct engine_vision *v, const char *path, char *errbuf,
					   size_t errlen)
{
	struct engine_vision_preprocess p = v->pre;
	json_t *root = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	f = fopen(path, "re");
	if (!f)
		return st_errorf(errbuf, errlen, -errno, "%s: %s", path, strerror(errno));
	text = malloc(VISION_PREPROCESSOR_MAX_BYTES + 1);
	if (!text) {
		fclose(f);
		return st_errorf(errbuf, errlen, -ENOMEM, "out of memory");
	}
	len = fread(text, 1, VISION_PREPROCESSOR_MAX_BYTES + 1, f);
	r = ferror(f) ? -EIO : 0;
	fclose(f);
	if (r < 0) {
		r = st_errorf(errbuf, errlen, r, "%s: read error", path);
		goto out;
	}
	if (len > VISION_PREPROCESSOR_MAX_BYTES) {
		r = st_errorf(errbuf, errlen, -EFBIG, "%s: larger than %u bytes", path,
			      VISION_PREPROCESSOR_MAX_BYTES);
		goto out;
	}
	r = model_json_load(path, text, len, &root, errbuf, errlen);
	if (r < 0)
		goto out;
	r = read_preprocess(root, path, "image_size", &p, errbuf, errlen);
	if (r < 0)
		goto out;
	if (p.tile_size != v->pre.tile_size) {
		r = st_errorf(errbuf, errlen, -EINVAL,
			      "%s: image_size %d disagrees with config.json's force_image_size %d", path,
			      p.tile_size, v->pre.tile_size);
		goto out;
	}
	v->pre = p;
out:
	json_decref(root);
	free(text);
	return r;
}
