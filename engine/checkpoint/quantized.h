/* engine internal: holod-quantized checkpoints, written by holo-quantize and loaded with no
 * quantizing (docs/quantization.md, "A quantized checkpoint on disk").
 *
 * DESIGN: a holod-quantized checkpoint is a Hugging Face directory like its source, with
 *   - config.json: the source's text with one more top-level key, QCKPT_KEY:
 *       {"version": 1, "format": "q8"|"q4", "block": 32, "row_align": 64,
 *        "tensors": {"<weight name>": [rows, cols, row_bytes], ...}}
 *   - every linear layer's matrix (the LM's in_proj/out_proj, q/k/v/o, up/down), and the
 *     lm_head unless it is tied to the embeddings, as a U8 tensor "<weight name>" QCKPT_SUFFIX of
 *     shape [rows, row_bytes] holding its rows' records exactly as quant.h lays them out in
 *     memory, its data QUANT_ALIGN-aligned in the file;
 *   - every other tensor (embeddings, a tied lm_head's, norms, conv, A, D, dt, the vision
 *     tower) as the source stored it, in the same shards, and every other file copied. A tied
 *     head is the embeddings, read plain by the lookups: the CPU backend quantizes it at load
 *     as a copy.
 * The suffix cannot collide with a Hugging Face name (none ends in ".weight.qweight"), and
 * tools that do not know the key see U8 tensors they cannot use instead of wrong weights.
 *
 * The loader (model_files_open) calls quantized_index_adopt(): it checks the key and each
 * listed record tensor against quant.h's sizes and named limits, and puts in the name index, in
 * place of "<name>.qweight", an entry "<name>" of dtype TENSOR_Q8/TENSOR_Q4 with the weight's
 * logical shape [rows, cols] and data pointing at the records in the map. Everything after the
 * loader sees the matrix under its usual name and shape ([vocab, hidden] for the lm_head); the
 * CPU backend runs the records from the map (lm_prepare: lm_prepared.quant_mapped, head_mapped),
 * the CUDA backend copies them to the device as they are (backend_cuda.c, issue 29). A
 * directory written before the head's records were (the same version, the head plain and not
 * listed) loads: its head is quantized at load as a tied one is.
 *
 * A checkpoint is one of: plain (BF16/F16/F32 weights), NVIDIA ModelOpt FP8 (its
 * hf_quant_config.json or config.json's quantization_config), or holod-quantized (QCKPT_KEY);
 * a config with both QCKPT_KEY and quantization_config is refused.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader.h"
#include "model.h"
#include "quant.h"

#define QCKPT_KEY "holod_quantization"
#define QCKPT_SUFFIX ".qweight"
/* The version this build writes and reads. Version 1 (before 2026-11-30) held q4 as an fp16 d
 * and m per block (5 bits a weight): its q8 checkpoints are read as they are (the same layout),
 * its q4 ones are refused with a sentence (quantize the source again). */
#define QCKPT_VERSION 2
#define QCKPT_VERSION_Q8_SINCE 1

struct json_t;

/* The format a holod-quantized checkpoint's config root declares: 0 and *ret_format, -ENOENT
 * when the config has no QCKPT_KEY, or -EINVAL (unknown version or format, a malformed entry;
 * the sentence names it). */
int quantized_config_format(const struct json_t *root, enum quant_format *ret_format, char *errbuf,
			    size_t errlen);

/* Loader side (see DESIGN): with QCKPT_KEY in `root`, replaces each listed record tensor of the
 * name index (n entries, sorted by name; the caller sorts again after) by an owned entry of
 * dtype TENSOR_Q8/Q4 returned in *ret_entries (*ret_n of them, free each name and the array)
 * and sets *ret_format; without it sets *ret_format = -1. Errors (-EINVAL, -EFBIG) name the
 * tensor: a record tensor missing, not U8 [rows, row_bytes], row_bytes not
 * quant_row_bytes(format, cols), sizes past QUANT_MAX_ROWS/QUANT_MAX_COLS, data not
 * QUANT_ALIGN-aligned, or the weight also present unquantized. */
int quantized_index_adopt(const struct json_t *root, const struct st_entry **index, size_t n,
			  struct st_entry **ret_entries, size_t *ret_n, int *ret_format, char *errbuf,
			  size_t errlen);

/* TENSOR_Q8/TENSOR_Q4 <-> enum quant_format; -1 for any other dtype. */
int quantized_dtype_format(enum tensor_dtype dtype);
enum tensor_dtype quantized_format_dtype(enum quant_format f);

/* -1 for a model whose linear layers are stored plain, else the enum quant_format of a
 * holod-quantized checkpoint's (every layer's matrices are in one format: the loader checks). */
int model_quant_format(const struct engine_model *m);

/* The records of matrix `w` (TENSOR_Q8/Q4) as a quant_tensor pointing into the map. */
void quantized_tensor_view(const struct tensor *w, struct quant_tensor *ret);

/* ---- holo-quantize ------------------------------------------------------------------------- */

/* The quantized copies of a model's linear layers (and of an untied lm_head) that
 * quantized_checkpoint_write() stores: the caller's code makes them (the CPU backend's,
 * lm_quantized_layers() in lm.h), so that this folder stays below the backends.
 * quantize: m's layers in `format`, progress reported as quantized_write_opts says; 0, or a
 * negative errno with one sentence in errbuf where there is one to say. find: the quantized copy
 * of the matrix whose data is `src`, or NULL for a tensor stored as it is. release: frees what
 * quantize made (called once after a quantize that returned 0). */
struct quantized_layers {
	int (*quantize)(void *arg, const struct engine_model *m, enum quant_format format,
			void (*progress)(void *arg, uint64_t done, uint64_t total), void *progress_arg,
			char *errbuf, size_t errlen);
	const struct quant_tensor *(*find)(void *arg, const void *src);
	void (*release)(void *arg);
};

struct quantized_write_opts {
	/* the quantizer and its argument (required) */
	const struct quantized_layers *layers;
	void *layers_arg;
	enum quant_format format;
	bool force; /* replace a non-empty `out` (never the source directory itself) */
	/* quantizing progress: the source bytes of the linear layers done of total */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/* one line per file written or copied (may be NULL) */
	void (*note)(void *arg, const char *line);
	void *note_arg;
};

/* Writes `m` (loaded by engine_model_load() from a plain bf16/f16/f32 checkpoint) to the
 * directory `out` with its linear layers quantized to o->format by o->layers (the CPU backend's
 * lm_prepare on the pool, lm_quantized_layers(); the source read through the map once, never copied), every
 * other tensor as stored and every other regular file of the source copied but weights in other formats
 * (see DESIGN). Writes into a new
 * directory beside `out` and renames it into place, so `out` either appears whole or not at all; every write,
 * fsync and close is checked. Returns 0, -EEXIST (`out` exists and is not an empty directory, without force),
 * -EINVAL (the model is not a plain file checkpoint, `out` is its source, a weight the quantizer refuses),
 * -ENOSPC/-EFBIG/-EIO/-EACCES... (the write's error), -ENOMEM; errbuf says which file or tensor. Nothing is
 * left behind on failure. */
int quantized_checkpoint_write(const struct engine_model *m, const char *out,
			       const struct quantized_write_opts *o, char *errbuf, size_t errlen);
