/* engine: the CUDA backend's vision encode (backend.h's vision_encode): the device encoder
 * (vision_cuda.c) of the vision handle used last, created on first use and kept in b->vision
 * until another handle comes or the backend goes.
 *
 * DESIGN (threads): like the rest of the CUDA backend, called only on the thread that owns the
 * backend's context. The cache is keyed on the handle's engine_vision_id(), not its address, so
 * a handle freed and another allocated at the same address is never served the old weights.
 */
#include <errno.h>
#include <stdlib.h>

#include "backend.h"
#include "vision.h"

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

int backend_cuda_vision_encode(struct engine_backend *b, const struct engine_vision *v,
			       const float *pixels, int n_tiles, float *out)
{
	enum engine_precision p = b->precision == ENGINE_PRECISION_FP32 ? ENGINE_PRECISION_FP32
									 : ENGINE_PRECISION_BF16;
	const float *rows;
	int r;

	if (!b->vision || b->vision->vision_id != engine_vision_id(v)) {
		struct backend_vision *bv = calloc(1, sizeof(*bv));

		backend_cuda_vision_finish(b);
		if (!bv)
			return -ENOMEM;
		bv->vc = vision_cuda_create(backend_cuda_context(b), v, p);
		if (!bv->vc) {
			r = errno == ENOMEM ? -ENOMEM : errno == EINVAL ? -EINVAL : -EIO;
			free(bv);
			return r;
		}
		bv->vision_id = engine_vision_id(v);
		b->vision = bv;
	}
	r = vision_cuda_encode(b->vision->vc, pixels, n_tiles, &rows);
	if (r == 0)
		r = vision_cuda_download(b->vision->vc, n_tiles, out, NULL);
	return r;
}
