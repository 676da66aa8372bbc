/* The cuBLASLt stand-in of the emulated CUDA build (-Dcuda-emulation=true).
 *
 * It implements, with NVIDIA's own prototypes from <cublasLt.h>, exactly the subset of cuBLASLt
 * the engine calls, and refuses everything else with CUBLAS_STATUS_NOT_SUPPORTED so the engine
 * can never rely on behaviour nobody has tested:
 *
 *   D = epilogue(alpha * op(A) op(B) + beta * C), column-major, op = N or T, per-layout leading
 *   dimensions, strided batches (one batch count for all four layouts, a stride per layout; a
 *   zero stride broadcasts A, B or an out-of-place C), C == D in place or C != D.
 *   Compute CUBLAS_COMPUTE_32F with scale type CUDA_R_32F and alpha/beta on the host.
 *   Preferences: MAX_WORKSPACE_BYTES and MIN_ALIGNMENT_{A,B,C,D}_BYTES (powers of two), which
 *   the heuristic honours as cuBLASLt does (below).
 *   A/B (same type): CUDA_R_32F -> C/D CUDA_R_32F; CUDA_R_16BF or CUDA_R_16F -> C/D (same type)
 *   of that type or CUDA_R_32F. C's leading dimension and batch stride may differ from D's when
 *   C != D, as cuBLASLt documents for out-of-place products. Bias: one value per row of D (per
 *   output feature), the same for every batch, of D's type: <cublasLt.h> documents no other bias
 *   type outside integer and fp8 kernels, so an fp32 bias for a bf16 D is refused here.
 *   Epilogues: DEFAULT, RELU, BIAS, RELU_BIAS, GELU, GELU_BIAS.
 *   FP8 (the prefill's products on e4m3 weights, cuda/gemm.c gpu_gemm_fp8): A and B CUDA_R_8F_E4M3,
 *   C/D (same type) CUDA_R_16BF or CUDA_R_32F, epilogue DEFAULT, no batches, and the scalar
 *   scales CUBLASLT_MATMUL_DESC_A_SCALE_POINTER / B_SCALE_POINTER (device fp32, read when the
 *   product runs: D = alpha * a_scale * b_scale * op(A) op(B) + beta * C; unset: 1).
 *
 * FP8, as NVIDIA documents it (the cuBLAS guide, cublasLtMatmul(): "To use FP8 kernels, the
 * following set of requirements must be satisfied": A transposed and B not, the "TN" format;
 * CUBLAS_COMPUTE_32F with scale type CUDA_R_32F; every matrix's pointer and dimensions meeting
 * "Tensor Core Usage"'s 16-byte alignment; and <cublasLt.h>: a scale pointer "set for an
 * unsupported matrix data, scale, and compute type combination" makes cublasLtMatmul return
 * CUBLAS_STATUS_INVALID_VALUE; PyTorch's _scaled_mm, which calls it, checks the 16-byte rule as
 * the reduced dimension a multiple of 16, pytorch/pytorch#108308). So here an FP8 problem:
 * - not TN (CUBLAS_OP_T on A, CUBLAS_OP_N on B), or k not a multiple of 16: no algorithm
 *   (CUBLAS_STATUS_NOT_SUPPORTED from the heuristic and from the matmul);
 * - only the vectorised algorithms run it: every pointer 16-byte aligned, every leading dimension
 *   a multiple of 16 bytes, else NOT_SUPPORTED;
 * - the type pairs the library has and this subset does not use (E5M2 operands, fp16 or fp8 D, an
 *   fp8 D's scale and amax, bias epilogues, fast accumulation, scale modes other than the scalar
 *   one) are refused with CUBLAS_STATUS_NOT_SUPPORTED, their attributes at once;
 * - A/B scale pointers on a problem without fp8 operands: CUBLAS_STATUS_INVALID_VALUE; a scale
 *   pointer that is not a device float: CUBLAS_STATUS_INVALID_VALUE (a GPU would fault).
 *   Products of two e4m3 values are exact in fp32 (4-bit significands), so the numbers are the
 *   same sums as for bf16 operands: fp32 in k order per split part.
 *
 * Alignment and workspace, as NVIDIA documents them, so that a call a GPU would refuse fails here:
 * - Sources: <cublasLt.h> (CUDA 13.0): MIN_ALIGNMENT_X_BYTES preferences default to 256 and a
 *   smaller one "will exclude algorithms that can not work with matrix X that is not as strictly
 *   aligned as they need"; an algorithm's CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_X_BYTES is "required
 *   for buffer pointer, leading dimension, and possibly other strides"; cublasLtMatmulAlgoCheck's
 *   success "doesn't fully guarantee algo will run (will fail if e.g. buffers are not correctly
 *   aligned)"; cublasLtMatmul returns CUBLAS_STATUS_INVALID_VALUE "when workspaceSizeInBytes is
 *   less than workspace required by configured algo", the heuristic's workspaceSize being the
 *   "actual size of workspace memory required". The cuBLAS guide's "Tensor Core Usage" section
 *   (docs.nvidia.com/cuda/cublas, #tensorop-restrictions) asks 16-byte multiples of pointers and
 *   leading dimensions for the fastest (tensor-core) kernels; other kernels take the rest.
 *   Measured on GPUs (pytorch/pytorch#92201, #98975): fp16 operands only 2 bytes aligned, run
 *   with the default preferences, fail in cublasLtMatmul with CUBLAS_STATUS_NOT_SUPPORTED, and
 *   run once each pointer's alignment is the preference (what cuda/gemm.c passes): the least
 *   alignment an algorithm takes is one element (2 bytes for bf16/fp16, 4 for fp32), not more.
 * - The stand-in's algorithms (algo_kind): SPLITK_WS and VEC_A/B want every operand's pointer,
 *   leading dimension and batch stride in multiples of LT_VEC_ALIGN (16) bytes; ELEM_A/B/C only
 *   element alignment. SPLITK_WS needs parts x m x n x batch fp32 partial sums of workspace
 *   (rounded up to 256 bytes) and is offered, first, when the shape's split has two parts or
 *   more; the others need none. The heuristic returns the first LT_ALGOS in that order that the
 *   preferences' alignments, the layouts and MAX_WORKSPACE_BYTES allow, with their
 *   workspaceSize; none (CUBLAS_STATUS_NOT_SUPPORTED) for a preference below one element.
 * - cublasLtMatmul checks the algorithm against what it is given: pointers, leading dimensions
 *   or batch strides less aligned than it needs: CUBLAS_STATUS_NOT_SUPPORTED; less workspace
 *   than it needs, or a workspace that is not device memory of that size:
 *   CUBLAS_STATUS_INVALID_VALUE; an algorithm the heuristic gave for other types or another
 *   epilogue: CUBLAS_STATUS_INVALID_VALUE. Without an algorithm it asks its own heuristic with
 *   the pointers' alignments and the workspace it is given (NOT_SUPPORTED when none runs).
 * - The bias pointer: the header says the heuristic reads its alignment, yet a bias slice under
 *   16 bytes aligned faulted with "misaligned address" on a GPU (pytorch/pytorch#194497), and
 *   Marian's cublasLt path needs 16 (REQUIRED_BIAS_ALIGNMENT, after an A100 alignment error).
 *   Here a bias pointer not LT_BIAS_ALIGN (16) bytes aligned is refused by the heuristic and by
 *   the matmul (CUBLAS_STATUS_NOT_SUPPORTED) rather than faulting.
 *
 * Decisions where cuBLASLt leaves room, each one chosen to fail loudly rather than differ quietly:
 * - CUBLAS_COMPUTE_32F_FAST_TF32 (and the other FAST/PEDANTIC compute types) are refused, not
 *   treated as 32F: on a GPU TF32 rounds the fp32 inputs to 10 mantissa bits, and code tested
 *   here at full fp32 precision would lose that precision there unseen.
 * - Products are exact in fp32 for bf16/fp16 inputs (both widen exactly); every dot product is
 *   summed in fp32 in increasing k order within each of up to SPLIT_K_MAX parts, the parts added
 *   in order (split-K, by a rule of its own: the number of parts follows the shape, as
 *   cuBLASLt's algorithm choice does, so a test holding two shapes to the same bits fails here
 *   too), then alpha, beta * C, bias and the activation are
 *   applied in fp32 and D is rounded to its type to nearest even. A GPU sums in another order
 *   (and with FMA): compare with tolerances, never bit for bit.
 * - C is not read when beta == 0 (cuBLAS's contract: C may then hold anything), so a C never
 *   written since cudaMalloc (0xFF bytes, NaN, in the emulation) is harmless then and NaN in D
 *   otherwise. Only the rows x cols elements of each operand are read or written, never the
 *   leading-dimension padding nor the gaps between batches.
 * - RELU is max(x, 0) with NaN kept (NaN stays NaN), so a NaN upstream stays visible.
 * - GELU is the tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), what cuBLASLt's
 *   GELU epilogues compute. NVIDIA's header and the cuBLAS guide's cublasLtEpilogue_t table say
 *   only "apply GELU point-wise transform to the results (x:=GELU(x))"; PyTorch, which fuses
 *   addmm + GELU with CUBLASLT_EPILOGUE_GELU_BIAS, found it to be the tanh approximation and
 *   made its unfused GPU paths use tanh to match (pytorch/pytorch#104061, "Unify GELU tanh
 *   approximation in _addmm_activation GPU back-end"); NVIDIA's TensorRT-LLM uses that epilogue
 *   as "the tanh approximation on CUDA, matching gelu_tanh" (NVIDIA/TensorRT-LLM#17693). The two
 *   forms differ by up to 4.7e-4 (at |x| = 2.7), so the epilogue must not stand in for the erf
 *   GELU of the RADIO ViT (docs/design/model.md, engine/vision/vision.h): vision_cuda.c runs
 *   its own erf kernel (gpu_bias_act, GPU_ACT_GELU_ERF). tests/gpu-emu/test-cublaslt.c's GELU
 *   form check, in the gpu suite on a GPU, confirms the tanh form against the real library.
 * - Overlapping D with A, B or an out-of-place C, or batches of D that overlap each other, is
 *   CUBLAS_STATUS_INVALID_VALUE (undefined on a GPU, so an engine bug here); so is an operand
 *   (or the bias) not inside one cudaMalloc allocation over its whole extent: host memory works
 *   here, where everything is host memory, and would fault on a GPU.
 *
 * Streams: a matmul runs at once on the calling thread (the emulation executes streams
 * synchronously); on a stream that is capturing it is checked, then recorded with a copy of its
 * problem (descriptors may be destroyed after the capture, as with cuBLASLt) and runs when the
 * graph is launched, in order with the graph's kernels.
 *
 * Threads: the handle and descriptors carry no mutable state after set-up; like cuBLASLt a handle
 * may be shared if the caller serialises descriptor changes.
 */
#include "emu_internal.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <initializer_list>

namespace
{

/* cuBLASLt documents rows and columns as "usually only values that fit int32_t". */
constexpr uint64_t LT_MAX_DIM = INT32_MAX;
/* The most bytes one operand may span (all batches): far beyond any device's memory. */
constexpr uint64_t LT_MAX_EXTENT = (uint64_t)1 << 48;
constexpr uint32_t LT_HANDLE_MAGIC = 0x4c74486e;     /* "LtHn" */
constexpr uint32_t LT_DESC_MAGIC = 0x4c744d64;	     /* "LtMd" */
constexpr uint32_t LT_LAYOUT_MAGIC = 0x4c744c79;     /* "LtLy" */
constexpr uint32_t LT_PREF_MAGIC = 0x4c745066;	     /* "LtPf" */
constexpr uint64_t LT_ALGO_TAG = 0x686f6c6f2d656d75; /* "holo-emu": our algorithms */
/* The heuristic offers this many algorithms (data[1]: 0, 1, ...), which compute alike; the
 * first $HOLOD_GPU_EMU_LT_REFUSE of them are refused at run time (CUBLAS_STATUS_NOT_SUPPORTED),
 * as a real heuristic's pick can be, so the caller's fallback to the next is tested. */
constexpr int LT_ALGOS = 3;
/* What the vectorised (tensor-core) algorithms need of each operand's pointer, leading dimension
 * and batch stride, in bytes, and what every algorithm needs of a bias pointer (DESIGN above). */
constexpr uint32_t LT_VEC_ALIGN = 16, LT_BIAS_ALIGN = 16;
/* Workspace needs are whole multiples of this. */
constexpr size_t LT_WS_GRANULE = 256;

/* The stand-in's algorithms (cublasLtMatmulAlgo_t data[2]), in the heuristic's order of
 * preference; each computes the same numbers, they differ in what they need (DESIGN above). */
enum algo_kind : uint64_t {
	ALGO_SPLITK_WS = 1, /* vectorised, split-K partial sums in the workspace */
	ALGO_VEC_A,	    /* vectorised, no workspace: two tile shapes */
	ALGO_VEC_B,
	ALGO_ELEM_A, /* any element-aligned operand, no workspace: three tile shapes */
	ALGO_ELEM_B,
	ALGO_ELEM_C,
};

/* Register tile of the inner kernel: MR rows of op(A) by NR columns of op(B). */
constexpr int MR = 8, NR = 4;
/* Rows of op(A) packed at a time: their panels stay in cache while every column strip of op(B)
 * passes, and a large weight matrix never needs a full fp32 copy. */
constexpr int MC = 64;
/* Split-K, by a rule of this stand-in's own: cuBLASLt's heuristics pick another algorithm (tile,
 * split-K, reduction order) for each shape, so only identical calls are promised identical bits.
 * Here a product sums its k dimension in 1 + (m / MR + n) % SPLIT_K_MAX parts of at least
 * SPLIT_K_MIN_K each, then adds the parts in order: products that differ in their row count n
 * (a batch against one sequence alone) by less than SPLIT_K_MAX sum in another number of parts,
 * and so round differently, and a test that holds them to the same bits fails here as it would
 * on a GPU (test-cublaslt checks that n = 1 and n = 2 differ). */
constexpr int64_t SPLIT_K_MAX = 4, SPLIT_K_MIN_K = 16;

struct lt_context {
	uint32_t magic;
};

struct matmul_desc {
	uint32_t magic;
	int32_t compute_type;
	int32_t scale_type;
	int32_t pointer_mode;
	int32_t transa, transb;
	uint32_t epilogue;
	const void *bias;
	int32_t bias_type;	       /* -1: the type of D */
	const void *a_scale, *b_scale; /* FP8: device fp32 scalars, or NULL (1) */
};

struct matrix_layout {
	uint32_t magic;
	uint32_t type;
	int32_t order;
	uint64_t rows, cols;
	int64_t ld;
	int32_t batch_count;
	int64_t batch_stride;
};

struct matmul_pref {
	uint32_t magic;
	uint64_t max_workspace;
	/* MIN_ALIGNMENT_{A,B,C,D}_BYTES (powers of two, default 256): the heuristic offers only
	 * algorithms that run on operands this aligned. */
	uint32_t min_align[4];
};

/* Index into matmul_pref::min_align, or -1 for another attribute. */
int align_index(cublasLtMatmulPreferenceAttributes_t attr)
{
	switch (attr) {
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
		return 0;
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
		return 1;
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
		return 2;
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
		return 3;
	default:
		return -1;
	}
}

lt_context *as_ctx(cublasLtHandle_t h)
{
	auto *c = reinterpret_cast<lt_context *>(h);
	return c && c->magic == LT_HANDLE_MAGIC ? c : nullptr;
}

matmul_desc *as_desc(cublasLtMatmulDesc_t d)
{
	auto *m = reinterpret_cast<matmul_desc *>(d);
	return m && m->magic == LT_DESC_MAGIC ? m : nullptr;
}

matrix_layout *as_layout(cublasLtMatrixLayout_t l)
{
	auto *m = reinterpret_cast<matrix_layout *>(l);
	return m && m->magic == LT_LAYOUT_MAGIC ? m : nullptr;
}

matmul_pref *as_pref(cublasLtMatmulPreference_t p)
{
	auto *m = reinterpret_cast<matmul_pref *>(p);
	return m && m->magic == LT_PREF_MAGIC ? m : nullptr;
}

/* cuBLASLt's attribute contract: the buffer must be exactly the attribute's size. */
template <typename T> cublasStatus_t set_attr(T &field, const void *buf, size_t size)
{
	if (!buf || size != sizeof(T))
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(&field, buf, sizeof(T));
	return CUBLAS_STATUS_SUCCESS;
}

/* sizeInBytes 0 asks for the size through sizeWritten. */
template <typename T> cublasStatus_t get_attr(const T &field, void *buf, size_t size, size_t *written)
{
	if (size == 0) {
		if (!written)
			return CUBLAS_STATUS_INVALID_VALUE;
		*written = sizeof(T);
		return CUBLAS_STATUS_SUCCESS;
	}
	if (!buf || size != sizeof(T))
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(buf, &field, sizeof(T));
	if (written)
		*written = sizeof(T);
	return CUBLAS_STATUS_SUCCESS;
}

size_t type_size(uint32_t t)
{
	switch (t) {
	case CUDA_R_32F:
		return 4;
	case CUDA_R_16BF:
	case CUDA_R_16F:
		return 2;
	case CUDA_R_8F_E4M3:
		return 1;
	default:
		return 0;
	}
}

bool is_fp8(uint32_t t)
{
	return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2;
}

bool has_bias(uint32_t epilogue)
{
	return epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
	       epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
}

/* Bytes from the first to one past the last element a layout can touch over all batches; false
 * when that does not fit in LT_MAX_EXTENT (no such buffer can exist). */
bool layout_extent(const matrix_layout *l, size_t *ret)
{
	if (l->rows == 0 || l->cols == 0) {
		*ret = 0;
		return true;
	}
	uint64_t batches, cols, elems, bytes;
	if (__builtin_mul_overflow((uint64_t)(l->batch_count - 1), (uint64_t)l->batch_stride, &batches) ||
	    __builtin_mul_overflow(l->cols - 1, (uint64_t)l->ld, &cols) ||
	    __builtin_add_overflow(batches, cols, &elems) || __builtin_add_overflow(elems, l->rows, &elems) ||
	    __builtin_mul_overflow(elems, (uint64_t)type_size(l->type), &bytes) || bytes > LT_MAX_EXTENT)
		return false;
	*ret = (size_t)bytes;
	return true;
}

/* Everything cublasLtMatmul needs, checked and copied out of the descriptors. */
struct problem {
	int64_t m, n, k;
	int transa, transb;
	uint32_t epilogue;
	uint32_t ab_type, cd_type, bias_type;
	int64_t lda, ldb, ldc, ldd;
	int64_t batch;
	int64_t stride_a, stride_b, stride_c, stride_d;
	const matrix_layout *a, *b, *c, *d;
	size_t ext_a, ext_b, ext_c, ext_d; /* layout_extent() of each operand */
	const void *a_scale, *b_scale;	   /* FP8's scale pointers (NULL: 1) */
};

/* The one place that decides what is supported: the heuristic and the matmul both ask it. */
cublasStatus_t check_problem(const matmul_desc *op, const matrix_layout *a, const matrix_layout *b,
			     const matrix_layout *c, const matrix_layout *d, problem *ret)
{
	if (!op || !a || !b || !c || !d)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (op->compute_type != CUBLAS_COMPUTE_32F || op->scale_type != CUDA_R_32F ||
	    op->pointer_mode != CUBLASLT_POINTER_MODE_HOST)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	for (int t : {op->transa, op->transb})
		if (t != CUBLAS_OP_N && t != CUBLAS_OP_T)
			return CUBLAS_STATUS_NOT_SUPPORTED;
	switch (op->epilogue) {
	case CUBLASLT_EPILOGUE_DEFAULT:
	case CUBLASLT_EPILOGUE_RELU:
	case CUBLASLT_EPILOGUE_BIAS:
	case CUBLASLT_EPILOGUE_RELU_BIAS:
	case CUBLASLT_EPILOGUE_GELU:
	case CUBLASLT_EPILOGUE_GELU_BIAS:
		break;
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	for (const matrix_layout *l : {a, b, c, d})
		if (l->order != CUBLASLT_ORDER_COL || l->rows > LT_MAX_DIM || l->cols > LT_MAX_DIM ||
		    l->batch_stride < 0)
			return CUBLAS_STATUS_NOT_SUPPORTED;

	if ((op->a_scale || op->b_scale) && !is_fp8(a->type) && !is_fp8(b->type))
		return CUBLAS_STATUS_INVALID_VALUE; /* <cublasLt.h>, A_SCALE_POINTER */
	if (is_fp8(a->type) || is_fp8(b->type)) {
		/* the FP8 subset (DESIGN above): e4m3 x e4m3, TN, bf16/fp32 out, no epilogue */
		if (a->type != CUDA_R_8F_E4M3 || b->type != CUDA_R_8F_E4M3 || c->type != d->type ||
		    (d->type != CUDA_R_16BF && d->type != CUDA_R_32F) ||
		    op->epilogue != CUBLASLT_EPILOGUE_DEFAULT || op->transa != CUBLAS_OP_T ||
		    op->transb != CUBLAS_OP_N || a->rows % 16 != 0 || a->batch_count != 1 ||
		    b->batch_count != 1 || c->batch_count != 1 || d->batch_count != 1)
			return CUBLAS_STATUS_NOT_SUPPORTED;
	} else if (a->type != b->type || c->type != d->type) {
		return CUBLAS_STATUS_NOT_SUPPORTED;
	} else if (a->type == CUDA_R_32F) {
		if (d->type != CUDA_R_32F)
			return CUBLAS_STATUS_NOT_SUPPORTED;
	} else if (a->type == CUDA_R_16BF || a->type == CUDA_R_16F) {
		if (d->type != a->type && d->type != CUDA_R_32F)
			return CUBLAS_STATUS_NOT_SUPPORTED;
	} else {
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	uint32_t bias_type = op->bias_type == -1 ? d->type : (uint32_t)op->bias_type;
	if (has_bias(op->epilogue) && bias_type != d->type)
		return CUBLAS_STATUS_NOT_SUPPORTED;

	for (const matrix_layout *l : {a, b, c, d})
		if (l->ld < 1 || (uint64_t)l->ld < l->rows || l->batch_count < 1)
			return CUBLAS_STATUS_INVALID_VALUE;
	int64_t m = (int64_t)d->rows, n = (int64_t)d->cols;
	bool ta = op->transa == CUBLAS_OP_T, tb = op->transb == CUBLAS_OP_T;
	int64_t am = (int64_t)(ta ? a->cols : a->rows), k = (int64_t)(ta ? a->rows : a->cols);
	int64_t bk = (int64_t)(tb ? b->cols : b->rows), bn = (int64_t)(tb ? b->rows : b->cols);
	if (am != m || bk != k || bn != n || (int64_t)c->rows != m || (int64_t)c->cols != n)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (a->batch_count != d->batch_count || b->batch_count != d->batch_count ||
	    c->batch_count != d->batch_count)
		return CUBLAS_STATUS_INVALID_VALUE;
	size_t ext_a, ext_b, ext_c, ext_d;
	if (!layout_extent(a, &ext_a) || !layout_extent(b, &ext_b) || !layout_extent(c, &ext_c) ||
	    !layout_extent(d, &ext_d))
		return CUBLAS_STATUS_INVALID_VALUE;
	/* Batches of D must not overlap: each would be written by several matrices at once. (ld * n
	 * cannot overflow: the extent is bounded.) */
	if (d->batch_count > 1 && m > 0 && n > 0 && d->batch_stride < d->ld * n)
		return CUBLAS_STATUS_INVALID_VALUE;

	*ret = problem{m,
		       n,
		       k,
		       ta,
		       tb,
		       op->epilogue,
		       a->type,
		       d->type,
		       bias_type,
		       a->ld,
		       b->ld,
		       c->ld,
		       d->ld,
		       d->batch_count,
		       a->batch_stride,
		       b->batch_stride,
		       c->batch_stride,
		       d->batch_stride,
		       a,
		       b,
		       c,
		       d,
		       ext_a,
		       ext_b,
		       ext_c,
		       ext_d,
		       op->a_scale,
		       op->b_scale};
	return CUBLAS_STATUS_SUCCESS;
}

bool overlaps(const void *p, size_t np, const void *q, size_t nq)
{
	auto a = (uintptr_t)p, b = (uintptr_t)q;
	return np && nq && a < b + nq && b < a + np;
}

inline float load(const void *base, int64_t i, uint32_t type)
{
	switch (type) {
	case CUDA_R_16BF:
		return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[i]);
	case CUDA_R_16F:
		return __half2float(static_cast<const __half *>(base)[i]);
	default:
		return static_cast<const float *>(base)[i];
	}
}

inline void store(void *base, int64_t i, uint32_t type, float v)
{
	switch (type) {
	case CUDA_R_16BF:
		static_cast<__nv_bfloat16 *>(base)[i] = __float2bfloat16_rn(v);
		break;
	case CUDA_R_16F:
		static_cast<__half *>(base)[i] = __float2half_rn(v);
		break;
	default:
		static_cast<float *>(base)[i] = v;
	}
}

/* An e4m3 code's value (OCP FP8 E4M3): exact in fp32; S.1111.111 is NaN. */
inline float e4m3_value(uint8_t c)
{
	const int e = (c >> 3) & 15, m = c & 7;
	float v = (c & 0x7f) == 0x7f ? NAN : e ? ldexpf((float)(8 + m), e - 10) : ldexpf((float)m, -9);
	return c & 0x80 ? -v : v;
}

/* op(X) as fp32 strips of `w` rows (op(A), w = MR) or columns (op(B), w = NR), each strip
 * k-major: panel[s][p][lane]. Lanes past `count` are zero so the inner kernel needs no edge case.
 * `across` = true when the strip's lanes are consecutive along X's leading dimension, i.e.
 * element (lane, p) is at lane + p * ld; otherwise it is at p + lane * ld. */
template <typename T>
void pack(const T *x, int64_t ld, bool across, int64_t count, int64_t k, int w, float *panel)
{
	int64_t strips = (count + w - 1) / w;
	for (int64_t s = 0; s < strips; s++) {
		float *dst = panel + s * k * w;
		int64_t lanes = count - s * w < w ? count - s * w : w;
		for (int64_t p = 0; p < k; p++) {
			for (int64_t l = 0; l < lanes; l++) {
				int64_t e = s * w + l;
				float v;
				if constexpr (std::is_same_v<T, uint8_t>)
					v = e4m3_value(across ? x[e + p * ld] : x[p + e * ld]);
				else if constexpr (sizeof(T) == 4)
					v = across ? x[e + p * ld] : x[p + e * ld];
				else if constexpr (std::is_same_v<T, __nv_bfloat16>)
					v = __bfloat162float(across ? x[e + p * ld] : x[p + e * ld]);
				else
					v = __half2float(across ? x[e + p * ld] : x[p + e * ld]);
				dst[p * w + l] = v;
			}
			for (int64_t l = lanes; l < w; l++)
				dst[p * w + l] = 0.0f;
		}
	}
}

void pack_any(const void *x, uint32_t type, int64_t ld, bool across, int64_t count, int64_t k, int w,
	      float *panel)
{
	switch (type) {
	case CUDA_R_8F_E4M3:
		pack(static_cast<const uint8_t *>(x), ld, across, count, k, w, panel);
		break;
	case CUDA_R_16BF:
		pack(static_cast<const __nv_bfloat16 *>(x), ld, across, count, k, w, panel);
		break;
	case CUDA_R_16F:
		pack(static_cast<const __half *>(x), ld, across, count, k, w, panel);
		break;
	default:
		pack(static_cast<const float *>(x), ld, across, count, k, w, panel);
	}
}

/* acc[c][r] = sum over p, in increasing p, of a[p][r] * b[p][c]: one fp32 sum per element in a
 * fixed order. GCC's vector extension (lanes along r) keeps the 32 sums in registers on any
 * x86-64 without SIMD intrinsics; each lane is the same scalar multiply-then-add. */
typedef float vf4 __attribute__((vector_size(16)));
static_assert(MR == 8 && NR == 4, "the inner kernel is written for an 8 x 4 tile");

void micro_kernel(const float *__restrict a, const float *__restrict b, int64_t k, float acc[NR][MR])
{
	vf4 t[NR][2] = {};
	for (int64_t p = 0; p < k; p++) {
		vf4 a0, a1;
		memcpy(&a0, a + p * MR, sizeof(a0));
		memcpy(&a1, a + p * MR + 4, sizeof(a1));
#pragma GCC unroll 4
		for (int c = 0; c < NR; c++) {
			vf4 bc = vf4{} + b[p * NR + c];
			t[c][0] += a0 * bc;
			t[c][1] += a1 * bc;
		}
	}
	for (int c = 0; c < NR; c++) {
		memcpy(&acc[c][0], &t[c][0], sizeof(vf4));
		memcpy(&acc[c][4], &t[c][1], sizeof(vf4));
	}
}

/* The k parts of an m x n x k product (split_k above). */
int64_t k_splits(int64_t m, int64_t n, int64_t k)
{
	int64_t s = 1 + (m / MR + n) % SPLIT_K_MAX;
	if (s > k / SPLIT_K_MIN_K)
		s = k / SPLIT_K_MIN_K;
	return s < 1 ? 1 : s;
}

/* acc = the sum of `splits` parts of k, each summed by micro_kernel, added in part order. */
void split_kernel(const float *__restrict a, const float *__restrict b, int64_t k, int64_t splits,
		  float acc[NR][MR])
{
	micro_kernel(a, b, k / splits, acc);
	for (int64_t s = 1; s < splits; s++) {
		int64_t k0 = k * s / splits, k1 = k * (s + 1) / splits;
		float part[NR][MR];
		micro_kernel(a + k0 * MR, b + k0 * NR, k1 - k0, part);
		for (int c = 0; c < NR; c++)
			for (int r = 0; r < MR; r++)
				acc[c][r] += part[c][r];
	}
}

/* $HOLOD_GPU_EMU_LT_REFUSE: how many of the heuristic's first algorithms cublasLtMatmul refuses */
uint64_t refused_algos(void)
{
	const char *s = getenv("HOLOD_GPU_EMU_LT_REFUSE");
	char *end = nullptr;
	unsigned long v = s && *s ? strtoul(s, &end, 10) : 0;
	if (s && *s && (*end || v > (unsigned long)LT_ALGOS))
		gpu_emu_die("HOLOD_GPU_EMU_LT_REFUSE=%s: expected 0..%d", s, LT_ALGOS);
	return v;
}

/* The largest power of two up to 256 dividing the address. */
uint32_t address_align(const void *p)
{
	uint32_t al = 256;
	while (al > 1 && (uintptr_t)p % al)
		al /= 2;
	return al;
}

bool vectorised(uint64_t kind)
{
	return kind == ALGO_SPLITK_WS || kind == ALGO_VEC_A || kind == ALGO_VEC_B;
}

bool known_kind(uint64_t kind)
{
	return kind >= ALGO_SPLITK_WS && kind <= ALGO_ELEM_C;
}

/* An algorithm's alignment, as cuBLASLt's CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_*_BYTES: required of
 * the operand's pointer, its leading dimension and its batch stride, in bytes. */
uint32_t operand_align(uint64_t kind, uint32_t type)
{
	return vectorised(kind) ? LT_VEC_ALIGN : (uint32_t)type_size(type);
}

/* FP8 runs on the vectorised (tensor-core) algorithms only: 16-byte pointers and leading
 * dimensions (DESIGN above). */
bool kind_runs(uint64_t kind, const problem &pb)
{
	return vectorised(kind) || !is_fp8(pb.ab_type);
}

bool layout_aligned(const matrix_layout *l, uint32_t align)
{
	uint64_t es = type_size(l->type);
	return (uint64_t)l->ld * es % align == 0 &&
	       (l->batch_count == 1 || (uint64_t)l->batch_stride * es % align == 0);
}

/* Whether `kind` runs the problem on A, B, C, D whose pointers are aligned to align[0..3]. */
bool kind_aligned(uint64_t kind, const problem &pb, const uint32_t align[4])
{
	const matrix_layout *l[4] = {pb.a, pb.b, pb.c, pb.d};
	if (!kind_runs(kind, pb))
		return false;
	for (int i = 0; i < 4; i++) {
		uint32_t need = operand_align(kind, l[i]->type);
		if (align[i] < need || !layout_aligned(l[i], need))
			return false;
	}
	return true;
}

/* The workspace `kind` needs for the problem: split-K through the workspace keeps every part's
 * m x n fp32 partial sums of every batch there (cuBLASLt's COMPUTE_TYPE reduction scheme); false
 * when that is no possible size. */
bool workspace_need(uint64_t kind, const problem &pb, size_t *ret)
{
	uint64_t bytes;
	if (kind != ALGO_SPLITK_WS) {
		*ret = 0;
		return true;
	}
	if (__builtin_mul_overflow((uint64_t)k_splits(pb.m, pb.n, pb.k), (uint64_t)pb.m, &bytes) ||
	    __builtin_mul_overflow(bytes, (uint64_t)pb.n, &bytes) ||
	    __builtin_mul_overflow(bytes, (uint64_t)pb.batch * sizeof(float), &bytes) || bytes > LT_MAX_EXTENT)
		return false;
	*ret = (size_t)((bytes + LT_WS_GRANULE - 1) / LT_WS_GRANULE * LT_WS_GRANULE);
	return true;
}

/* The heuristic: up to LT_ALGOS kinds that run the problem on operands aligned to align[0..3]
 * within `workspace` bytes, best first; returns how many. */
int pick_algos(const problem &pb, const uint32_t align[4], size_t workspace, uint64_t kinds[LT_ALGOS])
{
	static const uint64_t order[] = {ALGO_SPLITK_WS, ALGO_VEC_A,  ALGO_VEC_B,
					 ALGO_ELEM_A,	 ALGO_ELEM_B, ALGO_ELEM_C};
	int n = 0;
	for (uint64_t kind : order) {
		size_t need;
		if (n == LT_ALGOS || (kind == ALGO_SPLITK_WS && k_splits(pb.m, pb.n, pb.k) < 2))
			continue;
		if (kind_aligned(kind, pb, align) && workspace_need(kind, pb, &need) && need <= workspace)
			kinds[n++] = kind;
	}
	return n;
}

/* Every algorithm reads the bias vector 16 bytes at a time: a less aligned bias pointer is
 * refused, by the heuristic as by the matmul (DESIGN above). */
bool bias_aligned(const matmul_desc *op)
{
	return !has_bias(op->epilogue) || !op->bias || (uintptr_t)op->bias % LT_BIAS_ALIGN == 0;
}

/* What an algorithm was chosen for (data[3]): the types and the epilogue. */
uint64_t algo_fingerprint(const problem &pb)
{
	return (uint64_t)pb.ab_type | (uint64_t)pb.cd_type << 8 | (uint64_t)pb.bias_type << 16 |
	       (uint64_t)pb.epilogue << 24;
}

inline float gelu_tanh(float x)
{
	const float sqrt_2_over_pi = 0.7978845608028654f;
	return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}

struct operands {
	float alpha, beta;
	const void *a, *b, *c;
	void *d;
	const void *bias;
	const float *a_scale, *b_scale; /* FP8 (NULL: 1), read when the product runs */
};

cublasStatus_t run(const problem &pb, const operands &o)
{
	int64_t m = pb.m, n = pb.n, k = pb.k;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	int64_t mstrips = (m + MR - 1) / MR, nstrips = (n + NR - 1) / NR;
	size_t ab_size = type_size(pb.ab_type), cd_size = type_size(pb.cd_type);
	/* k may be 0 (D = beta C + epilogue); keep the allocations non-empty. */
	size_t kk = k ? (size_t)k : 1, a_bytes, b_bytes;
	if (__builtin_mul_overflow(sizeof(float) * kk, (size_t)MC, &a_bytes) ||
	    __builtin_mul_overflow(sizeof(float) * kk, (size_t)(nstrips * NR), &b_bytes))
		return CUBLAS_STATUS_ALLOC_FAILED;
	float *ap = static_cast<float *>(malloc(a_bytes));
	float *bp = static_cast<float *>(malloc(b_bytes));
	if (!ap || !bp) {
		free(ap);
		free(bp);
		return CUBLAS_STATUS_ALLOC_FAILED;
	}
	int64_t splits = k_splits(m, n, k);
	/* FP8's scales, read now: a graph replays the product with the values of its launch */
	const float ab_scale = (o.a_scale ? *o.a_scale : 1.0f) * (o.b_scale ? *o.b_scale : 1.0f);
	bool relu = pb.epilogue == CUBLASLT_EPILOGUE_RELU || pb.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
	bool gelu = pb.epilogue == CUBLASLT_EPILOGUE_GELU || pb.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
	bool bias = has_bias(pb.epilogue);

	for (int64_t bt = 0; bt < pb.batch; bt++) {
		auto *a = static_cast<const char *>(o.a) + (size_t)(bt * pb.stride_a) * ab_size;
		auto *b = static_cast<const char *>(o.b) + (size_t)(bt * pb.stride_b) * ab_size;
		auto *c = static_cast<const char *>(o.c) + (size_t)(bt * pb.stride_c) * cd_size;
		auto *d = static_cast<char *>(o.d) + (size_t)(bt * pb.stride_d) * cd_size;
		/* A broadcast B (stride 0) is packed once for the whole batch. */
		if (bt == 0 || pb.stride_b != 0)
			pack_any(b, pb.ab_type, pb.ldb, pb.transb, n, k, NR, bp);

		for (int64_t i0 = 0; i0 < mstrips; i0 += MC / MR) {
			int64_t i1 = i0 + MC / MR < mstrips ? i0 + MC / MR : mstrips;
			int64_t r0 = i0 * MR, rows = m - r0 < MC ? m - r0 : MC;
			/* A broadcast A that fits one block is packed once for the whole batch. */
			if (bt == 0 || pb.stride_a != 0 || mstrips > MC / MR)
				pack_any(a + (size_t)(pb.transa ? r0 * pb.lda : r0) * ab_size, pb.ab_type,
					 pb.lda, !pb.transa, rows, k, MR, ap);
			for (int64_t js = 0; js < nstrips; js++) {
				for (int64_t is = i0; is < i1; is++) {
					float acc[NR][MR];
					split_kernel(ap + (is - i0) * k * MR, bp + js * k * NR, k, splits,
						     acc);
					for (int cc = 0; cc < NR && js * NR + cc < n; cc++) {
						int64_t j = js * NR + cc;
						for (int r = 0; r < MR && is * MR + r < m; r++) {
							int64_t i = is * MR + r;
							float v = o.alpha * (ab_scale * acc[cc][r]);
							if (o.beta != 0.0f)
								v += o.beta *
								     load(c, i + j * pb.ldc, pb.cd_type);
							if (bias)
								v += load(o.bias, i, pb.bias_type);
							if (relu)
								v = v < 0.0f ? 0.0f : v;
							else if (gelu)
								v = gelu_tanh(v);
							store(d, i + j * pb.ldd, pb.cd_type, v);
						}
					}
				}
			}
		}
	}
	free(ap);
	free(bp);
	return CUBLAS_STATUS_SUCCESS;
}

/* A matmul recorded into a graph: everything it needs, by value. */
struct recorded_matmul {
	problem pb;
	operands o;
};

void replay_matmul(const void *args)
{
	auto *r = static_cast<const recorded_matmul *>(args);
	if (run(r->pb, r->o) != CUBLAS_STATUS_SUCCESS)
		gpu_emu_die("cublasLtMatmul replayed from a graph: no memory for its fp32 panels");
}

void *clone_matmul(const void *args)
{
	return new recorded_matmul(*static_cast<const recorded_matmul *>(args));
}

void destroy_matmul(void *args)
{
	delete static_cast<recorded_matmul *>(args);
}

} // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *lightHandle)
{
	if (!lightHandle)
		return CUBLAS_STATUS_INVALID_VALUE;
	auto *c = new (std::nothrow) lt_context{LT_HANDLE_MAGIC};
	if (!c)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*lightHandle = reinterpret_cast<cublasLtHandle_t>(c);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle)
{
	lt_context *c = as_ctx(lightHandle);
	if (!c)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	c->magic = 0;
	delete c;
	return CUBLAS_STATUS_SUCCESS;
}

const char *CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status)
{
	switch (status) {
	case CUBLAS_STATUS_SUCCESS:
		return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED:
		return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH:
		return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_MAPPING_ERROR:
		return "CUBLAS_STATUS_MAPPING_ERROR";
	case CUBLAS_STATUS_EXECUTION_FAILED:
		return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR:
		return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_LICENSE_ERROR:
		return "CUBLAS_STATUS_LICENSE_ERROR";
	}
	return "CUBLAS_STATUS_UNKNOWN";
}

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status)
{
	switch (status) {
	case CUBLAS_STATUS_SUCCESS:
		return "success";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "the library was not initialized";
	case CUBLAS_STATUS_ALLOC_FAILED:
		return "the resource allocation failed";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "an invalid numeric value was used as an argument";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "the functionality requested is not supported";
	default:
		return "an error occurred in the emulated cuBLASLt";
	}
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
						     cublasComputeType_t computeType, cudaDataType_t scaleType)
{
	if (!matmulDesc)
		return CUBLAS_STATUS_INVALID_VALUE;
	auto *d = new (std::nothrow) matmul_desc{LT_DESC_MAGIC,
						 (int32_t)computeType,
						 (int32_t)scaleType,
						 CUBLASLT_POINTER_MODE_HOST,
						 CUBLAS_OP_N,
						 CUBLAS_OP_N,
						 CUBLASLT_EPILOGUE_DEFAULT,
						 nullptr,
						 -1,
						 nullptr,
						 nullptr};
	if (!d)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
	matmul_desc *d = as_desc(matmulDesc);
	if (!d)
		return CUBLAS_STATUS_INVALID_VALUE;
	d->magic = 0;
	delete d;
	return CUBLAS_STATUS_SUCCESS;
}

/* Only the attributes of the subset exist here (FP8's A and B scale pointers among them); setting
 * any other one (AUX pointers, C/D scale and amax pointers, scale modes, bias batch stride, fast
 * accumulation, ...) is refused at once. */
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
							   cublasLtMatmulDescAttributes_t attr,
							   const void *buf, size_t sizeInBytes)
{
	matmul_desc *d = as_desc(matmulDesc);
	if (!d)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
		return set_attr(d->compute_type, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
		return set_attr(d->scale_type, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_POINTER_MODE:
		return set_attr(d->pointer_mode, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_TRANSA:
		return set_attr(d->transa, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_TRANSB:
		return set_attr(d->transb, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_EPILOGUE:
		return set_attr(d->epilogue, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
		return set_attr(d->bias, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
		return set_attr(d->bias_type, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
		return set_attr(d->a_scale, buf, sizeInBytes);
	case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
		return set_attr(d->b_scale, buf, sizeInBytes);
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
							   cublasLtMatmulDescAttributes_t attr, void *buf,
							   size_t sizeInBytes, size_t *sizeWritten)
{
	const matmul_desc *d = as_desc(matmulDesc);
	if (!d)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
		return get_attr(d->compute_type, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
		return get_attr(d->scale_type, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_POINTER_MODE:
		return get_attr(d->pointer_mode, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_TRANSA:
		return get_attr(d->transa, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_TRANSB:
		return get_attr(d->transb, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_EPILOGUE:
		return get_attr(d->epilogue, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
		return get_attr(d->bias, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
		return get_attr(d->bias_type, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
		return get_attr(d->a_scale, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
		return get_attr(d->b_scale, buf, sizeInBytes, sizeWritten);
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
						       uint64_t rows, uint64_t cols, int64_t ld)
{
	if (!matLayout)
		return CUBLAS_STATUS_INVALID_VALUE;
	auto *l = new (std::nothrow)
		matrix_layout{LT_LAYOUT_MAGIC, (uint32_t)type, CUBLASLT_ORDER_COL, rows, cols, ld, 1, 0};
	if (!l)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
	matrix_layout *l = as_layout(matLayout);
	if (!l)
		return CUBLAS_STATUS_INVALID_VALUE;
	l->magic = 0;
	delete l;
	return CUBLAS_STATUS_SUCCESS;
}

/* PLANE_OFFSET (planar complex) and BATCH_MODE (pointer arrays) are outside the subset. */
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
							     cublasLtMatrixLayoutAttribute_t attr,
							     const void *buf, size_t sizeInBytes)
{
	matrix_layout *l = as_layout(matLayout);
	if (!l)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (attr) {
	case CUBLASLT_MATRIX_LAYOUT_TYPE:
		return set_attr(l->type, buf, sizeInBytes);
	case CUBLASLT_MATRIX_LAYOUT_ORDER:
		return set_attr(l->order, buf, sizeInBytes);
	case CUBLASLT_MATRIX_LAYOUT_ROWS:
		return set_attr(l->rows, buf, sizeInBytes);
	case CUBLASLT_MATRIX_LAYOUT_COLS:
		return set_attr(l->cols, buf, sizeInBytes);
	case CUBLASLT_MATRIX_LAYOUT_LD:
		return set_attr(l->ld, buf, sizeInBytes);
	case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
		return set_attr(l->batch_count, buf, sizeInBytes);
	case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
		return set_attr(l->batch_stride, buf, sizeInBytes);
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
							     cublasLtMatrixLayoutAttribute_t attr, void *buf,
							     size_t sizeInBytes, size_t *sizeWritten)
{
	const matrix_layout *l = as_layout(matLayout);
	if (!l)
		return CUBLAS_STATUS_INVALID_VALUE;
	switch (attr) {
	case CUBLASLT_MATRIX_LAYOUT_TYPE:
		return get_attr(l->type, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATRIX_LAYOUT_ORDER:
		return get_attr(l->order, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATRIX_LAYOUT_ROWS:
		return get_attr(l->rows, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATRIX_LAYOUT_COLS:
		return get_attr(l->cols, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATRIX_LAYOUT_LD:
		return get_attr(l->ld, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
		return get_attr(l->batch_count, buf, sizeInBytes, sizeWritten);
	case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
		return get_attr(l->batch_stride, buf, sizeInBytes, sizeWritten);
	default:
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
	if (!pref)
		return CUBLAS_STATUS_INVALID_VALUE;
	auto *p = new (std::nothrow) matmul_pref{LT_PREF_MAGIC, 0, {256, 256, 256, 256}};
	if (!p)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*pref = reinterpret_cast<cublasLtMatmulPreference_t>(p);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
	matmul_pref *p = as_pref(pref);
	if (!p)
		return CUBLAS_STATUS_INVALID_VALUE;
	p->magic = 0;
	delete p;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
								 cublasLtMatmulPreferenceAttributes_t attr,
								 const void *buf, size_t sizeInBytes)
{
	matmul_pref *p = as_pref(pref);
	if (!p)
		return CUBLAS_STATUS_INVALID_VALUE;
	int ai = align_index(attr);
	if (ai >= 0) {
		uint32_t v;
		cublasStatus_t st = set_attr(v, buf, sizeInBytes);
		if (st != CUBLAS_STATUS_SUCCESS)
			return st;
		if (v == 0 || (v & (v - 1)))
			return CUBLAS_STATUS_INVALID_VALUE;
		p->min_align[ai] = v;
		return CUBLAS_STATUS_SUCCESS;
	}
	if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	return set_attr(p->max_workspace, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
								 cublasLtMatmulPreferenceAttributes_t attr,
								 void *buf, size_t sizeInBytes,
								 size_t *sizeWritten)
{
	const matmul_pref *p = as_pref(pref);
	if (!p)
		return CUBLAS_STATUS_INVALID_VALUE;
	int ai = align_index(attr);
	if (ai >= 0)
		return get_attr(p->min_align[ai], buf, sizeInBytes, sizeWritten);
	if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	return get_attr(p->max_workspace, buf, sizeInBytes, sizeWritten);
}

/* Up to LT_ALGOS algorithms (as many as asked), best first, that run the problem on operands as
 * aligned as the preference says within its workspace (pick_algos()); CUBLAS_STATUS_NOT_SUPPORTED
 * and none when no algorithm does, as cuBLASLt answers then. */
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
	cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
	cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
	cublasLtMatmulPreference_t preference, int requestedAlgoCount,
	cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
	if (!returnAlgoCount)
		return CUBLAS_STATUS_INVALID_VALUE;
	*returnAlgoCount = 0;
	if (!as_ctx(lightHandle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	const matmul_pref *pref = as_pref(preference);
	if (!pref || requestedAlgoCount < 1 || !heuristicResultsArray)
		return CUBLAS_STATUS_INVALID_VALUE;
	const matmul_desc *op = as_desc(operationDesc);
	problem pb;
	cublasStatus_t st = check_problem(op, as_layout(Adesc), as_layout(Bdesc), as_layout(Cdesc),
					  as_layout(Ddesc), &pb);
	if (st != CUBLAS_STATUS_SUCCESS)
		return st;
	uint64_t kinds[LT_ALGOS];
	int n = bias_aligned(op) ? pick_algos(pb, pref->min_align, pref->max_workspace, kinds) : 0;
	if (n == 0)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (n > requestedAlgoCount)
		n = requestedAlgoCount;
	for (int i = 0; i < n; i++) {
		cublasLtMatmulHeuristicResult_t r;
		memset(&r, 0, sizeof(r));
		r.algo.data[0] = LT_ALGO_TAG;
		r.algo.data[1] = (uint64_t)i;
		r.algo.data[2] = kinds[i];
		r.algo.data[3] = algo_fingerprint(pb);
		workspace_need(kinds[i], pb, &r.workspaceSize); /* fits: pick_algos() asked */
		r.state = CUBLAS_STATUS_SUCCESS;
		r.wavesCount = 1.0f;
		heuristicResultsArray[i] = r;
	}
	*returnAlgoCount = n;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
					   const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
					   const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
					   const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
					   cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
					   void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
	if (!as_ctx(lightHandle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	const matmul_desc *op = as_desc(computeDesc);
	problem pb;
	cublasStatus_t st = check_problem(op, as_layout(Adesc), as_layout(Bdesc), as_layout(Cdesc),
					  as_layout(Ddesc), &pb);
	if (st != CUBLAS_STATUS_SUCCESS)
		return st;
	/* An algorithm of another problem's types or epilogue: "descriptors don't match algo
	 * descriptor" (cublasLtMatmulAlgoCheck) */
	if (algo && (algo->data[0] != LT_ALGO_TAG || algo->data[1] >= (uint64_t)LT_ALGOS ||
		     !known_kind(algo->data[2]) || algo->data[3] != algo_fingerprint(pb)))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (algo && algo->data[1] < refused_algos())
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!alpha || !beta || !A || !B || !C || !D || (has_bias(pb.epilogue) && !op->bias))
		return CUBLAS_STATUS_INVALID_VALUE;
	/* The algorithm against the operands it is given (an implicit heuristic without one): one
	 * chosen for more alignment than the pointers, leading dimensions or batch strides have
	 * cannot run them; less workspace than it needs is "an impossible configuration". */
	const uint32_t align[4] = {address_align(A), address_align(B), address_align(C), address_align(D)};
	uint64_t kind;
	size_t need = 0;
	if (!bias_aligned(op))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (algo) {
		kind = algo->data[2];
		if (!kind_aligned(kind, pb, align))
			return CUBLAS_STATUS_NOT_SUPPORTED;
		if (!workspace_need(kind, pb, &need) || workspaceSizeInBytes < need)
			return CUBLAS_STATUS_INVALID_VALUE;
	} else {
		uint64_t kinds[LT_ALGOS];
		if (pick_algos(pb, align, workspaceSizeInBytes, kinds) == 0)
			return CUBLAS_STATUS_NOT_SUPPORTED;
		kind = kinds[0];
		workspace_need(kind, pb, &need);
	}
	if (need && !gpu_emu_is_device_range(workspace, need))
		return CUBLAS_STATUS_INVALID_VALUE;
	operands o{*static_cast<const float *>(alpha),
		   *static_cast<const float *>(beta),
		   A,
		   B,
		   C,
		   D,
		   op->bias,
		   static_cast<const float *>(pb.a_scale),
		   static_cast<const float *>(pb.b_scale)};
	/* the scales are device floats (a GPU would fault on anything else) */
	for (const void *sp : {pb.a_scale, pb.b_scale})
		if (sp && ((uintptr_t)sp % sizeof(float) || !gpu_emu_is_device_range(sp, sizeof(float))))
			return CUBLAS_STATUS_INVALID_VALUE;
	/* In place, C and D must be described alike: cuBLASLt reads C through D's layout then. */
	if (C == D && (pb.c->ld != pb.d->ld || pb.c->batch_stride != pb.d->batch_stride))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	size_t ext_a = pb.ext_a, ext_b = pb.ext_b, ext_c = pb.ext_c, ext_d = pb.ext_d;
	if (overlaps(D, ext_d, A, ext_a) || overlaps(D, ext_d, B, ext_b) ||
	    (C != D && o.beta != 0.0f && overlaps(D, ext_d, C, ext_c)))
		return CUBLAS_STATUS_INVALID_VALUE;
	/* What a GPU would fault on: host memory, or an operand running past its allocation. */
	if (!gpu_emu_is_device_range(A, ext_a) || !gpu_emu_is_device_range(B, ext_b) ||
	    !gpu_emu_is_device_range(D, ext_d) || (o.beta != 0.0f && !gpu_emu_is_device_range(C, ext_c)) ||
	    (has_bias(pb.epilogue) &&
	     !gpu_emu_is_device_range(op->bias, (size_t)pb.m * type_size(pb.bias_type))))
		return CUBLAS_STATUS_INVALID_VALUE;
	/* Its kernels launch into `stream`: from another current device than the stream's the
	 * launch fails, and operands in another device's memory would fault (no peer access), as
	 * the runtime's kernels do (runtime.cc). */
	int dev = gpu_emu_stream_device(stream);
	if (dev != gpu_emu_current_device())
		return CUBLAS_STATUS_EXECUTION_FAILED;
	const void *on_device[] = {A,
				   B,
				   D,
				   o.beta != 0.0f ? C : nullptr,
				   has_bias(pb.epilogue) ? op->bias : nullptr,
				   need ? workspace : nullptr};
	for (size_t i = 0; i < sizeof(on_device) / sizeof(on_device[0]); i++)
		if (on_device[i] && gpu_emu_device_of(on_device[i]) != dev)
			gpu_emu_die("cublasLtMatmul: operand %zu (A, B, D, C, bias, workspace) is in device "
				    "%d's memory, the stream is device %d's",
				    i, gpu_emu_device_of(on_device[i]), dev);
	cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
	if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess)
		return CUBLAS_STATUS_INVALID_VALUE;
	/* Lazy loading: each algorithm kind is one kernel of the library's, loaded at its first
	 * run; first run inside a capture, it fails the capture as a kernel does (runtime.cc). */
	static const char lt_kernels[ALGO_ELEM_C + 1] = {};
	if (!gpu_emu_module_use(&lt_kernels[kind], capture != cudaStreamCaptureStatusNone, "cublasLtMatmul",
				__FILE__, __LINE__)) {
		gpu_emu_invalidate_capture(stream);
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	if (capture == cudaStreamCaptureStatusNone)
		return gpu_emu_grid_faults() ? CUBLAS_STATUS_EXECUTION_FAILED : run(pb, o);
	pb.a = pb.b = pb.c = pb.d = nullptr; /* the descriptors may be gone at replay */
	auto *r = new (std::nothrow) recorded_matmul{pb, o};
	if (!r)
		return CUBLAS_STATUS_ALLOC_FAILED;
	gpu_emu_kernel_call call = {nullptr, replay_matmul,    clone_matmul, destroy_matmul,
				    r,	     "cublasLtMatmul", __FILE__,     __LINE__};
	gpu_emu_capture_host_work(&call, stream);
	return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
