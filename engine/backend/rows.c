/* engine: embedding rows (engine.h's struct engine_rows), on the host or in a backend's device
 * memory through its rows_alloc / rows_read / rows_free. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "engine.h"

/* A handle for n_rows x dim floats, without its memory. */
static struct engine_rows *rows_new(size_t n_rows, int dim)
{
	if (n_rows == 0 || dim < 1 || n_rows > ENGINE_ROWS_MAX_FLOATS / (size_t)dim) {
		errno = EINVAL;
		return NULL;
	}
	struct engine_rows *r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->n_rows = n_rows;
	r->dim = dim;
	return r;
}

struct engine_rows *backend_rows_wrap(struct engine_backend *b, float *host, float *device, size_t n_rows,
				      int dim)
{
	struct engine_rows *r = rows_new(n_rows, dim);
	if (!r)
		return NULL;
	r->host = host;
	r->device = device;
	r->backend = device ? b : NULL;
	return r;
}

struct engine_rows *engine_rows_from_host(float *rows, size_t n_rows, int dim)
{
	if (!rows) {
		errno = EINVAL;
		return NULL;
	}
	return backend_rows_wrap(NULL, rows, NULL, n_rows, dim);
}

struct engine_rows *engine_rows_create(struct engine_backend *b, const float *rows, size_t n_rows, int dim)
{
	if (!rows) {
		errno = EINVAL;
		return NULL;
	}
	struct engine_rows *r = rows_new(n_rows, dim);
	if (!r)
		return NULL;
	size_t n = n_rows * (size_t)dim;
	if (b && b->ops->rows_alloc) {
		int e = b->ops->rows_alloc(b, n, rows, &r->device);
		if (e < 0) {
			free(r);
			errno = -e;
			return NULL;
		}
		r->backend = b;
		return r;
	}
	r->host = malloc(n * sizeof(float));
	if (!r->host) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(r->host, rows, n * sizeof(float));
	return r;
}

void engine_rows_destroy(struct engine_rows *r)
{
	if (!r)
		return;
	if (r->device)
		r->backend->ops->rows_free(r->backend, r->device);
	free(r->host);
	free(r);
}

size_t engine_rows_count(const struct engine_rows *r)
{
	return r->n_rows;
}

int engine_rows_dim(const struct engine_rows *r)
{
	return r->dim;
}

bool engine_rows_on_device(const struct engine_rows *r)
{
	return r->device != NULL;
}

int engine_rows_read(const struct engine_rows *r, size_t first, size_t n, float *out)
{
	if (!r || !out || first > r->n_rows || n > r->n_rows - first)
		return -EINVAL;
	if (n == 0)
		return 0;
	size_t at = first * (size_t)r->dim, len = n * (size_t)r->dim;
	if (r->device)
		return r->backend->ops->rows_read(r->backend, r->device + at, len, out) < 0 ? -EIO : 0;
	memcpy(out, r->host + at, len * sizeof(float));
	return 0;
}
