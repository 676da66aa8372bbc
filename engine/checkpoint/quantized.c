/* holod-quantized checkpoints: the loader's view of them and holo-quantize's writer
 * (quantized.h DESIGN, docs/quantization.md). */
#include "quantized.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "dims.h"

/* Named limits of the config entry (beyond quant.h's sizes). */
#define QCKPT_MAX_TENSORS 65536 /* listed matrices: MODEL_MAX_LAYERS x 4 at most are used */

int quantized_dtype_format(enum tensor_dtype dtype)
{
	return dtype == TENSOR_Q8 ? QUANT_Q8 : dtype == TENSOR_Q4 ? QUANT_Q4 : -1;
}

enum tensor_dtype quantized_format_dtype(enum quant_format f)
{
	return f == QUANT_Q4 ? TENSOR_Q4 : TENSOR_Q8;
}

int model_quant_format(const struct engine_model *m)
{
	const struct tensor *mats[4];

	if (!m || !m->layers || m->cfg.n_layers < 1 || lm_layer_matrices(&m->layers[0], mats) < 1)
		return -1;
	return quantized_dtype_format(mats[0]->dtype);
}

void quantized_tensor_view(const struct tensor *w, struct quant_tensor *ret)
{
	*ret = (struct quant_tensor){
		.format = (enum quant_format)quantized_dtype_format(w->dtype),
		.rows = w->shape[0],
		.cols = w->shape[1],
		.row_bytes = w->shape[0] > 0 ? w->nbytes / (size_t)w->shape[0] : 0,
		.data = w->data,
	};
}

/* An integer field of the entry in [lo, hi]. */
static bool int_field(const json_t *v, int64_t lo, int64_t hi, int64_t *ret)
{
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return false;
	*ret = json_integer_value(v);
	return true;
}

int quantized_config_format(const json_t *root, enum quant_format *ret_format, char *errbuf, size_t errlen)
{
	const json_t *q = json_object_get(root, QCKPT_KEY);
	const json_t *v;
	int64_t x;

	if (!q)
		return -ENOENT;
	if (!json_is_object(q))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: '%s' is not an object", QCKPT_KEY);
	if (json_object_get(root, "quantization_config"))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json has both '%s' (holo-quantize) and 'quantization_config': a "
				 "checkpoint is quantized one way or the other",
				 QCKPT_KEY);
	v = json_object_get(q, "version");
	if (!json_is_integer(v))
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: %s.version is not an integer",
				 QCKPT_KEY);
	const json_int_t version = json_integer_value(v);
	if (version != QCKPT_VERSION && version != QCKPT_VERSION_Q8_SINCE)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: unknown holod quantization version %lld (this build reads "
				 "version %d, and version %d's q8: quantize the source checkpoint again with "
				 "this holo-quantize)",
				 (long long)version, QCKPT_VERSION, QCKPT_VERSION_Q8_SINCE);
	v = json_object_get(q, "format");
	/* holo-quantize writes q8 and q4 (an FP8 checkpoint is loaded as NVIDIA publishes it) */
	if (!json_is_string(v) || quant_format_parse(json_string_value(v), ret_format) < 0 ||
	    (*ret_format != QUANT_Q8 && *ret_format != QUANT_Q4))
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: unknown holod quantization format '%.32s' (q8 or q4)",
				 json_is_string(v) ? json_string_value(v) : "(not a string)");
	if (version != QCKPT_VERSION && *ret_format != QUANT_Q8)
		return st_errorf(
			errbuf, errlen, -EINVAL,
			"config.json: a q4 checkpoint of holod quantization version %lld (5 bits "
			"a weight, written before 2026-11-30): this build's q4 is version %d's "
			"4.5-bit layout; quantize the source checkpoint again with this holo-quantize",
			(long long)version, QCKPT_VERSION);
	if (!int_field(json_object_get(q, "block"), 1, INT_MAX, &x) || x != QUANT_BLOCK ||
	    !int_field(json_object_get(q, "row_align"), 1, INT_MAX, &x) || x != QUANT_ALIGN)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "config.json: %s needs block %d and row_align %d (this build's layout)",
				 QCKPT_KEY, QUANT_BLOCK, QUANT_ALIGN);
	return 0;
}

static ssize_t index_pos(const struct st_entry **index, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, index[mid]->name);

		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

int quantized_index_adopt(const json_t *root, const struct st_entry **index, size_t n,
			  struct st_entry **ret_entries, size_t *ret_n, int *ret_format, char *errbuf,
			  size_t errlen)
{
	enum quant_format f;
	const json_t *tensors, *v;
	struct st_entry *out = NULL;
	size_t n_out = 0, cap;
	ssize_t *pos = NULL;
	const char *name;
	int r = quantized_config_format(root, &f, errbuf, errlen);

	if (r == -ENOENT) {
		*ret_entries = NULL;
		*ret_n = 0;
		*ret_format = -1;
		return 0;
	}
	if (r < 0)
		return r;
	tensors = json_object_get(json_object_get(root, QCKPT_KEY), "tensors");
	if (!json_is_object(tensors) || json_object_size(tensors) == 0)
		return st_errorf(errbuf, errlen, -EINVAL, "config.json: %s.tensors is not a non-empty object",
				 QCKPT_KEY);
	if (json_object_size(tensors) > QCKPT_MAX_TENSORS)
		return st_errorf(errbuf, errlen, -EFBIG, "config.json: %s.tensors lists more than %d matrices",
				 QCKPT_KEY, QCKPT_MAX_TENSORS);
	cap = json_object_size(tensors);
	out = xcalloc(cap, sizeof(*out));
	pos = xcalloc(cap, sizeof(*pos));
	json_object_foreach((json_t *)tensors, name, v)
	{
		char rname[ST_MAX_NAME_BYTES + 16];
		int64_t rows, cols, row_bytes;
		size_t want_row, want_total;
		const struct st_entry *e;
		ssize_t i;

		if (strlen(name) + strlen(QCKPT_SUFFIX) > ST_MAX_NAME_BYTES) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "config.json: %s.tensors has a name longer than %u bytes", QCKPT_KEY,
				      ST_MAX_NAME_BYTES - (unsigned)strlen(QCKPT_SUFFIX));
			goto fail;
		}
		snprintf(rname, sizeof(rname), "%s%s", name, QCKPT_SUFFIX);
		if (!json_is_array(v) || json_array_size(v) != 3 ||
		    !int_field(json_array_get(v, 0), 1, QUANT_MAX_ROWS, &rows) ||
		    !int_field(json_array_get(v, 1), 1, QUANT_MAX_COLS, &cols) ||
		    !int_field(json_array_get(v, 2), 1, INT64_MAX, &row_bytes)) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "config.json: %s.tensors['%.200s'] is not [rows, cols, row_bytes] with "
				      "1 <= rows "
				      "<= %lld and 1 <= cols <= %lld",
				      QCKPT_KEY, name, (long long)QUANT_MAX_ROWS, (long long)QUANT_MAX_COLS);
			goto fail;
		}
		if ((r = quant_row_bytes(f, cols, &want_row)) < 0 ||
		    (r = quant_tensor_bytes(f, rows, cols, &want_total)) < 0) {
			st_errorf(errbuf, errlen, r,
				  "tensor '%.200s': %lld x %lld %s records are past a size limit", rname,
				  (long long)rows, (long long)cols, quant_format_desc(f)->name);
			goto fail;
		}
		if ((uint64_t)row_bytes != want_row) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "tensor '%.200s': row_bytes %lld, but a %s row of %lld columns takes "
				      "%zu bytes",
				      rname, (long long)row_bytes, quant_format_desc(f)->name,
				      (long long)cols, want_row);
			goto fail;
		}
		i = index_pos(index, n, rname);
		if (i < 0) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "missing tensor '%.200s' (listed in config.json's %s)", rname,
				      QCKPT_KEY);
			goto fail;
		}
		if (index_pos(index, n, name) >= 0) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "tensor '%.200s' is stored both plain and as quantized records '%s'",
				      name, rname);
			goto fail;
		}
		e = index[i];
		if (e->t.dtype != TENSOR_U8 || e->t.ndim != 2 || e->t.shape[0] != rows ||
		    e->t.shape[1] != row_bytes) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "tensor '%.200s' is not U8 [%lld, %lld] (%lld rows of %lld-byte %s "
				      "records): the "
				      "file is corrupt or truncated",
				      rname, (long long)rows, (long long)row_bytes, (long long)rows,
				      (long long)row_bytes, quant_format_desc(f)->name);
			goto fail;
		}
		if (e->t.nbytes != want_total) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "tensor '%.200s' holds %zu bytes, %s records of %lld x "
				      "%lld take %zu",
				      rname, e->t.nbytes, quant_format_desc(f)->name, (long long)rows,
				      (long long)cols, want_total);
			goto fail;
		}
		if ((uintptr_t)e->t.data % QUANT_ALIGN != 0) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "tensor '%.200s': its records are not %d-byte aligned in the file",
				      rname, QUANT_ALIGN);
			goto fail;
		}
		out[n_out] = (struct st_entry){
			.name = xstrdup(name),
			.t = {.data = e->t.data,
			      .dtype = quantized_format_dtype(f),
			      .ndim = 2,
			      .shape = {rows, cols},
			      .nbytes = want_total},
			.begin = e->begin,
			.end = e->end,
		};
		pos[n_out++] = i;
	}
	for (size_t k = 0; k < n_out; k++)
		index[pos[k]] = &out[k];
	free(pos);
	*ret_entries = out;
	*ret_n = n_out;
	*ret_format = (int)f;
	return 0;
fail:
	for (size_t k = 0; k < n_out; k++)
		free((char *)out[k].name);
	free(out);
	free(pos);
	return r;
}

/* ---- holo-quantize: the writer ------------------------------------------------------------- */

#define QCKPT_COPY_CHUNK ((size_t)1 << 20)
#define QCKPT_WRITE_CHUNK ((size_t)1 << 30) /* one write() call at most (Linux takes ~2 GiB) */

struct wtensor {
	char *name;
	const char *dtype; /* safetensors name */
	int ndim;
	int64_t shape[TENSOR_MAX_DIMS];
	const void *data;
	size_t nbytes;
	int order; /* data order: records first (multiples of 64 bytes), then 4-, 2-, 1-byte elements */
};

struct writer {
	const struct quantized_write_opts *o;
	char *errbuf;
	size_t errlen;
};

static void note(const struct writer *w, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void note(const struct writer *w, const char *format, ...)
{
	char line[512];
	va_list ap;

	if (!w->o->note)
		return;
	va_start(ap, format);
	vsnprintf(line, sizeof(line), format, ap);
	va_end(ap);
	w->o->note(w->o->note_arg, line);
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t k = write(fd, p, MIN(n, QCKPT_WRITE_CHUNK));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Creates `name` in dir (which must not hold it), hands it to fill(), then fsyncs and closes it,
 * every step checked; the sentence names the file. */
static int write_file(const struct writer *w, const char *dir, const char *name,
		      int (*fill)(int fd, void *arg), void *arg)
{
	char *path = path_join(dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), r;

	free(path);
	if (fd < 0) {
		r = -errno;
		return st_errorf(w->errbuf, w->errlen, r, "cannot create %s: %s", name, strerror(-r));
	}
	r = fill(fd, arg);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		return st_errorf(w->errbuf, w->errlen, r, "writing %s: %s", name, strerror(-r));
	return 0;
}

struct buf_arg {
	const char *data;
	size_t len;
};

static int fill_buf(int fd, void *arg)
{
	const struct buf_arg *b = arg;
	return write_all(fd, b->data, b->len);
}

struct shard_arg {
	const char *header; /* padded */
	size_t hlen;
	struct wtensor *t; /* in data order */
	size_t n;
};

static int fill_shard(int fd, void *arg)
{
	const struct shard_arg *s = arg;
	uint8_t len8[8];
	int r;

	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)((uint64_t)s->hlen >> (8 * i));
	if ((r = write_all(fd, len8, 8)) < 0 || (r = write_all(fd, s->header, s->hlen)) < 0)
		return r;
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i].nbytes && (r = write_all(fd, s->t[i].data, s->t[i].nbytes)) < 0)
			return r;
	return 0;
}

struct copy_arg {
	int src;
};

static int fill_copy(int fd, void *arg)
{
	const struct copy_arg *c = arg;
	char *buf = xmalloc(QCKPT_COPY_CHUNK);
	int r = 0;

	for (;;) {
		ssize_t k = read(c->src, buf, QCKPT_COPY_CHUNK);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		if (k == 0)
			break;
		if ((r = write_all(fd, buf, (size_t)k)) < 0)
			break;
	}
	free(buf);
	return r;
}

static int wtensor_cmp(const void *a, const void *b)
{
	const struct wtensor *x = a, *y = b;

	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Writes one shard like the source's `f`, the layers' matrices as records. Adds each record
 * tensor to `qtensors` (the config entry) and every tensor to `weight_map`. */
static int write_shard(const struct writer *w, const struct engine_model *m, const char *tmp,
		       const char *sname, const struct st_file *f, json_t *qtensors, json_t *weight_map,
		       uint64_t *total_size)
{
	struct wtensor *t = xcalloc(f->n_entries ? f->n_entries : 1, sizeof(*t));
	json_t *root = json_object(), *meta = json_object();
	size_t n_q = 0, off = 0, hlen, pad;
	char *hdr = NULL, *padded = NULL;
	int r;

	for (size_t i = 0; i < f->n_entries; i++) {
		const struct st_entry *e = &f->entries[i];
		const struct quant_tensor *q = w->o->layers->find(w->o->layers_arg, e->t.data);

		if (q) {
			t[i] = (struct wtensor){.name = xasprintf("%s%s", e->name, QCKPT_SUFFIX),
						.dtype = st_dtype_name(TENSOR_U8),
						.ndim = 2,
						.shape = {q->rows, (int64_t)q->row_bytes},
						.data = q->data,
						.nbytes = (size_t)q->rows * q->row_bytes};
			json_object_set_new(qtensors, e->name,
					    json_pack("[III]", (json_int_t)q->rows, (json_int_t)q->cols,
						      (json_int_t)q->row_bytes));
			n_q++;
		} else {
			size_t es = st_dtype_size(e->t.dtype);

			t[i] = (struct wtensor){.name = xstrdup(e->name),
						.dtype = st_dtype_name(e->t.dtype),
						.ndim = e->t.ndim,
						.data = e->t.data,
						.nbytes = e->t.nbytes,
						.order = es >= 4 ? 1 :
							 es == 2 ? 2 :
								   3};
			memcpy(t[i].shape, e->t.shape, sizeof(t[i].shape));
			if (!t[i].dtype) {
				r = st_errorf(w->errbuf, w->errlen, -EINVAL,
					      "tensor '%s' of %s has a dtype holo-quantize cannot write",
					      e->name, sname);
				goto out;
			}
		}
	}
	qsort(t, f->n_entries, sizeof(*t), wtensor_cmp);
	json_object_set_new(meta, "format", json_string("pt"));
	json_object_set_new(meta, QCKPT_KEY, json_string(quant_format_desc(w->o->format)->name));
	json_object_set_new(root, "__metadata__", meta);
	for (size_t i = 0; i < f->n_entries; i++) {
		json_t *shape = json_array();

		for (int d = 0; d < t[i].ndim; d++)
			json_array_append_new(shape, json_integer(t[i].shape[d]));
		json_object_set_new(root, t[i].name,
				    json_pack("{s:s, s:o, s:[II]}", "dtype", t[i].dtype, "shape", shape,
					      "data_offsets", (json_int_t)off,
					      (json_int_t)(off + t[i].nbytes)));
		off += t[i].nbytes;
		if (weight_map)
			json_object_set_new(weight_map, t[i].name, json_string(sname));
	}
	*total_size += off;
	hdr = json_dumps(root, JSON_COMPACT);
	if (!hdr) {
		r = st_errorf(w->errbuf, w->errlen, -ENOMEM, "out of memory writing the header of %s", sname);
		goto out;
	}
	hlen = strlen(hdr);
	/* spaces after the JSON put the data section on a QUANT_ALIGN boundary of the file (the
	 * map is page-aligned), so every record tensor, a multiple of QUANT_ALIGN bytes and first
	 * in the data, starts aligned */
	pad = (QUANT_ALIGN - (8 + hlen) % QUANT_ALIGN) % QUANT_ALIGN;
	padded = xmalloc(hlen + pad);
	memcpy(padded, hdr, hlen);
	memset(padded + hlen, ' ', pad);
	struct shard_arg sa = {.header = padded, .hlen = hlen + pad, .t = t, .n = f->n_entries};
	r = write_file(w, tmp, sname, fill_shard, &sa);
	if (r == 0)
		note(w, "wrote %s: %zu matrices as %s records, %zu tensors as stored, %.1f MiB", sname, n_q,
		     quant_format_desc(w->o->format)->name, f->n_entries - n_q,
		     (double)(8 + hlen + pad + off) / (1 << 20));
out:
	for (size_t i = 0; i < f->n_entries; i++)
		free(t[i].name);
	free(t);
	free(hdr);
	free(padded);
	json_decref(root);
	return r;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

static void remove_tree(const char *path)
{
	(void)nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Reads the source's config.json whole (at most MODEL_CONFIG_MAX_BYTES). */
static int read_config(const struct writer *w, const char *dir, char **ret, size_t *ret_len)
{
	char *path = path_join(dir, "config.json"), *buf;
	FILE *fp = fopen(path, "rb");
	size_t n;

	free(path);
	if (!fp)
		return st_errorf(w->errbuf, w->errlen, -errno, "cannot open the source's config.json: %s",
				 strerror(errno));
	buf = xmalloc(MODEL_CONFIG_MAX_BYTES + 1);
	n = fread(buf, 1, MODEL_CONFIG_MAX_BYTES + 1, fp);
	if (ferror(fp) || n > MODEL_CONFIG_MAX_BYTES) {
		fclose(fp);
		free(buf);
		return st_errorf(w->errbuf, w->errlen, -EIO, "cannot read the source's config.json");
	}
	fclose(fp);
	buf[n] = '\0';
	*ret = buf;
	*ret_len = n;
	return 0;
}

/* The source's config.json text with QCKPT_KEY inserted first in its top-level object (the
 * rest byte for byte: Python's Infinity/NaN stay as written). */
static int write_config(const struct writer *w, const char *src, const char *tmp, json_t *qtensors)
{
	json_t *q = json_pack("{s:i, s:s, s:i, s:i, s:O}", "version", QCKPT_VERSION, "format",
			      quant_format_desc(w->o->format)->name, "block", QUANT_BLOCK, "row_align",
			      QUANT_ALIGN, "tensors", qtensors);
	char *text = NULL, *entry = NULL, *out = NULL;
	size_t len = 0, at = 0;
	json_t *check = NULL;
	int r = read_config(w, src, &text, &len);

	if (r < 0)
		goto done;
	while (at < len && strchr(" \t\r\n", text[at]))
		at++;
	if (at == len || text[at] != '{') {
		r = st_errorf(w->errbuf, w->errlen, -EINVAL, "the source's config.json is not a JSON object");
		goto done;
	}
	entry = json_dumps(q, JSON_COMPACT);
	{
		size_t next = at + 1;

		while (next < len && strchr(" \t\r\n", text[next]))
			next++;
		out = xasprintf("%.*s\n  \"%s\": %s%s%s", (int)(at + 1), text, QCKPT_KEY, entry,
				next < len && text[next] == '}' ? "\n" : ",", text + at + 1);
	}
	/* what the loader will read: parsed as it will be */
	r = model_config_load_json(out, strlen(out), &check, w->errbuf, w->errlen);
	if (r < 0)
		goto done;
	struct buf_arg b = {out, strlen(out)};
	r = write_file(w, tmp, "config.json", fill_buf, &b);
done:
	json_decref(check);
	json_decref(q);
	free(text);
	free(entry);
	free(out);
	return r;
}

static bool is_shard(const struct model_files *files, const char *name)
{
	for (size_t i = 0; i < model_files_shard_count(files); i++) {
		const char *s;

		model_files_shard(files, i, &s);
		if (strcmp(s, name) == 0)
			return true;
	}
	return false;
}

/* Whether `name` holds weights in another format (a GGUF, a PyTorch or ONNX file, or a
 * safetensors file the checkpoint's shards do not list): the written checkpoint has its own,
 * and a copy would only double the directory. */
static bool other_weights(const char *name)
{
	static const char *const ext[] = {".gguf", ".bin",	   ".pt", ".pth",    ".ckpt",
					  ".onnx", ".safetensors", ".h5", ".msgpack"};
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);
		if (n > e && strcmp(name + n - e, ext[i]) == 0)
			return true;
	}
	return false;
}

/* Every other regular file of the source (tokenizer, preprocessor and chat template files,
 * the vision code's Python, a README, ...), copied; dot files (a download tool's cache),
 * subdirectories and weights in other formats (other_weights()) are not, and are named in a
 * note. */
static int copy_others(const struct writer *w, const struct model_files *files, const char *src,
		       const char *tmp)
{
	DIR *d = opendir(src);
	struct dirent *de;
	int r = 0;

	if (!d)
		return st_errorf(w->errbuf, w->errlen, -errno, "cannot list %s: %s", src, strerror(errno));
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		struct stat st;
		char *path;

		if (name[0] == '.' || strcmp(name, "config.json") == 0 ||
		    strcmp(name, "model.safetensors.index.json") == 0 || is_shard(files, name))
			continue;
		if (other_weights(name)) {
			note(w, "not copied: %s (weights in another format)", name);
			continue;
		}
		path = path_join(src, name);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
			note(w, "not copied: %s (not a regular file)", name);
			free(path);
			continue;
		}
		struct copy_arg c = {.src = open(path, O_RDONLY | O_CLOEXEC)};
		free(path);
		if (c.src < 0) {
			r = st_errorf(w->errbuf, w->errlen, -errno, "cannot open the source's %s: %s", name,
				      strerror(errno));
			break;
		}
		r = write_file(w, tmp, name, fill_copy, &c);
		close(c.src);
		if (r < 0)
			break;
		note(w, "copied %s", name);
	}
	closedir(d);
	return r;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* 2: not a directory, 1: a non-empty directory, 0: an empty one, -ENOENT: nothing there, else
 * the error. */
static int dir_state(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return 2;
	if (!(d = opendir(path)))
		return -errno;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			r = 1;
			break;
		}
	closedir(d);
	return r;
}

int quantized_checkpoint_write(const struct engine_model *m, const char *out_arg,
			       const struct quantized_write_opts *o, char *errbuf, size_t errlen)
{
	struct writer w = {.o = o, .errbuf = errbuf, .errlen = errlen};
	bool quantized = false;
	char *out = NULL, *parent = NULL, *base, *tmp = NULL, *old = NULL, *rsrc = NULL, *rout = NULL;
	json_t *qtensors = json_object(), *weight_map = NULL;
	const char *src;
	uint64_t total_size = 0;
	size_t len;
	int r, state;

	if (!m || !m->files || !out_arg || !*out_arg || !o || !o->layers ||
	    (o->format != QUANT_Q8 && o->format != QUANT_Q4)) {
		r = st_errorf(errbuf, errlen, -EINVAL,
			      "holo-quantize needs a model loaded from a checkpoint "
			      "directory, an output directory and the format q8 or q4");
		goto out;
	}
	if (model_quant_format(m) >= 0) {
		r = st_errorf(errbuf, errlen, -EINVAL,
			      "the checkpoint is already quantized to %s by "
			      "holo-quantize: quantize its source instead",
			      quant_format_desc((enum quant_format)model_quant_format(m))->name);
		goto out;
	}
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&m->layers[l], mats);

		for (int i = 0; i < n; i++)
			if (mats[i]->dtype != TENSOR_BF16 && mats[i]->dtype != TENSOR_F16 &&
			    mats[i]->dtype != TENSOR_F32) {
				r = st_errorf(errbuf, errlen, -EINVAL,
					      "layer %d's linear layers are not stored in "
					      "bf16, f16 or f32: holo-quantize quantizes plain checkpoints",
					      l);
				goto out;
			}
	}
	if ((r = lm_model_check(m)) < 0) {
		st_errorf(errbuf, errlen, r, "the model's tensors do not match its config");
		goto out;
	}
	src = model_files_dir(m->files);

	/* the output: a new directory beside where it goes, renamed into place at the end */
	out = xstrdup(out_arg);
	for (len = strlen(out); len > 1 && out[len - 1] == '/'; len--)
		out[len - 1] = '\0';
	base = strrchr(out, '/');
	parent = base ? (base == out ? xstrdup("/") : xstrndup(out, (size_t)(base - out))) : xstrdup(".");
	base = base ? base + 1 : out;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		r = st_errorf(errbuf, errlen, -EINVAL, "%s: name a new directory to write to", out_arg);
		goto out;
	}
	rsrc = realpath(src, NULL);
	rout = realpath(out, NULL);
	if (rsrc && rout && strcmp(rsrc, rout) == 0) {
		r = st_errorf(errbuf, errlen, -EINVAL, "%s is the source checkpoint: write elsewhere",
			      out_arg);
		goto out;
	}
	state = dir_state(out);
	if (state == 2) {
		r = st_errorf(errbuf, errlen, -ENOTDIR, "%s exists and is not a directory", out_arg);
		goto out;
	}
	if (state < 0 && state != -ENOENT) {
		r = st_errorf(errbuf, errlen, state, "%s: %s", out_arg, strerror(-state));
		goto out;
	}
	if (state == 1 && !o->force) {
		r = st_errorf(errbuf, errlen, -EEXIST, "%s exists and is not empty (--force replaces it)",
			      out_arg);
		goto out;
	}
	tmp = xasprintf("%s/.%s.holo-quantize-XXXXXX", parent, base);
	if (!mkdtemp(tmp)) {
		r = -errno;
		st_errorf(errbuf, errlen, r, "cannot create a directory in %s: %s", parent, strerror(-r));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	{
		/* mkdtemp's 0700 becomes a directory's usual mode */
		mode_t mask = umask(0);

		umask(mask);
		(void)chmod(tmp, 0777 & ~mask);
	}

	/* the layers quantized by the caller's code (the CPU backend's, on the pool, the map read
	 * once) */
	if ((r = o->layers->quantize(o->layers_arg, m, o->format, o->progress, o->progress_arg, errbuf,
				     errlen)) < 0) {
		if (r == -ENOMEM && errbuf && errlen && !errbuf[0])
			st_errorf(errbuf, errlen, r, "out of memory quantizing the model");
		goto out;
	}
	quantized = true;

	{
		char *ipath = path_join(src, "model.safetensors.index.json");

		if (access(ipath, F_OK) == 0) /* the source is sharded: so is the copy */
			weight_map = json_object();
		free(ipath);
	}
	for (size_t i = 0; i < model_files_shard_count(m->files); i++) {
		const char *sname;
		const struct st_file *f = model_files_shard(m->files, i, &sname);

		if ((r = write_shard(&w, m, tmp, sname, f, qtensors, weight_map, &total_size)) < 0)
			goto out;
	}
	if (weight_map) {
		json_t *idx = json_pack("{s:{s:I}, s:O}", "metadata", "total_size", (json_int_t)total_size,
					"weight_map", weight_map);
		char *text = json_dumps(idx, JSON_INDENT(2) | JSON_SORT_KEYS);
		struct buf_arg b = {text, text ? strlen(text) : 0};

		r = text ? write_file(&w, tmp, "model.safetensors.index.json", fill_buf, &b) :
			   st_errorf(errbuf, errlen, -ENOMEM, "out of memory writing the index");
		free(text);
		json_decref(idx);
		if (r < 0)
			goto out;
	}
	if ((r = write_config(&w, src, tmp, qtensors)) < 0 || (r = copy_others(&w, m->files, src, tmp)) < 0)
		goto out;
	if ((r = fsync_dir(tmp)) < 0) {
		st_errorf(errbuf, errlen, r, "cannot sync %s: %s", tmp, strerror(-r));
		goto out;
	}

	/* into place: an empty `out` is replaced, a full one (--force) moved aside and removed */
	state = dir_state(out);
	if (state == 0 && rmdir(out) < 0) {
		r = -errno;
		st_errorf(errbuf, errlen, r, "cannot replace the empty %s: %s", out_arg, strerror(-r));
		goto out;
	}
	if (state == 1) {
		old = xasprintf("%s/.%s.holo-quantize-old-XXXXXX", parent, base);
		if (!mkdtemp(old) || rmdir(old) < 0 || rename(out, old) < 0) {
			r = -errno;
			st_errorf(errbuf, errlen, r, "cannot move the old %s aside: %s", out_arg,
				  strerror(-r));
			free(old);
			old = NULL;
			goto out;
		}
	}
	if (rename(tmp, out) < 0) {
		r = -errno;
		st_errorf(errbuf, errlen, r, "cannot rename the new checkpoint to %s: %s", out_arg,
			  strerror(-r));
		if (old)
			(void)rename(old, out);
		goto out;
	}
	free(tmp);
	tmp = NULL;
	if (old)
		remove_tree(old);
	(void)fsync_dir(parent);
	r = 0;
out:
	if (tmp)
		remove_tree(tmp);
	if (quantized)
		o->layers->release(o->layers_arg);
	json_decref(qtensors);
	json_decref(weight_map);
	free(out);
	free(parent);
	free(tmp);
	free(old);
	free(rsrc);
	free(rout);
	return r;
}
