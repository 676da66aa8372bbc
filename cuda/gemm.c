/* Row-major GEMMs through cuBLASLt (gpu.h), with descriptors and algorithms cached per shape.
 *
 * cuBLASLt is column-major: row-major y[rows][out] = x[rows][in] W^T is, read column-major,
 * Y (out x rows, ld ldy) = op(A) B with A = W seen as an in x out matrix (ld in, op T) and
 * B = x seen as in x rows (ld ldx, op N); so m = out, n = rows, k = in.
 *
 * Cache: a call's key is everything the descriptors and the algorithm depend on (shape, strides,
 * dtypes, beta, and the alignment of the four pointers, which cuBLASLt's algorithms require of
 * pointers, leading dimensions and strides alike: its default preference assumes 256-byte
 * aligned buffers, a row inside a buffer is often less aligned, and an algorithm chosen for
 * more alignment than a pointer has is refused at run time, CUBLAS_STATUS_NOT_SUPPORTED; a
 * pointer not aligned to its element has no algorithm at all). The first call of a key builds
 * the descriptors and asks the heuristic for up to GEMM_ALGOS algorithms that fit the
 * preallocated workspace, best first; every call passes that whole workspace, so no algorithm
 * needs more than it gets. A call runs the entry's current algorithm, and where cuBLASLt refuses
 * it at run time (NOT_SUPPORTED, ARCH_MISMATCH: a heuristic's pick can still be refused for a
 * shape or a device) moves on to the next, which the entry then keeps. Every failure, of the
 * heuristic or of the matmul, logs an error naming the shape (rows, in, out, dtypes, strides,
 * alignments) and leaves y as it was: -EINVAL where cuBLASLt calls the call invalid or
 * unsupported, -EIO when no algorithm runs or the device fails. Refusals enqueue nothing, so
 * this holds during a capture too: a capture may hit or miss, and enqueues nothing but the
 * matmul.
 *
 * FP8 (gpu_gemm_fp8): the same product with A = the weights' fp8 records (e4m3 codes, ld = the
 * record's bytes: the row's scale behind its codes is never read, k = in rows of A) and B = the
 * activations' e4m3 codes, their fp32 scales given to cuBLASLt as device pointers
 * (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER, set on the cached descriptor before every call, so
 * the entry serves every matrix of the shape and a captured graph reads the scales of its
 * replay). It is already TN, cuBLASLt's one FP8 layout; gpu_gemm_fp8_ok() says whether the
 * operands meet its 16-byte rules.
 */
#include "gpu.h"
#include "gpu_internal.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* cuBLASLt's recommended workspace on Hopper; also enough for every Ampere algorithm. */
/* Algorithms asked of the heuristic per shape, tried in its order. */
#define GEMM_ALGOS 4

struct gemm_key {
	int64_t out, in, rows, ldx, ldy;
	int64_t ldw; /* FP8: the weights' row stride in bytes; else 0 (= in) */
	int fp8;
	int w_dtype, y_dtype;
	int accumulate;
	uint32_t align_w, align_x, align_y;
};

struct gemm_entry {
	struct gemm_key key;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulAlgo_t algos[GEMM_ALGOS];
	int n_algos, cur; /* the heuristic's results; the one that runs */
	uint64_t last_use;
};

struct gpu_blas {
	struct gpu_context *g;
	cublasLtHandle_t lt;
	void *workspace;
	struct gemm_entry *entries;
	size_t n_entries;
	uint64_t calls;
};

static int lt_check(cublasStatus_t st, const char *file, int line, const char *what)
{
	if (st == CUBLAS_STATUS_SUCCESS)
		return 0;
	log_debug("gpu: %s failed at %s:%d: %s", what, file, line, cublasLtGetStatusString(st));
	if (st == CUBLAS_STATUS_ALLOC_FAILED)
		return -ENOMEM;
	if (st == CUBLAS_STATUS_INVALID_VALUE || st == CUBLAS_STATUS_NOT_SUPPORTED)
		return -EINVAL;
	return -EIO;
}
#define LT_CHECK(call) lt_check((call), __FILE__, __LINE__, #call)

struct gpu_blas *gpu_blas_create(struct gpu_context *g)
{
	struct gpu_blas *gm = calloc(1, sizeof(*gm));
	int r = -ENOMEM;
	if (!gm)
		goto fail;
	gm->g = g;
	gm->entries = calloc(GPU_BLAS_MAX_SHAPES, sizeof(*gm->entries));
	if (!gm->entries)
		goto free_gm;
	r = gpu_bind(g);
	if (r < 0)
		goto free_entries;
	r = LT_CHECK(cublasLtCreate(&gm->lt));
	if (r < 0)
		goto free_entries;
	r = gpu_alloc(g, GPU_BLAS_WORKSPACE_BYTES, &gm->workspace);
	if (r < 0)
		goto destroy_lt;
	return gm;
destroy_lt:
	cublasLtDestroy(gm->lt);
free_entries:
	free(gm->entries);
free_gm:
	free(gm);
fail:
	errno = r == -EINVAL ? EIO : -r;
	return NULL;
}

static void entry_release(struct gemm_entry *e)
{
	if (e->d)
		cublasLtMatrixLayoutDestroy(e->d);
	if (e->b)
		cublasLtMatrixLayoutDestroy(e->b);
	if (e->a)
		cublasLtMatrixLayoutDestroy(e->a);
	if (e->desc)
		cublasLtMatmulDescDestroy(e->desc);
	memset(e, 0, sizeof(*e));
}

void gpu_blas_destroy(struct gpu_blas *gm)
{
	if (!gm)
		return;
	(void)gpu_bind(gm->g);
	for (size_t i = 0; i < gm->n_entries; i++)
		entry_release(&gm->entries[i]);
	gpu_free(gm->g, gm->workspace);
	cublasLtDestroy(gm->lt);
	free(gm->entries);
	free(gm);
}

static cudaDataType_t lt_type(int dtype)
{
	return dtype == GPU_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* "a GEMM of ROWS rows x IN in -> OUT out (...)": the shape in every error message. */
static void describe(const struct gemm_key *k, char *buf, size_t len)
{
	snprintf(buf, len,
		 "a GEMM of %lld rows x %lld in -> %lld out (%s weights, %s out, ldx %lld, ldy %lld%s; "
		 "w, x, y aligned to %u, %u, %u bytes)",
		 (long long)k->rows, (long long)k->in, (long long)k->out,
		 k->fp8			      ? "fp8 e4m3 x e4m3" :
		 k->w_dtype == GPU_DTYPE_BF16 ? "bf16" :
						"fp32",
		 k->y_dtype == GPU_DTYPE_BF16 ? "bf16" : "fp32", (long long)k->ldx, (long long)k->ldy,
		 k->accumulate ? ", accumulating" : "", k->align_w, k->align_x, k->align_y);
}

/* The largest power of two up to 256 dividing the address (cuBLASLt's alignment preference). */
static uint32_t alignment_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	uint32_t al = 256;
	while (al > 1 && a % al)
		al /= 2;
	return al;
}

static int entry_build(struct gpu_blas *gm, struct gemm_entry *e, const struct gemm_key *k)
{
	cublasLtMatmulPreference_t pref = NULL;
	cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
	cudaDataType_t in_type = k->fp8 ? CUDA_R_8F_E4M3 : lt_type(k->w_dtype),
		       out_type = lt_type(k->y_dtype);
	size_t ws = GPU_BLAS_WORKSPACE_BYTES;
	memset(e, 0, sizeof(*e));
	int r = LT_CHECK(cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	if (r >= 0)
		r = LT_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
							    sizeof(trans_a)));
	if (r >= 0)
		r = LT_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
							    sizeof(trans_b)));
	if (r >= 0)
		r = LT_CHECK(cublasLtMatrixLayoutCreate(&e->a, in_type, (uint64_t)k->in, (uint64_t)k->out,
							k->fp8 ? k->ldw : k->in));
	if (r >= 0)
		r = LT_CHECK(cublasLtMatrixLayoutCreate(&e->b, in_type, (uint64_t)k->in, (uint64_t)k->rows,
							k->ldx));
	if (r >= 0)
		r = LT_CHECK(cublasLtMatrixLayoutCreate(&e->d, out_type, (uint64_t)k->out, (uint64_t)k->rows,
							k->ldy));
	if (r >= 0)
		r = LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
	if (r >= 0)
		r = LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref,
								  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
								  &ws, sizeof(ws)));
	const struct {
		cublasLtMatmulPreferenceAttributes_t attr;
		uint32_t value;
	} aligns[] = {
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k->align_w},
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k->align_x},
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k->align_y},
		{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k->align_y},
	};
	for (size_t i = 0; i < ARRAY_SIZE(aligns) && r >= 0; i++)
		r = LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, aligns[i].attr, &aligns[i].value,
								  sizeof(aligns[i].value)));
	if (r >= 0) {
		cublasLtMatmulHeuristicResult_t res[GEMM_ALGOS];
		int found = 0;
		cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(gm->lt, e->desc, e->a, e->b, e->d, e->d,
								   pref, GEMM_ALGOS, res, &found);
		if (st != CUBLAS_STATUS_SUCCESS || found < 1) {
			char shape[256];
			describe(k, shape, sizeof(shape));
			log_error("gpu: cuBLASLt has no algorithm for %s: %s", shape,
				  st == CUBLAS_STATUS_SUCCESS ? "none found" : cublasLtGetStatusString(st));
			r = st == CUBLAS_STATUS_SUCCESS ? -EINVAL : LT_CHECK(st);
		}
		for (int i = 0; r >= 0 && i < found && i < GEMM_ALGOS; i++)
			e->algos[e->n_algos++] = res[i].algo;
	}
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	if (r < 0) {
		entry_release(e);
		return r;
	}
	e->key = *k;
	return 0;
}

static bool dim_ok(int64_t v)
{
	return v >= 1 && v <= GPU_GEMM_MAX_DIM;
}

/* The cached entry of key (built on a miss) runs y (+)= W x; FP8's scales sw, sx (else NULL). */
static int gemm_run(struct gpu_blas *gm, const struct gemm_key *kp, const void *w, const void *x, void *y,
		    const float *sw, const float *sx)
{
	const struct gemm_key key = *kp;
	const int out = (int)key.out, in = (int)key.in, rows = (int)key.rows;
	const bool accumulate = key.accumulate;
	struct gemm_entry *e = NULL;
	for (size_t i = 0; i < gm->n_entries && !e; i++)
		if (!memcmp(&gm->entries[i].key, &key, sizeof(key)))
			e = &gm->entries[i];
	if (!e) {
		/* a free slot, else the least recently used entry (a captured graph keeps its own
		 * copy of what it launched, so its descriptors may go) */
		if (gm->n_entries < GPU_BLAS_MAX_SHAPES) {
			e = &gm->entries[gm->n_entries];
		} else {
			e = &gm->entries[0];
			for (size_t i = 1; i < gm->n_entries; i++)
				if (gm->entries[i].last_use < e->last_use)
					e = &gm->entries[i];
			entry_release(e);
		}
		int r = entry_build(gm, e, &key);
		if (r < 0) {
			if (e != &gm->entries[gm->n_entries]) { /* an evicted slot: fill the hole */
				*e = gm->entries[--gm->n_entries];
				memset(&gm->entries[gm->n_entries], 0, sizeof(*e));
			}
			return r;
		}
		if (e == &gm->entries[gm->n_entries])
			gm->n_entries++;
	}
	e->last_use = ++gm->calls;
	const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
	if (key.fp8) {
		int r = LT_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
								&sw, sizeof(sw)));
		if (r >= 0)
			r = LT_CHECK(cublasLtMatmulDescSetAttribute(e->desc,
								    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx,
								    sizeof(sx)));
		if (r < 0)
			return r;
	}
	for (;;) {
		cublasStatus_t st = cublasLtMatmul(gm->lt, e->desc, &alpha, w, e->a, x, e->b, &beta, y, e->d,
						   y, e->d, &e->algos[e->cur], gm->workspace,
						   GPU_BLAS_WORKSPACE_BYTES, (cudaStream_t)gm->g->stream);
		if (st == CUBLAS_STATUS_SUCCESS)
			return 0;
		bool refused = st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH;
		if (refused && e->cur + 1 < e->n_algos) {
			log_debug("gpu: cuBLASLt refused algorithm %d of %d for a %d x %d x %d GEMM (%s): "
				  "trying the next",
				  e->cur + 1, e->n_algos, out, rows, in, cublasLtGetStatusString(st));
			e->cur++;
			continue;
		}
		char shape[256];
		describe(&key, shape, sizeof(shape));
		if (refused) {
			log_error("gpu: cuBLASLt ran none of its %d algorithms for %s: %s", e->n_algos, shape,
				  cublasLtGetStatusString(st));
			return -EIO;
		}
		log_error("gpu: cuBLASLt failed %s: %s", shape, cublasLtGetStatusString(st));
		return LT_CHECK(st);
	}
}

static void key_init(struct gemm_key *key, int out, int in, int rows, size_t ldx, size_t ldy, const void *w,
		     const void *x, void *y, enum gpu_dtype y_dtype, bool accumulate)
{
	memset(key, 0, sizeof(*key)); /* compared with memcmp */
	key->out = out;
	key->in = in;
	key->rows = rows;
	key->ldx = (int64_t)ldx;
	key->ldy = (int64_t)ldy;
	key->y_dtype = y_dtype;
	key->accumulate = accumulate;
	key->align_w = alignment_of(w);
	key->align_x = alignment_of(x);
	key->align_y = alignment_of(y);
}

int gpu_gemm(struct gpu_blas *gm, const void *w, enum gpu_dtype w_dtype, int out, int in, const void *x,
	     size_t ldx, int rows, void *y, enum gpu_dtype y_dtype, size_t ldy, bool accumulate)
{
	if (rows == 0 && gm && w && x && y)
		return 0;
	if (!gm || !w || !x || !y || !dim_ok(out) || !dim_ok(in) || !dim_ok(rows) ||
	    ldx > (size_t)GPU_GEMM_MAX_DIM || ldy > (size_t)GPU_GEMM_MAX_DIM || ldx < (size_t)in ||
	    ldy < (size_t)out)
		return -EINVAL;
	if ((w_dtype != GPU_DTYPE_F32 && w_dtype != GPU_DTYPE_BF16) ||
	    (y_dtype != GPU_DTYPE_F32 && y_dtype != GPU_DTYPE_BF16) ||
	    (w_dtype == GPU_DTYPE_F32 && y_dtype != GPU_DTYPE_F32))
		return -EINVAL;
	GPU_BIND_OR_RETURN(gm->g);
	struct gemm_key key;
	key_init(&key, out, in, rows, ldx, ldy, w, x, y, y_dtype, accumulate);
	key.w_dtype = w_dtype;
	return gemm_run(gm, &key, w, x, y, NULL, NULL);
}

bool gpu_gemm_fp8_ok(int in, size_t ldw, const void *w, const void *x, size_t ldx, const void *y,
		     enum gpu_dtype y_dtype, size_t ldy)
{
	const size_t yb = y_dtype == GPU_DTYPE_F32 ? 4 : 2;
	return in % 16 == 0 && ldw % 16 == 0 && ldx % 16 == 0 && (ldy * yb) % 16 == 0 &&
	       (uintptr_t)w % 16 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)y % 16 == 0;
}

int gpu_gemm_fp8(struct gpu_blas *gm, const void *w, size_t ldw, const float *sw, int out, int in,
		 const void *x, size_t ldx, const float *sx, int rows, void *y, enum gpu_dtype y_dtype,
		 size_t ldy, bool accumulate)
{
	if (rows == 0 && gm && w && x && y)
		return 0;
	if (!gm || !w || !x || !y || !sw || !sx || !dim_ok(out) || !dim_ok(in) || !dim_ok(rows) ||
	    ldx > (size_t)GPU_GEMM_MAX_DIM || ldy > (size_t)GPU_GEMM_MAX_DIM ||
	    ldw > (size_t)GPU_GEMM_MAX_DIM || ldx < (size_t)in || ldw < (size_t)in || ldy < (size_t)out ||
	    (y_dtype != GPU_DTYPE_F32 && y_dtype != GPU_DTYPE_BF16) ||
	    !gpu_gemm_fp8_ok(in, ldw, w, x, ldx, y, y_dtype, ldy))
		return -EINVAL;
	GPU_BIND_OR_RETURN(gm->g);
	struct gemm_key key;
	key_init(&key, out, in, rows, ldx, ldy, w, x, y, y_dtype, accumulate);
	key.fp8 = 1;
	key.ldw = (int64_t)ldw;
	return gemm_run(gm, &key, w, x, y, sw, sx);
}
