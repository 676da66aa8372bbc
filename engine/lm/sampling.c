/* Token sampling: greedy, temperature, top-k, top-p, with the sampler's own PRNG (xoshiro256**
 * seeded through splitmix64) so that a seed reproduces the same ids on every machine.
 *
 * Order of the filters (as in HF generate): temperature scales the logits, top-k keeps the k
 * largest, top-p keeps the smallest prefix of the remaining ids (sorted by probability, ties by
 * lower id) whose mass reaches top_p, then one id is drawn from the renormalised rest.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"

struct cand {
	float logit;
	int32_t id;
};

struct engine_sampler {
	struct engine_sampling p;
	uint64_t s[4];
	struct cand *cands;
	size_t cap;
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(struct engine_sampler *sm)
{
	uint64_t *s = sm->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* uniform in [0, 1) with 53 random bits */
static double next_unit(struct engine_sampler *sm)
{
	return (double)(next_u64(sm) >> 11) * 0x1.0p-53;
}

struct engine_sampler *engine_sampler_create(const struct engine_sampling *params)
{
	if (!params || isnan(params->temperature) || isnan(params->top_p)) {
		errno = EINVAL;
		return NULL;
	}
	struct engine_sampler *sm = calloc(1, sizeof(*sm));
	if (!sm) {
		errno = ENOMEM;
		return NULL;
	}
	sm->p = *params;
	uint64_t x = params->seed;
	for (int i = 0; i < 4; i++)
		sm->s[i] = splitmix64(&x);
	return sm;
}

void engine_sampler_destroy(struct engine_sampler *sm)
{
	if (!sm)
		return;
	free(sm->cands);
	free(sm);
}

static int cmp_cand(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	if (a->logit != b->logit)
		return a->logit > b->logit ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

/* min-heap on (logit, -id): the root is the weakest kept candidate */
static bool weaker(const struct cand *a, const struct cand *b)
{
	return a->logit < b->logit || (a->logit == b->logit && a->id > b->id);
}

static void sift_down(struct cand *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && weaker(&h[l], &h[m]))
			m = l;
		if (r < n && weaker(&h[r], &h[m]))
			m = r;
		if (m == i)
			return;
		struct cand t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

int32_t engine_sampler_sample(struct engine_sampler *sm, const float *logits, int vocab)
{
	if (!sm || !logits || vocab < 1)
		return -EINVAL;

	if (!(sm->p.temperature > 0)) {
		int32_t best = 0;
		for (int i = 1; i < vocab; i++)
			if (logits[i] > logits[best])
				best = i;
		return best;
	}

	if ((size_t)vocab > sm->cap) {
		struct cand *c = realloc(sm->cands, (size_t)vocab * sizeof(*c));
		if (!c)
			return -ENOMEM;
		sm->cands = c;
		sm->cap = (size_t)vocab;
	}
	struct cand *c = sm->cands;
	const float t = sm->p.temperature;
	size_t n;

	/* Scaled logits are (logit - max) / t: <= 0, the best exactly 0. logit / t would overflow
	 * to +inf for a tiny t, and the draw among those infinities (exp(inf - inf) = NaN) would
	 * not be the argmax. */
	float top = -INFINITY;
	for (int i = 0; i < vocab; i++)
		top = fmaxf(top, logits[i]);
	const float shift = isfinite(top) ? top : 0.0f;

	if (sm->p.top_k > 0 && sm->p.top_k < vocab) {
		size_t k = (size_t)sm->p.top_k;
		for (size_t i = 0; i < k; i++)
			c[i] = (struct cand){(logits[i] - shift) / t, (int32_t)i};
		for (size_t i = k / 2; i-- > 0;)
			sift_down(c, k, i);
		for (int i = (int)k; i < vocab; i++) {
			struct cand x = {(logits[i] - shift) / t, i};
			if (weaker(&c[0], &x)) {
				c[0] = x;
				sift_down(c, k, 0);
			}
		}
		n = k;
	} else {
		/* Candidates more than 40 nats below the best carry < vocab * e^-40 of the mass: they
		 * cannot change which ids top-p keeps or the draw at double precision. */
		float mx = (top - shift) / t;
		n = 0;
		for (int i = 0; i < vocab; i++) {
			float l = (logits[i] - shift) / t;
			if (l >= mx - 40.0f)
				c[n++] = (struct cand){l, i};
		}
		/* only NaN logits (fmaxf skips them): nothing to draw from */
		if (n == 0)
			return -EINVAL;
	}
	qsort(c, n, sizeof(*c), cmp_cand);

	/* probabilities relative to the best candidate (c[0]) */
	double total = 0;
	for (size_t i = 0; i < n; i++)
		total += exp((double)c[i].logit - (double)c[0].logit);
	size_t keep = n;
	if (sm->p.top_p > 0 && sm->p.top_p < 1) {
		double acc = 0;
		for (size_t i = 0; i < n; i++) {
			acc += exp((double)c[i].logit - (double)c[0].logit) / total;
			if (acc >= (double)sm->p.top_p) {
				keep = i + 1;
				break;
			}
		}
		total = 0;
		for (size_t i = 0; i < keep; i++)
			total += exp((double)c[i].logit - (double)c[0].logit);
	}
	double u = next_unit(sm) * total, acc = 0;
	for (size_t i = 0; i < keep; i++) {
		acc += exp((double)c[i].logit - (double)c[0].logit);
		if (u < acc)
			return c[i].id;
	}
	return c[keep - 1].id;
}
