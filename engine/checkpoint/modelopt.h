/* engine internal: NVIDIA ModelOpt FP8 checkpoints (docs/quantization.md, "fp8").
 *
 * DESIGN: NVIDIA publishes FP8 checkpoints (nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-FP8) as its
 * Model Optimizer exports them to Hugging Face: a plain checkpoint directory in which each
 * quantized linear layer `<name>` has
 *   <name>.weight        F8_E4M3 (float8_e4m3fn) [out, in]
 *   <name>.weight_scale  F32 [] (quant_algo FP8: per tensor) or [out] (FP8_PER_CHANNEL_PER_TOKEN)
 *   <name>.input_scale   F32 [] (FP8's static activation scale; absent with per-token ones)
 * and the weight is e4m3(code) * weight_scale. The rest (embeddings, lm_head, norms, Mamba's
 * conv1d, the vision tower: ModelOpt's exclude_modules) stays bf16. The quantization is declared
 * in hf_quant_config.json, {"producer": {"name": "modelopt", ...}, "quantization": {"quant_algo":
 * "FP8", "kv_cache_quant_algo": null|"FP8", "exclude_modules": [...]}}, and/or in config.json's
 * quantization_config: {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": [...],
 * "kv_cache_scheme": ...} (or the same nested under "quantization"), the two forms vLLM's
 * modelopt.py reads.
 *
 * modelopt_config_read() reads both (they must agree) and refuses any other quantization,
 * naming it: another quant_method (gptq, awq, compressed-tensors, fp8, ...) or another ModelOpt
 * quant_algo (NVFP4, W4A16_AWQ, FP8_PB_WO, MXFP8, ...). Which layers are fp8 is read from the
 * tensors' dtypes, not from exclude_modules (whose wildcards only say what ModelOpt skipped):
 * the loader (loader.c) takes an F8_E4M3 weight only for the language model's linear layers,
 * checks its scales with modelopt_check_scales(), and the CPU backend holds it as quant.h's fp8
 * rows (lm_prepare). The KV cache scales of kv_cache_quant_algo FP8 (`k_proj.k_scale`,
 * `v_proj.v_scale`) are checked and not used: holod's cache keeps its own precision.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

#define MODELOPT_CONFIG_MAX_BYTES (1u << 20) /* hf_quant_config.json */
#define MODELOPT_MAX_EXCLUDES 65536	     /* entries of exclude_modules / ignore */

struct json_t;

struct modelopt_quant {
	bool fp8;	  /* a ModelOpt FP8 checkpoint */
	bool per_channel; /* quant_algo FP8_PER_CHANNEL_PER_TOKEN: weight_scale per output row */
	bool kv_fp8;	  /* kv_cache_quant_algo FP8: k_scale/v_scale tensors may be present */
	char algo[32];	  /* the quant_algo as declared */
};

/* Reads `dir`/hf_quant_config.json (if present) and config.json's quantization_config (root).
 * Neither: *ret = {fp8 false}, 0. Otherwise 0 for ModelOpt's FP8 or FP8_PER_CHANNEL_PER_TOKEN
 * (kv_cache_quant_algo null or FP8), or -EINVAL with one sentence naming what is not supported
 * and what is, -EFBIG for a file past MODELOPT_CONFIG_MAX_BYTES. */
int modelopt_config_read(const char *dir, const struct json_t *config_root, struct modelopt_quant *ret,
			 char *errbuf, size_t errlen);

/* Checks the scales of F8_E4M3 matrix `name` ([rows, cols]): weight_scale present, F32, of
 * shape [] or [1] (per tensor) or [rows] or [rows, 1] (per row), every value
 * quant_fp8_scale_ok(); input_scale (may be NULL) F32 of one element, finite and > 0.
 * 0 or -EINVAL naming the tensor, its shape or the value. */
int modelopt_check_scales(const char *name, const struct tensor *w, const struct tensor *weight_scale,
			  const struct tensor *input_scale, char *errbuf, size_t errlen);

/* A KV cache scale (k_scale / v_scale): F32 of one element, finite and > 0. */
int modelopt_check_kv_scale(const char *name, const struct tensor *t, char *errbuf, size_t errlen);

/* Whether any linear layer of m is stored F8_E4M3 (the loader set its fp8_scale). */
bool model_has_fp8(const struct engine_model *m);

/* The fp8 scale of row r of a matrix whose weight_scale is `ws` (checked as above). */
float modelopt_row_scale(const struct tensor *ws, int64_t r);
