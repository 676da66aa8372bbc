/* Loader tests: every committed tiny checkpoint loads with the right config and tensors, the
 * sharded and VLM layouts give the same weights as the single-file one, and every kind of broken
 * checkpoint (built in a temporary directory from a fixture) fails with a precise message. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "loader.h"
#include "model.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char *fixtures;
static char errbuf[1024];

/* ---- files -------------------------------------------------------------------------------- */

static void *read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *buf;

	REQUIRE(f);
	REQUIRE(fseek(f, 0, SEEK_END) == 0);
	n = ftell(f);
	REQUIRE(n >= 0);
	rewind(f);
	buf = xmalloc((size_t)n + 1);
	REQUIRE(fread(buf, 1, (size_t)n, f) == (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	REQUIRE(f);
	REQUIRE(fwrite(data, 1, len, f) == len);
	REQUIRE(fclose(f) == 0);
}

static char *fmt(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *format, ...)
{
	static char bufs[8][1024];
	static int next;
	char *b = bufs[next++ % 8];
	va_list ap;

	va_start(ap, format);
	vsnprintf(b, sizeof(bufs[0]), format, ap);
	va_end(ap);
	return b;
}

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlink(fmt("%s/%s", dir, e->d_name));
	closedir(d);
	rmdir(dir);
}

/* A fresh temporary copy of fixture `name` (flat directory). */
static char *copy_fixture(const char *name)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *dir = xasprintf("%s/holod-test-loader-XXXXXX", tmp);
	char *src = xasprintf("%s/%s", fixtures, name);
	DIR *d;
	struct dirent *e;

	REQUIRE(mkdtemp(dir));
	d = opendir(src);
	REQUIRE(d);
	while ((e = readdir(d))) {
		size_t len;
		void *data;

		if (e->d_name[0] == '.')
			continue;
		data = read_file(fmt("%s/%s", src, e->d_name), &len);
		write_file(fmt("%s/%s", dir, e->d_name), data, len);
		free(data);
	}
	closedir(d);
	free(src);
	return dir;
}

static void drop_fixture(char *dir)
{
	rm_dir(dir);
	free(dir);
}

/* Rewrites the JSON header of dir/file with `edit`, keeping the data section byte for byte
 * (the new header is padded to a multiple of 8 so the data stays aligned). */
static void edit_header(const char *dir, const char *file, void (*edit)(json_t *hdr, void *ctx), void *ctx)
{
	char *path = xasprintf("%s/%s", dir, file);
	size_t len, hlen = 0, nlen, pad;
	uint8_t *buf = read_file(path, &len), lenbytes[8];
	json_t *hdr;
	char *text;

	for (int i = 0; i < 8; i++)
		hlen |= (size_t)buf[i] << (8 * i);
	hdr = json_loadb((char *)buf + 8, hlen, 0, NULL);
	REQUIRE(hdr);
	edit(hdr, ctx);
	text = json_dumps(hdr, JSON_COMPACT);
	nlen = strlen(text);
	pad = (8 - nlen % 8) % 8;
	for (int i = 0; i < 8; i++)
		lenbytes[i] = (uint8_t)((nlen + pad) >> (8 * i));
	{
		FILE *f = fopen(path, "wb");

		REQUIRE(f);
		fwrite(lenbytes, 1, 8, f);
		fwrite(text, 1, nlen, f);
		fwrite("        ", 1, pad, f);
		fwrite(buf + 8 + hlen, 1, len - 8 - hlen, f);
		REQUIRE(fclose(f) == 0);
	}
	free(text);
	json_decref(hdr);
	free(buf);
	free(path);
}

/* Rewrites dir/config.json with `edit` applied to the text config (llm_config for the VLM). */
static void edit_config(const char *dir, void (*edit)(json_t *text, void *ctx), void *ctx)
{
	char *path = xasprintf("%s/config.json", dir), *out;
	size_t len;
	char *text = read_file(path, &len);
	json_t *root = NULL, *tc;

	REQUIRE(model_config_load_json(text, len, &root, errbuf, sizeof(errbuf)) == 0);
	tc = json_object_get(root, "llm_config") ? json_object_get(root, "llm_config") : root;
	edit(tc, ctx);
	out = json_dumps(root, JSON_INDENT(1));
	write_file(path, out, strlen(out));
	free(out);
	json_decref(root);
	free(text);
	free(path);
}

/* Expects engine_model_load(dir) to fail with errno `err` and a message containing `needle`. */
#define CHECK_LOAD_FAILS(dir, err, needle)                                                                   \
	do {                                                                                                 \
		struct engine_model *_m;                                                                     \
		errbuf[0] = '\0';                                                                            \
		errno = 0;                                                                                   \
		_m = engine_model_load((dir), errbuf, sizeof(errbuf));                                       \
		CHECK(_m == NULL);                                                                           \
		CHECK_INT_EQ(errno, (err));                                                                  \
		if (!strstr(errbuf, (needle))) {                                                             \
			fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, errbuf,  \
				(needle));                                                                   \
			test_failures++;                                                                     \
		}                                                                                            \
		engine_model_destroy(_m);                                                                    \
	} while (0)

/* ---- loading the fixtures ----------------------------------------------------------------- */

static struct engine_model *load_fixture(const char *name)
{
	char *dir = xasprintf("%s/%s", fixtures, name);
	struct engine_model *m = engine_model_load(dir, errbuf, sizeof(errbuf));

	if (!m)
		fprintf(stderr, "loading %s: %s\n", name, errbuf);
	REQUIRE(m);
	free(dir);
	return m;
}

static void check_shape(const struct tensor *t, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
	int64_t want[3] = {d0, d1, d2};

	CHECK(t->data != NULL);
	CHECK_INT_EQ(t->ndim, ndim);
	for (int i = 0; i < ndim && i < 3; i++)
		CHECK_INT_EQ(t->shape[i], want[i]);
}

static float tensor_f32(const struct tensor *t, size_t i)
{
	switch (t->dtype) {
	case TENSOR_F32:
		return ((const float *)t->data)[i];
	case TENSOR_BF16:
		return bf16_to_f32(((const uint16_t *)t->data)[i]);
	case TENSOR_F16: {
		uint16_t h = ((const uint16_t *)t->data)[i];
		int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
		float v = e ? ldexpf((float)(mant | 0x400), e - 25) : ldexpf((float)mant, -24);

		REQUIRE(e != 0x1f);
		return (h & 0x8000) ? -v : v;
	}
	default: /* U8 records and quantized matrices have no element value */
		break;
	}
	return NAN;
}

/* The parameter count of the generator's tiny configs, from model.md 3 directly. */
static uint64_t expected_params(const char *pattern, uint64_t V, bool tied)
{
	const uint64_t d = 64, H = 8, P = 8, G = 2, N = 16, K = 4, Hq = 4, Hkv = 2, Dh = 16, I = 128;
	uint64_t din = H * P, conv = din + 2 * G * N, n = V * d * (tied ? 1 : 2) + d;

	for (const char *p = pattern; *p; p++) {
		n += d;
		if (*p == 'M')
			n += (2 * din + 2 * G * N + H) * d + conv * K + conv + 3 * H + din + d * din;
		else if (*p == '*')
			n += 2 * Hq * Dh * d + 2 * Hkv * Dh * d;
		else
			n += 2 * I * d;
	}
	return n;
}

static void check_tiny_config(const struct engine_model *m, const char *pattern, int vocab, bool tied)
{
	const struct lm_config *c = &m->cfg;
	struct engine_model_info info;

	CHECK_STR_EQ(c->pattern, pattern);
	CHECK_INT_EQ(c->n_layers, (int)strlen(pattern));
	CHECK_INT_EQ(c->hidden, 64);
	CHECK_INT_EQ(c->vocab, vocab);
	CHECK_INT_EQ(c->intermediate, 128);
	CHECK_INT_EQ(c->n_heads, 4);
	CHECK_INT_EQ(c->n_kv_heads, 2);
	CHECK_INT_EQ(c->head_dim, 16);
	CHECK_INT_EQ(c->m_heads, 8);
	CHECK_INT_EQ(c->m_head_dim, 8);
	CHECK_INT_EQ(c->m_groups, 2);
	CHECK_INT_EQ(c->m_state, 16);
	CHECK_INT_EQ(c->m_conv_kernel, 4);
	CHECK_INT_EQ(c->m_chunk, 8);
	CHECK_NEAR(c->eps, 1e-5, 1e-12);
	CHECK(c->dt_min == 0.0f);
	CHECK(isinf(c->dt_max) && c->dt_max > 0);
	CHECK_INT_EQ(c->bos_id, 1);
	CHECK_INT_EQ(c->eos_id, 2);
	CHECK_INT_EQ(c->pad_id, 0);

	check_shape(&m->embeddings, 2, vocab, 64, 0);
	check_shape(&m->lm_head, 2, vocab, 64, 0);
	check_shape(&m->norm_f, 1, 64, 0, 0);
	CHECK((m->lm_head.data == m->embeddings.data) == tied);

	for (int l = 0; l < c->n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];

		CHECK_INT_EQ(L->kind, pattern[l]);
		check_shape(&L->norm, 1, 64, 0, 0);
		if (L->kind == LM_LAYER_MAMBA) {
			check_shape(&L->mamba.in_proj, 2, 2 * 64 + 2 * 2 * 16 + 8, 64, 0);
			check_shape(&L->mamba.conv_w, 3, 128, 1, 4);
			check_shape(&L->mamba.conv_b, 1, 128, 0, 0);
			check_shape(&L->mamba.dt_bias, 1, 8, 0, 0);
			check_shape(&L->mamba.a_log, 1, 8, 0, 0);
			check_shape(&L->mamba.d, 1, 8, 0, 0);
			check_shape(&L->mamba.norm, 1, 64, 0, 0);
			check_shape(&L->mamba.out_proj, 2, 64, 64, 0);
			CHECK_INT_EQ(L->mamba.in_proj.dtype, TENSOR_BF16);
			CHECK_INT_EQ(L->mamba.a_log.dtype, TENSOR_F32);
			CHECK_INT_EQ(L->mamba.d.dtype, TENSOR_F32);
			CHECK_INT_EQ(L->mamba.dt_bias.dtype, TENSOR_F32);
			CHECK_INT_EQ(L->mamba.in_proj.nbytes, (2 * 64 + 2 * 2 * 16 + 8) * 64 * 2);
			/* The generator's init (model.md 7): A = -exp(A_log) in [-16, -1], softplus(dt_bias)
			 * in [0.001, 0.1]. Values read through the mapped data, so this also proves the
			 * data pointers land on the right bytes. */
			for (int h = 0; h < 8; h++) {
				float a = tensor_f32(&L->mamba.a_log, (size_t)h);
				float dtb = tensor_f32(&L->mamba.dt_bias, (size_t)h);
				float dt = log1pf(expf(dtb));

				CHECK(a >= 0.0f && a <= logf(16.0f) + 1e-6f);
				CHECK(dt >= 0.001f * 0.999f && dt <= 0.1f * 1.001f);
			}
		} else if (L->kind == LM_LAYER_ATTENTION) {
			check_shape(&L->attn.q, 2, 64, 64, 0);
			check_shape(&L->attn.k, 2, 32, 64, 0);
			check_shape(&L->attn.v, 2, 32, 64, 0);
			check_shape(&L->attn.o, 2, 64, 64, 0);
		} else {
			check_shape(&L->mlp.up, 2, 128, 64, 0);
			check_shape(&L->mlp.down, 2, 64, 128, 0);
		}
		/* Block norms are 1 + N(0, 0.1): near 1, which catches a wrong dtype decode. */
		for (int i = 0; i < 64; i++) {
			float w = tensor_f32(&L->norm, (size_t)i);

			CHECK(w > 0.4f && w < 1.6f);
		}
	}

	REQUIRE(engine_model_get_info(m, &info) == 0);
	CHECK_INT_EQ(info.n_layers, c->n_layers);
	CHECK_INT_EQ(info.hidden, 64);
	CHECK_INT_EQ(info.vocab, vocab);
	CHECK_INT_EQ(info.eos_id, 2);
	CHECK_STR_EQ(info.pattern, pattern);
	CHECK_INT_EQ(info.n_mamba + info.n_attention + info.n_mlp, c->n_layers);
	CHECK_INT_EQ(info.tied_embeddings, tied);
	CHECK_INT_EQ(info.n_params, expected_params(pattern, (uint64_t)vocab, tied));
	/* Everything is bf16 except A_log, D, dt_bias (f32, 3 * 8 per Mamba layer). */
	CHECK_INT_EQ(info.weight_bytes, 2 * info.n_params + 2 * 3 * 8 * (uint64_t)info.n_mamba);
}

static bool tensor_eq(const struct tensor *a, const struct tensor *b)
{
	if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes)
		return false;
	for (int i = 0; i < a->ndim; i++)
		if (a->shape[i] != b->shape[i])
			return false;
	if (!a->data || !b->data)
		return a->data == b->data;
	return memcmp(a->data, b->data, a->nbytes) == 0;
}

/* Same weights, tensor by tensor (and not merely the same pointers). */
static void check_same_weights(const struct engine_model *a, const struct engine_model *b)
{
	CHECK(a->embeddings.data != b->embeddings.data);
	CHECK(tensor_eq(&a->embeddings, &b->embeddings));
	CHECK(tensor_eq(&a->norm_f, &b->norm_f));
	CHECK(tensor_eq(&a->lm_head, &b->lm_head));
	CHECK(memcmp(&a->cfg, &b->cfg, sizeof(a->cfg)) == 0);
	for (int l = 0; l < a->cfg.n_layers; l++) {
		const struct lm_layer *x = &a->layers[l], *y = &b->layers[l];

		CHECK(tensor_eq(&x->norm, &y->norm));
		switch (x->kind) {
		case LM_LAYER_MAMBA:
			CHECK(tensor_eq(&x->mamba.in_proj, &y->mamba.in_proj));
			CHECK(tensor_eq(&x->mamba.conv_w, &y->mamba.conv_w));
			CHECK(tensor_eq(&x->mamba.conv_b, &y->mamba.conv_b));
			CHECK(tensor_eq(&x->mamba.dt_bias, &y->mamba.dt_bias));
			CHECK(tensor_eq(&x->mamba.a_log, &y->mamba.a_log));
			CHECK(tensor_eq(&x->mamba.d, &y->mamba.d));
			CHECK(tensor_eq(&x->mamba.norm, &y->mamba.norm));
			CHECK(tensor_eq(&x->mamba.out_proj, &y->mamba.out_proj));
			break;
		case LM_LAYER_ATTENTION:
			CHECK(tensor_eq(&x->attn.q, &y->attn.q));
			CHECK(tensor_eq(&x->attn.k, &y->attn.k));
			CHECK(tensor_eq(&x->attn.v, &y->attn.v));
			CHECK(tensor_eq(&x->attn.o, &y->attn.o));
			break;
		case LM_LAYER_MLP:
			CHECK(tensor_eq(&x->mlp.up, &y->mlp.up));
			CHECK(tensor_eq(&x->mlp.down, &y->mlp.down));
			break;
		}
	}
}

static void test_fixtures(void)
{
	struct engine_model *mamba = load_fixture("tiny-mamba");
	struct engine_model *sharded = load_fixture("tiny-sharded");
	struct engine_model *vl = load_fixture("tiny-vl");
	struct engine_model *aliases = load_fixture("tiny-aliases");
	struct engine_model *tied = load_fixture("tiny-tied");
	struct engine_model_info info;
	struct tensor t;

	check_tiny_config(mamba, "M-M*-M", 256, false);
	check_tiny_config(sharded, "M-M*-M", 256, false);
	check_tiny_config(vl, "M-M*-M", 256, false);
	check_tiny_config(aliases, "*M-M", 512, false);
	check_tiny_config(tied, "M*M-", 512, true);

	/* The sharded and VLM checkpoints hold tiny-mamba's language model byte for byte. */
	check_same_weights(mamba, sharded);
	check_same_weights(mamba, vl);

	/* tiny-tied stores its block norms as F16. */
	CHECK_INT_EQ(tied->layers[0].norm.dtype, TENSOR_F16);
	CHECK_INT_EQ(tied->layers[0].norm.nbytes, 128);

	/* Vision extras of the VLM layout are reachable by name; the LM's tensors by full name. */
	CHECK_INT_EQ(model_files_find(vl->files, "mlp1.1.weight", &t), 0);
	check_shape(&t, 2, 128, 64, 0);
	CHECK_INT_EQ(model_files_find(vl->files,
				      "vision_model.radio_model.model.patch_generator.embedder.weight", &t),
		     0);
	check_shape(&t, 2, 16, 768, 0);
	CHECK_INT_EQ(t.dtype, TENSOR_BF16);
	CHECK_INT_EQ(model_files_find(vl->files, "language_model.backbone.norm_f.weight", &t), 0);
	CHECK(t.data == vl->norm_f.data);
	CHECK_INT_EQ(model_files_find(vl->files, "mlp1.2.weight", &t), -ENOENT);
	CHECK_INT_EQ(model_files_find(mamba->files, "mlp1.1.weight", &t), -ENOENT);
	CHECK(model_files_config(vl->files)->vlm);
	CHECK(!model_files_config(mamba->files)->vlm);
	{
		const json_t *root = model_files_config_json(vl->files);
		double ratio = 0;

		CHECK(json_is_object(json_object_get(root, "vision_config")));
		CHECK_INT_EQ(model_config_number(root, "downsample_ratio", &ratio), 0);
		CHECK_NEAR(ratio, 0.5, 0);
	}
	CHECK_INT_EQ(model_files_count(sharded->files), model_files_count(mamba->files));
	CHECK_INT_EQ(model_files_count(vl->files), model_files_count(mamba->files) + 6);

	REQUIRE(engine_model_get_info(vl, &info) == 0);
	CHECK(info.vlm);
	REQUIRE(engine_model_get_info(mamba, &info) == 0);
	CHECK(!info.vlm);
	CHECK_INT_EQ(engine_model_get_info(NULL, &info), -EINVAL);
	{
		/* A model built in memory (as compute tests do) has no files: info reads model.h only. */
		static const uint16_t emb[4 * 2];
		struct engine_model fake = {0};

		fake.embeddings = (struct tensor){.data = emb,
						  .dtype = TENSOR_BF16,
						  .ndim = 2,
						  .shape = {4, 2},
						  .nbytes = sizeof(emb)};
		fake.lm_head = fake.embeddings;
		fake.cfg.vocab = 4;
		REQUIRE(engine_model_get_info(&fake, &info) == 0);
		CHECK_INT_EQ(info.n_params, 8);
		CHECK_INT_EQ(info.weight_bytes, 16);
		CHECK(info.tied_embeddings);
		CHECK(!info.vlm);
		CHECK_INT_EQ(info.n_layers, 0);
	}

	/* Fixtures without tokenizer.json have no tokenizer; tiny-chat has the Tekken fixture's. */
	CHECK(engine_model_tokenizer(mamba) == NULL);
	CHECK(engine_model_tokenizer(NULL) == NULL);
	{
		struct engine_model *chat = load_fixture("tiny-chat");
		struct engine_tokenizer *tok = engine_model_tokenizer(chat);

		check_tiny_config(chat, "M-M*-M", 1280, false);
		REQUIRE(tok);
		CHECK_INT_EQ(engine_tokenizer_vocab_size(tok), 1234);
		CHECK_INT_EQ(engine_tokenizer_token_id(tok, "<image>"), 1226);
		CHECK_INT_EQ(engine_tokenizer_token_id(tok, "</s>"), chat->cfg.eos_id);
		engine_model_destroy(chat);
	}

	engine_model_destroy(mamba);
	engine_model_destroy(sharded);
	engine_model_destroy(vl);
	engine_model_destroy(aliases);
	engine_model_destroy(tied);
	engine_model_destroy(NULL);
}

/* ---- broken safetensors ------------------------------------------------------------------- */

struct hdr_edit {
	const char *name;
	const char *field;
	json_t *value; /* stolen */
};

static void set_field(json_t *hdr, void *ctx)
{
	struct hdr_edit *e = ctx;
	json_t *t = json_object_get(hdr, e->name);

	REQUIRE(t);
	json_object_set_new(t, e->field, e->value);
}

static void delete_tensor(json_t *hdr, void *ctx)
{
	REQUIRE(json_object_del(hdr, ctx) == 0);
}

static void add_empty_tensor(json_t *hdr, void *ctx)
{
	json_object_set_new(hdr, ctx,
			    json_pack("{s:s, s:[i], s:[i,i]}", "dtype", "BF16", "shape", 0, "data_offsets", 0,
				      0));
}

static void copy_offsets(json_t *hdr, void *ctx)
{
	const char **names = ctx; /* names[1] gets names[0]'s offsets */
	json_t *from = json_object_get(json_object_get(hdr, names[0]), "data_offsets");

	json_object_set(json_object_get(hdr, names[1]), "data_offsets", from);
}

static void truncate_file(const char *path, off_t size)
{
	REQUIRE(truncate(path, size) == 0);
}

static void test_bad_safetensors(void)
{
	char *dir, *st;
	struct hdr_edit e;

	dir = copy_fixture("tiny-mamba");
	st = xasprintf("%s/model.safetensors", dir);

	truncate_file(st, 5);
	CHECK_LOAD_FAILS(dir, EINVAL, "model.safetensors: file is truncated: 5 bytes");
	drop_fixture(dir);
	free(st);

	/* Header length intact, header cut short. */
	dir = copy_fixture("tiny-mamba");
	st = xasprintf("%s/model.safetensors", dir);
	truncate_file(st, 100);
	CHECK_LOAD_FAILS(dir, EINVAL, "goes beyond the end of the file (100 bytes)");
	drop_fixture(dir);
	free(st);

	/* Data section cut short: the last tensors' offsets point past the end. */
	dir = copy_fixture("tiny-mamba");
	st = xasprintf("%s/model.safetensors", dir);
	{
		struct stat sb;

		REQUIRE(stat(st, &sb) == 0);
		truncate_file(st, sb.st_size - 1);
	}
	CHECK_LOAD_FAILS(dir, EINVAL, "go beyond the data section");
	drop_fixture(dir);
	free(st);

	/* Header length above the limit. */
	dir = copy_fixture("tiny-mamba");
	st = xasprintf("%s/model.safetensors", dir);
	{
		uint8_t huge[8] = {0, 0, 0, 0, 1, 0, 0, 0}; /* 2^32 */
		int fd = open(st, O_WRONLY);

		REQUIRE(fd >= 0);
		REQUIRE(pwrite(fd, huge, 8, 0) == 8);
		close(fd);
	}
	CHECK_LOAD_FAILS(dir, EFBIG, "header length 4294967296 exceeds the limit of 104857600 bytes");
	drop_fixture(dir);
	free(st);

	/* Malformed JSON: break the first key's closing quote. */
	dir = copy_fixture("tiny-mamba");
	st = xasprintf("%s/model.safetensors", dir);
	{
		int fd = open(st, O_WRONLY);

		REQUIRE(fd >= 0);
		REQUIRE(pwrite(fd, "{\"__metadata__\" \"", 17, 8) == 17);
		close(fd);
	}
	CHECK_LOAD_FAILS(dir, EINVAL, "model.safetensors: malformed JSON header at byte");
	drop_fixture(dir);
	free(st);

	/* Unsupported dtype. */
	dir = copy_fixture("tiny-mamba");
	e = (struct hdr_edit){"backbone.layers.0.mixer.D", "dtype", json_string("I64")};
	edit_header(dir, "model.safetensors", set_field, &e);
	CHECK_LOAD_FAILS(dir, EINVAL,
			 "tensor 'backbone.layers.0.mixer.D' has unsupported dtype 'I64' (supported: BF16, "
			 "F16, F32, U8, F8_E4M3)");
	drop_fixture(dir);

	/* Size != product(shape) * dtype size. */
	dir = copy_fixture("tiny-mamba");
	e = (struct hdr_edit){"backbone.embeddings.weight", "dtype", json_string("F32")};
	edit_header(dir, "model.safetensors", set_field, &e);
	CHECK_LOAD_FAILS(dir, EINVAL,
			 "tensor 'backbone.embeddings.weight': data_offsets span 32768 bytes but shape and "
			 "dtype F32 need 65536");
	drop_fixture(dir);

	/* Overlapping tensors (same size, same bytes). */
	dir = copy_fixture("tiny-mamba");
	{
		const char *names[2] = {"backbone.layers.0.mixer.A_log", "backbone.layers.0.mixer.D"};

		edit_header(dir, "model.safetensors", copy_offsets, names);
	}
	CHECK_LOAD_FAILS(dir, EINVAL, "overlap");
	drop_fixture(dir);

	/* Reversed offsets. */
	dir = copy_fixture("tiny-mamba");
	e = (struct hdr_edit){"backbone.layers.0.mixer.D", "data_offsets", json_pack("[i,i]", 64, 32)};
	edit_header(dir, "model.safetensors", set_field, &e);
	CHECK_LOAD_FAILS(dir, EINVAL, "data_offsets [64, 32] are reversed");
	drop_fixture(dir);

	/* Duplicate names: only expressible in raw JSON. */
	{
		const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
				  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
		size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8, total = 8 + hl + pad + 8;
		uint8_t *buf = xcalloc(1, total);
		struct st_file *f = NULL;

		for (int i = 0; i < 8; i++)
			buf[i] = (uint8_t)((hl + pad) >> (8 * i));
		memcpy(buf + 8, hdr, hl);
		memset(buf + 8 + hl, ' ', pad);
		CHECK(st_parse(buf, total, &f, errbuf, sizeof(errbuf)) == -EINVAL);
		CHECK(strstr(errbuf, "duplicate") != NULL);
		CHECK(f == NULL);
		free(buf);
	}

	/* Misaligned F32 data. */
	{
		const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}";
		size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8, total = 8 + hl + pad + 8;
		uint8_t *buf = xcalloc(1, total);
		struct st_file *f = NULL;

		for (int i = 0; i < 8; i++)
			buf[i] = (uint8_t)((hl + pad) >> (8 * i));
		memcpy(buf + 8, hdr, hl);
		memset(buf + 8 + hl, ' ', pad);
		CHECK_INT_EQ(st_parse(buf, total, &f, errbuf, sizeof(errbuf)), -EINVAL);
		CHECK(strstr(errbuf, "tensor 'a': data at file offset") &&
		      strstr(errbuf, "not aligned to its 4-byte elements"));
		/* The same header with aligned offsets parses, and st_file_find sees the tensor. */
		memcpy(strstr((char *)buf + 8, "[2,6]"), "[4,8]", 5);
		CHECK_INT_EQ(st_parse(buf, total, &f, errbuf, sizeof(errbuf)), 0);
		REQUIRE(f);
		CHECK_INT_EQ(f->n_entries, 1);
		CHECK(st_file_find(f, "a") && st_file_find(f, "a")->t.data == buf + 8 + hl + pad + 4);
		CHECK(st_file_find(f, "b") == NULL);
		st_file_destroy(f);
		free(buf);
	}
}

/* ---- checkpoints that parse but do not fit the config ------------------------------------- */

static void set_int(json_t *tc, void *ctx)
{
	const struct {
		const char *key;
		long long v;
	} *kv = ctx;

	json_object_set_new(tc, kv->key, json_integer(kv->v));
}

static void set_json(json_t *tc, void *ctx)
{
	const struct {
		const char *key;
		const char *json;
	} *kv = ctx;

	json_object_set_new(tc, kv->key, json_loads(kv->json, JSON_DECODE_ANY, NULL));
}

#define WITH_INT(dir, k, val)                                                                                \
	do {                                                                                                 \
		struct {                                                                                     \
			const char *key;                                                                     \
			long long v;                                                                         \
		} _kv = {(k), (val)};                                                                        \
		edit_config((dir), set_int, &_kv);                                                           \
	} while (0)

#define WITH_JSON(dir, k, val)                                                                               \
	do {                                                                                                 \
		struct {                                                                                     \
			const char *key;                                                                     \
			const char *json;                                                                    \
		} _kv = {(k), (val)};                                                                        \
		edit_config((dir), set_json, &_kv);                                                          \
	} while (0)

static void test_bad_model(void)
{
	char *dir;
	struct hdr_edit e;

	/* Missing tensor. */
	dir = copy_fixture("tiny-mamba");
	edit_header(dir, "model.safetensors", delete_tensor, "backbone.layers.2.mixer.D");
	CHECK_LOAD_FAILS(dir, EINVAL, "missing tensor 'backbone.layers.2.mixer.D'");
	drop_fixture(dir);

	/* Missing lm_head in an untied model. */
	dir = copy_fixture("tiny-mamba");
	edit_header(dir, "model.safetensors", delete_tensor, "lm_head.weight");
	CHECK_LOAD_FAILS(dir, EINVAL, "missing tensor 'lm_head.weight'");
	drop_fixture(dir);

	/* Extra tensors: a bias the architecture does not have, vision tensors in a text model. */
	dir = copy_fixture("tiny-mamba");
	edit_header(dir, "model.safetensors", add_empty_tensor, "backbone.layers.3.mixer.q_proj.bias");
	CHECK_LOAD_FAILS(dir, EINVAL,
			 "unexpected tensor 'backbone.layers.3.mixer.q_proj.bias' (not part of a 6-layer "
			 "'M-M*-M' model)");
	drop_fixture(dir);
	dir = copy_fixture("tiny-mamba");
	edit_header(dir, "model.safetensors", add_empty_tensor, "mlp1.0.weight");
	CHECK_LOAD_FAILS(dir, EINVAL, "unexpected tensor 'mlp1.0.weight'");
	drop_fixture(dir);

	/* A wrong prefix: the VLM layout's tensors in a bare config. */
	dir = copy_fixture("tiny-vl");
	{
		char *path = xasprintf("%s/config.json", dir),
		     *bare = xasprintf("%s/tiny-mamba/config.json", fixtures);
		size_t len;
		void *text = read_file(bare, &len);

		write_file(path, text, len);
		free(text);
		free(path);
		free(bare);
	}
	CHECK_LOAD_FAILS(dir, EINVAL, "missing tensor 'backbone.embeddings.weight'");
	drop_fixture(dir);

	/* Wrong shape. */
	dir = copy_fixture("tiny-mamba");
	e = (struct hdr_edit){"backbone.layers.2.mixer.A_log", "shape", json_pack("[i,i]", 2, 4)};
	edit_header(dir, "model.safetensors", set_field, &e);
	CHECK_LOAD_FAILS(dir, EINVAL, "tensor 'backbone.layers.2.mixer.A_log' has shape [2, 4], expected [8]");
	drop_fixture(dir);

	dir = copy_fixture("tiny-mamba");
	e = (struct hdr_edit){"backbone.layers.4.mixer.down_proj.weight", "shape",
			      json_pack("[i,i]", 128, 64)};
	edit_header(dir, "model.safetensors", set_field, &e);
	CHECK_LOAD_FAILS(
		dir, EINVAL,
		"tensor 'backbone.layers.4.mixer.down_proj.weight' has shape [128, 64], expected [64, 128]");
	drop_fixture(dir);

	/* Config disagreeing with the tensors. */
	dir = copy_fixture("tiny-mamba");
	WITH_INT(dir, "n_groups", 4);
	CHECK_LOAD_FAILS(dir, EINVAL,
			 "layer 0: in_proj has 200 rows but 2*d_inner + 2*n_groups*state + heads = 264");
	drop_fixture(dir);

	dir = copy_fixture("tiny-mamba");
	WITH_INT(dir, "mamba_num_heads", 16);
	CHECK_LOAD_FAILS(dir, EINVAL, "tensor 'backbone.layers.0.mixer.A_log' has shape [8], expected [16]");
	drop_fixture(dir);

	dir = copy_fixture("tiny-mamba");
	WITH_INT(dir, "num_attention_heads", 8);
	CHECK_LOAD_FAILS(
		dir, EINVAL,
		"tensor 'backbone.layers.3.mixer.q_proj.weight' has shape [64, 64], expected [128, 64]");
	drop_fixture(dir);

	dir = copy_fixture("tiny-mamba");
	WITH_INT(dir, "conv_kernel", 3);
	CHECK_LOAD_FAILS(
		dir, EINVAL,
		"tensor 'backbone.layers.0.mixer.conv1d.weight' has shape [128, 1, 4], expected [128, 1, 3]");
	drop_fixture(dir);

	dir = copy_fixture("tiny-mamba");
	WITH_INT(dir, "hidden_size", 32);
	CHECK_LOAD_FAILS(dir, EINVAL,
			 "tensor 'backbone.embeddings.weight' has shape [256, 64], expected [?, 32]");
	drop_fixture(dir);

	/* The pattern decides membership: swap two layers' kinds. */
	dir = copy_fixture("tiny-mamba");
	WITH_JSON(dir, "hybrid_override_pattern", "\"M-*M-M\"");
	CHECK_LOAD_FAILS(dir, EINVAL, "missing tensor 'backbone.layers.2.mixer.q_proj.weight'");
	drop_fixture(dir);

	/* use_conv_bias false: the bias tensors become extras. */
	dir = copy_fixture("tiny-mamba");
	WITH_JSON(dir, "use_conv_bias", "false");
	CHECK_LOAD_FAILS(dir, EINVAL, "unexpected tensor 'backbone.layers.0.mixer.conv1d.bias'");
	drop_fixture(dir);

	/* use_conv_bias false and no bias tensors: loads, conv_b absent. */
	dir = copy_fixture("tiny-mamba");
	WITH_JSON(dir, "use_conv_bias", "false");
	for (int l = 0; l < 6; l++)
		if ("M-M*-M"[l] == 'M')
			edit_header(dir, "model.safetensors", delete_tensor,
				    fmt("backbone.layers.%d.mixer.conv1d.bias", l));
	{
		struct engine_model *m = engine_model_load(dir, errbuf, sizeof(errbuf));
		struct engine_model_info info;

		REQUIRE(m);
		CHECK(m->layers[0].mamba.conv_b.data == NULL);
		CHECK(m->layers[0].mamba.conv_w.data != NULL);
		REQUIRE(engine_model_get_info(m, &info) == 0);
		CHECK_INT_EQ(info.n_params, expected_params("M-M*-M", 256, false) - 3 * 128);
		engine_model_destroy(m);
	}
	drop_fixture(dir);

	/* tokenizer.json: loaded with the model; its failures and a vocabulary wider than the
	 * embedding fail the load. */
	dir = copy_fixture("tiny-mamba");
	{
		size_t len;
		char *tok = read_file(fmt("%s/tiny-chat/tokenizer.json", fixtures), &len);

		write_file(fmt("%s/tokenizer.json", dir), tok, len);
		free(tok);
	}
	CHECK_LOAD_FAILS(dir, EINVAL, "tokenizer.json has 1234 ids but the embedding only 256 rows");
	write_file(fmt("%s/tokenizer.json", dir), "{\"model\": ", 10);
	{
		struct engine_model *m;

		errno = 0;
		m = engine_model_load(dir, errbuf, sizeof(errbuf));
		CHECK(m == NULL);
		CHECK(errno != 0);
		CHECK(strstr(errbuf, "tokenizer.json") != NULL);
		engine_model_destroy(m);
	}
	drop_fixture(dir);

	/* Tied config, untied checkpoint: the head must still fit; the embedding is used. */
	dir = copy_fixture("tiny-mamba");
	WITH_JSON(dir, "tie_word_embeddings", "true");
	{
		struct engine_model *m = engine_model_load(dir, errbuf, sizeof(errbuf));

		REQUIRE(m);
		CHECK(m->lm_head.data == m->embeddings.data);
		engine_model_destroy(m);
	}
	drop_fixture(dir);

	/* Token ids outside the embedding. */
	dir = copy_fixture("tiny-mamba");
	WITH_INT(dir, "eos_token_id", 300);
	CHECK_LOAD_FAILS(dir, EINVAL, "eos 300");
	drop_fixture(dir);

	/* Files missing. */
	dir = copy_fixture("tiny-mamba");
	unlink(fmt("%s/model.safetensors", dir));
	CHECK_LOAD_FAILS(dir, ENOENT, "no model.safetensors or model.safetensors.index.json");
	unlink(fmt("%s/config.json", dir));
	/* A directory that is no checkpoint says what one holds. */
	CHECK_LOAD_FAILS(dir, ENOENT,
			 "is not a model checkpoint: it has neither config.json nor "
			 "safetensors weights; expected a Hugging Face checkpoint directory "
			 "holding config.json, model.safetensors");
	drop_fixture(dir);
	dir = copy_fixture("tiny-mamba");
	unlink(fmt("%s/config.json", dir));
	CHECK_LOAD_FAILS(dir, ENOENT, "has weights but no config.json; expected");
	drop_fixture(dir);
	CHECK_LOAD_FAILS("/nonexistent/holod/model", ENOENT,
			 "/nonexistent/holod/model: No such file or directory; expected a Hugging "
			 "Face checkpoint directory");
	CHECK_LOAD_FAILS(fmt("%s/tiny-mamba/config.json", fixtures), ENOTDIR, "is not a directory; expected");
	CHECK_LOAD_FAILS(NULL, EINVAL, "no model directory");

	/* A bad config.json through the loader. */
	dir = copy_fixture("tiny-mamba");
	write_file(fmt("%s/config.json", dir), "{\"hidden_size\": 64,", 19);
	CHECK_LOAD_FAILS(dir, EINVAL, "config.json: malformed JSON at line 1");
	drop_fixture(dir);
}

/* ---- sharded checkpoints ------------------------------------------------------------------ */

static void set_map(json_t *index, void *ctx)
{
	const char **kv = ctx;

	json_object_set_new(json_object_get(index, "weight_map"), kv[0], json_string(kv[1]));
}

static void edit_index(const char *dir, void (*edit)(json_t *index, void *ctx), void *ctx)
{
	char *path = xasprintf("%s/model.safetensors.index.json", dir), *out;
	json_t *index = json_load_file(path, 0, NULL);

	REQUIRE(index);
	edit(index, ctx);
	out = json_dumps(index, JSON_INDENT(1));
	write_file(path, out, strlen(out));
	free(out);
	json_decref(index);
	free(path);
}

static void test_bad_sharded(void)
{
	char *dir;

	dir = copy_fixture("tiny-sharded");
	unlink(fmt("%s/model-00002-of-00003.safetensors", dir));
	CHECK_LOAD_FAILS(dir, ENOENT,
			 "model.safetensors.index.json: shard 'model-00002-of-00003.safetensors'");
	CHECK_LOAD_FAILS(dir, ENOENT, "is missing");
	drop_fixture(dir);

	/* The map names the wrong shard for a tensor. */
	dir = copy_fixture("tiny-sharded");
	{
		char *index_text;
		size_t len;
		json_t *index;
		const char *shard, *other, *kv[2];

		index_text = read_file(fmt("%s/model.safetensors.index.json", dir), &len);
		index = json_loads(index_text, 0, NULL);
		REQUIRE(index);
		shard = json_string_value(
			json_object_get(json_object_get(index, "weight_map"), "backbone.norm_f.weight"));
		REQUIRE(shard);
		other = strcmp(shard, "model-00001-of-00003.safetensors") ?
				"model-00001-of-00003.safetensors" :
				"model-00002-of-00003.safetensors";
		kv[0] = "backbone.norm_f.weight";
		kv[1] = other;
		edit_index(dir, set_map, kv);
		CHECK_LOAD_FAILS(dir, EINVAL,
				 fmt("tensor 'backbone.norm_f.weight' is not in shard '%s'", other));
		json_decref(index);
		free(index_text);
	}
	drop_fixture(dir);

	/* A shard name that escapes the directory. */
	dir = copy_fixture("tiny-sharded");
	{
		const char *kv[2] = {"backbone.norm_f.weight", "../model.safetensors"};

		edit_index(dir, set_map, kv);
	}
	CHECK_LOAD_FAILS(dir, EINVAL, "does not name a .safetensors file in the directory");
	drop_fixture(dir);

	/* A tensor in a shard that the map does not list. */
	dir = copy_fixture("tiny-sharded");
	edit_header(dir, "model-00001-of-00003.safetensors", add_empty_tensor, "backbone.stray");
	CHECK_LOAD_FAILS(dir, EINVAL, "holds tensor 'backbone.stray' that weight_map does not assign to it");
	drop_fixture(dir);

	/* A broken shard names itself. */
	dir = copy_fixture("tiny-sharded");
	truncate_file(fmt("%s/model-00003-of-00003.safetensors", dir), 3);
	CHECK_LOAD_FAILS(dir, EINVAL, "model-00003-of-00003.safetensors: file is truncated: 3 bytes");
	drop_fixture(dir);

	dir = copy_fixture("tiny-sharded");
	write_file(fmt("%s/model.safetensors.index.json", dir), "{\"metadata\": {}}", 16);
	CHECK_LOAD_FAILS(dir, EINVAL, "model.safetensors.index.json: no 'weight_map' object");
	drop_fixture(dir);
}

/* ---- config.json parsing ------------------------------------------------------------------ */

#define BASE_CONFIG "\"hidden_size\": 64, \"hybrid_override_pattern\": \"M-*\", \"num_attention_heads\": 4"

static int parse(const char *text, struct model_config *c)
{
	errbuf[0] = '\0';
	return model_config_parse(text, strlen(text), c, errbuf, sizeof(errbuf));
}

#define CHECK_CONFIG_FAILS(text, needle)                                                                     \
	do {                                                                                                 \
		struct model_config _c;                                                                      \
		CHECK_INT_EQ(parse((text), &_c), -EINVAL);                                                   \
		if (!strstr(errbuf, (needle))) {                                                             \
			fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, errbuf,  \
				(needle));                                                                   \
			test_failures++;                                                                     \
		}                                                                                            \
	} while (0)

static void test_config(void)
{
	struct model_config c;
	json_t *root = NULL;
	double d;

	/* Defaults of a minimal config. */
	REQUIRE(parse("{" BASE_CONFIG "}", &c) == 0);
	CHECK(!c.vlm);
	CHECK(c.use_conv_bias);
	CHECK(!c.tie_word_embeddings);
	CHECK_INT_EQ(c.lm.n_layers, 3);
	CHECK_INT_EQ(c.lm.n_kv_heads, 4);
	CHECK_INT_EQ(c.lm.m_state, 128);
	CHECK_INT_EQ(c.lm.m_chunk, 128);
	CHECK_INT_EQ(c.lm.m_groups, 0);
	CHECK_NEAR(c.lm.eps, 1e-5, 1e-12);
	CHECK(c.lm.dt_min == 0.0f && isinf(c.lm.dt_max));

	/* Python-JSON non-finite numbers, outside strings only. */
	REQUIRE(parse("{" BASE_CONFIG ", \"time_step_limit\": [0.001,Infinity], \"x\": NaN, \"y\": -Infinity,"
		      "\"note\": \"Infinity NaN -Infinity\"}",
		      &c) == 0);
	CHECK_NEAR(c.lm.dt_min, 0.001, 1e-9);
	CHECK(isinf(c.lm.dt_max) && c.lm.dt_max > 0);
	{
		const char *t = "{\"note\": \"Infinity, NaN\", \"v\": [NaN, -Infinity, Infinity]}";

		REQUIRE(model_config_load_json(t, strlen(t), &root, errbuf, sizeof(errbuf)) == 0);
	}
	CHECK_STR_EQ(json_string_value(json_object_get(root, "note")), "Infinity, NaN");
	CHECK(json_array_size(json_object_get(root, "v")) == 3);
	json_decref(root);
	{
		const char *t = "{\"a\": Infinity, \"b\": NaN, \"c\": 3, \"d\": \"x\"}";

		REQUIRE(model_config_load_json(t, strlen(t), &root, errbuf, sizeof(errbuf)) == 0);
	}
	CHECK(model_config_number(root, "a", &d) == 0 && isinf(d) && d > 0);
	CHECK(model_config_number(root, "b", &d) == 0 && isnan(d));
	CHECK(model_config_number(root, "c", &d) == 0 && d == 3);
	CHECK_INT_EQ(model_config_number(root, "d", &d), -EINVAL);
	CHECK_INT_EQ(model_config_number(root, "e", &d), -ENOENT);
	json_decref(root);
	/* Not a token when part of a longer word, or in a key. */
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"x\": Infinityy}", "malformed JSON");
	REQUIRE(parse("{" BASE_CONFIG ", \"NaN\": 1}", &c) == 0);

	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"layer_norm_epsilon\": NaN}",
			   "'layer_norm_epsilon' = nan is outside (0, 1)");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"layer_norm_epsilon\": 1e-85}",
			   "'layer_norm_epsilon' = 1e-85 is outside (0, 1) as a float");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"rms_norm_eps\": 1}", "'rms_norm_eps' = 1 is outside");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"time_step_limit\": [-Infinity, 1]}",
			   "'time_step_limit' must be [min, max]");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"time_step_limit\": [1, 0.5]}",
			   "'time_step_limit' must be [min, max]");

	/* Aliases. */
	REQUIRE(parse("{\"hidden_size\": 64, \"layers_block_type\": [\"mamba\", \"linear_attention\", "
		      "\"mlp\", \"attention\", "
		      "\"full_attention\"], \"num_attention_heads\": 4, \"mamba_n_groups\": 2, "
		      "\"mamba_d_conv\": 3, "
		      "\"mamba_chunk_size\": 16, \"mamba_conv_bias\": false, \"rms_norm_eps\": 1e-6, "
		      "\"mamba_dt_limit\": [0.0, 0.5], \"attention_head_dim\": 32, \"eos_token_id\": [12, "
		      "2]}",
		      &c) == 0);
	CHECK_STR_EQ(c.lm.pattern, "MM-**");
	CHECK_INT_EQ(c.lm.m_groups, 2);
	CHECK_INT_EQ(c.lm.m_conv_kernel, 3);
	CHECK_INT_EQ(c.lm.m_chunk, 16);
	CHECK_INT_EQ(c.lm.head_dim, 32);
	CHECK_INT_EQ(c.lm.eos_id, 12);
	CHECK(!c.use_conv_bias);
	CHECK_NEAR(c.lm.eps, 1e-6, 1e-12);
	CHECK_NEAR(c.lm.dt_max, 0.5, 0);

	/* VLM layout, both names of the nested config. */
	REQUIRE(parse("{\"model_type\": \"NemotronH_Nano_VL_V2\", \"vision_config\": {}, \"llm_config\": {"
		      "\"model_type\": \"nemotron_h\", " BASE_CONFIG "}}",
		      &c) == 0);
	CHECK(c.vlm);
	REQUIRE(parse("{\"model_type\": \"NemotronH_Nano_VL_V2\", \"text_config\": {" BASE_CONFIG "}}", &c) ==
		0);
	CHECK(c.vlm);
	CHECK_CONFIG_FAILS("{\"model_type\": \"NemotronH_Nano_VL_V2\", " BASE_CONFIG "}",
			   "without 'llm_config'");
	CHECK_CONFIG_FAILS("{\"llm_config\": [1]}", "'llm_config' is not an object");
	CHECK_CONFIG_FAILS("{\"model_type\": \"llama\", " BASE_CONFIG "}",
			   "model_type 'llama' is not supported");
	CHECK_CONFIG_FAILS("{\"llm_config\": {\"model_type\": \"mamba2\", " BASE_CONFIG "}}",
			   "language model_type 'mamba2' is not supported");

	/* Structure and ranges. */
	CHECK_CONFIG_FAILS("[1, 2]", "the top level is not a JSON object");
	CHECK_CONFIG_FAILS("{\"a\": 1, \"a\": 2}", "duplicate");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 64}", "no layer pattern");
	CHECK_CONFIG_FAILS("{\"hybrid_override_pattern\": \"M\"}", "'hidden_size' is missing");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 64, \"hybrid_override_pattern\": \"M-E\"}",
			   "layer 2 is a MoE layer ('E')");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 64, \"hybrid_override_pattern\": \"M-x\"}",
			   "layer 2 has type 'x'");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 64, \"hybrid_override_pattern\": \"\"}", "has 0 layers");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 64, \"layers_block_type\": [\"mamba\", \"conv\"]}",
			   "'layers_block_type'[1] is not a known layer type");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"num_hidden_layers\": 4}",
			   "num_hidden_layers is 4 but the layer pattern has 3 layers");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 64, \"hybrid_override_pattern\": \"M*\"}",
			   "'num_attention_heads' is missing");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 1e3, \"hybrid_override_pattern\": \"M\"}",
			   "'hidden_size' is not an integer");
	CHECK_CONFIG_FAILS("{\"hidden_size\": 4294967296, \"hybrid_override_pattern\": \"M\"}",
			   "'hidden_size' = 4294967296 is outside [1, 1048576]");
	CHECK_CONFIG_FAILS("{\"hidden_size\": -1, \"hybrid_override_pattern\": \"M\"}", "is outside");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"num_key_value_heads\": 3}",
			   "num_attention_heads 4 is not a multiple of num_key_value_heads 3");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"mlp_hidden_act\": \"gelu\"}",
			   "mlp_hidden_act 'gelu' is not supported (expected 'relu2')");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"attention_bias\": true}", "'attention_bias' is true");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"use_conv_bias\": 1}", "'use_conv_bias' is not a boolean");
	CHECK_CONFIG_FAILS("{" BASE_CONFIG ", \"bos_token_id\": -3}", "'bos_token_id' is not a token id");
	{
		/* Deep nesting is refused by the JSON parser, not by the stack. */
		size_t n = 100000;
		char *deep = xmalloc(2 * n + 1);

		memset(deep, '[', n);
		memset(deep + n, ']', n);
		deep[2 * n] = '\0';
		CHECK_CONFIG_FAILS(deep, "malformed JSON");
		free(deep);
	}
	{
		size_t n = MODEL_CONFIG_MAX_BYTES + 1;
		char *big = xmalloc(n);

		memset(big, ' ', n);
		CHECK_INT_EQ(model_config_parse(big, n, &c, errbuf, sizeof(errbuf)), -EFBIG);
		free(big);
	}
}

/* ---- the real Nano-12B-v2 shapes ---------------------------------------------------------- */

struct big_tensor {
	char name[128];
	const char *dtype;
	int ndim;
	int64_t shape[3];
};

static void big_add(struct big_tensor *t, size_t *n, const char *dtype, int ndim, int64_t d0, int64_t d1,
		    int64_t d2, const char *format, ...) __attribute__((format(printf, 8, 9)));
static void big_add(struct big_tensor *t, size_t *n, const char *dtype, int ndim, int64_t d0, int64_t d1,
		    int64_t d2, const char *format, ...)
{
	va_list ap;

	va_start(ap, format);
	vsnprintf(t[*n].name, sizeof(t[*n].name), format, ap);
	va_end(ap);
	t[*n].dtype = dtype;
	t[*n].ndim = ndim;
	t[*n].shape[0] = d0;
	t[*n].shape[1] = d1;
	t[*n].shape[2] = d2;
	(*n)++;
}

/* A checkpoint with the header of the real model (model.md 1.2, 3: 62 layers, d 5120, vocab
 * 131072, H 128, P 80, N 128, G 8) and a sparse data section: about 25 GB that occupy no disk.
 * The config leaves n_groups, mamba_head_dim, head_dim, conv_kernel and intermediate_size out,
 * so the loader must derive all of them from the shapes. Skipped where the file system cannot
 * hold sparse files. */
static void test_real_shapes(void)
{
	static const char pattern[] = "M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-";
	const int64_t d = 5120, V = 131072, H = 128, P = 80, N = 128, G = 8, K = 4, Hq = 40, Hkv = 8,
		      Dh = 128, I = 20480, din = H * P, conv = din + 2 * G * N;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *dir = xasprintf("%s/holod-test-loader-XXXXXX", tmp);
	struct big_tensor *t = xcalloc(1024, sizeof(*t));
	const char *lp = "language_model.backbone.layers";
	size_t n = 0, hlen;
	uint64_t off = 0, expect_params = 0;
	json_t *hdr = json_object();
	struct engine_model *m;
	struct engine_model_info info;
	struct stat sb;
	char *text, *config;
	FILE *f;

	REQUIRE(mkdtemp(dir));
	big_add(t, &n, "BF16", 2, V, d, 0, "language_model.backbone.embeddings.weight");
	for (int l = 0; l < 62; l++) {
		big_add(t, &n, "BF16", 1, d, 0, 0, "%s.%d.norm.weight", lp, l);
		if (pattern[l] == 'M') {
			big_add(t, &n, "BF16", 2, 2 * din + 2 * G * N + H, d, 0, "%s.%d.mixer.in_proj.weight",
				lp, l);
			big_add(t, &n, "BF16", 3, conv, 1, K, "%s.%d.mixer.conv1d.weight", lp, l);
			big_add(t, &n, "BF16", 1, conv, 0, 0, "%s.%d.mixer.conv1d.bias", lp, l);
			big_add(t, &n, "F32", 1, H, 0, 0, "%s.%d.mixer.dt_bias", lp, l);
			big_add(t, &n, "F32", 1, H, 0, 0, "%s.%d.mixer.A_log", lp, l);
			big_add(t, &n, "F32", 1, H, 0, 0, "%s.%d.mixer.D", lp, l);
			big_add(t, &n, "BF16", 1, din, 0, 0, "%s.%d.mixer.norm.weight", lp, l);
			big_add(t, &n, "BF16", 2, d, din, 0, "%s.%d.mixer.out_proj.weight", lp, l);
		} else if (pattern[l] == '*') {
			big_add(t, &n, "BF16", 2, Hq * Dh, d, 0, "%s.%d.mixer.q_proj.weight", lp, l);
			big_add(t, &n, "BF16", 2, Hkv * Dh, d, 0, "%s.%d.mixer.k_proj.weight", lp, l);
			big_add(t, &n, "BF16", 2, Hkv * Dh, d, 0, "%s.%d.mixer.v_proj.weight", lp, l);
			big_add(t, &n, "BF16", 2, d, Hq * Dh, 0, "%s.%d.mixer.o_proj.weight", lp, l);
		} else {
			big_add(t, &n, "BF16", 2, I, d, 0, "%s.%d.mixer.up_proj.weight", lp, l);
			big_add(t, &n, "BF16", 2, d, I, 0, "%s.%d.mixer.down_proj.weight", lp, l);
		}
	}
	big_add(t, &n, "BF16", 1, d, 0, 0, "language_model.backbone.norm_f.weight");
	big_add(t, &n, "BF16", 2, V, d, 0, "language_model.lm_head.weight");
	big_add(t, &n, "BF16", 2, 20480, 5120, 0, "mlp1.1.weight");
	big_add(t, &n, "BF16", 3, 1, 16384, 1280, "vision_model.radio_model.model.patch_generator.pos_embed");

	for (size_t i = 0; i < n; i++) {
		uint64_t elems = 1, nbytes;
		json_t *shape = json_array();

		for (int k = 0; k < t[i].ndim; k++) {
			elems *= (uint64_t)t[i].shape[k];
			json_array_append_new(shape, json_integer(t[i].shape[k]));
		}
		nbytes = elems * (strcmp(t[i].dtype, "F32") == 0 ? 4 : 2);
		if (strncmp(t[i].name, "language_model.", 15) == 0)
			expect_params += elems;
		json_object_set_new(hdr, t[i].name,
				    json_pack("{s:s, s:o, s:[I,I]}", "dtype", t[i].dtype, "shape", shape,
					      "data_offsets", (json_int_t)off, (json_int_t)(off + nbytes)));
		off += nbytes;
	}
	text = json_dumps(hdr, JSON_COMPACT);
	hlen = strlen(text);
	f = fopen(fmt("%s/model.safetensors", dir), "wb");
	REQUIRE(f);
	{
		size_t padded = (hlen + 7) / 8 * 8;
		uint8_t lenbytes[8];

		for (int i = 0; i < 8; i++)
			lenbytes[i] = (uint8_t)(padded >> (8 * i));
		fwrite(lenbytes, 1, 8, f);
		fwrite(text, 1, hlen, f);
		fwrite("        ", 1, padded - hlen, f);
		REQUIRE(fflush(f) == 0);
		if (ftruncate(fileno(f), (off_t)(8 + padded + off)) != 0 || fstat(fileno(f), &sb) != 0 ||
		    (uint64_t)sb.st_blocks * 512 > (64u << 20)) {
			fprintf(stderr, "test_real_shapes: skipped, %s cannot hold a sparse %llu-byte file\n",
				tmp, (unsigned long long)off);
			fclose(f);
			goto out;
		}
	}
	REQUIRE(fclose(f) == 0);
	config = xasprintf(
		"{\"model_type\": \"NemotronH_Nano_VL_V2\", \"vision_config\": {}, \"llm_config\": {"
		"\"model_type\": \"nemotron_h\", \"hybrid_override_pattern\": \"%s\", \"num_hidden_layers\": "
		"62, "
		"\"hidden_size\": 5120, \"num_attention_heads\": 40, \"num_key_value_heads\": 8, "
		"\"mamba_num_heads\": 128, \"ssm_state_size\": 128, \"chunk_size\": 128, \"vocab_size\": "
		"131072, "
		"\"layer_norm_epsilon\": 1e-05, \"mlp_hidden_act\": \"relu2\", \"time_step_limit\": [0.0, "
		"Infinity], "
		"\"tie_word_embeddings\": false, \"eos_token_id\": 2}}",
		pattern);
	write_file(fmt("%s/config.json", dir), config, strlen(config));
	free(config);

	m = engine_model_load(dir, errbuf, sizeof(errbuf));
	if (!m)
		fprintf(stderr, "real shapes: %s\n", errbuf);
	REQUIRE(m);
	CHECK_STR_EQ(m->cfg.pattern, pattern);
	CHECK_INT_EQ(m->cfg.vocab, 131072);
	CHECK_INT_EQ(m->cfg.m_groups, 8);
	CHECK_INT_EQ(m->cfg.m_head_dim, 80);
	CHECK_INT_EQ(m->cfg.m_conv_kernel, 4);
	CHECK_INT_EQ(m->cfg.head_dim, 128);
	CHECK_INT_EQ(m->cfg.intermediate, 20480);
	check_shape(&m->layers[7].attn.q, 2, 5120, 5120, 0);
	check_shape(&m->layers[60].mamba.in_proj, 2, 22656, 5120, 0);
	REQUIRE(engine_model_get_info(m, &info) == 0);
	CHECK_INT_EQ(info.n_mamba, 28);
	CHECK_INT_EQ(info.n_attention, 6);
	CHECK_INT_EQ(info.n_mlp, 28);
	CHECK_INT_EQ(info.n_params, expect_params);
	/* model.md 1.2: about 12.31B parameters in the language model */
	CHECK(info.n_params > 12300000000ull && info.n_params < 12320000000ull);
	CHECK(model_files_find(m->files, "mlp1.1.weight", &(struct tensor){0}) == 0);
	engine_model_destroy(m);
out:
	free(text);
	json_decref(hdr);
	free(t);
	rm_dir(dir);
	free(dir);
}

int main(void)
{
	const char *src = getenv("HOLOD_SOURCE_ROOT");

	fixtures = xasprintf("%s/tests/fixtures/models", src ? src : ".");
	test_fixtures();
	test_bad_safetensors();
	test_bad_model();
	test_bad_sharded();
	test_config();
	test_real_shapes();
	free(fixtures);
	return test_exit();
}
