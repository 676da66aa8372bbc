/* Many-token matrix products through oneDNN's matmul (cpu_dnnl.h).
 *
 * One oneDNN CPU engine and stream for the process, created on first use. A product is a matmul
 * primitive for (T, in, out, ldy, accumulate, layout): primitives are kept in a small cache
 * (CACHE_SIZE, least recently used out), since creating one JIT-compiles its kernels. The bf16
 * copy of x lives in one buffer grown to the largest product seen. The lock serialises all of
 * it: the stream, the cache, the buffer and the OpenMP thread count.
 *
 * The reordered layout is the one oneDNN chooses for REF_T rows; every product with that weight
 * then names that layout explicitly, which the brgemm matmul accepts for any row count (if some
 * implementation did not, the product reports -ENOTSUP rather than reorder per call).
 */
#include "cpu_dnnl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "common.h"
#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

#define CACHE_SIZE 64
#define REF_T 256

/* libgomp's, which libdnnl links: the thread count of the calling thread's parallel regions
 * (declared here because clang's resource directory has no omp.h) */
void omp_set_num_threads(int n);

struct cpu_dnnl_weight {
	int in, out;
	enum cpu_dnnl_layout layout;
	dnnl_memory_desc_t md; /* dims {in, out} */
	dnnl_memory_t mem;
	void *owned; /* the bf16 copy or the reordered one; NULL when reading the tensor */
	size_t owned_bytes;
};

struct cache_entry {
	int T, in, out;
	size_t ldy;
	bool accumulate;
	dnnl_memory_desc_t wmd;
	dnnl_primitive_t prim;
	dnnl_memory_t src, dst;
	uint64_t used;
};

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	int init_error; /* 0 or -ENOTSUP */
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	struct cache_entry cache[CACHE_SIZE];
	int n_cache;
	uint64_t clock;
	uint16_t *xbuf;
	size_t xbuf_elems;
	char impl[64];
} g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.once = PTHREAD_ONCE_INIT,
	.impl = "none",
};

static void init_once(void)
{
	if (dnnl_engine_create(&g.engine, dnnl_cpu, 0) != dnnl_success) {
		g.init_error = -ENOTSUP;
		return;
	}
	if (dnnl_stream_create(&g.stream, g.engine, dnnl_stream_default_flags) != dnnl_success) {
		dnnl_engine_destroy(g.engine);
		g.engine = NULL;
		g.init_error = -ENOTSUP;
	}
}

static int init(void)
{
	pthread_once(&g.once, init_once);
	return g.init_error;
}

/* ---- fp32 -> bf16 ------------------------------------------------------------------------- */

static inline uint16_t bf16_round(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN, sign kept */
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#ifdef HAVE_X86
__attribute__((target("avx512f,avx512bw"))) static void to_bf16_avx512(const float *src,
									 uint16_t *dst, size_t n)
{
	const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
	const __m512i quiet = _mm512_set1_epi32(0x40);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
		__m512i hi = _mm512_srli_epi32(u, 16);
		__m512i r = _mm512_srli_epi32(
			_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one)), 16);
		__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
		r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
		_mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
	}
	for (; i < n; i++)
		dst[i] = bf16_round(src[i]);
}

__attribute__((target("avx512f"))) static void round_avx512(float *x, size_t n)
{
	const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
	const __m512i quiet = _mm512_set1_epi32(0x400000), keep = _mm512_set1_epi32((int)0xffff0000u);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
		__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
		__m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, bias), lsb), keep);
		__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
		r = _mm512_mask_mov_epi32(r, nan, _mm512_and_si512(_mm512_or_si512(u, quiet), keep));
		_mm512_storeu_ps(x + i, _mm512_castsi512_ps(r));
	}
	for (; i < n; i++) {
		uint32_t u = (uint32_t)bf16_round(x[i]) << 16;
		memcpy(x + i, &u, sizeof(u));
	}
}

static bool have_avx512bw(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
#endif

void cpu_f32_to_bf16(const float *src, uint16_t *dst, size_t n)
{
#ifdef HAVE_X86
	static int avx512 = -1;
	if (avx512 < 0)
		avx512 = have_avx512bw(); /* racing first calls store the same value */
	if (avx512) {
		to_bf16_avx512(src, dst, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		dst[i] = bf16_round(src[i]);
}

void cpu_round_bf16_rows(float *x, size_t ldx, int T, int n)
{
#ifdef HAVE_X86
	static int avx512 = -1;
	if (avx512 < 0)
		avx512 = have_avx512bw();
	if (avx512) {
		for (int t = 0; t < T; t++)
			round_avx512(x + (size_t)t * ldx, (size_t)n);
		return;
	}
#endif
	for (int t = 0; t < T; t++) {
		float *row = x + (size_t)t * ldx;
		for (int i = 0; i < n; i++) {
			uint32_t u = (uint32_t)bf16_round(row[i]) << 16;
			memcpy(row + i, &u, sizeof(u));
		}
	}
}

/* ---- primitives --------------------------------------------------------------------------- */

static int status_errno(dnnl_status_t s)
{
	return s == dnnl_out_of_memory ? -ENOMEM : -ENOTSUP;
}

/* The matmul of T rows against a weight of layout wmd (format `any` to let oneDNN choose). */
static int matmul_pd(int T, int in, int out, const dnnl_memory_desc_t *wmd, size_t ldy,
		     bool accumulate, dnnl_primitive_desc_t *ret)
{
	dnnl_memory_desc_t src, dst;
	dnnl_dims_t sdims = {T, in}, ddims = {T, out}, dstrides = {(dnnl_dim_t)ldy, 1};
	dnnl_status_t s = dnnl_memory_desc_init_by_tag(&src, 2, sdims, dnnl_bf16, dnnl_ab);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_strides(&dst, 2, ddims, dnnl_f32, dstrides);
	if (s != dnnl_success)
		return status_errno(s);
	dnnl_matmul_desc_t desc;
	s = dnnl_matmul_desc_init(&desc, &src, wmd, NULL, &dst);
	if (s != dnnl_success)
		return status_errno(s);
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	if (accumulate) {
		s = dnnl_primitive_attr_create(&attr);
		if (s == dnnl_success)
			s = dnnl_post_ops_create(&po);
		if (s == dnnl_success)
			s = dnnl_post_ops_append_sum(po, 1.0f);
		if (s == dnnl_success)
			s = dnnl_primitive_attr_set_post_ops(attr, po);
	}
	if (s == dnnl_success)
		s = dnnl_primitive_desc_create(ret, &desc, attr, g.engine, NULL);
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return s == dnnl_success ? 0 : status_errno(s);
}

static void entry_clear(struct cache_entry *e)
{
	if (e->prim)
		dnnl_primitive_destroy(e->prim);
	if (e->src)
		dnnl_memory_destroy(e->src);
	if (e->dst)
		dnnl_memory_destroy(e->dst);
	memset(e, 0, sizeof(*e));
}

/* The cached primitive for this product, created on a miss. Called with the lock held. */
static int cache_get(const struct cpu_dnnl_weight *w, int T, size_t ldy, bool accumulate,
		     struct cache_entry **ret)
{
	struct cache_entry *victim = NULL;
	for (int i = 0; i < g.n_cache; i++) {
		struct cache_entry *e = &g.cache[i];
		if (e->T == T && e->in == w->in && e->out == w->out && e->ldy == ldy &&
		    e->accumulate == accumulate && dnnl_memory_desc_equal(&e->wmd, &w->md)) {
			e->used = ++g.clock;
			*ret = e;
			return 0;
		}
		if (!victim || e->used < victim->used)
			victim = e;
	}
	if (g.n_cache < CACHE_SIZE)
		victim = &g.cache[g.n_cache++];
	else
		entry_clear(victim);

	dnnl_primitive_desc_t pd;
	int r = matmul_pd(T, w->in, w->out, &w->md, ldy, accumulate, &pd);
	if (r < 0)
		goto drop;
	dnnl_status_t s = dnnl_primitive_create(&victim->prim, pd);
	if (s == dnnl_success)
		s = dnnl_memory_create(&victim->src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
				       g.engine, DNNL_MEMORY_NONE);
	if (s == dnnl_success)
		s = dnnl_memory_create(&victim->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
				       g.engine, DNNL_MEMORY_NONE);
	dnnl_primitive_desc_destroy(pd);
	if (s != dnnl_success) {
		r = status_errno(s);
		goto drop;
	}
	victim->T = T;
	victim->in = w->in;
	victim->out = w->out;
	victim->ldy = ldy;
	victim->accumulate = accumulate;
	victim->wmd = w->md;
	victim->used = ++g.clock;
	*ret = victim;
	return 0;
drop:
	/* the slot stays unused: keep the array dense by moving the last entry into it */
	entry_clear(victim);
	if (victim != &g.cache[g.n_cache - 1]) {
		*victim = g.cache[g.n_cache - 1];
		memset(&g.cache[g.n_cache - 1], 0, sizeof(g.cache[0]));
	}
	g.n_cache--;
	return r;
}

static int run(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args)
{
	omp_set_num_threads(cpu_threads());
	dnnl_status_t s = dnnl_primitive_execute(p, g.stream, nargs, args);
	if (s == dnnl_success)
		s = dnnl_stream_wait(g.stream);
	return s == dnnl_success ? 0 : status_errno(s);
}

/* ---- weights ------------------------------------------------------------------------------ */

/* Reorders the plain bf16 weight at `plain` into w->md (already the chosen layout), into a new
 * buffer. Called with the lock held. */
static int reorder_weight(struct cpu_dnnl_weight *w, const dnnl_memory_desc_t *plain_md,
			  const void *plain)
{
	w->owned_bytes = dnnl_memory_desc_get_size(&w->md);
	if (posix_memalign(&w->owned, 64, MAX(w->owned_bytes, 64)) != 0) {
		w->owned = NULL;
		return -ENOMEM;
	}
	dnnl_primitive_desc_t rpd;
	dnnl_primitive_t rp = NULL;
	dnnl_memory_t from = NULL, to = NULL;
	dnnl_status_t s = dnnl_reorder_primitive_desc_create(&rpd, plain_md, g.engine, &w->md,
							     g.engine, NULL);
	if (s != dnnl_success)
		return status_errno(s);
	s = dnnl_primitive_create(&rp, rpd);
	dnnl_primitive_desc_destroy(rpd);
	if (s == dnnl_success)
		s = dnnl_memory_create(&from, plain_md, g.engine, (void *)plain);
	if (s == dnnl_success)
		s = dnnl_memory_create(&to, &w->md, g.engine, w->owned);
	int r = status_errno(s);
	if (s == dnnl_success) {
		dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
		r = run(rp, 2, args);
	}
	if (to)
		dnnl_memory_destroy(to);
	if (from)
		dnnl_memory_destroy(from);
	if (rp)
		dnnl_primitive_destroy(rp);
	return r;
}

int cpu_dnnl_weight_create(const struct tensor *t, enum cpu_dnnl_layout layout,
			   struct cpu_dnnl_weight **ret)
{
	if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[0] > INT_MAX ||
	    t->shape[1] > INT_MAX)
		return -EINVAL;
	int r = init();
	if (r < 0)
		return r;
	struct cpu_dnnl_weight *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->out = (int)t->shape[0];
	w->in = (int)t->shape[1];
	w->layout = layout;
	size_t n = (size_t)w->in * (size_t)w->out;

	/* the plain bf16 rows: the tensor itself, or a converted copy */
	const void *plain = t->data;
	uint16_t *copy = NULL;
	if (t->dtype != TENSOR_BF16) {
		if (posix_memalign((void **)&copy, 64, MAX(n * sizeof(uint16_t), 64)) != 0) {
			r = -ENOMEM;
			goto free_w;
		}
		float *row = malloc((size_t)w->in * sizeof(float));
		if (!row) {
			r = -ENOMEM;
			goto free_copy;
		}
		for (int o = 0; o < w->out; o++) {
			cpu_tensor_to_f32(t, (size_t)o * w->in, (size_t)w->in, row);
			cpu_f32_to_bf16(row, copy + (size_t)o * w->in, (size_t)w->in);
		}
		free(row);
		plain = copy;
	}
	dnnl_memory_desc_t plain_md, any_md;
	dnnl_dims_t dims = {w->in, w->out};
	if (dnnl_memory_desc_init_by_tag(&plain_md, 2, dims, dnnl_bf16, dnnl_ba) != dnnl_success ||
	    dnnl_memory_desc_init_by_tag(&any_md, 2, dims, dnnl_bf16, dnnl_format_tag_any) !=
		    dnnl_success) {
		r = -ENOTSUP;
		goto free_copy;
	}

	pthread_mutex_lock(&g.lock);
	dnnl_primitive_desc_t pd;
	r = matmul_pd(REF_T, w->in, w->out, layout == CPU_DNNL_REORDERED ? &any_md : &plain_md,
		      (size_t)w->out, false, &pd);
	if (r < 0)
		goto unlock;
	const char *impl = NULL;
	if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
		snprintf(g.impl, sizeof(g.impl), "%s", impl);
	w->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	dnnl_primitive_desc_destroy(pd);
	if (layout == CPU_DNNL_REORDERED) {
		r = reorder_weight(w, &plain_md, plain);
		if (r < 0)
			goto unlock;
		free(copy);
		copy = NULL;
	} else if (copy) {
		w->owned = copy;
		w->owned_bytes = n * sizeof(uint16_t);
		copy = NULL;
	}
	void *data = w->owned ? w->owned : (void *)plain;
	if (dnnl_memory_create(&w->mem, &w->md, g.engine, data) != dnnl_success) {
		r = -ENOMEM;
		goto unlock;
	}
	pthread_mutex_unlock(&g.lock);
	*ret = w;
	return 0;
unlock:
	pthread_mutex_unlock(&g.lock);
free_copy:
	free(copy);
free_w:
	free(w->owned);
	free(w);
	return r;
}

void cpu_dnnl_weight_destroy(struct cpu_dnnl_weight *w)
{
	if (!w)
		return;
	if (w->mem)
		dnnl_memory_destroy(w->mem);
	free(w->owned);
	free(w);
}

size_t cpu_dnnl_weight_bytes(const struct cpu_dnnl_weight *w)
{
	return w->owned_bytes;
}

const char *cpu_dnnl_impl_name(void)
{
	return g.impl;
}

/* ---- products ----------------------------------------------------------------------------- */

int cpu_dnnl_matmul(const struct cpu_dnnl_weight *w, const float *x, size_t ldx, int T, float *y,
		    size_t ldy, bool accumulate)
{
	if (T <= 0)
		return 0;
	if (ldy < (size_t)w->out || ldx < (size_t)w->in)
		return -EINVAL;
	size_t need = (size_t)T * (size_t)w->in;
	pthread_mutex_lock(&g.lock);
	int r = 0;
	if (need > g.xbuf_elems) {
		uint16_t *b = NULL;
		if (posix_memalign((void **)&b, 64, need * sizeof(uint16_t)) != 0) {
			r = -ENOMEM;
			goto unlock;
		}
		free(g.xbuf);
		g.xbuf = b;
		g.xbuf_elems = need;
	}
	struct cache_entry *e;
	r = cache_get(w, T, ldy, accumulate, &e);
	if (r < 0)
		goto unlock;
	for (int t = 0; t < T; t++)
		cpu_f32_to_bf16(x + (size_t)t * ldx, g.xbuf + (size_t)t * w->in, (size_t)w->in);
	if (dnnl_memory_set_data_handle(e->src, g.xbuf) != dnnl_success ||
	    dnnl_memory_set_data_handle(e->dst, y) != dnnl_success) {
		r = -ENOTSUP;
		goto unlock;
	}
	dnnl_exec_arg_t args[3] = {
		{DNNL_ARG_SRC, e->src},
		{DNNL_ARG_WEIGHTS, w->mem},
		{DNNL_ARG_DST, e->dst},
	};
	r = run(e->prim, 3, args);
unlock:
	pthread_mutex_unlock(&g.lock);
	return r;
}
