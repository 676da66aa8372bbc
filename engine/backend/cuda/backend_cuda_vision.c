/* engine: the CUDA backend's vision ops (backend.h's vision_preprocess and vision_encode_tiles)
 * and its embedding rows in device memory
 * (rows_alloc, rows_read, rows_free): the device encoder
 * (vision_cuda.c) of the vision handle used last, created on first use and kept in b->vision
 * until another handle comes or the backend goes.
 *
 * DESIGN (threads): like the rest of the CUDA backend, called only on the thread that owns the
 * backend's context. The cache is keyed on the tower's id (backend_vision_tower.id), not its address, so
 * a handle freed and another allocated at the same address is never served the old weights.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "gpu.h"
#include "vision_cuda.h"

struct backend_vision {
	uint64_t vision_id;
	struct vision_cuda *vc;
};

void backend_cuda_vision_finish(struct engine_backend *b)
{
	if (!b->vision)
		return;
	vision_cuda_destroy(b->vision->vc);
	free(b->vision);
	b->vision = NULL;
}

/* The device encoder of t, created (replacing the cached one) when t is another handle's. */
static int encoder_of(struct engine_backend *b, const struct backend_vision_tower *t)
{
	enum engine_precision p =
		b->precision == ENGINE_PRECISION_FP32 ? ENGINE_PRECISION_FP32 : ENGINE_PRECISION_BF16;
	int r;

	if (!b->vision || b->vision->vision_id != t->id) {
		struct backend_vision *bv = calloc(1, sizeof(*bv));

		backend_cuda_vision_finish(b);
		if (!bv)
			return -ENOMEM;
		bv->vc = vision_cuda_create(backend_cuda_context(b), t, p);
		if (!bv->vc) {
			r = errno == ENOMEM ? -ENOMEM : errno == EINVAL ? -EINVAL : -EIO;
			free(bv);
			return r;
		}
		bv->vision_id = t->id;
		b->vision = bv;
	}
	return 0;
}

int backend_cuda_vision_preprocess(struct engine_backend *b, const struct backend_vision_tower *t,
				   const struct engine_image *img, const struct engine_vision_preprocess *p,
				   int n_tiles, float *pix)
{
	int r = encoder_of(b, t);

	if (r == 0)
		r = vision_cuda_preprocess_to(b->vision->vc, img, p, n_tiles, pix);
	if (r == 0)
		r = gpu_synchronize(backend_cuda_context(b));
	return r;
}

int backend_cuda_vision_encode_tiles(struct engine_backend *b, const struct backend_vision_tower *t,
				     const float *pix, int n_tiles, float *out)
{
	int r = encoder_of(b, t);

	if (r == 0)
		r = vision_cuda_encode_tiles(b->vision->vc, pix, n_tiles, out);
	if (r == 0)
		r = gpu_synchronize(backend_cuda_context(b));
	return r;
}

int backend_cuda_rows_alloc(struct engine_backend *b, size_t n, const float *host, float **ret)
{
	struct gpu_context *g = backend_cuda_context(b);
	void *dev = NULL;
	int r;

	if (n == 0 || n > SIZE_MAX / sizeof(float))
		return -EINVAL;
	if ((r = gpu_alloc(g, n * sizeof(float), &dev)) < 0)
		return r;
	if (host && (r = gpu_copy_to_device(g, dev, host, n * sizeof(float))) < 0) {
		gpu_free(g, dev);
		return r;
	}
	*ret = dev;
	return 0;
}

int backend_cuda_rows_read(struct engine_backend *b, const float *dev, size_t n, float *out)
{
	return gpu_copy_to_host(backend_cuda_context(b), out, dev, n * sizeof(float));
}

void backend_cuda_rows_free(struct engine_backend *b, float *dev)
{
	gpu_free(backend_cuda_context(b), dev);
}
