/* Many-token matrix products through oneDNN's matmul (cpu_dnnl.h).
 *
 * DESIGN (threads): one set of threads. oneDNN's own OpenMP threads are never started: every
 * oneDNN call runs with an OpenMP thread count of 1, on the engine pool (cpu.h). A product is
 * one pool job whose task i runs the matmul of the i-th run of rows (one run per thread,
 * multiples of ROW_ALIGN rows) on the thread that takes it, with that thread's stream and
 * scratchpad; every task reads the whole weight. So nothing of oneDNN spins while the pool's
 * workers wait for work or the other way round, and --threads sizes both.
 *
 * A run's product is a matmul primitive for (rows, in, out, ldy, accumulate, layout),
 * kept in a small cache (CACHE_SIZE, least recently used out), since creating one JIT-compiles
 * its kernels. The bf16 copy of x lives in one buffer grown to the largest product seen and is
 * read by every slice. The lock serialises the cache, the buffer, the streams and scratchpads
 * (one product at a time, as the pool runs one job at a time).
 *
 * The reordered layout is the one oneDNN chooses for REF_T rows; every product with that weight
 * then names that layout explicitly, which the brgemm matmul accepts for any row count (if some
 * implementation did not, the product reports -ENOTSUP rather than reorder per call).
 *
 * Weights made a block at a time (cpu_dnnl_matmul_bf16_fill, the prompt's products on quantized
 * weights) split the other way: a task is a block of the weight's rows, made by the caller's
 * fill into its thread's buffer (sized to stay in the core's L2) and multiplied by every token,
 * at most FILL_T tokens per call. oneDNN 2.6's brgemm takes only a dense y (a y row stride
 * wider than the block's columns falls back to its plain jit GEMM), so the block's results go to
 * a dense per-thread buffer and are stored or added into y's columns by the task.
 */
#include "cpu_dnnl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
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
#define ROW_ALIGN 32
/* cpu_dnnl_matmul_bf16_fill(): the most tokens one oneDNN call multiplies by a block of weights */
#define FILL_T 256

/* libgomp's, which libdnnl links: the thread count of the calling thread's parallel regions
 * (declared here because clang's resource directory has no omp.h) */
void omp_set_num_threads(int n);

/* Output columns [n0, n0 + n) of a weight. */
struct slice {
	int n0, n;
	dnnl_memory_desc_t md; /* dims {in, n} */
	dnnl_memory_t mem;
	void *owned; /* the reordered copy; NULL when reading the plain rows */
};

struct cpu_dnnl_weight {
	int in, out;
	enum cpu_dnnl_layout layout;
	uint16_t *copy; /* the bf16 copy of a tensor of another dtype, else NULL */
	size_t owned_bytes;
	int n_slices;
	struct slice s[];
};

struct cache_entry {
	int T, in, n;
	size_t ldy;
	bool accumulate;
	enum cpu_dnnl_act act;
	dnnl_memory_desc_t wmd, src_md, dst_md, scratch_md;
	size_t scratch_bytes;
	dnnl_primitive_t prim;
	uint64_t used;
};

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	int init_error; /* 0 or -ENOTSUP */
	dnnl_engine_t engine;
	dnnl_stream_t streams[CPU_MAX_THREADS]; /* per pool thread, created on first use */
	void *scratch[CPU_MAX_THREADS];		/* per pool thread: the primitives' scratchpads */
	size_t scratch_size[CPU_MAX_THREADS];
	struct cache_entry cache[CACHE_SIZE];
	int n_cache;
	uint64_t clock;
	uint16_t *xbuf;
	size_t xbuf_elems;
	/* per pool thread: cpu_dnnl_matmul_bf16_fill()'s block of weights and its results */
	void *fill_w[CPU_MAX_THREADS], *fill_y[CPU_MAX_THREADS];
	size_t fill_w_size[CPU_MAX_THREADS], fill_y_size[CPU_MAX_THREADS];
	char impl[64];
} g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.once = PTHREAD_ONCE_INIT,
	.impl = "none",
};

static void init_once(void)
{
	omp_set_num_threads(1);
	if (dnnl_engine_create(&g.engine, dnnl_cpu, 0) != dnnl_success)
		g.init_error = -ENOTSUP;
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
__attribute__((target("avx512f,avx512bw"))) static void to_bf16_avx512(const float *src, uint16_t *dst,
								       size_t n)
{
	const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
	const __m512i quiet = _mm512_set1_epi32(0x40);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
		__m512i hi = _mm512_srli_epi32(u, 16);
		__m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias),
							       _mm512_and_si512(hi, one)),
					      16);
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
#endif

/* the conversions' variants: the portable loops or AVX-512 (F and BW) */
static const enum cpu_isa bf16_isas[] = {
	CPU_ISA_PORTABLE,
#ifdef HAVE_X86
	CPU_ISA_AVX512,
#endif
};

enum cpu_isa cpu_bf16_isa(void)
{
	return bf16_isas[cpu_isa_pick(bf16_isas, ARRAY_SIZE(bf16_isas))];
}

void cpu_f32_to_bf16(const float *src, uint16_t *dst, size_t n)
{
#ifdef HAVE_X86
	if (cpu_bf16_isa() == CPU_ISA_AVX512) {
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
	if (cpu_bf16_isa() == CPU_ISA_AVX512) {
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

/* ---- primitives ------------------------------------------------------------------------- */

static int status_errno(dnnl_status_t s)
{
	return s == dnnl_out_of_memory ? -ENOMEM : -ENOTSUP;
}

/* The matmul of T rows against n columns of layout wmd (format `any` to let oneDNN choose). */
static int matmul_pd(int T, int in, int n, const dnnl_memory_desc_t *wmd, size_t ldy, bool accumulate,
		     enum cpu_dnnl_act act, dnnl_primitive_desc_t *ret)
{
	dnnl_memory_desc_t src, dst;
	dnnl_dims_t sdims = {T, in}, ddims = {T, n}, dstrides = {(dnnl_dim_t)ldy, 1};
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
	s = dnnl_primitive_attr_create(&attr);
	if (s == dnnl_success)
		s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
	if (s == dnnl_success && (accumulate || act != CPU_DNNL_ACT_NONE)) {
		s = dnnl_post_ops_create(&po);
		if (s == dnnl_success && accumulate)
			s = dnnl_post_ops_append_sum(po, 1.0f);
		/* max(y, 0)^2 in the epilogue, in fp32 as cpu_relu2() computes it */
		if (s == dnnl_success && act == CPU_DNNL_ACT_RELU2)
			s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
		if (s == dnnl_success && act == CPU_DNNL_ACT_RELU2)
			s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_square, 0.0f, 0.0f);
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
	memset(e, 0, sizeof(*e));
}

/* The cached primitive for T rows against n columns of weights of layout wmd ({in, n}), created
 * on a miss. Called with the lock held. */
static int cache_get_md(int T, int in, int n, const dnnl_memory_desc_t *wmd, size_t ldy, bool accumulate,
			enum cpu_dnnl_act act, struct cache_entry **ret)
{
	struct cache_entry *victim = NULL;
	for (int i = 0; i < g.n_cache; i++) {
		struct cache_entry *e = &g.cache[i];
		if (e->T == T && e->in == in && e->n == n && e->ldy == ldy && e->accumulate == accumulate &&
		    e->act == act && dnnl_memory_desc_equal(&e->wmd, wmd)) {
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
	int r = matmul_pd(T, in, n, wmd, ldy, accumulate, act, &pd);
	if (r < 0)
		goto drop;
	/* oneDNN's reference matmul (what it falls back to for a weight layout its fast kernels
	 * do not take at this row count) is far slower than cpu_matmul(): refused */
	const char *impl = NULL;
	if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
	    strncmp(impl, "ref", 3) == 0) {
		dnnl_primitive_desc_destroy(pd);
		r = -ENOTSUP;
		goto drop;
	}
	dnnl_status_t s = dnnl_primitive_create(&victim->prim, pd);
	victim->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
	victim->dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
	victim->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	victim->scratch_bytes = dnnl_memory_desc_get_size(&victim->scratch_md);
	dnnl_primitive_desc_destroy(pd);
	if (s != dnnl_success) {
		r = status_errno(s);
		goto drop;
	}
	victim->T = T;
	victim->in = in;
	victim->n = n;
	victim->ldy = ldy;
	victim->accumulate = accumulate;
	victim->act = act;
	victim->wmd = *wmd;
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

/* The cached primitive for slice sl of w. Called with the lock held. */
static int cache_get(const struct cpu_dnnl_weight *w, const struct slice *sl, int T, size_t ldy,
		     bool accumulate, enum cpu_dnnl_act act, struct cache_entry **ret)
{
	return cache_get_md(T, w->in, sl->n, &sl->md, ldy, accumulate, act, ret);
}

/* Runs p on the calling thread with one OpenMP thread, on stream st. */
static int run(dnnl_stream_t st, dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args)
{
	omp_set_num_threads(1);
	dnnl_status_t s = dnnl_primitive_execute(p, st, nargs, args);
	if (s == dnnl_success)
		s = dnnl_stream_wait(st);
	return s == dnnl_success ? 0 : status_errno(s);
}

/* The stream of pool thread t. Called with the lock held. */
static int stream_of(int t, dnnl_stream_t *ret)
{
	if (!g.streams[t] &&
	    dnnl_stream_create(&g.streams[t], g.engine, dnnl_stream_default_flags) != dnnl_success) {
		g.streams[t] = NULL;
		return -ENOMEM;
	}
	*ret = g.streams[t];
	return 0;
}

static bool bf16_supported;
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;

/* A plain 64 x 64 bf16 weight's matmul at REF_T rows, as slice_prepare() asks for one. */
static void bf16_probe(void)
{
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = {64, 64}, strides = {1, 64};
	dnnl_primitive_desc_t pd;
	if (init() < 0 || dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_bf16, strides) != dnnl_success ||
	    matmul_pd(REF_T, 64, 64, &md, 64, false, CPU_DNNL_ACT_NONE, &pd) < 0)
		return;
	dnnl_primitive_desc_destroy(pd);
	bf16_supported = true;
}

bool cpu_dnnl_bf16_supported(void)
{
	pthread_once(&bf16_once, bf16_probe);
	return bf16_supported;
}

/* ---- weights ------------------------------------------------------------------------------ */

/* Reorders the plain slice at `plain` (plain_md) into sl->md, a new buffer. Called with the
 * lock held. */
static int reorder_slice(struct slice *sl, const dnnl_memory_desc_t *plain_md, const void *plain,
			 size_t *bytes)
{
	size_t n = dnnl_memory_desc_get_size(&sl->md);
	if (posix_memalign(&sl->owned, 64, MAX(n, 64)) != 0) {
		sl->owned = NULL;
		return -ENOMEM;
	}
	*bytes += n;
	dnnl_stream_t st;
	int r = stream_of(0, &st);
	if (r < 0)
		return r;
	dnnl_primitive_desc_t rpd;
	dnnl_primitive_t rp = NULL;
	dnnl_memory_t from = NULL, to = NULL;
	dnnl_status_t s =
		dnnl_reorder_primitive_desc_create(&rpd, plain_md, g.engine, &sl->md, g.engine, NULL);
	if (s != dnnl_success)
		return status_errno(s);
	s = dnnl_primitive_create(&rp, rpd);
	dnnl_primitive_desc_destroy(rpd);
	if (s == dnnl_success)
		s = dnnl_memory_create(&from, plain_md, g.engine, (void *)plain);
	if (s == dnnl_success)
		s = dnnl_memory_create(&to, &sl->md, g.engine, sl->owned);
	r = status_errno(s);
	if (s == dnnl_success) {
		dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
		r = run(st, rp, 2, args);
	}
	if (to)
		dnnl_memory_destroy(to);
	if (from)
		dnnl_memory_destroy(from);
	if (rp)
		dnnl_primitive_destroy(rp);
	return r;
}

/* Prepares slice sl of the plain bf16 rows `plain` ([out][in]). Called with the lock held. */
static int slice_prepare(struct cpu_dnnl_weight *w, struct slice *sl, const uint16_t *plain)
{
	dnnl_memory_desc_t plain_md, any_md;
	dnnl_dims_t dims = {w->in, sl->n}, strides = {1, w->in};
	if (dnnl_memory_desc_init_by_strides(&plain_md, 2, dims, dnnl_bf16, strides) != dnnl_success ||
	    dnnl_memory_desc_init_by_tag(&any_md, 2, dims, dnnl_bf16, dnnl_format_tag_any) != dnnl_success)
		return -ENOTSUP;
	const uint16_t *rows = plain + (size_t)sl->n0 * w->in;
	dnnl_primitive_desc_t pd;
	int r = matmul_pd(REF_T, w->in, sl->n, w->layout == CPU_DNNL_REORDERED ? &any_md : &plain_md,
			  (size_t)sl->n, false, CPU_DNNL_ACT_NONE, &pd);
	if (r < 0)
		return r;
	const char *impl = NULL;
	if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
		snprintf(g.impl, sizeof(g.impl), "%s", impl);
	sl->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	dnnl_primitive_desc_destroy(pd);
	if (w->layout == CPU_DNNL_REORDERED && (r = reorder_slice(sl, &plain_md, rows, &w->owned_bytes)) < 0)
		return r;
	void *data = sl->owned ? sl->owned : (void *)rows;
	if (dnnl_memory_create(&sl->mem, &sl->md, g.engine, data) != dnnl_success) {
		sl->mem = NULL;
		return -ENOMEM;
	}
	return 0;
}

int cpu_dnnl_weight_create(const struct tensor *t, enum cpu_dnnl_layout layout, struct cpu_dnnl_weight **ret)
{
	if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[0] > INT_MAX ||
	    t->shape[1] > INT_MAX)
		return -EINVAL;
	int r = init();
	if (r < 0)
		return r;
	int out = (int)t->shape[0], in = (int)t->shape[1];
	/* One slice: column slices would write y with a row stride wider than the slice, which
	 * oneDNN 2.6's brgemm (AMX) matmul does not take (it falls back to its plain jit GEMM), so
	 * products split their rows over the pool instead. */
	int n_slices = 1, per = out;
	struct cpu_dnnl_weight *w = calloc(1, sizeof(*w) + (size_t)n_slices * sizeof(w->s[0]));
	if (!w)
		return -ENOMEM;
	w->out = out;
	w->in = in;
	w->layout = layout;
	w->n_slices = n_slices;
	for (int i = 0; i < n_slices; i++) {
		w->s[i].n0 = i * per;
		w->s[i].n = MIN(per, out - i * per);
	}
	size_t n = (size_t)in * (size_t)out;

	/* the plain bf16 rows: the tensor itself, or a converted copy */
	const uint16_t *plain = t->data;
	if (t->dtype != TENSOR_BF16) {
		if (!(w->copy = alloc_huge(MAX(n * sizeof(uint16_t), 64)))) {
			r = -ENOMEM;
			goto fail;
		}
		float *row = malloc((size_t)in * sizeof(float));
		if (!row) {
			r = -ENOMEM;
			goto fail;
		}
		for (int o = 0; o < out; o++) {
			cpu_tensor_to_f32(t, (size_t)o * in, (size_t)in, row);
			cpu_f32_to_bf16(row, w->copy + (size_t)o * in, (size_t)in);
		}
		free(row);
		plain = w->copy;
		w->owned_bytes = alloc_huge_bytes(MAX(n * sizeof(uint16_t), 64));
	}
	pthread_mutex_lock(&g.lock);
	for (int i = 0; i < n_slices && r == 0; i++)
		r = slice_prepare(w, &w->s[i], plain);
	pthread_mutex_unlock(&g.lock);
	if (r < 0)
		goto fail;
	if (layout == CPU_DNNL_REORDERED && w->copy) {
		/* the slices hold their own copies now */
		free(w->copy);
		w->copy = NULL;
		w->owned_bytes -= alloc_huge_bytes(MAX(n * sizeof(uint16_t), 64));
	}
	*ret = w;
	return 0;
fail:
	cpu_dnnl_weight_destroy(w);
	return r;
}

void cpu_dnnl_weight_destroy(struct cpu_dnnl_weight *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n_slices; i++) {
		if (w->s[i].mem)
			dnnl_memory_destroy(w->s[i].mem);
		free(w->s[i].owned);
	}
	free(w->copy);
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

struct product {
	const struct cpu_dnnl_weight *w;
	struct cache_entry **e; /* per task */
	int T, rows;		/* rows per task (the last may have fewer) */
	const float *x;
	const uint16_t *xb; /* bf16 rows `in` apart, read in place; NULL: x, converted */
	size_t ldx;
	float *y;
	size_t ldy;
	_Atomic int err;
};

/* Runs e's primitive on pool thread `thread` (its stream and scratchpad) over the bf16 rows x,
 * the weights wm, into y. */
static int exec_entry(const struct cache_entry *e, const uint16_t *x, dnnl_memory_t wm, float *y, int thread)
{
	dnnl_memory_t src = NULL, dst = NULL, scr = NULL;
	dnnl_status_t s = dnnl_memory_create(&src, &e->src_md, g.engine, (void *)x);
	if (s == dnnl_success)
		s = dnnl_memory_create(&dst, &e->dst_md, g.engine, y);
	if (s == dnnl_success)
		s = dnnl_memory_create(&scr, &e->scratch_md, g.engine, g.scratch[thread]);
	int r = status_errno(s);
	if (s == dnnl_success) {
		dnnl_exec_arg_t args[4] = {
			{DNNL_ARG_SRC, src},
			{DNNL_ARG_WEIGHTS, wm},
			{DNNL_ARG_DST, dst},
			{DNNL_ARG_SCRATCHPAD, scr},
		};
		r = run(g.streams[thread], e->prim, 4, args);
	}
	if (scr)
		dnnl_memory_destroy(scr);
	if (dst)
		dnnl_memory_destroy(dst);
	if (src)
		dnnl_memory_destroy(src);
	return r;
}

/* Grows the 64-byte aligned buffer *b of *size bytes to at least `need`; its contents are lost. */
static int grow(void **b, size_t *size, size_t need)
{
	if (*b && *size >= need)
		return 0;
	void *n = NULL;
	if (posix_memalign(&n, 64, MAX(need, 64)) != 0)
		return -ENOMEM;
	free(*b);
	*b = n;
	*size = MAX(need, 64);
	return 0;
}

/* Every pool thread's stream, and its scratchpad of at least `scratch` bytes. Called with the
 * lock held. */
static int threads_ready(size_t scratch)
{
	for (int t = 0; t < cpu_threads(); t++) {
		dnnl_stream_t st;
		int r = stream_of(t, &st);
		if (r == 0)
			r = grow(&g.scratch[t], &g.scratch_size[t], scratch);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Rows [i * rows, ...) of the product, x's rounded to bf16 first, on the thread that takes the
 * task. */
static void product_task(void *ctx, int i, int thread)
{
	struct product *p = ctx;
	const struct slice *sl = &p->w->s[0];
	const struct cache_entry *e = p->e[i];
	size_t t0 = (size_t)i * (size_t)p->rows, in = (size_t)p->w->in;
	const uint16_t *xb = p->xb;
	if (!xb) {
		for (size_t t = t0; t < t0 + (size_t)e->T; t++)
			cpu_f32_to_bf16(p->x + t * p->ldx, g.xbuf + t * in, in);
		xb = g.xbuf;
	}
	int r = exec_entry(e, xb + t0 * in, sl->mem, p->y + t0 * p->ldy, thread);
	if (r < 0)
		atomic_store(&p->err, r);
}

static int matmul(const struct cpu_dnnl_weight *w, const float *x, const uint16_t *xb, size_t ldx, int T,
		  float *y, size_t ldy, bool accumulate, enum cpu_dnnl_act act)
{
	if (T <= 0)
		return 0;
	if (ldy < (size_t)w->out || ldx < (size_t)w->in || (xb && ldx != (size_t)w->in))
		return -EINVAL;
	size_t need = xb ? 0 : (size_t)T * (size_t)w->in;
	int threads = cpu_threads();
	/* one run of rows per thread, ROW_ALIGN rows at least */
	int rows = (T + threads - 1) / threads;
	rows = (rows + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
	int n_tasks = (T + rows - 1) / rows;
	struct cache_entry *entries[CPU_MAX_THREADS];
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
	size_t scratch = 0;
	for (int i = 0; i < n_tasks; i++) {
		int Ti = MIN(rows, T - i * rows);
		if ((r = cache_get(w, &w->s[0], Ti, ldy, accumulate, act, &entries[i])) < 0)
			goto unlock;
		scratch = MAX(scratch, entries[i]->scratch_bytes);
	}
	if ((r = threads_ready(scratch)) < 0)
		goto unlock;
	struct product p =
		{.w = w, .e = entries, .T = T, .rows = rows, .x = x, .xb = xb, .ldx = ldx, .y = y, .ldy = ldy};
	atomic_init(&p.err, 0);
	cpu_parallel_for(n_tasks, product_task, &p);
	r = atomic_load(&p.err);
unlock:
	pthread_mutex_unlock(&g.lock);
	return r;
}

int cpu_dnnl_matmul(const struct cpu_dnnl_weight *w, const float *x, size_t ldx, int T, float *y, size_t ldy,
		    bool accumulate)
{
	return matmul(w, x, NULL, ldx, T, y, ldy, accumulate, CPU_DNNL_ACT_NONE);
}

int cpu_dnnl_matmul_bf16(const struct cpu_dnnl_weight *w, const uint16_t *x, int T, float *y, size_t ldy,
			 bool accumulate)
{
	return matmul(w, NULL, x, (size_t)w->in, T, y, ldy, accumulate, CPU_DNNL_ACT_NONE);
}

int cpu_dnnl_matmul_act(const struct cpu_dnnl_weight *w, const float *x, size_t ldx, int T, float *y,
			size_t ldy, bool accumulate, enum cpu_dnnl_act act)
{
	return matmul(w, x, NULL, ldx, T, y, ldy, accumulate, act);
}

int cpu_dnnl_matmul_bf16_act(const struct cpu_dnnl_weight *w, const uint16_t *x, int T, float *y, size_t ldy,
			     bool accumulate, enum cpu_dnnl_act act)
{
	return matmul(w, NULL, x, (size_t)w->in, T, y, ldy, accumulate, act);
}

/* ---- products on weights made a block at a time (cpu_dnnl_matmul_bf16_fill) -------------- */

struct fill_job {
	int in, out, T, rows, tc; /* rows per block, tokens per call */
	const uint16_t *x;
	float *y;
	size_t ldy;
	bool accumulate;
	cpu_dnnl_fill_fn *fill;
	void *arg;
	struct cache_entry *e[2][2]; /* [a short last block][a short last run of tokens] */
	dnnl_memory_desc_t wmd[2];
	int *done; /* per block: the tokens whose results are in y */
};

/* Block i of the product on the thread that takes it: its rows made by fill into the thread's
 * buffer, then multiplied by every run of tc tokens into the thread's results buffer, which is
 * stored or added into y's columns of the block. */
static void fill_task(void *ctx, int i, int thread)
{
	struct fill_job *j = ctx;
	const int r0 = i * j->rows, n = MIN(j->rows, j->out - r0), tail = n != j->rows;
	const size_t in = (size_t)j->in;
	uint16_t *w = g.fill_w[thread];
	float *res = g.fill_y[thread];
	dnnl_memory_t wm = NULL;
	if (j->fill(j->arg, r0, n, w) < 0 ||
	    dnnl_memory_create(&wm, &j->wmd[tail], g.engine, w) != dnnl_success)
		goto out;
	for (int t0 = 0; t0 < j->T; t0 += j->tc) {
		const int tn = MIN(j->tc, j->T - t0);
		if (exec_entry(j->e[tail][tn != j->tc], j->x + (size_t)t0 * in, wm, res, thread) < 0)
			break;
		for (int t = 0; t < tn; t++) {
			float *y = j->y + (size_t)(t0 + t) * j->ldy + r0;
			const float *v = res + (size_t)t * (size_t)n;
			if (j->accumulate)
				for (int k = 0; k < n; k++)
					y[k] += v[k];
			else
				memcpy(y, v, (size_t)n * sizeof(float));
		}
		j->done[i] = t0 + tn;
	}
out:
	if (wm)
		dnnl_memory_destroy(wm);
}

int cpu_dnnl_matmul_bf16_fill(int out, int in, const uint16_t *x, int T, float *y, size_t ldy, bool accumulate,
			      int block_rows, cpu_dnnl_fill_fn *fill, cpu_dnnl_rest_fn *rest, void *arg)
{
	if (T <= 0)
		return 0;
	if (out < 1 || in < 1 || block_rows < 1 || ldy < (size_t)out)
		return -EINVAL;
	int r = init();
	if (r < 0)
		return r;
	struct fill_job j = {
		.in = in,
		.out = out,
		.T = T,
		.rows = MIN(block_rows, out),
		.tc = MIN(T, FILL_T),
		.x = x,
		.y = y,
		.ldy = ldy,
		.accumulate = accumulate,
		.fill = fill,
		.arg = arg,
	};
	const int n_blocks = (out + j.rows - 1) / j.rows;
	if (!(j.done = calloc((size_t)n_blocks, sizeof(*j.done))))
		return -ENOMEM;
	pthread_mutex_lock(&g.lock);
	/* the primitives: whole blocks and the last one, whole runs of tokens and the last one */
	const int ns[2] = {j.rows, out - (n_blocks - 1) * j.rows}, ts[2] = {j.tc, T - (T - 1) / j.tc * j.tc};
	size_t scratch = 0;
	for (int b = 0; b < 2 && r == 0; b++) {
		dnnl_dims_t dims = {in, ns[b]}, strides = {1, in};
		if (dnnl_memory_desc_init_by_strides(&j.wmd[b], 2, dims, dnnl_bf16, strides) != dnnl_success) {
			r = -ENOTSUP;
			break;
		}
		for (int t = 0; t < 2 && r == 0; t++)
			if ((r = cache_get_md(ts[t], in, ns[b], &j.wmd[b], (size_t)ns[b], false,
					      CPU_DNNL_ACT_NONE, &j.e[b][t])) == 0)
				scratch = MAX(scratch, j.e[b][t]->scratch_bytes);
	}
	if (r == 0)
		r = threads_ready(scratch);
	for (int t = 0; t < cpu_threads() && r == 0; t++)
		if (grow(&g.fill_w[t], &g.fill_w_size[t], (size_t)j.rows * (size_t)in * sizeof(uint16_t)) <
			    0 ||
		    grow(&g.fill_y[t], &g.fill_y_size[t], (size_t)j.tc * (size_t)j.rows * sizeof(float)) < 0)
			r = -ENOMEM;
	if (r == 0)
		cpu_parallel_for(n_blocks, fill_task, &j);
	pthread_mutex_unlock(&g.lock);
	/* y untouched on a failure before the blocks ran; a block that failed (its fill, or oneDNN)
	 * after some of its tokens were done has the rest of them computed by `rest` */
	for (int i = 0; i < n_blocks && r == 0; i++)
		if (j.done[i] < T)
			rest(arg, i * j.rows, MIN(j.rows, out - i * j.rows), j.done[i]);
	free(j.done);
	return r;
}
