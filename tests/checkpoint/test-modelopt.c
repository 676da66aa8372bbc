/* NVIDIA ModelOpt FP8 checkpoints (engine/checkpoint/modelopt.c, loader.c, lm_fp8.c): the tiny
 * FP8 fixtures tools/gen_fp8_model.py writes in ModelOpt's layout load (per-tensor scales with
 * hf_quant_config.json; per-channel ones with config.json's quantization_config alone) and run
 * on the CPU backend as fp8, and broken copies of tiny-fp8 written here into a temporary
 * directory fail with a sentence naming what is wrong, never a crash: a weight_scale of the
 * wrong shape, NaN, zero or negative, a missing weight_scale, a bad input_scale, an F8_E4M3
 * tensor whose bytes do not match its shape, an F8_E4M3 tensor outside the linear layers, an
 * unknown quant_algo or quant_method, the two config files disagreeing, F8 tensors without a
 * declared quantization, and a NaN code in a weight (refused when the backend holds the layers,
 * naming layer, matrix and row). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "loader.h"
#include "model.h"
#include "modelopt.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char fixtures[4096];

/* ---- a copy of tiny-fp8 with changes ------------------------------------------------------- */

struct ent {
	char name[256];
	const char *dtype;
	int ndim;
	int64_t shape[4];
	unsigned char *data;
	size_t n;
};

static size_t esize(const char *dt)
{
	return strcmp(dt, "F32") == 0 ? 4 : strcmp(dt, "F8_E4M3") == 0 ? 1 : 2;
}

static const char *dtname(enum tensor_dtype d)
{
	return d == TENSOR_F32 ? "F32" : d == TENSOR_F16 ? "F16" : d == TENSOR_BF16 ? "BF16" : "F8_E4M3";
}

static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	size_t ex = esize(x->dtype), ey = esize(y->dtype);
	return ex != ey ? (ex > ey ? -1 : 1) : strcmp(x->name, y->name);
}

/* the fixture's tensors as owned entries */
static struct ent *read_fixture(const char *dir, size_t *ret_n)
{
	char path[4200], err[512];
	struct st_file *f;
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	REQUIRE(st_file_open(path, &f, err, sizeof(err)) == 0);
	struct ent *e = calloc(f->n_entries + 4, sizeof(*e));
	REQUIRE(e);
	for (size_t i = 0; i < f->n_entries; i++) {
		const struct st_entry *s = &f->entries[i];
		snprintf(e[i].name, sizeof(e[i].name), "%s", s->name);
		e[i].dtype = dtname(s->t.dtype);
		e[i].ndim = s->t.ndim;
		memcpy(e[i].shape, s->t.shape, sizeof(e[i].shape));
		e[i].n = s->t.nbytes;
		e[i].data = malloc(e[i].n + 1);
		REQUIRE(e[i].data);
		memcpy(e[i].data, s->t.data, e[i].n);
	}
	*ret_n = f->n_entries;
	st_file_destroy(f);
	return e;
}

static struct ent *find(struct ent *e, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(e[i].name, name) == 0)
			return &e[i];
	REQUIRE(!"tensor in the fixture");
	return NULL;
}

/* writes dir/model.safetensors; `lie` > 0 declares that many bytes less for the first F8 tensor */
static void write_st(const char *dir, struct ent *e, size_t n, size_t lie)
{
	qsort(e, n, sizeof(*e), ent_cmp);
	json_t *h = json_object();
	size_t off = 0;
	bool lied = false;
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object(), *shape = json_array();
		for (int d = 0; d < e[i].ndim; d++)
			json_array_append_new(shape, json_integer(e[i].shape[d]));
		size_t len = e[i].n;
		if (lie && !lied && strcmp(e[i].dtype, "F8_E4M3") == 0) {
			len -= lie; /* the data_offsets span fewer bytes than the shape needs */
			lied = true;
		}
		json_object_set_new(o, "dtype", json_string(e[i].dtype));
		json_object_set_new(o, "shape", shape);
		json_object_set_new(o, "data_offsets",
				    json_pack("[I, I]", (json_int_t)off, (json_int_t)(off + len)));
		json_object_set_new(h, e[i].name, o);
		off += len;
	}
	char *text = json_dumps(h, JSON_COMPACT);
	size_t hl = strlen(text), pad = (8 - hl % 8) % 8;
	char path[4200];
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	FILE *f = fopen(path, "wb");
	REQUIRE(f);
	uint64_t total = hl + pad;
	fwrite(&total, 8, 1, f);
	fwrite(text, 1, hl, f);
	fwrite("        ", 1, pad, f);
	lied = false;
	for (size_t i = 0; i < n; i++) {
		size_t len = e[i].n;
		if (lie && !lied && strcmp(e[i].dtype, "F8_E4M3") == 0) {
			len -= lie;
			lied = true;
		}
		fwrite(e[i].data, 1, len, f);
	}
	fclose(f);
	free(text);
	json_decref(h);
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
}

/* the config.json of tiny-fp8 with its quantization_config replaced by `qc` (JSON; NULL: none) */
static void write_config(const char *src, const char *dir, const char *qc)
{
	char path[8500];
	snprintf(path, sizeof(path), "%s/config.json", src);
	json_error_t je;
	json_t *root = json_load_file(path, JSON_ALLOW_NUL, &je);
	if (!root) {
		/* Python's Infinity: the fixture's time_step_limit; drop it */
		FILE *f = fopen(path, "r");
		REQUIRE(f);
		static char buf[65536];
		size_t k = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[k] = 0;
		char *inf = strstr(buf, "Infinity");
		if (inf)
			memcpy(inf, "1e30    ", 8);
		root = json_loads(buf, 0, &je);
	}
	REQUIRE(root);
	if (qc)
		json_object_set_new(root, "quantization_config", json_loads(qc, 0, &je));
	else
		json_object_del(root, "quantization_config");
	snprintf(path, sizeof(path), "%s/config.json", dir);
	REQUIRE(json_dump_file(root, path, JSON_INDENT(2)) == 0);
	json_decref(root);
}

static char tmp[4096];

static void fresh(void)
{
	char cmd[8300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", tmp, tmp);
	REQUIRE(system(cmd) == 0);
}

/* loads tmp: NULL and the message in err, or the model */
static struct engine_model *load(char *err, size_t n)
{
	err[0] = 0;
	return engine_model_load(tmp, err, n);
}

static void expect_refused(const char *what, const char *needle1, const char *needle2)
{
	char err[1024];
	struct engine_model *m = load(err, sizeof(err));
	bool ok = !m && strstr(err, needle1) && (!needle2 || strstr(err, needle2));
	if (!ok)
		fprintf(stderr, "%s: %s (want '%s'%s%s)\n", what, m ? "loaded" : err, needle1,
			needle2 ? " and " : "", needle2 ? needle2 : "");
	else
		printf("%s: %s\n", what, err);
	CHECK(ok);
	engine_model_destroy(m);
}

static const char *FP8_QC =
	"{\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8\", \"kv_cache_scheme\": null, "
	"\"ignore\": [\"lm_head\"]}";

/* a tiny-fp8 copy: its tensors changed by `mod`, its configs as given */
static void variant(void (*mod)(struct ent *, size_t *), size_t lie, const char *qc, const char *hq)
{
	char src[4200];
	snprintf(src, sizeof(src), "%s/tiny-fp8", fixtures);
	fresh();
	size_t n;
	struct ent *e = read_fixture(src, &n);
	if (mod)
		mod(e, &n);
	write_st(tmp, e, n, lie);
	for (size_t i = 0; i < n; i++)
		free(e[i].data);
	free(e);
	write_config(src, tmp, qc);
	if (hq)
		write_text(tmp, "hf_quant_config.json", hq);
}

static const char *OUTP = "backbone.layers.0.mixer.out_proj";

static void scale_shape(struct ent *e, size_t *n)
{
	(void)n;
	struct ent *s = find(e, *n, "backbone.layers.0.mixer.out_proj.weight_scale");
	float v[3] = {0.01f, 0.01f, 0.01f};
	s->ndim = 1;
	s->shape[0] = 3;
	s->data = realloc(s->data, sizeof(v));
	memcpy(s->data, v, sizeof(v));
	s->n = sizeof(v);
}

static float set_scale_value;
static void scale_value(struct ent *e, size_t *n)
{
	struct ent *s = find(e, *n, "backbone.layers.0.mixer.out_proj.weight_scale");
	memcpy(s->data, &set_scale_value, 4);
}

static void input_scale_nan(struct ent *e, size_t *n)
{
	struct ent *s = find(e, *n, "backbone.layers.2.mixer.in_proj.input_scale");
	float v = NAN;
	memcpy(s->data, &v, 4);
}

static void drop_scale(struct ent *e, size_t *n)
{
	struct ent *s = find(e, *n, "backbone.layers.1.mixer.up_proj.weight_scale");
	free(s->data);
	*s = e[*n - 1];
	(*n)--;
}

static void per_row_scale(struct ent *e, size_t *n)
{
	/* [out, 1]: ModelOpt's per-channel shape, accepted as [out] */
	struct ent *w = find(e, *n, "backbone.layers.1.mixer.up_proj.weight");
	struct ent *s = find(e, *n, "backbone.layers.1.mixer.up_proj.weight_scale");
	float v;
	memcpy(&v, s->data, 4);
	s->ndim = 2;
	s->shape[0] = w->shape[0];
	s->shape[1] = 1;
	s->n = (size_t)w->shape[0] * 4;
	s->data = realloc(s->data, s->n);
	for (int64_t r = 0; r < w->shape[0]; r++)
		memcpy(s->data + 4 * r, &v, 4);
}

static void nan_code(struct ent *e, size_t *n)
{
	struct ent *w = find(e, *n, "backbone.layers.3.mixer.k_proj.weight");
	w->data[5 * w->shape[1] + 7] = 0xff; /* row 5 */
}

static void fp8_embedding(struct ent *e, size_t *n)
{
	struct ent *w = find(e, *n, "backbone.embeddings.weight");
	w->dtype = "F8_E4M3";
	w->n /= 2;
	memset(w->data, 0x38, w->n);
}

static void test_refusals(void)
{
	char msg[200];
	variant(scale_shape, 0, FP8_QC, NULL);
	snprintf(msg, sizeof(msg), "%s.weight_scale' has shape [3]", OUTP);
	expect_refused("weight_scale of the wrong shape", msg, NULL);
	static const float bad[] = {NAN, 0.0f, -0.01f, INFINITY};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		set_scale_value = bad[i];
		variant(scale_value, 0, FP8_QC, NULL);
		expect_refused("a bad weight_scale", "out_proj.weight_scale'[0] is", "finite");
	}
	variant(input_scale_nan, 0, FP8_QC, NULL);
	expect_refused("a NaN input_scale", "input_scale of 'backbone.layers.2.mixer.in_proj.weight' is nan",
		       NULL);
	variant(drop_scale, 0, FP8_QC, NULL);
	expect_refused("no weight_scale", "up_proj.weight' is F8_E4M3 but", "weight_scale' is missing");
	variant(NULL, 3, FP8_QC, NULL);
	expect_refused("F8 bytes not matching the shape", "F8_E4M3 need", NULL);
	variant(fp8_embedding, 0, FP8_QC, NULL);
	expect_refused("an fp8 embedding", "backbone.embeddings.weight' is F8_E4M3", "only in the language");
	variant(NULL, 0, "{\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\"}", NULL);
	expect_refused("NVFP4", "quant_algo 'NVFP4' is not supported", "FP8");
	variant(NULL, 0, "{\"quant_method\": \"gptq\", \"bits\": 4}", NULL);
	expect_refused("gptq", "quant_method 'gptq' is not supported", "ModelOpt");
	variant(NULL, 0,
		NULL, "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": \"W4A16_AWQ\"}}");
	expect_refused("W4A16_AWQ", "hf_quant_config.json: quant_algo 'W4A16_AWQ' is not supported", NULL);
	variant(NULL, 0, FP8_QC,
		"{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": "
		"\"FP8_PER_CHANNEL_PER_TOKEN\"}}");
	expect_refused("configs disagreeing", "disagree", NULL);
	variant(NULL, 0, NULL, NULL);
	expect_refused("F8 without a declared quantization", "is F8_E4M3, but the checkpoint declares no FP8",
		       NULL);
	variant(NULL, 0, "{\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8\", \"ignore\": 3}", NULL);
	expect_refused("ignore not a list", "ignore is not a list", NULL);

	/* [out, 1] scales load; a NaN code loads and is refused when the layers are held */
	char err[1024];
	variant(per_row_scale, 0, FP8_QC, NULL);
	struct engine_model *m = load(err, sizeof(err));
	if (!m)
		fprintf(stderr, "[out, 1] scale: %s\n", err);
	CHECK(m != NULL);
	engine_model_destroy(m);
	variant(nan_code, 0, FP8_QC, NULL);
	m = load(err, sizeof(err));
	REQUIRE(m);
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	CHECK(!b && errno == EINVAL && strstr(err, "layer 3's mixer.k_proj") && strstr(err, "row 5"));
	printf("a NaN code: %s\n", err);
	engine_backend_destroy(b);
	o.weights = ENGINE_WEIGHTS_BF16;
	b = engine_backend_create(m, &o, err, sizeof(err));
	CHECK(!b && errno == EINVAL && strstr(err, "layer 3's mixer.k_proj") && strstr(err, "row 5"));
	printf("a NaN code, --weights bf16: %s\n", err);
	engine_model_destroy(m);
}

static void test_fixtures(void)
{
	static const char *const names[] = {"tiny-fp8", "tiny-fp8-pc"};
	for (int i = 0; i < 2; i++) {
		char dir[4200], err[1024];
		snprintf(dir, sizeof(dir), "%s/%s", fixtures, names[i]);
		struct engine_model *m = engine_model_load(dir, err, sizeof(err));
		if (!m)
			fprintf(stderr, "%s: %s\n", names[i], err);
		REQUIRE(m);
		CHECK(model_has_fp8(m));
		CHECK(m->layers[0].mamba.in_proj.dtype == TENSOR_F8_E4M3);
		CHECK(m->layers[0].mamba.conv_w.dtype == TENSOR_BF16);
		const struct tensor *s = &m->layers[0].fp8_scale[0];
		CHECK(s->data && s->dtype == TENSOR_F32);
		CHECK_INT_EQ(s->ndim, i == 0 ? 0 : 1);
		struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU,
						   .precision = ENGINE_PRECISION_FP32};
		struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
		REQUIRE(b);
		struct engine_backend_info info;
		CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
		CHECK_STR_EQ(info.weights, "fp8");
		engine_backend_destroy(b);
		/* bf16: the layers widened at load */
		o.weights = ENGINE_WEIGHTS_BF16;
		b = engine_backend_create(m, &o, err, sizeof(err));
		REQUIRE(b);
		CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
		CHECK_STR_EQ(info.weights, "bf16");
		engine_backend_destroy(b);
		/* CUDA holds the layers as fp8 (a device of sm_89 or newer: the emulation's sm_90),
		 * or says there is no device; it refuses to widen them to bf16, whatever the device */
		o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CUDA};
		b = engine_backend_create(m, &o, err, sizeof(err));
		if (b) {
			CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
			CHECK_STR_EQ(info.weights, "fp8");
			engine_backend_destroy(b);
		} else {
			CHECK(errno == ENODEV);
		}
		o.weights = ENGINE_WEIGHTS_BF16;
		CHECK(!engine_backend_create(m, &o, err, sizeof(err)));
		CHECK(errno == EINVAL);
		CHECK(strstr(err, "the CUDA backend does not widen them") != NULL);
		engine_model_destroy(m);
	}
}

int main(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	snprintf(fixtures, sizeof(fixtures), "%s/tests/fixtures/models", root ? root : ".");
	const char *t = getenv("TMPDIR");
	snprintf(tmp, sizeof(tmp), "%s/holod-modelopt-%d", t ? t : "/tmp", (int)getpid());
	test_fixtures();
	test_refusals();
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	(void)system(cmd);
	return test_exit();
}
