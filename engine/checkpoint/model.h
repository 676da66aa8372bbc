/* engine internal: the loaded model as the compute code sees it.
 *
 * Written by the loader (loader.c, safetensors.c, config.c), read by the CPU backend (lm_*.c) and
 * later by the CUDA backend. Not a public header: only engine/ sources include it.
 *
 * Ownership: struct engine_model owns the memory maps; every struct tensor's `data` points into a
 * map and stays valid until engine_model_destroy(). Weights are never copied at load time.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

enum tensor_dtype {
	TENSOR_F32,
	TENSOR_F16,
	TENSOR_BF16,
	TENSOR_U8, /* raw bytes: a holod-quantized checkpoint's row records as stored (quantized.c) */
	/* A linear layer's matrix of a holod-quantized checkpoint (docs/quantization.md): shape
	 * [rows, cols] as the weight it stands for, data the rows' records (quant.h) in the map,
	 * nbytes = rows x quant_row_bytes(cols). Only the loader makes them (quantized.c). */
	TENSOR_Q8,
	TENSOR_Q4,
	TENSOR_F8_E4M3, /* float8_e4m3fn: an NVIDIA ModelOpt FP8 linear layer (modelopt.h) */
};

#define TENSOR_MAX_DIMS 4

struct tensor {
	const void *data; /* NULL when the tensor is absent (optional tensors only) */
	enum tensor_dtype dtype;
	int ndim;
	int64_t shape[TENSOR_MAX_DIMS];
	size_t nbytes;
};

enum lm_layer_kind {
	LM_LAYER_MAMBA = 'M',
	LM_LAYER_ATTENTION = '*',
	LM_LAYER_MLP = '-',
};

struct lm_layer {
	enum lm_layer_kind kind;
	struct tensor norm; /* [hidden] pre-norm of the block */
	union {
		struct {
			struct tensor in_proj;	/* [2*d_inner + 2*G*N + H, hidden] */
			struct tensor conv_w;	/* [conv_dim, 1, K] */
			struct tensor conv_b;	/* [conv_dim] (data NULL when use_conv_bias is false) */
			struct tensor dt_bias;	/* [H] */
			struct tensor a_log;	/* [H] */
			struct tensor d;	/* [H] */
			struct tensor norm;	/* [d_inner] gated group RMSNorm weight */
			struct tensor out_proj; /* [hidden, d_inner] */
		} mamba;
		struct {
			struct tensor q, k, v, o; /* [Hq*Dh, hidden], [Hkv*Dh, hidden] x2, [hidden, Hq*Dh] */
		} attn;
		struct {
			struct tensor up, down; /* [inter, hidden], [hidden, inter] */
		} mlp;
	};
	/* NVIDIA ModelOpt FP8 (modelopt.h): for each of the matrices above stored F8_E4M3, in
	 * lm_layer_matrices()' order, its weight_scale (F32, one value or one per row: a weight is
	 * e4m3(code) * scale); data NULL for the matrices stored otherwise */
	struct tensor fp8_scale[4];
};

/* Text config after validation against the tensors (model.md 1.2 and 3). */
struct lm_config {
	int n_layers;
	char pattern[512]; /* one char per layer, NUL-terminated */
	int hidden;
	int vocab;	  /* rows of the embedding (from the tensor shape) */
	int intermediate; /* MLP hidden */
	int n_heads, n_kv_heads, head_dim;
	int m_heads;	      /* H */
	int m_head_dim;	      /* P */
	int m_groups;	      /* G */
	int m_state;	      /* N */
	int m_conv_kernel;    /* K */
	int m_chunk;	      /* SSD chunk size */
	float eps;	      /* every RMSNorm of the LM */
	float dt_min, dt_max; /* time_step_limit (max may be INFINITY) */
	int bos_id, eos_id, pad_id;
};

struct engine_model {
	struct lm_config cfg;
	struct tensor embeddings; /* [vocab, hidden] */
	struct tensor norm_f;	  /* [hidden] */
	struct tensor lm_head;	  /* [vocab, hidden] (== embeddings when tied) */
	struct lm_layer *layers;  /* cfg.n_layers */

	struct engine_tokenizer *tokenizer; /* NULL when the directory has no tokenizer.json */

	/* loader-private: maps, config JSON, names */
	struct model_files *files;
};

/* bf16/f16 -> f32 helpers for compute code. */
static inline float bf16_to_f32(uint16_t v)
{
	union {
		uint32_t u;
		float f;
	} x = {.u = (uint32_t)v << 16};
	return x.f;
}

/* Round-to-nearest-even f32 -> bf16 (NaN kept quiet). */
static inline uint16_t f32_to_bf16(float f)
{
	union {
		uint32_t u;
		float f;
	} x = {.f = f};
	if ((x.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x.u >> 16) | 0x40);
	return (uint16_t)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16);
}

/* f16 -> f32 lives with the CPU kernels: cpu_f16_to_f32() in cpu.h. */
