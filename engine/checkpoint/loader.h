/* engine internal: checkpoint files (safetensors, config.json) as the loader sees them.
 *
 * Not a public header: only engine/ sources and white-box tests include it. The parsers work on
 * memory buffers so the fuzz target (tests/checkpoint/fuzz-safetensors.c) can drive them directly;
 * the file functions map files read-only and hand the maps to the parsers.
 *
 * Errors: int functions return >= 0 or a negative errno (-EINVAL for a malformed or unsupported
 * file, -EFBIG for a named limit, -ENOENT for a missing file, -ENOMEM) and write one sentence to
 * errbuf (which may be NULL when errlen is 0). ret_* out-parameters are written only on success.
 *
 * Threads: everything here is immutable after construction and may be read from any thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* ---- safetensors (safetensors.c) ---------------------------------------------------------- */

/* Limits on what a safetensors file may declare. */
#define ST_MAX_HEADER_BYTES (100u << 20) /* JSON header length */
#define ST_MAX_TENSORS (1u << 20)	 /* entries in one header */
#define ST_MAX_NAME_BYTES 1024u		 /* one tensor name */

struct st_entry {
	const char *name; /* owned by the st_file */
	struct tensor t;  /* t.data points into the buffer the file was parsed from */
	uint64_t begin;	  /* data_offsets, relative to the start of the data section */
	uint64_t end;
};

/* One parsed safetensors file: its entries sorted by name. */
struct st_file {
	struct st_entry *entries;
	size_t n_entries;
	/* the buffer: a read-only map owned by the st_file (st_file_open) or the caller's memory
	 * (st_parse) */
	const uint8_t *base;
	size_t size;
	bool mapped;
};

/* Writes the formatted sentence to errbuf (when errlen > 0) and returns err. */
int st_errorf(char *errbuf, size_t errlen, int err, const char *format, ...)
	__attribute__((format(printf, 4, 5)));
/* Bytes per element (1, 2 or 4); 0 for the loader's TENSOR_Q8/Q4, which have no element size. */
size_t st_dtype_size(enum tensor_dtype dtype);
/* The dtype's name in a safetensors header ("BF16", "U8", ...), NULL for the loader's own. */
const char *st_dtype_name(enum tensor_dtype dtype);

/* Parses the safetensors file held in buf[0..len): 8-byte little-endian header length, JSON
 * header, data. The buffer is not copied: it must outlive the returned st_file. Checks every
 * entry's dtype (BF16/F16/F32/U8/F8_E4M3), shape, data_offsets (inside the data section, no overlap,
 * nbytes == product(shape) * dtype size, aligned to the element size) and rejects duplicate
 * names. `__metadata__` is ignored. */
int st_parse(const void *buf, size_t len, struct st_file **ret, char *errbuf, size_t errlen);
/* Maps `path` read-only and parses it. Messages start with the file's base name. */
int st_file_open(const char *path, struct st_file **ret, char *errbuf, size_t errlen);
/* Accepts NULL and half-built files; unmaps a mapped file. */
void st_file_destroy(struct st_file *f);
/* The entry named `name`, or NULL. */
const struct st_entry *st_file_find(const struct st_file *f, const char *name);

/* ---- config.json (config.c) --------------------------------------------------------------- */

#define MODEL_CONFIG_MAX_BYTES (16u << 20) /* config.json size */
#define MODEL_MAX_LAYERS 511		   /* struct lm_config.pattern holds one char per layer */
#define MODEL_MAX_DIM (1 << 20)		   /* hidden, intermediate, d_inner, conv_dim, ... */
#define MODEL_MAX_HEADS 4096		   /* attention and Mamba heads */
#define MODEL_MAX_KERNEL 64		   /* conv kernel width */
#define MODEL_MAX_CHUNK (1 << 16)	   /* SSD chunk_size */
#define MODEL_MAX_VOCAB (1 << 22)	   /* embedding rows */

/* What config.json says, before it is checked against the tensors. Sizes the config does not
 * give are 0 and are taken from the tensors by the loader. */
struct model_config {
	struct lm_config lm; /* n_layers, pattern, eps, dt limits, token ids always set */
	bool vlm;	     /* NemotronH_Nano_VL_V2 layout: tensors under `language_model.` */
	bool tie_word_embeddings;
	bool use_conv_bias;
	int vocab_size; /* as declared (0 if absent); the embedding rows are what count */
};

struct json_t;

/* Parses JSON text (len bytes, need not be NUL-terminated) as Python's json module does for
 * configs: the bare tokens `Infinity`, `-Infinity` and `NaN` outside strings are accepted and
 * read back by model_config_from_json() as numbers. Duplicate keys are rejected. *ret is a new
 * jansson reference (json_decref it). */
int model_config_load_json(const char *text, size_t len, struct json_t **ret, char *errbuf, size_t errlen);
/* The same for another JSON file of the checkpoint; errors name it `name`. */
int model_json_load(const char *name, const char *text, size_t len, struct json_t **ret, char *errbuf,
		    size_t errlen);
/* Reads a config.json root object: the VLM layout (`llm_config` or `text_config` holding a
 * nemotron_h config) or a bare `nemotron_h` config; field aliases as model.md 1.2. */
int model_config_from_json(const struct json_t *root, struct model_config *ret, char *errbuf, size_t errlen);
/* A number field of a config object (integer, real, or Infinity/-Infinity/NaN as written in
 * the file). Returns 0, -ENOENT when absent, -EINVAL when not a number. */
int model_config_number(const struct json_t *obj, const char *key, double *ret);
/* Both of the above. */
int model_config_parse(const char *text, size_t len, struct model_config *ret, char *errbuf, size_t errlen);

/* ---- checkpoint directory (loader.c) ------------------------------------------------------ */

#define MODEL_INDEX_MAX_BYTES (64u << 20) /* model.safetensors.index.json size */
#define MODEL_MAX_SHARDS 4096

/* The files of one checkpoint directory: config, every safetensors shard, and a name index
 * over all their tensors. Owned by struct engine_model (engine_model.files). */
struct model_files;

/* Opens `dir`: config.json, then model.safetensors.index.json (every tensor must be in the
 * shard the weight_map names) or else model.safetensors. */
int model_files_open(const char *dir, struct model_files **ret, char *errbuf, size_t errlen);
/* Accepts NULL and half-built objects. */
void model_files_destroy(struct model_files *files);
/* Looks a tensor up by its full checkpoint name (e.g. "mlp1.1.weight",
 * "vision_model.radio_model.model.blocks.0.attn.qkv.weight"); the vision path uses this for
 * the tensors the language-model loader does not claim. Returns 0 or -ENOENT. */
int model_files_find(const struct model_files *files, const char *name, struct tensor *ret);
/* The parsed config (valid as long as files). */
const struct model_config *model_files_config(const struct model_files *files);
/* The root object of config.json as a jansson json_t (borrowed, valid as long as files), for
 * the vision path's fields (vision_config, downsample_ratio, norm_mean, ...). Python-JSON
 * Infinity/NaN appear in it as strings; read numbers with model_config_number(). Include
 * <jansson.h> to use it. */
const struct json_t *model_files_config_json(const struct model_files *files);
/* The checkpoint directory as given to model_files_open() (valid as long as files), for the
 * side files other parts read themselves (preprocessor_config.json, tokenizer_config.json). */
const char *model_files_dir(const struct model_files *files);
/* Number of tensors over all shards. */
size_t model_files_count(const struct model_files *files);
/* The safetensors files, in the order they were opened (holo-quantize writes the same shards):
 * their count, and file i with its name in the directory (NULL past the count). */
size_t model_files_shard_count(const struct model_files *files);
const struct st_file *model_files_shard(const struct model_files *files, size_t i, const char **ret_name);
/* Whether [p, p + n) lies inside one of the files' read-only maps (not memory a test built). */
bool model_files_mapped(const struct model_files *files, const void *p, size_t n);
