/* engine: the resumable vision encode (engine.h, engine_vision_encode_begin()).
 *
 * DESIGN: on the CPU a tile is the steps of vision_encode_gemms() one by one (the ViT's
 * embedding, its blocks, its final norm with the projector's first product, the projector's
 * second product) over a struct vision_vit_run that
 * keeps the tile's residual stream between two slices, each slice running with the backend's
 * products (backend_ops.vision_steps: the same prepared matrices and lock as its whole-image
 * encode), so the rows do not depend on where the slices fall. A backend with a device encodes
 * a tile per step through its vision_encode(). The job belongs to one thread at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "vision.h"

struct engine_vision_job {
	struct engine_backend *b;
	const struct engine_vision *v;
	const float *pixels;
	int n_tiles;
	bool per_tile;      /* a device backend: one step per tile */
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

int engine_vision_encode_begin(struct engine_backend *b, const struct engine_vision *v,
			       const float *pixels, int n_tiles, struct engine_vision_job **ret_job)
{
	if (!v || !pixels || !ret_job || n_tiles < 1 || n_tiles > VISION_MAX_ENCODE_TILES)
		return -EINVAL;
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
	j->per_tile = b && b->ops->vision_encode && !b->ops->vision_steps;
	j->steps_per_tile = j->per_tile ? 1 : w->depth + 3;
	j->total = j->steps_per_tile * n_tiles;
	j->grid = engine_vision_grid_side(v);
	j->tile_floats = (size_t)3 * pre.tile_size * pre.tile_size;
	j->tile_out = (size_t)engine_vision_tokens_per_tile(v) * (size_t)w->out_dim;
	j->out = malloc(sizeof(float) * j->tile_out * (size_t)n_tiles);
	if (!j->per_tile) {
		j->features = malloc(sizeof(float) * (size_t)j->grid * j->grid * w->width);
		j->hidden = malloc(sizeof(float) * (size_t)engine_vision_tokens_per_tile(v) *
				   (size_t)w->proj_hidden);
	}
	if (!j->out || (!j->per_tile && (!j->features || !j->hidden))) {
		engine_vision_job_destroy(j);
		return -ENOMEM;
	}
	*ret_job = j;
	return 0;
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
		int t = j->done / j->steps_per_tile, k = j->done % j->steps_per_tile;
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
	if (j->per_tile) {
		for (int n = 0; r == 0 && n < max_steps && j->done < j->total; n++) {
			r = j->b->ops->vision_encode(j->b, j->v,
						     j->pixels + (size_t)j->done * j->tile_floats, 1,
						     j->out + (size_t)j->done * j->tile_out);
			if (r == 0)
				j->done++;
		}
	} else {
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
	if (j->b && j->b->ops->rows_alloc) {
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
	free(j->features);
	free(j->hidden);
	free(j->out);
	free(j);
}
