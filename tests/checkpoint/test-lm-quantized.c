/* holod-quantized checkpoints (engine/checkpoint/quantized.c, docs/quantization.md): written
 * from the fixtures by holo-quantize's writer, loaded with no quantizing, run bit for bit as the
 * same layers quantized at load (the same records through the same kernels on this machine),
 * the resident bytes, the lm_head's records (untied; a tied head and a directory written without
 * them quantize it at load), and every refusal: formats asked of them, CUDA, a corrupt config
 * entry, a corrupt or truncated record tensor (the head's too), an existing output, write errors
 * (nothing left behind).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "lm.h"
#include "loader.h"
#include "quantized.h"
#include "test.h"
#include "test-smaps.h"

TEST_DEFINE_GLOBALS;

static char tmp_root[256];

static char *fixture(const char *name)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	REQUIRE(root);
	char *p = malloc(strlen(root) + strlen(name) + 64);
	REQUIRE(p);
	sprintf(p, "%s/tests/fixtures/models/%s", root, name);
	return p;
}

static char *tmp_path(const char *name)
{
	char *p = malloc(strlen(tmp_root) + strlen(name) + 2);
	REQUIRE(p);
	sprintf(p, "%s/%s", tmp_root, name);
	return p;
}

static struct engine_model *load(const char *dir)
{
	char err[512];
	struct engine_model *m = engine_model_load(dir, err, sizeof(err));
	if (!m)
		fprintf(stderr, "loading %s: %s\n", dir, err);
	REQUIRE(m);
	return m;
}

/* The load's error sentence (the load must fail). */
static void load_fails(const char *dir, const char *want)
{
	char err[512] = "";
	struct engine_model *m = engine_model_load(dir, err, sizeof(err));
	CHECK(m == NULL);
	engine_model_destroy(m);
	if (!strstr(err, want)) {
		fprintf(stderr, "loading %s: got \"%s\", wanted \"%s\"\n", dir, err, want);
		test_failures++;
	}
}

static int write_q(const struct engine_model *m, const char *out, enum quant_format f, bool force, char *err,
		   size_t errlen)
{
	struct lm_quantized lq = {0};
	struct quantized_write_opts o = {.layers = lm_quantized_layers(),
					 .layers_arg = &lq,
					 .format = f,
					 .force = force};
	err[0] = '\0';
	return quantized_checkpoint_write(m, out, &o, err, errlen);
}

struct calls {
	int n;
	uint64_t last_done, last_total;
};

static void count_progress(void *arg, uint64_t done, uint64_t total)
{
	struct calls *c = arg;
	c->n++;
	c->last_done = done;
	c->last_total = total;
}

static struct engine_backend *cpu_backend(const struct engine_model *m, enum engine_weights w,
					  struct calls *calls, char *err, size_t errlen)
{
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU,
					   .precision = ENGINE_PRECISION_FP32,
					   .weights = w,
					   .progress = calls ? count_progress : NULL,
					   .progress_arg = calls};
	err[0] = '\0';
	return engine_backend_create(m, &o, err, errlen);
}

/* Every prompt and decode row's logits of a fixed token run. */
static float *run_logits(struct engine_backend *b, int vocab, int n_prompt, int n_decode)
{
	struct engine_session *s = engine_session_create_on(b, 64);
	REQUIRE(s);
	int32_t tok[16];
	for (int i = 0; i < n_prompt; i++)
		tok[i] = (int32_t)((i * 37 + 5) % vocab);
	float *lg = calloc((size_t)(n_prompt + n_decode) * (size_t)vocab, sizeof(float));
	REQUIRE(lg);
	REQUIRE(engine_session_append(s, tok, NULL, (size_t)n_prompt, ENGINE_LOGITS_ALL, lg) == 0);
	for (int i = 0; i < n_decode; i++)
		REQUIRE(engine_session_decode(s, (int32_t)((i * 11 + 3) % vocab),
					      lg + (size_t)(n_prompt + i) * vocab) == 0);
	engine_session_destroy(s);
	return lg;
}

static bool same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	bool same = fa && fb;
	while (same) {
		int x = fgetc(fa), y = fgetc(fb);
		if (x != y)
			same = false;
		if (x == EOF || y == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* Whether `dir` holds an entry whose name starts with `prefix` (a writer's leftover). */
static bool has_entry(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool found = false;
	REQUIRE(d);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			found = true;
	closedir(d);
	return found;
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Matrix t of q is in its map as the reference quantizer's (quant.h) records of s's rows. */
static void check_records(const struct engine_model *q, const struct tensor *s, const struct tensor *t,
			  enum quant_format f)
{
	CHECK_INT_EQ(t->dtype, quantized_format_dtype(f));
	CHECK_INT_EQ(t->ndim, 2);
	CHECK_INT_EQ(t->shape[0], s->shape[0]);
	CHECK_INT_EQ(t->shape[1], s->shape[1]);
	size_t bytes;
	REQUIRE(quant_tensor_bytes(f, s->shape[0], s->shape[1], &bytes) == 0);
	CHECK_INT_EQ(t->nbytes, bytes);
	CHECK((uintptr_t)t->data % QUANT_ALIGN == 0);
	CHECK(model_files_mapped(q->files, t->data, t->nbytes));
	void *ref = aligned_alloc(QUANT_ALIGN, bytes);
	REQUIRE(ref);
	struct quant_tensor qt;
	REQUIRE(s->dtype == TENSOR_BF16);
	REQUIRE(quant_tensor_from_bf16(f, s->data, s->shape[0], s->shape[1], (size_t)s->shape[1], ref, &qt) ==
		0);
	CHECK(t->nbytes == bytes && memcmp(ref, t->data, bytes) == 0);
	free(ref);
}

/* What lm_prepare() makes of q in format f: nothing quantized, the layers and (untied) the
 * lm_head taken from the map; a head quantized at load (tied, or written without its records)
 * when head_in_map is false. */
static void check_prepared(const struct engine_model *q, enum quant_format f, bool head_in_map)
{
	char err[512] = "";
	struct lm_prepare_opts po = {.quant = (int)f};
	struct lm_prepared p;
	int r = lm_prepare(q, &po, &p, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "lm_prepare: %s\n", err);
	REQUIRE(r == 0);
	CHECK(p.quant_mapped);
	CHECK(p.head_mapped == head_in_map);
	CHECK(p.head_q.data != NULL && (int)p.head_q.format == (int)f);
	if (head_in_map)
		CHECK(p.head_q.data == q->lm_head.data);
	else
		CHECK(!model_files_mapped(q->files, p.head_q.data, 1));
	/* the CPU backend's tiles (q8, q4): the map's records copied as they are tiled, every row the
	 * same record as before, and every matrix owned from then on (freed by finish, ASan) */
	const struct quant_tensor before = p.layers[0].q[0];
	char *rec = malloc(before.row_bytes), *orig = malloc(before.row_bytes * (size_t)before.rows);
	REQUIRE(rec && orig);
	memcpy(orig, before.data, before.row_bytes * (size_t)before.rows);
	CHECK_INT_EQ(lm_prepared_tile(q, &p), 0);
	const struct quant_tensor *t = &p.layers[0].q[0];
	if (quant_tile_supported(f)) {
		CHECK(!p.quant_mapped && !p.head_mapped);
		CHECK(t->tiled == (t->rows >= QUANT_TILE_ROWS) && p.head_q.tiled);
		CHECK(!model_files_mapped(q->files, t->data, 1) &&
		      !model_files_mapped(q->files, p.head_q.data, 1));
		bool same = true;
		for (int64_t i = 0; i < t->rows; i++)
			same &= memcmp(quant_tensor_row(t, i, rec), orig + (size_t)i * t->row_bytes,
				       t->row_bytes) == 0;
		CHECK(same);
	} else {
		/* a format without tiles: nothing changes */
		CHECK(p.quant_mapped && t->data == before.data && !t->tiled);
	}
	free(rec);
	free(orig);
	lm_prepared_finish(&p); /* frees a head quantized at load, never the map's */
}

/* The written checkpoint loads as that format, runs bit for bit as the source quantized at load,
 * holds the same bytes, and reports no quantizing. */
static void check_roundtrip(const char *name, enum quant_format f)
{
	char err[512], out_name[64];
	char *src = fixture(name);
	snprintf(out_name, sizeof(out_name), "%s-%s", name, quant_format_desc(f)->name);
	char *out = tmp_path(out_name);
	struct engine_model *m = load(src);
	int r = write_q(m, out, f, false, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "%s: %s\n", out_name, err);
	REQUIRE(r == 0);
	struct engine_model *q = load(out);
	CHECK_INT_EQ(model_quant_format(q), f);
	CHECK_INT_EQ(model_quant_format(m), -1);

	/* the records are the reference quantizer's (quant.h) of the source's rows, in the map */
	const struct tensor *sm[4], *qm[4];
	int n = lm_layer_matrices(&m->layers[0], sm);
	REQUIRE(lm_layer_matrices(&q->layers[0], qm) == n);
	for (int i = 0; i < n; i++)
		check_records(q, sm[i], qm[i], f);
	/* the lm_head's records too, [vocab, hidden], unless it is tied: then it is the embeddings,
	 * stored plain, and no record of it is written */
	const bool tied = m->lm_head.data == m->embeddings.data;
	char rname[64];
	struct tensor rec;
	snprintf(rname, sizeof(rname), "lm_head.weight%s", QCKPT_SUFFIX);
	if (tied) {
		CHECK(q->lm_head.data == q->embeddings.data);
		CHECK_INT_EQ(q->lm_head.dtype, m->lm_head.dtype);
		CHECK(model_files_find(q->files, "lm_head.weight", &rec) < 0);
		CHECK(model_files_find(q->files, rname, &rec) < 0);
	} else {
		check_records(q, &m->lm_head, &q->lm_head, f);
		CHECK_INT_EQ(q->lm_head.shape[0], q->cfg.vocab);
		CHECK_INT_EQ(q->lm_head.shape[1], q->cfg.hidden);
	}
	/* the other tensors as stored */
	CHECK_INT_EQ(q->embeddings.dtype, m->embeddings.dtype);
	CHECK(q->embeddings.nbytes == m->embeddings.nbytes &&
	      memcmp(q->embeddings.data, m->embeddings.data, m->embeddings.nbytes) == 0);
	CHECK(memcmp(q->layers[0].norm.data, m->layers[0].norm.data, m->layers[0].norm.nbytes) == 0);

	/* quantize-at-load vs the written checkpoint: the same logits, bit for bit */
	struct calls c_load = {0}, c_mapped = {0};
	struct engine_backend *bl = cpu_backend(m, f == QUANT_Q8 ? ENGINE_WEIGHTS_Q8 : ENGINE_WEIGHTS_Q4,
						&c_load, err, sizeof(err));
	REQUIRE(bl);
	struct engine_backend *bq = cpu_backend(q, ENGINE_WEIGHTS_DEFAULT, &c_mapped, err, sizeof(err));
	if (!bq)
		fprintf(stderr, "%s: %s\n", out_name, err);
	REQUIRE(bq);
	struct engine_backend_info il, iq;
	REQUIRE(engine_backend_get_info(bl, &il) == 0 && engine_backend_get_info(bq, &iq) == 0);
	CHECK_STR_EQ(iq.weights, quant_format_desc(f)->name);
	CHECK_STR_EQ(il.weights, quant_format_desc(f)->name);
	/* the bytes held: the same records and the same stored tensors */
	CHECK_INT_EQ(iq.weight_bytes, il.weight_bytes);
	/* quantizing at load reports the layers' source bytes as they are quantized; the written
	 * checkpoint quantizes nothing: one report of the bytes held, as a plain checkpoint */
	CHECK(c_load.n >= n && c_load.last_done == c_load.last_total);
	CHECK_INT_EQ(c_mapped.n, 1);
	CHECK_INT_EQ(c_mapped.last_done, iq.weight_bytes);
	CHECK_INT_EQ(c_mapped.last_total, iq.weight_bytes);
	check_prepared(q, f, !tied);
	const int vocab = q->cfg.vocab, np = 9, nd = 4;
	float *a = run_logits(bl, vocab, np, nd), *b = run_logits(bq, vocab, np, nd);
	CHECK(memcmp(a, b, (size_t)(np + nd) * vocab * sizeof(float)) == 0);
	free(a);
	free(b);
	/* asking it as stored in its own name works; another format, bf16, or CUDA is refused */
	struct engine_backend *same =
		cpu_backend(q, f == QUANT_Q8 ? ENGINE_WEIGHTS_Q8 : ENGINE_WEIGHTS_Q4, NULL, err, sizeof(err));
	CHECK(same != NULL);
	engine_backend_destroy(same);
	enum engine_weights other = f == QUANT_Q8 ? ENGINE_WEIGHTS_Q4 : ENGINE_WEIGHTS_Q8;
	CHECK(cpu_backend(q, other, NULL, err, sizeof(err)) == NULL && errno == EINVAL);
	CHECK(strstr(err, "the checkpoint's linear layers were quantized to") != NULL);
	CHECK(strstr(err, "by holo-quantize and load as they are") != NULL);
	CHECK(cpu_backend(q, ENGINE_WEIGHTS_BF16, NULL, err, sizeof(err)) == NULL && errno == EINVAL);
	CHECK(strstr(err, "--weights bf16: the checkpoint's linear layers were quantized to") != NULL);
	/* CUDA runs it as stored too (tests/gpu/test-gpu-quant-lm.c), and refuses another
	 * format or bf16 before looking for a device */
	struct engine_backend_options co = {.kind = ENGINE_BACKEND_CUDA, .weights = other};
	err[0] = '\0';
	CHECK(engine_backend_create(q, &co, err, sizeof(err)) == NULL && errno == EINVAL);
	CHECK(strstr(err, "the checkpoint's linear layers were quantized to") != NULL);
	CHECK(strstr(err, "by holo-quantize and load as they are") != NULL);
	co.weights = ENGINE_WEIGHTS_BF16;
	CHECK(engine_backend_create(q, &co, err, sizeof(err)) == NULL && errno == EINVAL);
	CHECK(strstr(err, "--weights bf16: the checkpoint's linear layers were quantized to") != NULL);
	/* an already quantized checkpoint is not quantized again */
	char *again = tmp_path("again");
	CHECK_INT_EQ(write_q(q, again, f, false, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "already quantized") != NULL);
	CHECK(!exists(again));
	free(again);

	engine_backend_destroy(bl);
	engine_backend_destroy(bq);
	engine_model_destroy(q);
	engine_model_destroy(m);
	free(src);
	free(out);
}

/* Other files copied, the shards kept, the vision tower as stored. */
static void check_files(void)
{
	char err[512];
	char *src = fixture("tiny-agent"), *out = tmp_path("agent-q8");
	struct engine_model *m = load(src);
	REQUIRE(write_q(m, out, QUANT_Q8, false, err, sizeof(err)) == 0);
	const char *files[] = {"tokenizer.json", "preprocessor_config.json"};
	for (size_t i = 0; i < 2; i++) {
		char a[1024], b[1024];
		snprintf(a, sizeof(a), "%s/%s", src, files[i]);
		snprintf(b, sizeof(b), "%s/%s", out, files[i]);
		CHECK(same_file(a, b));
	}
	struct engine_model *q = load(out);
	CHECK(engine_model_tokenizer(q) != NULL);
	engine_model_destroy(q);
	engine_model_destroy(m);
	free(src);
	free(out);

	/* sharded: the same shard names, an index naming the records */
	src = fixture("tiny-sharded");
	out = tmp_path("sharded-q4");
	m = load(src);
	REQUIRE(write_q(m, out, QUANT_Q4, false, err, sizeof(err)) == 0);
	char idx[1024];
	snprintf(idx, sizeof(idx), "%s/model-00002-of-00003.safetensors", out);
	CHECK(exists(idx));
	q = load(out);
	CHECK_INT_EQ(model_quant_format(q), QUANT_Q4);
	engine_model_destroy(q);
	engine_model_destroy(m);
	free(src);
	free(out);

	/* a VLM: the vision tensors as stored, found by name */
	src = fixture("tiny-vl");
	out = tmp_path("vl-q8");
	m = load(src);
	REQUIRE(write_q(m, out, QUANT_Q8, false, err, sizeof(err)) == 0);
	q = load(out);
	struct tensor ts, tq;
	REQUIRE(model_files_find(m->files, "mlp1.1.weight", &ts) == 0);
	REQUIRE(model_files_find(q->files, "mlp1.1.weight", &tq) == 0);
	CHECK(ts.dtype == tq.dtype && ts.nbytes == tq.nbytes && memcmp(ts.data, tq.data, ts.nbytes) == 0);
	engine_model_destroy(q);
	engine_model_destroy(m);
	free(src);
	free(out);
}

/* Copies the file src to dst. */
static void copy_file(const char *src, const char *dst)
{
	FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
	REQUIRE(a && b);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), a)) > 0)
		REQUIRE(fwrite(buf, 1, n, b) == n);
	fclose(a);
	REQUIRE(fclose(b) == 0);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	REQUIRE(f);
	char *buf = calloc(1, 1 << 20);
	REQUIRE(buf);
	fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	return buf;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	REQUIRE(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* A copy of checkpoint `good` as `name` with config.json's text `from` replaced by `to`. */
static char *variant(const char *good, const char *name, const char *from, const char *to)
{
	char *dir = tmp_path(name), a[1024], b[1024];
	REQUIRE(mkdir(dir, 0755) == 0);
	snprintf(a, sizeof(a), "%s/model.safetensors", good);
	snprintf(b, sizeof(b), "%s/model.safetensors", dir);
	copy_file(a, b);
	snprintf(a, sizeof(a), "%s/config.json", good);
	snprintf(b, sizeof(b), "%s/config.json", dir);
	char *text = read_text(a);
	if (from) {
		char *at = strstr(text, from);
		REQUIRE(at);
		char *edited = malloc(strlen(text) + strlen(to) + 1);
		REQUIRE(edited);
		sprintf(edited, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
		free(text);
		text = edited;
	}
	write_text(b, text);
	free(text);
	return dir;
}

/* The file offset of tensor `name`'s data in dir/model.safetensors. */
static long data_offset(const char *dir, const char *name, size_t *ret_bytes)
{
	char path[1024], err[256];
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	struct st_file *f;
	REQUIRE(st_file_open(path, &f, err, sizeof(err)) == 0);
	const struct st_entry *e = st_file_find(f, name);
	REQUIRE(e);
	long off = (long)((const uint8_t *)e->t.data - f->base);
	*ret_bytes = e->t.nbytes;
	st_file_destroy(f);
	return off;
}

static void check_corrupt(void)
{
	char err[512];
	char *src = fixture("tiny-mamba"), *good = tmp_path("good-q8");
	struct engine_model *m = load(src);
	REQUIRE(write_q(m, good, QUANT_Q8, false, err, sizeof(err)) == 0);
	engine_model_destroy(m);
	const char *in0 = "\"backbone.layers.0.mixer.in_proj.weight\":[200,64,128]";

	char *d = variant(good, "bad-version", "\"version\":2", "\"version\":3");
	load_fails(d, "unknown holod quantization version 3 (this build reads version 2");
	free(d);
	/* version 1's q8 is today's layout: read as it is */
	d = variant(good, "q8-version-1", "\"version\":2", "\"version\":1");
	struct engine_model *m1 = load(d);
	CHECK(m1 != NULL);
	engine_model_destroy(m1);
	free(d);
	/* version 1's q4 (an fp16 d and m per block) is not: refused with a sentence */
	char *good4 = tmp_path("good-q4");
	m = load(src);
	REQUIRE(write_q(m, good4, QUANT_Q4, false, err, sizeof(err)) == 0);
	engine_model_destroy(m);
	d = variant(good4, "q4-version-1", "\"version\":2", "\"version\":1");
	load_fails(d, "a q4 checkpoint of holod quantization version 1 (5 bits a weight");
	free(d);
	free(good4);
	d = variant(good, "bad-format", "\"format\":\"q8\"", "\"format\":\"q5\"");
	load_fails(d, "unknown holod quantization format 'q5'");
	free(d);
	d = variant(good, "bad-row-bytes", in0, "\"backbone.layers.0.mixer.in_proj.weight\":[200,64,192]");
	load_fails(d, "tensor 'backbone.layers.0.mixer.in_proj.weight.qweight': row_bytes 192, but a q8 "
		      "row of 64 columns takes 128 bytes");
	free(d);
	d = variant(good, "bad-rows", in0, "\"backbone.layers.0.mixer.in_proj.weight\":[199,64,128]");
	load_fails(d, "tensor 'backbone.layers.0.mixer.in_proj.weight.qweight' is not U8 [199, 128]");
	free(d);
	d = variant(good, "bad-cols", in0, "\"backbone.layers.0.mixer.in_proj.weight\":[200,65,192]");
	load_fails(d, "tensor 'backbone.layers.0.mixer.in_proj.weight.qweight' is not U8 [200, 192]");
	free(d);
	d = variant(good, "huge-cols", in0,
		    "\"backbone.layers.0.mixer.in_proj.weight\":[200,99999999999,128]");
	load_fails(d, "is not [rows, cols, row_bytes] with 1 <= rows");
	free(d);
	d = variant(good, "not-listed", in0, "\"backbone.layers.0.mixer.in_proj.weightX\":[200,64,128]");
	load_fails(d, "missing tensor 'backbone.layers.0.mixer.in_proj.weightX.qweight'");
	free(d);
	d = variant(good, "both-kinds", "{",
		    "{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8\"},");
	load_fails(d, "has both 'holod_quantization' (holo-quantize) and 'quantization_config'");
	free(d);

	/* a truncated file: the record tensors no longer fit */
	d = variant(good, "truncated", NULL, NULL);
	{
		char path[1024];
		snprintf(path, sizeof(path), "%s/model.safetensors", d);
		struct stat st;
		REQUIRE(stat(path, &st) == 0);
		REQUIRE(truncate(path, st.st_size / 3) == 0);
		load_fails(d, "go beyond the data section");
	}
	free(d);

	/* a NaN scale in a record: the backend refuses it naming the matrix and row */
	d = variant(good, "nan-scale", NULL, NULL);
	{
		size_t bytes;
		long off = data_offset(d, "backbone.layers.0.mixer.in_proj.weight.qweight", &bytes);
		CHECK_INT_EQ(bytes, 200 * 128);
		char path[1024];
		snprintf(path, sizeof(path), "%s/model.safetensors", d);
		int fd = open(path, O_WRONLY);
		REQUIRE(fd >= 0);
		uint16_t nan16 = 0x7e00; /* row 5's scale of block 0, after its 64 bytes of codes */
		REQUIRE(pwrite(fd, &nan16, 2, off + 5 * 128 + 64) == 2);
		close(fd);
		struct engine_model *q = load(d);
		CHECK(cpu_backend(q, ENGINE_WEIGHTS_DEFAULT, NULL, err, sizeof(err)) == NULL &&
		      errno == EINVAL);
		CHECK_STR_EQ(err, "layer 0's mixer.in_proj: row 5 of its q8 records has a NaN or infinite "
				  "scale (the checkpoint is corrupt)");
		engine_model_destroy(q);
	}
	free(d);

	/* the lm_head's records: a wrong size, a NaN scale, records of a head the config ties */
	d = variant(good, "bad-head-row-bytes", "\"lm_head.weight\":[256,64,128]",
		    "\"lm_head.weight\":[256,64,192]");
	load_fails(d, "tensor 'lm_head.weight.qweight': row_bytes 192, but a q8 row of 64 columns "
		      "takes 128 bytes");
	free(d);
	d = variant(good, "head-tied", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
	load_fails(d, "tensor 'lm_head.weight' is quantized, but config.json ties the lm_head to the "
		      "embeddings");
	free(d);
	d = variant(good, "head-nan-scale", NULL, NULL);
	{
		size_t bytes;
		long off = data_offset(d, "lm_head.weight.qweight", &bytes);
		CHECK_INT_EQ(bytes, 256 * 128);
		char path[1024];
		snprintf(path, sizeof(path), "%s/model.safetensors", d);
		int fd = open(path, O_WRONLY);
		REQUIRE(fd >= 0);
		uint16_t inf16 = 0x7c00; /* row 7's scale of block 0: +inf */
		REQUIRE(pwrite(fd, &inf16, 2, off + 7 * 128 + 64) == 2);
		close(fd);
		struct engine_model *q = load(d);
		CHECK(cpu_backend(q, ENGINE_WEIGHTS_DEFAULT, NULL, err, sizeof(err)) == NULL &&
		      errno == EINVAL);
		CHECK_STR_EQ(err, "the lm_head: row 7 of its q8 records has a NaN or infinite scale (the "
				  "checkpoint is corrupt)");
		engine_model_destroy(q);
	}
	free(d);
	free(src);
	free(good);
}

/* A directory written before holo-quantize wrote the lm_head's records (its head stored plain
 * and not listed in the config) loads: the head is quantized at load, and the logits are those
 * of the source quantized at load. Made from a new one: the head's entry taken out of the
 * config, its record tensor renamed in the shard's header (padded to the same length) to the
 * plain bf16 head, whose bytes (q8 records of 64 columns take 128 bytes a row, as 64 bf16)
 * replace the records'. */
static void check_old_layout(void)
{
	char err[512];
	char *src = fixture("tiny-mamba"), *good = tmp_path("head-q8");
	struct engine_model *m = load(src);
	REQUIRE(write_q(m, good, QUANT_Q8, false, err, sizeof(err)) == 0);
	const char *entry = "\"lm_head.weight\":[256,64,128]";
	char *text, cfg[1024], with_comma[128];
	snprintf(cfg, sizeof(cfg), "%s/config.json", good);
	text = read_text(cfg);
	snprintf(with_comma, sizeof(with_comma), strstr(text, "],\"lm_head.weight\"") ? ",%s" : "%s,", entry);
	free(text);
	char *d = variant(good, "old-layout", with_comma, "");
	size_t bytes;
	long off = data_offset(d, "lm_head.weight.qweight", &bytes);
	REQUIRE(bytes == m->lm_head.nbytes);
	char path[1024];
	snprintf(path, sizeof(path), "%s/model.safetensors", d);
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	uint64_t hlen = 0;
	REQUIRE(pread(fd, &hlen, 8, 0) == 8 && hlen > 0 && hlen < (1 << 20));
	char *hdr = calloc(1, hlen + 1);
	REQUIRE(hdr && pread(fd, hdr, hlen, 8) == (ssize_t)hlen);
	const char *from = "\"lm_head.weight.qweight\":{\"dtype\":\"U8\",\"shape\":[256,128]";
	const char *to = "\"lm_head.weight\":{\"dtype\":\"BF16\",\"shape\":[256,64]";
	char *at = strstr(hdr, from);
	REQUIRE(at);
	memset(at, ' ', strlen(from));
	memcpy(at, to, strlen(to));
	REQUIRE(pwrite(fd, hdr, hlen, 8) == (ssize_t)hlen);
	REQUIRE(pwrite(fd, m->lm_head.data, m->lm_head.nbytes, off) == (ssize_t)m->lm_head.nbytes);
	close(fd);
	free(hdr);

	struct engine_model *q = load(d);
	CHECK_INT_EQ(model_quant_format(q), QUANT_Q8);
	CHECK_INT_EQ(q->lm_head.dtype, TENSOR_BF16);
	check_prepared(q, QUANT_Q8, false);
	struct engine_backend *bl = cpu_backend(m, ENGINE_WEIGHTS_Q8, NULL, err, sizeof(err));
	struct engine_backend *bq = cpu_backend(q, ENGINE_WEIGHTS_DEFAULT, NULL, err, sizeof(err));
	REQUIRE(bl && bq);
	const int vocab = q->cfg.vocab, np = 5, nd = 3;
	float *a = run_logits(bl, vocab, np, nd), *b = run_logits(bq, vocab, np, nd);
	CHECK(memcmp(a, b, (size_t)(np + nd) * vocab * sizeof(float)) == 0);
	free(a);
	free(b);
	engine_backend_destroy(bl);
	engine_backend_destroy(bq);
	engine_model_destroy(q);
	engine_model_destroy(m);
	free(d);
	free(src);
	free(good);
}

/* --out: an existing non-empty directory is refused (--force replaces it), the source itself
 * always; write errors leave nothing behind. */
static void check_out(void)
{
	char err[512];
	char *src = fixture("tiny-mamba");
	struct engine_model *m = load(src);

	char *out = tmp_path("exists");
	REQUIRE(mkdir(out, 0755) == 0);
	char *keep = tmp_path("exists/keep.txt");
	write_text(keep, "mine");
	CHECK_INT_EQ(write_q(m, out, QUANT_Q8, false, err, sizeof(err)), -EEXIST);
	CHECK(strstr(err, "exists and is not empty (--force replaces it)") != NULL);
	CHECK(exists(keep));
	CHECK(!has_entry(tmp_root, ".exists.holo-quantize-"));
	CHECK_INT_EQ(write_q(m, out, QUANT_Q8, true, err, sizeof(err)), 0);
	CHECK(!exists(keep));
	CHECK(!has_entry(tmp_root, ".exists.holo-quantize-"));
	struct engine_model *q = load(out);
	engine_model_destroy(q);
	free(keep);
	free(out);

	/* an empty directory is filled */
	out = tmp_path("empty");
	REQUIRE(mkdir(out, 0755) == 0);
	CHECK_INT_EQ(write_q(m, out, QUANT_Q4, false, err, sizeof(err)), 0);
	free(out);

	/* the source itself, even with --force */
	CHECK_INT_EQ(write_q(m, src, QUANT_Q8, true, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "is the source checkpoint") != NULL);

	/* a parent that is a file: nothing can be created */
	char *file = tmp_path("a-file");
	write_text(file, "x");
	out = tmp_path("a-file/out");
	CHECK_INT_EQ(write_q(m, out, QUANT_Q8, false, err, sizeof(err)), -ENOTDIR);
	CHECK(strstr(err, "a-file/out: Not a directory") != NULL);
	free(out);
	/* and --out naming a file */
	CHECK_INT_EQ(write_q(m, file, QUANT_Q8, true, err, sizeof(err)), -ENOTDIR);
	CHECK(strstr(err, "a-file exists and is not a directory") != NULL);
	free(file);

	/* a parent the user cannot write to (root writes anywhere: not checkable as root) */
	if (geteuid() != 0) {
		char *ro = tmp_path("read-only");
		REQUIRE(mkdir(ro, 0555) == 0);
		out = tmp_path("read-only/out");
		CHECK_INT_EQ(write_q(m, out, QUANT_Q8, false, err, sizeof(err)), -EACCES);
		CHECK(strstr(err, "cannot create a directory in") != NULL);
		chmod(ro, 0755);
		CHECK(!has_entry(ro, "."));
		free(out);
		free(ro);
	}

	/* the disk full mid-file (a file size limit: write() fails with EFBIG as with ENOSPC):
	 * a clear error naming the file, and neither the output nor the temporary directory left */
	out = tmp_path("full");
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit rl = {.rlim_cur = 64 << 10, .rlim_max = 64 << 10};
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			_exit(3);
		int r = write_q(m, out, QUANT_Q8, false, err, sizeof(err));
		_exit(r == -EFBIG && strstr(err, "writing model.safetensors: File too large") ? 0 : 1);
	}
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(!exists(out));
	CHECK(!has_entry(tmp_root, ".full.holo-quantize-"));
	free(out);

	engine_model_destroy(m);
	free(src);
}

/* The bytes resident in the process: quantizing at load drops the map's pages of the layers'
 * source (their whole pages), so what weight_bytes leaves out is not held either. */
static void check_resident(void)
{
	char err[512];
	char *src = fixture("tiny-mamba");
	struct engine_model *m = load(src);
	long page = sysconf(_SC_PAGESIZE);
	/* every page of the map in memory, then the bytes the layers' and the lm_head's whole pages take */
	volatile uint8_t sink = 0;
	uint64_t inner = 0;
	/* the layers' matrices and the lm_head (quantized too with q8, and not tied here) */
	REQUIRE(m->lm_head.data != m->embeddings.data);
	for (int l = 0; l <= m->cfg.n_layers; l++) {
		const struct tensor *mats[4] = {&m->lm_head};
		int n = l < m->cfg.n_layers ? lm_layer_matrices(&m->layers[l], mats) : 1;
		for (int i = 0; i < n; i++) {
			for (size_t k = 0; k < mats[i]->nbytes; k += 64)
				sink ^= ((const uint8_t *)mats[i]->data)[k];
			uintptr_t a = ((uintptr_t)mats[i]->data + page - 1) & ~(uintptr_t)(page - 1);
			uintptr_t e = ((uintptr_t)mats[i]->data + mats[i]->nbytes) & ~(uintptr_t)(page - 1);
			inner += e > a ? e - a : 0;
		}
	}
	(void)sink;
	long before = test_map_rss_kb("tiny-mamba/model.safetensors");
	REQUIRE(before > 0);
	REQUIRE(inner >= 16 * (uint64_t)page);
	struct engine_backend *b = cpu_backend(m, ENGINE_WEIGHTS_Q8, NULL, err, sizeof(err));
	REQUIRE(b);
	long after = test_map_rss_kb("tiny-mamba/model.safetensors");
	/* exactly those pages, unless the kernel reclaimed a few of them meanwhile */
	CHECK(before - after <= (long)(inner >> 10) && before - after >= (long)(inner >> 10) * 9 / 10);
	if (before - after != (long)(inner >> 10))
		fprintf(stderr,
			"resident pages of the map fell by %ld KiB, the layers' whole pages are "
			"%ld KiB\n",
			before - after, (long)(inner >> 10));
	engine_backend_destroy(b);
	engine_model_destroy(m);
	free(src);
}

static void remove_all(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(tmp_root, sizeof(tmp_root), "%s/test-lm-quantized-XXXXXX", t && *t ? t : "/tmp");
	REQUIRE(mkdtemp(tmp_root));
	check_roundtrip("tiny-mamba", QUANT_Q8);
	check_roundtrip("tiny-mamba", QUANT_Q4);
	check_roundtrip("tiny-aliases", QUANT_Q8);
	check_roundtrip("tiny-tied", QUANT_Q4);
	check_old_layout();
	check_files();
	check_corrupt();
	check_out();
	check_resident();
	remove_all(tmp_root);
	return test_exit();
}
