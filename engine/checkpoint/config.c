/* config.json: the nemotron_h text config, bare or nested in the Nano-VL config (model.md 1).
 *
 * Hugging Face writes configs with Python's json module, which emits the bare tokens Infinity,
 * -Infinity and NaN (time_step_limit is [0.0, Infinity]). jansson rejects them, so the text is
 * rewritten first: each such token outside a string becomes a string holding a marker byte and
 * the token, which model_config_number() reads back as the number.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "loader.h"

#define NONFINITE_MARK "\x01"

static const struct {
	const char *token;  /* as Python writes it */
	const char *json;   /* what replaces it in the text */
	const char *string; /* the decoded string value */
	double value;
} nonfinite[] = {
	{"-Infinity", "\"\\u0001-Infinity\"", NONFINITE_MARK "-Infinity", -INFINITY},
	{"Infinity", "\"\\u0001Infinity\"", NONFINITE_MARK "Infinity", INFINITY},
	{"NaN", "\"\\u0001NaN\"", NONFINITE_MARK "NaN", NAN},
};

static bool is_word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '.' || c == '+' || c == '-';
}

/* Index into nonfinite[] of the token starting at text[i], or -1. */
static int nonfinite_at(const char *text, size_t len, size_t i)
{
	if (i > 0 && is_word_char(text[i - 1]))
		return -1;
	for (size_t k = 0; k < ARRAY_SIZE(nonfinite); k++) {
		size_t tl = strlen(nonfinite[k].token);

		if (len - i >= tl && memcmp(text + i, nonfinite[k].token, tl) == 0 &&
		    (len - i == tl || !is_word_char(text[i + tl])))
			return (int)k;
	}
	return -1;
}

/* Copies text with the non-finite tokens outside strings replaced; when out is NULL only
 * returns the length the copy needs. */
static size_t rewrite_nonfinite(const char *text, size_t len, char *out)
{
	bool in_string = false, escaped = false;
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		int k;

		if (in_string) {
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if ((c == '-' || c == 'I' || c == 'N') && (k = nonfinite_at(text, len, i)) >= 0) {
			size_t jl = strlen(nonfinite[k].json);

			if (out)
				memcpy(out + n, nonfinite[k].json, jl);
			n += jl;
			i += strlen(nonfinite[k].token) - 1;
			continue;
		}
		if (out)
			out[n] = c;
		n++;
	}
	return n;
}

int model_config_load_json(const char *text, size_t len, json_t **ret, char *errbuf, size_t errlen)
{
	return model_json_load("config.json", text, len, ret, errbuf, errlen);
}

int model_json_load(const char *name, const char *text, size_t len, json_t **ret, char *errbuf, size_t errlen)
{
	json_error_t jerr;
	json_t *root;
	size_t n;
	char *buf;

	if (len > MODEL_CONFIG_MAX_BYTES)
		return st_errorf(errbuf, errlen, -EFBIG, "%s: %zu bytes, more than the limit of %u", name,
				 len, MODEL_CONFIG_MAX_BYTES);
	/* Each rewrite adds 9 bytes to a token of at least 3: the copy stays under 4 * len. */
	n = rewrite_nonfinite(text, len, NULL);
	buf = xmalloc(n + 1);
	rewrite_nonfinite(text, len, buf);
	buf[n] = '\0';
	root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &jerr);
	free(buf);
	if (!root)
		return st_errorf(errbuf, errlen, -EINVAL, "%s: malformed JSON at line %d: %s", name,
				 jerr.line, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return st_errorf(errbuf, errlen, -EINVAL, "%s: the top level is not a JSON object", name);
	}
	*ret = root;
	return 0;
}

int model_config_number(const json_t *obj, const char *key, double *ret)
{
	const json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return -ENOENT;
	if (json_is_number(v)) {
		*ret = json_number_value(v);
		return 0;
	}
	if (json_is_string(v)) {
		for (size_t k = 0; k < ARRAY_SIZE(nonfinite); k++) {
			if (strcmp(json_string_value(v), nonfinite[k].string) == 0) {
				*ret = nonfinite[k].value;
				return 0;
			}
		}
	}
	return -EINVAL;
}

static double elem_number(const json_t *v, bool *ok)
{
	*ok = true;
	if (json_is_number(v))
		return json_number_value(v);
	if (json_is_string(v))
		for (size_t k = 0; k < ARRAY_SIZE(nonfinite); k++)
			if (strcmp(json_string_value(v), nonfinite[k].string) == 0)
				return nonfinite[k].value;
	*ok = false;
	return 0;
}

/* The first of `keys` (NULL-terminated) present and not null in obj, or NULL; *ret_key names it. */
static const json_t *get_alias(const json_t *obj, const char *const *keys, const char **ret_key)
{
	for (; *keys; keys++) {
		const json_t *v = json_object_get(obj, *keys);

		if (v && !json_is_null(v)) {
			*ret_key = *keys;
			return v;
		}
	}
	return NULL;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Integer field in [min, max]; keeps *out (the default) when absent. */
static int get_int(const json_t *obj, const char *const *keys, long long min, long long max, int *out,
		   char *errbuf, size_t errlen)
{
	const char *key = NULL;
	const json_t *v = get_alias(obj, keys, &key);
	json_int_t x;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' is not an integer", key);
	x = json_integer_value(v);
	if (x < min || x > max)
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' = %lld is outside [%lld, %lld]",
				 key, (long long)x, min, max);
	*out = (int)x;
	return 0;
}

static int get_bool(const json_t *obj, const char *const *keys, bool *out, char *errbuf, size_t errlen)
{
	const char *key = NULL;
	const json_t *v = get_alias(obj, keys, &key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' is not a boolean", key);
	*out = json_is_true(v);
	return 0;
}

/* A string field that, when present, must equal `want`. */
static int check_string(const json_t *obj, const char *key, const char *want, const char *what, char *errbuf,
			size_t errlen)
{
	const json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' is not a string", key);
	if (strcmp(json_string_value(v), want) != 0)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: %s '%.64s' is not supported (expected '%s')", what,
				 json_string_value(v), want);
	return 0;
}

/* A token id: integer, null (-1), or for eos a list whose first element counts. */
static int get_token_id(const json_t *obj, const char *key, int *out, char *errbuf, size_t errlen)
{
	const json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (json_is_null(v)) {
		*out = -1;
		return 0;
	}
	if (json_is_array(v) && json_array_size(v) > 0)
		v = json_array_get(v, 0);
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= MODEL_MAX_VOCAB)
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' is not a token id in [0, %d)",
				 key, MODEL_MAX_VOCAB);
	*out = (int)json_integer_value(v);
	return 0;
}

static int layer_kind(const char *name)
{
	static const struct {
		const char *name;
		char kind;
	} kinds[] = {
		{"mamba", 'M'},	    {"linear_attention", 'M'},
		{"attention", '*'}, {"full_attention", '*'},
		{"mlp", '-'},	    {"moe", 'E'},
	};

	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (strcmp(name, kinds[i].name) == 0)
			return kinds[i].kind;
	return -1;
}

static int parse_pattern(const json_t *text, struct lm_config *lm, char *errbuf, size_t errlen)
{
	const char *key = NULL;
	const json_t *v =
		get_alias(text, KEYS("hybrid_override_pattern", "layers_block_type", "layer_types"), &key);
	size_t n, i;

	if (!v)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"config.json: no layer pattern ('hybrid_override_pattern' or 'layers_block_type')");
	if (json_is_string(v)) {
		n = json_string_length(v);
		if (n == 0 || n > MODEL_MAX_LAYERS)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: '%s' has %zu layers (1 to %d supported)", key, n,
					 MODEL_MAX_LAYERS);
		memcpy(lm->pattern, json_string_value(v), n);
	} else if (json_is_array(v)) {
		n = json_array_size(v);
		if (n == 0 || n > MODEL_MAX_LAYERS)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: '%s' has %zu layers (1 to %d supported)", key, n,
					 MODEL_MAX_LAYERS);
		for (i = 0; i < n; i++) {
			const json_t *e = json_array_get(v, i);
			int k = json_is_string(e) ? layer_kind(json_string_value(e)) : -1;

			if (k < 0)
				return st_errorf(errbuf, errlen, -EINVAL,
						 "config.json: '%s'[%zu] is not a known layer type", key, i);
			lm->pattern[i] = (char)k;
		}
	} else {
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' is neither a string nor a list",
				 key);
	}
	lm->pattern[n] = '\0';
	lm->n_layers = (int)n;
	for (i = 0; i < n; i++) {
		char c = lm->pattern[i];

		if (c == 'E')
			return st_errorf(
				errbuf, errlen, -EINVAL,
				"config.json: layer %zu is a MoE layer ('E'), which is not supported", i);
		if (c != 'M' && c != '*' && c != '-')
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: layer %zu has type '%c' in '%s' (expected M, * or -)",
					 i, (c >= 0x20 && c < 0x7f) ? c : '?', key);
	}
	return 0;
}

static int parse_text_config(const json_t *text, struct model_config *c, char *errbuf, size_t errlen)
{
	struct lm_config *lm = &c->lm;
	const char *key = NULL;
	const json_t *v;
	int n_layers = 0, r;

	r = check_string(text, "model_type", "nemotron_h", "language model_type", errbuf, errlen);
	if (r < 0)
		return r;
	r = parse_pattern(text, lm, errbuf, errlen);
	if (r < 0)
		return r;
	r = get_int(text, KEYS("num_hidden_layers"), 1, MODEL_MAX_LAYERS, &n_layers, errbuf, errlen);
	if (r < 0)
		return r;
	if (n_layers && n_layers != lm->n_layers)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: num_hidden_layers is %d but the layer pattern has %d layers",
				 n_layers, lm->n_layers);

	if (!json_object_get(text, "hidden_size"))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: 'hidden_size' is missing");
	if ((r = get_int(text, KEYS("hidden_size"), 1, MODEL_MAX_DIM, &lm->hidden, errbuf, errlen)) < 0 ||
	    (r = get_int(text, KEYS("vocab_size"), 1, MODEL_MAX_VOCAB, &c->vocab_size, errbuf, errlen)) < 0 ||
	    (r = get_int(text, KEYS("intermediate_size"), 1, MODEL_MAX_DIM, &lm->intermediate, errbuf,
			 errlen)) < 0 ||
	    (r = get_int(text, KEYS("num_attention_heads"), 1, MODEL_MAX_HEADS, &lm->n_heads, errbuf,
			 errlen)) < 0 ||
	    (r = get_int(text, KEYS("num_key_value_heads"), 1, MODEL_MAX_HEADS, &lm->n_kv_heads, errbuf,
			 errlen)) < 0 ||
	    (r = get_int(text, KEYS("head_dim", "attention_head_dim"), 1, MODEL_MAX_DIM, &lm->head_dim,
			 errbuf, errlen)) < 0 ||
	    (r = get_int(text, KEYS("mamba_num_heads"), 1, MODEL_MAX_HEADS, &lm->m_heads, errbuf, errlen)) <
		    0 ||
	    (r = get_int(text, KEYS("mamba_head_dim"), 1, MODEL_MAX_DIM, &lm->m_head_dim, errbuf, errlen)) <
		    0 ||
	    (r = get_int(text, KEYS("ssm_state_size", "mamba_d_state"), 1, MODEL_MAX_DIM, &lm->m_state,
			 errbuf, errlen)) < 0 ||
	    (r = get_int(text, KEYS("n_groups", "mamba_n_groups"), 1, MODEL_MAX_HEADS, &lm->m_groups, errbuf,
			 errlen)) < 0 ||
	    (r = get_int(text, KEYS("conv_kernel", "mamba_d_conv"), 1, MODEL_MAX_KERNEL, &lm->m_conv_kernel,
			 errbuf, errlen)) < 0 ||
	    (r = get_int(text, KEYS("chunk_size", "mamba_chunk_size"), 1, MODEL_MAX_CHUNK, &lm->m_chunk,
			 errbuf, errlen)) < 0 ||
	    (r = get_bool(text, KEYS("use_conv_bias", "mamba_conv_bias"), &c->use_conv_bias, errbuf,
			  errlen)) < 0 ||
	    (r = get_bool(text, KEYS("tie_word_embeddings"), &c->tie_word_embeddings, errbuf, errlen)) < 0)
		return r;
	if (lm->n_kv_heads && !lm->n_heads)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: 'num_key_value_heads' is given without 'num_attention_heads'");
	if (lm->n_heads && !lm->n_kv_heads)
		lm->n_kv_heads = lm->n_heads;
	if (lm->n_heads && lm->n_heads % lm->n_kv_heads != 0)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"config.json: num_attention_heads %d is not a multiple of num_key_value_heads %d",
			lm->n_heads, lm->n_kv_heads);
	if (strchr(lm->pattern, '*') && !lm->n_heads)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"config.json: the pattern has attention layers but 'num_attention_heads' is missing");

	/* Unsupported variants of the architecture: refuse rather than compute something else. */
	if ((r = check_string(text, "mlp_hidden_act", "relu2", "mlp_hidden_act", errbuf, errlen)) < 0 ||
	    (r = check_string(text, "mamba_hidden_act", "silu", "mamba_hidden_act", errbuf, errlen)) < 0)
		return r;
	{
		static const char *const no_bias[] = {"use_bias", "mamba_proj_bias", "attention_bias",
						      "mlp_bias", "residual_in_fp32"};

		for (size_t i = 0; i < ARRAY_SIZE(no_bias); i++) {
			bool b = false;

			r = get_bool(text, (const char *const[]){no_bias[i], NULL}, &b, errbuf, errlen);
			if (r < 0)
				return r;
			if (b)
				return st_errorf(errbuf, errlen, -EINVAL,
						 "config.json: '%s' is true, which is not supported",
						 no_bias[i]);
		}
	}

	{
		double eps = 1e-5;

		v = get_alias(text, KEYS("layer_norm_epsilon", "rms_norm_eps"), &key);
		if (v && model_config_number(text, key, &eps) < 0)
			return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' is not a number", key);
		/* checked as the float the compute code gets: 1e-85 would round to 0 */
		if (!((float)eps > 0 && (float)eps < 1))
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: '%s' = %g is outside (0, 1) as a float",
					 key ? key : "layer_norm_epsilon", eps);
		lm->eps = (float)eps;
	}

	lm->dt_min = 0.0f;
	lm->dt_max = INFINITY;
	v = get_alias(text, KEYS("time_step_limit", "mamba_dt_limit"), &key);
	if (v) {
		bool ok0, ok1;
		double lo, hi;

		if (!json_is_array(v) || json_array_size(v) != 2)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: '%s' is not a list of 2 numbers", key);
		lo = elem_number(json_array_get(v, 0), &ok0);
		hi = elem_number(json_array_get(v, 1), &ok1);
		if (!ok0 || !ok1 || isnan(lo) || isnan(hi) || lo > hi || lo < 0)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: '%s' must be [min, max] with 0 <= min <= max", key);
		lm->dt_min = (float)lo;
		lm->dt_max = (float)hi;
	}

	lm->bos_id = 1;
	lm->eos_id = 2;
	lm->pad_id = 0;
	if ((r = get_token_id(text, "bos_token_id", &lm->bos_id, errbuf, errlen)) < 0 ||
	    (r = get_token_id(text, "eos_token_id", &lm->eos_id, errbuf, errlen)) < 0 ||
	    (r = get_token_id(text, "pad_token_id", &lm->pad_id, errbuf, errlen)) < 0)
		return r;
	return 0;
}

int model_config_from_json(const json_t *root, struct model_config *ret, char *errbuf, size_t errlen)
{
	struct model_config c = {
		.use_conv_bias = true,
		.lm = {.m_state = 128, .m_chunk = 128}, /* transformers' defaults; not derivable */
	};
	const json_t *text, *mt;
	int r;

	if (!json_is_object(root))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: the top level is not a JSON object");
	mt = json_object_get(root, "model_type");
	if (mt && !json_is_string(mt))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: 'model_type' is not a string");

	text = json_object_get(root, "llm_config");
	if (!text)
		text = json_object_get(root, "text_config");
	if (text) {
		if (!json_is_object(text))
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: 'llm_config' is not an object");
		if (json_object_get(root, "vision_config") &&
		    !json_is_object(json_object_get(root, "vision_config")))
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: 'vision_config' is not an object");
		c.vlm = true;
	} else {
		if (mt && strcmp(json_string_value(mt), "NemotronH_Nano_VL_V2") == 0)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: model_type NemotronH_Nano_VL_V2 without 'llm_config' "
					 "or 'text_config'");
		if (mt && strcmp(json_string_value(mt), "nemotron_h") != 0)
			return st_errorf(errbuf, errlen, -EINVAL,
					 "config.json: model_type '%.64s' is not supported (expected "
					 "nemotron_h or NemotronH_Nano_VL_V2)",
					 json_string_value(mt));
		text = root;
	}
	r = parse_text_config(text, &c, errbuf, errlen);
	if (r < 0)
		return r;
	*ret = c;
	return 0;
}

int model_config_parse(const char *text, size_t len, struct model_config *ret, char *errbuf, size_t errlen)
{
	json_t *root = NULL;
	int r;

	r = model_config_load_json(text, len, &root, errbuf, errlen);
	if (r < 0)
		return r;
	r = model_config_from_json(root, ret, errbuf, errlen);
	json_decref(root);
	return r;
}
