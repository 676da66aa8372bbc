/* The backend seam's shared part (backend.h): option names, the ops table's check, the common
 * fields and state accounting the backends use, the calls every backend answers the same way.
 * Choosing and creating a backend is select/select.c's, above the backends. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "dims.h"
#include "vision_weights.h"
#ifdef HOLOD_HAVE_CUDA
#include "gpu.h"
#endif

static const char *const kind_names[] = {
	[ENGINE_BACKEND_AUTO] = "auto",
	[ENGINE_BACKEND_CPU] = "cpu",
	[ENGINE_BACKEND_CUDA] = "cuda",
};

static const char *const precision_names[] = {
	[ENGINE_PRECISION_DEFAULT] = "default",
	[ENGINE_PRECISION_BF16] = "bf16",
	[ENGINE_PRECISION_FP32] = "fp32",
};

static const char *const weights_names[] = {
	[ENGINE_WEIGHTS_DEFAULT] = "default", [ENGINE_WEIGHTS_BF16] = "bf16", [ENGINE_WEIGHTS_Q8] = "q8",
	[ENGINE_WEIGHTS_Q4] = "q4",	      [ENGINE_WEIGHTS_FP8] = "fp8",
};

const char *engine_weights_name(enum engine_weights w)
{
	return (unsigned)w < ARRAY_SIZE(weights_names) ? weights_names[w] : "unknown";
}

int engine_weights_parse(const char *name, enum engine_weights *ret)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(weights_names); i++) {
		if (strcmp(name, weights_names[i]) == 0) {
			*ret = (enum engine_weights)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *engine_backend_kind_name(enum engine_backend_kind kind)
{
	return (unsigned)kind < ARRAY_SIZE(kind_names) ? kind_names[kind] : "unknown";
}

int engine_backend_kind_parse(const char *name, enum engine_backend_kind *ret)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(kind_names); i++) {
		if (strcmp(name, kind_names[i]) == 0) {
			*ret = (enum engine_backend_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *engine_precision_name(enum engine_precision p)
{
	return (unsigned)p < ARRAY_SIZE(precision_names) ? precision_names[p] : "unknown";
}

int engine_precision_parse(const char *name, enum engine_precision *ret)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(precision_names); i++) {
		if (strcmp(name, precision_names[i]) == 0) {
			*ret = (enum engine_precision)i;
			return 0;
		}
	}
	return -EINVAL;
}

int backend_options_check(const struct engine_backend_options *opts, char *msg, size_t msglen)
{
	const char *what = NULL;
	int v = 0;

	if ((unsigned)opts->kind >= ARRAY_SIZE(kind_names))
		what = "backend", v = (int)opts->kind;
	else if ((unsigned)opts->precision >= ARRAY_SIZE(precision_names))
		what = "precision", v = (int)opts->precision;
	else if ((unsigned)opts->ssm_state >= ARRAY_SIZE(precision_names))
		what = "SSM state type", v = (int)opts->ssm_state;
	else if ((unsigned)opts->weights >= ARRAY_SIZE(weights_names))
		what = "weight format", v = (int)opts->weights;
	if (!what)
		return 0;
	if (msg && msglen)
		snprintf(msg, msglen, "unknown %s %d", what, v);
	return -EINVAL;
}

void engine_backend_destroy(struct engine_backend *b)
{
	if (b)
		b->ops->destroy(b);
}

int engine_backend_get_info(const struct engine_backend *b, struct engine_backend_info *ret)
{
	if (!b || !ret)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->kind = b->kind;
	ret->name = b->ops->name;
	ret->precision = b->precision;
	ret->ssm_state = b->ssm_state;
	snprintf(ret->weights, sizeof(ret->weights), "%s", b->weights);
	ret->runs_model = b->ops->forward != NULL;
	ret->weight_bytes = b->weight_bytes;
	ret->state_bytes = atomic_load(&b->state_bytes);
	ret->state_limit = b->state_limit;
	b->ops->info(b, ret);
	return 0;
}

bool engine_backend_fault(const struct engine_backend *b, char *buf, size_t len)
{
#ifdef HOLOD_HAVE_CUDA
	if (b && b->kind == ENGINE_BACKEND_CUDA)
		return gpu_device_fault(buf, len);
#else
	(void)b;
#endif
	(void)buf;
	(void)len;
	return false;
}

const char *engine_backend_strerror(const struct engine_backend *b, int err, char *buf, size_t len)
{
	struct engine_backend_info info;

	if (!b || b->kind != ENGINE_BACKEND_CUDA || engine_backend_get_info(b, &info) < 0 ||
	    (err != -ENOMEM && err != -EIO)) {
		snprintf(buf, len, "%s", strerror(-err));
		return buf;
	}
	char fault[160];
	if (err == -EIO && engine_backend_fault(b, fault, sizeof(fault)))
		snprintf(buf, len, "the CUDA device %d (%s) failed: %s", b->device, info.device, fault);
	else if (err == -EIO)
		snprintf(buf, len,
			 "the CUDA device %d (%s) failed (see the debug log for the CUDA "
			 "error)",
			 b->device, info.device);
	else
		snprintf(buf, len,
			 "out of device memory on CUDA device %d (%s): %llu of %llu MiB "
			 "free, sessions hold %llu MiB",
			 b->device, info.device, (unsigned long long)(info.memory_free >> 20),
			 (unsigned long long)(info.memory_total >> 20),
			 (unsigned long long)(info.state_bytes >> 20));
	return buf;
}

int engine_backend_profile(struct engine_backend *b, bool on)
{
	if (!b)
		return -EINVAL;
	return b->ops->profile ? b->ops->profile(b, on) : -EOPNOTSUPP;
}

int engine_backend_profile_report(struct engine_backend *b, char ***ret_lines)
{
	if (!b || !ret_lines)
		return -EINVAL;
	*ret_lines = NULL;
	return b->ops->profile_report ? b->ops->profile_report(b, ret_lines) : -EOPNOTSUPP;
}

void engine_backend_profile_free(char **lines)
{
	for (size_t i = 0; lines && lines[i]; i++)
		free(lines[i]);
	free(lines);
}

int backend_ops_check(const struct backend_ops *ops, char *err, size_t errlen)
{
	const char *name = ops && ops->name ? ops->name : "(unnamed)", *missing = NULL;

	if (!ops || !ops->name)
		missing = "name";
	else if (!ops->destroy)
		missing = "destroy";
	else if (!ops->seq_create)
		missing = "seq_create";
	else if (!ops->seq_destroy)
		missing = "seq_destroy";
	else if (!ops->seq_reset)
		missing = "seq_reset";
	else if (!ops->seq_copy)
		missing = "seq_copy";
	else if (!ops->seq_state_bytes)
		missing = "seq_state_bytes";
	else if (!ops->seq_export)
		missing = "seq_export";
	else if (!ops->seq_import)
		missing = "seq_import";
	else if (!ops->reserve)
		missing = "reserve";
	else if (!ops->forward)
		missing = "forward";
	else if (!ops->vision_preprocess)
		missing = "vision_preprocess";
	else if (!ops->vision_encode_tiles)
		missing = "vision_encode_tiles";
	else if (!ops->info)
		missing = "info";
	if (missing) {
		snprintf(err, errlen, "backend %s: its ops table lacks the mandatory member %s", name,
			 missing);
		return -EINVAL;
	}
	const bool rows = ops->rows_alloc && ops->rows_read && ops->rows_free;
	if (!rows && (ops->rows_alloc || ops->rows_read || ops->rows_free)) {
		snprintf(err, errlen, "backend %s: rows_alloc, rows_read and rows_free come together", name);
		return -EINVAL;
	}
	if (ops->vision.device && !rows) {
		snprintf(err, errlen,
			 "backend %s: its vision runs in device memory but it has no "
			 "rows_alloc, rows_read, rows_free",
			 name);
		return -EINVAL;
	}
	if (ops->vision.max_tiles < 1 || ops->vision.max_tiles > VISION_MAX_ENCODE_TILES) {
		snprintf(err, errlen, "backend %s: vision.max_tiles %d is not in 1..%d", name,
			 ops->vision.max_tiles, VISION_MAX_ENCODE_TILES);
		return -EINVAL;
	}
	if (ops->vision.step != BACKEND_VISION_STEP_TILE && ops->vision.step != BACKEND_VISION_STEP_LAYER) {
		snprintf(err, errlen, "backend %s: vision.step %d is no step kind", name,
			 (int)ops->vision.step);
		return -EINVAL;
	}
	if (!ops->profile != !ops->profile_report) {
		snprintf(err, errlen, "backend %s: profile and profile_report come together", name);
		return -EINVAL;
	}
	return 0;
}

int backend_vision_steps_per_tile(const struct backend_vision_desc *d, const struct backend_vision_tower *t)
{
	return d->step == BACKEND_VISION_STEP_LAYER ? t->w->depth + 3 : 1;
}

int backend_init(struct engine_backend *b, const struct backend_ops *ops, const struct engine_model *m,
		 const struct engine_backend_options *opts)
{
	char err[160];
	int r = backend_ops_check(ops, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	b->ops = ops;
	b->model = m;
	b->kind = opts->kind;
	b->device = opts->device;
	b->precision = opts->precision;
	b->ssm_state =
		opts->ssm_state == ENGINE_PRECISION_BF16 ? ENGINE_PRECISION_BF16 : ENGINE_PRECISION_FP32;
	b->state_limit = opts->state_limit;
	/* as stored: the linear layers' dtype (the CPU backend names its quantized format) */
	const struct tensor *mats[4];
	enum tensor_dtype dt = m->cfg.n_layers > 0 && lm_layer_matrices(&m->layers[0], mats) > 0 ?
				       mats[0]->dtype :
				       m->embeddings.dtype;
	snprintf(b->weights, sizeof(b->weights), "%s",
		 dt == TENSOR_BF16    ? "bf16" :
		 dt == TENSOR_F16     ? "f16" :
		 dt == TENSOR_F8_E4M3 ? "fp8" :
					"f32");
	atomic_init(&b->state_bytes, 0);
	return 0;
}

int backend_charge(struct engine_backend *b, uint64_t bytes)
{
	uint64_t cur = atomic_load(&b->state_bytes);
	do {
		if (b->state_limit && (bytes > b->state_limit || cur > b->state_limit - bytes))
			return -ENOMEM;
	} while (!atomic_compare_exchange_weak(&b->state_bytes, &cur, cur + bytes));
	return 0;
}

void backend_uncharge(struct engine_backend *b, uint64_t bytes)
{
	atomic_fetch_sub(&b->state_bytes, bytes);
}

void backend_seq_state_finish(struct backend_seq_state *st)
{
	if (!st->layers)
		return;
	for (int l = 0; l < st->n_layers; l++) {
		free(st->layers[l].conv);
		free(st->layers[l].ssm);
		free(st->layers[l].k);
		free(st->layers[l].v);
	}
	free(st->layers);
	st->layers = NULL;
}
