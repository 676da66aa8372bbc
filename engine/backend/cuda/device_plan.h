/* device_plan: the CUDA backend's device memory, computed from a model's shapes before anything is
 * allocated (docs/quantization.md "Memory plan"). Pure arithmetic, built with or without CUDA:
 * backend_cuda.c checks a model and its sessions against the device with it (and refuses with
 * device_plan_refusal()'s sentence), holo-bench agent --device-spec --weights plans Holotron-12B
 * on a named card with it, and the tests plan the full 12B from its config.json without a byte
 * of its weights.
 *
 * DESIGN: every figure mirrors what backend_cuda.c allocates, from the same constants (below):
 *   - weights: each tensor of plan_weights() 256-aligned in one block: the linear layers in their
 *     format (quant_row_bytes() per row for q8/q4/fp8, else 2 or 4 bytes an element), the lm_head
 *     in q8/q4 as the layers (a tied one as its own copy) and in bf16/fp32 otherwise (fp8 keeps
 *     it plain, as ModelOpt does; a tied plain head is the embeddings'), the embeddings and the
 *     conv taps in the precision's dtype, vectors in fp32; with fp8 a table of one float per
 *     tensor behind them (the FP8 GEMM's per-tensor scales);
 *   - a session at `context` tokens: each Mamba layer's fp32 conv window and SSM state (fp32, or
 *     bf16 padded to a float), and 2 x attention layers x context x kv_dim KV elements (bf16 in
 *     bf16 precision, else fp32);
 *   - scratch: scratch_layout()'s activation block of DEVICE_PLAN_MAX_ROWS rows (with the SSD
 *     and attention workspaces, the largest matrix's dequantized slice and, for bf16 precision's
 *     FP8 GEMM, e4m3 activations as wide as the widest fp8 matrix) and the batched decode
 *     block of its largest bucket; tests/gpu/test-gpu-plan.c checks both equal the backend's;
 *   - workspace: the cuBLASLt workspace (gpu.h GPU_BLAS_WORKSPACE_BYTES);
 *   - vision: the tower's matrices in the precision's dtype and vectors in fp32 (vision_cuda.c)
 *     and the activation buffers of `tiles` tiles at once;
 *   - reserve: DEVICE_PLAN_RESERVE for what no formula here sees (the decode graphs, the
 *     screenshot's buffers, the driver's per-allocation rounding, fragmentation).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "model.h"

/* backend_cuda.c's bounds (it asserts them against its own use) */
#define DEVICE_PLAN_MAX_RUN 256	   /* CUDA_MAX_RUN: positions of one run (LM_MAX_BATCH) */
#define DEVICE_PLAN_MAX_DECODE 128 /* CUDA_MAX_DECODE: the largest decode bucket */
#define DEVICE_PLAN_MAX_ROWS (DEVICE_PLAN_MAX_DECODE + DEVICE_PLAN_MAX_RUN) /* a pass's rows */
#define DEVICE_PLAN_LOGIT_ROWS 16					    /* CUDA_LOGIT_ROWS */
#define DEVICE_PLAN_DEQUANT_BYTES ((uint64_t)64 << 20)			    /* CUDA_DEQUANT_BYTES */
#define DEVICE_PLAN_ALIGN 256u			   /* every tensor and scratch buffer */
#define DEVICE_PLAN_SEQ_ROW_BYTES 24		   /* sizeof(struct gpu_seq_row) */
#define DEVICE_PLAN_ATTN_SPLIT 256		   /* gpu.h GPU_ATTN_SPLIT */
#define DEVICE_PLAN_ATTN_MAX_SPLITS 64		   /* gpu.h GPU_ATTN_MAX_SPLITS */
#define DEVICE_PLAN_WORKSPACE ((uint64_t)32 << 20) /* gpu.h GPU_BLAS_WORKSPACE_BYTES */
#define DEVICE_PLAN_RESERVE ((uint64_t)512 << 20)

/* The vision tower's shapes (vision_weights' names); tile: pixels of a tile's side; tiles: tiles
 * encoded at once (the checkpoint's max_num_tiles plus the thumbnail). */
struct device_plan_vision {
	int width, depth, mlp, patch, prefix;
	int shuffle, proj_hidden, out_dim;
	int tile, tiles;
};

struct device_plan_args {
	const struct lm_config *lm;
	bool tied;	/* the lm_head is the embeddings' tensor */
	bool conv_bias; /* the Mamba layers have a conv bias */
	/* DEFAULT or BF16: the precision's dtype; Q8, Q4, FP8 */
	enum engine_weights weights;
	enum engine_precision precision;	 /* BF16 or FP32: activations, KV cache, plain matrices */
	enum engine_precision ssm_state;	 /* BF16 or FP32 (DEFAULT: FP32) */
	const struct device_plan_vision *vision; /* NULL: none on the device */
	int sessions, context;			 /* sessions of context tokens each (0 sessions: none) */
};

/* Fills *ret (free 0, sessions_fit 0). -EINVAL for shapes a model cannot have (a dimension < 1
 * where one is needed, context past ENGINE_SESSION_MAX_TOKENS, sessions < 0). */
int device_plan_compute(const struct device_plan_args *a, struct engine_memory_plan *ret);

/* Sets p->free and p->sessions_fit: sessions of p->context tokens that fit in `free` beside the
 * weights, vision, scratch, workspace and reserve (0 when those alone do not fit). Returns
 * whether the plan as computed (its p->sessions) fits. */
bool device_plan_fit(struct engine_memory_plan *p, uint64_t free);

/* One line of the plan: "25.1 GiB of weights (bf16) + 1.6 GiB of vision tower + 1 session of
 * 32768 tokens (0.9 GiB) + 0.4 GiB of scratch and workspace + 0.5 GiB reserve = 28.6 GiB".
 * Returns buf. */
const char *device_plan_describe(const struct engine_memory_plan *p, char *buf, size_t len);

/* The refusal: "<model> in <format> needs <describe>; <device> has <free> GiB free: use
 * --weights q8 or q4" naming the formats in `alternatives` (NULL-terminated plans of the same
 * model, in order) that fit, or "...: fewer sessions or a shorter --context-tokens" when the
 * weights fit without the sessions, or "a larger GPU" when none fits. Returns buf. */
const char *device_plan_refusal(const struct engine_memory_plan *p, const char *model, const char *device,
				const struct engine_memory_plan *const *alternatives, char *buf, size_t len);
