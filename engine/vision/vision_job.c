/* engine: the resumable vision encode (engine.h, engine_vision_encode_begin() and
 * engine_vision_encode_begin_image()).
 *
 * DESIGN: one loop over the backend's two vision ops (backend.h), whose granularity is the
 * data in its ops table (backend_vision_desc): a job begun from an image has one step first,
 * vision_preprocess() into the job's tiles; then every step is one step of
 * vision_encode_tiles() with the job's cursor: a whole tile on a backend whose step is a tile
 * (CUDA), a ViT block or half the projector of one tile on one that steps through layers (the
 * CPU, which keeps the tile's residual stream in the cursor between two slices and runs each
 * with its whole-image encode's products, so the rows do not depend on where the slices fall).
 * The tiles and rows live where vision.device says (the device's memory from rows_alloc(), so
 * neither crosses the bus, or the host's); without a backend the host's ops run (the CPU's,
 * fp32). The job belongs to one thread at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "image.h"
#include "vision.h"

struct engine_vision_job {
	struct engine_backend *b;      /* NULL: no backend */
	const struct backend_ops *ops; /* b's, or backend_host_vision_ops() */
	const struct engine_vision *v;
	const float *pixels; /* begin(): the caller's host tiles */
	int n_tiles;
	/* begun from an image: the first step preprocesses img with pre */
	const struct engine_image *img;
	struct engine_vision_preprocess pre;
	int prep;     /* steps before the first tile's: 1 from an image, else 0 */
	float *pix;   /* the tiles the encode reads, in vision.device's memory */
	bool own_pix; /* pix is the job's (else the caller's pixels) */
	float *out;   /* all tiles' rows, in vision.device's memory */
	struct backend_vision_cursor cur;
	uint64_t preprocess_us;
	int done, total;
	size_t tile_floats, tile_out; /* floats of a tile's pixels and of its rows */
	int err;		      /* the first step's error: the job is dead */
	bool taken;		      /* the rows went to finish()'s handle */
};

/* n floats in the memory the job's ops work in (copied from host when non-NULL). */
static int job_alloc(struct engine_vision_job *j, size_t n, const float *host, float **ret)
{
	if (j->ops->vision.device)
		return j->ops->rows_alloc(j->b, n, host, ret);
	if (!(*ret = malloc(sizeof(float) * n)))
		return -ENOMEM;
	if (host)
		memcpy(*ret, host, sizeof(float) * n);
	return 0;
}

static void job_free(struct engine_vision_job *j, float *p)
{
	if (j->ops->vision.device)
		j->ops->rows_free(j->b, p);
	else
		free(p);
}

/* A job over n_tiles tiles with `prep` steps before them. */
static int job_new(const struct backend_ops *ops, struct engine_backend *b, const struct engine_vision *v,
		   const float *pixels, int n_tiles, int prep, struct engine_vision_job **ret_job)
{
	const struct vision_weights *w = engine_vision_weights(v);
	struct engine_vision_preprocess pre;
	engine_vision_get_preprocess(v, &pre);
	struct engine_vision_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->b = b;
	j->ops = ops;
	j->v = v;
	j->pixels = pixels;
	j->n_tiles = n_tiles;
	j->prep = prep;
	j->total = prep + backend_vision_steps_per_tile(&j->ops->vision, vision_tower(v)) * n_tiles;
	j->tile_floats = (size_t)3 * pre.tile_size * pre.tile_size;
	j->tile_out = (size_t)engine_vision_tokens_per_tile(v) * (size_t)w->out_dim;
	/* host rows up front (a job that cannot hold them fails at once); device ones at the
	 * first step */
	if (!j->ops->vision.device && !(j->out = malloc(sizeof(float) * j->tile_out * (size_t)n_tiles))) {
		free(j);
		return -ENOMEM;
	}
	*ret_job = j;
	return 0;
}

int vision_encode_begin(const struct backend_ops *ops, struct engine_backend *b, const struct engine_vision *v,
			const float *pixels, int n_tiles, struct engine_vision_job **ret_job)
{
	if (!v || !pixels || !ret_job || n_tiles < 1 || n_tiles > VISION_MAX_ENCODE_TILES)
		return -EINVAL;
	return job_new(ops, b, v, pixels, n_tiles, 0, ret_job);
}

int vision_encode_begin_image(const struct backend_ops *ops, struct engine_backend *b,
			      const struct engine_vision *v, const struct engine_image *img, int max_tiles,
			      struct engine_vision_grid *ret_grid, struct engine_vision_job **ret_job)
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
	struct engine_vision_job *j;
	if ((r = job_new(ops, b, v, NULL, grid.n_tiles, 1, &j)) < 0)
		return r;
	j->img = img;
	j->pre = pre;
	*ret_grid = grid;
	*ret_job = j;
	return 0;
}

/* The tiles and rows in the ops' memory before the first tile step: from an image, the
 * preprocessing (the job's first step); from host tiles, those tiles where the ops read them. */
static int tiles_step(struct engine_vision_job *j)
{
	const size_t n_pix = j->tile_floats * (size_t)j->n_tiles;
	int r;

	if (!j->out && (r = job_alloc(j, j->tile_out * (size_t)j->n_tiles, NULL, &j->out)) < 0)
		return r;
	if (j->img) {
		if ((r = job_alloc(j, n_pix, NULL, &j->pix)) < 0)
			return r;
		j->own_pix = true;
		return j->ops->vision_preprocess(j->b, vision_tower(j->v), j->img, &j->pre, j->n_tiles,
						 j->pix);
	}
	if (!j->ops->vision.device) {
		j->pix = (float *)j->pixels;
		return 0;
	}
	if ((r = job_alloc(j, n_pix, j->pixels, &j->pix)) < 0)
		return r;
	j->own_pix = true;
	return 0;
}

uint64_t engine_vision_encode_preprocess_us(const struct engine_vision_job *j)
{
	return j->preprocess_us;
}

int engine_vision_encode_advance(struct engine_vision_job *j, int max_steps)
{
	int r = 0;

	if (!j || max_steps < 1 || j->done == j->total)
		return -EINVAL;
	if (j->err)
		return j->err;
	if (!j->pix) {
		uint64_t t0 = time_mono_us();
		if ((r = tiles_step(j)) == 0 && j->prep) {
			j->preprocess_us = time_mono_us() - t0;
			j->done += j->prep;
			max_steps -= j->prep;
		}
	}
	if (r == 0 && max_steps > 0 && j->done < j->total) {
		r = j->ops->vision_encode_tiles(j->b, vision_tower(j->v), j->pix, j->n_tiles, j->out, &j->cur,
						max_steps);
		j->done = j->prep + j->cur.done;
	}
	if (r < 0) {
		j->err = r;
		return r;
	}
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
	struct engine_rows *rows =
		j->ops->vision.device ?
			backend_rows_wrap(j->b, NULL, j->out, n_rows, engine_vision_embed_dim(j->v)) :
			engine_rows_from_host(j->out, n_rows, engine_vision_embed_dim(j->v));
	if (!rows)
		return -errno;
	j->out = NULL;
	j->taken = true;
	*ret_rows = rows;
	return 0;
}

void engine_vision_job_destroy(struct engine_vision_job *j)
{
	if (!j)
		return;
	if (j->cur.state) /* an encode abandoned mid-tile */
		j->ops->vision_encode_tiles(j->b, vision_tower(j->v), j->pix, j->n_tiles, j->out, &j->cur, 0);
	if (j->own_pix)
		job_free(j, j->pix);
	if (j->out)
		job_free(j, j->out);
	free(j);
}
