/* Attention in blocks (lm.h: lm_attention_blocked for prefill, lm_attention_decode_* for decode):
 * the flash-attention order on the CPU, so the scores and values are matrix products instead of
 * one dot product per (query, key).
 *
 * A task takes one KV head and a block of QB positions: its R = QB * (hq / hkv) query rows (every
 * query head that shares the KV head, position-major) against blocks of KB keys,
 *   S = (Q / sqrt(dh)) K_blk^T        [R][KB]
 *   per row: m' = max(m, max S), P = exp(S - m'), O *= exp(m - m'), l = l exp(m - m') + sum P
 *   O += P V_blk                      [R][dh]
 * and finally o = O / l. Keys past a row's own position (causal) get P = 0; a block of keys
 * past every row's position is never formed. Scratch per thread is fixed (no [R][n0 + T]
 * score matrix), so a long cache costs no memory.
 *
 * The two products run in bf16 through oneDNN (cpu_dnnl_small: AMX tiles or AVX512-BF16) when
 * the caller asks for it and oneDNN has a fast kernel for them: the scores from Q / sqrt(dh) and
 * K each split into two bf16 parts (split_rows(): three products' worth of tile work, scores
 * about as exact as fp32 ones, since the softmax amplifies their error), the weighted values
 * from the value block and P rounded to bf16 (as bf16 precision's products round their
 * inputs); the sums, the softmax and O stay fp32. Their shapes are fixed (R and KB padded with zero rows)
 * so two prepared products serve every block. Otherwise they run in fp32 (cpu_gemm_f32).
 *
 * DESIGN (threads): one pool job; each task writes the output columns of its KV head's query
 * heads for its positions only, and uses its thread's scratch. Tasks are numbered from the last
 * block of positions (the most keys) to the first, so the pool, which hands out tasks in order,
 * starts the longest first.
 *
 * Decode (lm_attention_decode_task: one new position, bf16 precision) takes the same order in
 * fp32 without the products' packing: per KV head its R = hq / hkv query rows against blocks of
 * KD keys, the scores and the weighted values by cpu_rows.h's scores and weigh (each key and
 * value row read once for every four query rows, from the cache in place), the online softmax
 * by max and exp_sum. A task takes LM_ATTN_DECODE_KEYS keys, so a long context spreads over the
 * threads, and every KV head of a block of them in turn: the cache's rows (every KV head's
 * slice) are read whole, block by block (decode_block(): 256 KB of K rows), where one task per
 * KV head read the rows' slices a kv_dim stride apart, which ran at about half the rate of
 * whole rows (the same bytes). With more than one chunk each task leaves its (max, sum, O) per
 * KV head in the sequence's attn_part and a second job merges them in chunk order, so the bits
 * depend on the context's length only. The reference (lm_attention_heads, fp32 precision's)
 * reads each KV head's cache once per query head and makes two calls per key; at 3072 cached
 * positions on the default model it was a quarter of a q4 decode step (docs/benchmarks.md,
 * "decode attention").
 */
#include "lm.h"

#include <math.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_dnnl_small.h"
#include "cpu_rows.h"

#define QB 32  /* positions per task */
#define KB 256 /* keys per block */
#define KD 256 /* keys per block of decode at most (LM_ATTN_DECODE_KEYS per task) */

static size_t pad16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static size_t rows_per_task(const struct lm_dims *dm)
{
	return (size_t)QB * (size_t)(dm->hq / dm->hkv);
}

/* The scratch of one task, carved from its thread's buffer: fp32 Q [R][dh], S [R][KB],
 * O [R][dh], m [R], l [R], cpu_gemm_f32's packing, a row of dh; bf16 Q [R][3 dh] and K
 * [KB][3 dh] (split, see split_rows()), V [KB][dh], P [R][KB]. */
struct scratch {
	float *q, *s, *o, *m, *l, *pack, *row;
	uint16_t *qb, *kb, *vb, *pb;
	size_t floats;
};

/* the next n floats of base (NULL: only counting), 64-byte aligned */
static float *take(float *base, size_t *at, size_t n)
{
	float *p = base ? base + *at : NULL;
	*at += pad16(n);
	return p;
}

static void scratch_layout(const struct lm_dims *dm, float *base, struct scratch *ret)
{
	size_t R = rows_per_task(dm), dh = (size_t)dm->dh, at = 0;
	ret->q = take(base, &at, R * dh);
	ret->s = take(base, &at, R * KB);
	ret->o = take(base, &at, R * dh);
	ret->m = take(base, &at, R);
	ret->l = take(base, &at, R);
	ret->pack = take(base, &at, cpu_gemm_pack_floats(MAX(dm->dh, KB)));
	ret->row = take(base, &at, dh);
	ret->qb = (uint16_t *)take(base, &at, (R * 3 * dh + 1) / 2);
	ret->kb = (uint16_t *)take(base, &at, (KB * 3 * dh + 1) / 2);
	ret->vb = (uint16_t *)take(base, &at, (KB * dh + 1) / 2);
	ret->pb = (uint16_t *)take(base, &at, (R * KB + 1) / 2);
	ret->floats = at;
}

size_t lm_attention_blocked_scratch_bytes(const struct lm_dims *dm)
{
	struct scratch sc;
	scratch_layout(dm, NULL, &sc);
	return sc.floats * sizeof(float);
}

struct job {
	const struct lm_dims *dm;
	const struct cpu_rows_variant *rows;
	const struct cpu_dnnl_small *qk, *pv; /* both, or neither: fp32 products */
	int T, n0, nblocks;
	const float *q, *keys, *values;
	float *o;
};

/* Each of n rows of dh floats ld apart as three bf16 parts [a | b | c] of a row of 3 dh: the
 * rounding h = bf16(x) and the rest l = bf16(x - h), as [h | h | l] for the queries and
 * [h | l | h] for the keys, so that one product over 3 dh sums Qh Kh + Qh Kl + Ql Kh: the
 * scores to ~2^-16 of sum |q k| instead of bf16's 2^-8 (they are exponentiated, which turns
 * their error into the weights' relative error). Zero rows up to `pad`. */
static void split_rows(const float *src, size_t ld, int n, int dh, int pad, bool keys, float *row,
		       uint16_t *dst)
{
	for (int r = 0; r < n; r++) {
		const float *x = src + (size_t)r * ld;
		uint16_t *h = dst + (size_t)r * 3 * dh;
		cpu_f32_to_bf16(x, h, (size_t)dh);
		for (int e = 0; e < dh; e++)
			row[e] = x[e] - bf16_to_f32(h[e]);
		cpu_f32_to_bf16(row, h + (keys ? 1 : 2) * dh, (size_t)dh);
		memcpy(h + (keys ? 2 : 1) * dh, h, (size_t)dh * sizeof(uint16_t));
	}
	memset(dst + (size_t)n * 3 * dh, 0, (size_t)(pad - n) * 3 * dh * sizeof(uint16_t));
}

/* n rows of dh floats ld apart -> dense bf16 rows, zero rows up to `pad` */
static void to_bf16_rows(const float *src, size_t ld, int n, int dh, int pad, uint16_t *dst)
{
	for (int r = 0; r < n; r++)
		cpu_f32_to_bf16(src + (size_t)r * ld, dst + (size_t)r * dh, (size_t)dh);
	memset(dst + (size_t)n * dh, 0, (size_t)(pad - n) * dh * sizeof(uint16_t));
}

static void task(void *ctx, int i, int thread)
{
	const struct job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const struct cpu_rows_variant *rows = j->rows;
	const bool bf16 = j->qk != NULL;
	const int gq = dm->hq / dm->hkv, dh = dm->dh;
	const int g = i % dm->hkv, b = j->nblocks - 1 - i / dm->hkv;
	const int t0 = b * QB, nt = MIN(QB, j->T - t0), R = nt * gq;
	/* the bf16 products have the fixed shape of a full task */
	const int Rp = bf16 ? (int)rows_per_task(dm) : R;
	struct scratch sc;
	scratch_layout(dm, cpu_scratch(thread), &sc);
	const float scale = 1.0f / sqrtf((float)dh);

	for (int r = 0; r < R; r++) {
		const float *src = j->q + (size_t)(t0 + r / gq) * dm->q_dim + (size_t)(g * gq + r % gq) * dh;
		for (int e = 0; e < dh; e++)
			sc.q[(size_t)r * dh + e] = src[e] * scale;
		sc.m[r] = -INFINITY;
		sc.l[r] = 0;
	}
	memset(sc.o, 0, (size_t)Rp * dh * sizeof(float));
	if (bf16) {
		split_rows(sc.q, (size_t)dh, R, dh, Rp, false, sc.row, sc.qb);
		memset(sc.pb, 0, (size_t)Rp * KB * sizeof(uint16_t));
	}

	const int nkeys = j->n0 + t0 + nt;
	for (int s0 = 0; s0 < nkeys; s0 += KB) {
		const int kb = MIN(KB, nkeys - s0);
		const float *K = j->keys + (size_t)s0 * dm->kv_dim + (size_t)g * dh;
		const float *V = j->values + (size_t)s0 * dm->kv_dim + (size_t)g * dh;
		if (bf16) {
			split_rows(K, (size_t)dm->kv_dim, kb, dh, KB, true, sc.row, sc.kb);
			to_bf16_rows(V, (size_t)dm->kv_dim, kb, dh, KB, sc.vb);
		}
		/* a bf16 product fails on its thread's first run without memory for the stream or
		 * scratchpad, or when oneDNN does: that block then runs in fp32 */
		if (!bf16 || cpu_dnnl_small_run(j->qk, thread, sc.qb, sc.kb, sc.s) < 0)
			cpu_gemm_f32(sc.q, (size_t)dh, K, (size_t)dm->kv_dim, true, R, dh, kb, sc.s, KB,
				     false, sc.pack);
		for (int r = 0; r < R; r++) {
			float *srow = sc.s + (size_t)r * KB;
			/* keys s0.. up to the row's own position n0 + t */
			int valid = MIN(kb, j->n0 + t0 + r / gq + 1 - s0);
			if (valid <= 0) {
				memset(srow, 0, (size_t)kb * sizeof(float));
				if (bf16)
					memset(sc.pb + (size_t)r * KB, 0, KB * sizeof(uint16_t));
				continue;
			}
			float mnew = fmaxf(sc.m[r], rows->max(srow, valid));
			float sum = rows->exp_sum(srow, valid, mnew);
			if (valid < kb)
				memset(srow + valid, 0, (size_t)(kb - valid) * sizeof(float));
			if (bf16) {
				cpu_f32_to_bf16(srow, sc.pb + (size_t)r * KB, (size_t)valid);
				memset(sc.pb + (size_t)r * KB + valid, 0,
				       (size_t)(KB - valid) * sizeof(uint16_t));
			}
			/* the first block of every row has valid >= 1 and m = -inf: alpha = 0, on O = 0 */
			float alpha = expf(sc.m[r] - mnew);
			if (alpha != 1.0f)
				rows->scale(sc.o + (size_t)r * dh, alpha, dh);
			sc.l[r] = sc.l[r] * alpha + sum;
			sc.m[r] = mnew;
		}
		if (!bf16 || cpu_dnnl_small_run(j->pv, thread, sc.pb, sc.vb, sc.o) < 0)
			cpu_gemm_f32(sc.s, KB, V, (size_t)dm->kv_dim, false, R, kb, dh, sc.o, (size_t)dh,
				     true, sc.pack);
	}

	for (int r = 0; r < R; r++) {
		float *dst = j->o + (size_t)(t0 + r / gq) * dm->q_dim + (size_t)(g * gq + r % gq) * dh;
		float inv = 1.0f / sc.l[r];
		for (int e = 0; e < dh; e++)
			dst[e] = sc.o[(size_t)r * dh + e] * inv;
	}
}

bool lm_attention_blocked(const struct lm_dims *dm, int T, int n0, const float *q, const float *k,
			  const float *v, float *o, bool bf16)
{
	if (T <= 0)
		return false;
	struct job j = {.dm = dm,
			.rows = cpu_rows(),
			.T = T,
			.n0 = n0,
			.nblocks = (T + QB - 1) / QB,
			.q = q,
			.keys = k,
			.values = v,
			.o = o};
	struct cpu_dnnl_small *qk = NULL, *pv = NULL;
	const int R = (int)rows_per_task(dm), dh = dm->dh;
	if (bf16 &&
	    cpu_dnnl_small_get(R, 3 * dh, KB, 3 * (size_t)dh, 3 * (size_t)dh, true, KB, false, &qk) == 0 &&
	    cpu_dnnl_small_get(R, KB, dh, KB, (size_t)dh, false, (size_t)dh, true, &pv) == 0) {
		j.qk = qk;
		j.pv = pv;
	}
	cpu_parallel_for_work(dm->hkv * j.nblocks, task, &j,
			      2.0 * dm->hq * T * ((double)n0 + T / 2.0) * dm->dh);
	cpu_dnnl_small_put(qk);
	cpu_dnnl_small_put(pv);
	return j.qk != NULL;
}

/* Decode's scratch: Q / sqrt(dh) [hq][dh], S [R][KD], O [hq][dh], m [hq], l [hq] */
size_t lm_attention_decode_scratch_bytes(const struct lm_dims *dm)
{
	size_t R = (size_t)(dm->hq / dm->hkv), hq = (size_t)dm->hq, dh = (size_t)dm->dh;
	return (pad16(hq * dh) * 2 + pad16(R * KD) + pad16(hq) * 2) * sizeof(float);
}

/* keys per block of decode: the block's K (and V) rows, every KV head's, within 256 KB, so the
 * heads after the first find them in L2 (a 16-key floor, KD at most) */
static int decode_block(const struct lm_dims *dm)
{
	int kd = (int)((256 << 10) / ((size_t)dm->kv_dim * sizeof(float))) / 16 * 16;
	return MAX(16, MIN(KD, kd));
}

int lm_attention_decode_chunks(int n0)
{
	return n0 / LM_ATTN_DECODE_KEYS + 1;
}

size_t lm_attention_decode_part_floats(const struct lm_dims *dm, int positions)
{
	return positions > LM_ATTN_DECODE_KEYS ? (size_t)lm_attention_decode_chunks(positions - 1) *
							 (size_t)dm->hq * (size_t)(dm->dh + 2) :
						 0;
}

/* one (KV head, chunk)'s partial in part: m [R], l [R], O [R][dh] */
static float *part_at(const struct lm_dims *dm, float *part, int chunks, int g, int c)
{
	const int R = dm->hq / dm->hkv;
	return part + ((size_t)g * chunks + c) * (size_t)R * (dm->dh + 2);
}

/* In lm_attention_decode_task: KV head g's m, l and O, its rows of the scratch's (one chunk) or
 * its place in part for the combine */
#define HEAD_STATE(g)                                                                                        \
	float *mg = chunks > 1 ? part_at(dm, part, chunks, g, c) : m + (size_t)(g)*R;                        \
	float *lg = chunks > 1 ? mg + R : l + (size_t)(g)*R;                                                 \
	float *og = chunks > 1 ? lg + R : acc + (size_t)(g)*R * dh

void lm_attention_decode_task(const struct lm_dims *dm, int n0, const float *q, const float *k,
			      const float *v, float *o, float *part, int c, float *scratch)
{
	const struct cpu_rows_variant *rows = cpu_rows();
	const int R = dm->hq / dm->hkv, dh = dm->dh, hq = dm->hq, chunks = lm_attention_decode_chunks(n0);
	const int k0 = c * LM_ATTN_DECODE_KEYS, k1 = MIN(n0 + 1, k0 + LM_ATTN_DECODE_KEYS),
		  kd = decode_block(dm);
	float *qs = scratch, *s = qs + pad16((size_t)hq * dh), *acc = s + pad16((size_t)R * KD);
	float *m = acc + pad16((size_t)hq * dh), *l = m + pad16((size_t)hq);
	const float scale = 1.0f / sqrtf((float)dh);
	for (size_t i = 0; i < (size_t)hq * dh; i++)
		qs[i] = q[i] * scale;
	for (int g = 0; g < dm->hkv; g++) {
		HEAD_STATE(g);
		for (int r = 0; r < R; r++)
			mg[r] = -INFINITY, lg[r] = 0;
		memset(og, 0, (size_t)R * dh * sizeof(float));
	}
	/* block by block, every KV head's rows of a block while they are in cache */
	for (int s0 = k0; s0 < k1; s0 += kd) {
		const int kb = MIN(kd, k1 - s0);
		for (int g = 0; g < dm->hkv; g++) {
			HEAD_STATE(g);
			const size_t at = (size_t)s0 * dm->kv_dim + (size_t)g * dh;
			/* the first KV head prefetches the rows whole, the next ones find them in L2 */
			const int pf = g ? 0 : dm->kv_dim;
			rows->scores(qs + (size_t)g * R * dh, R, dh, k + at, (size_t)dm->kv_dim, kb, s, KD,
				     pf);
			for (int r = 0; r < R; r++) {
				float *srow = s + (size_t)r * KD;
				const float mnew = fmaxf(mg[r], rows->max(srow, kb));
				const float sum = rows->exp_sum(srow, kb, mnew);
				/* the first block: m = -inf, alpha = 0 on O = 0 */
				const float alpha = expf(mg[r] - mnew);
				if (alpha != 1.0f)
					rows->scale(og + (size_t)r * dh, alpha, dh);
				lg[r] = lg[r] * alpha + sum;
				mg[r] = mnew;
			}
			rows->weigh(s, KD, R, kb, v + at, (size_t)dm->kv_dim, dh, og, pf);
		}
	}
#undef HEAD_STATE
	if (chunks > 1)
		return;
	for (int i = 0; i < hq; i++) {
		const float inv = 1.0f / l[i];
		for (int e = 0; e < dh; e++)
			o[(size_t)i * dh + e] = acc[(size_t)i * dh + e] * inv;
	}
}

void lm_attention_decode_combine(const struct lm_dims *dm, int n0, float *o, const float *part, int g)
{
	const int R = dm->hq / dm->hkv, dh = dm->dh, chunks = lm_attention_decode_chunks(n0);
	for (int r = 0; r < R; r++) {
		float mx = -INFINITY;
		for (int c = 0; c < chunks; c++)
			mx = fmaxf(mx, part_at(dm, (float *)part, chunks, g, c)[r]);
		float *dst = o + (size_t)(g * R + r) * dh, sum = 0;
		memset(dst, 0, (size_t)dh * sizeof(float));
		for (int c = 0; c < chunks; c++) {
			const float *pm = part_at(dm, (float *)part, chunks, g, c);
			const float w = expf(pm[r] - mx);
			sum += pm[R + r] * w;
			const float *pa = pm + 2 * R + (size_t)r * dh;
			for (int e = 0; e < dh; e++)
				dst[e] += pa[e] * w;
		}
		const float inv = 1.0f / sum;
		for (int e = 0; e < dh; e++)
			dst[e] *= inv;
	}
}

struct decode_job {
	const struct lm_dims *dm;
	int n0, chunks;
	const float *q, *k, *v;
	float *o, *part;
};

static void decode_task(void *ctx, int c, int thread)
{
	const struct decode_job *j = ctx;
	lm_attention_decode_task(j->dm, j->n0, j->q, j->k, j->v, j->o, j->part, c, cpu_scratch(thread));
}

static void combine_task(void *ctx, int g, int thread)
{
	(void)thread;
	const struct decode_job *j = ctx;
	lm_attention_decode_combine(j->dm, j->n0, j->o, j->part, g);
}

void lm_attention_decode(const struct lm_dims *dm, int n0, const float *q, const float *k, const float *v,
			 float *o, float *part)
{
	struct decode_job j = {.dm = dm,
			       .n0 = n0,
			       .chunks = lm_attention_decode_chunks(n0),
			       .q = q,
			       .k = k,
			       .v = v,
			       .o = o,
			       .part = part};
	cpu_parallel_for_work(j.chunks, decode_task, &j, 2.0 * dm->hq * (n0 + 1.0) * dm->dh);
	if (j.chunks > 1)
		cpu_parallel_for_work(dm->hkv, combine_task, &j, (double)dm->hq * j.chunks * dm->dh);
}
