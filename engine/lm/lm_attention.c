/* Prefill attention in blocks (lm_attention_blocked, lm.h): the flash-attention order on the
 * CPU, so the scores and values are matrix products instead of one dot product per (query, key).
 *
 * A task takes one KV head and a block of QB positions: its R = QB * (hq / hkv) query rows (every
 * query head that shares the KV head, position-major) against blocks of KB keys,
 *   S = (Q / sqrt(dh)) K_blk^T        [R][KB], cpu_gemm_f32
 *   per row: m' = max(m, max S), P = exp(S - m'), O *= exp(m - m'), l = l exp(m - m') + sum P
 *   O += P V_blk                      [R][dh], cpu_gemm_f32
 * and finally o = O / l. Keys past a row's own position (causal) get P = 0; a block of keys
 * past every row's position is never formed. Scratch per thread is fixed (no [R][n0 + T]
 * score matrix), so a long cache costs no memory.
 *
 * DESIGN (threads): one pool job; each task writes the output columns of its KV head's query
 * heads for its positions only. Tasks are numbered from the last block of positions (the most
 * keys) to the first, so the pool, which hands out tasks in order, starts the longest first.
 */
#include "lm.h"

#include <math.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_rows.h"

#define QB 16  /* positions per task */
#define KB 256 /* keys per block */

static size_t pad16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static size_t rows_per_task(const struct lm_dims *dm)
{
	return (size_t)QB * (size_t)(dm->hq / dm->hkv);
}

/* Q [R][dh], S [R][KB], O [R][dh], m [R], l [R], then cpu_gemm_f32's packing */
static size_t scratch_floats(const struct lm_dims *dm)
{
	size_t R = rows_per_task(dm), dh = (size_t)dm->dh;
	return 2 * pad16(R * dh) + pad16(R * KB) + 2 * pad16(R) +
	       pad16(cpu_gemm_pack_floats(MAX(dm->dh, KB)));
}

size_t lm_attention_blocked_scratch_bytes(const struct lm_dims *dm)
{
	return scratch_floats(dm) * sizeof(float);
}

struct job {
	const struct lm_dims *dm;
	const struct cpu_rows_variant *rows;
	int T, n0, nblocks;
	const float *q, *keys, *values;
	float *o;
};

static void task(void *ctx, int i, int thread)
{
	const struct job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const struct cpu_rows_variant *rows = j->rows;
	const int gq = dm->hq / dm->hkv, dh = dm->dh;
	const int g = i % dm->hkv, b = j->nblocks - 1 - i / dm->hkv;
	const int t0 = b * QB, nt = MIN(QB, j->T - t0), R = nt * gq;
	const size_t Rmax = rows_per_task(dm);
	float *Q = cpu_scratch(thread), *S = Q + pad16(Rmax * dh), *O = S + pad16(Rmax * KB);
	float *m = O + pad16(Rmax * dh), *l = m + pad16(Rmax), *pack = l + pad16(Rmax);
	const float scale = 1.0f / sqrtf((float)dh);

	for (int r = 0; r < R; r++) {
		const float *src = j->q + (size_t)(t0 + r / gq) * dm->q_dim + (size_t)(g * gq + r % gq) * dh;
		for (int e = 0; e < dh; e++)
			Q[(size_t)r * dh + e] = src[e] * scale;
		m[r] = -INFINITY;
		l[r] = 0;
	}
	memset(O, 0, (size_t)R * dh * sizeof(float));

	const int nkeys = j->n0 + t0 + nt;
	for (int s0 = 0; s0 < nkeys; s0 += KB) {
		const int kb = MIN(KB, nkeys - s0);
		const float *K = j->keys + (size_t)s0 * dm->kv_dim + (size_t)g * dh;
		const float *V = j->values + (size_t)s0 * dm->kv_dim + (size_t)g * dh;
		cpu_gemm_f32(Q, (size_t)dh, K, (size_t)dm->kv_dim, true, R, dh, kb, S, KB, false, pack);
		for (int r = 0; r < R; r++) {
			float *srow = S + (size_t)r * KB;
			/* keys s0.. up to the row's own position n0 + t */
			int valid = MIN(kb, j->n0 + t0 + r / gq + 1 - s0);
			if (valid <= 0) {
				memset(srow, 0, (size_t)kb * sizeof(float));
				continue;
			}
			float mnew = fmaxf(m[r], rows->max(srow, valid));
			float sum = rows->exp_sum(srow, valid, mnew);
			if (valid < kb)
				memset(srow + valid, 0, (size_t)(kb - valid) * sizeof(float));
			/* the first block of every row has valid >= 1 and m = -inf: alpha = 0, on O = 0 */
			float alpha = expf(m[r] - mnew);
			if (alpha != 1.0f)
				rows->scale(O + (size_t)r * dh, alpha, dh);
			l[r] = l[r] * alpha + sum;
			m[r] = mnew;
		}
		cpu_gemm_f32(S, KB, V, (size_t)dm->kv_dim, false, R, kb, dh, O, (size_t)dh, true, pack);
	}

	for (int r = 0; r < R; r++) {
		float *dst = j->o + (size_t)(t0 + r / gq) * dm->q_dim + (size_t)(g * gq + r % gq) * dh;
		float inv = 1.0f / l[r];
		for (int e = 0; e < dh; e++)
			dst[e] = O[(size_t)r * dh + e] * inv;
	}
}

void lm_attention_blocked(const struct lm_dims *dm, int T, int n0, const float *q, const float *k,
			  const float *v, float *o)
{
	if (T <= 0)
		return;
	struct job j = {.dm = dm, .rows = cpu_rows(), .T = T, .n0 = n0, .nblocks = (T + QB - 1) / QB,
			.q = q, .keys = k, .values = v, .o = o};
	cpu_parallel_for_work(dm->hkv * j.nblocks, task, &j,
			      2.0 * dm->hq * T * ((double)n0 + T / 2.0) * dm->dh);
}
