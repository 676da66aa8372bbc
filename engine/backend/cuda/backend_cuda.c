/* The CUDA backend behind the seam (backend.h): device, weights and sequence state on the GPU.
 *
 * Weights: every language-model tensor is uploaded once at creation, converted on the host:
 * matrices (embeddings, projections, conv taps, lm_head) to the chosen precision (bf16 or fp32);
 * vectors (norm weights, biases, A_log, D, dt_bias) to fp32 whatever the precision, because they
 * are tiny and the CPU reads them in fp32 (a bf16 copy of the SSM decay would differ from the CPU
 * for no memory gain). A tied lm_head is the embeddings' copy. All of it lives in one device
 * allocation. Before anything is allocated the memory plan (device_plan.h: the weights by
 * format, the vision tower, the sessions asked for, the scratch, the cuBLASLt workspace and a
 * reserve) is computed from the shapes and checked against the device's free memory; its figures
 * are the engine_backend_info's plan.
 * With --weights q8|q4 (or a holo-quantize checkpoint) the linear layers and the lm_head (a tied
 * one as its own copy) are held as engine/quant/quant.h's row records instead, quantized on the
 * host by the reference quantizers (or copied from the map) and uploaded as they are: decode
 * passes of up to CUDA_QGEMV_MAX_ROWS rows multiply them with gpu_qgemv() (cuda/quant_gemv.cu),
 * longer ones dequantize slices of at most CUDA_DEQUANT_BYTES into the activation scratch
 * (scratch.wdq, counted with the weights in the creation's memory check) for the cuBLASLt GEMM
 * (docs/quantization.md "On CUDA"). fp8 (--weights fp8, or an NVIDIA ModelOpt FP8 checkpoint,
 * whose layers are fp8 by default) holds the linear layers as quant.h's fp8 records, made on the
 * host by lm_fp8_matrix() (the CPU backend's own: the checkpoint's codes as they are, or
 * ModelOpt's per-tensor recipe from bf16), one matrix at a time; the lm_head stays as stored, as
 * on the CPU. It runs on the same GEMV, and is refused on a device below sm_89 (no FP8 tensor
 * cores: use q8 or q4 there). In bf16 precision the prefill's products on a matrix of one scale
 * (ModelOpt's per-tensor FP8, --weights fp8) run on cuBLASLt's FP8 matmul: the pass's activations
 * quantized to e4m3 with one scale from their amax, found on the device (gpu_fp8_quantize, into
 * scratch.xq), times the records as they are (their codes are A, the record's bytes its leading
 * dimension) with the matrix's scale from a device table behind the weights (fp8_scales_off).
 * fp32 precision (the exact reference), per-row scales and shapes off cuBLASLt's 16-byte FP8
 * rules keep the dequantized slices.
 *
 * Sequences: per sequence one device block for the fixed state (each Mamba layer's fp32 conv
 * window [K-1][conv_dim] then its SSM state [H][P][N], fp32 or, with the ssm_state option BF16,
 * bf16 padded to a whole float, so every layer starts on a float boundary; the kernels update
 * a bf16 state in fp32 and store it rounded) and one for the KV caches
 * ([attention layer][K, V][kv_cap][kv_dim], bf16 in bf16 precision, else fp32), grown on demand
 * by a new block and device copies. Every byte is charged to the backend (its state limit), and a
 * device allocation that fails is -ENOMEM with the sequence unchanged. Reset is a device memset,
 * copy (snapshot, restore) device copies, export a download.
 *
 * Forward: the CPU's layer loop (lm_forward.c) on the device, in passes over the rows of a
 * batch, every span cut into runs of CUDA_MAX_RUN positions like the CPU's: embedding gather, per
 * layer the pre-norm (bf16 out in bf16 precision, to feed the GEMMs), the mixer's GEMMs through
 * cuBLASLt with the residual add fused into the output projection, the Mamba kernels (conv +
 * SiLU, SSD for prefill or the one-token update for decode, gated norm), GQA attention over the
 * device KV cache, ReLU^2; the final norm and lm_head run only for the rows whose logits are
 * wanted, which are copied to the host. Activations live in one scratch block of CUDA_MAX_ROWS
 * rows and the cuBLASLt workspace, made by the first reserve(). A lone decode step (one
 * position, one sequence, logits wanted, no spliced row) replays the sequence's CUDA graph:
 * captured once, with the position and token read from device memory written just before the
 * launch, and captured again when the KV block moved (its capacity grew).
 * Batches (issue 16): the one-token spans of two or more sequences run as decode rows, the conv,
 * SSM and attention kernels finding each row's state through a device array of per-row
 * descriptors (struct gpu_seq_row). A batch of decode rows only runs in passes of
 * CUDA_MAX_DECODE rows, each padded to a power-of-two bucket with inactive rows and replaying
 * that bucket's graph, which stays valid whichever sequences fill it. Otherwise the decode rows
 * (the last CUDA_MAX_DECODE of them; earlier ones take bucket passes) and the runs of the other
 * spans (prefill chunks, spliced image rows) share passes (struct cuda_pass): rows [decode rows
 * | run 1 | run 2 ...], every norm, GEMM and elementwise kernel over all of them at once, so a
 * forward of k decoders and a prefill chunk reads each weight once; the mixers run per kind,
 * the decode rows through the row kernels, each run through the single-sequence kernels over
 * its own rows, state and KV (conv over its span, the chunked SSD scan, prefill attention).
 * Step k of a batch takes run k of every span, packed into passes of at most CUDA_MAX_ROWS rows,
 * so each span is cut exactly as it is alone (backend_cuda_set_pass_shape() shortens runs and
 * passes for tests). Such mixed passes run eagerly: their shapes change with every batch, and
 * graphs are for decode. Profiling times each call site and runs decode eagerly, so every
 * launch is seen.
 *
 * Threads: the device context belongs to the thread that created the backend (holod's engine
 * thread). Every op that queues work takes the backend's lock, since the scratch is shared and
 * a capture must see no other thread's work on the stream. engine_backend_get_info() may run on
 * any thread, so it reports memory from figures cached at creation and the atomic state
 * counter, never from the driver.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "lm.h"
#include "modelopt.h"
#include "quantized.h"
#include "device_plan.h"
#include "loader.h"
#include "vision_weights.h"
#include "vision_cuda.h"

/* Host staging of one upload: tensors are converted and sent in pieces of this size. */
#define CUDA_STAGING_BYTES ((size_t)16 << 20)
/* Alignment of every tensor inside the weight block (what cudaMalloc gives a block). */
#define CUDA_WEIGHT_ALIGN 256u

struct cuda_weight {
	const struct tensor *src; /* the model's tensor */
	size_t offset;		  /* in the weight block */
	enum tensor_dtype dtype;  /* on the device: TENSOR_BF16, TENSOR_F32, or TENSOR_Q8/Q4, or
				   * TENSOR_F8_E4M3 for fp8 records */
	size_t elems;
	size_t row_bytes;	    /* quantized: quant_row_bytes() of a row (else 0) */
	const struct tensor *scale; /* an F8_E4M3 source's weight_scale (lm_layer.fp8_scale) */
	float fp8_scale;	    /* fp8 records of one scale for every row: it (else 0) */
};

/* Rows of a quantized matrix dequantized per prefill GEMM call (backend_cuda.c DESIGN: at least
 * 64 rows, a multiple of 64): the scratch holds one such slice of the largest matrix. */
#define CUDA_DEQUANT_BYTES ((size_t)64 << 20)
/* Rows a quantized matrix multiplies through the GEMV (gpu_qgemv(): one weight read per
 * GPU_QGEMV_TOKENS rows); more take the dequantized slices and cuBLASLt. */
#define CUDA_QGEMV_MAX_ROWS 32

/* A linear layer's matrix on the device: bf16/fp32 in the precision's dtype, or q8/q4/fp8
 * records. */
struct cuda_mat {
	const void *p;
	int quant;	    /* -1, or the enum gpu_quant of the records */
	const float *scale; /* fp8 of one scale: that scale in device memory, for the FP8 GEMM */
};

/* The most positions of one span a pass takes: a span is cut into runs of at most this many,
 * like the CPU's LM_MAX_BATCH (so both cut the SSD chunks at the same places). */
#define CUDA_MAX_RUN LM_MAX_BATCH
/* Logits rows one lm_head call computes (bounds the device logits buffer). */
#define CUDA_LOGIT_ROWS 16
/* Batched decode (issue 16): the decode positions of up to CUDA_MAX_DECODE sequences run as the
 * rows of one pass, padded to a bucket of 2, 4, ..., CUDA_MAX_DECODE rows (one graph each); more
 * sequences take several passes. */
#define CUDA_MAX_DECODE 128
#define CUDA_DECODE_BUCKETS 7 /* 2^1 .. 2^7 */
_Static_assert(CUDA_MAX_DECODE == 1 << CUDA_DECODE_BUCKETS, "one graph per power of two");
/* Rows one pass holds (the activation scratch): a full pass of decode rows beside one whole run
 * of a span, so a span that joins the decoders is cut exactly as it is cut alone. */
#define CUDA_MAX_ROWS (CUDA_MAX_DECODE + CUDA_MAX_RUN)
/* the memory plan sizes what this file allocates from the same bounds */
_Static_assert(CUDA_MAX_RUN == DEVICE_PLAN_MAX_RUN && CUDA_MAX_DECODE == DEVICE_PLAN_MAX_DECODE &&
		       CUDA_LOGIT_ROWS == DEVICE_PLAN_LOGIT_ROWS &&
		       CUDA_DEQUANT_BYTES == DEVICE_PLAN_DEQUANT_BYTES &&
		       CUDA_WEIGHT_ALIGN == DEVICE_PLAN_ALIGN &&
		       sizeof(struct gpu_seq_row) == DEVICE_PLAN_SEQ_ROW_BYTES &&
		       GPU_ATTN_SPLIT == DEVICE_PLAN_ATTN_SPLIT &&
		       GPU_ATTN_MAX_SPLITS == DEVICE_PLAN_ATTN_MAX_SPLITS &&
		       GPU_BLAS_WORKSPACE_BYTES == DEVICE_PLAN_WORKSPACE,
	       "device_plan.h's bounds are this file's");

/* Device pointers of the weights one layer uses, resolved once at creation. */
struct cuda_layer_w {
	const void *norm;
	const void *conv_w, *conv_b, *dt_bias, *a_log, *d, *gnorm;
	struct cuda_mat in_proj, out_proj;
	struct cuda_mat q, k, v, o;
	struct cuda_mat up, down;
};

/* The activation scratch of one pass (CUDA_MAX_ROWS rows), carved from one device block
 * allocated by the first reserve(); act is the precision's GEMM input type. */
struct cuda_scratch {
	void *block;
	int32_t *pos;	    /* [CUDA_MAX_ROWS]: run i's first position (struct cuda_pass) */
	int32_t *ids;	    /* [CUDA_MAX_ROWS]: row t's id, or -1 - i for spliced row i; directly
			     * after pos, so both go up in one copy */
	float *spliced;	    /* [R][d] */
	float *h;	    /* [R][d] the residual stream */
	void *xn;	    /* [R][d] of act: the normed rows a GEMM reads */
	float *logits;	    /* [CUDA_LOGIT_ROWS][vocab] */
	float *zx, *xc, *y; /* Mamba: in_proj out [R][in_rows], conv out [R][conv_dim], [R][d_in] */
	void *yn;	    /* Mamba: gated norm out [R][d_in] of act */
	void *ssd_ws;
	float *q;	       /* attention: [R][q_dim] */
	void *knew, *vnew, *o; /* attention: [R][kv_dim] x 2, [R][q_dim] of act */
	float *attn_ws;
	float *u;   /* MLP: [R][inter] */
	void *u2;   /* MLP: [R][inter] of act */
	void *wdq;  /* quantized weights: a dequantized slice of rows in act (dequant_bytes) */
	void *xq;   /* the FP8 GEMM: [R][fp8_ldq] e4m3 activations */
	float *xs;  /* ... their scale */
	float *xws; /* ... [R] the rows' amax */
};

/* One run of a span in a pass: positions [n0, n0 + T) of s, batch positions [p, p + T), at rows
 * [row, row + T) of the activations; its first position is also at scratch.pos[its index]. */
struct cuda_run {
	struct cuda_seq *s;
	size_t p;
	int row, T, n0;
	int max_len; /* bounds its attention lengths: n0 + T, or the KV capacity for a graph */
};

/* What one pass of the layer loop computes: n_dec decode rows at rows [0, n_dec), whose
 * descriptors are in dec.rows (the rows kernels; attention lengths up to dec_max_len), then the
 * runs at the rows that follow (the single-sequence kernels, one run after another, each over
 * its own rows, state and KV). The norms, GEMMs and elementwise kernels take all n_rows rows at
 * once, so every weight is read once per pass. */
struct cuda_pass {
	int n_rows, n_dec, dec_max_len;
	const int32_t *ids; /* device: every row's id (scratch.ids, or dec.ids for a bucket) */
	int n_spliced;	    /* rows of scratch.spliced the ids name */
	int n_runs;
	struct cuda_run *runs;
};

/* The batched decode's device block (grown to the largest bucket seen, by reserve()) and its
 * graphs, which read the rows' descriptors and ids written before each launch: so a graph serves
 * any sequences, however their KV blocks move, and is captured again only when the block moves. */
struct cuda_decode {
	void *block;		  /* rows [cap], then ids [cap], then logits [cap][vocab] */
	int cap;		  /* rows the block holds: 0 or a bucket */
	struct gpu_seq_row *rows; /* per row: its sequence's state and position; pos -1: padding */
	int32_t *ids;		  /* per row: the token (0 for padding) */
	float *logits;
	struct gpu_graph *graph[CUDA_DECODE_BUCKETS + 1]; /* [log2(bucket)] */
	bool warm[CUDA_DECODE_BUCKETS + 1];		  /* the bucket's pass has run eagerly once */
	unsigned char staging[CUDA_MAX_DECODE * (sizeof(struct gpu_seq_row) + sizeof(int32_t))];
};

struct cuda_backend {
	struct engine_backend base;
	struct gpu_context *gpu;
	char device_name[256];
	uint64_t memory_total;
	uint64_t memory_free_after_upload; /* what the device had free once the weights were up */
	struct engine_memory_plan plan;	   /* device_plan_compute() at creation */
	void *weights;			   /* device block */
	struct cuda_weight *table;
	size_t n_weights;
	int quant;	       /* -1, or the enum quant_format of the linear layers and lm_head */
	size_t dequant_bytes;  /* the prefill's dequantized slice (scratch.wdq), 0 without quant */
	size_t fp8_scales_off; /* fp8: the per-tensor scales' table in the weight block, one per
				* table entry */
	size_t fp8_ldq;	       /* the FP8 GEMM's activation row (scratch.xq), 0: no FP8 GEMM */
	struct lm_dims dm;
	int n_mamba, n_attn, n_mlp;
	size_t kv_elem; /* bytes of one K/V element */

	/* the forward */
	struct gpu_blas *blas;
	enum gpu_dtype act; /* of GEMM inputs and the KV cache: the precision's */
	size_t act_bytes;
	struct gpu_mamba_dims md;
	size_t attn_ws_floats;
	const void *lw_embed, *lw_norm_f;
	struct cuda_mat lw_lm_head;
	enum gpu_dtype embed_dtype;
	struct cuda_layer_w *lw; /* [n_layers] */
	struct cuda_scratch scratch;
	struct cuda_decode dec;
	/* a forward's pass being built, and its host staging (mirrors scratch.pos, then ids) */
	struct cuda_run runs[CUDA_MAX_ROWS];
	int32_t io[2 * CUDA_MAX_ROWS];
	bool graphs;   /* decode through captured graphs (tests turn it off) */
	bool fp8_gemm; /* fp8 prefill on cuBLASLt's FP8 matmul where it can (tests: off) */
	/* positions of one run of a span, and rows a pass packs runs into (tests lower them) */
	int run_len, pass_rows;
	/* Serialises every op that queues work on the stream: the scratch is shared, and a
	 * capture must see no other thread's work on the stream. */
	pthread_mutex_t lock;
	uint64_t graph_captures; /* graphs captured so far (tests) */
	bool lone_warm;		 /* a lone decode step has run eagerly once */
};

struct cuda_seq {
	struct backend_seq base;
	void *fixed; /* conv + SSM of every Mamba layer, fp32 */
	void *kv;    /* [n_attn][2][kv_cap][kv_dim] */
	int kv_cap;
	/* decode's captured graph, valid while the KV block is graph_kv of capacity graph_cap */
	struct gpu_graph *graph;
	void *graph_kv;
	int graph_cap;
};

static struct cuda_backend *cb_of(const struct engine_backend *b)
{
	return (struct cuda_backend *)b;
}

void backend_cuda_set_graphs(struct engine_backend *b, bool on)
{
	cb_of(b)->graphs = on;
}

void backend_cuda_set_fp8_gemm(struct engine_backend *b, bool on)
{
	cb_of(b)->fp8_gemm = on;
}

int backend_cuda_set_pass_shape(struct engine_backend *b, int run, int rows)
{
	_Static_assert(CUDA_MAX_RUN == 256 && CUDA_MAX_ROWS == 384, "backend.h names the bounds");
	if (run < 1 || run > CUDA_MAX_RUN || rows < run || rows > CUDA_MAX_ROWS)
		return -EINVAL;
	cb_of(b)->run_len = run;
	cb_of(b)->pass_rows = rows;
	return 0;
}

uint64_t backend_cuda_graph_captures(const struct engine_backend *b)
{
	return cb_of(b)->graph_captures;
}

struct gpu_context *backend_cuda_context(const struct engine_backend *b)
{
	return cb_of(b)->gpu;
}

/* ---- weights ---------------------------------------------------------------------------- */

static size_t tensor_elems(const struct tensor *t)
{
	size_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n;
}

static size_t dtype_bytes(enum tensor_dtype d)
{
	return d == TENSOR_F32 ? 4 : d == TENSOR_F8_E4M3 ? 1 : 2;
}

/* Device bytes of w. */
static size_t weight_size(const struct cuda_weight *w)
{
	return w->row_bytes ? (size_t)w->src->shape[0] * w->row_bytes : w->elems * dtype_bytes(w->dtype);
}

/* Rows of a matrix of `in` columns one dequantized slice holds (CUDA_DEQUANT_BYTES). */
static int64_t dequant_slice_rows(int64_t in, size_t act_bytes)
{
	int64_t n = (int64_t)(CUDA_DEQUANT_BYTES / ((size_t)in * act_bytes)) / 64 * 64;
	return MAX(n, 64);
}

static size_t align_up(size_t n)
{
	return (n + CUDA_WEIGHT_ALIGN - 1) & ~(size_t)(CUDA_WEIGHT_ALIGN - 1);
}

/* Adds t to the table (vectors in fp32, the rest in the backend's precision). */
static void plan_weight(struct cuda_backend *b, const struct tensor *t, size_t *offset)
{
	if (!t->data)
		return;
	struct cuda_weight *w = &b->table[b->n_weights++];
	w->src = t;
	w->elems = tensor_elems(t);
	w->dtype = t->ndim == 1 || b->base.precision == ENGINE_PRECISION_FP32 ? TENSOR_F32 : TENSOR_BF16;
	w->offset = *offset;
	*offset += align_up(weight_size(w));
}

/* A linear layer's matrix (or the lm_head: `scale` NULL): in the layers' quantized format with
 * --weights q8|q4|fp8, a holod-quantized or an FP8 checkpoint, quantized at upload or its records
 * copied (its slice counted in dequant_bytes), else as plan_weight(). fp8 keeps the lm_head as
 * stored, as the CPU does (docs/quantization.md "fp8"). */
static void plan_matrix(struct cuda_backend *b, const struct tensor *t, const struct tensor *scale, bool head,
			size_t *offset)
{
	if (!t->data || b->quant < 0 || (head && b->quant == QUANT_FP8)) {
		plan_weight(b, t, offset);
		return;
	}
	struct cuda_weight *w = &b->table[b->n_weights++];
	size_t rb = 0;
	w->src = t;
	w->scale = scale && scale->data ? scale : NULL;
	w->elems = tensor_elems(t);
	w->dtype = b->quant == QUANT_Q8 ? TENSOR_Q8 : b->quant == QUANT_Q4 ? TENSOR_Q4 : TENSOR_F8_E4M3;
	/* lm_model_check() bounds the dimensions far below quant.h's limits */
	if (quant_row_bytes((enum quant_format)b->quant, t->shape[1], &rb) < 0)
		rb = 0;
	w->row_bytes = rb;
	w->offset = *offset;
	*offset += align_up(weight_size(w));
	size_t act = b->base.precision == ENGINE_PRECISION_FP32 ? sizeof(float) : sizeof(uint16_t);
	int64_t rows = MIN(t->shape[0], dequant_slice_rows(t->shape[1], act));
	b->dequant_bytes = MAX(b->dequant_bytes, (size_t)rows * (size_t)t->shape[1] * act);
}

/* Lays out every LM tensor of the model in the weight block; returns the block's size. */
static size_t plan_weights(struct cuda_backend *b)
{
	const struct engine_model *m = b->base.model;
	size_t max = 3 + 9 * (size_t)m->cfg.n_layers, offset = 0;
	b->table = xcalloc(max, sizeof(*b->table));
	plan_weight(b, &m->embeddings, &offset);
	plan_weight(b, &m->norm_f, &offset);
	/* a tied head is the embeddings' copy, or with --weights q8|q4 its quantized copy (the
	 * embeddings stay for the lookups, as on the CPU; fp8 keeps the head as stored) */
	if (m->lm_head.data != m->embeddings.data || (b->quant >= 0 && b->quant != QUANT_FP8))
		plan_matrix(b, &m->lm_head, NULL, true, &offset);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		const struct tensor *sc = L->fp8_scale; /* lm_layer_matrices()' order */
		plan_weight(b, &L->norm, &offset);
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			plan_matrix(b, &L->mamba.in_proj, &sc[0], false, &offset);
			plan_weight(b, &L->mamba.conv_w, &offset);
			plan_weight(b, &L->mamba.conv_b, &offset);
			plan_weight(b, &L->mamba.dt_bias, &offset);
			plan_weight(b, &L->mamba.a_log, &offset);
			plan_weight(b, &L->mamba.d, &offset);
			plan_weight(b, &L->mamba.norm, &offset);
			plan_matrix(b, &L->mamba.out_proj, &sc[1], false, &offset);
			break;
		case LM_LAYER_ATTENTION:
			plan_matrix(b, &L->attn.q, &sc[0], false, &offset);
			plan_matrix(b, &L->attn.k, &sc[1], false, &offset);
			plan_matrix(b, &L->attn.v, &sc[2], false, &offset);
			plan_matrix(b, &L->attn.o, &sc[3], false, &offset);
			break;
		case LM_LAYER_MLP:
			plan_matrix(b, &L->mlp.up, &sc[0], false, &offset);
			plan_matrix(b, &L->mlp.down, &sc[1], false, &offset);
			break;
		}
	}
	if (b->quant == QUANT_FP8) {
		/* the per-tensor scales the FP8 GEMM reads, and its activations' widest row (bf16
		 * precision: fp32 keeps the exact dequantized products) */
		b->fp8_scales_off = offset;
		offset += align_up(b->n_weights * sizeof(float));
		for (size_t i = 0; b->base.precision == ENGINE_PRECISION_BF16 && i < b->n_weights; i++)
			if (b->table[i].dtype == TENSOR_F8_E4M3)
				b->fp8_ldq =
					MAX(b->fp8_ldq, (size_t)(b->table[i].src->shape[1] + 15) / 16 * 16);
	}
	return offset;
}

/* Converts elements [first, first + n) of w's source into staging in w's device dtype. */
static void convert(const struct cuda_weight *w, size_t first, size_t n, void *staging)
{
	const struct tensor *t = w->src;
	if (w->dtype == TENSOR_F32) {
		cpu_tensor_to_f32(t, first, n, staging);
		return;
	}
	uint16_t *out = staging;
	if (t->dtype == TENSOR_BF16) {
		memcpy(out, (const uint16_t *)t->data + first, n * sizeof(uint16_t));
		return;
	}
	/* f32 and f16 go through f32 (exact for f16), then round to nearest even */
	float tmp[1024];
	for (size_t done = 0; done < n;) {
		size_t k = MIN(n - done, ARRAY_SIZE(tmp));
		cpu_tensor_to_f32(t, first + done, k, tmp);
		for (size_t i = 0; i < k; i++)
			out[done + i] = f32_to_bf16(tmp[i]);
		done += k;
	}
}

/* Quantizes rows [first, first + n) of w's source into staging (n records); -EINVAL (a NaN or
 * infinite weight) or -ERANGE (past QUANT_MAX_ABS) with the row in *bad_row. */
static int quantize_rows(const struct cuda_weight *w, enum quant_format f, int64_t first, int64_t n,
			 void *staging, float *row, int64_t *bad_row)
{
	const struct tensor *t = w->src;
	const int64_t in = t->shape[1];
	for (int64_t r = first; r < first + n; r++) {
		void *dst = (char *)staging + (size_t)(r - first) * w->row_bytes;
		int e = 0;
		if (t->dtype == TENSOR_Q8 || t->dtype == TENSOR_Q4) {
			/* a holod-quantized checkpoint's record, as stored: every scale (q4: its
			 * dz's d) a finite fp16, or the logits would be NaN */
			memcpy(dst, (const char *)t->data + (size_t)r * w->row_bytes, w->row_bytes);
			const enum quant_format qf = t->dtype == TENSOR_Q8 ? QUANT_Q8 : QUANT_Q4;
			const uint16_t *sc = qf == QUANT_Q8 ? quant_q8_scales(dst, in) : quant_q4_dz(dst, in);
			int64_t k = quant_blocks(in);
			for (int64_t i = 0; i < k && e == 0; i++)
				if (!quant_scale_finite(qf, sc[i]))
					e = -EINVAL;
		} else if (t->dtype == TENSOR_BF16) {
			e = quant_row_from_bf16(f, (const uint16_t *)t->data + (size_t)(r * in), in, dst);
		} else {
			cpu_tensor_to_f32(t, (size_t)(r * in), (size_t)in, row);
			e = quant_row_from_f32(f, row, in, dst);
		}
		if (e < 0) {
			*bad_row = r;
			return e;
		}
	}
	return 0;
}

/* Rows one pool task quantizes. */
#define CUDA_QUANT_TASK_ROWS 8

/* One staging buffer's rows [first, first + n) quantized on the CPU pool's threads. */
struct quantize_job {
	const struct cuda_weight *w;
	enum quant_format f;
	int64_t first, n;
	void *staging;
	_Atomic int err;	 /* -ENOMEM */
	_Atomic int64_t bad_row; /* the lowest refused row, or -1 */
};

static void quantize_task(void *ctx, int task, int thread)
{
	(void)thread;
	struct quantize_job *j = ctx;
	const int64_t r0 = (int64_t)task * CUDA_QUANT_TASK_ROWS;
	const int64_t n = MIN(CUDA_QUANT_TASK_ROWS, j->n - r0);
	float *row = malloc((size_t)j->w->src->shape[1] * sizeof(float));
	if (!row) {
		atomic_store(&j->err, -ENOMEM);
		return;
	}
	int64_t bad = -1;
	int e = quantize_rows(j->w, j->f, j->first + r0, n, (char *)j->staging + (size_t)r0 * j->w->row_bytes,
			      row, &bad);
	free(row);
	if (e < 0) {
		/* the lowest bad row wins (its error is taken again after the job), so the
		 * message does not depend on the threads */
		int64_t cur = atomic_load(&j->bad_row);
		while ((cur < 0 || bad < cur) && !atomic_compare_exchange_weak(&j->bad_row, &cur, bad))
			;
	}
}

/* fp8 records of an fp8 target, or of an FP8 checkpoint's matrix in any format: made whole on
 * the host by lm_fp8_matrix() (on the pool: the CPU backend's own records, which needs the whole
 * matrix for ModelOpt's per-tensor scale), uploaded, freed. */
static int upload_fp8(struct cuda_backend *b, const struct cuda_weight *w, int64_t *bad_row, uint64_t *done,
		      uint64_t total, const struct engine_backend_options *opts)
{
	struct quant_tensor q;
	int r = lm_fp8_matrix(w->src, w->scale, (enum quant_format)b->quant, &q, bad_row);
	if (r < 0)
		return r;
	if (q.row_bytes != w->row_bytes)
		r = -EINVAL; /* both are quant_row_bytes() of the same shape */
	else
		r = gpu_copy_to_device(b->gpu, (char *)b->weights + w->offset, q.data,
				       (size_t)q.rows * q.row_bytes);
	/* one scale for every row (per tensor): the FP8 GEMM can take the matrix */
	if (r >= 0 && b->quant == QUANT_FP8) {
		const float s0 = *quant_fp8_scale(q.data, q.cols);
		bool same = true;
		for (int64_t i = 1; i < q.rows && same; i++)
			same = *quant_fp8_scale((const char *)q.data + (size_t)i * q.row_bytes, q.cols) == s0;
		((struct cuda_weight *)w)->fp8_scale = same ? s0 : 0.0f;
	}
	free((void *)q.data);
	if (r < 0)
		return r;
	*done += (uint64_t)tensor_elems(w->src) * dtype_bytes(w->src->dtype);
	if (opts->progress)
		opts->progress(opts->progress_arg, *done, total);
	return 0;
}

/* Quantizes (on the CPU pool) and uploads a matrix's records, a staging buffer of rows at a
 * time. */
static int upload_quantized(struct cuda_backend *b, const struct cuda_weight *w, void *staging,
			    size_t staging_bytes, int64_t *bad_row, uint64_t *done, uint64_t total,
			    const struct engine_backend_options *opts)
{
	const int64_t rows = w->src->shape[0], in = w->src->shape[1];
	if (w->src->dtype == TENSOR_F8_E4M3 || b->quant == QUANT_FP8)
		return upload_fp8(b, w, bad_row, done, total, opts);
	const int64_t per = (int64_t)(staging_bytes / w->row_bytes);
	for (int64_t first = 0; first < rows; first += per) {
		int64_t n = MIN(per, rows - first);
		struct quantize_job j = {.w = w,
					 .f = (enum quant_format)b->quant,
					 .first = first,
					 .n = n,
					 .staging = staging};
		atomic_init(&j.err, 0);
		atomic_init(&j.bad_row, -1);
		cpu_parallel_for((int)((n + CUDA_QUANT_TASK_ROWS - 1) / CUDA_QUANT_TASK_ROWS), quantize_task,
				 &j);
		int r = atomic_load(&j.err);
		*bad_row = atomic_load(&j.bad_row);
		if (r == 0 && *bad_row >= 0) {
			float *row = malloc((size_t)in * sizeof(float));
			int64_t again = -1;
			r = row ? quantize_rows(w, j.f, *bad_row, 1, staging, row, &again) : -ENOMEM;
			free(row);
			if (r == 0) /* the rows are const: the same row fails the same way */
				r = -EINVAL;
		}
		if (r < 0)
			return r;
		r = gpu_copy_to_device(b->gpu, (char *)b->weights + w->offset + (size_t)first * w->row_bytes,
				       staging, (size_t)n * w->row_bytes);
		if (r < 0)
			return r;
		*done += (uint64_t)n * (uint64_t)in * dtype_bytes(w->src->dtype);
		if (opts->progress)
			opts->progress(opts->progress_arg, *done, total);
	}
	return 0;
}

/* Staging bytes the upload needs: CUDA_STAGING_BYTES, or one record if a row is larger. */
static size_t staging_bytes_of(const struct cuda_backend *b)
{
	size_t n = CUDA_STAGING_BYTES;
	for (size_t i = 0; i < b->n_weights; i++)
		n = MAX(n, b->table[i].row_bytes);
	return n;
}

/* Uploads every weight, reporting the checkpoint bytes done to opts->progress after each piece;
 * a weight the quantizer refuses names its tensor in *bad (its index in the table, and the row). */
static int upload_weights(struct cuda_backend *b, void *staging, size_t staging_bytes,
			  const struct engine_backend_options *opts, size_t *bad, int64_t *bad_row)
{
	uint64_t total = 0, done = 0;
	for (size_t i = 0; i < b->n_weights; i++)
		total += (uint64_t)b->table[i].elems * dtype_bytes(b->table[i].src->dtype);
	for (size_t i = 0; i < b->n_weights; i++) {
		const struct cuda_weight *w = &b->table[i];
		if (w->row_bytes) {
			*bad = i;
			int r = upload_quantized(b, w, staging, staging_bytes, bad_row, &done, total, opts);
			if (r < 0)
				return r;
			continue;
		}
		size_t esz = dtype_bytes(w->dtype), per = CUDA_STAGING_BYTES / esz;
		for (size_t first = 0; first < w->elems; first += per) {
			size_t n = MIN(per, w->elems - first);
			convert(w, first, n, staging);
			int r = gpu_copy_to_device(b->gpu, (char *)b->weights + w->offset + first * esz,
						   staging, n * esz);
			if (r < 0)
				return r;
			done += (uint64_t)n * dtype_bytes(w->src->dtype);
			if (opts->progress)
				opts->progress(opts->progress_arg, done, total);
		}
	}
	if (b->quant == QUANT_FP8 && b->n_weights) {
		float *sc = staging; /* staging holds CUDA_STAGING_BYTES, far more than the table */
		for (size_t i = 0; i < b->n_weights; i++)
			sc[i] = b->table[i].fp8_scale;
		int r = gpu_copy_to_device(b->gpu, (char *)b->weights + b->fp8_scales_off, sc,
					   b->n_weights * sizeof(float));
		if (r < 0)
			return r;
	}
	if (opts->progress && b->n_weights == 0)
		opts->progress(opts->progress_arg, 0, 0);
	return 0;
}

const void *backend_cuda_weight(const struct engine_backend *base, const struct tensor *t,
				enum tensor_dtype *ret_dtype)
{
	const struct cuda_backend *b = cb_of(base);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < b->n_weights; i++) {
			if (b->table[i].src == t) {
				*ret_dtype = b->table[i].dtype;
				return (const char *)b->weights + b->table[i].offset;
			}
		}
		/* a tied head without its own (quantized) copy is the embeddings' */
		if (t != &base->model->lm_head || t->data != base->model->embeddings.data)
			break;
		t = &base->model->embeddings;
	}
	return NULL;
}

/* ---- sequences ---------------------------------------------------------------------------- */

static size_t conv_floats(const struct lm_dims *dm)
{
	return (size_t)(dm->K - 1) * dm->conv_dim;
}

static size_t ssm_floats(const struct lm_dims *dm)
{
	return (size_t)dm->H * dm->P * dm->N;
}

/* Bytes of one layer's SSM state as stored, padded to a float. */
static size_t ssm_bytes(const struct cuda_backend *b)
{
	if (b->base.ssm_state != ENGINE_PRECISION_BF16)
		return ssm_floats(&b->dm) * sizeof(float);
	return (ssm_floats(&b->dm) * sizeof(uint16_t) + sizeof(float) - 1) / sizeof(float) * sizeof(float);
}

/* Bytes of one Mamba layer's part of the fixed block (a multiple of sizeof(float)). */
static size_t mamba_stride(const struct cuda_backend *b)
{
	return conv_floats(&b->dm) * sizeof(float) + ssm_bytes(b);
}

static size_t fixed_bytes(const struct cuda_backend *b)
{
	return (size_t)b->n_mamba * mamba_stride(b);
}

/* Bytes of one position of one K or V cache of one layer. */
static size_t kv_row_bytes(const struct cuda_backend *b)
{
	return (size_t)b->dm.kv_dim * b->kv_elem;
}

static size_t kv_bytes(const struct cuda_backend *b, int cap)
{
	return 2 * (size_t)b->n_attn * (size_t)cap * kv_row_bytes(b);
}

/* Device address of layer a's (a-th attention layer) K (which 0) or V (1) cache, in a block of
 * capacity cap. */
static char *kv_at(const struct cuda_backend *b, void *kv, int cap, int a, int which)
{
	return (char *)kv + ((size_t)a * 2 + (size_t)which) * (size_t)cap * kv_row_bytes(b);
}

static void cuda_seq_destroy(struct backend_seq *bs)
{
	struct cuda_seq *s = (struct cuda_seq *)bs;
	if (!s)
		return;
	struct cuda_backend *b = cb_of(bs->backend);
	gpu_graph_destroy(s->graph);
	gpu_free(b->gpu, s->kv);
	gpu_free(b->gpu, s->fixed);
	backend_uncharge(bs->backend, fixed_bytes(b) + kv_bytes(b, s->kv_cap));
	free(s);
}

static struct backend_seq *cuda_seq_create(struct engine_backend *base, int max_tokens)
{
	struct cuda_backend *b = cb_of(base);
	size_t fixed = fixed_bytes(b);
	int r = backend_charge(base, fixed);
	if (r < 0)
		goto fail;
	struct cuda_seq *s = calloc(1, sizeof(*s));
	if (!s) {
		r = -ENOMEM;
		goto uncharge;
	}
	s->base.backend = base;
	s->base.max_tokens = max_tokens;
	if (fixed) {
		r = gpu_alloc(b->gpu, fixed, &s->fixed);
		if (r >= 0)
			r = gpu_memset(b->gpu, s->fixed, 0, fixed);
		if (r < 0)
			goto free_seq;
	}
	return &s->base;
free_seq:
	gpu_free(b->gpu, s->fixed);
	free(s);
uncharge:
	backend_uncharge(base, fixed);
fail:
	errno = -r;
	return NULL;
}

static void cuda_seq_reset(struct backend_seq *bs)
{
	struct cuda_seq *s = (struct cuda_seq *)bs;
	struct cuda_backend *b = cb_of(bs->backend);
	/* a failed memset is a device failure the next computation reports */
	(void)gpu_memset(b->gpu, s->fixed, 0, fixed_bytes(b));
	bs->n_tokens = 0;
}

/* Grows the KV block to hold `need` positions: to exactly `need` when exact (copies), else with
 * the CPU backend's doubling (at least 64, at most max_tokens). The cached positions are copied;
 * on failure nothing changes. */
static int grow_kv(struct cuda_seq *s, int need, bool exact)
{
	struct cuda_backend *b = cb_of(s->base.backend);
	if (need <= s->kv_cap || b->n_attn == 0)
		return 0;
	int cap = exact ? need : MAX(need, MIN(s->base.max_tokens, MAX(64, s->kv_cap * 2)));
	uint64_t grow = kv_bytes(b, cap) - kv_bytes(b, s->kv_cap);
	int r = backend_charge(s->base.backend, grow);
	if (r < 0)
		return r;
	void *kv = NULL;
	r = gpu_alloc(b->gpu, kv_bytes(b, cap), &kv);
	if (r < 0)
		goto uncharge;
	size_t used = (size_t)s->base.n_tokens * kv_row_bytes(b);
	for (int a = 0; a < b->n_attn && used; a++)
		for (int w = 0; w < 2 && r >= 0; w++)
			r = gpu_copy_on_device(b->gpu, kv_at(b, kv, cap, a, w),
					       kv_at(b, s->kv, s->kv_cap, a, w), used);
	if (r < 0) {
		gpu_free(b->gpu, kv);
		goto uncharge;
	}
	gpu_free(b->gpu, s->kv);
	s->kv = kv;
	s->kv_cap = cap;
	return 0;
uncharge:
	backend_uncharge(s->base.backend, grow);
	return r;
}

static int cuda_seq_copy(struct backend_seq *bdst, const struct backend_seq *bsrc)
{
	struct cuda_seq *dst = (struct cuda_seq *)bdst;
	const struct cuda_seq *src = (const struct cuda_seq *)bsrc;
	struct cuda_backend *b = cb_of(bdst->backend);
	int n = bsrc->n_tokens;
	/* grow first: it may copy dst's own positions, which the copy then overwrites */
	int r = grow_kv(dst, n, true);
	if (r < 0)
		return r;
	r = gpu_copy_on_device(b->gpu, dst->fixed, src->fixed, fixed_bytes(b));
	size_t used = (size_t)n * kv_row_bytes(b);
	for (int a = 0; a < b->n_attn && used && r >= 0; a++)
		for (int w = 0; w < 2 && r >= 0; w++)
			r = gpu_copy_on_device(b->gpu, kv_at(b, dst->kv, dst->kv_cap, a, w),
					       kv_at(b, src->kv, src->kv_cap, a, w), used);
	if (r < 0)
		return r;
	bdst->n_tokens = n;
	return 0;
}

static size_t cuda_seq_state_bytes(const struct backend_seq *bs)
{
	struct cuda_backend *b = cb_of(bs->backend);
	return fixed_bytes(b) + kv_bytes(b, bs->n_tokens);
}

/* The attention layers' order among the model's layers: -1 for other kinds. */
static int attn_index(const struct engine_model *m, int layer)
{
	if (m->layers[layer].kind != LM_LAYER_ATTENTION)
		return -1;
	int a = 0;
	for (int l = 0; l < layer; l++)
		a += m->layers[l].kind == LM_LAYER_ATTENTION;
	return a;
}

static int mamba_index(const struct engine_model *m, int layer)
{
	if (m->layers[layer].kind != LM_LAYER_MAMBA)
		return -1;
	int i = 0;
	for (int l = 0; l < layer; l++)
		i += m->layers[l].kind == LM_LAYER_MAMBA;
	return i;
}

static size_t mamba_offset(const struct cuda_backend *b, int i)
{
	return (size_t)i * mamba_stride(b);
}

/* Downloads n elements of device state as floats: fp32 as is, bf16 widened (exact). */
static int download_f32(struct cuda_backend *b, const void *src, size_t n, bool bf16, float *out)
{
	if (!bf16)
		return gpu_copy_to_host(b->gpu, out, src, n * sizeof(float));
	uint16_t *raw = malloc(MAX(n, 1) * sizeof(uint16_t));
	if (!raw)
		return -ENOMEM;
	int r = gpu_copy_to_host(b->gpu, raw, src, n * sizeof(uint16_t));
	for (size_t i = 0; r >= 0 && i < n; i++)
		out[i] = bf16_to_f32(raw[i]);
	free(raw);
	return r;
}

/* Uploads n elements of device state given as floats: fp32 as is, bf16 rounded to nearest
 * even. */
static int upload_f32(struct cuda_backend *b, void *dst, const float *src, size_t n, bool bf16)
{
	if (!bf16)
		return gpu_copy_to_device(b->gpu, dst, src, n * sizeof(float));
	uint16_t *tmp = malloc(MAX(n, 1) * sizeof(uint16_t));
	if (!tmp)
		return -ENOMEM;
	cpu_f32_to_bf16(src, tmp, n);
	int r = gpu_copy_to_device(b->gpu, dst, tmp, n * sizeof(uint16_t));
	free(tmp);
	return r;
}

/* One layer's SSM state, in its storage type (--ssm-state). */
static int download_ssm(struct cuda_backend *b, const void *src, float *out)
{
	return download_f32(b, src, ssm_floats(&b->dm), b->base.ssm_state == ENGINE_PRECISION_BF16, out);
}

static int upload_ssm(struct cuda_backend *b, void *dst, const float *src)
{
	return upload_f32(b, dst, src, ssm_floats(&b->dm), b->base.ssm_state == ENGINE_PRECISION_BF16);
}

/* Downloads one K or V cache of n positions as floats. */
static int download_kv(struct cuda_backend *b, const void *src, size_t n, float *out)
{
	return download_f32(b, src, n * (size_t)b->dm.kv_dim, b->kv_elem != sizeof(float), out);
}

static int cuda_seq_export(const struct backend_seq *bs, struct backend_seq_state *ret)
{
	const struct cuda_seq *s = (const struct cuda_seq *)bs;
	struct cuda_backend *b = cb_of(bs->backend);
	const struct engine_model *m = bs->backend->model;
	struct backend_seq_state st = {.n_layers = m->cfg.n_layers, .n_tokens = bs->n_tokens};
	int r = -ENOMEM;
	st.layers = calloc((size_t)st.n_layers, sizeof(*st.layers));
	if (!st.layers)
		return -ENOMEM;
	size_t kv = (size_t)bs->n_tokens * b->dm.kv_dim;
	for (int l = 0; l < st.n_layers; l++) {
		struct backend_layer_state *o = &st.layers[l];
		int mi = mamba_index(m, l), ai = attn_index(m, l);
		if (mi >= 0) {
			o->conv = malloc(MAX(conv_floats(&b->dm), 1) * sizeof(float));
			o->ssm = malloc(ssm_floats(&b->dm) * sizeof(float));
			if (!o->conv || !o->ssm)
				goto fail;
			const char *at = (const char *)s->fixed + mamba_offset(b, mi);
			r = gpu_copy_to_host(b->gpu, o->conv, at, conv_floats(&b->dm) * sizeof(float));
			if (r >= 0)
				r = download_ssm(b, at + conv_floats(&b->dm) * sizeof(float), o->ssm);
			if (r < 0)
				goto fail;
		} else if (ai >= 0) {
			r = -ENOMEM;
			o->k = malloc(MAX(kv, 1) * sizeof(float));
			o->v = malloc(MAX(kv, 1) * sizeof(float));
			if (!o->k || !o->v)
				goto fail;
			r = 0;
			if (kv) {
				r = download_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 0), (size_t)bs->n_tokens,
						o->k);
				if (r >= 0)
					r = download_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 1),
							(size_t)bs->n_tokens, o->v);
			}
			if (r < 0)
				goto fail;
		}
	}
	*ret = st;
	return 0;
fail:
	backend_seq_state_finish(&st);
	return r < 0 ? r : -ENOMEM;
}

/* Uploads n positions of one K or V cache given as floats, in the device's element type. */
static int upload_kv(struct cuda_backend *b, void *dst, const float *src, size_t n)
{
	return upload_f32(b, dst, src, n * (size_t)b->dm.kv_dim, b->kv_elem != sizeof(float));
}

static int cuda_seq_import(struct backend_seq *bs, const struct backend_seq_state *st)
{
	struct cuda_seq *s = (struct cuda_seq *)bs;
	struct cuda_backend *b = cb_of(bs->backend);
	const struct engine_model *m = bs->backend->model;
	int r = grow_kv(s, st->n_tokens, true);
	for (int l = 0; l < m->cfg.n_layers && r >= 0; l++) {
		const struct backend_layer_state *in = &st->layers[l];
		int mi = mamba_index(m, l), ai = attn_index(m, l);
		if (mi >= 0) {
			char *at = (char *)s->fixed + mamba_offset(b, mi);
			r = gpu_copy_to_device(b->gpu, at, in->conv, conv_floats(&b->dm) * sizeof(float));
			if (r >= 0)
				r = upload_ssm(b, at + conv_floats(&b->dm) * sizeof(float), in->ssm);
		} else if (ai >= 0 && st->n_tokens > 0) {
			r = upload_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 0), in->k, (size_t)st->n_tokens);
			if (r >= 0)
				r = upload_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 1), in->v,
					      (size_t)st->n_tokens);
		}
	}
	if (r < 0)
		return r;
	bs->n_tokens = st->n_tokens;
	return 0;
}

static int scratch_reserve(struct cuda_backend *b);
static int decode_reserve(struct cuda_backend *b, int rows);
static size_t decode_rows_of(const struct backend_batch *batch);

static int cuda_reserve(struct engine_backend *base, const struct backend_batch *batch)
{
	int r0 = scratch_reserve(cb_of(base));
	size_t n_dec = decode_rows_of(batch);
	/* decode rows run through dec beside two or more sequences (cuda_forward) */
	if (r0 >= 0 && (n_dec >= 2 || (n_dec == 1 && batch->n_spans > 1)))
		r0 = decode_reserve(cb_of(base), (int)MIN(n_dec, (size_t)CUDA_MAX_DECODE));
	if (r0 < 0)
		return r0;
	for (size_t i = 0; i < batch->n_spans; i++) {
		struct cuda_seq *s = (struct cuda_seq *)batch->spans[i].seq;
		int r = grow_kv(s, s->base.n_tokens + (int)batch->spans[i].n, false);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- the forward -------------------------------------------------------------------------- */

static enum gpu_dtype gdt(enum tensor_dtype d)
{
	return d == TENSOR_F32 ? GPU_DTYPE_F32 : GPU_DTYPE_BF16;
}

static const void *wptr(const struct cuda_backend *b, const struct tensor *t)
{
	enum tensor_dtype dt;
	return t->data ? backend_cuda_weight(&b->base, t, &dt) : NULL;
}

static struct cuda_mat mat_of(const struct cuda_backend *b, const struct tensor *t)
{
	enum tensor_dtype dt = TENSOR_F32;
	struct cuda_mat m = {.p = t->data ? backend_cuda_weight(&b->base, t, &dt) : NULL, .quant = -1};
	if (dt == TENSOR_Q8 || dt == TENSOR_Q4 || dt == TENSOR_F8_E4M3)
		m.quant = dt == TENSOR_Q8 ? GPU_QUANT_Q8 : dt == TENSOR_Q4 ? GPU_QUANT_Q4 : GPU_QUANT_FP8;
	for (size_t i = 0; dt == TENSOR_F8_E4M3 && i < b->n_weights; i++)
		if (b->table[i].src == t && b->table[i].fp8_scale > 0)
			m.scale = (const float *)((const char *)b->weights + b->fp8_scales_off) + i;
	return m;
}

/* y[r] (+)= W x[r] for `rows` rows of a linear layer's matrix W [out][in]: cuBLASLt on bf16/fp32
 * weights; on q8/q4 records the GEMV for up to CUDA_QGEMV_MAX_ROWS rows (decode), else slices
 * of rows dequantized into scratch.wdq in the activations' dtype, each through cuBLASLt. */
static int linear(struct cuda_backend *b, const struct cuda_mat *W, int out, int in, const void *x,
		  size_t ldx, int rows, void *y, enum gpu_dtype y_dtype, size_t ldy, bool accumulate)
{
	if (W->quant < 0)
		return gpu_gemm(b->blas, W->p, b->act, out, in, x, ldx, rows, y, y_dtype, ldy, accumulate);
	if (rows == 0)
		return 0;
	if (rows <= CUDA_QGEMV_MAX_ROWS)
		return gpu_qgemv(b->gpu, W->p, (enum gpu_quant)W->quant, out, in, x, b->act, ldx, rows, y,
				 y_dtype, ldy, accumulate);
	const size_t rb = gpu_quant_row_bytes((enum gpu_quant)W->quant, in);
	/* fp8 of one scale, bf16 precision: cuBLASLt's FP8 matmul on the records as they are, the
	 * activations quantized per tensor on the device (DESIGN) */
	const size_t ldq = ((size_t)in + 15) / 16 * 16;
	if (W->quant == GPU_QUANT_FP8 && W->scale && b->fp8_gemm && ldq <= b->fp8_ldq &&
	    gpu_gemm_fp8_ok(in, rb, W->p, b->scratch.xq, ldq, y, y_dtype, ldy)) {
		int r = gpu_fp8_quantize(b->gpu, x, b->act, ldx, rows, in, b->scratch.xq, ldq, b->scratch.xs,
					 GPU_FP8_PER_TENSOR, b->scratch.xws);
		return r < 0 ? r :
			       gpu_gemm_fp8(b->blas, W->p, rb, W->scale, out, in, b->scratch.xq, ldq,
					    b->scratch.xs, rows, y, y_dtype, ldy, accumulate);
	}
	const size_t yb = y_dtype == GPU_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
	const int slice = (int)MIN((int64_t)out, dequant_slice_rows(in, b->act_bytes));
	int r = 0;
	for (int r0 = 0; r0 < out && r >= 0; r0 += slice) {
		int n = MIN(slice, out - r0);
		r = gpu_dequant(b->gpu, (const char *)W->p + (size_t)r0 * rb, (enum gpu_quant)W->quant, n, in,
				b->scratch.wdq, b->act);
		if (r >= 0)
			r = gpu_gemm(b->blas, b->scratch.wdq, b->act, n, in, x, ldx, rows,
				     (char *)y + (size_t)r0 * yb, y_dtype, ldy, accumulate);
	}
	return r;
}

/* Carves n bytes (256-aligned) at *off of the scratch block; with block NULL it only sizes. */
static void *carve(void *block, size_t *off, size_t n)
{
	void *p = block ? (char *)block + *off : NULL;
	*off += align_up(MAX(n, 1));
	return p;
}

/* Lays the scratch out in block (NULL: sizing only); returns its size. */
static size_t scratch_layout(struct cuda_backend *b, void *block)
{
	const struct lm_dims *dm = &b->dm;
	struct cuda_scratch *s = &b->scratch;
	const size_t R = CUDA_MAX_ROWS, f = sizeof(float), a = b->act_bytes;
	size_t off = 0;
	s->pos = carve(block, &off, 2 * R * sizeof(int32_t));
	s->ids = s->pos ? s->pos + R : NULL;
	s->spliced = carve(block, &off, R * dm->d * f);
	s->h = carve(block, &off, R * dm->d * f);
	s->xn = carve(block, &off, R * dm->d * a);
	s->logits = carve(block, &off, (size_t)CUDA_LOGIT_ROWS * dm->vocab * f);
	if (b->n_mamba) {
		s->zx = carve(block, &off, R * dm->in_rows * f);
		s->xc = carve(block, &off, R * dm->conv_dim * f);
		s->y = carve(block, &off, R * dm->d_in * f);
		s->yn = carve(block, &off, R * dm->d_in * a);
		/* one run's SSD at a time */
		s->ssd_ws = carve(block, &off, gpu_mamba_ssd_workspace_bytes(&b->md, CUDA_MAX_RUN));
	}
	if (b->n_attn) {
		s->q = carve(block, &off, R * dm->q_dim * f);
		s->knew = carve(block, &off, R * dm->kv_dim * a);
		s->vnew = carve(block, &off, R * dm->kv_dim * a);
		s->o = carve(block, &off, R * dm->q_dim * a);
		s->attn_ws = carve(block, &off, b->attn_ws_floats * f);
	}
	if (b->n_mlp) {
		s->u = carve(block, &off, R * dm->inter * f);
		s->u2 = carve(block, &off, R * dm->inter * a);
	}
	if (b->dequant_bytes)
		s->wdq = carve(block, &off, b->dequant_bytes);
	if (b->fp8_ldq) {
		s->xq = carve(block, &off, R * b->fp8_ldq);
		s->xs = carve(block, &off, sizeof(float));
		s->xws = carve(block, &off, R * f);
	}
	return off;
}

/* Creates the cuBLASLt handle (its workspace) and allocates the scratch on first use
 * (reserve()); -ENOMEM or -EIO leave the backend as it was. */
static int scratch_reserve(struct cuda_backend *b)
{
	if (!b->blas) {
		b->blas = gpu_blas_create(b->gpu);
		if (!b->blas)
			return errno == ENOMEM ? -ENOMEM : -EIO;
	}
	if (b->scratch.block)
		return 0;
	size_t bytes = scratch_layout(b, NULL);
	void *block = NULL;
	int r = gpu_alloc(b->gpu, bytes, &block);
	if (r < 0)
		return r;
	b->scratch.block = block;
	scratch_layout(b, block);
	return 0;
}

/* Runs one call site, timed when profiling is on. */
#define SITE(kind, name, call)                                                                               \
	do {                                                                                                 \
		if (r >= 0)                                                                                  \
			r = gpu_profile_begin(g, GPU_PROFILE_##kind, name);                                  \
		if (r >= 0) {                                                                                \
			r = (call);                                                                          \
			int r_end_ = gpu_profile_end(g);                                                     \
			if (r >= 0)                                                                          \
				r = r_end_;                                                                  \
		}                                                                                            \
	} while (0)

/* Bytes from the start of an act buffer of row stride ld to row `row`. */
static size_t act_at(const struct cuda_backend *b, int row, int ld)
{
	return (size_t)row * (size_t)ld * b->act_bytes;
}

/* Queues the layers of pass ps (its ids, spliced rows, positions and decode descriptors already
 * on the device) and leaves the final hidden state of its rows in scratch.h. */
static int queue_layers(struct cuda_backend *b, const struct cuda_pass *ps)
{
	const struct engine_model *m = b->base.model;
	const struct lm_config *c = &m->cfg;
	const struct lm_dims *dm = &b->dm;
	struct cuda_scratch *sc = &b->scratch;
	struct gpu_context *g = b->gpu;
	const enum gpu_dtype act = b->act, w = b->act;
	const struct gpu_seq_row *rows = b->dec.rows;
	const int T = ps->n_rows, nd = ps->n_dec;
	int r = 0;

	SITE(KERNEL, "embed",
	     gpu_embed(g, b->lw_embed, b->embed_dtype, dm->vocab, dm->d, ps->ids, T,
		       ps->n_spliced ? sc->spliced : NULL, ps->n_spliced, sc->h));
	for (int l = 0; l < c->n_layers && r >= 0; l++) {
		const struct cuda_layer_w *L = &b->lw[l];
		SITE(KERNEL, "add_rmsnorm",
		     gpu_add_rmsnorm(g, sc->h, NULL, L->norm, T, dm->d, c->eps, sc->xn, act, dm->d));
		switch (m->layers[l].kind) {
		case LM_LAYER_MAMBA: {
			size_t st_off = mamba_offset(b, mamba_index(m, l)) / sizeof(float);
			const float *dt_raw = sc->zx + dm->d_in + dm->conv_dim;
			SITE(GEMM, "mamba.in_proj",
			     linear(b, &L->in_proj, dm->in_rows, dm->d, sc->xn, dm->d, T, sc->zx,
				    GPU_DTYPE_F32, dm->in_rows, false));
			if (nd) {
				SITE(KERNEL, "mamba_conv_silu_rows",
				     gpu_mamba_conv_silu_rows(g, &b->md, nd, sc->zx + dm->d_in, dm->in_rows,
							      L->conv_w, w, L->conv_b, rows, st_off, sc->xc,
							      dm->conv_dim));
				SITE(KERNEL, "mamba_ssm_step_rows",
				     gpu_mamba_ssm_step_rows(g, &b->md, nd, sc->xc, dm->conv_dim, dt_raw,
							     dm->in_rows, L->dt_bias, L->a_log, L->d,
							     c->dt_min, c->dt_max, rows,
							     st_off + conv_floats(dm), sc->y, dm->d_in));
			}
			for (int i = 0; i < ps->n_runs && r >= 0; i++) {
				const struct cuda_run *run = &ps->runs[i];
				float *st = (float *)run->s->fixed + st_off, *ssm = st + conv_floats(dm);
				const size_t row = (size_t)run->row;
				float *xc = sc->xc + row * dm->conv_dim, *y = sc->y + row * dm->d_in;
				const float *dt = dt_raw + row * dm->in_rows;
				SITE(KERNEL, "mamba_conv_silu",
				     gpu_mamba_conv_silu(g, &b->md, run->T,
							 sc->zx + row * dm->in_rows + dm->d_in, dm->in_rows,
							 L->conv_w, w, L->conv_b, st, xc, dm->conv_dim));
				if (run->T == 1)
					SITE(KERNEL, "mamba_ssm_step",
					     gpu_mamba_ssm_step(g, &b->md, xc, dt, L->dt_bias, L->a_log, L->d,
								c->dt_min, c->dt_max, ssm, y));
				else
					SITE(KERNEL, "mamba_ssd",
					     gpu_mamba_ssd(g, &b->md, run->T, xc, dm->conv_dim, dt,
							   dm->in_rows, L->dt_bias, L->a_log, L->d, c->dt_min,
							   c->dt_max, ssm, y, dm->d_in, sc->ssd_ws));
			}
			SITE(KERNEL, "mamba_gated_rmsnorm",
			     gpu_mamba_gated_rmsnorm(g, &b->md, T, sc->y, dm->d_in, sc->zx, dm->in_rows,
						     L->gnorm, c->eps, sc->yn, dm->d_in, act));
			SITE(GEMM, "mamba.out_proj",
			     linear(b, &L->out_proj, dm->d, dm->d_in, sc->yn, dm->d_in, T, sc->h,
				    GPU_DTYPE_F32, dm->d, true));
			break;
		}
		case LM_LAYER_ATTENTION: {
			int ai = attn_index(m, l);
			SITE(GEMM, "attn.q_proj",
			     linear(b, &L->q, dm->q_dim, dm->d, sc->xn, dm->d, T, sc->q, GPU_DTYPE_F32,
				    dm->q_dim, false));
			SITE(GEMM, "attn.k_proj",
			     linear(b, &L->k, dm->kv_dim, dm->d, sc->xn, dm->d, T, sc->knew, act, dm->kv_dim,
				    false));
			SITE(GEMM, "attn.v_proj",
			     linear(b, &L->v, dm->kv_dim, dm->d, sc->xn, dm->d, T, sc->vnew, act, dm->kv_dim,
				    false));
			if (nd) {
				SITE(KERNEL, "kv_append_rows",
				     gpu_kv_append_rows(g, sc->knew, sc->vnew, act, dm->kv_dim, nd, rows, ai));
				SITE(KERNEL, "attention_rows",
				     gpu_attention_rows(g, sc->q, dm->q_dim, act, dm->hq, dm->hkv, dm->dh, nd,
							rows, ai, ps->dec_max_len, sc->o, act, dm->q_dim,
							sc->attn_ws));
			}
			for (int i = 0; i < ps->n_runs && r >= 0; i++) {
				const struct cuda_run *run = &ps->runs[i];
				struct cuda_seq *s = run->s;
				void *kc = kv_at(b, s->kv, s->kv_cap, ai, 0);
				void *vc = kv_at(b, s->kv, s->kv_cap, ai, 1);
				size_t kv_off = act_at(b, run->row, dm->kv_dim);
				SITE(KERNEL, "kv_append",
				     gpu_kv_append(g, (char *)sc->knew + kv_off, (char *)sc->vnew + kv_off,
						   kc, vc, act, dm->kv_dim, run->T, sc->pos + i));
				SITE(KERNEL, "attention",
				     gpu_attention(g, sc->q + (size_t)run->row * dm->q_dim, dm->q_dim, kc, vc,
						   act, dm->hq, dm->hkv, dm->dh, run->T, sc->pos + i, run->n0,
						   run->max_len,
						   (char *)sc->o + act_at(b, run->row, dm->q_dim), act,
						   dm->q_dim, sc->attn_ws));
			}
			SITE(GEMM, "attn.o_proj",
			     linear(b, &L->o, dm->d, dm->q_dim, sc->o, dm->q_dim, T, sc->h, GPU_DTYPE_F32,
				    dm->d, true));
			break;
		}
		case LM_LAYER_MLP:
			SITE(GEMM, "mlp.up",
			     linear(b, &L->up, dm->inter, dm->d, sc->xn, dm->d, T, sc->u, GPU_DTYPE_F32,
				    dm->inter, false));
			SITE(KERNEL, "relu2", gpu_relu2(g, sc->u, sc->u2, act, (size_t)T * dm->inter));
			SITE(GEMM, "mlp.down",
			     linear(b, &L->down, dm->d, dm->inter, sc->u2, dm->inter, T, sc->h, GPU_DTYPE_F32,
				    dm->d, true));
			break;
		}
	}
	return r;
}

/* Queues the final norm and lm_head of rows [first, first + n) of scratch.h into `logits`
 * (scratch.logits: n <= CUDA_LOGIT_ROWS; dec.logits: n <= dec.cap). */
static int queue_logits_to(struct cuda_backend *b, int first, int n, float *logits)
{
	const struct lm_dims *dm = &b->dm;
	struct cuda_scratch *sc = &b->scratch;
	struct gpu_context *g = b->gpu;
	int r = 0;
	SITE(KERNEL, "add_rmsnorm",
	     gpu_add_rmsnorm(g, sc->h + (size_t)first * dm->d, NULL, b->lw_norm_f, n, dm->d,
			     b->base.model->cfg.eps, sc->xn, b->act, dm->d));
	SITE(GEMM, "lm_head",
	     linear(b, &b->lw_lm_head, dm->vocab, dm->d, sc->xn, dm->d, n, logits, GPU_DTYPE_F32, dm->vocab,
		    false));
	return r;
}

static int queue_logits(struct cuda_backend *b, int first, int n)
{
	return queue_logits_to(b, first, n, b->scratch.logits);
}

/* Stages the inputs of batch positions [p, p + T): their ids into ids[0..T) (host), and their
 * spliced rows into scratch.spliced from row *n_spliced on (host rows uploaded, device rows copied
 * on the device, consecutive rows of one buffer in one copy), advancing *n_spliced. */
static int stage_inputs(struct cuda_backend *b, const struct backend_batch *batch, size_t p, int T,
			int32_t *ids, int *n_spliced)
{
	const size_t row = (size_t)b->dm.d * sizeof(float);
	int r = 0;
	for (int t = 0; t < T;) {
		const float *e = batch->embeds ? batch->embeds[p + t] : NULL;
		const float *de = batch->device_embeds ? batch->device_embeds[p + t] : NULL;
		float *dst = b->scratch.spliced + (size_t)*n_spliced * b->dm.d;
		if (e) {
			r = gpu_copy_to_device(b->gpu, dst, e, row);
			ids[t++] = -1 - (*n_spliced)++;
		} else if (de) {
			int n = 1;
			while (t + n < T && batch->device_embeds[p + t + n] == de + (size_t)n * b->dm.d &&
			       !(batch->embeds && batch->embeds[p + t + n]))
				n++;
			r = gpu_copy_on_device(b->gpu, dst, de, (size_t)n * row);
			for (int i = 0; i < n; i++)
				ids[t++] = -1 - (*n_spliced)++;
		} else {
			ids[t] = batch->tokens[p + t];
			t++;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Copies the logits of the wanted positions among [p, p + T), whose hidden states are rows
 * [row, row + T) of scratch.h, to the host, CUDA_LOGIT_ROWS at a time. */
static int fetch_logits(struct cuda_backend *b, float *const *dst, size_t p, int T, int row)
{
	const size_t vocab = (size_t)b->dm.vocab;
	for (int t = 0; t < T;) {
		if (!dst[p + t]) {
			t++;
			continue;
		}
		int n = 1;
		while (t + n < T && n < CUDA_LOGIT_ROWS && dst[p + t + n])
			n++;
		int r = queue_logits(b, row + t, n);
		for (int i = 0; i < n && r >= 0; i++)
			r = gpu_copy_to_host(b->gpu, dst[p + t + i], b->scratch.logits + (size_t)i * vocab,
					     vocab * sizeof(float));
		if (r < 0)
			return r;
		t += n;
	}
	return 0;
}

/* One decode step of s through its captured graph (captured on its second use, and again when the KV
 * block moved); the id and position are already uploaded (scratch.ids[0], scratch.pos[0]).
 * Leaves the logits in scratch.logits row 0.
 *
 * Warm-up: the backend's first lone step runs the same work eagerly instead, and the graphs are
 * captured from the next one on (decode_rows does the same per bucket). With lazy module loading
 * (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) a kernel or cuBLASLt function is
 * loaded at its first launch, and a driver older than CUDA 12.3 (R545) cannot load one during a
 * capture: the capture would fail. Eager first, every function the graph holds is loaded (and
 * every GEMM's algorithm chosen, refusals included) before any capture; a CUDA 12.2 build on an
 * R535 driver needs it, CUDA 13's R580+ drivers do not, and it costs one eager step. The
 * emulation fails such a capture unless HOLOD_GPU_EMU_CAPTURE_LOAD=allow
 * (docs/design/gpu-testing.md). */
static int decode_graph(struct cuda_backend *b, struct cuda_seq *s, int n0)
{
	if (!s->graph || s->graph_kv != s->kv || s->graph_cap != s->kv_cap) {
		gpu_graph_destroy(s->graph);
		s->graph = NULL;
		struct cuda_run run = {.s = s, .T = 1, .n0 = n0, .max_len = MAX(s->kv_cap, 1)};
		struct cuda_pass ps = {.n_rows = 1, .ids = b->scratch.ids, .n_runs = 1, .runs = &run};
		if (!b->lone_warm) {
			int r = queue_layers(b, &ps);
			if (r >= 0)
				r = queue_logits(b, 0, 1);
			if (r >= 0)
				b->lone_warm = true;
			return r;
		}
		int r = gpu_graph_begin(b->gpu);
		if (r < 0)
			return r;
		r = queue_layers(b, &ps);
		if (r >= 0)
			r = queue_logits(b, 0, 1);
		if (r < 0) {
			(void)gpu_graph_abort(b->gpu);
			return r;
		}
		r = gpu_graph_end(b->gpu, &s->graph);
		if (r < 0)
			return r;
		s->graph_kv = s->kv;
		s->graph_cap = s->kv_cap;
		b->graph_captures++;
	}
	return gpu_graph_launch(b->gpu, s->graph);
}

/* Whether span i is one plain token (no spliced row): a decode row of the batched pass. */
static bool is_decode_span(const struct backend_batch *batch, size_t i)
{
	const struct backend_span *sp = &batch->spans[i];
	return sp->n == 1 && !(batch->embeds && batch->embeds[sp->first]) &&
	       !(batch->device_embeds && batch->device_embeds[sp->first]);
}

/* The batch's decode rows; with fewer than 2, every span runs on its own. */
static size_t decode_rows_of(const struct backend_batch *batch)
{
	size_t n = 0;
	for (size_t i = 0; i < batch->n_spans; i++)
		n += is_decode_span(batch, i);
	return n;
}

/* The bucket of n rows (1 <= n <= CUDA_MAX_DECODE): the power of two from 2 up, and its log2. */
static int bucket_of(int n, int *ret_log2)
{
	int k = 1;
	while ((1 << k) < n)
		k++;
	*ret_log2 = k;
	return 1 << k;
}

static void decode_finish(struct cuda_backend *b)
{
	for (int k = 0; k <= CUDA_DECODE_BUCKETS; k++) {
		gpu_graph_destroy(b->dec.graph[k]);
		b->dec.graph[k] = NULL;
	}
	gpu_free(b->gpu, b->dec.block);
	b->dec.block = NULL;
	b->dec.cap = 0;
}

/* Makes the decode block hold the bucket of `rows` rows (reserve()). Growing it moves it, so
 * every graph captured over the old one goes. -ENOMEM or -EIO leave it as it was. */
static int decode_reserve(struct cuda_backend *b, int rows)
{
	int k, cap = bucket_of(rows, &k);
	if (cap <= b->dec.cap)
		return 0;
	size_t off = 0;
	carve(NULL, &off, (size_t)cap * sizeof(struct gpu_seq_row) + (size_t)cap * sizeof(int32_t));
	size_t logits_at = off;
	carve(NULL, &off, (size_t)cap * b->dm.vocab * sizeof(float));
	void *block = NULL;
	int r = gpu_alloc(b->gpu, off, &block);
	if (r < 0)
		return r;
	decode_finish(b);
	b->dec.block = block;
	b->dec.cap = cap;
	b->dec.rows = block;
	b->dec.ids = (int32_t *)(b->dec.rows + cap);
	b->dec.logits = (float *)((char *)block + logits_at);
	return 0;
}

/* Fills the host staging of dec (rows [cap], then ids [cap]) for the decode rows of n sequences,
 * spans[idx[i]] of the batch, padded with inactive rows up to `rows`. */
static void stage_decode(struct cuda_backend *b, const struct backend_batch *batch, const size_t *idx, int n,
			 int rows)
{
	struct gpu_seq_row *d = (struct gpu_seq_row *)b->dec.staging;
	int32_t *ids = (int32_t *)(d + b->dec.cap);
	for (int i = 0; i < rows; i++) {
		if (i >= n) {
			d[i] = (struct gpu_seq_row){.pos = -1};
			ids[i] = 0;
			continue;
		}
		const struct backend_span *sp = &batch->spans[idx[i]];
		struct cuda_seq *s = (struct cuda_seq *)sp->seq;
		d[i] = (struct gpu_seq_row){.fixed = s->fixed,
					    .kv = s->kv,
					    .pos = s->base.n_tokens,
					    .kv_cap = s->kv_cap};
		ids[i] = batch->tokens[sp->first];
	}
}

/* Copies each wanted logits row of the n decode rows (in dec.logits) to the host. */
static int copy_decode_logits(struct cuda_backend *b, const struct backend_batch *batch, const size_t *idx,
			      int n)
{
	int r = 0;
	for (int i = 0; i < n && r >= 0 && batch->logits; i++) {
		float *dst = batch->logits[batch->spans[idx[i]].first];
		if (dst)
			r = gpu_copy_to_host(b->gpu, dst, b->dec.logits + (size_t)i * b->dm.vocab,
					     (size_t)b->dm.vocab * sizeof(float));
	}
	return r;
}

/* The n decode rows' sequences have their token. */
static void advance_decoders(const struct backend_batch *batch, const size_t *idx, int n)
{
	for (int i = 0; i < n; i++)
		batch->spans[idx[i]].seq->n_tokens++;
}

/* Queues the logits of the n decode rows (rows [0, n) of scratch.h) into dec.logits and copies
 * each wanted one to the host. */
static int fetch_decode_logits(struct cuda_backend *b, const struct backend_batch *batch, const size_t *idx,
			       int n)
{
	bool any = false;
	for (int i = 0; i < n && batch->logits; i++)
		any |= batch->logits[batch->spans[idx[i]].first] != NULL;
	if (!any)
		return 0;
	int r = queue_logits_to(b, 0, n, b->dec.logits);
	return r < 0 ? r : copy_decode_logits(b, batch, idx, n);
}

/* Every length up to the session limit bounds the decode rows' attention: the grid then never
 * depends on the sequences, so a bucket's graph serves any. The split count is then
 * GPU_ATTN_MAX_SPLITS / rows, so the scratch is at most GPU_ATTN_MAX_SPLITS * hq * (dh + 2)
 * floats, within what attn_ws holds for CUDA_MAX_RUN rows. */
#define CUDA_DECODE_MAX_LEN ENGINE_SESSION_MAX_TOKENS

/* One pass over the decode rows of n sequences (1 <= n <= dec.cap) alone: spans[i] of the batch
 * for i in idx[0..n). Their descriptors and ids go up in one copy, padded to the bucket with
 * inactive rows; then the bucket's graph (captured on its second use, the first running
 * eagerly: decode_graph's warm-up) or, profiling or with graphs off, the same work eagerly; then
 * each wanted logits row comes down. */
static int decode_rows(struct cuda_backend *b, const struct backend_batch *batch, const size_t *idx, int n)
{
	int k, bucket = bucket_of(n, &k), cap = b->dec.cap;
	stage_decode(b, batch, idx, n, bucket);
	int r = gpu_copy_to_device(b->gpu, b->dec.rows, b->dec.staging,
				   (size_t)cap * (sizeof(struct gpu_seq_row) + sizeof(int32_t)));
	if (r < 0)
		return r;
	const struct cuda_pass ps = {.n_rows = bucket,
				     .n_dec = bucket,
				     .dec_max_len = CUDA_DECODE_MAX_LEN,
				     .ids = b->dec.ids};
	if (b->graphs && !gpu_profile_enabled(b->gpu) && b->dec.warm[k]) {
		if (!b->dec.graph[k]) {
			r = gpu_graph_begin(b->gpu);
			if (r < 0)
				return r;
			r = queue_layers(b, &ps);
			if (r >= 0)
				r = queue_logits_to(b, 0, bucket, b->dec.logits);
			if (r < 0) {
				(void)gpu_graph_abort(b->gpu);
				return r;
			}
			r = gpu_graph_end(b->gpu, &b->dec.graph[k]);
			if (r < 0)
				return r;
			b->graph_captures++;
		}
		r = gpu_graph_launch(b->gpu, b->dec.graph[k]);
	} else {
		/* eager: profiling, graphs off, or the bucket's first pass (the warm-up before its
		 * capture: decode_graph) */
		r = queue_layers(b, &ps);
		if (r >= 0)
			r = queue_logits_to(b, 0, bucket, b->dec.logits);
		if (r >= 0)
			b->dec.warm[k] = true;
	}
	if (r >= 0)
		r = copy_decode_logits(b, batch, idx, n);
	if (r < 0)
		return r;
	advance_decoders(batch, idx, n);
	return 0;
}

/* Runs pass ps (b->runs, after n_dec decode rows of spans[idx[i]]): stages and uploads its
 * inputs, queues its layers eagerly, brings the wanted logits down and advances its sequences.
 * A pass of one plain position of one sequence (a lone decode step) replays that sequence's
 * graph instead, unless profiling or graphs are off. */
static int run_pass(struct cuda_backend *b, const struct backend_batch *batch, struct cuda_pass *ps,
		    const size_t *idx)
{
	float *const *dst = batch->logits;
	int32_t *pos = b->io, *ids = b->io + CUDA_MAX_ROWS;
	int r = 0;
	if (ps->n_dec) {
		stage_decode(b, batch, idx, ps->n_dec, ps->n_dec);
		memcpy(ids, b->dec.staging + (size_t)b->dec.cap * sizeof(struct gpu_seq_row),
		       (size_t)ps->n_dec * sizeof(int32_t));
		r = gpu_copy_to_device(b->gpu, b->dec.rows, b->dec.staging,
				       (size_t)ps->n_dec * sizeof(struct gpu_seq_row));
	}
	ps->n_spliced = 0;
	for (int i = 0; i < ps->n_runs && r >= 0; i++) {
		const struct cuda_run *run = &ps->runs[i];
		pos[i] = run->n0;
		r = stage_inputs(b, batch, run->p, run->T, ids + run->row, &ps->n_spliced);
	}
	if (r >= 0)
		r = gpu_copy_to_device(b->gpu, b->scratch.pos, b->io,
				       (CUDA_MAX_ROWS + (size_t)ps->n_rows) * sizeof(int32_t));
	if (r < 0)
		return r;
	ps->ids = b->scratch.ids;
	const struct cuda_run *one = &ps->runs[0];
	if (ps->n_dec == 0 && ps->n_runs == 1 && one->T == 1 && ps->n_spliced == 0 && dst && dst[one->p] &&
	    b->graphs && !gpu_profile_enabled(b->gpu)) {
		r = decode_graph(b, one->s, one->n0);
		if (r >= 0)
			r = gpu_copy_to_host(b->gpu, dst[one->p], b->scratch.logits,
					     (size_t)b->dm.vocab * sizeof(float));
	} else {
		r = queue_layers(b, ps);
		if (r >= 0 && ps->n_dec)
			r = fetch_decode_logits(b, batch, idx, ps->n_dec);
		for (int i = 0; i < ps->n_runs && r >= 0 && dst; i++)
			r = fetch_logits(b, dst, ps->runs[i].p, ps->runs[i].T, ps->runs[i].row);
	}
	if (r < 0)
		return r;
	advance_decoders(batch, idx, ps->n_dec);
	for (int i = 0; i < ps->n_runs; i++)
		ps->runs[i].s->base.n_tokens += ps->runs[i].T;
	return 0;
}

/* The spans that are not decode rows (every span when `rows` is false), with the n_dec decode
 * rows spans[idx[i]] joining the first pass: in steps, step k taking run k of every span (its
 * positions [k * run_len, (k + 1) * run_len), as the span is cut alone), a step's runs packed
 * in span order into passes of at most pass_rows rows (a run that would not fit starts the next
 * pass, even when the pass so far holds only decode rows). */
static int run_spans(struct cuda_backend *b, const struct backend_batch *batch, bool rows, const size_t *idx,
		     int n_dec)
{
	struct cuda_pass ps = {.n_rows = n_dec,
			       .n_dec = n_dec,
			       .dec_max_len = CUDA_DECODE_MAX_LEN,
			       .runs = b->runs};
	for (size_t k = 0;; k++) {
		bool more = false;
		for (size_t i = 0; i < batch->n_spans; i++) {
			const struct backend_span *sp = &batch->spans[i];
			size_t off = k * (size_t)b->run_len;
			if ((rows && is_decode_span(batch, i)) || off >= sp->n)
				continue;
			more = true;
			int T = (int)MIN(sp->n - off, (size_t)b->run_len);
			if (ps.n_rows + T > b->pass_rows) {
				int r = run_pass(b, batch, &ps, idx);
				if (r < 0)
					return r;
				ps = (struct cuda_pass){.runs = b->runs};
			}
			struct cuda_seq *s = (struct cuda_seq *)sp->seq;
			int n0 = s->base.n_tokens;
			b->runs[ps.n_runs++] = (struct cuda_run){.s = s,
								 .p = sp->first + off,
								 .row = ps.n_rows,
								 .T = T,
								 .n0 = n0,
								 .max_len = n0 + T};
			ps.n_rows += T;
		}
		if (!more) /* decode rows beside empty spans only */
			return ps.n_dec ? run_pass(b, batch, &ps, idx) : 0;
		/* the next step's runs follow from the states this one leaves */
		if (ps.n_runs) {
			int r = run_pass(b, batch, &ps, idx);
			if (r < 0)
				return r;
		}
		ps = (struct cuda_pass){.runs = b->runs};
	}
}

static int cuda_forward(struct engine_backend *base, const struct backend_batch *batch)
{
	struct cuda_backend *b = cb_of(base);
	const size_t n_dec = decode_rows_of(batch);
	const bool pure = n_dec == batch->n_spans;
	/* decode spans run as rows beside two or more sequences; a lone one replays its graph */
	const bool rows = n_dec >= 2 || (n_dec == 1 && !pure);
	size_t idx[CUDA_MAX_DECODE];
	int n = 0;
	size_t seen = 0;
	for (size_t i = 0; rows && i < batch->n_spans; i++) {
		if (!is_decode_span(batch, i))
			continue;
		idx[n++] = i;
		seen++;
		/* full passes of decode rows alone; the last (at most CUDA_MAX_DECODE rows) joins
		 * the other spans' first pass */
		if (n == CUDA_MAX_DECODE && (pure || seen < n_dec)) {
			if (decode_rows(b, batch, idx, n) < 0)
				return -EIO;
			n = 0;
		}
	}
	int r = 0;
	if (pure && rows) {
		/* a last single row pads to bucket 2 */
		if (n > 0)
			r = decode_rows(b, batch, idx, n);
	} else {
		r = run_spans(b, batch, rows, idx, n);
	}
	if (r < 0)
		return -EIO;
	/* the last pass's work (with no logits wanted) must have finished without error */
	return gpu_synchronize(b->gpu) < 0 ? -EIO : 0;
}

/* Resolves the weights' device pointers and the kernels' shapes (creation). */
static void forward_init(struct cuda_backend *b)
{
	const struct engine_model *m = b->base.model;
	const struct lm_dims *dm = &b->dm;
	enum tensor_dtype dt;
	b->act = b->base.precision == ENGINE_PRECISION_FP32 ? GPU_DTYPE_F32 : GPU_DTYPE_BF16;
	b->act_bytes = b->act == GPU_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
	b->lw_embed = backend_cuda_weight(&b->base, &m->embeddings, &dt);
	b->embed_dtype = gdt(dt);
	b->lw_norm_f = wptr(b, &m->norm_f);
	b->lw_lm_head = mat_of(b, &m->lm_head);
	b->lw = xcalloc((size_t)m->cfg.n_layers, sizeof(*b->lw));
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		struct cuda_layer_w *o = &b->lw[l];
		o->norm = wptr(b, &L->norm);
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			o->in_proj = mat_of(b, &L->mamba.in_proj);
			o->conv_w = wptr(b, &L->mamba.conv_w);
			o->conv_b = wptr(b, &L->mamba.conv_b);
			o->dt_bias = wptr(b, &L->mamba.dt_bias);
			o->a_log = wptr(b, &L->mamba.a_log);
			o->d = wptr(b, &L->mamba.d);
			o->gnorm = wptr(b, &L->mamba.norm);
			o->out_proj = mat_of(b, &L->mamba.out_proj);
			break;
		case LM_LAYER_ATTENTION:
			o->q = mat_of(b, &L->attn.q);
			o->k = mat_of(b, &L->attn.k);
			o->v = mat_of(b, &L->attn.v);
			o->o = mat_of(b, &L->attn.o);
			break;
		case LM_LAYER_MLP:
			o->up = mat_of(b, &L->mlp.up);
			o->down = mat_of(b, &L->mlp.down);
			b->n_mlp++;
			break;
		}
	}
	b->md = (struct gpu_mamba_dims){
		.n_heads = dm->H,
		.head_dim = dm->P,
		.state = dm->N,
		.groups = dm->G,
		.conv_k = dm->K,
		.chunk = dm->chunk,
		.state_dtype = b->base.ssm_state == ENGINE_PRECISION_BF16 ? GPU_DTYPE_BF16 : GPU_DTYPE_F32,
	};
	if (b->n_attn)
		b->attn_ws_floats =
			gpu_attention_scratch_floats(CUDA_MAX_RUN, ENGINE_SESSION_MAX_TOKENS, dm->hq, dm->dh);
	b->graphs = true;
	b->run_len = CUDA_MAX_RUN;
	b->pass_rows = CUDA_MAX_ROWS;
}

static int cuda_profile(struct engine_backend *base, bool on)
{
	return gpu_profile_enable(cb_of(base)->gpu, on);
}

static int cuda_profile_report(struct engine_backend *base, char ***ret_lines)
{
	struct gpu_context *g = cb_of(base)->gpu;
	if (!gpu_profile_enabled(g))
		return -EINVAL;
	int n = gpu_profile_report(g, ret_lines);
	if (n < 0)
		return n;
	/* then what crossed the bus, per direction that saw copies */
	struct gpu_copy_counts c;
	gpu_profile_copies(g, &c);
	const struct {
		const char *dir;
		uint64_t calls, bytes;
	} dirs[] = {{"to_device", c.to_device_calls, c.to_device_bytes},
		    {"to_host", c.to_host_calls, c.to_host_bytes},
		    {"on_device", c.on_device_calls, c.on_device_bytes}};
	char **lines = realloc(*ret_lines, ((size_t)n + ARRAY_SIZE(dirs) + 1) * sizeof(*lines));
	if (!lines) {
		gpu_profile_lines_free(*ret_lines);
		*ret_lines = NULL;
		return -ENOMEM;
	}
	*ret_lines = lines;
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (!dirs[i].calls)
			continue;
		if (asprintf(&lines[n], "copy %s calls=%llu bytes=%llu", dirs[i].dir,
			     (unsigned long long)dirs[i].calls, (unsigned long long)dirs[i].bytes) < 0) {
			lines[n] = NULL;
			gpu_profile_lines_free(lines);
			*ret_lines = NULL;
			return -ENOMEM;
		}
		lines[++n] = NULL;
	}
	return n;
}

static void cuda_info(const struct engine_backend *base, struct engine_backend_info *ret)
{
	const struct cuda_backend *b = cb_of(base);
	snprintf(ret->device, sizeof(ret->device), "%s", b->device_name);
	ret->memory_total = b->memory_total;
	uint64_t used = ret->state_bytes;
	ret->memory_free = b->memory_free_after_upload > used ? b->memory_free_after_upload - used : 0;
	ret->has_plan = true;
	ret->plan = b->plan;
}

uint64_t backend_cuda_scratch_bytes(const struct engine_backend *base)
{
	struct cuda_backend *b = cb_of(base);
	struct cuda_scratch keep = b->scratch;
	uint64_t n = scratch_layout(b, NULL);
	b->scratch = keep;
	size_t off = 0;
	carve(NULL, &off, (size_t)CUDA_MAX_DECODE * (sizeof(struct gpu_seq_row) + sizeof(int32_t)));
	carve(NULL, &off, (size_t)CUDA_MAX_DECODE * b->dm.vocab * sizeof(float));
	return n + off;
}

static void cuda_destroy(struct engine_backend *base)
{
	struct cuda_backend *b = cb_of(base);
	backend_cuda_vision_finish(base);
	if (b->gpu) {
		decode_finish(b);
		gpu_free(b->gpu, b->scratch.block);
		gpu_free(b->gpu, b->weights);
	}
	gpu_blas_destroy(b->blas);
	free(b->lw);
	pthread_mutex_destroy(&b->lock);
	gpu_context_destroy(b->gpu);
	/* After a sticky error the context is unusable: this backend was its last user (its
	 * sessions went first), so reset the device for the next one. */
	if (gpu_device_fault(NULL, 0) && gpu_device_reset(base->device) < 0)
		log_error("CUDA device %d: the reset after a device fault failed", base->device);
	free(b->table);
	free(b);
}

/* The ops as the engine calls them: each under the backend's lock. */
static struct backend_seq *locked_seq_create(struct engine_backend *b, int max_tokens)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	struct backend_seq *r = cuda_seq_create(b, max_tokens);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static void locked_seq_destroy(struct backend_seq *seq)
{
	if (!seq)
		return;
	struct cuda_backend *cb = cb_of(seq->backend);
	pthread_mutex_lock(&cb->lock);
	cuda_seq_destroy(seq);
	pthread_mutex_unlock(&cb->lock);
}

static void locked_seq_reset(struct backend_seq *seq)
{
	struct cuda_backend *cb = cb_of(seq->backend);
	pthread_mutex_lock(&cb->lock);
	cuda_seq_reset(seq);
	pthread_mutex_unlock(&cb->lock);
}

static int locked_seq_copy(struct backend_seq *dst, const struct backend_seq *src)
{
	struct cuda_backend *cb = cb_of(dst->backend);
	pthread_mutex_lock(&cb->lock);
	int r = cuda_seq_copy(dst, src);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_seq_export(const struct backend_seq *seq, struct backend_seq_state *ret)
{
	struct cuda_backend *cb = cb_of(seq->backend);
	pthread_mutex_lock(&cb->lock);
	int r = cuda_seq_export(seq, ret);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_seq_import(struct backend_seq *seq, const struct backend_seq_state *st)
{
	struct cuda_backend *cb = cb_of(seq->backend);
	pthread_mutex_lock(&cb->lock);
	int r = cuda_seq_import(seq, st);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_reserve(struct engine_backend *b, const struct backend_batch *batch)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	int r = cuda_reserve(b, batch);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_forward(struct engine_backend *b, const struct backend_batch *batch)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	int r = cuda_forward(b, batch);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_profile(struct engine_backend *b, bool on)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	int r = cuda_profile(b, on);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_profile_report(struct engine_backend *b, char ***ret_lines)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	int r = cuda_profile_report(b, ret_lines);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_vision_preprocess(struct engine_backend *b, const struct backend_vision_tower *t,
				    const struct engine_image *img, const struct engine_vision_preprocess *p,
				    int n_tiles, float *pix)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	int r = backend_cuda_vision_preprocess(b, t, img, p, n_tiles, pix);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

/* vision_encode_tiles: the tiles in one batch, or a resumable encode's steps one tile each
 * (the lock taken per tile, so other work interleaves as between two slices). */
static int locked_vision_encode_tiles(struct engine_backend *b, const struct backend_vision_tower *t,
				      const float *pix, int n_tiles, float *out,
				      struct backend_vision_cursor *cur, int max_steps)
{
	struct cuda_backend *cb = cb_of(b);
	int r = 0;

	if (!cur) {
		pthread_mutex_lock(&cb->lock);
		r = backend_cuda_vision_encode_tiles(b, t, pix, n_tiles, out);
		pthread_mutex_unlock(&cb->lock);
		return r;
	}
	const size_t tile_floats = (size_t)3 * t->pre->tile_size * t->pre->tile_size,
		     tile_out = (size_t)t->tokens_per_tile * (size_t)t->w->out_dim;
	for (int n = 0; r == 0 && n < max_steps && cur->done < n_tiles; n++) {
		const size_t i = (size_t)cur->done;
		pthread_mutex_lock(&cb->lock);
		r = backend_cuda_vision_encode_tiles(b, t, pix + i * tile_floats, 1, out + i * tile_out);
		pthread_mutex_unlock(&cb->lock);
		if (r == 0)
			cur->done++;
	}
	return r;
}

static int locked_rows_alloc(struct engine_backend *b, size_t n, const float *host, float **ret)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	int r = backend_cuda_rows_alloc(b, n, host, ret);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static int locked_rows_read(struct engine_backend *b, const float *dev, size_t n, float *out)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	int r = backend_cuda_rows_read(b, dev, n, out);
	pthread_mutex_unlock(&cb->lock);
	return r;
}

static void locked_rows_free(struct engine_backend *b, float *dev)
{
	struct cuda_backend *cb = cb_of(b);
	pthread_mutex_lock(&cb->lock);
	backend_cuda_rows_free(b, dev);
	pthread_mutex_unlock(&cb->lock);
}

static const struct backend_ops cuda_ops = {
	.name = "cuda",
	.destroy = cuda_destroy,
	.seq_create = locked_seq_create,
	.seq_destroy = locked_seq_destroy,
	.seq_reset = locked_seq_reset,
	.seq_copy = locked_seq_copy,
	.seq_state_bytes = cuda_seq_state_bytes,
	.seq_export = locked_seq_export,
	.seq_import = locked_seq_import,
	.reserve = locked_reserve,
	.forward = locked_forward,
	.profile = locked_profile,
	.profile_report = locked_profile_report,
	/* tiles and rows in device memory; a resumable encode's step is a tile */
	.vision = {.device = true, .max_tiles = VISION_CUDA_MAX_TILES, .step = BACKEND_VISION_STEP_TILE},
	.vision_preprocess = locked_vision_preprocess,
	.vision_encode_tiles = locked_vision_encode_tiles,
	.rows_alloc = locked_rows_alloc,
	.rows_read = locked_rows_read,
	.rows_free = locked_rows_free,
	.info = cuda_info,
};

/* Names a linear layer's matrix (or the lm_head) for a message. */
static void tensor_name(const struct engine_model *m, const struct tensor *t, char *out, size_t n)
{
	static const char *const names[3][4] = {{"mamba in_proj", "mamba out_proj"},
						{"attention q_proj", "k_proj", "v_proj", "o_proj"},
						{"MLP up_proj", "down_proj"}};
	snprintf(out, n, "a tensor");
	if (t == &m->lm_head) {
		snprintf(out, n, "the lm_head");
		return;
	}
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		const struct tensor *mats[4];
		int k = lm_layer_matrices(L, mats);
		for (int i = 0; i < k; i++)
			if (mats[i] == t)
				snprintf(out, n, "layer %d's %s", l,
					 names[L->kind == LM_LAYER_MAMBA     ? 0 :
					       L->kind == LM_LAYER_ATTENTION ? 1 :
									       2][i]);
	}
}

static int fail(int err, char *errbuf, size_t errlen, const char *format, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(int err, char *errbuf, size_t errlen, const char *format, ...)
{
	if (errbuf && errlen) {
		va_list ap;
		va_start(ap, format);
		vsnprintf(errbuf, errlen, format, ap);
		va_end(ap);
	}
	return -err;
}

/* The vision tower's shapes for the plan, from the checkpoint (false: none, or a random model). */
static bool plan_vision_of(const struct engine_model *m, struct device_plan_vision *ret)
{
	struct vision_weights w;
	char err[160];
	if (!m->files || vision_weights_load(&w, m->files, err, sizeof(err)) < 0)
		return false;
	const struct json_t *root = model_files_config_json(m->files);
	double tile = 512, tiles = 12; /* the checkpoint's defaults (model.md 1.1) */
	if (root) {
		(void)model_config_number(root, "force_image_size", &tile);
		(void)model_config_number(root, "max_num_tiles", &tiles);
	}
	*ret = (struct device_plan_vision){
		.width = w.width,
		.depth = w.depth,
		.mlp = w.mlp,
		.patch = w.patch,
		.prefix = w.n_prefix,
		.shuffle = w.shuffle,
		.proj_hidden = w.proj_hidden,
		.out_dim = w.out_dim,
		.tile = tile >= 1 && tile <= 4096 ? (int)tile : 512,
		/* the tiles and the thumbnail */
		.tiles = (tiles >= 1 && tiles <= ENGINE_VISION_MAX_TILES ? (int)tiles : 12) + 1,
	};
	vision_weights_finish(&w);
	return true;
}

/* The plan of m's weights in `weights` under opts (its context and vision) with `sessions`. */
static int plan_of(const struct engine_model *m, const struct engine_backend_options *opts,
		   enum engine_weights weights, const struct device_plan_vision *vision, int sessions,
		   struct engine_memory_plan *ret)
{
	bool conv_bias = false;
	for (int l = 0; l < m->cfg.n_layers; l++)
		conv_bias |= m->layers[l].kind == LM_LAYER_MAMBA && m->layers[l].mamba.conv_b.data;
	struct device_plan_args a = {
		.lm = &m->cfg,
		.tied = m->lm_head.data == m->embeddings.data,
		.conv_bias = conv_bias,
		.weights = weights,
		.precision = opts->precision,
		.ssm_state = opts->ssm_state,
		.vision = vision,
		.sessions = MAX(sessions, 0),
		.context = opts->plan_context,
	};
	return device_plan_compute(&a, ret);
}

struct engine_backend *backend_cuda_create(const struct engine_model *m,
					   const struct engine_backend_options *opts, char *errbuf,
					   size_t errlen)
{
	void *staging = NULL;
	int r = lm_model_check(m);
	if (r < 0) {
		fail(EINVAL, errbuf, errlen, "the model's tensors do not match its config");
		errno = EINVAL;
		return NULL;
	}
	if ((r = backend_ops_check(&cuda_ops, errbuf, errlen)) < 0) {
		errno = -r;
		return NULL;
	}
	struct cuda_backend *b = xcalloc(1, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
	backend_init(&b->base, &cuda_ops, m, opts); /* cannot fail: the table was checked */
	lm_dims_init(&b->dm, &m->cfg);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		b->n_mamba += m->layers[l].kind == LM_LAYER_MAMBA;
		b->n_attn += m->layers[l].kind == LM_LAYER_ATTENTION;
	}
	b->kv_elem = opts->precision == ENGINE_PRECISION_BF16 ? sizeof(uint16_t) : sizeof(float);
	b->quant = opts->weights == ENGINE_WEIGHTS_Q8 ? QUANT_Q8 :
		   opts->weights == ENGINE_WEIGHTS_Q4 ? QUANT_Q4
		   /* an FP8 checkpoint's layers are fp8 by default, as on the CPU */
		   :
		   opts->weights == ENGINE_WEIGHTS_FP8 || model_has_fp8(m) ? QUANT_FP8 :
									     -1;
	/* a holod-quantized checkpoint runs as stored (engine_backend_create() refused another
	 * --weights); its plain lm_head, if any, is quantized at upload as on the CPU */
	if (model_quant_format(m) >= 0)
		b->quant = model_quant_format(m);
	if (b->quant >= 0)
		snprintf(b->base.weights, sizeof(b->base.weights), "%s",
			 quant_format_desc((enum quant_format)b->quant)->name);

	struct gpu_device_info di;
	r = gpu_device_info(opts->device, &di);
	if (r < 0) {
		r = fail(-r, errbuf, errlen, "cannot query CUDA device %d (%s)", opts->device, strerror(-r));
		goto destroy;
	}
	snprintf(b->device_name, sizeof(b->device_name), "%s", di.name);
	/* fp8 is for the GPUs with FP8 tensor cores (cuBLASLt's FP8 matmul: sm_89 and up) */
	if (b->quant == QUANT_FP8 && di.compute_major * 10 + di.compute_minor < 89) {
		r = fail(EINVAL, errbuf, errlen,
			 "%s: fp8 needs a GPU with FP8 tensor cores, compute capability 8.9 or newer "
			 "(sm_89: Ada, sm_90: Hopper), but CUDA device %d (%s) is sm_%d%d: use "
			 "--weights q8 or q4%s",
			 model_has_fp8(m) ? "the checkpoint's linear layers are fp8 (NVIDIA ModelOpt)" :
					    "--weights fp8",
			 opts->device, di.name, di.compute_major, di.compute_minor,
			 model_has_fp8(m) ? " (requantized at load), or --backend cpu" : "");
		goto destroy;
	}
	b->gpu = gpu_context_create(opts->device);
	if (!b->gpu) {
		r = fail(errno, errbuf, errlen, "cannot open CUDA device %d (%s): %s", opts->device, di.name,
			 strerror(errno));
		goto destroy;
	}

	size_t need = plan_weights(b), free_b = 0, total_b = 0;
	b->fp8_gemm = b->fp8_ldq > 0;
	b->base.weight_bytes = need;
	r = gpu_memory_info(b->gpu, &free_b, &total_b);
	if (r < 0) {
		r = fail(-r, errbuf, errlen, "cannot read the memory of CUDA device %d (%s)", opts->device,
			 di.name);
		goto destroy;
	}
	b->memory_total = total_b;
	/* the plan, from the shapes (its weights are plan_weights()'s block, byte for byte) */
	const enum engine_weights fmt = b->quant == QUANT_Q8  ? ENGINE_WEIGHTS_Q8 :
					b->quant == QUANT_Q4  ? ENGINE_WEIGHTS_Q4 :
					b->quant == QUANT_FP8 ? ENGINE_WEIGHTS_FP8 :
								ENGINE_WEIGHTS_BF16;
	struct device_plan_vision pv;
	const struct device_plan_vision *vision = opts->plan_vision && plan_vision_of(m, &pv) ? &pv : NULL;
	if (plan_of(m, opts, fmt, vision, opts->plan_sessions, &b->plan) < 0 || b->plan.weight_bytes != need) {
		r = fail(EINVAL, errbuf, errlen,
			 "the memory plan of the model's %zu bytes of weights "
			 "came to %llu bytes (a bug: please report it)",
			 need, (unsigned long long)b->plan.weight_bytes);
		goto destroy;
	}
	device_plan_fit(&b->plan, free_b);
	/* the sessions that must fit: plan_sessions_min of them (all when 0) */
	const int must = opts->plan_sessions_min >= 1 ? MIN(opts->plan_sessions_min, opts->plan_sessions) :
							opts->plan_sessions;
	if (opts->plan_sessions < 1) {
		/* no sessions asked for: the weights and the prefill's slice, what a forward needs
		 * before its scratch (the sessions are then admitted against what is left) */
		if (b->quant >= 0 && (need > free_b || b->dequant_bytes > free_b - need)) {
			r = fail(ENOMEM, errbuf, errlen,
				 "the model's weights need %zu bytes of device memory in %s (%s "
				 "activations) and its prefill %zu bytes of dequantized rows, but CUDA "
				 "device %d (%s) has %zu bytes free",
				 need, b->base.weights, engine_precision_name(opts->precision),
				 b->dequant_bytes, opts->device, di.name, free_b);
			goto destroy;
		}
		if (need > free_b) {
			r = fail(ENOMEM, errbuf, errlen,
				 "the model's weights need %zu bytes of device memory in %s, but CUDA "
				 "device %d (%s) has %zu bytes free",
				 need, engine_precision_name(opts->precision), opts->device, di.name, free_b);
			goto destroy;
		}
	} else if (b->plan.sessions_fit < must) {
		char name[160], dev[320], msg[1024];
		/* the sentence names what the sessions that must fit need */
		struct engine_memory_plan least;
		if (plan_of(m, opts, fmt, vision, must, &least) < 0)
			least = b->plan;
		device_plan_fit(&least, free_b);
		const char *dir = m->files ? model_files_dir(m->files) : NULL;
		const char *slash = dir ? strrchr(dir, '/') : NULL;
		snprintf(name, sizeof(name), "%s", !dir ? "the model" : slash && slash[1] ? slash + 1 : dir);
		snprintf(dev, sizeof(dev), "CUDA device %d (%s)", opts->device, di.name);
		/* the formats this backend could hold a plain checkpoint in instead (fp8 where the
		 * device has FP8 tensor cores) */
		struct engine_memory_plan alt[3];
		const struct engine_memory_plan *alts[4] = {NULL, NULL, NULL, NULL};
		const enum engine_weights others[3] = {ENGINE_WEIGHTS_Q8, ENGINE_WEIGHTS_FP8,
						       ENGINE_WEIGHTS_Q4};
		bool has_fp8 = di.compute_major * 10 + di.compute_minor >= 89;
		for (int i = 0, n = 0; i < 3 && model_quant_format(m) < 0; i++) {
			if (others[i] == ENGINE_WEIGHTS_FP8 && !has_fp8)
				continue;
			if (plan_of(m, opts, others[i], vision, must, &alt[n]) < 0)
				continue;
			device_plan_fit(&alt[n], free_b);
			alts[n] = &alt[n];
			n++;
		}
		device_plan_refusal(&least, name, dev, alts, msg, sizeof(msg));
		r = fail(ENOMEM, errbuf, errlen, "%s", msg);
		goto destroy;
	}
	r = gpu_alloc(b->gpu, need, &b->weights);
	if (r < 0) {
		r = fail(-r, errbuf, errlen,
			 "cannot allocate %zu bytes of device memory for the "
			 "weights on CUDA device %d (%s)",
			 need, opts->device, di.name);
		goto destroy;
	}
	size_t staging_bytes = staging_bytes_of(b), bad = 0;
	int64_t bad_row = -1;
	staging = malloc(staging_bytes);
	if (!staging) {
		r = fail(ENOMEM, errbuf, errlen, "out of host memory for the weight upload");
		goto destroy;
	}
	r = upload_weights(b, staging, staging_bytes, opts, &bad, &bad_row);
	if (r == -EINVAL || r == -ERANGE) {
		char name[96];
		const struct tensor *bt = b->table[bad].src;
		tensor_name(m, bt, name, sizeof(name));
		if (bt->dtype == TENSOR_Q8 || bt->dtype == TENSOR_Q4)
			r = fail(EINVAL, errbuf, errlen,
				 "%s: row %lld of its %s records has a NaN or "
				 "infinite scale",
				 name, (long long)bad_row, b->base.weights);
		else if (bt->dtype == TENSOR_F8_E4M3)
			r = fail(EINVAL, errbuf, errlen, "%s: row %lld of its fp8 codes has a NaN code", name,
				 (long long)bad_row);
		else if (b->quant == QUANT_FP8 && r == -ERANGE)
			r = fail(ERANGE, errbuf, errlen,
				 "cannot quantize %s to fp8: its largest weight "
				 "is past +-65504 (the largest fp8 scale, 65504 / 448)",
				 name);
		else
			r = fail(-r, errbuf, errlen,
				 r == -ERANGE ? "cannot quantize %s to %s: row %lld has a weight past "
						"+-65504 (fp16 scales)" :
						"cannot quantize %s to %s: row %lld has a NaN or infinite "
						"weight",
				 name, b->base.weights, (long long)bad_row);
		goto destroy;
	}
	if (r < 0) {
		r = fail(-r, errbuf, errlen, "uploading the weights to CUDA device %d (%s) failed",
			 opts->device, di.name);
		goto destroy;
	}
	free(staging);
	staging = NULL;
	forward_init(b);
	if (gpu_memory_info(b->gpu, &free_b, &total_b) >= 0)
		b->memory_free_after_upload = free_b;
	return &b->base;
destroy:
	free(staging);
	cuda_destroy(&b->base);
	errno = -r;
	return NULL;
}
