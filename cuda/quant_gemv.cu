// Quantized weights on the device (gpu.h, docs/quantization.md "On CUDA"): the decode GEMV on q8,
// q4 and fp8 row records, and their dequantization to bf16 or fp32 for the prefill's cuBLASLt GEMM.
//
// DESIGN: the records are engine/quant/quant.h's, uploaded as they are (codes of a row, padded to
// 64 bytes, then its fp16 scales, padded to 64 bytes; rows back to back). One warp per output row:
// each lane loads 16 bytes of codes at a time (a warp 512 contiguous bytes, one coalesced
// transaction per step; the 64-byte padding of the codes makes every 16-byte load lie whole inside
// them or wholly past them), widens them in registers to the exact dequantized weights (q8: d q;
// q4: fmaf(d, q, m) with d and m from the block's dz; fp8: e4m3(c) s, the code decoded by bit operations (no
// FP8 instruction, so the emulation runs it), one fp32 product; quant_row_to_f32()'s values bit for bit) and
// multiply-adds them in fp32 into
// one sum per token; the warp's sums are reduced by shuffles. Up to GPU_QGEMV_TOKENS tokens share
// each weight load (the accumulators are registers: the token loops are unrolled with the token
// index constant); more rows take more launches, each reading the weights again. Columns past
// `in` are never read from x (the records' padding codes are zero, the activations may be
// anything there). The result is the exact product of the dequantized weights up to fp32
// summation, as the CPU's exact kernels (cpu_gemv_quant_rows()) give.
//
// The dequantization writes one row per block (threads along the columns, coalesced writes):
// fp32 exactly, bf16 rounded to nearest even from the exact fp32 (cpu_quant_rows_to_bf16()'s
// bits).
#include "gpu.h"
#include "gpu_internal.h"
#include "kernel_util.cuh"
#include "klaunch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>

static constexpr int QGEMV_WARPS = 4; /* rows per block */
static constexpr int DEQUANT_THREADS = 256;

static __host__ __device__ inline size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* Bytes of a row's codes as laid out (before the scales' padding): q8 and fp8 one per column
 * (whole blocks of 32), q4 half. */
static __host__ __device__ inline size_t code_bytes(int fmt, int in)
{
	return (size_t)((in + 31) / 32) * (fmt == GPU_QUANT_Q4 ? 16 : 32);
}

/* An e4m3 code's value (OCP FP8 E4M3, float8_e4m3fn), exactly: exponent field e of bias 7 and
 * mantissa m land in fp32's fields (e + 120, m << 20); e == 0 is subnormal, m 2^-9; S.1111.111 is
 * NaN (the records never hold one: the upload refuses it). quant_e4m3_to_f32()'s values. */
static __device__ inline float e4m3_to_f32(unsigned c)
{
	const unsigned e = (c >> 3) & 15u, m = c & 7u;
	float v = e ? __int_as_float((int)(((e + 120u) << 23) | (m << 20))) : (float)m * 0x1p-9f;
	if ((c & 0x7fu) == 0x7fu)
		v = __int_as_float(0x7fc00000);
	return (c & 0x80u) ? -v : v;
}

/* fp16 bits to fp32, exactly (normals, subnormals, infinities, NaN). */
static __device__ inline float f16_to_f32(unsigned h)
{
	unsigned s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0) {
		float v = (float)m * 0x1p-24f;
		return s ? -v : v;
	}
	if (e == 31)
		return __int_as_float((int)(s | 0x7f800000u | (m << 13)));
	return __int_as_float((int)(s | ((e + 112u) << 23) | (m << 13)));
}

/* q4's dz (quant.h): d, an fp16 of 6 significant bits in the top 10 bits, and the offset code z
 * in the low 6; m = d (z * -1/4), exact (quant_q4_d(), quant_q4_m()'s values). */
static __device__ inline float q4_d(unsigned dz)
{
	return f16_to_f32((dz >> 1) & 0x7fe0u);
}
static __device__ inline float q4_m(float d, unsigned dz)
{
	return d * ((float)(dz & 63u) * -0.25f);
}

/* Byte i (0..15) of a 16-byte load. */
static __device__ inline unsigned byte_of(const uint4 &v, int i)
{
	unsigned word = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
	return (word >> (8 * (i & 3))) & 0xffu;
}

template <int FMT, typename XT, typename YT>
static __global__ void qgemv_kernel(const unsigned char *__restrict__ w, size_t row_bytes, int out, int in,
				    const XT *__restrict__ x, size_t ldx, int rows, YT *__restrict__ y,
				    size_t ldy, int accumulate)
{
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int o = blockIdx.x * QGEMV_WARPS + warp;
	if (o >= out)
		return; /* the whole warp: no block barrier below */
	const unsigned char *row = w + (size_t)o * row_bytes;
	const uint16_t *sc = (const uint16_t *)(row + align64(code_bytes(FMT, in)));
	const size_t nbytes = code_bytes(FMT, in);
	/* fp8: the row's fp32 scale behind its codes */
	const float fs = FMT == GPU_QUANT_FP8 ? *(const float *)sc : 0.0f;
	float acc[GPU_QGEMV_TOKENS];
#pragma unroll
	for (int t = 0; t < GPU_QGEMV_TOKENS; t++)
		acc[t] = 0.0f;
	for (size_t off = (size_t)lane * 16; off < nbytes; off += 32 * 16) {
		const uint4 v = *(const uint4 *)(row + off);
		if (FMT == GPU_QUANT_FP8) {
			/* 16 codes: columns off .. off + 15, each e4m3(c) s */
			const int c0 = (int)off, n = in - c0 < 16 ? in - c0 : 16;
#pragma unroll
			for (int i = 0; i < 16; i++) {
				if (i >= n)
					continue;
				const float wv = e4m3_to_f32(byte_of(v, i)) * fs;
#pragma unroll
				for (int t = 0; t < GPU_QGEMV_TOKENS; t++)
					if (t < rows)
						acc[t] = fmaf(wv, gpu_load_f32(x[(size_t)t * ldx + c0 + i]),
							      acc[t]);
			}
		} else if (FMT == GPU_QUANT_Q8) {
			/* 16 codes: columns off .. off + 15 of block off / 32 */
			const float d = f16_to_f32(sc[off / 32]);
			const int c0 = (int)off, n = in - c0 < 16 ? in - c0 : 16;
#pragma unroll
			for (int i = 0; i < 16; i++) {
				if (i >= n)
					continue;
				const float wv = d * (float)(int)(signed char)byte_of(v, i);
#pragma unroll
				for (int t = 0; t < GPU_QGEMV_TOKENS; t++)
					if (t < rows)
						acc[t] = fmaf(wv, gpu_load_f32(x[(size_t)t * ldx + c0 + i]),
							      acc[t]);
			}
		} else {
			/* one block of 32 columns: byte i holds column i (low nibble) and i + 16 (high) */
			const size_t b = off / 16;
			const float d = q4_d(sc[b]), m = q4_m(d, sc[b]);
			const int c0 = (int)(b * 32), n = in - c0 < 32 ? in - c0 : 32;
#pragma unroll
			for (int i = 0; i < 16; i++) {
				if (i >= n)
					continue;
				const unsigned c = byte_of(v, i);
				const float lo = fmaf(d, (float)(c & 15u), m);
#pragma unroll
				for (int t = 0; t < GPU_QGEMV_TOKENS; t++)
					if (t < rows)
						acc[t] = fmaf(lo, gpu_load_f32(x[(size_t)t * ldx + c0 + i]),
							      acc[t]);
				if (i + 16 < n) {
					const float hi = fmaf(d, (float)(c >> 4), m);
#pragma unroll
					for (int t = 0; t < GPU_QGEMV_TOKENS; t++)
						if (t < rows)
							acc[t] =
								fmaf(hi,
								     gpu_load_f32(
									     x[(size_t)t * ldx + c0 + 16 + i]),
								     acc[t]);
				}
			}
		}
	}
#pragma unroll
	for (int t = 0; t < GPU_QGEMV_TOKENS; t++) {
		if (t < rows) {
			const float s = gpu_warp_sum(acc[t]);
			if (lane == 0) {
				YT *p = y + (size_t)t * ldy + o;
				gpu_store(p, accumulate ? gpu_load_f32(*p) + s : s);
			}
		}
	}
}

template <int FMT, typename OT>
static __global__ void dequant_kernel(const unsigned char *__restrict__ w, size_t row_bytes, int in,
				      OT *__restrict__ dst)
{
	const unsigned char *row = w + (size_t)blockIdx.x * row_bytes;
	const uint16_t *sc = (const uint16_t *)(row + align64(code_bytes(FMT, in)));
	OT *o = dst + (size_t)blockIdx.x * in;
	for (int c = threadIdx.x; c < in; c += blockDim.x) {
		const int b = c / 32, j = c % 32;
		float v;
		if (FMT == GPU_QUANT_FP8) {
			v = e4m3_to_f32(row[c]) * *(const float *)sc;
		} else if (FMT == GPU_QUANT_Q8) {
			v = f16_to_f32(sc[b]) * (float)(int)(signed char)row[c];
		} else {
			const unsigned byte = row[(size_t)b * 16 + (j & 15)];
			const unsigned q = j < 16 ? byte & 15u : byte >> 4;
			const float d = q4_d(sc[b]);
			v = fmaf(d, (float)q, q4_m(d, sc[b]));
		}
		gpu_store(o + c, v);
	}
}

extern "C" size_t gpu_quant_row_bytes(enum gpu_quant f, int in)
{
	if ((f != GPU_QUANT_Q8 && f != GPU_QUANT_Q4 && f != GPU_QUANT_FP8) || in < 1)
		return 0;
	size_t nb = (size_t)(in + 31) / 32;
	if (f == GPU_QUANT_FP8)
		return align64(code_bytes(f, in)) + 64;	     /* one fp32 scale, padded to 64 */
	return align64(code_bytes(f, in)) + align64(nb * 2); /* q8: fp16 d; q4: dz */
}

static bool dtype_ok(enum gpu_dtype t)
{
	return t == GPU_DTYPE_F32 || t == GPU_DTYPE_BF16;
}

template <int FMT, typename XT>
static void launch_qgemv_x(cudaStream_t s, dim3 grid, const unsigned char *w, size_t rb, int out, int in,
			   const void *x, size_t ldx, int rows, void *y, enum gpu_dtype y_dtype, size_t ldy,
			   int acc)
{
	if (y_dtype == GPU_DTYPE_BF16)
		klaunch(qgemv_kernel<FMT, XT, __nv_bfloat16>, grid, dim3(32 * QGEMV_WARPS), 0, s, w, rb, out,
			in, (const XT *)x, ldx, rows, (__nv_bfloat16 *)y, ldy, acc);
	else
		klaunch(qgemv_kernel<FMT, XT, float>, grid, dim3(32 * QGEMV_WARPS), 0, s, w, rb, out, in,
			(const XT *)x, ldx, rows, (float *)y, ldy, acc);
}

template <int FMT>
static void launch_qgemv(cudaStream_t s, dim3 grid, const unsigned char *w, size_t rb, int out, int in,
			 const void *x, enum gpu_dtype x_dtype, size_t ldx, int rows, void *y,
			 enum gpu_dtype y_dtype, size_t ldy, int acc)
{
	if (x_dtype == GPU_DTYPE_BF16)
		launch_qgemv_x<FMT, __nv_bfloat16>(s, grid, w, rb, out, in, x, ldx, rows, y, y_dtype, ldy,
						   acc);
	else
		launch_qgemv_x<FMT, float>(s, grid, w, rb, out, in, x, ldx, rows, y, y_dtype, ldy, acc);
}

extern "C" int gpu_qgemv(struct gpu_context *g, const void *w, enum gpu_quant f, int out, int in,
			 const void *x, enum gpu_dtype x_dtype, size_t ldx, int rows, void *y,
			 enum gpu_dtype y_dtype, size_t ldy, bool accumulate)
{
	GPU_BIND_OR_RETURN(g);
	size_t rb = gpu_quant_row_bytes(f, in);
	if (!g || !w || rb == 0 || out < 1 || !x || !dtype_ok(x_dtype) || ldx < (size_t)in || rows < 0 ||
	    rows > GPU_MAX_ROWS || !y || !dtype_ok(y_dtype) || ldy < (size_t)out || ((uintptr_t)w & 15) != 0)
		return -EINVAL;
	cudaStream_t s = (cudaStream_t)g->stream;
	dim3 grid((unsigned)((out + QGEMV_WARPS - 1) / QGEMV_WARPS));
	const size_t xb = x_dtype == GPU_DTYPE_F32 ? 4 : 2, yb = y_dtype == GPU_DTYPE_F32 ? 4 : 2;
	for (int r0 = 0; r0 < rows; r0 += GPU_QGEMV_TOKENS) {
		const int n = rows - r0 < GPU_QGEMV_TOKENS ? rows - r0 : GPU_QGEMV_TOKENS;
		const void *xr = (const char *)x + (size_t)r0 * ldx * xb;
		void *yr = (char *)y + (size_t)r0 * ldy * yb;
		if (f == GPU_QUANT_FP8)
			launch_qgemv<GPU_QUANT_FP8>(s, grid, (const unsigned char *)w, rb, out, in, xr,
						    x_dtype, ldx, n, yr, y_dtype, ldy, accumulate);
		else if (f == GPU_QUANT_Q8)
			launch_qgemv<GPU_QUANT_Q8>(s, grid, (const unsigned char *)w, rb, out, in, xr,
						   x_dtype, ldx, n, yr, y_dtype, ldy, accumulate);
		else
			launch_qgemv<GPU_QUANT_Q4>(s, grid, (const unsigned char *)w, rb, out, in, xr,
						   x_dtype, ldx, n, yr, y_dtype, ldy, accumulate);
		int r = GPU_CHECK(cudaGetLastError());
		if (r < 0)
			return r;
	}
	return 0;
}

extern "C" int gpu_dequant(struct gpu_context *g, const void *w, enum gpu_quant f, int out, int in, void *dst,
			   enum gpu_dtype dtype)
{
	GPU_BIND_OR_RETURN(g);
	size_t rb = gpu_quant_row_bytes(f, in);
	if (!g || !w || rb == 0 || out < 1 || !dst || !dtype_ok(dtype))
		return -EINVAL;
	cudaStream_t s = (cudaStream_t)g->stream;
	const unsigned char *wb = (const unsigned char *)w;
	int threads = in < DEQUANT_THREADS ? (in + 31) / 32 * 32 : DEQUANT_THREADS;
	if (f == GPU_QUANT_FP8) {
		if (dtype == GPU_DTYPE_BF16)
			klaunch(dequant_kernel<GPU_QUANT_FP8, __nv_bfloat16>, dim3((unsigned)out),
				dim3(threads), 0, s, wb, rb, in, (__nv_bfloat16 *)dst);
		else
			klaunch(dequant_kernel<GPU_QUANT_FP8, float>, dim3((unsigned)out), dim3(threads), 0,
				s, wb, rb, in, (float *)dst);
	} else if (f == GPU_QUANT_Q8) {
		if (dtype == GPU_DTYPE_BF16)
			klaunch(dequant_kernel<GPU_QUANT_Q8, __nv_bfloat16>, dim3((unsigned)out),
				dim3(threads), 0, s, wb, rb, in, (__nv_bfloat16 *)dst);
		else
			klaunch(dequant_kernel<GPU_QUANT_Q8, float>, dim3((unsigned)out), dim3(threads), 0, s,
				wb, rb, in, (float *)dst);
	} else {
		if (dtype == GPU_DTYPE_BF16)
			klaunch(dequant_kernel<GPU_QUANT_Q4, __nv_bfloat16>, dim3((unsigned)out),
				dim3(threads), 0, s, wb, rb, in, (__nv_bfloat16 *)dst);
		else
			klaunch(dequant_kernel<GPU_QUANT_Q4, float>, dim3((unsigned)out), dim3(threads), 0, s,
				wb, rb, in, (float *)dst);
	}
	return GPU_CHECK(cudaGetLastError());
}

/* ---- FP8 activations for cuBLASLt's FP8 GEMM (gpu_fp8_quantize) ------------------------------
 *
 * DESIGN: the prefill's FP8 GEMM multiplies e4m3 weights by e4m3 activations, each with an fp32
 * scale (cuBLASLt's A/B_SCALE_POINTER). The activations' scale comes from their largest magnitude,
 * found on the device so nothing waits for the host: one block per row reduces its row's amax
 * (per token: that row's scale, amax / 448; per tensor: into a scratch of one float per row, then
 * one block reduces those to the tensor's scale), then one block per row writes the codes
 * e4m3(x / s), rounded to nearest even and saturated at +-448 (quant_f32_to_e4m3()'s codes: the
 * division is IEEE, and the rounding is done in integers on the float's bits). A row's columns
 * past `in` up to ldq are written as zero codes, so a GEMM may read them. amax 0 gives s = 1, as
 * quant_fp8_scale_for(). */

static constexpr int FP8_ACT_THREADS = 256;

/* Block maximum of v >= 0 (blockDim.x a multiple of 32); every thread gets it. */
static __device__ inline float block_max(float v, float *partial)
{
	v = gpu_warp_max(v);
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0)
		partial[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f;
		v = gpu_warp_max(v);
		if (lane == 0)
			partial[32] = v;
	}
	__syncthreads();
	return partial[32];
}

/* v rounded to the nearest e4m3 code (ties to even), saturating at +-448; NaN to 0x7f. */
static __device__ inline unsigned char f32_to_e4m3(float v)
{
	const unsigned bits = (unsigned)__float_as_int(v), sign = (bits >> 24) & 0x80u;
	const float a = fabsf(v);
	if (a != a)
		return 0x7f;
	if (a >= 448.0f)
		return (unsigned char)(sign | 0x7eu);
	if (a < 0x1p-6f) /* subnormal codes, 2^-9 apart: a * 2^9 is exact, rintf is to nearest even */
		return (unsigned char)(sign | (unsigned)rintf(a * 512.0f));
	/* normal: keep 3 mantissa bits, rounding the 20 dropped ones to nearest even (a carry moves
	 * into the exponent, which is what it means) */
	unsigned u = bits & 0x7fffffffu;
	u += 0x7ffffu + ((u >> 20) & 1u);
	const unsigned e = (u >> 23) - 120u, m = (u >> 20) & 7u;
	const unsigned code = e << 3 | m;
	return (unsigned char)(sign | (code > 0x7eu ? 0x7eu : code));
}

/* per row: its amax; per token its scale into scales[r], else into ws[r] */
template <typename XT>
static __global__ void fp8_rowmax_kernel(const XT *__restrict__ x, size_t ldx, int in, int per_token,
					 float *__restrict__ scales, float *__restrict__ ws)
{
	__shared__ float partial[33];
	const XT *row = x + (size_t)blockIdx.x * ldx;
	float m = 0.0f;
	for (int c = threadIdx.x; c < in; c += blockDim.x)
		m = fmaxf(m, fabsf(gpu_load_f32(row[c])));
	m = block_max(m, partial);
	if (threadIdx.x == 0) {
		if (per_token)
			scales[blockIdx.x] = m > 0.0f ? m / 448.0f : 1.0f;
		else
			ws[blockIdx.x] = m;
	}
}

/* one block: the tensor's scale from the rows' amax */
static __global__ void fp8_tensor_scale_kernel(const float *__restrict__ ws, int rows,
					       float *__restrict__ scales)
{
	__shared__ float partial[33];
	float m = 0.0f;
	for (int r = threadIdx.x; r < rows; r += blockDim.x)
		m = fmaxf(m, ws[r]);
	m = block_max(m, partial);
	if (threadIdx.x == 0)
		scales[0] = m > 0.0f ? m / 448.0f : 1.0f;
}

template <typename XT>
static __global__ void fp8_quant_kernel(const XT *__restrict__ x, size_t ldx, int in,
					unsigned char *__restrict__ q, size_t ldq,
					const float *__restrict__ scales, int per_token)
{
	const float s = scales[per_token ? blockIdx.x : 0];
	const XT *row = x + (size_t)blockIdx.x * ldx;
	unsigned char *out = q + (size_t)blockIdx.x * ldq;
	for (size_t c = threadIdx.x; c < ldq; c += blockDim.x)
		out[c] = c < (size_t)in ? f32_to_e4m3(gpu_load_f32(row[c]) / s) : 0;
}

template <typename XT>
static void launch_fp8_quantize(cudaStream_t s, const void *x, size_t ldx, int rows, int in, unsigned char *q,
				size_t ldq, float *scales, enum gpu_fp8_scaling mode, float *ws)
{
	const XT *xt = (const XT *)x;
	const int per_token = mode == GPU_FP8_PER_TOKEN;
	if (mode != GPU_FP8_GIVEN) {
		klaunch(fp8_rowmax_kernel<XT>, dim3((unsigned)rows), dim3(FP8_ACT_THREADS), 0, s, xt, ldx, in,
			per_token, scales, ws);
		if (!per_token)
			klaunch(fp8_tensor_scale_kernel, dim3(1), dim3(FP8_ACT_THREADS), 0, s,
				(const float *)ws, rows, scales);
	}
	klaunch(fp8_quant_kernel<XT>, dim3((unsigned)rows), dim3(FP8_ACT_THREADS), 0, s, xt, ldx, in, q, ldq,
		(const float *)scales, per_token);
}

extern "C" int gpu_fp8_quantize(struct gpu_context *g, const void *x, enum gpu_dtype x_dtype, size_t ldx,
				int rows, int in, void *q, size_t ldq, float *scales,
				enum gpu_fp8_scaling mode, float *ws)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !x || !dtype_ok(x_dtype) || in < 1 || ldx < (size_t)in || rows < 1 || rows > GPU_MAX_ROWS ||
	    !q || ldq < (size_t)in || !scales ||
	    (mode != GPU_FP8_PER_TENSOR && mode != GPU_FP8_PER_TOKEN && mode != GPU_FP8_GIVEN) ||
	    (mode == GPU_FP8_PER_TENSOR && !ws))
		return -EINVAL;
	cudaStream_t s = (cudaStream_t)g->stream;
	if (x_dtype == GPU_DTYPE_BF16)
		launch_fp8_quantize<__nv_bfloat16>(s, x, ldx, rows, in, (unsigned char *)q, ldq, scales, mode,
						   ws);
	else
		launch_fp8_quantize<float>(s, x, ldx, rows, in, (unsigned char *)q, ldq, scales, mode, ws);
	return GPU_CHECK(cudaGetLastError());
}
