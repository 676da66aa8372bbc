/* The CUDA emulation's scheduler: CUDA threads as fibers, barriers, warp collectives.
 *
 * DESIGN (threads): kernels never run on the caller's thread. gpu_emu_run_grid() hands the grid to
 * one emulation thread (started on first use, one per process) and waits for it, holding a lock so
 * that one grid runs at a time, whichever host thread launched it. On the emulation thread every
 * CUDA thread of the running block is a fiber with its own mmap'ed stack (guard page below); the
 * blocks of the grid run one after another. All the state below belongs to the emulation thread,
 * except the hand-off fields, which are guarded by job_mutex.
 *
 * Why the emulation thread: static __shared__ variables are thread_local (gpu_emu.h), so they live
 * in this executable's TLS block; on a thread that only runs kernels that whole block can be
 * poisoned at every block start, template instantiations included, without touching the TLS of
 * the threads that run the rest of the program.
 *
 * Context switch: Boost.Context's fcontext (Debian libboost-context-dev): a register-only switch,
 * with no signal-mask system call as in swapcontext (gpu-testing.md: about 1 us per switch there).
 * test-emu-sched prints the measured cost of resuming a thread (one switch, barrier bookkeeping
 * included): 111 ns in a release build on the 2-core CI machine at load 6.5 (268 ns when each
 * resumption went through the scheduler, two switches), about 270 ns under ASan. Under
 * AddressSanitizer every switch is announced with __sanitizer_start_switch_fiber /
 * __sanitizer_finish_switch_fiber so ASan knows which stack runs.
 *
 * Scheduling: a pass resumes every runnable fiber once, in the configured order (forward,
 * reverse, or a seeded shuffle per pass); a fiber runs until it waits in a collective or exits.
 * A collective completes when its last participant arrives, which makes all participants runnable
 * again. A pass that resumes nobody while threads are alive is a deadlock. A fiber that stops
 * switches straight to the next runnable fiber of the pass, and only the pass's last one back to
 * the scheduler: one switch per resumption instead of two through the scheduler, in the same order.
 *
 * Warp collectives: each warp keeps the set of its lanes that wait in one (a bitmask), so an
 * arriving lane learns in O(1) whether every lane of its mask is there; only then (the last
 * arrival) are the lanes' masks and kinds compared and the values exchanged, in one O(32) pass.
 * The kernels reduce through warp shuffles everywhere, so this is the emulation's hottest path.
 */
#include "emu_internal.h"

#include <boost/context/detail/fcontext.hpp>

#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

using boost::context::detail::fcontext_t;
using boost::context::detail::jump_fcontext;
using boost::context::detail::make_fcontext;
using boost::context::detail::transfer_t;

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/* Fiber stacks are reserved, not committed: untouched pages cost nothing. ASan's redzones make
 * frames several times larger. HOLOD_GPU_EMU_STACK overrides the size (read once, when the
 * emulation thread starts). */
static const size_t STACK_DEFAULT = EMU_ASAN ? (size_t)1 << 20 : (size_t)256 << 10;
static const size_t STACK_MIN = 16 << 10, STACK_MAX = (size_t)64 << 20;
static size_t STACK_SIZE;
static size_t page_size;

enum fiber_state { FIBER_RUNNABLE, FIBER_BARRIER, FIBER_WARP, FIBER_ACTIVEMASK, FIBER_DONE };

struct fiber {
	fcontext_t ctx;
	char *stack; /* lowest usable byte, above the guard page */
	uint3 tid;
	int linear; /* x + y * blockDim.x + z * blockDim.x * blockDim.y */
	enum fiber_state state;
	const char *file; /* where it waits */
	int line;
	/* the pending warp collective */
	enum gpu_emu_warp_kind kind;
	unsigned mask;
	uint64_t value;
	int arg, width;
	uint64_t result;
	void *fake_stack; /* ASan's, while switched out */
};

static struct {
	/* hand-off from the launching thread (job_mutex) */
	pthread_mutex_t job_mutex;
	pthread_cond_t job_cv, done_cv;
	bool job_pending, job_done;
	pid_t worker_pid;
	const struct gpu_emu_kernel_call *call;
	dim3 grid, block;
	size_t smem;

	/* emulation thread only */
	unsigned char *tls_begin, *tls_end;
	struct fiber *fibers;
	/* per warp of the block: the lanes in FIBER_WARP (bit l: lane l) */
	unsigned *warp_waiting;
	int fiber_cap, nthreads;
	int *perm;
	int pass_next; /* the pass's next position in perm */
	fcontext_t sched_ctx;
	struct fiber *cur;
	int live;
	int activemask_waiting; /* fibers in FIBER_ACTIVEMASK */
	int bar_arrived, bar_count;
	const char *bar_file;
	int bar_line;
	struct fiber *bar_first;
	void *dyn_smem; /* the running launch's dynamic shared memory, inside dyn_block */
	void *dyn_block;
	uint64_t rng;
	const void *sched_stack_bottom;
	size_t sched_stack_size;
	void *sched_fake_stack;

	enum gpu_emu_order order;
	unsigned long long seed;
	bool order_set;
} emu; /* the hand-off primitives are initialised when the emulation thread starts */

static pthread_mutex_t grid_lock = PTHREAD_MUTEX_INITIALIZER;

/* Locates this executable's TLS block (where static __shared__ variables live). */
static thread_local unsigned char tls_marker;

static void wmma_report_layout(void);

void gpu_emu_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("gpu-emu: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	wmma_report_layout();
	fflush(stderr);
	abort();
}

/* ---- order ---------------------------------------------------------------------------------- */

static void order_from_env(void)
{
	if (emu.order_set)
		return;
	emu.order_set = true;
	emu.order = GPU_EMU_ORDER_FORWARD;
	emu.seed = 1;
	const char *s = getenv("HOLOD_GPU_EMU_ORDER");
	if (!s || !*s || !strcmp(s, "forward"))
		return;
	if (!strcmp(s, "reverse")) {
		emu.order = GPU_EMU_ORDER_REVERSE;
		return;
	}
	if (!strncmp(s, "random", 6) && (s[6] == 0 || s[6] == ':')) {
		emu.order = GPU_EMU_ORDER_RANDOM;
		if (s[6] == ':') {
			char *end;
			errno = 0;
			emu.seed = strtoull(s + 7, &end, 0);
			if (errno || end == s + 7 || *end)
				gpu_emu_die("HOLOD_GPU_EMU_ORDER=%s: the seed must be a number", s);
		}
		return;
	}
	gpu_emu_die("HOLOD_GPU_EMU_ORDER=%s: expected forward, reverse or random[:SEED]", s);
}

void gpu_emu_set_order(enum gpu_emu_order order, unsigned long long seed)
{
	pthread_mutex_lock(&grid_lock);
	emu.order_set = true;
	emu.order = order;
	emu.seed = seed;
	pthread_mutex_unlock(&grid_lock);
}

enum gpu_emu_order gpu_emu_get_order(void)
{
	pthread_mutex_lock(&grid_lock);
	order_from_env();
	enum gpu_emu_order o = emu.order;
	pthread_mutex_unlock(&grid_lock);
	return o;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_next(void)
{
	return splitmix64(&emu.rng);
}

/* ---- WMMA fragment layouts ------------------------------------------------------------------
 * One per fragment type (gpu_emu.h: use x element type x layout, 27 indices), drawn on the type's
 * first use: identity, or a shuffle of its 32 * per_lane slots seeded by the run's seed and the
 * type, slot s holding element (its shuffled value) mod 256, so that with 16 per lane every
 * element sits in two slots. The choice is read with grid_lock held (gpu_emu_set_wmma_layout, or
 * the emulation thread while the launching thread holds it). */
enum { WMMA_TYPES = 27 };
static struct {
	bool set, random;
	unsigned long long seed;
	const char *origin;	  /* where the seed came from, for the failure report */
	int per_lane[WMMA_TYPES]; /* 0: not drawn yet */
	struct gpu_emu_wmma_map maps[WMMA_TYPES];
} wmma;
/* a random layout was used: a failing process says which (read at exit on any thread) */
static std::atomic<bool> wmma_random_used{false};
static std::atomic<unsigned long long> wmma_used_seed{0};

static void wmma_report_layout(void)
{
	if (wmma_random_used.load())
		fprintf(stderr,
			"gpu-emu: this run drew its WMMA fragment layouts (which element each lane's x[i] "
			"holds) "
			"from seed %llu: HOLOD_GPU_EMU_WMMA_LAYOUT=random:%llu repeats them\n",
			wmma_used_seed.load(), wmma_used_seed.load());
}

static void wmma_report_on_exit(int status, void *arg)
{
	(void)arg;
	if (status != 0)
		wmma_report_layout();
}

#if EMU_ASAN
static void wmma_report_on_asan_death(void)
{
	wmma_report_layout();
}
#endif

static void wmma_config(void)
{
	if (wmma.set)
		return;
	wmma.set = true;
	wmma.random = true;
	const char *s = getenv("HOLOD_GPU_EMU_WMMA_LAYOUT");
	if (s && !strcmp(s, "identity")) {
		wmma.random = false;
		return;
	}
	if (s && !strncmp(s, "random:", 7)) {
		char *end;
		errno = 0;
		wmma.seed = strtoull(s + 7, &end, 0);
		if (errno || end == s + 7 || *end)
			gpu_emu_die("HOLOD_GPU_EMU_WMMA_LAYOUT=%s: the seed must be a number", s);
		return;
	}
	if (s && *s && strcmp(s, "random"))
		gpu_emu_die("HOLOD_GPU_EMU_WMMA_LAYOUT=%s: expected identity or random[:SEED]", s);
	order_from_env();
	if (emu.order == GPU_EMU_ORDER_RANDOM) {
		wmma.seed = emu.seed;
		return;
	}
	/* a seed of this run's own */
	uint64_t r;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20 ^ (uint64_t)getpid() << 40;
	}
	wmma.seed = r;
}

void gpu_emu_set_wmma_layout(enum gpu_emu_wmma_layout_kind layout, unsigned long long seed)
{
	pthread_mutex_lock(&grid_lock);
	wmma.set = true;
	wmma.random = layout == GPU_EMU_WMMA_RANDOM;
	wmma.seed = seed;
	memset(wmma.per_lane, 0, sizeof(wmma.per_lane));
	pthread_mutex_unlock(&grid_lock);
}

const struct gpu_emu_wmma_map *gpu_emu_wmma_layout(int type, int per_lane)
{
	if (type < 0 || type >= WMMA_TYPES || (per_lane != 8 && per_lane != 16))
		gpu_emu_die("WMMA fragment type %d with %d elements per lane: no such layout", type, per_lane);
	struct gpu_emu_wmma_map *m = &wmma.maps[type];
	if (wmma.per_lane[type] == per_lane)
		return m;
	wmma_config();
	int n = 32 * per_lane;
	uint16_t v[512];
	for (int i = 0; i < n; i++)
		v[i] = (uint16_t)i;
	if (wmma.random) {
		uint64_t st = wmma.seed ^ (uint64_t)(type + 1) * 0xd1b54a32d192ed03ull;
		for (int i = n - 1; i > 0; i--) {
			int j = (int)(splitmix64(&st) % (uint64_t)(i + 1));
			uint16_t t = v[i];
			v[i] = v[j];
			v[j] = t;
		}
		if (!wmma_random_used.exchange(true)) {
			on_exit(wmma_report_on_exit, nullptr);
#if EMU_ASAN
			__sanitizer_set_death_callback(wmma_report_on_asan_death);
#endif
		}
		wmma_used_seed.store(wmma.seed);
	}
	for (int e = 0; e < 256; e++)
		m->slot[e] = 0xffff;
	for (int i = 0; i < n; i++) {
		m->element[i] = v[i] % 256;
		if (m->slot[m->element[i]] == 0xffff)
			m->slot[m->element[i]] = (uint16_t)i;
	}
	wmma.per_lane[type] = per_lane;
	return m;
}

/* ---- messages ------------------------------------------------------------------------------- */

/* The kernel's name: the launch text up to its first top-level comma. */
static void kernel_name(char *buf, size_t size)
{
	const char *t = emu.call->text;
	int depth = 0;
	size_t n = 0;
	for (; *t && n + 1 < size; t++) {
		if (*t == '<' || *t == '(')
			depth++;
		else if (*t == '>' || *t == ')')
			depth--;
		else if (*t == ',' && depth <= 0)
			break;
		buf[n++] = *t;
	}
	buf[n] = 0;
}

#define WHERE_FMT "kernel %s (launched at %s:%d), block (%u,%u,%u)"
#define WHERE_ARGS(name) name, emu.call->file, emu.call->line, blockIdx.x, blockIdx.y, blockIdx.z

static const char *warp_kind_name(enum gpu_emu_warp_kind k)
{
	switch (k) {
	case GPU_EMU_WARP_SYNC:
		return "__syncwarp";
	case GPU_EMU_WARP_SHFL:
		return "__shfl_sync";
	case GPU_EMU_WARP_SHFL_UP:
		return "__shfl_up_sync";
	case GPU_EMU_WARP_SHFL_DOWN:
		return "__shfl_down_sync";
	case GPU_EMU_WARP_SHFL_XOR:
		return "__shfl_xor_sync";
	case GPU_EMU_WARP_BALLOT:
		return "__ballot_sync";
	case GPU_EMU_WARP_ANY:
		return "__any_sync";
	case GPU_EMU_WARP_ALL:
		return "__all_sync";
	case GPU_EMU_WARP_WMMA:
		return "a wmma::*_sync call";
	}
	return "a warp collective";
}

[[noreturn]] static void report_deadlock(void)
{
	char name[256];
	kernel_name(name, sizeof(name));
	fprintf(stderr, "gpu-emu: deadlock in " WHERE_FMT ": no thread can run\n", WHERE_ARGS(name));
	/* One line per distinct wait (state, site, collective, mask). */
	int done = 0;
	bool *seen = (bool *)calloc((size_t)emu.nthreads, 1);
	for (int i = 0; i < emu.nthreads; i++) {
		struct fiber *f = &emu.fibers[i];
		if (f->state == FIBER_DONE) {
			done++;
			continue;
		}
		if (seen && seen[i])
			continue;
		int count = 0;
		for (int j = i; j < emu.nthreads; j++) {
			struct fiber *g = &emu.fibers[j];
			if (g->state == f->state && g->line == f->line && !strcmp(g->file, f->file) &&
			    (f->state != FIBER_WARP || (g->kind == f->kind && g->mask == f->mask))) {
				count++;
				if (seen)
					seen[j] = true;
			}
		}
		if (f->state == FIBER_BARRIER)
			fprintf(stderr,
				"gpu-emu:   %d thread(s) wait in __syncthreads at %s:%d (first: thread "
				"(%u,%u,%u))\n",
				count, f->file, f->line, f->tid.x, f->tid.y, f->tid.z);
		else
			fprintf(stderr,
				"gpu-emu:   %d lane(s) of warp %d wait in %s at %s:%d with mask 0x%08x "
				"(first: thread (%u,%u,%u))\n",
				count, f->linear / 32, warp_kind_name(f->kind), f->file, f->line, f->mask,
				f->tid.x, f->tid.y, f->tid.z);
	}
	free(seen);
	gpu_emu_die(
		"  %d of %d thread(s) have exited; a barrier or a warp collective waits for a thread that "
		"never arrives",
		done, emu.nthreads);
}

/* ---- fibers --------------------------------------------------------------------------------- */

/* The next fiber of the pass that can run, or null at the pass's end. */
static struct fiber *next_runnable(void)
{
	while (emu.pass_next < emu.nthreads) {
		struct fiber *g = &emu.fibers[emu.perm[emu.pass_next++]];
		if (g->state == FIBER_RUNNABLE)
			return g;
	}
	return nullptr;
}

/* Back on a fiber or the scheduler after a switch. jump_fcontext hands over the context the
 * sender left, with the slot to keep it in (null: the sender exited). */
static void switched_in(transfer_t t, void *fake_stack)
{
#if EMU_ASAN
	const void *from_bottom; /* the stack the switch came from */
	size_t from_size;
	__sanitizer_finish_switch_fiber(fake_stack, &from_bottom, &from_size);
	if (t.data == &emu.sched_ctx) {
		emu.sched_stack_bottom = from_bottom;
		emu.sched_stack_size = from_size;
	}
#else
	(void)fake_stack;
#endif
	if (t.data)
		*(fcontext_t *)t.data = t.fctx;
}

/* Makes `to` (the scheduler when null) the running context and jumps to it, handing over
 * `slot` for the context left behind (null when that context has exited). */
static transfer_t jump_to(struct fiber *to, fcontext_t *slot, void **fake_stack_save)
{
	fcontext_t target = emu.sched_ctx;
	emu.cur = to;
	if (to) {
		threadIdx = to->tid;
		target = to->ctx;
	}
#if EMU_ASAN
	if (to)
		__sanitizer_start_switch_fiber(fake_stack_save, to->stack, STACK_SIZE);
	else
		__sanitizer_start_switch_fiber(fake_stack_save, emu.sched_stack_bottom, emu.sched_stack_size);
#else
	(void)fake_stack_save;
#endif
	return jump_fcontext(target, slot);
}

/* Leaves `from` (the scheduler when null) for `to` (the scheduler when null); returns when a later
 * switch comes back to `from`. */
static void switch_to(struct fiber *from, struct fiber *to)
{
	transfer_t t = from ? jump_to(to, &from->ctx, &from->fake_stack) :
			      jump_to(to, &emu.sched_ctx, &emu.sched_fake_stack);
	switched_in(t, from ? from->fake_stack : emu.sched_fake_stack);
}

/* The running fiber waits: the pass goes on with the next runnable fiber. */
static void yield_to_next(void)
{
	struct fiber *f = emu.cur;
	switch_to(f, next_runnable());
}

/* __activemask() waits until no lane of its warp can run any more (each has exited, waits in a
 * collective, or waits here); then the lanes waiting at the same call site form the mask. This is
 * what a SIMT warp reports for the lanes that reached that point together, and it does not depend
 * on the thread order. Called whenever a fiber of warp `base` stops being runnable. */
static void resolve_activemask(int base)
{
	if (!emu.activemask_waiting)
		return;
	int end = base + 32 < emu.nthreads ? base + 32 : emu.nthreads;
	for (int i = base; i < end; i++)
		if (emu.fibers[i].state == FIBER_RUNNABLE)
			return;
	for (int i = base; i < end; i++) {
		struct fiber *f = &emu.fibers[i];
		if (f->state != FIBER_ACTIVEMASK)
			continue;
		unsigned m = 0;
		for (int j = base; j < end; j++) {
			struct fiber *g = &emu.fibers[j];
			if (g->state == FIBER_ACTIVEMASK && g->line == f->line && !strcmp(g->file, f->file))
				m |= 1u << (j - base);
		}
		for (int j = base; j < end; j++)
			if (m >> (j - base) & 1u) {
				emu.fibers[j].result = m;
				emu.fibers[j].state = FIBER_RUNNABLE;
				emu.activemask_waiting--;
			}
	}
}

static void release_barrier(void)
{
	uint64_t r = (uint64_t)(unsigned)emu.bar_count | (uint64_t)(unsigned)emu.bar_arrived << 32;
	for (int i = 0; i < emu.nthreads; i++) {
		struct fiber *f = &emu.fibers[i];
		if (f->state == FIBER_BARRIER) {
			f->state = FIBER_RUNNABLE;
			f->result = r;
		}
	}
	emu.bar_arrived = 0;
	emu.bar_count = 0;
}

static void fiber_main(transfer_t t)
{
	switched_in(t, nullptr); /* a new fiber has no fake stack yet */
	struct fiber *f = emu.cur;
	emu.call->run(emu.call->args);
	f->state = FIBER_DONE;
	emu.live--;
	/* Exited threads no longer count towards a barrier (as on sm_70+). */
	if (emu.bar_arrived > 0 && emu.bar_arrived == emu.live)
		release_barrier();
	resolve_activemask(f->linear & ~31);
	/* Straight to the jump: a frame left on this stack with an address-taken local would keep its
	 * ASan redzones poisoned under the next block's thread that runs on the stack. */
	jump_to(next_runnable(), nullptr, nullptr);
	abort(); /* a finished fiber is never resumed */
}

static void ensure_fibers(int n)
{
	if (n <= emu.fiber_cap)
		return;
	struct fiber *nf = (struct fiber *)realloc(emu.fibers, sizeof(*nf) * (size_t)n);
	if (nf)
		emu.fibers = nf;
	int *np = (int *)realloc(emu.perm, sizeof(*np) * (size_t)n);
	if (np)
		emu.perm = np;
	unsigned *nw = (unsigned *)realloc(emu.warp_waiting, sizeof(*nw) * (size_t)((n + 31) / 32));
	if (nw)
		emu.warp_waiting = nw;
	if (!nf || !np || !nw)
		gpu_emu_die("out of memory for %d fibers", n);
	size_t page = page_size;
	for (int i = emu.fiber_cap; i < n; i++) {
		void *m = mmap(nullptr, STACK_SIZE + page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
		if (m == MAP_FAILED)
			gpu_emu_die("cannot map a %zu-byte fiber stack: %s", STACK_SIZE, strerror(errno));
		/* The guard page: a thread that overflows its stack faults instead of writing into
		 * its neighbour's. */
		if (mprotect(m, page, PROT_NONE) < 0)
			gpu_emu_die("cannot protect a fiber stack's guard page: %s", strerror(errno));
		memset(&emu.fibers[i], 0, sizeof(emu.fibers[i]));
		emu.fibers[i].stack = (char *)m + page;
	}
	emu.fiber_cap = n;
}

/* ---- collectives (called on fibers) --------------------------------------------------------- */

[[noreturn]] __attribute__((noinline, cold)) static void die_divergent(const struct fiber *f,
								       const char *file, int line)
{
	char name[256];
	kernel_name(name, sizeof(name));
	const struct fiber *g = emu.bar_first;
	gpu_emu_die("divergent __syncthreads in " WHERE_FMT
		    ": thread (%u,%u,%u) waits at %s:%d while thread (%u,%u,%u) "
		    "reached %s:%d",
		    WHERE_ARGS(name), g->tid.x, g->tid.y, g->tid.z, emu.bar_file, emu.bar_line, f->tid.x,
		    f->tid.y, f->tid.z, file, line);
}

int gpu_emu_syncthreads(enum gpu_emu_bar_kind kind, int pred, const char *file, int line)
{
	struct fiber *f = emu.cur;
	if (!f)
		gpu_emu_die("%s:%d: __syncthreads outside a kernel", file, line);
	if (emu.bar_arrived == 0) {
		emu.bar_file = file;
		emu.bar_line = line;
		emu.bar_first = f;
	} else if (line != emu.bar_line || (file != emu.bar_file && strcmp(file, emu.bar_file))) {
		die_divergent(f, file, line);
	}
	emu.bar_arrived++;
	emu.bar_count += pred != 0;
	f->state = FIBER_BARRIER;
	f->file = file;
	f->line = line;
	if (emu.bar_arrived == emu.live)
		release_barrier();
	resolve_activemask(f->linear & ~31);
	yield_to_next();
	unsigned count = (unsigned)f->result, arrived = (unsigned)(f->result >> 32);
	switch (kind) {
	case GPU_EMU_BAR_SYNC:
		return 0;
	case GPU_EMU_BAR_COUNT:
		return (int)count;
	case GPU_EMU_BAR_AND:
		return count == arrived;
	case GPU_EMU_BAR_OR:
		return count > 0;
	}
	return 0;
}

/* A WMMA collective of the whole warp is complete: for mma_sync (every lane's value is its
 * operands) the product is computed now, while every lane waits. Lanes that meet in different
 * wmma calls (an mma_sync against a load or store) abort naming both. */
[[noreturn]] __attribute__((noinline, cold)) static void die_wmma_mismatch(const struct fiber *lanes, int l)
{
	char name[256];
	kernel_name(name, sizeof(name));
	gpu_emu_die("mismatched wmma calls in " WHERE_FMT
		    ": lane 0 is in %s at %s:%d while lane %d is in %s at %s:%d",
		    WHERE_ARGS(name), lanes[0].value ? "mma_sync" : "a load or store", lanes[0].file,
		    lanes[0].line, l, lanes[l].value ? "mma_sync" : "a load or store", lanes[l].file,
		    lanes[l].line);
}

static void wmma_complete(const struct fiber *lanes)
{
	const struct gpu_emu_mma_operands *peers[32];
	for (int l = 0; l < 32; l++) {
		peers[l] = (const struct gpu_emu_mma_operands *)(uintptr_t)lanes[l].value;
		if (!peers[l] != !peers[0] || (peers[l] && peers[l]->compute != peers[0]->compute))
			die_wmma_mismatch(lanes, l);
	}
	if (peers[0])
		peers[0]->compute(peers);
}

/* Gives every lane of `mask` its result and makes it runnable: one pass over the mask's lanes (two
 * for a vote). Lanes only write their results, so a shuffle reads its source's value in place. */
static void complete_warp(int base, unsigned mask, enum gpu_emu_warp_kind kind)
{
	struct fiber *lanes = &emu.fibers[base];
	if (kind < GPU_EMU_WARP_SHFL || kind > GPU_EMU_WARP_SHFL_XOR) {
		unsigned ballot = 0;
		if (kind != GPU_EMU_WARP_SYNC && kind != GPU_EMU_WARP_WMMA)
			for (unsigned m = mask; m; m &= m - 1) {
				int l = __builtin_ctz(m);
				if (lanes[l].value)
					ballot |= 1u << l;
			}
		uint64_t r = kind == GPU_EMU_WARP_BALLOT ? ballot :
			     kind == GPU_EMU_WARP_ANY	 ? ballot != 0 :
			     kind == GPU_EMU_WARP_ALL	 ? ballot == mask :
							   0;
		if (kind == GPU_EMU_WARP_WMMA && mask == 0xffffffffu)
			wmma_complete(lanes);
		for (unsigned m = mask; m; m &= m - 1) {
			struct fiber *g = &lanes[__builtin_ctz(m)];
			g->result = r;
			g->state = FIBER_RUNNABLE;
		}
	} else {
		for (unsigned m = mask; m; m &= m - 1) {
			int l = __builtin_ctz(m);
			struct fiber *g = &lanes[l];
			int w = g->width, seg = l & ~(w - 1), src = l;
			switch (kind) {
			case GPU_EMU_WARP_SHFL:
				src = seg + (g->arg & (w - 1));
				break;
			case GPU_EMU_WARP_SHFL_UP:
				if ((l & (w - 1)) >= g->arg)
					src = l - g->arg;
				break;
			case GPU_EMU_WARP_SHFL_DOWN:
				if ((l & (w - 1)) + g->arg < w)
					src = l + g->arg;
				break;
			case GPU_EMU_WARP_SHFL_XOR:
				/* As PTX shfl.bfly: a lane of an earlier segment may be read, a later one
				 * gives the caller's own value (CUDA programming guide, __shfl_xor_sync). */
				src = l ^ (g->arg & 31);
				if (src > (seg | (w - 1)))
					src = l;
				break;
			default:
				break;
			}
			/* A source lane outside the mask is undefined on the GPU: all-ones bytes (NaN
			 * for floating types) make that visible. */
			g->result = (mask >> src & 1u) ? lanes[src].value : ~(uint64_t)0;
			g->state = FIBER_RUNNABLE;
		}
	}
	emu.warp_waiting[base / 32] &= ~mask;
}

/* The error paths of the collectives, out of line: a local name buffer in the hot functions costs
 * an ASan frame setup on every call. */
[[noreturn]] __attribute__((noinline, cold)) static void die_warp(const struct fiber *f,
								  enum gpu_emu_warp_kind kind,
								  const char *file, int line,
								  const char *what, unsigned mask, int width)
{
	char name[256];
	kernel_name(name, sizeof(name));
	if (!strcmp(what, "mask"))
		gpu_emu_die("%s:%d: %s in " WHERE_FMT
			    ": lane %d of warp %d passes mask 0x%08x, which does not name it",
			    file, line, warp_kind_name(kind), WHERE_ARGS(name), f->linear & 31,
			    f->linear / 32, mask);
	gpu_emu_die("%s:%d: %s in " WHERE_FMT ": width %d is not a power of two from 1 to 32", file, line,
		    warp_kind_name(kind), WHERE_ARGS(name), width);
}

[[noreturn]] __attribute__((noinline, cold)) static void die_mismatch(const struct fiber *f,
								      const struct fiber *g, int l)
{
	char name[256];
	kernel_name(name, sizeof(name));
	gpu_emu_die("mismatched warp collectives in " WHERE_FMT
		    ": lane %d calls %s at %s:%d while lane %d calls %s at "
		    "%s:%d with the same mask 0x%08x",
		    WHERE_ARGS(name), l, warp_kind_name(g->kind), g->file, g->line, f->linear & 31,
		    warp_kind_name(f->kind), f->file, f->line, f->mask);
}

/* Whether the collective that `f`, the last lane of `mask` to arrive, waits in can complete: every
 * lane of the mask waits with the same mask (the caller knows they all wait). A lane of the mask
 * that waits with another mask means the lanes disagree on the mask: the collective never
 * completes, which the scheduler reports as a deadlock listing both masks. */
static bool warp_ready(const struct fiber *f, int base, unsigned mask, enum gpu_emu_warp_kind kind)
{
	for (unsigned m = mask; m; m &= m - 1) {
		int l = __builtin_ctz(m);
		const struct fiber *g = &emu.fibers[base + l];
		if (g->mask != mask)
			return false;
		if (g->kind != kind)
			die_mismatch(f, g, l);
	}
	return true;
}

uint64_t gpu_emu_warp(enum gpu_emu_warp_kind kind, unsigned mask, uint64_t value, int arg, int width,
		      const char *file, int line)
{
	struct fiber *f = emu.cur;
	if (!f)
		gpu_emu_die("%s:%d: %s outside a kernel", file, line, warp_kind_name(kind));
	int lane = f->linear & 31, base = f->linear - lane;
	if (!(mask >> lane & 1u))
		die_warp(f, kind, file, line, "mask", mask, width);
	if (width == 0)
		width = 32;
	if (width < 1 || width > 32 || (width & (width - 1)))
		die_warp(f, kind, file, line, "width", mask, width);
	f->state = FIBER_WARP;
	f->file = file;
	f->line = line;
	f->kind = kind;
	f->mask = mask;
	f->value = value;
	f->arg = arg;
	f->width = width;
	/* A lane of the mask past the block's last thread never arrives, so its bit never joins
	 * the set: the collective never completes and is reported as a deadlock. */
	unsigned *waiting = &emu.warp_waiting[base / 32];
	unsigned before = *waiting & mask;
	*waiting |= 1u << lane;
	if (before) {
		/* A lane joining a collective of another kind with the same mask is reported at once,
		 * against the lowest lane already waiting; warp_ready() compares every lane. */
		int l = __builtin_ctz(before);
		const struct fiber *g = &emu.fibers[base + l];
		if (g->mask == mask && g->kind != kind)
			die_mismatch(f, g, l);
	}
	if ((before | 1u << lane) == mask && warp_ready(f, base, mask, kind))
		complete_warp(base, mask, kind);
	resolve_activemask(base);
	yield_to_next();
	return f->result;
}

void gpu_emu_wmma_misuse(const char *what, const void *p, unsigned ldm, const char *file, int line)
{
	char name[256];
	kernel_name(name, sizeof(name));
	gpu_emu_die("%s:%d: %s in " WHERE_FMT
		    ": pointer %p must be 32-byte aligned and ldm %u a multiple of 16 "
		    "bytes",
		    file, line, what, WHERE_ARGS(name), p, ldm);
}

unsigned gpu_emu_activemask(const char *file, int line)
{
	struct fiber *f = emu.cur;
	if (!f)
		gpu_emu_die("%s:%d: __activemask outside a kernel", file, line);
	f->state = FIBER_ACTIVEMASK;
	f->file = file;
	f->line = line;
	emu.activemask_waiting++;
	resolve_activemask(f->linear & ~31);
	yield_to_next();
	return (unsigned)f->result;
}

void *gpu_emu_dynamic_shared(void)
{
	if (!emu.cur)
		gpu_emu_die("dynamic shared memory used outside a kernel");
	return emu.dyn_smem;
}

/* ---- the grid ------------------------------------------------------------------------------- */

static void run_block(void)
{
	if (emu.tls_end > emu.tls_begin)
		memset(emu.tls_begin, 0xff, (size_t)(emu.tls_end - emu.tls_begin));
	if (emu.smem)
		memset(emu.dyn_smem, 0xff, emu.smem);
	int n = emu.nthreads;
	for (int i = 0; i < n; i++) {
		struct fiber *f = &emu.fibers[i];
		f->tid.x = (unsigned)i % emu.block.x;
		f->tid.y = (unsigned)i / emu.block.x % emu.block.y;
		f->tid.z = (unsigned)i / (emu.block.x * emu.block.y);
		f->linear = i;
		f->state = FIBER_RUNNABLE;
		f->file = "(start)";
		f->line = 0;
		f->ctx = make_fcontext(f->stack + STACK_SIZE, STACK_SIZE, fiber_main);
		emu.perm[i] = emu.order == GPU_EMU_ORDER_REVERSE ? n - 1 - i : i;
	}
	memset(emu.warp_waiting, 0, sizeof(*emu.warp_waiting) * (size_t)((n + 31) / 32));
	emu.live = n;
	emu.activemask_waiting = 0;
	emu.bar_arrived = 0;
	emu.bar_count = 0;
	while (emu.live > 0) {
		if (emu.order == GPU_EMU_ORDER_RANDOM)
			for (int i = n - 1; i > 0; i--) {
				int j = (int)(rng_next() % (uint64_t)(i + 1)), t = emu.perm[i];
				emu.perm[i] = emu.perm[j];
				emu.perm[j] = t;
			}
		/* The fibers hand the pass on to each other; the last one comes back here. */
		emu.pass_next = 0;
		struct fiber *first = next_runnable();
		if (!first)
			report_deadlock();
		switch_to(nullptr, first);
	}
	emu.cur = nullptr;
}

static void run_job(void)
{
	emu.nthreads = (int)(emu.block.x * emu.block.y * emu.block.z);
	ensure_fibers(emu.nthreads);
	/* Aligned exactly as the device promises (GPU_EMU_DYNAMIC_SHARED_ALIGN) and no more: the
	 * buffer starts ALIGN bytes into a block aligned to twice that, so a kernel that assumes
	 * more alignment than GPU_DYNAMIC_SHARED declares fails here too (plain malloc gave 16
	 * bytes, and WMMA kernels failed or passed by where the heap put the buffer). It ends at
	 * the block's end, so ASan reports a read past the launch's size; the head is poisoned. */
	emu.dyn_smem = nullptr;
	emu.dyn_block = nullptr;
	if (emu.smem) {
		if (posix_memalign(&emu.dyn_block, 2 * GPU_EMU_DYNAMIC_SHARED_ALIGN,
				   GPU_EMU_DYNAMIC_SHARED_ALIGN + emu.smem) != 0)
			gpu_emu_die("out of memory for %zu bytes of dynamic shared memory", emu.smem);
		emu.dyn_smem = static_cast<char *>(emu.dyn_block) + GPU_EMU_DYNAMIC_SHARED_ALIGN;
#if defined(__SANITIZE_ADDRESS__)
		ASAN_POISON_MEMORY_REGION(emu.dyn_block, GPU_EMU_DYNAMIC_SHARED_ALIGN);
#endif
	}
	emu.rng = emu.seed;
	blockDim = emu.block;
	gridDim = emu.grid;
	unsigned long long nblocks = (unsigned long long)emu.grid.x * emu.grid.y * emu.grid.z;
	for (unsigned long long b = 0; b < nblocks; b++) {
		unsigned long long i = emu.order == GPU_EMU_ORDER_REVERSE ? nblocks - 1 - b : b;
		blockIdx.x = (unsigned)(i % emu.grid.x);
		blockIdx.y = (unsigned)(i / emu.grid.x % emu.grid.y);
		blockIdx.z = (unsigned)(i / ((unsigned long long)emu.grid.x * emu.grid.y));
		run_block();
	}
#if defined(__SANITIZE_ADDRESS__)
	if (emu.dyn_block)
		ASAN_UNPOISON_MEMORY_REGION(emu.dyn_block, GPU_EMU_DYNAMIC_SHARED_ALIGN);
#endif
	free(emu.dyn_block);
	emu.dyn_block = nullptr;
	emu.dyn_smem = nullptr;
}

static int find_tls(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (!info->dlpi_tls_data)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		unsigned char *b = (unsigned char *)info->dlpi_tls_data;
		if (ph->p_type == PT_TLS && &tls_marker >= b && &tls_marker < b + ph->p_memsz) {
			emu.tls_begin = b;
			emu.tls_end = b + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

#if !EMU_ASAN
/* A fault in a fiber's guard page is a kernel thread overflowing its stack: say so, with the
 * kernel and the thread, then abort. Any other fault goes back to the previous handler. ASan
 * builds keep ASan's handler, which reports the kernel's source line. */
static struct sigaction previous_segv;

static void segv_handler(int sig, siginfo_t *si, void *ucontext)
{
	(void)sig;
	(void)ucontext;
	struct fiber *f = emu.cur;
	char *a = (char *)si->si_addr;
	if (f && a >= f->stack - page_size && a < f->stack) {
		char name[256], msg[768];
		kernel_name(name, sizeof(name));
		int n = snprintf(
			msg, sizeof(msg),
			"gpu-emu: thread (%u,%u,%u) overflowed its %zu KiB fiber stack in " WHERE_FMT
			"; set HOLOD_GPU_EMU_STACK to more (e.g. 1M) or shrink the kernel's local arrays\n",
			f->tid.x, f->tid.y, f->tid.z, STACK_SIZE >> 10, WHERE_ARGS(name));
		if (n > 0 && write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1) < 0)
			n = 0;
		signal(SIGABRT, SIG_DFL);
		abort();
	}
	sigaction(SIGSEGV, &previous_segv, nullptr);
}

static void install_overflow_handler(void)
{
	static char alt[64 << 10];
	stack_t ss = {};
	ss.ss_sp = alt;
	ss.ss_size = sizeof(alt);
	if (sigaltstack(&ss, nullptr) < 0)
		return;
	struct sigaction sa = {};
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &previous_segv);
}
#endif

static void *worker_main(void *arg)
{
	(void)arg;
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	STACK_SIZE = gpu_emu_parse_size(getenv("HOLOD_GPU_EMU_STACK"), STACK_DEFAULT, "HOLOD_GPU_EMU_STACK");
	if (STACK_SIZE < STACK_MIN || STACK_SIZE > STACK_MAX)
		gpu_emu_die("HOLOD_GPU_EMU_STACK=%zu: a fiber stack must be from %zu KiB to %zu MiB",
			    STACK_SIZE, STACK_MIN >> 10, STACK_MAX >> 20);
	STACK_SIZE = (STACK_SIZE + page_size - 1) / page_size * page_size;
#if !EMU_ASAN
	install_overflow_handler();
#endif
	tls_marker = 1;
	dl_iterate_phdr(find_tls, nullptr);
	if (!emu.tls_begin)
		gpu_emu_die("cannot find the TLS block that holds static __shared__ variables");
	pthread_mutex_lock(&emu.job_mutex);
	for (;;) {
		while (!emu.job_pending)
			pthread_cond_wait(&emu.job_cv, &emu.job_mutex);
		emu.job_pending = false;
		pthread_mutex_unlock(&emu.job_mutex);
		run_job();
		pthread_mutex_lock(&emu.job_mutex);
		emu.job_done = true;
		pthread_cond_broadcast(&emu.done_cv);
	}
	return nullptr;
}

void gpu_emu_run_grid(const struct gpu_emu_kernel_call *call, dim3 grid, dim3 block, size_t smem)
{
	pthread_mutex_lock(&grid_lock);
	order_from_env();
	/* A forked child has no emulation thread: start one. */
	if (emu.worker_pid != getpid()) {
		pthread_mutex_init(&emu.job_mutex, nullptr);
		pthread_cond_init(&emu.job_cv, nullptr);
		pthread_cond_init(&emu.done_cv, nullptr);
		emu.job_pending = emu.job_done = false;
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int r = pthread_create(&t, &attr, worker_main, nullptr);
		pthread_attr_destroy(&attr);
		if (r)
			gpu_emu_die("cannot start the emulation thread: %s", strerror(r));
		emu.worker_pid = getpid();
	}
	pthread_mutex_lock(&emu.job_mutex);
	emu.call = call;
	emu.grid = grid;
	emu.block = block;
	emu.smem = smem;
	emu.job_pending = true;
	pthread_cond_signal(&emu.job_cv);
	while (!emu.job_done)
		pthread_cond_wait(&emu.done_cv, &emu.job_mutex);
	emu.job_done = false;
	pthread_mutex_unlock(&emu.job_mutex);
	pthread_mutex_unlock(&grid_lock);
}
