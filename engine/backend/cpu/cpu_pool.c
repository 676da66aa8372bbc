/* The process-wide CPU worker pool (see the DESIGN note in cpu.h).
 *
 * DESIGN: `job_lock` serialises whole jobs, inline ones included (they use thread 0's scratch),
 * and scratch reallocation. A job is one descriptor
 * (fn, ctx, base) plus one 64-bit atomic word `claim` = generation:16 | n_tasks:24 | next:24.
 * Anyone (the caller or a worker) takes a task by a CAS that increments `next` while
 * next < n_tasks; because n_tasks and the generation live in the same word, a worker that read a
 * stale word can never claim past the end of a job or into the next one. `pending` counts the
 * tasks not finished yet; the caller returns when it reaches zero and only then may write the
 * next descriptor, so a worker that claimed a task always reads the descriptor of that task.
 * Idle workers are never waited for: on a loaded machine a descheduled worker costs nothing,
 * the caller simply runs the tasks itself.
 * Workers spin briefly for the next job (decode issues hundreds of small jobs per token), then
 * sleep on `wake`; the caller broadcasts only when someone sleeps. The caller likewise spins
 * for the end of its job before it sleeps on `done`, and the last task's finisher signals only
 * when it does: `sleepers` and `caller_waits` change under `lock` but are read without it, each a
 * Dekker pair of seq_cst operations (the sleeper stores its flag and then loads the word it
 * waits on, the other side changes that word and then loads the flag: one of them sees the
 * other), so a job whose threads all spin never takes `lock` and its cache line never moves
 * between cores (holo-bench's back-to-back job of two tasks, AMD EPYC: ~220 -> ~130 ns). The
 * caller publishes a job with task 0 already its own (next = 1) and runs it without a claim.
 */
#include "cpu.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define SPIN_ITERATIONS 2000
#define MAX_JOB_TASKS ((1 << 24) - 1)

struct cpu_pool {
	int n_threads; /* including the caller */
	pthread_t *workers;
	pthread_mutex_t job_lock;
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	_Atomic uint64_t claim;
	atomic_int pending;
	atomic_int sleepers;	  /* changed under lock */
	atomic_bool caller_waits; /* changed under lock */
	bool quit;		  /* under lock */
	cpu_task_fn *fn;
	void *ctx;
	int base;
	void **scratch;
	size_t scratch_bytes;
};

static struct cpu_pool pool = {
	.job_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t parallel_jobs;

static inline uint32_t claim_n(uint64_t v)
{
	return (uint32_t)(v >> 24) & 0xffffffu;
}

static inline uint32_t claim_next(uint64_t v)
{
	return (uint32_t)v & 0xffffffu;
}

static inline bool has_work(uint64_t v)
{
	return claim_next(v) < claim_n(v);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Runs task `task` of the current job (claimed) and counts it done. */
static void run_task(int task, int thread)
{
	pool.fn(pool.ctx, pool.base + task, thread);
	/* the caller spins before it sleeps: the lock (and its cache line) only when it sleeps */
	if (atomic_fetch_sub(&pool.pending, 1) == 1 && atomic_load(&pool.caller_waits)) {
		pthread_mutex_lock(&pool.lock);
		pthread_cond_signal(&pool.done);
		pthread_mutex_unlock(&pool.lock);
	}
}

/* Claims and runs tasks of the current job until none is left. */
static void run_tasks(int thread)
{
	uint64_t v = atomic_load_explicit(&pool.claim, memory_order_acquire);
	while (has_work(v)) {
		if (!atomic_compare_exchange_weak_explicit(&pool.claim, &v, v + 1, memory_order_acquire,
							   memory_order_acquire))
			continue;
		run_task((int)claim_next(v), thread);
		v = atomic_load_explicit(&pool.claim, memory_order_acquire);
	}
}

static void *worker_main(void *p)
{
	int index = (int)(intptr_t)p;
	for (;;) {
		int spins = 0;
		while (!has_work(atomic_load_explicit(&pool.claim, memory_order_acquire)) &&
		       spins++ < SPIN_ITERATIONS)
			cpu_relax();
		if (!has_work(atomic_load_explicit(&pool.claim, memory_order_acquire))) {
			pthread_mutex_lock(&pool.lock);
			pool.sleepers++;
			while (!has_work(atomic_load(&pool.claim)) && !pool.quit)
				pthread_cond_wait(&pool.wake, &pool.lock);
			pool.sleepers--;
			bool quit = pool.quit;
			pthread_mutex_unlock(&pool.lock);
			if (quit)
				return NULL;
		}
		run_tasks(index);
	}
}

static void stop_workers(void)
{
	pthread_mutex_lock(&pool.lock);
	pool.quit = true;
	pthread_cond_broadcast(&pool.wake);
	pthread_mutex_unlock(&pool.lock);
	for (int i = 1; i < pool.n_threads; i++)
		pthread_join(pool.workers[i], NULL);
	free(pool.workers);
	pool.workers = NULL;
	pool.quit = false;
}

/* Starts n-1 workers; no workers may be running and the scratch array must be freed. */
static int start_workers(int n)
{
	pool.workers = calloc((size_t)n, sizeof(*pool.workers));
	pool.scratch = calloc((size_t)n, sizeof(*pool.scratch));
	pool.scratch_bytes = 0;
	if (!pool.workers || !pool.scratch) {
		free(pool.workers);
		free(pool.scratch);
		pool.workers = NULL;
		pool.scratch = NULL;
		return -ENOMEM;
	}
	pool.n_threads = 1;
	for (int i = 1; i < n; i++) {
		int r = pthread_create(&pool.workers[i], NULL, worker_main, (void *)(intptr_t)i);
		if (r != 0) {
			stop_workers();
			free(pool.scratch);
			pool.scratch = NULL;
			return -r;
		}
		pool.n_threads = i + 1;
	}
	return 0;
}

static int default_threads(void)
{
	const char *env = getenv("HOLOD_THREADS");
	if (env && *env) {
		long v = strtol(env, NULL, 10);
		if (v >= 1 && v <= CPU_MAX_THREADS)
			return (int)v;
	}
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n >= 1)
			return MIN(n, CPU_MAX_THREADS);
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n >= 1 ? (int)MIN(n, CPU_MAX_THREADS) : 1;
}

static void free_pool(void)
{
	stop_workers();
	for (int i = 0; i < pool.n_threads; i++)
		free(pool.scratch[i]);
	free(pool.scratch);
	pool.scratch = NULL;
	pool.scratch_bytes = 0;
}

static void pool_init(void)
{
	if (start_workers(default_threads()) < 0 && start_workers(1) < 0)
		abort(); /* a one-slot calloc failed: small-allocation OOM */
	atexit(free_pool);
}

int cpu_threads(void)
{
	pthread_once(&pool_once, pool_init);
	return pool.n_threads;
}

int cpu_set_threads(int n)
{
	if (n < 1 || n > CPU_MAX_THREADS)
		return -EINVAL;
	pthread_once(&pool_once, pool_init);
	pthread_mutex_lock(&pool.job_lock);
	int r = 0;
	if (n != pool.n_threads) {
		free_pool();
		r = start_workers(n);
		if (r < 0 && start_workers(1) < 0)
			abort();
	}
	pthread_mutex_unlock(&pool.job_lock);
	return r;
}

int cpu_reserve_scratch(size_t bytes)
{
	pthread_once(&pool_once, pool_init);
	/* job_lock: buffers are replaced only between jobs; they only ever grow, so a reservation
	 * made by another thread stays satisfied */
	pthread_mutex_lock(&pool.job_lock);
	int r = 0;
	if (bytes > pool.scratch_bytes) {
		bytes = (bytes + 63) & ~(size_t)63;
		for (int i = 0; i < pool.n_threads; i++) {
			void *p = NULL;
			if (posix_memalign(&p, 64, bytes) != 0) {
				r = -ENOMEM;
				goto out;
			}
			free(pool.scratch[i]);
			pool.scratch[i] = p;
		}
		pool.scratch_bytes = bytes;
	}
out:
	pthread_mutex_unlock(&pool.job_lock);
	return r;
}

void *cpu_scratch(int thread)
{
	return pool.scratch[thread];
}

void cpu_parallel_for(int n_tasks, cpu_task_fn *fn, void *ctx)
{
	cpu_parallel_for_work(n_tasks, fn, ctx, CPU_MIN_PARALLEL_WORK);
}

void cpu_parallel_for_work(int n_tasks, cpu_task_fn *fn, void *ctx, double work)
{
	if (n_tasks <= 0)
		return;
	pthread_once(&pool_once, pool_init);
	/* job_lock also for jobs run inline: they use thread 0's scratch, as the caller of a
	 * parallel job does */
	pthread_mutex_lock(&pool.job_lock);
	if (pool.n_threads == 1 || n_tasks == 1 || work < CPU_MIN_PARALLEL_WORK) {
		for (int i = 0; i < n_tasks; i++)
			fn(ctx, i, 0);
		pthread_mutex_unlock(&pool.job_lock);
		return;
	}
	atomic_fetch_add_explicit(&parallel_jobs, 1, memory_order_relaxed);
	for (int base = 0; base < n_tasks; base += MAX_JOB_TASKS) {
		int n = MIN(n_tasks - base, MAX_JOB_TASKS);
		pool.fn = fn;
		pool.ctx = ctx;
		pool.base = base;
		atomic_store_explicit(&pool.pending, n, memory_order_relaxed);
		uint64_t gen = (atomic_load(&pool.claim) >> 48) + 1;
		/* task 0 the caller's as published (next = 1): the workers' claims do not take the
		 * word back and forth with the caller's own */
		atomic_store(&pool.claim, (gen << 48) | ((uint64_t)n << 24) | 1);
		if (atomic_load(&pool.sleepers)) {
			pthread_mutex_lock(&pool.lock);
			pthread_cond_broadcast(&pool.wake);
			pthread_mutex_unlock(&pool.lock);
		}

		run_task(0, 0);
		run_tasks(0);

		int spins = 0;
		while (atomic_load_explicit(&pool.pending, memory_order_acquire) != 0 &&
		       spins++ < SPIN_ITERATIONS)
			cpu_relax();
		if (atomic_load_explicit(&pool.pending, memory_order_acquire) != 0) {
			pthread_mutex_lock(&pool.lock);
			atomic_store(&pool.caller_waits, true);
			while (atomic_load(&pool.pending) != 0)
				pthread_cond_wait(&pool.done, &pool.lock);
			atomic_store(&pool.caller_waits, false);
			pthread_mutex_unlock(&pool.lock);
		}
	}
	pthread_mutex_unlock(&pool.job_lock);
}

uint64_t cpu_parallel_jobs(void)
{
	return atomic_load_explicit(&parallel_jobs, memory_order_relaxed);
}
