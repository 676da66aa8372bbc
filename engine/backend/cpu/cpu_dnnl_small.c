/* Small bf16 products through oneDNN inside pool tasks (cpu_dnnl_small.h).
 *
 * DESIGN (threads): the cache (entries, reference counts) is under `lock`, taken only by get and
 * put, which run outside pool jobs. cpu_dnnl_small_run() runs inside a task: it touches only
 * the slot of its own thread index (the stream, the entry's scratchpad), each created on that
 * thread's first run. Pool jobs are serialised (cpu.h), so one thread index is never used by two
 * threads at once. A slot's scratchpad lives as long as its entry, its stream as the process.
 */
#include "cpu_dnnl_small.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "common.h"
#include "cpu.h"

#define CACHE_SIZE 32

/* libgomp's (see cpu_dnnl.c) */
void omp_set_num_threads(int n);

struct cpu_dnnl_small {
	int M, K, N;
	size_t lda, ldb, ldc;
	bool b_trans, accumulate;
	bool cached;   /* in g.cache; otherwise destroyed by its last put */
	int refs;      /* under lock */
	uint64_t used; /* under lock */
	dnnl_primitive_t prim;
	dnnl_memory_desc_t a_md, b_md, c_md, scratch_md;
	size_t scratch_bytes;
	char impl[48];
	void *scratch[CPU_MAX_THREADS]; /* per thread, written only by that thread */
};

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	int init_error;
	dnnl_engine_t engine;
	dnnl_stream_t streams[CPU_MAX_THREADS]; /* per thread, written only by that thread */
	struct cpu_dnnl_small *cache[CACHE_SIZE];
	uint64_t clock;
} g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.once = PTHREAD_ONCE_INIT,
};

static void init_once(void)
{
	omp_set_num_threads(1);
	if (dnnl_engine_create(&g.engine, dnnl_cpu, 0) != dnnl_success)
		g.init_error = -ENOTSUP;
}

static int status_errno(dnnl_status_t s)
{
	return s == dnnl_out_of_memory ? -ENOMEM : -ENOTSUP;
}

static void entry_destroy(struct cpu_dnnl_small *p)
{
	if (!p)
		return;
	if (p->prim)
		dnnl_primitive_destroy(p->prim);
	for (int t = 0; t < CPU_MAX_THREADS; t++)
		free(p->scratch[t]);
	free(p);
}

static struct cpu_dnnl_small *entry_create(int M, int K, int N, size_t lda, size_t ldb, bool b_trans,
					   size_t ldc, bool accumulate, int *ret_err)
{
	struct cpu_dnnl_small *p = calloc(1, sizeof(*p));
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	int r = -ENOMEM;

	if (!p)
		goto fail;
	*p = (struct cpu_dnnl_small){.M = M,
				     .K = K,
				     .N = N,
				     .lda = lda,
				     .ldb = ldb,
				     .ldc = ldc,
				     .b_trans = b_trans,
				     .accumulate = accumulate};
	dnnl_dims_t ad = {M, K}, as = {(dnnl_dim_t)lda, 1};
	dnnl_dims_t bd = {K, N}, bs_plain = {(dnnl_dim_t)ldb, 1}, bs_trans = {1, (dnnl_dim_t)ldb};
	dnnl_dims_t cd = {M, N}, cs = {(dnnl_dim_t)ldc, 1};
	dnnl_status_t s = dnnl_memory_desc_init_by_strides(&p->a_md, 2, ad, dnnl_bf16, as);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_strides(&p->b_md, 2, bd, dnnl_bf16,
						     b_trans ? bs_trans : bs_plain);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_strides(&p->c_md, 2, cd, dnnl_f32, cs);
	dnnl_matmul_desc_t desc;
	if (s == dnnl_success)
		s = dnnl_matmul_desc_init(&desc, &p->a_md, &p->b_md, NULL, &p->c_md);
	if (s == dnnl_success)
		s = dnnl_primitive_attr_create(&attr);
	if (s == dnnl_success)
		s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
	if (s == dnnl_success && accumulate) {
		s = dnnl_post_ops_create(&po);
		if (s == dnnl_success)
			s = dnnl_post_ops_append_sum(po, 1.0f);
		if (s == dnnl_success)
			s = dnnl_primitive_attr_set_post_ops(attr, po);
	}
	if (s == dnnl_success)
		s = dnnl_primitive_desc_create(&pd, &desc, attr, g.engine, NULL);
	if (s != dnnl_success) {
		pd = NULL;
		r = status_errno(s);
		goto fail;
	}
	/* the reference matmul is far slower than the callers' own loops */
	const char *impl = NULL;
	if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
	    strncmp(impl, "ref", 3) == 0) {
		r = -ENOTSUP;
		goto fail;
	}
	snprintf(p->impl, sizeof(p->impl), "%s", impl);
	p->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	p->scratch_bytes = dnnl_memory_desc_get_size(&p->scratch_md);
	s = dnnl_primitive_create(&p->prim, pd);
	if (s != dnnl_success) {
		p->prim = NULL;
		r = status_errno(s);
		goto fail;
	}
	dnnl_primitive_desc_destroy(pd);
	dnnl_primitive_attr_destroy(attr);
	if (po)
		dnnl_post_ops_destroy(po);
	return p;
fail:
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (po)
		dnnl_post_ops_destroy(po);
	entry_destroy(p);
	*ret_err = r;
	return NULL;
}

int cpu_dnnl_small_get(int M, int K, int N, size_t lda, size_t ldb, bool b_trans, size_t ldc, bool accumulate,
		       struct cpu_dnnl_small **ret)
{
	if (M < 1 || K < 1 || N < 1 || M > CPU_DNNL_SMALL_MAX_DIM || K > CPU_DNNL_SMALL_MAX_DIM ||
	    N > CPU_DNNL_SMALL_MAX_DIM || lda < (size_t)K || ldb < (size_t)(b_trans ? K : N) ||
	    ldc < (size_t)N || lda > CPU_DNNL_SMALL_MAX_DIM || ldb > CPU_DNNL_SMALL_MAX_DIM ||
	    ldc > CPU_DNNL_SMALL_MAX_DIM)
		return -EINVAL;
	pthread_once(&g.once, init_once);
	if (g.init_error)
		return g.init_error;

	pthread_mutex_lock(&g.lock);
	int free_slot = -1, victim = -1, r = 0;
	for (int i = 0; i < CACHE_SIZE; i++) {
		struct cpu_dnnl_small *e = g.cache[i];
		if (!e) {
			if (free_slot < 0)
				free_slot = i;
			continue;
		}
		if (e->M == M && e->K == K && e->N == N && e->lda == lda && e->ldb == ldb && e->ldc == ldc &&
		    e->b_trans == b_trans && e->accumulate == accumulate) {
			e->refs++;
			e->used = ++g.clock;
			*ret = e;
			goto unlock;
		}
		if (e->refs == 0 && (victim < 0 || e->used < g.cache[victim]->used))
			victim = i;
	}
	if (free_slot < 0 && victim >= 0) {
		entry_destroy(g.cache[victim]);
		g.cache[victim] = NULL;
		free_slot = victim;
	}
	struct cpu_dnnl_small *p = entry_create(M, K, N, lda, ldb, b_trans, ldc, accumulate, &r);
	if (!p)
		goto unlock;
	p->refs = 1;
	p->used = ++g.clock;
	/* every slot in use: the caller's alone, gone with its put */
	if (free_slot >= 0) {
		p->cached = true;
		g.cache[free_slot] = p;
	}
	*ret = p;
unlock:
	pthread_mutex_unlock(&g.lock);
	return r;
}

void cpu_dnnl_small_put(struct cpu_dnnl_small *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&g.lock);
	bool gone = --p->refs == 0 && !p->cached;
	pthread_mutex_unlock(&g.lock);
	if (gone)
		entry_destroy(p);
}

const char *cpu_dnnl_small_impl(const struct cpu_dnnl_small *p)
{
	return p->impl;
}

int cpu_dnnl_small_run(const struct cpu_dnnl_small *p, int thread, const uint16_t *a, const uint16_t *b,
		       float *c)
{
	if (thread < 0 || thread >= CPU_MAX_THREADS)
		return -EINVAL;
	if (!g.streams[thread] &&
	    dnnl_stream_create(&g.streams[thread], g.engine, dnnl_stream_default_flags) != dnnl_success) {
		g.streams[thread] = NULL;
		return -ENOMEM;
	}
	/* the slot is this thread's alone (see DESIGN), whatever the entry's constness says */
	void **scratch = (void **)&p->scratch[thread];
	if (!*scratch && posix_memalign(scratch, 64, MAX(p->scratch_bytes, 64)) != 0) {
		*scratch = NULL;
		return -ENOMEM;
	}
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
	dnnl_status_t s = dnnl_memory_create(&ma, &p->a_md, g.engine, (void *)a);
	if (s == dnnl_success)
		s = dnnl_memory_create(&mb, &p->b_md, g.engine, (void *)b);
	if (s == dnnl_success)
		s = dnnl_memory_create(&mc, &p->c_md, g.engine, c);
	if (s == dnnl_success)
		s = dnnl_memory_create(&ms, &p->scratch_md, g.engine, *scratch);
	int r = s == dnnl_success ? 0 : -ENOMEM;
	if (r == 0) {
		dnnl_exec_arg_t args[4] = {
			{DNNL_ARG_SRC, ma},
			{DNNL_ARG_WEIGHTS, mb},
			{DNNL_ARG_DST, mc},
			{DNNL_ARG_SCRATCHPAD, ms},
		};
		omp_set_num_threads(1);
		s = dnnl_primitive_execute(p->prim, g.streams[thread], 4, args);
		if (s == dnnl_success)
			s = dnnl_stream_wait(g.streams[thread]);
		r = s == dnnl_success ? 0 : -EIO;
	}
	if (ms)
		dnnl_memory_destroy(ms);
	if (mc)
		dnnl_memory_destroy(mc);
	if (mb)
		dnnl_memory_destroy(mb);
	if (ma)
		dnnl_memory_destroy(ma);
	return r;
}
