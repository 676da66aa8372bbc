/* engine: a backend chosen and created (engine_backend_resolve(), engine_backend_create()):
 * above the backends it chooses between (backend/cpu, backend/cuda) and the seam they share
 * (backend.h), so that neither the seam nor a backend calls up into the choice. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "quantized.h"
#include "modelopt.h"
#ifdef HOLOD_HAVE_CUDA
#include "gpu.h"
#endif

static int fail(int err, char *msg, size_t msglen, const char *format, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(int err, char *msg, size_t msglen, const char *format, ...)
{
	if (msg && msglen) {
		va_list ap;
		va_start(ap, format);
		vsnprintf(msg, msglen, format, ap);
		va_end(ap);
	}
	return -err;
}

/* Checks a CUDA device for opts (ENODEV sentences); 0 when it is usable, -ENXIO (a sentence)
 * where a GPU is there but its driver is too old for this build. */
static int check_cuda_device(const struct engine_backend_options *opts, char *msg, size_t msglen)
{
#ifdef HOLOD_HAVE_CUDA
	char why[256];
	int n = gpu_device_count_why(why, sizeof(why));
	if (n <= 0)
		return fail(n < 0 ? -n : ENODEV, msg, msglen, "%s", why);
	if (opts->device < 0 || opts->device >= n)
		return fail(ENODEV, msg, msglen, "CUDA device %d does not exist (%d device%s present)",
			    opts->device, n, n == 1 ? " is" : "s are");
	return 0;
#else
	return fail(ENODEV, msg, msglen,
		    "this build has no CUDA backend (nvcc was not found when it was built)");
#endif
}

static bool cuda_emulated(void)
{
#ifdef HOLOD_HAVE_CUDA
	return gpu_devices_emulated();
#else
	return false;
#endif
}

/* The checks engine_backend_resolve() and engine_backend_create() share: AUTO resolved, DEFAULT
 * resolved on CUDA (kept on the CPU), values and device checked. */
static int resolve(struct engine_backend_options *opts, char *msg, size_t msglen)
{
	if (msg && msglen)
		msg[0] = '\0';
	int r = backend_options_check(opts, msg, msglen);
	if (r < 0)
		return r;
	if (opts->ssm_state == ENGINE_PRECISION_DEFAULT)
		opts->ssm_state = ENGINE_PRECISION_FP32;
	if (opts->kind == ENGINE_BACKEND_AUTO) {
		char why[256];
		opts->kind = ENGINE_BACKEND_CPU;
		r = check_cuda_device(opts, why, sizeof(why));
		if (r == 0) {
			if (cuda_emulated())
				fail(0, msg, msglen,
				     "the CUDA device is the CPU emulation of a test build: using the CPU");
			else
				opts->kind = ENGINE_BACKEND_CUDA;
		} else if (r == -ENXIO) {
			/* a GPU is there and unusable: say why the CPU runs */
			fail(0, msg, msglen, "%s: using the CPU", why);
		}
	}
	/* the CPU's DEFAULT depends on the checkpoint: backend_cpu_create() resolves it */
	if (opts->kind == ENGINE_BACKEND_CPU)
		return 0;
	/* q8, q4 and fp8 run on CUDA (quantized at upload: backend_cuda.c, which refuses fp8
	 * below sm_89) */
	r = check_cuda_device(opts, msg, msglen);
	if (r < 0)
		return r == -ENXIO ? -ENODEV : r; /* (engine.h: ENODEV, the sentence says why) */
	if (opts->precision == ENGINE_PRECISION_DEFAULT)
		opts->precision = ENGINE_PRECISION_BF16;
	return 0;
}

int engine_backend_resolve(struct engine_backend_options *opts, char *msg, size_t msglen)
{
	if (!opts)
		return -EINVAL;
	struct engine_backend_options o = *opts;
	int r = resolve(&o, msg, msglen);
	if (r < 0)
		return r;
	*opts = o;
	return 0;
}

/* A holod-quantized checkpoint (quantized.h) runs as stored on either backend: --weights default
 * or its own format (the CPU backend says the same). */
static struct engine_backend *refuse_cuda_requantize(const struct engine_model *model, enum engine_weights w,
						     char *errbuf, size_t errlen)
{
	const char *f = quant_format_desc((enum quant_format)model_quant_format(model))->name;
	fail(EINVAL, errbuf, errlen,
	     "--weights %s: the checkpoint's linear layers were quantized to "
	     "%s by holo-quantize and load as they are (use --weights default or %s, or load the "
	     "source checkpoint)",
	     engine_weights_name(w), f, f);
	errno = EINVAL;
	return NULL;
}

static bool stored_quant_ok(const struct engine_model *m, enum engine_weights w)
{
	int f = model_quant_format(m);
	return f < 0 || w == ENGINE_WEIGHTS_DEFAULT || (w == ENGINE_WEIGHTS_Q8 && f == QUANT_Q8) ||
	       (w == ENGINE_WEIGHTS_Q4 && f == QUANT_Q4);
}

/* an FP8 checkpoint's layers (modelopt.h) run on CUDA as fp8 (default), or requantized to
 * q8/q4; widening them to bf16 is the CPU backend's alone */
static bool cuda_widens_fp8(const struct engine_model *m, enum engine_weights w)
{
	return model_has_fp8(m) && w == ENGINE_WEIGHTS_BF16;
}

static struct engine_backend *refuse_cuda_widen(char *errbuf, size_t errlen)
{
	fail(EINVAL, errbuf, errlen,
	     "--weights bf16: the checkpoint's linear layers are fp8 "
	     "(NVIDIA ModelOpt) and the CUDA backend does not widen them: use --weights "
	     "default (fp8), q8 or q4, or --backend cpu");
	errno = EINVAL;
	return NULL;
}

struct engine_backend *engine_backend_create(const struct engine_model *model,
					     const struct engine_backend_options *opts, char *errbuf,
					     size_t errlen)
{
	if (!model || !opts) {
		errno = EINVAL;
		return NULL;
	}
	struct engine_backend_options o = *opts;
	/* a holod-quantized checkpoint with another --weights, or an FP8 one asked to widen on
	 * CUDA: refused before the device is looked at, so the same sentence whether or not this
	 * build has CUDA (AUTO resolving to CUDA is checked below; the CPU backend checks its own) */
	if (o.kind == ENGINE_BACKEND_CUDA && !stored_quant_ok(model, o.weights))
		return refuse_cuda_requantize(model, o.weights, errbuf, errlen);
	if (o.kind == ENGINE_BACKEND_CUDA && cuda_widens_fp8(model, o.weights))
		return refuse_cuda_widen(errbuf, errlen);
	int r = resolve(&o, errbuf, errlen);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (o.kind == ENGINE_BACKEND_CUDA && !stored_quant_ok(model, o.weights))
		return refuse_cuda_requantize(model, o.weights, errbuf, errlen);
	if (o.kind == ENGINE_BACKEND_CUDA && cuda_widens_fp8(model, o.weights))
		return refuse_cuda_widen(errbuf, errlen);
	if (o.kind == ENGINE_BACKEND_CPU) {
		struct engine_backend *b = backend_cpu_create(model, &o, errbuf, errlen);
		if (!b && errbuf && errlen && errbuf[0])
			return NULL; /* backend_cpu_create() said why */
		if (!b)
			fail(errno, errbuf, errlen,
			     errno == EINVAL  ? "the model's tensors do not match its config" :
			     errno == ENOTSUP ? "oneDNN refused this model's bf16 products on this CPU: use "
						"--precision fp32" :
						"out of memory creating the CPU backend");
		else if (o.progress && !backend_cpu_quantized(b))
			o.progress(o.progress_arg, b->weight_bytes, b->weight_bytes);
		return b;
	}
#ifdef HOLOD_HAVE_CUDA
	return backend_cuda_create(model, &o, errbuf, errlen);
#else
	errno = ENODEV; /* resolve() refused CUDA already */
	return NULL;
#endif
}
