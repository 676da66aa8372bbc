/* engine: the resumable vision encode (engine.h, engine_vision_encode_begin() and
 * engine_vision_encode_begin_image()).
 *
 * DESIGN: on the CPU a tile is the steps of vision_encode_gemms() one by one (the ViT's
 * embedding, its blocks, its final norm with the projector's first product, the projector's
 * second product) over a struct vision_vit_run that
 * keeps the tile's residual stream between two slices, each slice running with the backend's
 * products (backend_ops.vision_steps: the same prepared matrices and lock as its whole-image
 * encode), so the rows do not depend on where the slices fall. A backend with a device encodes
 * a tile per step through its vision_encode(). A job begun from an image has one more step
 * first, the preprocessing: engine_vision_preprocess() into the job's host tiles on the CPU,
 * or the backend's vision_preprocess() into the job's device tiles, which its tile steps then
 * encode with vision_encode_tiles() into the job's device rows, so neither the tiles nor the
 * rows cross the bus. The job belongs to one thread at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "image.h"
#include "vision.h"

struct engine_vision_job {
	struct engine_backend *b;
	const struct engine_vision *v;
	const float *pixels;
	int n_tiles;
	bool per_tile;      /* a device backend: one step per tile */
	/* begun from an image: the first step preprocesses img with pre */
	const struct engine_image *img;
	struct engine_vision_preprocess pre;
	int prep;           /* steps before the first tile's: 1 from an image, else 0 */
	bool device;        /* the tiles and rows live on b's device (dpix, drows) */
	float *own_pixels;  /* CPU: the preprocessed tiles (pixels points here) */
	float *dpix, *drows;
	uint64_t preprocess_us;
	int steps_per_tile; /* CPU: embed, the blocks, final + projector's halves */
	int done, total;
	size_t tile_floats, tile_out; /* floats of a tile's pixels and of its rows */
	int grid;
	struct vision_vit_run run; /* CPU: the tile in progress (w NULL until the first step) */
	float *features;           /* CPU: a tile's ViT output */
	float *hidden;             /* CPU: a tile's projector between its halves */
	float *out;                /* all tiles' rows (host) */
	int err;                   /* the first step's error: the job is dead */
	bool taken;                /* the rows went to finish()'s handle */
};

/* A job over n_tiles tiles with `prep` steps before them; device: tiles and rows on b's device. */
static int job_new(struct engine_backend *b, const struct engine_vision *v, const float *pixels,
		   int n_tiles, int prep, bool device, struct engine_vision_job **ret_job)
{
	const struct vision_weights *w = engine_vision_weights(v);
	struct engine_vision_preprocess pre;
	engine_vision_get_preprocess(v, &pre);
	struct engine_vision_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->b = b;
	j->v = v;
	j->pixels = pixels;
	j->n_tiles = n_tiles;
	j->prep = prep;
	j->device = device;
	j->per_tile = device || (b && b->ops->vision_encode && !b->ops->vision_steps);
	j->steps_per_tile = j->per_tile ? 1 : w->depth + 3;
	j->total = prep + j->steps_per_tile * n_tiles;
	j->grid = engine_vision_grid_side(v);
	j->tile_floats = (size_t)3 * pre.tile_size * pre.tile_size;
	j->tile_out = (size_t)engine_vision_tokens_per_tile(v) * (size_t)w->out_dim;
	if (!device)
		j->out = malloc(sizeof(float) * j->tile_out * (size_t)n_tiles);
	if (!j->per_tile) {
		j->features = malloc(sizeof(float) * (size_t)j->grid * j->grid * w->width);
		j->hidden = malloc(sizeof(float) * (size_t)engine_vision_tokens_per_tile(v) *
				   (size_t)w->proj_hidden);
	}
	if ((!device && !j->out) || (!j->per_tile && (!j->features || !j->hidden))) {
		engine_vision_job_destroy(j);
		return -ENOMEM;
	}
	*ret_job = j;
	return 0;
}

int engine_vision_encode_begin(struct engine_backend *b, const struct engine_vision *v,
			       const float *pixels, int n_tiles, struct engine_vision_job **ret_job)
{
	if (!v || !pixels || !ret_job || n_tiles < 1 || n_tiles > VISION_MAX_ENCODE_TILES)
		return -EINVAL;
	return job_new(b, v, pixels, n_tiles, 0, false, ret_job);
}

int engine_vision_encode_begin_image(struct engine_backend *b, const struct engine_vision *v,
				     const struct engine_image *img, int max_tiles,
				     struct engine_vision_grid *ret_grid,
				     struct engine_vision_job **ret_job)
{
	struct engine_vision_preprocess pre;
	struct engine_vision_grid grid;
	int r;

	if (!v || !img || !img->rgb || !ret_grid || !ret_job)
		return -EINVAL;
	engine_vision_get_preprocess(v, &pre);
	if (max_tiles < 0 || max_tiles > pre.max_tiles)
		return -EINVAL;
	if (max_tiles > 0)
		pre.max_tiles = max_tiles;
	r = engine_vision_select_grid(img->width, img->height, pre.tile_size, pre.max_tiles,
				      pre.use_thumbnail, &grid);
	if (r < 0)
		return r;
	if (grid.n_tiles < 1 || grid.n_tiles > VISION_MAX_ENCODE_TILES)
		return -EINVAL;
	bool device = b && b->ops->vision_preprocess && b->ops->vision_encode_tiles &&
		      b->ops->rows_alloc;
	struct engine_vision_job *j;
	if ((r = job_new(b, v, NULL, grid.n_tiles, 1, device, &j)) < 0)
		return r;
	j->img = img;
	j->pre = pre;
	*ret_grid = grid;
	*ret_job = j;
	return 0;
}

/* The first step of a job begun from an image. */
static int prep_step(struct engine_vision_job *j)
{
	uint64_t t0 = time_mono_us();
	size_t n_rows = (size_t)j->n_tiles * (size_t)engine_vision_tokens_per_tile(j->v);
	int r;

	if (j->device) {
		struct engine_backend *b = j->b;
		if ((r = b->ops->rows_alloc(b, j->tile_floats * (size_t)j->n_tiles, NULL, &j->dpix)) < 0 ||
		    (r = b->ops->rows_alloc(b, n_rows * (size_t)engine_vision_embed_dim(j->v), NULL,
					    &j->drows)) < 0 ||
		    (r = b->ops->vision_preprocess(b, j->v, j->img, &j->pre, j->n_tiles, j->dpix)) < 0)
			return r;
	} else {
		struct engine_vision_grid grid;
		if ((r = engine_vision_preprocess(j->img, &j->pre, &grid, &j->own_pixels)) < 0)
			return r;
		if (grid.n_tiles != j->n_tiles)
			return -EIO;
		j->pixels = j->own_pixels;
	}
	j->preprocess_us = time_mono_us() - t0;
	return 0;
}

uint64_t engine_vision_encode_preprocess_us(const struct engine_vision_job *j)
{
	return j->preprocess_us;
}

struct slice {
	struct engine_vision_job *j;
	int max_steps;
};

/* Up to max_steps CPU steps with the products gm (backend_ops.vision_steps' callback). */
static int cpu_steps(const struct vision_gemms *gm, void *arg)
{
	struct slice *sl = arg;
	struct engine_vision_job *j = sl->j;
	const struct vision_weights *w = engine_vision_weights(j->v);
	int r = 0;

	if (!j->run.w && (r = vision_vit_run_init(&j->run, w, gm != NULL, j->grid, j->grid)) < 0)
		return r;
	for (int n = 0; n < sl->max_steps && j->done < j->total; n++) {
		int t = (j->done - j->prep) / j->steps_per_tile,
		    k = (j->done - j->prep) % j->steps_per_tile;
		if (k == 0) {
			r = vision_vit_run_embed(&j->run, gm, j->pixels + (size_t)t * j->tile_floats,
						 engine_vision_pos_grid(j->v), NULL);
		} else if (k <= w->depth) {
			r = vision_vit_run_block(&j->run, gm, NULL);
		} else if (k == w->depth + 1) {
			r = vision_vit_run_final(&j->run, j->features, NULL);
			if (r == 0)
				r = vision_project_first(w, gm, j->features, j->grid, j->grid,
							 j->hidden, NULL);
		} else {
			r = vision_project_second(w, gm, j->hidden,
						  engine_vision_tokens_per_tile(j->v),
						  j->out + (size_t)t * j->tile_out, NULL);
		}
		if (r < 0)
			return r;
		j->done++;
	}
	return 0;
}

int engine_vision_encode_advance(struct engine_vision_job *j, int max_steps)
{
	int r = 0;

	if (!j || max_steps < 1 || j->done == j->total)
		return -EINVAL;
	if (j->err)
		return j->err;
	if (j->done < j->prep) {
		if ((r = prep_step(j)) == 0) {
			j->done++;
			max_steps--;
		}
	}
	if (r == 0 && max_steps > 0 && j->per_tile) {
		for (int n = 0; r == 0 && n < max_steps && j->done < j->total; n++) {
			size_t t = (size_t)(j->done - j->prep);
			r = j->device ? j->b->ops->vision_encode_tiles(j->b, j->v,
								       j->dpix + t * j->tile_floats, 1,
								       j->drows + t * j->tile_out)
				      : j->b->ops->vision_encode(j->b, j->v,
								 j->pixels + t * j->tile_floats, 1,
								 j->out + t * j->tile_out);
			if (r == 0)
				j->done++;
		}
	} else if (r == 0 && max_steps > 0 && j->done < j->total) {
		struct slice sl = {j, max_steps};
		r = j->b && j->b->ops->vision_steps ?
			    j->b->ops->vision_steps(j->b, j->v, cpu_steps, &sl) :
			    cpu_steps(NULL, &sl);
	}
	if (r < 0) {
		j->err = r;
		return r;
	}
	if (j->done == j->total)
		vision_vit_run_finish(&j->run);
	return j->done < j->total;
}

int engine_vision_encode_progress(const struct engine_vision_job *j, int *ret_total)
{
	*ret_total = j->total;
	return j->done;
}

int engine_vision_encode_finish(struct engine_vision_job *j, struct engine_rows **ret_rows)
{
	if (!j || !ret_rows || j->done != j->total || j->err || j->taken)
		return -EINVAL;
	size_t n_rows = (size_t)j->n_tiles * (size_t)engine_vision_tokens_per_tile(j->v);
	int dim = engine_vision_embed_dim(j->v);
	struct engine_rows *rows;
	if (j->device) {
		rows = backend_rows_wrap(j->b, NULL, j->drows, n_rows, dim);
		if (rows)
			j->drows = NULL;
	} else if (j->b && j->b->ops->rows_alloc) {
		rows = engine_rows_create(j->b, j->out, n_rows, dim);
	} else {
		rows = engine_rows_from_host(j->out, n_rows, dim);
		if (rows)
			j->out = NULL;
	}
	if (!rows)
		return -errno;
	j->taken = true;
	*ret_rows = rows;
	return 0;
}

void engine_vision_job_destroy(struct engine_vision_job *j)
{
	if (!j)
		return;
	vision_vit_run_finish(&j->run);
	if (j->b && j->b->ops->rows_free) {
		j->b->ops->rows_free(j->b, j->dpix);
		j->b->ops->rows_free(j->b, j->drows);
	}
	free(j->own_pixels);
	free(j->features);
	free(j->hidden);
	free(j->out);
	free(j);
}
