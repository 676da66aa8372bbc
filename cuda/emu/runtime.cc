/* The CUDA runtime subset the engine uses, on the CPU, with NVIDIA's prototypes (cuda_runtime_api.h).
 *
 * One emulated device, or HOLOD_GPU_EMU_DEVICES=N (at most GPU_EMU_MAX_DEVICES), each with its own
 * memory budget, with CUDA's per-host-thread current device (cudaSetDevice): an allocation belongs
 * to the device current when it was made (cudaMallocAsync: the stream's), a stream and an event to
 * the device current at their creation, and, as on a real multi-GPU host without peer access, a
 * kernel launched into a stream of another device than the current one fails
 * (cudaErrorInvalidResourceHandle), as does a graph launch or an event record across devices,
 * while a kernel argument that points into another device's memory aborts with the launch's
 * source line (a real GPU faults with an illegal address). Device memory is host memory of exactly the
 * requested size, filled with 0xFF bytes (NaN for fp32, bf16 and half) so that a read before any write shows
 * up; the total is capped (HOLOD_GPU_EMU_MEMORY, default 80G) so that out-of-memory paths can be tested.
 * Every operation on a stream runs at once on the calling thread (kernels on the emulation thread, which the
 * caller waits for), so stream order is kept trivially; a stream that is capturing records launches, copies,
 * memsets and event records into a graph instead, and cudaGraphLaunch replays them. Functions the engine does
 * not use are not defined here: a link error names them.
 *
 * A device fault can be injected (HOLOD_GPU_EMU_FAULT, below): the context is then broken as a
 * kernel's illegal address breaks a real one, until cudaDeviceReset(). So can an old driver
 * (HOLOD_GPU_EMU_DRIVER=MAJOR.MINOR, the CUDA version it supports): below the runtime's
 * CUDART_VERSION, cudaGetDeviceCount fails with cudaErrorInsufficientDriver, as the real runtime
 * does, and cudaDriverGetVersion reports it.
 *
 * Threads: any host thread may call these functions; the allocation table and the kernel attribute
 * table are guarded by one mutex; the last error is per host thread, as in CUDA.
 */
#include "emu_internal.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <set>
#include <unordered_map>
#include <vector>

static const size_t KIB = 1024;
static const size_t SMEM_DEFAULT_MAX = 48 * KIB; /* dynamic shared memory without the opt-in */
static const size_t DEVICE_ALIGN = 256;

static thread_local cudaError_t last_error = cudaSuccess;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
/* A live cudaMalloc block: its size and its device. */
struct emu_alloc {
	size_t size;
	int device;
};
static std::map<uintptr_t, struct emu_alloc> *device_allocs; /* by address, under table_lock */
static std::map<const void *, int> *kernel_max_dyn_smem;     /* under table_lock */
static std::map<uintptr_t, size_t> *pinned_allocs;	     /* cudaMallocHost blocks, under table_lock */
/* Lazy loading (gpu_emu_module_use): the kernels (and library stand-in functions) each device has
 * loaded, under table_lock; capture_load_fails: HOLOD_GPU_EMU_CAPTURE_LOAD=fail|allow. */
static std::set<std::pair<int, const void *>> *modules_loaded;
static bool capture_load_fails;
static size_t mem_used[GPU_EMU_MAX_DEVICES], mem_limit; /* the limit is per device */
static int n_devices;					/* HOLOD_GPU_EMU_DEVICES; 0 until read */
static thread_local int current_device;			/* cudaSetDevice's, per host thread as in CUDA */
static int arch_major;					/* 9 or 8; 0 until read from HOLOD_GPU_EMU_ARCH */
static int arch_minor; /* 0, or 6 / 9 for sm_86 (RTX 3090) and sm_89 (RTX 4090, L4) */

static cudaError_t fail(cudaError_t e)
{
	last_error = e;
	return e;
}

/* Strict capture (below): true, with the error recorded and the captures invalidated, when a
 * potentially unsafe call `what` is made while a capture forbids it. */
static bool unsafe_in_capture(const char *what);
#define RETURN_IF_UNSAFE_IN_CAPTURE(what)                                                                    \
	do {                                                                                                 \
		if (unsafe_in_capture(what))                                                                 \
			return cudaErrorStreamCaptureUnsupported;                                            \
	} while (0)

/* ---- injected device faults ----------------------------------------------------------------
 * HOLOD_GPU_EMU_FAULT=after:N: the kernel grid after the first N of the process (graph replays
 * count each of their kernels) does not run and breaks the context; file:PATH: the first grid
 * launched while PATH exists does. Either fires once per process. A broken context behaves as
 * CUDA's after a sticky error (cudaErrorIllegalAddress): no further kernel, copy or memset runs,
 * and every call that reports an error returns it (cudaFree still frees, so that the caller's
 * teardown leaks nothing) until cudaDeviceReset(), which repairs the device. Allocations made
 * before the reset stay valid here, unlike on a real device: free them first. */
static std::atomic<bool> broken{false};
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static unsigned long long fault_after = ULLONG_MAX; /* grids before the fault */
static char *fault_file;			    /* or: the trigger file */
static std::atomic<unsigned long long> grids_seen{0};
static std::atomic<bool> fault_fired{false};

static void fault_config(void)
{
	const char *f = getenv("HOLOD_GPU_EMU_FAULT");
	if (!f || !*f)
		return;
	if (!strncmp(f, "after:", 6)) {
		char *end;
		errno = 0;
		fault_after = strtoull(f + 6, &end, 10);
		if (errno || end == f + 6 || *end)
			gpu_emu_die("HOLOD_GPU_EMU_FAULT=%s: expected after:N or file:PATH", f);
	} else if (!strncmp(f, "file:", 5) && f[5]) {
		fault_file = strdup(f + 5);
	} else {
		gpu_emu_die("HOLOD_GPU_EMU_FAULT=%s: expected after:N or file:PATH", f);
	}
}

bool gpu_emu_grid_faults(void)
{
	pthread_once(&fault_once, fault_config);
	if (broken.load())
		return true;
	if (fault_fired.load() || (fault_after == ULLONG_MAX && !fault_file))
		return false;
	bool now = fault_file ? access(fault_file, F_OK) == 0 : grids_seen.fetch_add(1) == fault_after;
	if (now && !fault_fired.exchange(true)) {
		fprintf(stderr, "gpu-emu: injected device fault (HOLOD_GPU_EMU_FAULT): "
				"the context is broken until cudaDeviceReset()\n");
		broken.store(true);
		return true;
	}
	return false;
}

/* cudaErrorIllegalAddress once the context is broken (recorded as the last error too). */
static bool broken_now(cudaError_t *ret)
{
	if (!broken.load())
		return false;
	*ret = fail(cudaErrorIllegalAddress);
	return true;
}

#define RETURN_IF_BROKEN()                                                                                   \
	do {                                                                                                 \
		cudaError_t broken_e_;                                                                       \
		if (broken_now(&broken_e_))                                                                  \
			return broken_e_;                                                                    \
	} while (0)

cudaError_t cudaDeviceReset(void)
{
	broken.store(false);
	last_error = cudaSuccess;
	/* the device's context goes, and the modules loaded in it with it (lazy loading) */
	pthread_mutex_lock(&table_lock);
	if (modules_loaded) /* NULL until the configuration is read: nothing loaded yet */
		for (auto it = modules_loaded->begin(); it != modules_loaded->end();)
			it = it->first == current_device ? modules_loaded->erase(it) : std::next(it);
	pthread_mutex_unlock(&table_lock);
	return cudaSuccess;
}

size_t gpu_emu_parse_size(const char *s, size_t fallback, const char *var)
{
	if (!s || !*s)
		return fallback;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	else if (*end == 'G' || *end == 'g')
		shift = 30, end++;
	if (errno || end == s || *end || v > (ULLONG_MAX >> shift))
		gpu_emu_die("%s=%s: expected a byte count such as 4096, 64M or 80G", var, s);
	return (size_t)(v << shift);
}

/* Reads the configuration once; called with table_lock held. */
static void config_locked(void)
{
	if (device_allocs)
		return;
	device_allocs = new std::map<uintptr_t, struct emu_alloc>();
	if (!n_devices) {
		const char *d = getenv("HOLOD_GPU_EMU_DEVICES");
		char *end = NULL;
		long n = d && *d ? strtol(d, &end, 10) : 1;
		if (n < 1 || n > GPU_EMU_MAX_DEVICES || (end && *end))
			gpu_emu_die("HOLOD_GPU_EMU_DEVICES=%s: expected 1 to %d", d, GPU_EMU_MAX_DEVICES);
		n_devices = (int)n;
	}
	kernel_max_dyn_smem = new std::map<const void *, int>();
	pinned_allocs = new std::map<uintptr_t, size_t>();
	modules_loaded = new std::set<std::pair<int, const void *>>();
	const char *cl = getenv("HOLOD_GPU_EMU_CAPTURE_LOAD");
	if (!cl || !*cl || !strcmp(cl, "fail"))
		capture_load_fails = true;
	else if (!strcmp(cl, "allow"))
		capture_load_fails = false;
	else
		gpu_emu_die("HOLOD_GPU_EMU_CAPTURE_LOAD=%s: expected fail or allow", cl);
	if (!mem_limit)
		mem_limit = gpu_emu_parse_size(getenv("HOLOD_GPU_EMU_MEMORY"), (size_t)80 << 30,
					       "HOLOD_GPU_EMU_MEMORY");
	if (!arch_major) {
		const char *a = getenv("HOLOD_GPU_EMU_ARCH");
		if (!a || !*a || !strcmp(a, "sm_90"))
			arch_major = 9;
		else if (!strcmp(a, "sm_80"))
			arch_major = 8;
		else if (!strcmp(a, "sm_86"))
			arch_major = 8, arch_minor = 6;
		else if (!strcmp(a, "sm_89"))
			arch_major = 8, arch_minor = 9;
		else
			gpu_emu_die("HOLOD_GPU_EMU_ARCH=%s: expected sm_90, sm_89, sm_86 or sm_80", a);
	}
}

static void config(void)
{
	pthread_mutex_lock(&table_lock);
	config_locked();
	pthread_mutex_unlock(&table_lock);
}

void gpu_emu_set_memory_limit(size_t bytes)
{
	pthread_mutex_lock(&table_lock);
	config_locked();
	mem_limit = bytes;
	pthread_mutex_unlock(&table_lock);
}

int gpu_emu_set_arch(int major)
{
	if (major != 8 && major != 9)
		return -EINVAL;
	pthread_mutex_lock(&table_lock);
	config_locked();
	arch_major = major;
	arch_minor = 0;
	pthread_mutex_unlock(&table_lock);
	return 0;
}

/* The opt-in maximum of shared memory per block: 227 KiB on sm_90, 163 KiB on sm_80, 99 KiB
 * on sm_86 and sm_89 (NVIDIA's CUDA C++ Programming Guide, compute capabilities table). */
static size_t smem_optin_max(void)
{
	if (arch_major == 8 && arch_minor)
		return 99 * KIB;
	return arch_major == 8 ? 163 * KIB : 227 * KIB;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- errors ------------------------------------------------------------------------------- */

cudaError_t cudaGetLastError(void)
{
	RETURN_IF_BROKEN();
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError(void)
{
	RETURN_IF_BROKEN();
	return last_error;
}

static const struct {
	cudaError_t e;
	const char *name, *text;
} error_table[] = {
	{cudaSuccess, "cudaSuccess", "no error"},
	{cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
	{cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
	{cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
	{cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
	 "invalid copy direction for memcpy"},
	{cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
	{cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
	{cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
	 "CUDA driver version is insufficient for CUDA runtime version"},
	{cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
	{cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
	{cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
	{cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
	 "operation not permitted when stream is capturing"},
	{cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
	 "operation failed due to a previous error during capture"},
	{cudaErrorIllegalState, "cudaErrorIllegalState", "the operation is not permitted in this state"},
	{cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
	{cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
	{cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
	 "too many resources requested for launch"},
};

const char *cudaGetErrorName(cudaError_t e)
{
	for (const auto &t : error_table)
		if (t.e == e)
			return t.name;
	return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
	for (const auto &t : error_table)
		if (t.e == e)
			return t.text;
	return "unknown error";
}

/* ---- device ------------------------------------------------------------------------------- */

/* The CUDA version the emulated driver supports, as cudaDriverGetVersion encodes it (1000 major
 * + 10 minor): $HOLOD_GPU_EMU_DRIVER, else the runtime's own. */
static int driver_version(void)
{
	const char *d = getenv("HOLOD_GPU_EMU_DRIVER");
	int major = 0, minor = 0;
	if (d && sscanf(d, "%d.%d", &major, &minor) == 2 && major > 0 && minor >= 0 && minor < 100)
		return major * 1000 + minor * 10;
	if (d && *d)
		gpu_emu_die("HOLOD_GPU_EMU_DRIVER=%s: expected MAJOR.MINOR", d);
	return CUDART_VERSION;
}

cudaError_t cudaDriverGetVersion(int *version)
{
	if (!version)
		return fail(cudaErrorInvalidValue);
	*version = driver_version();
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	if (!version)
		return fail(cudaErrorInvalidValue);
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return fail(cudaErrorInvalidValue);
	/* the real runtime's answer when the driver is older than itself: no count at all */
	if (driver_version() < CUDART_VERSION) {
		*count = 0;
		return fail(cudaErrorInsufficientDriver);
	}
	config();
	*count = n_devices;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	config();
	if (device < 0 || device >= n_devices)
		return fail(cudaErrorInvalidDevice);
	current_device = device;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return fail(cudaErrorInvalidValue);
	*device = current_device;
	return cudaSuccess;
}

int gpu_emu_current_device(void)
{
	return current_device;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
	if (!p)
		return fail(cudaErrorInvalidValue);
	config();
	if (device < 0 || device >= n_devices)
		return fail(cudaErrorInvalidDevice);
	bool hopper = arch_major == 9;
	memset(p, 0, sizeof(*p));
	char sm[16];
	snprintf(sm, sizeof(sm), "sm_%d%d", arch_major, arch_minor);
	if (n_devices > 1)
		snprintf(p->name, sizeof(p->name), "CUDA emulation %d (CPU, %s)", device, sm);
	else
		snprintf(p->name, sizeof(p->name), "CUDA emulation (CPU, %s)", sm);
	p->totalGlobalMem = mem_limit;
	p->sharedMemPerBlock = SMEM_DEFAULT_MAX;
	p->sharedMemPerBlockOptin = smem_optin_max();
	p->sharedMemPerMultiprocessor = hopper ? 228 * KIB : arch_minor ? 100 * KIB : 164 * KIB;
	p->reservedSharedMemPerBlock = KIB;
	p->regsPerBlock = 65536;
	p->regsPerMultiprocessor = 65536;
	p->warpSize = 32;
	p->memPitch = SIZE_MAX;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
	p->maxGridSize[0] = INT_MAX, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
	p->totalConstMem = 64 * KIB;
	p->major = arch_major;
	p->minor = arch_minor;
	/* H100 SXM, RTX 4090, RTX 3090, A100 */
	p->multiProcessorCount = hopper ? 132 : arch_minor == 9 ? 128 : arch_minor == 6 ? 82 : 108;
	p->maxThreadsPerMultiProcessor = 2048;
	p->maxBlocksPerMultiProcessor = 32;
	p->l2CacheSize = hopper ? 50 << 20 : 40 << 20;
	p->memoryBusWidth = 5120;
	p->concurrentKernels = 1;
	p->asyncEngineCount = 2;
	p->unifiedAddressing = 1;
	p->managedMemory = 1;
	p->canMapHostMemory = 1;
	p->memoryPoolsSupported = 1;
	p->cooperativeLaunch = 1;
	p->clusterLaunch = hopper;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaDeviceSynchronize");
	RETURN_IF_BROKEN();
	return cudaSuccess;
}

/* ---- memory ------------------------------------------------------------------------------- */

/* cudaMalloc on `device` (the current one, or a stream's for cudaMallocAsync). */
static cudaError_t malloc_on(void **ret, size_t size, int device)
{
	if (!ret)
		return fail(cudaErrorInvalidValue);
	RETURN_IF_BROKEN();
	if (size == 0) {
		*ret = nullptr;
		return cudaSuccess;
	}
	pthread_mutex_lock(&table_lock);
	config_locked();
	bool fits = size <= mem_limit - mem_used[device];
	if (fits)
		mem_used[device] += size;
	pthread_mutex_unlock(&table_lock);
	if (!fits)
		return fail(cudaErrorMemoryAllocation);
	/* CUDA aligns allocations to at least 256 bytes (vector loads and WMMA rely on it);
	 * posix_memalign keeps the exact size for AddressSanitizer. */
	void *p = NULL;
	if (posix_memalign(&p, DEVICE_ALIGN, size) != 0) {
		pthread_mutex_lock(&table_lock);
		mem_used[device] -= size;
		pthread_mutex_unlock(&table_lock);
		return fail(cudaErrorMemoryAllocation);
	}
	memset(p, 0xff, size);
	pthread_mutex_lock(&table_lock);
	(*device_allocs)[(uintptr_t)p] = {size, device};
	pthread_mutex_unlock(&table_lock);
	*ret = p;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **ret, size_t size)
{
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaMalloc");
	return malloc_on(ret, size, current_device);
}

cudaError_t cudaFree(void *p)
{
	if (!p)
		return cudaSuccess;
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaFree");
	pthread_mutex_lock(&table_lock);
	config_locked();
	auto it = device_allocs->find((uintptr_t)p);
	bool known = it != device_allocs->end();
	if (known) {
		mem_used[it->second.device] -= it->second.size;
		device_allocs->erase(it);
	}
	pthread_mutex_unlock(&table_lock);
	if (!known)
		return fail(cudaErrorInvalidDevicePointer);
	free(p);
	RETURN_IF_BROKEN();
	return cudaSuccess;
}

/* The allocation holding byte p (table_lock held), or NULL. */
static const struct emu_alloc *alloc_at_locked(uintptr_t a, uintptr_t *ret_base)
{
	auto it = device_allocs->upper_bound(a);
	if (it == device_allocs->begin())
		return NULL;
	--it;
	if (a - it->first >= it->second.size)
		return NULL;
	*ret_base = it->first;
	return &it->second;
}

bool gpu_emu_is_device_range(const void *p, size_t bytes)
{
	if (bytes == 0)
		return true;
	uintptr_t a = (uintptr_t)p, base = 0;
	pthread_mutex_lock(&table_lock);
	config_locked();
	const struct emu_alloc *e = alloc_at_locked(a, &base);
	bool inside = e && bytes <= e->size - (a - base);
	pthread_mutex_unlock(&table_lock);
	return inside;
}

int gpu_emu_device_of(const void *p)
{
	uintptr_t base = 0;
	pthread_mutex_lock(&table_lock);
	config_locked();
	const struct emu_alloc *e = alloc_at_locked((uintptr_t)p, &base);
	int d = e ? e->device : -1;
	pthread_mutex_unlock(&table_lock);
	return d;
}

cudaError_t cudaMemGetInfo(size_t *ret_free, size_t *ret_total)
{
	if (!ret_free || !ret_total)
		return fail(cudaErrorInvalidValue);
	pthread_mutex_lock(&table_lock);
	config_locked();
	*ret_free = mem_limit - mem_used[current_device];
	*ret_total = mem_limit;
	pthread_mutex_unlock(&table_lock);
	return cudaSuccess;
}

/* Pinned host memory is ordinary host memory here; it is poisoned too, which costs nothing and
 * catches host code that reads a staging buffer before filling it. */
cudaError_t cudaMallocHost(void **ret, size_t size)
{
	if (!ret)
		return fail(cudaErrorInvalidValue);
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaMallocHost");
	void *p = NULL;
	if (posix_memalign(&p, DEVICE_ALIGN, size ? size : 1) != 0)
		return fail(cudaErrorMemoryAllocation);
	memset(p, 0xff, size);
	pthread_mutex_lock(&table_lock);
	config_locked();
	(*pinned_allocs)[(uintptr_t)p] = size ? size : 1;
	pthread_mutex_unlock(&table_lock);
	*ret = p;
	return cudaSuccess;
}

/* Whether the `bytes` at p lie in one cudaMallocHost block (page-locked memory). */
static bool is_pinned(const void *p, size_t bytes)
{
	uintptr_t a = (uintptr_t)p;
	pthread_mutex_lock(&table_lock);
	config_locked();
	auto it = pinned_allocs->upper_bound(a);
	bool in = false;
	if (it != pinned_allocs->begin()) {
		--it;
		in = a - it->first < it->second && bytes <= it->second - (a - it->first);
	}
	pthread_mutex_unlock(&table_lock);
	return in;
}

cudaError_t cudaHostAlloc(void **ret, size_t size, unsigned int flags)
{
	(void)flags;
	return cudaMallocHost(ret, size);
}

cudaError_t cudaFreeHost(void *p)
{
	if (!p)
		return cudaSuccess;
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaFreeHost");
	pthread_mutex_lock(&table_lock);
	config_locked();
	bool known = pinned_allocs->erase((uintptr_t)p) == 1;
	pthread_mutex_unlock(&table_lock);
	if (!known)
		return fail(cudaErrorInvalidValue);
	free(p);
	return cudaSuccess;
}

/* ---- streams, events, graphs -------------------------------------------------------------- */

enum node_type { NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET, NODE_EVENT, NODE_HOST_WORK };

struct graph_node {
	enum node_type type;
	struct gpu_emu_kernel_call call; /* NODE_KERNEL, NODE_HOST_WORK: call.args owned by the node */
	dim3 grid, block;
	size_t smem;
	void *dst; /* NODE_MEMCPY, NODE_MEMSET */
	const void *src;
	size_t count;
	int value;
	cudaEvent_t event; /* NODE_EVENT */
};

struct CUgraph_st {
	std::vector<struct graph_node> nodes;
	~CUgraph_st()
	{
		for (auto &n : nodes)
			if (n.type == NODE_KERNEL || n.type == NODE_HOST_WORK)
				n.call.destroy(n.call.args);
	}
};

struct CUgraphExec_st : CUgraph_st {
	int device; /* current at instantiation: the graph's kernels run there */
};

struct CUstream_st {
	unsigned flags;
	struct CUgraph_st *capture;	 /* non-NULL while capturing */
	std::atomic<bool> invalidated;	 /* an operation failed during capture (any thread sets it) */
	int device;			 /* current at creation; -1: the default stream, every device's own */
	enum cudaStreamCaptureMode mode; /* while capturing */
	pthread_t owner;		 /* the thread that began the capture */
};

struct CUevent_st {
	unsigned flags;
	bool recorded;
	double t_ms;
	int device; /* current at creation */
};

/* The legacy default stream (NULL, cudaStreamLegacy, cudaStreamPerThread): never captures; it is
 * the current device's. */
static struct CUstream_st default_stream = {0, nullptr, false, -1, cudaStreamCaptureModeGlobal, {}};

/* ---- strict capture ------------------------------------------------------------------------
 * As the real runtime does (cudaThreadExchangeStreamCaptureMode): while a capture in Global mode
 * runs on any thread, or one in ThreadLocal mode on the calling thread, a potentially unsafe call
 * (cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost, the synchronous copies and memsets,
 * cudaDeviceSynchronize) fails with cudaErrorStreamCaptureUnsupported and invalidates those
 * captures (cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated); Relaxed
 * captures allow them. A captured copy from or to pageable host memory (not cudaMallocHost's)
 * fails the same way: a graph cannot keep pageable memory's staging. */
/* streams capturing, under table_lock; never freed, as the other tables (calls may come from
 * exit handlers and late threads) */
static std::vector<struct CUstream_st *> *captures = new std::vector<struct CUstream_st *>();

static bool unsafe_in_capture(const char *what)
{
	bool hit = false;
	pthread_mutex_lock(&table_lock);
	for (struct CUstream_st *st : *captures) {
		if (st->mode == cudaStreamCaptureModeGlobal || (st->mode == cudaStreamCaptureModeThreadLocal &&
								pthread_equal(st->owner, pthread_self()))) {
			st->invalidated = true;
			hit = true;
		}
	}
	pthread_mutex_unlock(&table_lock);
	if (hit) {
		if (getenv("HOLOD_GPU_EMU_VERBOSE"))
			fprintf(stderr, "gpu-emu: %s during a stream capture: capture invalidated\n", what);
		fail(cudaErrorStreamCaptureUnsupported);
	}
	return hit;
}

static void captures_remove(struct CUstream_st *st)
{
	pthread_mutex_lock(&table_lock);
	for (size_t i = 0; i < captures->size(); i++)
		if ((*captures)[i] == st) {
			captures->erase(captures->begin() + (long)i);
			break;
		}
	pthread_mutex_unlock(&table_lock);
}

/* The device of stream st: its own, or the current one for the default stream. */
static int stream_device(const struct CUstream_st *st)
{
	return st->device < 0 ? current_device : st->device;
}

static struct CUstream_st *stream_of(cudaStream_t s)
{
	if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread)
		return &default_stream;
	return s;
}

int gpu_emu_stream_device(cudaStream_t s)
{
	return stream_device(stream_of(s));
}

void gpu_emu_invalidate_capture(cudaStream_t s)
{
	struct CUstream_st *st = stream_of(s);
	if (st->capture)
		st->invalidated = true;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *ret, unsigned int flags)
{
	if (!ret)
		return fail(cudaErrorInvalidValue);
	config();
	*ret = new CUstream_st{flags, nullptr, false, current_device, cudaStreamCaptureModeGlobal, {}};
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *ret)
{
	return cudaStreamCreateWithFlags(ret, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	if (!s || stream_of(s) == &default_stream)
		return fail(cudaErrorInvalidResourceHandle);
	if (s->capture)
		captures_remove(s);
	delete s->capture;
	delete s;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	RETURN_IF_BROKEN();
	struct CUstream_st *st = stream_of(s);
	if (st->capture) {
		st->invalidated = true;
		return fail(cudaErrorStreamCaptureUnsupported);
	}
	return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
	return cudaStreamSynchronize(s);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
	(void)s;
	(void)flags;
	return e ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ret, unsigned int flags)
{
	if (!ret)
		return fail(cudaErrorInvalidValue);
	*ret = new CUevent_st{flags, false, 0, current_device};
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *ret)
{
	return cudaEventCreateWithFlags(ret, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	if (!e)
		return fail(cudaErrorInvalidResourceHandle);
	delete e;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	if (!e)
		return fail(cudaErrorInvalidResourceHandle);
	struct CUstream_st *st = stream_of(s);
	/* "cudaEventRecord() will fail if the input event and input stream are associated to
	 * different devices" (CUDA programming guide, stream and event behavior) */
	if (e->device != stream_device(st))
		return fail(cudaErrorInvalidResourceHandle);
	if (st->capture) {
		struct graph_node n = {};
		n.type = NODE_EVENT;
		n.event = e;
		st->capture->nodes.push_back(n);
		return cudaSuccess;
	}
	/* Everything before it on the stream has already run: the host clock is the event's time. */
	e->recorded = true;
	e->t_ms = now_ms();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	RETURN_IF_BROKEN();
	return e ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	return e ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	if (!ms)
		return fail(cudaErrorInvalidValue);
	if (!start || !end || (start->flags & cudaEventDisableTiming) || (end->flags & cudaEventDisableTiming))
		return fail(cudaErrorInvalidResourceHandle);
	if (!start->recorded || !end->recorded)
		return fail(cudaErrorNotReady);
	*ms = (float)(end->t_ms - start->t_ms);
	return cudaSuccess;
}

/* Stream-ordered allocation runs at once. A capture does not record it: CUDA's graph memory nodes
 * (an allocation that lives from its node to its free node, at one address across replays) are not
 * emulated, so a capturing stream refuses them and the capture is invalidated, rather than a
 * replay touching memory that was freed while capturing. */
cudaError_t cudaMallocAsync(void **ret, size_t size, cudaStream_t s)
{
	struct CUstream_st *st = stream_of(s);
	if (st->capture) {
		st->invalidated = true;
		return fail(cudaErrorStreamCaptureUnsupported);
	}
	/* from the memory pool of the stream's device */
	return malloc_on(ret, size, stream_device(st));
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
	struct CUstream_st *st = stream_of(s);
	if (st->capture) {
		st->invalidated = true;
		return fail(cudaErrorStreamCaptureUnsupported);
	}
	return cudaFree(p);
}

/* ---- copies ------------------------------------------------------------------------------- */

static cudaError_t memcpy_on(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
			     cudaStream_t s)
{
	if ((unsigned)kind > (unsigned)cudaMemcpyDefault)
		return fail(cudaErrorInvalidMemcpyDirection);
	RETURN_IF_BROKEN();
	if (count == 0)
		return cudaSuccess;
	if (!dst || !src)
		return fail(cudaErrorInvalidValue);
	struct CUstream_st *st = stream_of(s);
	if (st->capture) {
		bool dst_host = kind == cudaMemcpyDeviceToHost ||
				(kind == cudaMemcpyDefault && !gpu_emu_is_device_range(dst, count));
		bool src_host = kind == cudaMemcpyHostToDevice ||
				(kind == cudaMemcpyDefault && !gpu_emu_is_device_range(src, count));
		if (kind == cudaMemcpyHostToHost || (dst_host && !is_pinned(dst, count)) ||
		    (src_host && !is_pinned(src, count))) {
			st->invalidated = true;
			if (getenv("HOLOD_GPU_EMU_VERBOSE"))
				fprintf(stderr, "gpu-emu: a copy from or to pageable host memory during a "
						"stream capture: capture invalidated\n");
			return fail(cudaErrorStreamCaptureUnsupported);
		}
		struct graph_node n = {};
		n.type = NODE_MEMCPY;
		n.dst = dst;
		n.src = src;
		n.count = count;
		st->capture->nodes.push_back(n);
		return cudaSuccess;
	}
	memmove(dst, src, count);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaMemcpy");
	return memcpy_on(dst, src, count, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s)
{
	return memcpy_on(dst, src, count, kind, s);
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			 size_t height, enum cudaMemcpyKind kind)
{
	if (width > dpitch || width > spitch)
		return fail(cudaErrorInvalidValue);
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaMemcpy2D");
	for (size_t r = 0; r < height; r++) {
		cudaError_t e = memcpy_on((char *)dst + r * dpitch, (const char *)src + r * spitch, width,
					  kind, nullptr);
		if (e != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}

/* __constant__ and __device__ variables are host globals in the emulated build (gpu_emu.h). */
cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
			       enum cudaMemcpyKind kind)
{
	if (!symbol)
		return fail(cudaErrorInvalidValue);
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaMemcpyToSymbol");
	return memcpy_on((char *)symbol + offset, src, count, kind, nullptr);
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
				    enum cudaMemcpyKind kind, cudaStream_t s)
{
	if (!symbol)
		return fail(cudaErrorInvalidValue);
	return memcpy_on((char *)symbol + offset, src, count, kind, s);
}

cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
				 enum cudaMemcpyKind kind)
{
	if (!symbol)
		return fail(cudaErrorInvalidValue);
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaMemcpyFromSymbol");
	return memcpy_on(dst, (const char *)symbol + offset, count, kind, nullptr);
}

cudaError_t cudaGetSymbolAddress(void **ret, const void *symbol)
{
	if (!ret || !symbol)
		return fail(cudaErrorInvalidValue);
	*ret = (void *)symbol;
	return cudaSuccess;
}

static cudaError_t memset_on(void *p, int value, size_t count, cudaStream_t s)
{
	RETURN_IF_BROKEN();
	if (count == 0)
		return cudaSuccess;
	if (!p)
		return fail(cudaErrorInvalidValue);
	struct CUstream_st *st = stream_of(s);
	if (st->capture) {
		struct graph_node n = {};
		n.type = NODE_MEMSET;
		n.dst = p;
		n.value = value;
		n.count = count;
		st->capture->nodes.push_back(n);
		return cudaSuccess;
	}
	memset(p, value, count);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t count)
{
	RETURN_IF_UNSAFE_IN_CAPTURE("cudaMemset");
	return memset_on(p, value, count, nullptr);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t count, cudaStream_t s)
{
	return memset_on(p, value, count, s);
}

/* ---- kernels ------------------------------------------------------------------------------ */

bool gpu_emu_module_use(const void *key, bool capturing, const char *what, const char *file, int line)
{
	int dev = current_device;
	pthread_mutex_lock(&table_lock);
	config_locked();
	bool ok = true;
	if (!capturing)
		modules_loaded->insert({dev, key});
	else if (capture_load_fails && !modules_loaded->count({dev, key})) {
		ok = false;
		modules_loaded->insert({dev, key}); /* one message per function */
	}
	pthread_mutex_unlock(&table_lock);
	if (!ok)
		fprintf(stderr,
			"gpu-emu: %s:%d: %s: first used inside a stream capture, before it was loaded on "
			"device %d: with lazy module loading (CUDA_MODULE_LOADING=LAZY, the default since "
			"CUDA 12.2) a driver older than CUDA 12.3 cannot load a module during capture and "
			"the capture fails; run it once before capturing, or load it with "
			"cudaFuncGetAttributes (HOLOD_GPU_EMU_CAPTURE_LOAD=allow models a newer driver)\n",
			file, line, what, dev);
	return ok;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	if (!attr || !func)
		return fail(cudaErrorInvalidValue);
	/* loads the function, as under lazy loading */
	(void)gpu_emu_module_use(func, false, NULL, NULL, 0);
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = 1024;
	attr->ptxVersion = attr->binaryVersion = arch_major * 10 + arch_minor;
	pthread_mutex_lock(&table_lock);
	auto it = kernel_max_dyn_smem->find(func);
	attr->maxDynamicSharedSizeBytes =
		it == kernel_max_dyn_smem->end() ? (int)SMEM_DEFAULT_MAX : it->second;
	pthread_mutex_unlock(&table_lock);
	return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	if (!func)
		return fail(cudaErrorInvalidValue);
	(void)gpu_emu_module_use(func, false, NULL, NULL, 0);
	pthread_mutex_lock(&table_lock);
	config_locked();
	cudaError_t e = cudaSuccess;
	if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
		if (value < 0 || (size_t)value > smem_optin_max())
			e = cudaErrorInvalidValue;
		else
			(*kernel_max_dyn_smem)[func] = value;
	} else if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
		if (value < -1 || value > 100)
			e = cudaErrorInvalidValue;
	} else {
		e = cudaErrorNotSupported;
	}
	pthread_mutex_unlock(&table_lock);
	return e == cudaSuccess ? e : fail(e);
}

/* The limits of sm_80 and sm_90 (CUDA programming guide, "Technical Specifications"). Static
 * shared memory is not counted: the emulation cannot see a kernel's __shared__ variables before
 * it runs; the nvcc build's resource report checks those. */
static cudaError_t check_launch(const void *kernel, dim3 grid, dim3 block, size_t smem)
{
	unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
	if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
		return cudaErrorInvalidConfiguration;
	if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > (unsigned)INT_MAX || grid.y > 65535 ||
	    grid.z > 65535)
		return cudaErrorInvalidConfiguration;
	pthread_mutex_lock(&table_lock);
	config_locked();
	auto it = kernel_max_dyn_smem->find(kernel);
	size_t max = it == kernel_max_dyn_smem->end() ? SMEM_DEFAULT_MAX : (size_t)it->second;
	int arch = arch_major;
	pthread_mutex_unlock(&table_lock);
	if (smem > max)
		return cudaErrorInvalidValue;
	return gpu_emu_check_registers(kernel, threads, arch); /* the register file (budget.cc) */
}

void gpu_emu_check_kernel_pointer(const void *p, int index, cudaStream_t stream, const char *file, int line,
				  const char *text)
{
	int on = stream_device(stream_of(stream));
	if (on != current_device) /* the launch fails: cudaErrorInvalidResourceHandle */
		return;
	int d = p ? gpu_emu_device_of(p) : -1;
	if (d >= 0 && d != on)
		gpu_emu_die("%s:%d: klaunch(%s): argument %d points into device %d's memory, the kernel "
			    "runs on device %d (no peer access: a GPU faults with an illegal address)",
			    file, line, text, index, d, on);
}

void gpu_emu_launch(struct gpu_emu_kernel_call *call, dim3 grid, dim3 block, size_t smem, cudaStream_t stream)
{
	cudaError_t e = check_launch(call->kernel, grid, block, smem);
	struct CUstream_st *st = stream_of(stream);
	/* "A kernel launch will fail if it is issued to a stream that is not associated to the
	 * current device" (CUDA programming guide, stream and event behavior) */
	if (e == cudaSuccess && stream_device(st) != current_device)
		e = cudaErrorInvalidResourceHandle;
	if (e == cudaSuccess &&
	    !gpu_emu_module_use(call->kernel, st->capture != nullptr, call->text, call->file, call->line)) {
		st->invalidated = true;
		e = cudaErrorStreamCaptureUnsupported;
	}
	if (e != cudaSuccess) {
		call->destroy(call->args);
		fail(e);
		return;
	}
	if (st->capture) {
		struct graph_node n = {};
		n.type = NODE_KERNEL;
		n.call = *call;
		n.grid = grid;
		n.block = block;
		n.smem = smem;
		st->capture->nodes.push_back(n);
		return;
	}
	if (!gpu_emu_grid_faults())
		gpu_emu_run_grid(call, grid, block, smem);
	call->destroy(call->args);
}

void gpu_emu_capture_host_work(struct gpu_emu_kernel_call *call, cudaStream_t stream)
{
	struct CUstream_st *st = stream_of(stream);
	if (!st->capture)
		gpu_emu_die("%s:%d: host work captured on a stream that is not capturing", call->file,
			    call->line);
	struct graph_node n = {};
	n.type = NODE_HOST_WORK;
	n.call = *call;
	st->capture->nodes.push_back(n);
}

/* ---- graph capture and replay ------------------------------------------------------------- */

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
	if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
	    mode != cudaStreamCaptureModeRelaxed)
		return fail(cudaErrorInvalidValue);
	struct CUstream_st *st = stream_of(s);
	if (st == &default_stream)
		return fail(cudaErrorStreamCaptureUnsupported);
	if (st->capture)
		return fail(cudaErrorIllegalState);
	st->capture = new CUgraph_st();
	st->invalidated = false;
	st->mode = mode;
	st->owner = pthread_self();
	pthread_mutex_lock(&table_lock);
	captures->push_back(st);
	pthread_mutex_unlock(&table_lock);
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *ret)
{
	struct CUstream_st *st = stream_of(s);
	if (!ret)
		return fail(cudaErrorInvalidValue);
	if (!st->capture)
		return fail(cudaErrorIllegalState);
	/* ThreadLocal and Global captures end on the thread that began them */
	if (st->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(st->owner, pthread_self()))
		return fail(cudaErrorStreamCaptureWrongThread);
	struct CUgraph_st *g = st->capture;
	st->capture = nullptr;
	captures_remove(st);
	if (st->invalidated) {
		delete g;
		return fail(cudaErrorStreamCaptureInvalidated);
	}
	*ret = g;
	return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *ret)
{
	if (!ret)
		return fail(cudaErrorInvalidValue);
	struct CUstream_st *st = stream_of(s);
	*ret = !st->capture    ? cudaStreamCaptureStatusNone :
	       st->invalidated ? cudaStreamCaptureStatusInvalidated :
				 cudaStreamCaptureStatusActive;
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ret, cudaGraph_t graph, unsigned long long flags)
{
	(void)flags;
	if (!ret || !graph)
		return fail(cudaErrorInvalidValue);
	struct CUgraphExec_st *x = new CUgraphExec_st();
	x->device = current_device;
	x->nodes = graph->nodes;
	for (auto &n : x->nodes)
		if (n.type == NODE_KERNEL || n.type == NODE_HOST_WORK)
			n.call.args = n.call.clone(n.call.args);
	*ret = x;
	return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
	if (!x)
		return fail(cudaErrorInvalidResourceHandle);
	if (stream_of(s)->capture)
		return fail(cudaErrorStreamCaptureUnsupported);
	if (stream_device(stream_of(s)) != current_device || x->device != current_device)
		return fail(cudaErrorInvalidResourceHandle);
	RETURN_IF_BROKEN();
	for (const auto &n : x->nodes) {
		if (broken.load())
			break;
		switch (n.type) {
		case NODE_KERNEL:
			if (!gpu_emu_grid_faults())
				gpu_emu_run_grid(&n.call, n.grid, n.block, n.smem);
			break;
		case NODE_MEMCPY:
			memmove(n.dst, n.src, n.count);
			break;
		case NODE_MEMSET:
			memset(n.dst, n.value, n.count);
			break;
		case NODE_EVENT:
			n.event->recorded = true;
			n.event->t_ms = now_ms();
			break;
		case NODE_HOST_WORK:
			if (!gpu_emu_grid_faults())
				n.call.run(n.call.args);
			break;
		}
	}
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	delete x;
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	delete g;
	return cudaSuccess;
}
