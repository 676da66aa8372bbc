/* engine internal: the quantized weight formats (docs/quantization.md), their reference quantize
 * and dequantize, their sizes and their error bounds.
 *
 * DESIGN: a quantized matrix of `rows` x `cols` (cols along the input dimension, the direction a
 * product sums over) is stored row by row, each row in blocks of QUANT_BLOCK columns, the last
 * block padded with zero codes. A row is one record of quant_row_bytes() bytes, a multiple of
 * QUANT_ALIGN, so with 64-byte aligned data every row starts on a cache line:
 *
 *   q8: [int8 codes, nb x 32, padded to 64 bytes][fp16 scale d per block, padded to 64 bytes]
 *       w = d * q, q in [-127, 127]                                    (8.5 bits per weight)
 *   q4: [nibbles, nb x 16 bytes, padded to 64][uint16 dz per block, padded to 64]
 *       w = d * (q - z / 4), q in [0, 15]; dz's top 10 bits are d's fp16 bits (d >= 0, so
 *       the sign bit is 0) less its 5 lowest mantissa bits, which are 0 (d an fp16 of 6
 *       significant bits), and its low 6 the offset code z in [0, 63]; byte j of a block holds
 *       column j in its low nibble and column j + 16 in its high one (GGML's order)
 *                                                                       (4.5 bits per weight)
 *   fp8: [e4m3 codes, one byte per column, padded to 64][fp32 scale s of the row, padded to 64]
 *       w = e4m3(c) * s: NVIDIA ModelOpt's FP8 (float8_e4m3fn), its per-tensor or per-channel
 *       weight_scale stored in each row               (8 bits per weight, plus 64 bytes a row)
 *
 * The codes of a row are one run of aligned blocks (32 int8 or 16 bytes of nibbles each, never
 * split across cache lines, unlike GGML's 34- and 18-byte interleaved blocks) and the scales a
 * short run behind them, so a decode kernel streams a thread's rows front to back as one region
 * and unpacks in registers (q4: zero-extend 16 bytes to 16 lanes, the low nibbles by a mask, the
 * high ones by a shift). Reading past the last column inside the record is always safe.
 *
 * The scales are fp16 as in GGML's Q8_0, so a dequantized q8 weight d * q is exact in fp32 (an
 * fp16 times a code of 8 bits). q4's d has 6 significant bits and its minimum m = d * (z * -1/4)
 * (quant_q4_m()) is exact too, so d * q + m rounds once: a kernel that widens the codes and
 * forms fmaf(d, q, m) holds exactly quant_row_to_f32()'s values. (q4 was GGML's Q4_1 class, an
 * fp16 d and m per block, 5 bits a weight, until 2026-11-30: the same accuracy in 10% fewer
 * bytes, docs/quantization.md.)
 *
 * fp8's dequantized weight e4m3(c) * s is one fp32 product (rounded once); the fp32-activation
 * kernels form the same product (e4m3 -> fp16 bits in registers, exact, times s * 2^8), so they
 * too hold exactly quant_row_to_f32()'s values (bf16 precision's kernel on AVX512-BF16 with VBMI
 * multiplies the codes' exact values and scales each row's sum once instead:
 * engine/backend/cpu/cpu_gemv_fp8_vbmi.c). e4m3 (OCP FP8 E4M3, float8_e4m3fn): 1 sign bit, 4 exponent bits
 * of bias 7, 3 mantissa bits, subnormals, no infinities, 0x7f and 0xff NaN, largest 448.
 *
 * Everything here is pure and thread-safe; no function allocates.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum quant_format {
	QUANT_Q8,
	QUANT_Q4,
	QUANT_FP8,
};
#define QUANT_FORMAT_COUNT 3

#define QUANT_BLOCK 32 /* columns per block, every format */
#define QUANT_ALIGN 64 /* a row's size and its parts' offsets are multiples of this */

/* Named limits: sizes past them are refused (-E2BIG) before anything is computed. */
#define QUANT_MAX_COLS ((int64_t)1 << 24)
#define QUANT_MAX_ROWS ((int64_t)INT32_MAX) /* the GEMV's row indices are int */
#define QUANT_MAX_TENSOR_BYTES ((size_t)1 << 40)
/* The largest |w| a block may hold: fp16's largest finite value, so every scale and minimum is a
 * finite fp16. Real weights are many orders smaller; larger ones are refused (-ERANGE). */
#define QUANT_MAX_ABS 65504.0f
/* fp8's scales: finite, and within these (the largest keeps 448 s within QUANT_MAX_ABS, so an
 * fp8 matrix requantizes to q8/q4 and widens to bf16; the smallest keeps s * 2^8 and the
 * subnormal codes' products normal-range fp32). Anything else is refused (-ERANGE). */
#define QUANT_FP8_MIN_SCALE 0x1p-100f
#define QUANT_FP8_MAX_SCALE (65504.0f / 448.0f)
#define QUANT_FP8_MAX 448.0f /* e4m3's largest finite value */

struct quant_format_desc {
	const char *name;	/* "q8", "q4", "fp8": the --weights names */
	int block;		/* QUANT_BLOCK */
	int code_bytes;		/* bytes of codes per block (32, 16, 32) */
	int scale_bytes;	/* bytes of scales per block (2: q8's d, q4's dz; fp8: 0, one fp32
				 * scale per row in its own 64 bytes) */
	double bits_per_weight; /* (code_bytes + scale_bytes) * 8 / block, padding aside */
};

/* NULL for a value outside the enum. */
const struct quant_format_desc *quant_format_desc(enum quant_format f);
/* The format named `name` ("q8", "q4", "fp8"), or -EINVAL. */
int quant_format_parse(const char *name, enum quant_format *ret_format);

/* Bytes of one row of `cols` columns, and of a rows x cols tensor: 0, or -EINVAL (cols or rows
 * < 1, unknown format), -E2BIG (past QUANT_MAX_COLS, QUANT_MAX_ROWS, QUANT_MAX_TENSOR_BYTES). */
int quant_row_bytes(enum quant_format f, int64_t cols, size_t *ret_bytes);
int quant_tensor_bytes(enum quant_format f, int64_t rows, int64_t cols, size_t *ret_bytes);

/* A quantized matrix in memory: `data` holds `rows` records of `row_bytes` (quant_row_bytes()),
 * QUANT_ALIGN-aligned for the kernels' speed (any alignment works). The caller owns data. */
struct quant_tensor {
	enum quant_format format;
	int64_t rows, cols;
	size_t row_bytes;
	const void *data;
	/* the first quant_tiled_rows() rows are held as tiles of QUANT_TILE_ROWS (below), the
	 * rest as records; false: every row a record */
	bool tiled;
};

/* Quantizes one row of `cols` values into `row` (quant_row_bytes() bytes, every byte written,
 * padding zero). The reference quantizers (docs/quantization.md):
 *   q8: per block d = fp16(max|w| / 127), q = clamp(round(w / d), -127, 127) (d == 0: q = 0).
 *   q4: per block the (d, z) of least squared error among the min/max grid of the block's
 *       range with 0 in it (d = r / 15 rounded up, r = max(hi, 0) - min(lo, 0), z =
 *       round(-4 min(lo, 0) / d)), GGML Q4_0's grid (d = |vmax| / 8, the value of largest
 *       magnitude at an end) and two least-squares refits of (d, m) from the best codes, each
 *       with z and its neighbours, evaluated as stored; then single codes move one step while
 *       that lowers sse + 0.1 (the block's summed error)^2 (quant.c q4_balance). A candidate or
 *       a move whose largest element error passes max(the min/max grid's, r / 15) is not
 *       taken, so quant_error_bound() holds per element.
 *   fp8: the row's own scale s = max|w| / 448 (1 when every w is 0), c = e4m3(w / s) rounded to
 *       nearest even (quant_fp8_row_from_f32() takes a given scale, e.g. a whole matrix's).
 * Returns 0, -EINVAL for a NaN or infinite value or cols out of range (row untouched), -ERANGE
 * for |w| > QUANT_MAX_ABS. */
int quant_row_from_f32(enum quant_format f, const float *w, int64_t cols, void *row);
/* The same from bf16 values (each widened exactly to fp32 first). */
int quant_row_from_bf16(enum quant_format f, const uint16_t *w, int64_t cols, void *row);
/* Every row of a rows x cols fp32 matrix (rows `ld` values apart) into dst (quant_tensor_bytes()
 * bytes); fills *ret (data = dst). Errors as quant_row_from_f32 and quant_tensor_bytes. */
int quant_tensor_from_f32(enum quant_format f, const float *w, int64_t rows, int64_t cols, size_t ld,
			  void *dst, struct quant_tensor *ret);
int quant_tensor_from_bf16(enum quant_format f, const uint16_t *w, int64_t rows, int64_t cols, size_t ld,
			   void *dst, struct quant_tensor *ret);

/* The row's `cols` weights as fp32, exactly: d * q (q8), fmaf(d, q, m) with m = quant_q4_m()
 * (q4), e4m3(c) * s (fp8, one fp32 product). */
void quant_row_to_f32(enum quant_format f, const void *row, int64_t cols, float *out);

/* The most |w - dequantized w| of any element of a block whose values lie in [lo, hi]
 * (lo <= hi, both within QUANT_MAX_ABS), fp16 rounding of the scales included:
 *   q8: max(|lo|, |hi|) / 254 * (1 + 2^-8) + 2^-17
 *   q4: (max(hi, 0) - min(lo, 0)) / 15 * (1 + 2^-8) + (|lo| + |hi|) * 2^-22 + 2^-20
 *   fp8: max(|lo|, |hi|) * 2^-4 + s 2^-10 with the row's own scale s = max(|lo|, |hi|) / 448
 *        (quant_fp8_error_bound() for a given scale)
 * The absolute terms are the fp16 scales' spacing where they fall below fp16's normal range
 * (q8: max|w| < 127 * 2^-14; q4's d: 2^-19), and fp8's subnormal spacing. docs/quantization.md
 * derives them. */
double quant_error_bound(enum quant_format f, float lo, float hi);

/* ---- fp8 (e4m3) ---------------------------------------------------------------------------- */

/* The value of an e4m3 code (NaN for 0x7f and 0xff), exactly. */
float quant_e4m3_to_f32(uint8_t c);
/* v rounded to the nearest e4m3 code (ties to even), saturating at +-448 (ModelOpt clamps before
 * its cast); NaN gives 0x7f. */
uint8_t quant_f32_to_e4m3(float v);
/* Whether s is a scale fp8 rows may hold: finite and within [QUANT_FP8_MIN_SCALE,
 * QUANT_FP8_MAX_SCALE]. */
bool quant_fp8_scale_ok(float s);
/* The per-tensor scale of ModelOpt's recipe, amax / 448 (1 for amax 0), or -ERANGE when it is not
 * quant_fp8_scale_ok(). */
int quant_fp8_scale_for(float amax, float *ret_scale);
/* The most |w - e4m3(w / s) s| for |w| <= 448 s: half of e4m3's relative step, |w| 2^-4, or for
 * the subnormal codes (|w / s| < 2^-6) half their spacing, s 2^-10, plus the fp32 roundings of
 * w / s and of the product. */
double quant_fp8_error_bound(float w, float scale);
/* An fp8 row from `cols` values and a given scale (quant_fp8_scale_ok): c = e4m3(w / s). 0,
 * -EINVAL (NaN or infinite value, cols out of range), -ERANGE (a bad scale, or |w| / s past 448
 * by more than half a step: the scale is too small for the values). */
int quant_fp8_row_from_f32(const float *w, int64_t cols, float scale, void *row);
/* An fp8 row from a checkpoint's `cols` e4m3 codes as they are and the row's scale: the codes
 * copied, the scale stored. 0, -EINVAL (cols out of range; a NaN code: *ret_col is its column),
 * -ERANGE (a bad scale). */
int quant_fp8_row_from_codes(const uint8_t *codes, int64_t cols, float scale, void *row, int64_t *ret_col);

/* fp16 <-> fp32: exact widening (F16C's vcvtph2ps gives the same bits), and round to nearest
 * even with overflow to infinity (as vcvtps2ph with rounding mode 0). */
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);

/* ---- the layout, for the kernels --------------------------------------------------------- */

static inline int64_t quant_blocks(int64_t cols)
{
	return (cols + QUANT_BLOCK - 1) / QUANT_BLOCK;
}

static inline size_t quant_round_align(size_t n)
{
	return (n + QUANT_ALIGN - 1) & ~(size_t)(QUANT_ALIGN - 1);
}

/* q8: the int8 codes of block b are codes + 32 b; its scale is scales[b] (fp16 bits). */
static inline const int8_t *quant_q8_codes(const void *row)
{
	return (const int8_t *)row;
}
static inline const uint16_t *quant_q8_scales(const void *row, int64_t cols)
{
	return (const uint16_t *)((const char *)row + quant_round_align((size_t)quant_blocks(cols) * 32));
}

/* q4: the 16 code bytes of block b are codes + 16 b; its dz is dz[b]. */
static inline const uint8_t *quant_q4_codes(const void *row)
{
	return (const uint8_t *)row;
}
static inline const uint16_t *quant_q4_dz(const void *row, int64_t cols)
{
	return (const uint16_t *)((const char *)row + quant_round_align((size_t)quant_blocks(cols) * 16));
}
/* a block's dz: its d's fp16 bits (the kernels widen them with vcvtph2ps: one shift, one and),
 * its offset code z, and d and m = d * (z * -1/4) as fp32 (both exact) */
#define QUANT_Q4_D_MASK 0x7fe0u
static inline uint16_t quant_q4_d16(uint16_t dz)
{
	return (uint16_t)((dz >> 1) & QUANT_Q4_D_MASK);
}
static inline int quant_q4_z(uint16_t dz)
{
	return dz & 63;
}
/* whether a stored q8 scale (d's fp16 bits) or q4 dz is finite: a corrupt record's check */
static inline bool quant_scale_finite(enum quant_format f, uint16_t s)
{
	return ((f == QUANT_Q4 ? quant_q4_d16(s) : s) & 0x7c00u) != 0x7c00u;
}
static inline float quant_q4_d(uint16_t dz)
{
	return quant_f16_to_f32(quant_q4_d16(dz));
}
static inline float quant_q4_m(float d, uint16_t dz)
{
	return d * ((float)quant_q4_z(dz) * -0.25f);
}

/* fp8: the codes are codes[0..cols) (then zero to the padding); the row's scale is *scale. */
static inline const uint8_t *quant_fp8_codes(const void *row)
{
	return (const uint8_t *)row;
}
static inline const float *quant_fp8_scale(const void *row, int64_t cols)
{
	return (const float *)((const char *)row + quant_round_align((size_t)quant_blocks(cols) * 32));
}

/* ---- tiles: 16 rows interleaved, for the decode kernels ------------------------------------
 *
 * A decode GEMV that reads one row at a time forms each row's sum across a vector's lanes and
 * widens each block's scales to the lanes its codes fill: on q4 that work is as much as the
 * products (two permutes, a masked load and the reduction per 64 code bytes) and the kernel
 * could not keep up with one core's read stream. In a tile the lanes are the rows: 16 rows'
 * codes of one block interleaved 4 bytes at a time, so a vpdpbusd of one 64-byte vector against
 * 4 activation bytes broadcast gives 16 rows' partial sums, and the block's 16 scales load as a
 * vector whose lanes are already the rows'. The CPU backend tiles its q4 matrices at load
 * (lm_prepared_tile) where the kernels have tile variants; files, CUDA and every other reader
 * see records (quant_tensor_row() gathers one from a tile).
 *
 * q4 tile (QUANT_TILE_ROWS rows r..r+15, nb = quant_blocks(cols) blocks), per pair of blocks
 * (2p, 2p + 1), 576 bytes (every vector on a cache line): block 2p's four 64-byte code vectors,
 * vector v holding at 4 i the code bytes 4v..4v+3 of row r+i's block (columns 4v..4v+3 in the
 * low nibbles, 4v+16..4v+19 in the high ones), block 2p + 1's, then the 16 rows' dz of block 2p
 * and those of 2p + 1 (an odd last block: the same places, the second block's zero). Tile t
 * starts where row 16 t's record did (16 row_bytes apart; a tile's bytes fit in them, the rest
 * zero), and rows past the last whole tile stay records in place: tiling moves bytes only inside
 * each tile's own rows.
 *
 * q8 tile: per pair of blocks (2p, 2p + 1), 1088 bytes: the 16 rows' d of block 2p (fp16) and
 * those of block 2p + 1 (one cache line), then block 2p's eight 64-byte code vectors (vector v
 * holding at 4 i the codes 4v..4v+3 of row r+i's block) and block 2p + 1's; an odd last block
 * alone: its d, 32 bytes of zero, its codes (576 bytes). Every code vector starts on a cache
 * line, and a kernel reads a tile front to back: with the d after the codes, the d line was a
 * miss 512 bytes ahead of the stream and the tile kernel read one 1024-column matrix at 77% of
 * the read pass where q4's tiles and bf16's rows read at 94-98% (docs/benchmarks.md). */
#define QUANT_TILE_ROWS 16
/* whether format f has a tile layout (q8, q4) */
static inline bool quant_tile_supported(enum quant_format f)
{
	return f == QUANT_Q4 || f == QUANT_Q8;
}
/* q8 tiles: the offsets of block b's code vectors and of its 16 d in a tile of nb blocks */
static inline size_t quant_q8_tile_codes(int64_t b)
{
	return (size_t)(b / 2) * 1088 + 64 + (size_t)(b % 2) * 512;
}
static inline size_t quant_q8_tile_d(int64_t b, int64_t nb)
{
	(void)nb; /* the same place for an odd last block */
	return (size_t)(b / 2) * 1088 + (size_t)(b % 2) * 32;
}
static inline int64_t quant_tiled_rows(const struct quant_tensor *q)
{
	return q->tiled ? q->rows / QUANT_TILE_ROWS * QUANT_TILE_ROWS : 0;
}
/* q4 tiles: the offsets of block b's code vectors and of its 16 dz */
static inline size_t quant_q4_tile_codes(int64_t b)
{
	return (size_t)(b / 2) * 576 + (size_t)(b % 2) * 256;
}
static inline size_t quant_q4_tile_dz(int64_t b)
{
	return (size_t)(b / 2) * 576 + 512 + (size_t)(b % 2) * 32;
}
/* bytes of one tile's blocks (q4: 576 per pair, an odd last block too; q8: 1088 per pair, 576
 * for an odd last block) */
static inline size_t quant_tile_used_bytes(enum quant_format f, int64_t cols)
{
	const int64_t nb = quant_blocks(cols);
	return f == QUANT_Q8 ? (size_t)(nb / 2) * 1088 + (size_t)(nb % 2) * 576 :
			       (size_t)((nb + 1) / 2) * 576;
}
/* 16 records (row_bytes apart, quant_row_bytes()) to one tile at `tile` (16 row_bytes, every byte
 * written); `tile` must not overlap `recs`. */
void quant_tile_from_records(enum quant_format f, int64_t cols, const void *recs, size_t row_bytes,
			     void *tile);
/* Row i (0..15) of a tile back to its record (row_bytes, every byte written: the padding zero). */
void quant_tile_row_record(enum quant_format f, int64_t cols, const void *tile, int i, void *rec);
/* Tiles q's whole tiles in place (rows past the last whole tile stay records), with `tmp` of
 * QUANT_TILE_ROWS row_bytes as scratch; tiles [t0, t1) only. q->tiled is the caller's to set once
 * every tile is done. -EINVAL for a format without tiles. */
int quant_tensor_tile_range(const struct quant_tensor *q, void *data, int64_t t0, int64_t t1, void *tmp);
/* Row r's record: in place for a record, else gathered from its tile into buf (row_bytes). */
const void *quant_tensor_row(const struct quant_tensor *q, int64_t r, void *buf);
