/* engine: the vision encodes of engine.h on a backend, or without one on the host: the CPU
 * backend's vision ops called with b NULL (backend_host_vision_ops()), in fp32. The choice is
 * made here, above the backends, so that vision/ runs whatever ops it is handed and names no
 * backend. */
#include <errno.h>

#include "backend.h"
#include "vision.h"

/* The ops a vision encode runs on: b's, or the host's. */
static const struct backend_ops *ops_of(const struct engine_backend *b)
{
	return b ? b->ops : backend_host_vision_ops();
}

int engine_vision_encode(const struct engine_vision *v, const float *pixels, int n_tiles, float *out)
{
	return vision_encode_on(ops_of(NULL), NULL, v, pixels, n_tiles, out);
}

int engine_vision_encode_on(struct engine_backend *b, const struct engine_vision *v, const float *pixels,
			    int n_tiles, float *out)
{
	return vision_encode_on(ops_of(b), b, v, pixels, n_tiles, out);
}

int engine_vision_encode_image(const struct engine_vision *v, const struct engine_image *img, int max_tiles,
			       struct engine_vision_grid *ret_grid, float **ret_embeds, size_t *ret_rows)
{
	struct engine_rows *rows;
	int r;

	if (!ret_embeds || !ret_rows)
		return -EINVAL;
	if ((r = vision_encode_image_on(ops_of(NULL), NULL, v, img, max_tiles, ret_grid, &rows)) < 0)
		return r;
	*ret_embeds = rows->host;
	*ret_rows = rows->n_rows;
	rows->host = NULL;
	engine_rows_destroy(rows);
	return 0;
}

int engine_vision_encode_image_on(struct engine_backend *b, const struct engine_vision *v,
				  const struct engine_image *img, int max_tiles,
				  struct engine_vision_grid *ret_grid, struct engine_rows **ret_rows)
{
	return vision_encode_image_on(ops_of(b), b, v, img, max_tiles, ret_grid, ret_rows);
}

int engine_vision_encode_begin(struct engine_backend *b, const struct engine_vision *v, const float *pixels,
			       int n_tiles, struct engine_vision_job **ret_job)
{
	return vision_encode_begin(ops_of(b), b, v, pixels, n_tiles, ret_job);
}

int engine_vision_encode_begin_image(struct engine_backend *b, const struct engine_vision *v,
				     const struct engine_image *img, int max_tiles,
				     struct engine_vision_grid *ret_grid, struct engine_vision_job **ret_job)
{
	return vision_encode_begin_image(ops_of(b), b, v, img, max_tiles, ret_grid, ret_job);
}
