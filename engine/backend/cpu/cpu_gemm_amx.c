/* bf16 products of a few to a few dozen rows on AMX (cpu_amx.h; compiled with -mamx-tile
 * -mamx-bf16 and AVX512-BF16, called only where cpuid and the OS allow AMX).
 *
 * DESIGN: the weights are the A operand, read where they lie: an A tile is 16 consecutive rows
 * of W by 32 columns (16 cache lines, one per row, rows ldw apart), the same bytes the GEMV
 * streams, no second copy. The activations are the B operand, packed once per product
 * (cpu_amx_pack: tiny); a C tile holds 16 outputs by 16 tokens in fp32. A block of 32 weight
 * rows (two A tiles) runs every step of 32 columns against up to 32 tokens (two B tiles, four C
 * tiles: all eight tiles), so each weight line is loaded once per 32 tokens; more tokens run the
 * block again while it is in the core's cache. The weight lines PF steps ahead are prefetched
 * (the block's rows, then the next block's), so the loads find them in L1 at the rate memory
 * delivers.
 *
 * Edges without reading past W: a column tail (in % 32) is copied into a zero-padded tile; a
 * row tail of fewer than 16 rows runs the last 16 rows of W (rows of the range before it, or of
 * another thread's, are read again but written only by their own block); a W of fewer than 16
 * rows is copied into zero-padded tiles at every step.
 *
 * Sums: each C element adds the 32 products of a step pairwise into fp32 (TDPBF16PS, denormal
 * inputs and outputs flushed to zero), step after step: another order than the GEMV's, the
 * same bf16 products. */
#include "cpu_amx.h"

#include <immintrin.h>
#include <string.h>

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

/* Steps of 32 columns between a weight line's prefetch and its load (4 KiB ahead per thread for
 * two A tiles, beside the hardware prefetchers' streams): 1 and 2 read the decode weights at the
 * same rate, 4 and more slower (docs/benchmarks.md, "Figures behind the code's constants"). */
#define PF_STEPS 2

/* elements of one B tile (16 pair rows x 16 tokens x 2) */
#define B_ELEMS (CPU_AMX_TILE * CPU_AMX_K)

struct tile_config {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

static int ksteps(int in)
{
	return (in + CPU_AMX_K - 1) / CPU_AMX_K;
}

size_t cpu_amx_packed_elems(int T, int in)
{
	size_t tiles = (size_t)(T + CPU_AMX_TILE - 1) / CPU_AMX_TILE;
	return tiles * (size_t)ksteps(in) * B_ELEMS;
}

void cpu_amx_pack(const float *x, size_t ldx, int T, int in, uint16_t *xv)
{
	const int steps = ksteps(in);
	memset(xv, 0, cpu_amx_packed_elems(T, in) * sizeof(*xv));
	/* pair p of a 32-column block goes to row p of the tile: dword p * 16 + token */
	const __m512i rows =
		_mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
				   _mm512_set1_epi32(CPU_AMX_TILE));
	for (int t = 0; t < T; t++) {
		const float *xr = x + (size_t)t * ldx;
		uint32_t *tile =
			(uint32_t *)(xv + (size_t)(t / CPU_AMX_TILE) * steps * B_ELEMS) + t % CPU_AMX_TILE;
		for (int s = 0; s < steps; s++) {
			int i = s * CPU_AMX_K, n = in - i;
			__mmask32 m = n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1u);
			__m512bh v =
				_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps((__mmask16)(m >> 16), xr + i + 16),
						    _mm512_maskz_loadu_ps((__mmask16)m, xr + i));
			_mm512_i32scatter_epi32(tile + (size_t)s * (B_ELEMS / 2), rows, (__m512i)v, 4);
		}
	}
}

/* W's rows [0, rows) by columns [0, cols) from w, zeros elsewhere, as a 16 x 32 tile in buf */
INL void copy_edge(uint16_t *buf, const uint16_t *w, size_t ldw, int rows, int cols)
{
	__mmask32 m = cols >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << cols) - 1u);
	for (int q = 0; q < CPU_AMX_TILE; q++)
		_mm512_storeu_si512(buf + q * CPU_AMX_K,
				    q < rows ? _mm512_maskz_loadu_epi16(m, w + (size_t)q * ldw) :
					       _mm512_setzero_si512());
}

/* One step: A tiles 0 (and 1) loaded, B tiles from b0 (and b1) times them into the C tiles. */
INL void step_b(const uint16_t *b0, const uint16_t *b1, const int NA, const int NB)
{
	_tile_loadd(2, b0, 64);
	_tile_dpbf16ps(4, 0, 2);
	if (NA == 2)
		_tile_dpbf16ps(6, 1, 2);
	if (NB == 2) {
		_tile_loadd(3, b1, 64);
		_tile_dpbf16ps(5, 0, 3);
		if (NA == 2)
			_tile_dpbf16ps(7, 1, 3);
	}
}

/* the 16 x 16 floats of v transposed in place: v[i][j] becomes v[j][i] */
INL void transpose16(__m512 v[16])
{
	__m512 t[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
	}
	/* per 128-bit lane k, v[i + c] holds column 4k + c of rows i..i+3 */
	for (int i = 0; i < 16; i += 4) {
		v[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
		v[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
		v[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		v[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	/* t[c] (c < 4): columns c, 8 + c of rows 0-3, then of rows 4-7; t[4 + c]: columns 4 + c,
	 * 12 + c; t[8..15] likewise for rows 8-15 */
	for (int c = 0; c < 4; c++) {
		t[c] = _mm512_shuffle_f32x4(v[c], v[4 + c], 0x88);
		t[4 + c] = _mm512_shuffle_f32x4(v[c], v[4 + c], 0xdd);
		t[8 + c] = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0x88);
		t[12 + c] = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0xdd);
	}
	for (int c = 0; c < 8; c++) {
		v[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
		v[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
	}
}

/* C tile `c` (outputs r.., tokens t0..) into y: outputs [q0, q1) of the tile, tokens below T */
static void store_c(const struct cpu_amx_args *a, const float *c, int r, int q0, int q1, int t0)
{
	int nt = a->T - t0 < CPU_AMX_TILE ? a->T - t0 : CPU_AMX_TILE;
	__m512 v[16];
	for (int q = 0; q < 16; q++)
		v[q] = _mm512_load_ps(c + q * CPU_AMX_TILE);
	transpose16(v);
	__mmask16 m = (__mmask16)(((1u << q1) - 1u) & ~((1u << q0) - 1u));
	for (int j = 0; j < nt; j++) {
		float *y = a->y + (size_t)(t0 + j) * a->ldy + (size_t)r;
		__m512 o = v[j];
		if (a->accumulate)
			o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(m, y));
		_mm512_mask_storeu_ps(y, m, o);
	}
}

/* Rows [r, r + 16 NA) of W against tokens [t0, t0 + 16 NB) of the packed x (B tiles b0, b1),
 * writing outputs [r + q0, r + 16 NA) (of the first tile's, those below r + edge). `edge`: W holds only
 * `edge` < 16 rows from r (NA 1); 16 otherwise. Prefetches up to row `pf_end`. */
INL void block(const struct cpu_amx_args *a, int r, int q0, int t0, const int NA, const int NB, int edge,
	       int pf_end)
{
	const size_t ldw = a->ldw, stride = ldw * sizeof(uint16_t);
	const int in = a->in, steps = in / CPU_AMX_K, tail = in % CPU_AMX_K, all = ksteps(in);
	const uint16_t *w0 = a->w + (size_t)r * ldw, *w1 = w0 + (size_t)CPU_AMX_TILE * ldw;
	const uint16_t *b0 = a->xv + (size_t)(t0 / CPU_AMX_TILE) * all * B_ELEMS;
	const uint16_t *b1 = b0 + (size_t)all * B_ELEMS;
	_Alignas(64) uint16_t buf[2][CPU_AMX_TILE * CPU_AMX_K];
	_Alignas(64) float c[4][CPU_AMX_TILE * CPU_AMX_TILE];

	_tile_zero(4);
	_tile_zero(5);
	_tile_zero(6);
	_tile_zero(7);
	const int nr = NA * CPU_AMX_TILE;
	/* the next block's rows, as far as they are this range's */
	const int pf_next = pf_end - (r + nr) < nr ? pf_end - (r + nr) : nr;
	for (int s = 0; s < steps; s++) {
		if (edge == CPU_AMX_TILE) {
			int sp = s + PF_STEPS;
			if (sp < steps) {
				for (int q = 0; q < nr; q++)
					_mm_prefetch((const char *)(w0 + (size_t)q * ldw +
								    (size_t)sp * CPU_AMX_K),
						     _MM_HINT_T0);
			} else {
				const uint16_t *n0 = w0 + (size_t)nr * ldw;
				for (int q = 0; q < pf_next; q++)
					_mm_prefetch((const char *)(n0 + (size_t)q * ldw +
								    (size_t)(sp - steps) * CPU_AMX_K),
						     _MM_HINT_T0);
			}
			_tile_loadd(0, w0 + (size_t)s * CPU_AMX_K, stride);
			if (NA == 2)
				_tile_loadd(1, w1 + (size_t)s * CPU_AMX_K, stride);
		} else {
			copy_edge(buf[0], w0 + (size_t)s * CPU_AMX_K, ldw, edge, CPU_AMX_K);
			_tile_loadd(0, buf[0], 64);
		}
		step_b(b0 + (size_t)s * B_ELEMS, b1 + (size_t)s * B_ELEMS, NA, NB);
	}
	if (tail) {
		copy_edge(buf[0], w0 + (size_t)steps * CPU_AMX_K, ldw, edge, tail);
		_tile_loadd(0, buf[0], 64);
		if (NA == 2) {
			copy_edge(buf[1], w1 + (size_t)steps * CPU_AMX_K, ldw, CPU_AMX_TILE, tail);
			_tile_loadd(1, buf[1], 64);
		}
		step_b(b0 + (size_t)steps * B_ELEMS, b1 + (size_t)steps * B_ELEMS, NA, NB);
	}

	_tile_stored(4, c[0], 64);
	if (NB == 2)
		_tile_stored(5, c[1], 64);
	if (NA == 2) {
		_tile_stored(6, c[2], 64);
		if (NB == 2)
			_tile_stored(7, c[3], 64);
	}
	store_c(a, c[0], r, q0, edge, t0);
	if (NB == 2)
		store_c(a, c[1], r, q0, edge, t0 + CPU_AMX_TILE);
	if (NA == 2) {
		store_c(a, c[2], r + CPU_AMX_TILE, 0, CPU_AMX_TILE, t0);
		if (NB == 2)
			store_c(a, c[3], r + CPU_AMX_TILE, 0, CPU_AMX_TILE, t0 + CPU_AMX_TILE);
	}
}

NOINL void block_2x2(const struct cpu_amx_args *a, int r, int t0, int pf_end)
{
	block(a, r, 0, t0, 2, 2, CPU_AMX_TILE, pf_end);
}

NOINL void block_2x1(const struct cpu_amx_args *a, int r, int t0, int pf_end)
{
	block(a, r, 0, t0, 2, 1, CPU_AMX_TILE, pf_end);
}

NOINL void block_1x2(const struct cpu_amx_args *a, int r, int q0, int t0, int edge, int pf_end)
{
	block(a, r, q0, t0, 1, 2, edge, pf_end);
}

NOINL void block_1x1(const struct cpu_amx_args *a, int r, int q0, int t0, int edge, int pf_end)
{
	block(a, r, q0, t0, 1, 1, edge, pf_end);
}

/* 16 rows from r for every group of 32 tokens */
static void rows16(const struct cpu_amx_args *a, int r, int q0, int edge, int pf_end)
{
	for (int t0 = 0; t0 < a->T; t0 += 2 * CPU_AMX_TILE) {
		if (a->T - t0 > CPU_AMX_TILE)
			block_1x2(a, r, q0, t0, edge, pf_end);
		else
			block_1x1(a, r, q0, t0, edge, pf_end);
	}
}

void cpu_amx_range(const struct cpu_amx_args *a, int r0, int r1)
{
	struct tile_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.palette = 1;
	for (int i = 0; i < 8; i++) {
		cfg.colsb[i] = 64;
		cfg.rows[i] = CPU_AMX_TILE;
	}
	_tile_loadconfig(&cfg);

	int r = r0;
	for (; r + 2 * CPU_AMX_TILE <= r1; r += 2 * CPU_AMX_TILE)
		for (int t0 = 0; t0 < a->T; t0 += 2 * CPU_AMX_TILE) {
			if (a->T - t0 > CPU_AMX_TILE)
				block_2x2(a, r, t0, r1);
			else
				block_2x1(a, r, t0, r1);
		}
	if (r + CPU_AMX_TILE <= r1) {
		rows16(a, r, 0, CPU_AMX_TILE, r1);
		r += CPU_AMX_TILE;
	}
	if (r < r1) {
		if (a->nrows >= CPU_AMX_TILE) {
			/* the 16 rows ending at r1 (r1 >= 16: a range ends at W's end or at a multiple
			 * of 16) */
			int rs = r1 - CPU_AMX_TILE;
			rows16(a, rs, r - rs, CPU_AMX_TILE, r1);
		} else {
			rows16(a, r, 0, r1 - r, r1);
		}
	}
	_tile_release();
}
