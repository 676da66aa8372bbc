/* NVIDIA ModelOpt FP8 checkpoints: the quantization config and the scales (modelopt.h). */
#include "modelopt.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common.h"
#include "loader.h"
#include "quant.h"

static const char supported[] =
	"holod reads NVIDIA ModelOpt's FP8 checkpoints (quant_method \"modelopt\", quant_algo \"FP8\" "
	"or \"FP8_PER_CHANNEL_PER_TOKEN\") and bf16/f16/f32 ones";

/* One declaration of the quantization: {quant_algo, kv_cache_quant_algo | kv_cache_scheme,
 * exclude_modules | ignore} from `q` (already unwrapped from "quantization"). */
static int read_decl(const char *where, const json_t *q, struct modelopt_quant *ret, char *errbuf,
		     size_t errlen)
{
	const json_t *algo = json_object_get(q, "quant_algo");
	if (!json_is_string(algo))
		return st_errorf(errbuf, errlen, -EINVAL, "%s: no string quant_algo; %s", where, supported);
	const char *a = json_string_value(algo);
	if (strlen(a) >= sizeof(ret->algo))
		return st_errorf(errbuf, errlen, -EINVAL, "%s: quant_algo '%.40s...' is not supported; %s",
				 where, a, supported);
	/* ModelOpt may write it in lower case; vLLM upper-cases it */
	if (strcasecmp(a, "FP8") == 0)
		ret->per_channel = false;
	else if (strcasecmp(a, "FP8_PER_CHANNEL_PER_TOKEN") == 0)
		ret->per_channel = true;
	else
		return st_errorf(errbuf, errlen, -EINVAL, "%s: quant_algo '%s' is not supported; %s", where,
				 a, supported);
	snprintf(ret->algo, sizeof(ret->algo), "%s", a);
	for (char *p = ret->algo; *p; p++)
		if (*p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	ret->fp8 = true;

	const json_t *kv = json_object_get(q, "kv_cache_quant_algo");
	if (kv && !json_is_null(kv)) {
		if (!json_is_string(kv) || strcasecmp(json_string_value(kv), "FP8") != 0)
			return st_errorf(
				errbuf, errlen, -EINVAL,
				"%s: kv_cache_quant_algo %s%.40s%s is not supported (null or \"FP8\")", where,
				json_is_string(kv) ? "'" : "",
				json_is_string(kv) ? json_string_value(kv) : "(not a string)",
				json_is_string(kv) ? "'" : "");
		ret->kv_fp8 = true;
	}
	const json_t *scheme = json_object_get(q, "kv_cache_scheme");
	if (scheme && !json_is_null(scheme)) {
		const json_t *type = json_object_get(scheme, "type"),
			     *bits = json_object_get(scheme, "num_bits");
		if (!json_is_object(scheme) || !json_is_string(type) ||
		    strcmp(json_string_value(type), "float") != 0 || !json_is_integer(bits) ||
		    json_integer_value(bits) != 8)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "%s: kv_cache_scheme is not supported (null, or {\"type\": "
					 "\"float\", \"num_bits\": 8})",
					 where);
		ret->kv_fp8 = true;
	}
	static const char *const lists[] = {"exclude_modules", "ignore"};
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		const json_t *l = json_object_get(q, lists[i]), *v;
		size_t k;
		if (!l || json_is_null(l))
			continue;
		if (!json_is_array(l))
			return st_errorf(errbuf, errlen, -EINVAL, "%s: %s is not a list", where, lists[i]);
		if (json_array_size(l) > MODELOPT_MAX_EXCLUDES)
			return st_errorf(errbuf, errlen, -EFBIG,
					 "%s: %s has %zu entries, more than the limit of %d", where, lists[i],
					 json_array_size(l), MODELOPT_MAX_EXCLUDES);
		json_array_foreach(l, k,
				   v) if (!json_is_string(v)) return st_errorf(errbuf, errlen, -EINVAL,
									       "%s: %s[%zu] is not a string",
									       where, lists[i], k);
	}
	return 0;
}

/* q is {"quant_method": ..., (flat fields | "quantization": {...})} or hf_quant_config.json's
 * {"producer": ..., "quantization": {...}} (needs_method false). */
static int read_object(const char *where, const json_t *q, bool needs_method, struct modelopt_quant *ret,
		       char *errbuf, size_t errlen)
{
	if (!json_is_object(q))
		return st_errorf(errbuf, errlen, -EINVAL, "%s is not an object", where);
	const json_t *method = json_object_get(q, "quant_method");
	if (needs_method || method) {
		if (!json_is_string(method))
			return st_errorf(errbuf, errlen, -EINVAL, "%s has no string quant_method; %s", where,
					 supported);
		if (strncasecmp(json_string_value(method), "modelopt", 8) != 0)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "%s: quant_method '%.64s' is not supported; %s", where,
					 json_string_value(method), supported);
	}
	const json_t *producer = json_object_get(q, "producer"), *pname;
	if (producer &&
	    (!json_is_object(producer) || !json_is_string(pname = json_object_get(producer, "name")) ||
	     strcasecmp(json_string_value(pname), "modelopt") != 0))
		return st_errorf(errbuf, errlen, -EINVAL, "%s: the producer is not ModelOpt; %s", where,
				 supported);
	const json_t *inner = json_object_get(q, "quantization");
	if (inner) {
		if (!json_is_object(inner))
			return st_errorf(errbuf, errlen, -EINVAL, "%s: 'quantization' is not an object",
					 where);
		return read_decl(where, inner, ret, errbuf, errlen);
	}
	return read_decl(where, q, ret, errbuf, errlen);
}

int modelopt_config_read(const char *dir, const json_t *config_root, struct modelopt_quant *ret, char *errbuf,
			 size_t errlen)
{
	struct modelopt_quant a = {0}, b = {0};
	bool have_a = false, have_b = false;
	int r;
	char *path = path_join(dir, "hf_quant_config.json");
	FILE *f = fopen(path, "rb");
	free(path);
	if (f) {
		struct stat st;
		if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
			fclose(f);
			return st_errorf(errbuf, errlen, -EINVAL, "hf_quant_config.json: not a regular file");
		}
		if ((uint64_t)st.st_size > MODELOPT_CONFIG_MAX_BYTES) {
			fclose(f);
			return st_errorf(errbuf, errlen, -EFBIG,
					 "hf_quant_config.json: %llu bytes, more than the limit of %u",
					 (unsigned long long)st.st_size, MODELOPT_CONFIG_MAX_BYTES);
		}
		char *text = xmalloc((size_t)st.st_size + 1);
		size_t len = fread(text, 1, (size_t)st.st_size, f);
		fclose(f);
		json_t *root = NULL;
		r = model_json_load("hf_quant_config.json", text, len, &root, errbuf, errlen);
		free(text);
		if (r < 0)
			return r;
		r = read_object("hf_quant_config.json", root, false, &a, errbuf, errlen);
		json_decref(root);
		if (r < 0)
			return r;
		have_a = true;
	}
	const json_t *qc = config_root ? json_object_get(config_root, "quantization_config") : NULL;
	if (qc && !json_is_null(qc)) {
		r = read_object("config.json: quantization_config", qc, true, &b, errbuf, errlen);
		if (r < 0)
			return r;
		have_b = true;
	}
	if (have_a && have_b && (strcmp(a.algo, b.algo) != 0 || a.kv_fp8 != b.kv_fp8))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "hf_quant_config.json (quant_algo %s) and config.json's quantization_config "
				 "(quant_algo %s) disagree",
				 a.algo, b.algo);
	*ret = have_a ? a : b;
	return 0;
}

static void shape_str(const struct tensor *t, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "[");
	for (int d = 0; d < t->ndim && k < n; d++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

static float f32_at(const struct tensor *t, int64_t i)
{
	float v;
	memcpy(&v, (const char *)t->data + (size_t)i * sizeof(float), sizeof(v));
	return v;
}

static int64_t elements(const struct tensor *t)
{
	int64_t n = 1;
	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

int modelopt_check_scales(const char *name, const struct tensor *w, const struct tensor *ws,
			  const struct tensor *is, char *errbuf, size_t errlen)
{
	char s[96];
	if (!ws || !ws->data)
		return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s' is F8_E4M3 but '%s_scale' is missing",
				 name, name);
	shape_str(ws, s, sizeof(s));
	if (ws->dtype != TENSOR_F32)
		return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s_scale' is not F32", name);
	int64_t rows = w->shape[0];
	bool per_tensor = ws->ndim == 0 || (ws->ndim == 1 && ws->shape[0] == 1);
	bool per_row = (ws->ndim == 1 && ws->shape[0] == rows) ||
		       (ws->ndim == 2 && ws->shape[0] == rows && ws->shape[1] == 1);
	if (!per_tensor && !per_row)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"tensor '%s_scale' has shape %s: expected [] or [1] (one scale) or [%lld] or "
			"[%lld, 1] (one per output row)",
			name, s, (long long)rows, (long long)rows);
	int64_t n = elements(ws);
	for (int64_t i = 0; i < n; i++) {
		float v = f32_at(ws, i);
		if (!quant_fp8_scale_ok(v))
			return st_errorf(
				errbuf, errlen, -EINVAL,
				"tensor '%s_scale'[%lld] is %g: an fp8 scale must be finite and within "
				"[%g, %g]",
				name, (long long)i, (double)v, (double)QUANT_FP8_MIN_SCALE,
				(double)QUANT_FP8_MAX_SCALE);
	}
	if (is && is->data) {
		shape_str(is, s, sizeof(s));
		if (is->dtype != TENSOR_F32 || elements(is) != 1 || is->ndim > 1)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "the input_scale of '%s' has shape %s: it must be one F32 value",
					 name, s);
		float v = f32_at(is, 0);
		if (!(isfinite(v) && v > 0))
			return st_errorf(errbuf, errlen, -EINVAL,
					 "the input_scale of '%s' is %g: it must be finite and > 0", name,
					 (double)v);
	}
	return 0;
}

int modelopt_check_kv_scale(const char *name, const struct tensor *t, char *errbuf, size_t errlen)
{
	if (t->dtype != TENSOR_F32 || elements(t) != 1 || t->ndim > 1)
		return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s' must be one F32 value", name);
	float v = f32_at(t, 0);
	if (!(isfinite(v) && v > 0))
		return st_errorf(errbuf, errlen, -EINVAL, "tensor '%s' is %g: it must be finite and > 0",
				 name, (double)v);
	return 0;
}

float modelopt_row_scale(const struct tensor *ws, int64_t r)
{
	return elements(ws) == 1 ? f32_at(ws, 0) : f32_at(ws, r);
}

bool model_has_fp8(const struct engine_model *m)
{
	for (int l = 0; m && m->layers && l < m->cfg.n_layers; l++)
		for (int i = 0; i < 4; i++)
			if (m->layers[l].fp8_scale[i].data)
				return true;
	return false;
}
