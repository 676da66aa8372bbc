/* The process-wide CPU worker pool (see the DESIGN note in cpu.h).
 *
 * DESIGN: `job_lock` serialises whole jobs. A job is published under `lock` by bumping
 * `generation`; workers spin briefly on the generation (decode issues hundreds of small jobs per
 * token, and a futex wake per job would cost more than the job) and then sleep on `wake`. Tasks
 * are claimed with an atomic counter; the last worker to finish signals `done`. Every field a
 * worker reads for a job (fn, ctx, n_tasks) is written before the generation bump under `lock`,
 * and the atomics give the ordering the spinning path needs.
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

struct cpu_pool {
	int n_threads; /* including the caller */
	pthread_t *workers;
	pthread_mutex_t job_lock;
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	atomic_uint generation;
	unsigned start_generation; /* generation when the workers were started */
	atomic_int next_task;
	atomic_int running; /* workers still inside the current job */
	cpu_task_fn *fn;
	void *ctx;
	int n_tasks;
	bool quit;
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

static void run_tasks(int thread)
{
	for (;;) {
		int i = atomic_fetch_add_explicit(&pool.next_task, 1, memory_order_relaxed);
		if (i >= pool.n_tasks)
			break;
		pool.fn(pool.ctx, i, thread);
	}
}

static void *worker_main(void *p)
{
	int index = (int)(intptr_t)p;
	/* not the current generation: a job may already have been posted since pthread_create */
	unsigned seen = pool.start_generation;

	for (;;) {
		unsigned gen;
		int spins = 0;
		while ((gen = atomic_load_explicit(&pool.generation, memory_order_acquire)) == seen &&
		       spins < 20000) {
			spins++;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
		if (gen == seen) {
			pthread_mutex_lock(&pool.lock);
			while ((gen = atomic_load(&pool.generation)) == seen && !pool.quit)
				pthread_cond_wait(&pool.wake, &pool.lock);
			bool quit = pool.quit;
			pthread_mutex_unlock(&pool.lock);
			if (quit)
				return NULL;
		}
		seen = gen;
		run_tasks(index);
		if (atomic_fetch_sub_explicit(&pool.running, 1, memory_order_acq_rel) == 1) {
			pthread_mutex_lock(&pool.lock);
			pthread_cond_signal(&pool.done);
			pthread_mutex_unlock(&pool.lock);
		}
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
	pool.start_generation = atomic_load(&pool.generation);
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
	if (pool.n_threads == 1 || n_tasks == 1 || work < CPU_MIN_PARALLEL_WORK) {
		for (int i = 0; i < n_tasks; i++)
			fn(ctx, i, 0);
		return;
	}
	pthread_mutex_lock(&pool.job_lock);
	pthread_mutex_lock(&pool.lock);
	pool.fn = fn;
	pool.ctx = ctx;
	pool.n_tasks = n_tasks;
	atomic_store(&pool.next_task, 0);
	atomic_store(&pool.running, pool.n_threads - 1);
	atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
	pthread_cond_broadcast(&pool.wake);
	pthread_mutex_unlock(&pool.lock);

	run_tasks(0);

	if (atomic_load_explicit(&pool.running, memory_order_acquire) != 0) {
		int spins = 0;
		while (atomic_load_explicit(&pool.running, memory_order_acquire) != 0 && spins < 200000) {
			spins++;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
		pthread_mutex_lock(&pool.lock);
		while (atomic_load(&pool.running) != 0)
			pthread_cond_wait(&pool.done, &pool.lock);
		pthread_mutex_unlock(&pool.lock);
	}
	pthread_mutex_unlock(&pool.job_lock);
}
