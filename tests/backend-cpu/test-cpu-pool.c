/* The CPU worker pool (engine/backend/cpu/cpu_pool.c) through every way a job can end: every
 * task of every job runs exactly once, on a thread index below cpu_threads(), and the caller
 * returns only after the last one finished, whether
 *   - the threads all spin (back-to-back jobs of short tasks: the pool's lock is never taken);
 *   - the caller sleeps on `done` (a worker's task outlasts the caller's spin) and the worker
 *     that finishes last must wake it;
 *   - the workers sleep on `wake` between jobs (a pause longer than their spin) and the caller
 *     must wake them, or runs every task itself;
 *   - the caller's own task (task 0, published as taken) is the long one;
 * with 2, 3 and 4 threads and 1 to 9 tasks a job. A lost wakeup hangs the test (meson's timeout
 * fails it); a task run twice, skipped or run after the caller returned fails a check. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cpu.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

#define MAX_TASKS 9

struct job {
	atomic_int runs[MAX_TASKS];
	atomic_int bad_thread;
	int long_task; /* the task that spins for long_ns, or -1 */
	long long long_ns;
};

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static void spin_ns(long long ns)
{
	long long t0 = now_ns();
	while (now_ns() - t0 < ns)
		;
}

static void task(void *ctx, int i, int thread)
{
	struct job *j = ctx;
	if (thread < 0 || thread >= cpu_threads())
		atomic_fetch_add(&j->bad_thread, 1);
	if (i == j->long_task)
		spin_ns(j->long_ns);
	atomic_fetch_add(&j->runs[i], 1);
}

static uint64_t rng = 12345;

static unsigned rnd(unsigned n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(rng >> 33) % n;
}

/* `jobs` jobs of random task counts; long_every: every that many jobs one task spins for
 * long_ns (a worker's or the caller's), pause_ns: the idle time between jobs */
static void run(int jobs, int long_every, long long long_ns, long long pause_ns)
{
	for (int k = 0; k < jobs; k++) {
		struct job j;
		memset(&j, 0, sizeof(j));
		int n = 1 + (int)rnd(MAX_TASKS);
		j.long_task = long_every && k % long_every == 0 ? (int)rnd((unsigned)n) : -1;
		j.long_ns = long_ns;
		/* above CPU_MIN_PARALLEL_WORK: a pool job, not run inline */
		cpu_parallel_for_work(n, task, &j, 1e12);
		bool once = true;
		for (int i = 0; i < MAX_TASKS; i++)
			once &= atomic_load(&j.runs[i]) == (i < n);
		CHECK(once);
		CHECK_INT_EQ(atomic_load(&j.bad_thread), 0);
		if (!once) {
			fprintf(stderr, "job %d of %d tasks (long task %d): a task ran other than once\n", k,
				n, j.long_task);
			return;
		}
		if (pause_ns)
			spin_ns(pause_ns);
	}
}

int main(void)
{
	for (int threads = 2; threads <= 4; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		CHECK_INT_EQ(cpu_threads(), threads);
		/* everyone spinning */
		run(20000, 0, 0, 0);
		/* a long task (2 ms: far past any spin) in every fourth job: the caller sleeps when a
		 * worker holds it, the workers when the caller does */
		run(200, 4, 2000000, 0);
		/* the workers asleep between jobs (5 ms pauses), short and long tasks */
		run(40, 2, 1000000, 5000000);
		/* mixed: short pauses around the spin limit */
		run(2000, 7, 100000, 20000);
	}
	REQUIRE(cpu_set_threads(2) == 0);
	return test_exit();
}
