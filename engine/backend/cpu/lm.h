/* engine internal: the CPU language-model forward pass and the sequence state it updates.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 * backend_cpu.c owns struct lm_seq (allocation, copy, accounting); lm_forward.c runs the layers
 * over it, for several sequences at once. Everything a forward call can fail on (allocation)
 * happens in lm_seq_prepare() and lm_batch_prepare() before any state changes, so a failed
 * append leaves the sequence as it was.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cpu_dnnl.h"
#include "dims.h"
#include "engine.h"
#include "model.h"
#include "quant.h"

struct lm_layer_state {
	float *conv; /* Mamba: [K-1][conv_dim] raw (pre-conv) xBC of the last K-1 positions, oldest first */
	float *ssm;  /* Mamba: [H][P][N] fp32, or NULL when the state is stored in bf16: */
	uint16_t *ssm16; /* Mamba: [H][P][N] bf16 (the backend's ssm_state BF16), else NULL */
	float *k, *v;	 /* attention: [kv_cap][Hkv*Dh] */
};

/* What the CPU backend prepares once from the model's small tensors, so that no forward call
 * converts a weight: every norm weight, the Mamba layers' conv taps transposed to
 * [K][conv_dim], conv bias (zeros without one), dt_bias, A = -exp(A_log), D and the gated norm
 * weight, all fp32. The matrices are read from their copies in 2 MiB pages (held[] below), from
 * the model's tensors as they are (cpu_matmul), or from their quantized copies (q[] below). */
struct lm_prepared_layer {
	float *norm;		 /* [hidden] */
	float *conv_wt, *conv_b; /* Mamba: [K][conv_dim], [conv_dim] */
	float *dt_bias, *a, *d;	 /* Mamba: [H] */
	float *gnorm;		 /* Mamba: [d_in] */
	/* bf16 precision: the layer's matrices prepared for oneDNN (cpu_dnnl.h), in the order
	 * in_proj, out_proj | q, k, v, o | up, down; NULL in fp32 */
	struct cpu_dnnl_weight *gemm[4];
	/* quantized weights (lm_prepared.quant): the same matrices in that format (data owned,
	 * QUANT_ALIGN-aligned), which the forward reads instead of the map; gemm[] is then NULL */
	struct quant_tensor q[4];
	/* the matrices not quantized, bf16 or f16, that lie in the files' map: copied into 2 MiB
	 * pages (alloc_huge; data owned) and their source pages released (lm_prepared.held_bytes),
	 * in the same order; the forward, and gemm[] made from them, read these in place of the
	 * model's tensors. data NULL where the model's tensor is read: quantized, f32, not in the
	 * map (a random model's or a test's, already in memory of their own), map_weights, or its
	 * copy could not be allocated (lm_prepared.held_failed) */
	struct tensor held[4];
};
/* Time per operation of the forward calls while `on` (the CPU backend's profile): summed
 * over every session of the backend, in ns. */
enum lm_op {
	LM_OP_GEMM,	 /* the matrix products (lm_head included) */
	LM_OP_SSM,	 /* the Mamba scan (chunked or recurrent); a bf16 decode step's whole mixer job
			  * (lm_forward.c mixer_task: conv, dt, scan and gated norm) */
	LM_OP_CONV,	 /* conv1d + SiLU and dt's softplus (outside the decode mixer job) */
	LM_OP_ATTENTION, /* scores, softmax and the weighted sum */
	LM_OP_NORM,	 /* RMSNorms and the gated norm (outside the decode mixer job) */
	LM_OP_OTHER,	 /* embeddings, ReLU^2 */
	LM_OP_COUNT,
};
struct lm_profile {
	_Atomic bool on;
	_Atomic uint64_t ns[LM_OP_COUNT];
	_Atomic uint64_t flop[LM_OP_COUNT]; /* of the matrix products: 2 T in out each */
};
const char *lm_op_name(enum lm_op op);

struct lm_prepared {
	struct lm_profile *prof; /* the backend's, written by forward calls */
	float *norm_f;		 /* [hidden] */
	struct lm_prepared_layer *layers;
	int n_layers;
	bool bf16;			 /* activations rounded to bf16 at every matrix product */
	struct cpu_dnnl_weight *lm_head; /* bf16: always plain (head_held or the model's, in place) */
	uint64_t gemm_bytes;		 /* what the prepared matrices allocated */
	/* The layers' matrices quantized (lm_prepared_layer.q, docs/quantization.md): decode rows
	 * (runs of fewer than LM_QUANT_GEMV_MAX_T positions) and the merged decode rows of a batch run on
	 * cpu_gemv_quant_rows() (fp32 precision) or cpu_gemv_quant_rows_i8() (bf16: int8
	 * activations); longer runs in bf16 precision are one oneDNN bf16 product per matrix whose
	 * pool tasks each dequantize LM_QUANT_PREFILL_BLOCK_BYTES of rows to bf16 and multiply them
	 * from their cache (cpu_dnnl_matmul_bf16_fill), in fp32 precision LM_QUANT_PREFILL_BYTES of
	 * rows to fp32 for cpu_matmul() (the same exact weights, the sums in another order), in bf16
	 * without oneDNN's bf16 products (AVX2 alone) that many bytes of rows rounded to bf16 for
	 * cpu_matmul(). The merged decode rows never take AMX or oneDNN, so a batch's rows
	 * are bit for bit those of each sequence alone in either precision. */
	bool quant;
	int quant_format; /* enum quant_format */
	/* the lm_head quantized, else data NULL: in the layers' format with --weights q8|q4
	 * (counted in quant_bytes, its source's pages released unless tied to the embeddings), or
	 * as a tool's hooks ask (lm_quant_hooks.head, not counted); the logits products run on it
	 * as on the layers' quantized matrices, and no oneDNN weight is made for the head */
	struct quant_tensor head_q;
	/* head_q is a holod-quantized checkpoint's lm_head records in the map (quantized.h: an
	 * untied head), checked and run as they are (nothing quantized, copied or freed) */
	bool head_mapped;
	uint64_t quant_bytes;	     /* of every lm_prepared_layer.q */
	uint64_t quant_source_bytes; /* the map's bytes they replace */
	/* a holod-quantized checkpoint (quantized.h): lm_prepared_layer.q are its records in the
	 * map, checked and run as they are (nothing quantized, nothing copied, nothing freed) */
	bool quant_mapped;
	/* The bf16 (or f16) matrices read as stored (not quantized) are copied out of the files'
	 * map into 2 MiB pages (lm_prepared_layer.held, head_held), whose pages the map's 4 KiB
	 * ones are not: decode streams every matrix once per token, and a 4 KiB-page stream takes
	 * a TLB miss every 4 KiB and stops the prefetchers at each page (the same GEMV over a bf16
	 * matrix read 19 GB/s from 4 KiB pages, 28-30 GB/s from 2 MiB ones, AMD EPYC). The copy
	 * runs on the pool, a matrix at a time, each matrix's source pages released as it is done
	 * (MADV_DONTNEED, as the quantized path's), so the load never holds much more than the
	 * weights once. The lm_head as the layers' matrices, unless it is tied to the embeddings
	 * (then it stays in the map, read by every token's lookup too). oneDNN's weights are made
	 * from the copies: its plain layout reads them, a reordered one (CPU_DNNL_REORDERED) is
	 * its own copy made from them, beside which the decode GEMV and the AMX rows read them.
	 * Another backend of the same model (only tests make one beside a CPU backend: holod
	 * destroys a model's backend before it makes the next) reads released pages again from
	 * the file, correct but slower; o->progress reports the copies as they go. */
	struct tensor head_held;
	uint64_t held_bytes;	    /* of every held copy, in whole 2 MiB pages (alloc_huge_bytes) */
	uint64_t held_source_bytes; /* the map's bytes they replace (equal: the same dtype) */
	int held_failed;	    /* matrices left in the map: their copy could not be allocated */
	uint64_t held_ns;	    /* the copies' time */
};
/* Bytes of rows dequantized (fp32, or bf16 off oneDNN's bf16 path) per cpu_matmul() call of a
 * longer run's product on quantized weights (at least 16 rows): an L2-sized block, dequantized once per
 * product and read by every row of the run from cache, so the prefill costs one extra pass over the weights
 * per product on top of cpu_matmul()'s fp32 product (the fp32 path's speed, not bf16's oneDNN). */
#define LM_QUANT_PREFILL_BYTES ((size_t)2 << 20)
/* bf16 precision's longer runs on quantized weights (lm_forward.c quant_matmul_bf16): the bf16
 * bytes of rows one pool task dequantizes and multiplies by every token while they are in its
 * core's L2 (cpu_dnnl_matmul_bf16_fill; a multiple of 32 rows, at least 32). One oneDNN product
 * per matrix whose blocks are dequantized once each: q8's prefill went from 0.83x to 0.97x
 * bf16's, q4's from 0.77x to 1.05x (128 tokens, the same rounds; docs/benchmarks.md, "blocks
 * dequantized into L2", and "Figures behind the code's constants" for the block size), where
 * 32 MiB dequantized to memory before one product over all of it left them. */
#define LM_QUANT_PREFILL_BLOCK_BYTES ((size_t)256 << 10)
/* Runs of fewer positions than this on quantized weights take the GEMV (as decode rows do)
 * rather than a dequantized block product: below it, dequantizing every weight per product
 * (to fp32, or to bf16 for oneDNN, whose own floor is CPU_DNNL_MIN_T) costs more than the
 * GEMV's passes over each cached block (~0.7B q4 model, an 8-token run, AMD EPYC: the fp32
 * dequantization alone was a third of a 96-token decode run's time). */
#define LM_QUANT_GEMV_MAX_T 16

/* What a tool changes in lm_prepare() (holo-bench quant-error measures GGML's formats and a
 * quantized lm_head through the forward users run; a test the matrices read from the map);
 * the backend passes none. */
struct lm_quant_hooks {
	/* NULL, or the quantizer of every quantized row in place of the reference ones, called
	 * on the pool's threads with `arg`: as quant_row_from_f32() it writes one record of format
	 * f (every byte) and returns 0, -EINVAL or -ERANGE (bf16 and f16 weights are widened to
	 * fp32 first) */
	int (*quantize_row)(void *arg, enum quant_format f, const float *w, int64_t cols, void *row);
	void *arg;
	/* -1, or the enum quant_format the lm_head is quantized to (lm_prepared.head_q; a tied
	 * lm_head as a copy, the embeddings stay as stored). Not counted in the backend's
	 * weight_bytes: the map's lm_head stays mapped */
	int head;
	/* lm_prepare_opts.map_weights: the matrices read from the map, none copied */
	bool map_weights;
};

/* What lm_prepare() does beyond the small tensors. */
struct lm_prepare_opts {
	bool bf16; /* bf16 precision: oneDNN's matrices in `layout` */
	enum cpu_dnnl_layout layout;
	int quant; /* -1, or the enum quant_format the matrices are held in */
	/* quantization progress: source bytes done of total (the last call has done == total) */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	const struct lm_quant_hooks *hooks; /* NULL: none */
	/* the matrices read in place from the files' map (4 KiB pages), none copied
	 * (lm_prepared.head_held): the layout before the copies, for tools and tests */
	bool map_weights;
};
/* Fills *ret for a model that passed lm_model_check(); in bf16 precision also prepares the
 * matrices for oneDNN in `layout`, and with o->quant quantizes them on the pool's threads (the
 * map read once, nothing else of it held), else copies the bf16/f16 ones in the files' map into
 * 2 MiB pages on the pool's threads (lm_prepared.head_held; not with o->map_weights; a copy
 * that cannot be allocated leaves its matrix in the map and is counted, never an error). Returns 0, -ENOMEM,
 * -ENOTSUP (no oneDNN matmul on this CPU) or the quantizer's -EINVAL (a NaN or infinite weight) / -ERANGE
 * (|w| past QUANT_MAX_ABS), with the tensor named in err. */
int lm_prepare(const struct engine_model *m, const struct lm_prepare_opts *o, struct lm_prepared *ret,
	       char *err, size_t errlen);
/* The CPU backend's decode layout: the quantized matrices in a format with tiles (quant.h: q4)
 * tiled, the map's records copied as they are tiled (their pages released, every matrix owned
 * from then on: quant_mapped and head_mapped false). Call after lm_prepare() where the GEMV has
 * tile kernels (cpu_gemv_quant_tiles()); holo-quantize writes records, so it never does. 0, or
 * -ENOMEM with nothing changed. */
int lm_prepared_tile(const struct engine_model *m, struct lm_prepared *p);
/* Accepts a zeroed struct. */
void lm_prepared_finish(struct lm_prepared *p);
/* holo-quantize's quantizer (lm_quantize.c): quantized_checkpoint_write()'s o->layers, with a
 * zeroed struct lm_quantized as o->layers_arg, quantizes through lm_prepare() and hands the
 * writer the quantized matrices (quantized.h's struct quantized_layers). */
struct lm_quantized {
	const struct engine_model *m;
	struct lm_prepared prep;
};
struct quantized_layers;
const struct quantized_layers *lm_quantized_layers(void);
/* An fp8 matrix (lm_fp8.c): w F8_E4M3 with its weight_scale `scale` (modelopt.h) into q as
 * format f (fp8: the codes copied into quant.h's records; q8/q4: the rows dequantized exactly,
 * then quantized), or w bf16/f16/f32 into fp8 with one scale max|w| / 448 for the matrix. q->data
 * is allocated here (the caller frees it). 0, -ENOMEM, -EINVAL (a NaN code or weight: *bad_row
 * is its row), -ERANGE (a weight past what the scale or q8/q4 holds). */
int lm_fp8_matrix(const struct tensor *w, const struct tensor *scale, enum quant_format f,
		  struct quant_tensor *q, int64_t *bad_row);
/* A copy of m whose F8_E4M3 matrices are bf16 (each weight e4m3(code) * scale rounded to
 * nearest even, in owned memory; lm_fp8.c), the rest shared with m, which must outlive it. NULL
 * and errno: ENOMEM, EINVAL (a NaN code, named in err). Free with lm_fp8_bf16_model_free(). */
struct engine_model *lm_fp8_bf16_model(const struct engine_model *m, char *err, size_t errlen);
void lm_fp8_bf16_model_free(struct engine_model *copy); /* accepts NULL */

/* A sequence of the CPU backend. base.n_tokens positions are held; base.max_tokens bounds them. */
struct lm_seq {
	struct backend_seq base;
	const struct engine_model *model;
	const struct lm_prepared *prep; /* the backend's */
	int kv_cap;			/* positions the K/V caches can hold now */
	struct lm_layer_state *layers;
	/* decode attention's per-chunk partials (lm_attention_decode_part_floats(kv_cap)), one
	 * layer at a time: scratch, not state */
	float *attn_part;

	/* activation scratch, not part of the state (per sequence, so sequences used by different
	 * threads never share it): a batched forward uses its lead sequence's */
	float *work;
	size_t work_floats;
};

/* Grows the KV caches to hold `positions` positions. Returns 0 or -ENOMEM (the recorded capacity
 * and the cached data stay valid either way). */
int lm_reserve_kv(struct lm_seq *s, int positions);

/* A batched forward (lm_forward_batch): runs of positions of several sequences through the
 * layers together. Every matrix product runs once over the rows of all runs (the decode rows of
 * n sequences are one product of n rows, which reads each weight once), while each run updates
 * its own sequence's conv window, SSM state and KV cache. Each sequence gets the state and
 * logits a forward of its run alone gives: bit for bit in fp32, and in bf16 while the decode
 * rows run on the GEMV kernels (the same kernels form every row's sums the same way): below
 * LM_BATCH_AMX_MIN_ROWS decode rows where the CPU has AMX (cpu_amx_enabled()), below
 * LM_BATCH_DNNL_MIN_ROWS elsewhere. From there on bf16's decode rows run on the AMX products or
 * oneDNN's, the same bf16 products summed in another order (within bf16's tolerance,
 * tests/lm/test-lm-batch.c). */
struct lm_run {
	struct lm_seq *seq;	    /* one run per sequence in a batch */
	const int32_t *tokens;	    /* [T] */
	const float *const *embeds; /* NULL, or [T] as in lm_forward_batch() */
	int T;			    /* 1..LM_MAX_BATCH positions following what seq holds */
	enum engine_logits want;    /* ALL: T rows into logits, consecutive; LAST: the last row */
	float *logits;
	int row; /* the run's first row among the batch's activations (lm_forward_batch sets it) */
};
/* Rows (positions) and runs of one batched forward: bounds the activation scratch. */
#define LM_BATCH_MAX_ROWS (2 * LM_MAX_BATCH)
#define LM_BATCH_MAX_RUNS 256
/* bf16 on a CPU with AMX (cpu_amx_enabled()): from LM_BATCH_AMX_MIN_ROWS merged decode rows on,
 * their products (the lm_head's too) run on cpu_amx_rows(), whatever their number; one row runs
 * on the GEMV kernels, as alone: AMX reads the weights at about one row's rate up to 16 rows,
 * where the GEMV's rate falls from 4 rows on and oneDNN's product is several times slower, so
 * oneDNN takes no decode rows where AMX runs (docs/benchmarks.md, "Figures behind the code's constants"). */
#define LM_BATCH_AMX_MIN_ROWS 2
/* bf16 without AMX: from LM_BATCH_DNNL_MIN_ROWS merged decode rows on, their products run through oneDNN,
 * on a row count rounded up to a multiple of LM_BATCH_DNNL_ROWS (its primitives are compiled per
 * row count); fewer run on the GEMV kernels, which past 4 rows read activations rounded to bf16
 * once per product (cpu_gemv.h): up to 8 sessions the GEMV is faster, at 16 oneDNN
 * (docs/benchmarks.md, "Figures behind the code's constants"). */
#define LM_BATCH_DNNL_MIN_ROWS 9
#define LM_BATCH_DNNL_ROWS 8
/* Logits rows of merged decode rows computed per lm_head pass (bounds their scratch). */
#define LM_BATCH_LOGIT_ROWS 64

/* Grows s's KV caches for n more positions and the pool threads' scratch for contexts up to
 * n_tokens + n. Returns 0 or -ENOMEM (the sequence's state is unchanged either way). */
int lm_seq_prepare(struct lm_seq *s, int n);
/* Grows the activation scratch of a batched forward of these runs (at most LM_BATCH_MAX_ROWS
 * rows and LM_BATCH_MAX_RUNS runs), which `lead`, one of their sequences, holds. 0 or -ENOMEM. */
int lm_batch_prepare(struct lm_seq *lead, const struct lm_run *runs, int n);

/* Runs the n runs (each of another sequence) through the model after lm_seq_prepare() of every
 * run's sequence and lm_batch_prepare(lead, runs, n) succeeded. Embeddings come from tokens[i],
 * or embeds[i] when embeds && embeds[i]. Writes the logits asked for, advances every sequence
 * by its run's T, and sets each run's `row`. Cannot fail. */
void lm_forward_batch(struct lm_seq *lead, struct lm_run *runs, int n);

/* The Mamba-2 SSM over T positions for all heads, starting from and updating state[H][P][N].
 * xbc: [T][ldx] conv outputs (x at 0, B at d_in, C at d_in + G*N); dt: [T][H] after softplus
 * and clamp; a: [H] (= -exp(A_log)); dskip: [H]. y: [T][d_in].
 * lm_ssm_chunked() uses the chunked SSD form (chunk positions per block), lm_ssm_scan() the
 * per-token recurrence. Both need cpu_reserve_scratch(lm_ssm_scratch_bytes()). */
void lm_ssm_chunked(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		    const float *a, const float *dskip, float *state, float *y, float *cb_work);
void lm_ssm_scan(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		 const float *a, const float *dskip, float *state, float *y);
/* The same over a state stored in bf16 (the backend's bf16 SSM state): every update widens it
 * to fp32, computes as above and rounds the result to nearest even when it stores it (the scan:
 * cpu_ssm_row_bf16(), y from the unrounded state); the chunked form carries the state in fp32
 * from chunk to chunk and rounds it once at the end. */
void lm_ssm_chunked_s16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
			const float *a, const float *dskip, uint16_t *state, float *y, float *cb_work);
void lm_ssm_scan_s16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		     const float *a, const float *dskip, uint16_t *state, float *y);
size_t lm_ssm_scratch_bytes(const struct lm_dims *dm);
/* Floats of cb_work lm_ssm_chunked() needs for T positions. */
size_t lm_ssm_cb_floats(const struct lm_dims *dm, int T);

/* Causal GQA attention without positions (model.md) of T new positions over the n0 cached
 * ones and themselves: query head i (of hq) attends with KV head i / (hq / hkv) to positions
 * s <= n0 + t, softmax(q . k_s / sqrt(dh)) weighting v_s. q and o: [T][q_dim]; k and v:
 * [n0 + T][kv_dim] (positions n0.. already hold the new rows). Needs
 * cpu_reserve_scratch((n0 + T) floats). */
void lm_attention_heads(const struct lm_dims *dm, int T, int n0, const float *q, const float *k,
			const float *v, float *o);
/* The same attention in blocks (lm_attention.c), for bf16 precision's prefill: per KV head and
 * block of positions, the scores of all its query heads against a block of keys as one
 * product, an online softmax, and the weighted values as a second product. With bf16 they run
 * through oneDNN where it has a fast kernel for them, the scores from Q / sqrt(dh) and K split
 * into two bf16 parts each (nearly fp32 scores), V and the softmax's weights rounded to bf16;
 * otherwise, or without bf16, they are fp32
 * (then equal to lm_attention_heads() up to the order of fp32 sums and a ~1 ulp expf). Returns
 * whether the bf16 products ran. Needs cpu_reserve_scratch(lm_attention_blocked_scratch_bytes()),
 * whatever n0 + T. */
bool lm_attention_blocked(const struct lm_dims *dm, int T, int n0, const float *q, const float *k,
			  const float *v, float *o, bool bf16);
size_t lm_attention_blocked_scratch_bytes(const struct lm_dims *dm);
/* The attention of one new position (T = 1: decode) in blocks, for bf16 precision's decode: the
 * hq / hkv query heads of a KV head together, each cached key and value row read once for up
 * to four of them (cpu_rows.h's scores and weigh, fp32), an online softmax over blocks of keys:
 * equal to lm_attention_heads(dm, 1, n0, ...) up to the order of fp32 sums and a ~1 ulp expf.
 * The n0 + 1 keys split into lm_attention_decode_chunks(n0) chunks of LM_ATTN_DECODE_KEYS (a
 * fixed size: the bits never depend on the thread count), one pool task per chunk, which takes
 * every KV head of a block of keys in turn (the cache's rows whole, not one head's slice of
 * them): _task writes o when there is one chunk, else its chunk's partials (max, sum, unscaled
 * O per KV head) into part, which _combine (one task per KV head, after every chunk's) merges
 * in chunk order into o. part: lm_attention_decode_part_floats(dm, n0 + 1) floats (none for one
 * chunk); scratch: lm_attention_decode_scratch_bytes() (cpu_scratch of the task's thread),
 * whatever n0. lm_attention_decode runs both as pool jobs (cpu_reserve_scratch() of it
 * first). */
#define LM_ATTN_DECODE_KEYS 512
int lm_attention_decode_chunks(int n0);
size_t lm_attention_decode_part_floats(const struct lm_dims *dm, int positions);
void lm_attention_decode_task(const struct lm_dims *dm, int n0, const float *q, const float *k,
			      const float *v, float *o, float *part, int c, float *scratch);
void lm_attention_decode_combine(const struct lm_dims *dm, int n0, float *o, const float *part, int g);
void lm_attention_decode(const struct lm_dims *dm, int n0, const float *q, const float *k, const float *v,
			 float *o, float *part);
size_t lm_attention_decode_scratch_bytes(const struct lm_dims *dm);

/* The other Mamba-2 steps of the forward (model.md 2.5), one function each so the CUDA kernels are
 * tested against the CPU's own arithmetic.
 * lm_conv_silu: causal depthwise conv + bias + SiLU (step 2) of T positions. raw: [T][ldr] pre-conv
 * xBC rows (conv_dim used); cwt: [K][conv_dim] taps (transposed); cbias: [conv_dim]; conv_state:
 * [K-1][conv_dim] raw rows of the last K-1 positions, oldest first, read then replaced; cbuf:
 * [K-1+T][conv_dim] scratch; out: [T][conv_dim].
 * lm_dt_softplus: dt[t][h] = clamp(softplus(raw[t][h] + dt_bias[h]), dt_min, dt_max) (step 3).
 * lm_gated_rmsnorm: in place on y [T][d_in]: y * silu(z), then RMSNorm with weight w over each of
 * the G groups of d_in/G channels (step 6); z: [T][ldz]. */
void lm_conv_silu(const struct lm_dims *dm, int T, const float *raw, size_t ldr, const float *cwt,
		  const float *cbias, float *conv_state, float *cbuf, float *out);
void lm_dt_softplus(const struct lm_dims *dm, int T, const float *raw, size_t ldr, const float *dt_bias,
		    float dt_min, float dt_max, float *dt);
void lm_gated_rmsnorm(const struct lm_dims *dm, int T, float *y, const float *z, size_t ldz, const float *w,
		      float eps);

/* ---- an in-memory model with random weights (lm_random.c) ----
 * For tests and benchmarks that need no files: the tensors are malloc'ed instead of
 * memory-mapped; everything else is what the loader fills. */
struct lm_random_spec {
	const char *pattern; /* one of M * - per layer */
	int hidden, vocab, intermediate;
	int n_heads, n_kv_heads, head_dim;
	int m_heads, m_head_dim, m_groups, m_state, m_conv_kernel, m_chunk;
	enum tensor_dtype dtype; /* of the matrices and embeddings; small vectors mix f32/bf16/f16 */
	uint64_t seed;
};

/* NULL + errno on failure. Free with lm_random_model_destroy(). The values are the seed's
 * stream whatever the CPU pool's thread count (large tensors are filled by the pool). */
struct engine_model *lm_random_model_create(const struct lm_random_spec *spec);
void lm_random_model_destroy(struct engine_model *m);

/* A random RADIO ViT and mlp1 projector (model.md 1.3, 3.2-3.3) in bf16 for a model m (its
 * projector gives m's hidden size), as holo-bench measures a checkpoint's tower without one:
 * RADIO-H is width 1280, 32 blocks, 16 heads, MLP 5120, patch 16, 8 prefix tokens, a 128 x 128
 * position grid, shuffle 2, projector hidden 20480. No final norm. */
struct lm_random_vision_spec {
	int width, depth, heads, mlp, patch;
	int n_prefix;			     /* class and register tokens */
	int pos_grid;			     /* side of the position-embedding grid */
	int shuffle;			     /* pixel-shuffle factor (1 / downsample_ratio) */
	int proj_hidden;		     /* mlp1's hidden size */
	struct engine_vision_preprocess pre; /* tile size, tile budget, thumbnail, mean and std */
	int32_t image_token;		     /* engine_vision_image_token()'s answer */
	uint64_t seed;
};
/* The handle owns its weights (engine_vision_destroy() frees them) and keeps nothing of m.
 * NULL + errno (EINVAL, EFBIG with one sentence in errbuf, ENOMEM). */
struct engine_vision *lm_random_vision_create(const struct engine_model *m,
					      const struct lm_random_vision_spec *spec, char *errbuf,
					      size_t errlen);
