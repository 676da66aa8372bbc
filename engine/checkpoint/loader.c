/* loader: a checkpoint directory -> struct engine_model (model.h).
 *
 * model_files_open() maps every safetensors file and builds one name index over them;
 * engine_model_load() then claims each tensor the config's layer pattern calls for, checking
 * names, shapes and the sizes derived from them (model.md 3), and refuses anything left over
 * except the vision tensors of the VLM layout, which stay reachable through model_files_find().
 * Weights are never copied: struct tensor data points into the maps, which live until
 * engine_model_destroy().
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "dims.h"
#include "engine.h"
#include "loader.h"
#include "modelopt.h"
#include "model.h"
#include "quantized.h"

struct model_files {
	char *dir; /* the checkpoint directory as given */
	struct model_config cfg;
	json_t *config_root;
	struct modelopt_quant modelopt; /* NVIDIA ModelOpt FP8 (modelopt.h), or fp8 false */
	struct st_file **shards;
	char **shard_names;
	size_t n_shards;
	/* every tensor of the checkpoint, sorted by name */
	const struct st_entry **index;
	size_t n_index;
	/* a holod-quantized checkpoint (quantized.h): the index's entries for its matrices'
	 * records, and their enum quant_format (-1: plain) */
	struct st_entry *qentries;
	size_t n_qentries;
	int quant_format;
};

void model_files_destroy(struct model_files *files)
{
	if (!files)
		return;
	for (size_t i = 0; i < files->n_shards; i++) {
		st_file_destroy(files->shards[i]);
		free(files->shard_names[i]);
	}
	free(files->shards);
	free(files->shard_names);
	free(files->index);
	for (size_t i = 0; i < files->n_qentries; i++)
		free((char *)files->qentries[i].name);
	free(files->qentries);
	json_decref(files->config_root);
	free(files->dir);
	free(files);
}

/* Reads a whole small file (at most `limit` bytes) into a NUL-terminated buffer. */
static int read_small_file(const char *dir, const char *name, size_t limit, char **ret, size_t *ret_len,
			   char *errbuf, size_t errlen)
{
	char *path = path_join(dir, name), *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0) {
		r = -errno;
		return st_errorf(errbuf, errlen, r, "%s: cannot open: %s", name, strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		st_errorf(errbuf, errlen, r, "%s: cannot stat: %s", name, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = st_errorf(errbuf, errlen, -EINVAL, "%s: not a regular file", name);
		goto out;
	}
	if ((uint64_t)st.st_size > limit) {
		r = st_errorf(errbuf, errlen, -EFBIG, "%s: %llu bytes, more than the limit of %zu", name,
			      (unsigned long long)st.st_size, limit);
		goto out;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			st_errorf(errbuf, errlen, r, "%s: read error: %s", name, strerror(-r));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	*ret = buf;
	*ret_len = got;
	buf = NULL;
	r = 0;
out:
	free(buf);
	close(fd);
	return r;
}

static bool file_exists(const char *dir, const char *name)
{
	char *path = path_join(dir, name);
	bool ok = access(path, F_OK) == 0;

	free(path);
	return ok;
}

static int index_cmp(const void *a, const void *b)
{
	const struct st_entry *x = *(const struct st_entry *const *)a;
	const struct st_entry *y = *(const struct st_entry *const *)b;
	return strcmp(x->name, y->name);
}

/* Opens a shard by file name (checked to stay inside dir) and appends it. */
static int add_shard(struct model_files *files, const char *dir, const char *name, char *errbuf, size_t errlen)
{
	char *path;
	int r;

	path = path_join(dir, name);
	files->shards = xreallocarray(files->shards, files->n_shards + 1, sizeof(*files->shards));
	files->shard_names =
		xreallocarray(files->shard_names, files->n_shards + 1, sizeof(*files->shard_names));
	r = st_file_open(path, &files->shards[files->n_shards], errbuf, errlen);
	free(path);
	if (r < 0)
		return r;
	files->shard_names[files->n_shards++] = xstrdup(name);
	return 0;
}

static bool shard_name_ok(const char *name)
{
	size_t n = strlen(name), suffix = strlen(".safetensors");

	return n > suffix && n <= 255 && !strchr(name, '/') && name[0] != '.' &&
	       strcmp(name + n - suffix, ".safetensors") == 0;
}

static int open_sharded(struct model_files *files, const char *dir, char *errbuf, size_t errlen)
{
	const char *iname = "model.safetensors.index.json";
	char *text = NULL;
	size_t len, i;
	json_t *root = NULL, *map, *value;
	json_error_t jerr;
	const char *key;
	int r;

	r = read_small_file(dir, iname, MODEL_INDEX_MAX_BYTES, &text, &len, errbuf, errlen);
	if (r < 0)
		return r;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		r = st_errorf(errbuf, errlen, -EINVAL, "%s: malformed JSON at line %d: %s", iname, jerr.line,
			      jerr.text);
		goto out;
	}
	map = json_object_get(root, "weight_map");
	if (!json_is_object(map) || json_object_size(map) == 0) {
		r = st_errorf(errbuf, errlen, -EINVAL, "%s: no 'weight_map' object", iname);
		goto out;
	}
	if (json_object_size(map) > (size_t)ST_MAX_TENSORS * 16) {
		r = st_errorf(errbuf, errlen, -EFBIG, "%s: weight_map lists more than %u tensors", iname,
			      ST_MAX_TENSORS * 16);
		goto out;
	}
	files->index = xcalloc(json_object_size(map), sizeof(*files->index));
	json_object_foreach(map, key, value)
	{
		const struct st_entry *e;
		const char *shard;
		size_t s;

		if (!json_is_string(value) || !shard_name_ok(json_string_value(value))) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "%s: weight_map entry '%.200s' does not name a .safetensors file in "
				      "the directory",
				      iname, key);
			goto out;
		}
		shard = json_string_value(value);
		for (s = 0; s < files->n_shards; s++)
			if (strcmp(files->shard_names[s], shard) == 0)
				break;
		if (s == files->n_shards) {
			if (files->n_shards >= MODEL_MAX_SHARDS) {
				r = st_errorf(errbuf, errlen, -EFBIG, "%s: more than %d shards", iname,
					      MODEL_MAX_SHARDS);
				goto out;
			}
			if (!file_exists(dir, shard)) {
				r = st_errorf(errbuf, errlen, -ENOENT,
					      "%s: shard '%s' (holding '%.200s') is missing", iname, shard,
					      key);
				goto out;
			}
			r = add_shard(files, dir, shard, errbuf, errlen);
			if (r < 0)
				goto out;
		}
		e = st_file_find(files->shards[s], key);
		if (!e) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "%s: tensor '%.200s' is not in shard '%s' where weight_map puts it",
				      iname, key, shard);
			goto out;
		}
		files->index[files->n_index++] = e;
	}
	/* A tensor the map does not list would be invisible to every other reader of the checkpoint. */
	for (i = 0; i < files->n_shards; i++) {
		for (size_t k = 0; k < files->shards[i]->n_entries; k++) {
			const struct st_entry *e = &files->shards[i]->entries[k];
			const json_t *m = json_object_get(map, e->name);

			if (!m || strcmp(json_string_value(m), files->shard_names[i]) != 0) {
				r = st_errorf(errbuf, errlen, -EINVAL,
					      "%s: shard '%s' holds tensor '%s' that weight_map does not "
					      "assign to it",
					      iname, files->shard_names[i], e->name);
				goto out;
			}
		}
	}
	r = 0;
out:
	json_decref(root);
	free(text);
	return r;
}

static int open_single(struct model_files *files, const char *dir, char *errbuf, size_t errlen)
{
	struct st_file *f;
	int r;

	r = add_shard(files, dir, "model.safetensors", errbuf, errlen);
	if (r < 0)
		return r;
	f = files->shards[0];
	files->index = xcalloc(f->n_entries ? f->n_entries : 1, sizeof(*files->index));
	for (size_t i = 0; i < f->n_entries; i++)
		files->index[files->n_index++] = &f->entries[i];
	return 0;
}

static const char checkpoint_expected[] =
	"expected a Hugging Face checkpoint directory holding config.json, model.safetensors "
	"(or model.safetensors.index.json and its shards) and tokenizer.json";

/* A directory that is not a checkpoint at all (a typo, the parent directory, a file) is told
 * apart from a checkpoint with a bad file: the sentence says what a checkpoint holds. */
static int check_checkpoint_dir(const char *dir, char *errbuf, size_t errlen)
{
	const char *expected = checkpoint_expected;
	struct stat st;

	if (stat(dir, &st) < 0) {
		int e = errno;
		return st_errorf(errbuf, errlen, -e, "%s: %s; %s", dir, strerror(e), expected);
	}
	if (!S_ISDIR(st.st_mode))
		return st_errorf(errbuf, errlen, -ENOTDIR, "%s is not a directory; %s", dir, expected);
	bool config = file_exists(dir, "config.json");
	bool weights =
		file_exists(dir, "model.safetensors") || file_exists(dir, "model.safetensors.index.json");
	if (!config && !weights)
		return st_errorf(errbuf, errlen, -ENOENT,
				 "%s is not a model checkpoint: it has neither config.json nor "
				 "safetensors weights; %s",
				 dir, expected);
	if (!config)
		return st_errorf(errbuf, errlen, -ENOENT, "%s has weights but no config.json; %s", dir,
				 expected);
	return 0;
}

int engine_model_check_files(const char *dir, char *errbuf, size_t errlen)
{
	int r = check_checkpoint_dir(dir, errbuf, errlen);
	if (r < 0)
		return r;
	if (!file_exists(dir, "model.safetensors") && !file_exists(dir, "model.safetensors.index.json"))
		return st_errorf(errbuf, errlen, -ENOENT,
				 "%s has config.json but no weights "
				 "(model.safetensors or model.safetensors.index.json); %s",
				 dir, checkpoint_expected);
	if (!file_exists(dir, "tokenizer.json"))
		return st_errorf(errbuf, errlen, -ENOENT, "%s has no tokenizer.json; %s", dir,
				 checkpoint_expected);
	return 0;
}

int model_files_open(const char *dir, struct model_files **ret, char *errbuf, size_t errlen)
{
	struct model_files *files = xcalloc(1, sizeof(*files));
	char *text = NULL;
	size_t len;
	int r;

	files->dir = xstrdup(dir);
	r = check_checkpoint_dir(dir, errbuf, errlen);
	if (r < 0)
		goto out;
	r = read_small_file(dir, "config.json", MODEL_CONFIG_MAX_BYTES, &text, &len, errbuf, errlen);
	if (r < 0)
		goto out;
	r = model_config_load_json(text, len, &files->config_root, errbuf, errlen);
	if (r < 0)
		goto out;
	r = model_config_from_json(files->config_root, &files->cfg, errbuf, errlen);
	if (r < 0)
		goto out;
	r = modelopt_config_read(dir, files->config_root, &files->modelopt, errbuf, errlen);
	if (r < 0)
		goto out;

	if (file_exists(dir, "model.safetensors.index.json"))
		r = open_sharded(files, dir, errbuf, errlen);
	else if (file_exists(dir, "model.safetensors"))
		r = open_single(files, dir, errbuf, errlen);
	else
		r = st_errorf(errbuf, errlen, -ENOENT,
			      "no model.safetensors or model.safetensors.index.json in the model directory");
	if (r < 0)
		goto out;
	qsort(files->index, files->n_index, sizeof(*files->index), index_cmp);
	/* a holod-quantized checkpoint's records stand in for their matrices (quantized.h) */
	r = quantized_index_adopt(files->config_root, files->index, files->n_index, &files->qentries,
				  &files->n_qentries, &files->quant_format, errbuf, errlen);
	if (r < 0)
		goto out;
	qsort(files->index, files->n_index, sizeof(*files->index), index_cmp);
	*ret = files;
	files = NULL;
out:
	free(text);
	model_files_destroy(files);
	return r;
}

/* Position of `name` in the index, or -1. */
static ssize_t index_find(const struct model_files *files, const char *name)
{
	size_t lo = 0, hi = files->n_index;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, files->index[mid]->name);

		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

int model_files_find(const struct model_files *files, const char *name, struct tensor *ret)
{
	ssize_t i;

	if (!files || !name)
		return -EINVAL;
	i = index_find(files, name);
	if (i < 0)
		return -ENOENT;
	*ret = files->index[i]->t;
	return 0;
}

const struct model_config *model_files_config(const struct model_files *files)
{
	return &files->cfg;
}

const json_t *model_files_config_json(const struct model_files *files)
{
	return files->config_root;
}

const char *model_files_dir(const struct model_files *files)
{
	return files->dir;
}

size_t model_files_count(const struct model_files *files)
{
	return files->n_index;
}

size_t model_files_shard_count(const struct model_files *files)
{
	return files->n_shards;
}

const struct st_file *model_files_shard(const struct model_files *files, size_t i, const char **ret_name)
{
	if (i >= files->n_shards)
		return NULL;
	if (ret_name)
		*ret_name = files->shard_names[i];
	return files->shards[i];
}

bool model_files_mapped(const struct model_files *files, const void *p, size_t n)
{
	for (size_t i = 0; files && i < files->n_shards; i++) {
		const struct st_file *f = files->shards[i];
		uintptr_t a = (uintptr_t)f->base, x = (uintptr_t)p;

		if (f->mapped && x >= a && x - a <= f->size && n <= f->size - (x - a))
			return true;
	}
	return false;
}

/* ---- claiming the language model's tensors ------------------------------------------------ */

#define ANY (-1) /* a dimension the loader derives from the tensor */

struct claim {
	const struct model_files *files;
	const char *prefix; /* "language_model." or "" */
	bool *claimed;	    /* per index entry */
	char *errbuf;
	size_t errlen;
};

static void format_shape(char *buf, size_t size, int ndim, const int64_t *shape)
{
	size_t n = 0;

	n += (size_t)snprintf(buf + n, size - n, "[");
	for (int i = 0; i < ndim && n < size; i++) {
		if (shape[i] == ANY)
			n += (size_t)snprintf(buf + n, size - n, "%s?", i ? ", " : "");
		else
			n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
	}
	if (n < size)
		snprintf(buf + n, size - n, "]");
}

/* The linear layers' matrices (lm_layer_matrices) and an untied lm_head: the only tensors a
 * holod-quantized checkpoint holds as records. */
static bool matrix_name(const char *name)
{
	if (strcmp(name, "lm_head.weight") == 0 || strcmp(name, "language_model.lm_head.weight") == 0)
		return true;
	static const char *const suffix[] = {
		".mixer.in_proj.weight", ".mixer.out_proj.weight",  ".mixer.q_proj.weight",
		".mixer.k_proj.weight",	 ".mixer.v_proj.weight",    ".mixer.o_proj.weight",
		".mixer.up_proj.weight", ".mixer.down_proj.weight",
	};
	size_t n = strlen(name);

	if (!strstr(name, "backbone.layers."))
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(suffix); i++)
		if (n > strlen(suffix[i]) && strcmp(name + n - strlen(suffix[i]), suffix[i]) == 0)
			return true;
	return false;
}

/* Claims the tensor named prefix + name (printf-style) and checks its shape against `want`
 * (ndim dimensions, ANY for derived ones). Absent optional tensors leave out->data NULL. */
static int claim_tensor(struct claim *cl, struct tensor *out, bool optional, int ndim, const int64_t *want,
			const char *format, ...) __attribute__((format(printf, 6, 7)));
static int claim_tensor(struct claim *cl, struct tensor *out, bool optional, int ndim, const int64_t *want,
			const char *format, ...)
{
	char name[ST_MAX_NAME_BYTES + 64], have_s[160], want_s[160];
	const struct tensor *t;
	size_t n = (size_t)snprintf(name, sizeof(name), "%s", cl->prefix);
	va_list ap;
	ssize_t i;
	bool match;

	va_start(ap, format);
	vsnprintf(name + n, sizeof(name) - n, format, ap);
	va_end(ap);

	i = index_find(cl->files, name);
	if (i < 0) {
		if (optional) {
			memset(out, 0, sizeof(*out));
			return 0;
		}
		return st_errorf(cl->errbuf, cl->errlen, -EINVAL, "missing tensor '%s'", name);
	}
	t = &cl->files->index[i]->t;
	match = t->ndim == ndim;
	for (int d = 0; match && d < ndim; d++)
		match = want[d] == ANY || want[d] == t->shape[d];
	if (!match) {
		format_shape(have_s, sizeof(have_s), t->ndim, t->shape);
		format_shape(want_s, sizeof(want_s), ndim, want);
		return st_errorf(cl->errbuf, cl->errlen, -EINVAL, "tensor '%s' has shape %s, expected %s",
				 name, have_s, want_s);
	}
	if (quantized_dtype_format(t->dtype) >= 0 && !matrix_name(name))
		return st_errorf(
			cl->errbuf, cl->errlen, -EINVAL,
			"tensor '%s' is quantized, but only the language model's linear layers may be", name);
	cl->claimed[i] = true;
	*out = *t;
	return 0;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define CLAIM(cl, out, optional, shape, ...)                                                                 \
	claim_tensor((cl), (out), (optional), NDIM shape, SHAPE shape, __VA_ARGS__)

static int64_t want(int v)
{
	return v > 0 ? v : ANY;
}

/* Learns the Mamba sizes the config leaves open from layer l, checks the rest (model.md 3). */
static int derive_mamba(struct claim *cl, struct lm_config *c, int l)
{
	struct tensor t;
	int64_t d_in, rows, gn2;
	int r;

	r = CLAIM(cl, &t, false, (want(c->m_heads)), "backbone.layers.%d.mixer.A_log", l);
	if (r < 0)
		return r;
	if (t.shape[0] < 1 || t.shape[0] > MODEL_MAX_HEADS)
		return st_errorf(cl->errbuf, cl->errlen, -EINVAL,
				 "layer %d: %lld Mamba heads (1 to %d supported)", l, (long long)t.shape[0],
				 MODEL_MAX_HEADS);
	c->m_heads = (int)t.shape[0];

	r = CLAIM(cl, &t, false, (c->m_head_dim ? (int64_t)c->m_heads * c->m_head_dim : ANY),
		  "backbone.layers.%d.mixer.norm.weight", l);
	if (r < 0)
		return r;
	d_in = t.shape[0];
	if (d_in < 1 || d_in > MODEL_MAX_DIM || d_in % c->m_heads != 0)
		return st_errorf(
			cl->errbuf, cl->errlen, -EINVAL,
			"layer %d: d_inner %lld (mixer.norm.weight) is not a multiple of the %d Mamba heads",
			l, (long long)d_in, c->m_heads);
	c->m_head_dim = (int)(d_in / c->m_heads);

	r = CLAIM(cl, &t, false, (ANY, c->hidden), "backbone.layers.%d.mixer.in_proj.weight", l);
	if (r < 0)
		return r;
	rows = t.shape[0];
	gn2 = rows - 2 * d_in - c->m_heads;
	if (c->m_groups) {
		int64_t expect = 2 * d_in + 2 * (int64_t)c->m_groups * c->m_state + c->m_heads;

		if (rows != expect)
			return st_errorf(cl->errbuf, cl->errlen, -EINVAL,
					 "layer %d: in_proj has %lld rows but 2*d_inner + 2*n_groups*state + "
					 "heads = %lld",
					 l, (long long)rows, (long long)expect);
	} else {
		if (gn2 <= 0 || gn2 % (2 * c->m_state) != 0)
			return st_errorf(cl->errbuf, cl->errlen, -EINVAL,
					 "layer %d: in_proj rows %lld minus 2*d_inner + heads is not a "
					 "positive multiple of 2*state (%d)",
					 l, (long long)rows, 2 * c->m_state);
		c->m_groups = (int)(gn2 / (2 * c->m_state));
	}
	if (c->m_heads % c->m_groups != 0)
		return st_errorf(cl->errbuf, cl->errlen, -EINVAL,
				 "layer %d: %d Mamba heads do not split into %d groups", l, c->m_heads,
				 c->m_groups);

	r = CLAIM(cl, &t, false, (d_in + 2 * (int64_t)c->m_groups * c->m_state, 1, want(c->m_conv_kernel)),
		  "backbone.layers.%d.mixer.conv1d.weight", l);
	if (r < 0)
		return r;
	if (t.shape[2] < 1 || t.shape[2] > MODEL_MAX_KERNEL)
		return st_errorf(cl->errbuf, cl->errlen, -EINVAL,
				 "layer %d: conv kernel %lld (1 to %d supported)", l, (long long)t.shape[2],
				 MODEL_MAX_KERNEL);
	c->m_conv_kernel = (int)t.shape[2];
	return 0;
}

static int derive_attention(struct claim *cl, struct lm_config *c, int l)
{
	struct tensor t;
	int r;

	r = CLAIM(cl, &t, false, (c->head_dim ? (int64_t)c->n_heads * c->head_dim : ANY, c->hidden),
		  "backbone.layers.%d.mixer.q_proj.weight", l);
	if (r < 0)
		return r;
	if (!c->head_dim) {
		if (t.shape[0] % c->n_heads != 0 || t.shape[0] / c->n_heads > MODEL_MAX_DIM || t.shape[0] == 0)
			return st_errorf(cl->errbuf, cl->errlen, -EINVAL,
					 "layer %d: q_proj rows %lld do not split into %d heads", l,
					 (long long)t.shape[0], c->n_heads);
		c->head_dim = (int)(t.shape[0] / c->n_heads);
	}
	return 0;
}

static int derive_mlp(struct claim *cl, struct lm_config *c, int l)
{
	struct tensor t;
	int r;

	r = CLAIM(cl, &t, false, (want(c->intermediate), c->hidden),
		  "backbone.layers.%d.mixer.up_proj.weight", l);
	if (r < 0)
		return r;
	if (t.shape[0] < 1 || t.shape[0] > MODEL_MAX_DIM)
		return st_errorf(cl->errbuf, cl->errlen, -EINVAL,
				 "layer %d: intermediate size %lld (1 to %d supported)", l,
				 (long long)t.shape[0], MODEL_MAX_DIM);
	c->intermediate = (int)t.shape[0];
	return 0;
}

static int claim_layer(struct claim *cl, const struct lm_config *c, bool conv_bias, int l, struct lm_layer *L)
{
	int64_t d_in = (int64_t)c->m_heads * c->m_head_dim;
	int64_t conv_dim = d_in + 2 * (int64_t)c->m_groups * c->m_state;
	int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
	const char *p = "backbone.layers.";
	int r;

	L->kind = (enum lm_layer_kind)c->pattern[l];
	r = CLAIM(cl, &L->norm, false, (c->hidden), "%s%d.norm.weight", p, l);
	if (r < 0)
		return r;
	switch (L->kind) {
	case LM_LAYER_MAMBA:
		if ((r = CLAIM(cl, &L->mamba.in_proj, false,
			       (2 * d_in + 2 * (int64_t)c->m_groups * c->m_state + c->m_heads, c->hidden),
			       "%s%d.mixer.in_proj.weight", p, l)) < 0 ||
		    (r = CLAIM(cl, &L->mamba.conv_w, false, (conv_dim, 1, c->m_conv_kernel),
			       "%s%d.mixer.conv1d.weight", p, l)) < 0 ||
		    (conv_bias && (r = CLAIM(cl, &L->mamba.conv_b, false, (conv_dim),
					     "%s%d.mixer.conv1d.bias", p, l)) < 0) ||
		    (r = CLAIM(cl, &L->mamba.dt_bias, false, (c->m_heads), "%s%d.mixer.dt_bias", p, l)) < 0 ||
		    (r = CLAIM(cl, &L->mamba.a_log, false, (c->m_heads), "%s%d.mixer.A_log", p, l)) < 0 ||
		    (r = CLAIM(cl, &L->mamba.d, false, (c->m_heads), "%s%d.mixer.D", p, l)) < 0 ||
		    (r = CLAIM(cl, &L->mamba.norm, false, (d_in), "%s%d.mixer.norm.weight", p, l)) < 0 ||
		    (r = CLAIM(cl, &L->mamba.out_proj, false, (c->hidden, d_in), "%s%d.mixer.out_proj.weight",
			       p, l)) < 0)
			return r;
		/* With use_conv_bias false a bias tensor is claimed by nobody and reported as extra;
		 * conv_b stays zeroed (data NULL). */
		break;
	case LM_LAYER_ATTENTION:
		if ((r = CLAIM(cl, &L->attn.q, false, (q, c->hidden), "%s%d.mixer.q_proj.weight", p, l)) < 0 ||
		    (r = CLAIM(cl, &L->attn.k, false, (kv, c->hidden), "%s%d.mixer.k_proj.weight", p, l)) <
			    0 ||
		    (r = CLAIM(cl, &L->attn.v, false, (kv, c->hidden), "%s%d.mixer.v_proj.weight", p, l)) <
			    0 ||
		    (r = CLAIM(cl, &L->attn.o, false, (c->hidden, q), "%s%d.mixer.o_proj.weight", p, l)) < 0)
			return r;
		break;
	case LM_LAYER_MLP:
		if ((r = CLAIM(cl, &L->mlp.up, false, (c->intermediate, c->hidden),
			       "%s%d.mixer.up_proj.weight", p, l)) < 0 ||
		    (r = CLAIM(cl, &L->mlp.down, false, (c->hidden, c->intermediate),
			       "%s%d.mixer.down_proj.weight", p, l)) < 0)
			return r;
		break;
	}
	return 0;
}

/* ---- NVIDIA ModelOpt FP8 (modelopt.h) ---------------------------------------------------- */

/* the linear layers' matrices, in lm_layer_matrices()' order per kind */
static const char *const fp8_mamba[] = {"in_proj", "out_proj"};
static const char *const fp8_attn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
static const char *const fp8_mlp[] = {"up_proj", "down_proj"};

/* Whether `name` is a layer's linear matrix, the one place an F8_E4M3 tensor may be. */
static bool fp8_matrix_name(const char *name)
{
	static const char *const all[] = {"in_proj", "out_proj", "q_proj",  "k_proj",
					  "v_proj",  "o_proj",	 "up_proj", "down_proj"};
	const char *p = strstr(name, "backbone.layers.");
	if (!p)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		char want[32];
		size_t n = strlen(name), k = (size_t)snprintf(want, sizeof(want), ".mixer.%s.weight", all[i]);
		if (n > k && strcmp(name + n - k, want) == 0)
			return true;
	}
	return false;
}

/* Claims prefix + name whatever its shape (the caller checks it); absent: data NULL. */
static void claim_any(struct claim *cl, struct tensor *out, const char *name)
{
	char full[ST_MAX_NAME_BYTES + 64];
	snprintf(full, sizeof(full), "%s%s", cl->prefix, name);
	ssize_t i = index_find(cl->files, full);
	memset(out, 0, sizeof(*out));
	if (i < 0)
		return;
	cl->claimed[i] = true;
	*out = cl->files->index[i]->t;
}

/* Layer l's F8_E4M3 matrices: the checkpoint must declare ModelOpt FP8, their weight_scale and
 * input_scale are claimed and checked (modelopt_check_scales), the weight_scale kept in
 * L->fp8_scale[i]; with an FP8 KV cache, the attention's k_scale/v_scale checked. */
static int claim_fp8_layer(struct claim *cl, const struct modelopt_quant *mq, int l, struct lm_layer *L)
{
	const char *const *names = L->kind == LM_LAYER_MAMBA	 ? fp8_mamba :
				   L->kind == LM_LAYER_ATTENTION ? fp8_attn :
								   fp8_mlp;
	const struct tensor *mats[4] = {0};
	int n = 0;
	switch (L->kind) {
	case LM_LAYER_MAMBA:
		mats[n++] = &L->mamba.in_proj, mats[n++] = &L->mamba.out_proj;
		break;
	case LM_LAYER_ATTENTION:
		mats[n++] = &L->attn.q, mats[n++] = &L->attn.k, mats[n++] = &L->attn.v,
		mats[n++] = &L->attn.o;
		break;
	case LM_LAYER_MLP:
		mats[n++] = &L->mlp.up, mats[n++] = &L->mlp.down;
		break;
	}
	for (int i = 0; i < n; i++) {
		char name[ST_MAX_NAME_BYTES], full[ST_MAX_NAME_BYTES + 64];
		struct tensor is;
		snprintf(name, sizeof(name), "backbone.layers.%d.mixer.%s", l, names[i]);
		snprintf(full, sizeof(full), "%s%s.weight", cl->prefix, name);
		if (mats[i]->dtype != TENSOR_F8_E4M3)
			continue;
		if (!mq->fp8)
			return st_errorf(
				cl->errbuf, cl->errlen, -EINVAL,
				"tensor '%s' is F8_E4M3, but the checkpoint declares no FP8 quantization "
				"(NVIDIA ModelOpt's hf_quant_config.json or config.json's "
				"quantization_config)",
				full);
		claim_any(cl, &L->fp8_scale[i], strcat(strcpy(full, name), ".weight_scale"));
		claim_any(cl, &is, strcat(strcpy(full, name), ".input_scale"));
		snprintf(full, sizeof(full), "%s%s.weight", cl->prefix, name);
		int r = modelopt_check_scales(full, mats[i], &L->fp8_scale[i], &is, cl->errbuf, cl->errlen);
		if (r < 0)
			return r;
	}
	for (int i = 0; mq->kv_fp8 && L->kind == LM_LAYER_ATTENTION && i < 2; i++) {
		char name[ST_MAX_NAME_BYTES];
		struct tensor t;
		snprintf(name, sizeof(name), "backbone.layers.%d.mixer.%s", l,
			 i ? "v_proj.v_scale" : "k_proj.k_scale");
		claim_any(cl, &t, name);
		if (t.data) {
			int r = modelopt_check_kv_scale(name, &t, cl->errbuf, cl->errlen);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* No F8_E4M3 tensor outside the linear layers: the embeddings, lm_head, norms, conv and the
 * vision tower are read in bf16/f16/f32 only (ModelOpt leaves them so). */
static int check_fp8_elsewhere(const struct model_files *files, char *errbuf, size_t errlen)
{
	for (size_t i = 0; i < files->n_index; i++) {
		const struct st_entry *e = files->index[i];
		if (e->t.dtype == TENSOR_F8_E4M3 && !fp8_matrix_name(e->name))
			return st_errorf(
				errbuf, errlen, -EINVAL,
				"tensor '%s' is F8_E4M3: holod reads fp8 weights only in the language "
				"model's linear layers (in_proj, out_proj, q/k/v/o_proj, up/down_proj)",
				e->name);
	}
	return 0;
}

/* Tensors of the VLM that are not the language model's: the vision path finds them by name. */
static bool vision_tensor(const char *name)
{
	return strncmp(name, "vision_model.", 13) == 0 || strncmp(name, "mlp1.", 5) == 0;
}

/* A holod-quantized checkpoint holds every linear layer's matrix in its one format (the CPU
 * backend runs them all on its records); a plain one none. */
static int check_quantized_layers(const struct model_files *files, const struct lm_config *c,
				  const struct lm_layer *layers, char *errbuf, size_t errlen)
{
	for (int l = 0; files->quant_format >= 0 && l < c->n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&layers[l], mats);

		for (int i = 0; i < n; i++)
			if (quantized_dtype_format(mats[i]->dtype) != files->quant_format)
				return st_errorf(errbuf, errlen, -EINVAL,
						 "layer %d's matrix %d is stored plain, but config.json's %s "
						 "lists every linear layer of a holod-quantized checkpoint",
						 l, i, QCKPT_KEY);
	}
	return 0;
}

static int load_lm(struct engine_model *m, char *errbuf, size_t errlen)
{
	const struct model_config *mc = model_files_config(m->files);
	struct lm_config c = mc->lm;
	struct claim cl = {
		.files = m->files,
		.prefix = mc->vlm ? "language_model." : "",
		.errbuf = errbuf,
		.errlen = errlen,
	};
	struct tensor lm_head;
	int r;

	cl.claimed = xcalloc(m->files->n_index ? m->files->n_index : 1, sizeof(*cl.claimed));

	r = CLAIM(&cl, &m->embeddings, false, (ANY, c.hidden), "backbone.embeddings.weight");
	if (r < 0)
		goto out;
	if (m->embeddings.shape[0] < 1 || m->embeddings.shape[0] > MODEL_MAX_VOCAB) {
		r = st_errorf(errbuf, errlen, -EINVAL, "the embedding has %lld rows (1 to %d supported)",
			      (long long)m->embeddings.shape[0], MODEL_MAX_VOCAB);
		goto out;
	}
	c.vocab = (int)m->embeddings.shape[0];

	/* Sizes the config leaves open come from the first layer of each kind. */
	for (int l = 0; l < c.n_layers; l++) {
		if (c.pattern[l] == 'M' && strchr(c.pattern, 'M') == c.pattern + l)
			r = derive_mamba(&cl, &c, l);
		else if (c.pattern[l] == '*' && strchr(c.pattern, '*') == c.pattern + l)
			r = derive_attention(&cl, &c, l);
		else if (c.pattern[l] == '-' && strchr(c.pattern, '-') == c.pattern + l)
			r = derive_mlp(&cl, &c, l);
		if (r < 0)
			goto out;
	}

	m->layers = xcalloc((size_t)c.n_layers, sizeof(*m->layers));
	for (int l = 0; l < c.n_layers; l++) {
		r = claim_layer(&cl, &c, mc->use_conv_bias, l, &m->layers[l]);
		if (r < 0)
			goto out;
	}
	/* NVIDIA ModelOpt FP8: the scales of every F8_E4M3 matrix, and no F8_E4M3 elsewhere */
	for (int l = 0; l < c.n_layers; l++) {
		r = claim_fp8_layer(&cl, &m->files->modelopt, l, &m->layers[l]);
		if (r < 0)
			goto out;
	}
	r = check_fp8_elsewhere(m->files, errbuf, errlen);
	if (r < 0)
		goto out;
	r = CLAIM(&cl, &m->norm_f, false, (c.hidden), "backbone.norm_f.weight");
	if (r < 0)
		goto out;
	/* A tied checkpoint may still carry a copy of the head; it must fit, and the embedding is
	 * what the model uses. */
	r = CLAIM(&cl, &lm_head, mc->tie_word_embeddings, (c.vocab, c.hidden), "lm_head.weight");
	if (r < 0)
		goto out;
	if (mc->tie_word_embeddings && quantized_dtype_format(lm_head.dtype) >= 0) {
		r = st_errorf(
			errbuf, errlen, -EINVAL,
			"tensor '%slm_head.weight' is quantized, but config.json ties the lm_head to the "
			"embeddings (holo-quantize writes no records for a tied head)",
			cl.prefix);
		goto out;
	}
	m->lm_head = mc->tie_word_embeddings ? m->embeddings : lm_head;

	for (size_t i = 0; i < m->files->n_index; i++) {
		const char *name = m->files->index[i]->name;

		if (cl.claimed[i] || (mc->vlm && vision_tensor(name) &&
				      quantized_dtype_format(m->files->index[i]->t.dtype) < 0))
			continue;
		r = st_errorf(errbuf, errlen, -EINVAL,
			      "unexpected tensor '%s' (not part of a %d-layer '%s' model)", name, c.n_layers,
			      c.pattern);
		goto out;
	}
	r = check_quantized_layers(m->files, &c, m->layers, errbuf, errlen);
	if (r < 0)
		goto out;

	if (c.bos_id >= c.vocab || c.eos_id >= c.vocab || c.pad_id >= c.vocab) {
		r = st_errorf(
			errbuf, errlen, -EINVAL,
			"config.json: token ids bos %d / eos %d / pad %d do not fit the %d embedding rows",
			c.bos_id, c.eos_id, c.pad_id, c.vocab);
		goto out;
	}
	m->cfg = c;
	r = 0;
out:
	free(cl.claimed);
	return r;
}

void engine_model_destroy(struct engine_model *model)
{
	if (!model)
		return;
	engine_tokenizer_destroy(model->tokenizer);
	free(model->layers);
	model_files_destroy(model->files);
	free(model);
}

struct engine_model *engine_model_load(const char *dir, char *errbuf, size_t errlen)
{
	struct engine_model *m = xcalloc(1, sizeof(*m));
	char *tpath = NULL;
	int r;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!dir) {
		r = st_errorf(errbuf, errlen, -EINVAL, "no model directory given");
		goto fail;
	}
	r = model_files_open(dir, &m->files, errbuf, errlen);
	if (r < 0)
		goto fail;
	r = load_lm(m, errbuf, errlen);
	if (r < 0)
		goto fail;

	if (file_exists(dir, "tokenizer.json")) {
		size_t n;

		tpath = path_join(dir, "tokenizer.json");
		m->tokenizer = engine_tokenizer_load(tpath, errbuf, errlen);
		if (!m->tokenizer) {
			r = errno > 0 ? -errno : -EINVAL;
			goto fail;
		}
		n = engine_tokenizer_vocab_size(m->tokenizer);
		if (n > (size_t)m->cfg.vocab) {
			r = st_errorf(errbuf, errlen, -EINVAL,
				      "tokenizer.json has %zu ids but the embedding only %d rows", n,
				      m->cfg.vocab);
			goto fail;
		}
	}
	free(tpath);
	return m;
fail:
	free(tpath);
	engine_model_destroy(m);
	errno = -r;
	return NULL;
}

static void count_tensor(const struct tensor *t, struct engine_model_info *info)
{
	if (t->data && quantized_dtype_format(t->dtype) >= 0) {
		/* a holod-quantized matrix: its weights, and the bytes of its records */
		info->n_params += (uint64_t)t->shape[0] * (uint64_t)t->shape[1];
		info->weight_bytes += t->nbytes;
		return;
	}
	if (!t->data || st_dtype_size(t->dtype) == 0)
		return;
	info->n_params += t->nbytes / st_dtype_size(t->dtype);
	info->weight_bytes += t->nbytes;
}

/* Works on any struct engine_model (also ones built in memory by tests): it reads only
 * model.h's fields. */
int engine_model_get_info(const struct engine_model *model, struct engine_model_info *ret)
{
	const struct lm_config *c;
	struct engine_model_info info = {0};

	if (!model || !ret)
		return -EINVAL;
	c = &model->cfg;
	info.n_layers = c->n_layers;
	info.hidden = c->hidden;
	info.vocab = c->vocab;
	info.eos_id = c->eos_id;
	count_tensor(&model->embeddings, &info);
	count_tensor(&model->norm_f, &info);
	info.tied_embeddings = model->lm_head.data == model->embeddings.data;
	if (!info.tied_embeddings)
		count_tensor(&model->lm_head, &info);
	for (int l = 0; model->layers && l < c->n_layers; l++) {
		const struct lm_layer *L = &model->layers[l];

		count_tensor(&L->norm, &info);
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			info.n_mamba++;
			count_tensor(&L->mamba.in_proj, &info);
			count_tensor(&L->mamba.conv_w, &info);
			count_tensor(&L->mamba.conv_b, &info);
			count_tensor(&L->mamba.dt_bias, &info);
			count_tensor(&L->mamba.a_log, &info);
			count_tensor(&L->mamba.d, &info);
			count_tensor(&L->mamba.norm, &info);
			count_tensor(&L->mamba.out_proj, &info);
			break;
		case LM_LAYER_ATTENTION:
			info.n_attention++;
			count_tensor(&L->attn.q, &info);
			count_tensor(&L->attn.k, &info);
			count_tensor(&L->attn.v, &info);
			count_tensor(&L->attn.o, &info);
			break;
		case LM_LAYER_MLP:
			info.n_mlp++;
			count_tensor(&L->mlp.up, &info);
			count_tensor(&L->mlp.down, &info);
			break;
		}
	}
	info.vlm = model->files && model_files_config(model->files)->vlm;
	snprintf(info.pattern, sizeof(info.pattern), "%s", c->pattern);
	*ret = info;
	return 0;
}

struct engine_tokenizer *engine_model_tokenizer(const struct engine_model *model)
{
	return model ? model->tokenizer : NULL;
}
