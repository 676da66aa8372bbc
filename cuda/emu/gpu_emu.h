/* gpu_emu.h: the CUDA execution model on the CPU, device side (C++ only).
 *
 * Included in front of every .cu file when the tree is configured with -Dcuda-emulation=true
 * (the build compiles a generated .cc that includes this header, then the .cu, so __FILE__ stays
 * the .cu path). NVIDIA's own headers give the types (dim3, __half, __nv_bfloat16) and host
 * arithmetic; this header supplies what they keep device-only: the built-in variables, shared
 * memory, barriers, warp collectives, atomics, intrinsics, WMMA and the klaunch() launcher.
 *
 * Execution model (see sched.cc): every CUDA thread of a block is a fiber; the blocks of a grid run
 * one after another on one emulation thread, so shared memory is per block and plain memory
 * operations are atomic. Collectives block the calling fiber until every thread (barrier) or every
 * lane of the mask (warp collective) has arrived; a divergent barrier, a collective whose lanes
 * disagree and a scheduler pass with no progress abort with both source lines named.
 */
#pragma once

#ifndef __cplusplus
#error "gpu_emu.h is the device side of the CUDA emulation: include it from C++ (a .cu file)"
#endif

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---- qualifiers cuda_runtime.h leaves undefined or GCC-incompatible outside nvcc ---------- */

/* Occupancy and register hints mean nothing on the CPU. */
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __maxnreg__
#define __maxnreg__(n)
#undef __grid_constant__
#define __grid_constant__
#ifndef __noinline__
#define __noinline__ __attribute__((noinline))
#endif

/* ---- control (tests and tools) ------------------------------------------------------------ */

/* Order in which the threads of a block run between two synchronisation points. The default comes
 * from HOLOD_GPU_EMU_ORDER=forward|reverse|random[:SEED] (forward when unset); reverse also runs
 * the blocks of a grid last to first; random reshuffles the threads at every scheduler pass. */
enum gpu_emu_order { GPU_EMU_ORDER_FORWARD, GPU_EMU_ORDER_REVERSE, GPU_EMU_ORDER_RANDOM };
void gpu_emu_set_order(enum gpu_emu_order order, unsigned long long seed);
enum gpu_emu_order gpu_emu_get_order(void);
/* The emulated device memory (cudaMalloc fails with cudaErrorMemoryAllocation past it; default
 * from HOLOD_GPU_EMU_MEMORY, e.g. 64M, else 80G). */
void gpu_emu_set_memory_limit(size_t bytes);
/* The emulated architecture's limits: 9 (sm_90, H100) or 8 (sm_80, A100); default from
 * HOLOD_GPU_EMU_ARCH=sm_90|sm_89|sm_86|sm_80, else sm_90 (sm_89 and sm_86: compute capability
 * 8.9 and 8.6, 99 KiB of opt-in shared memory per block; kernels use sm_80's register budget).
 * -EINVAL for another. */
int gpu_emu_set_arch(int major);
/* The layout of WMMA fragments (which matrix element each lane's fragment.x[i] holds, unspecified
 * by NVIDIA): identity (lane l holds elements l * num_elements ... of the row-major tile) or a
 * random one per fragment type drawn from `seed`. The default comes from
 * HOLOD_GPU_EMU_WMMA_LAYOUT=identity|random[:SEED]; without a seed (or the variable), from
 * HOLOD_GPU_EMU_ORDER's seed when that order is random, else a seed of its own per process run,
 * printed (with the variable that repeats it) when a process that used WMMA fails. Call it between
 * launches. */
enum gpu_emu_wmma_layout_kind { GPU_EMU_WMMA_IDENTITY, GPU_EMU_WMMA_RANDOM };
void gpu_emu_set_wmma_layout(enum gpu_emu_wmma_layout_kind layout, unsigned long long seed);

/* ---- built-in variables ------------------------------------------------------------------- */

/* Written by the scheduler before it resumes a fiber; only the emulation thread reads them. */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
constexpr int warpSize = 32;

/* ---- shared memory ------------------------------------------------------------------------ */

/* Static shared memory is thread-local storage of the emulation thread: one copy per variable
 * (per template instantiation), valid for the running block, filled with 0xFF bytes (NaN for
 * float, bf16 and half) at every block start. */
#undef __shared__
#define __shared__ static thread_local

/* The running block's dynamic shared memory: a heap buffer of exactly the launch's size (so
 * AddressSanitizer reports overruns), GPU_EMU_DYNAMIC_SHARED_ALIGN-byte aligned as
 * GPU_DYNAMIC_SHARED declares it under nvcc (klaunch.h) and never more (it sits at an odd
 * multiple of that), filled with 0xFF at every block start; NULL for a launch without any. */
#define GPU_EMU_DYNAMIC_SHARED_ALIGN 32
void *gpu_emu_dynamic_shared(void);
/* Inside a kernel body only (under nvcc it is the usual `extern __shared__` array). */
#define GPU_DYNAMIC_SHARED(T, name) T *const name = static_cast<T *>(gpu_emu_dynamic_shared())

/* ---- barriers ----------------------------------------------------------------------------- */

enum gpu_emu_bar_kind { GPU_EMU_BAR_SYNC, GPU_EMU_BAR_COUNT, GPU_EMU_BAR_AND, GPU_EMU_BAR_OR };
int gpu_emu_syncthreads(enum gpu_emu_bar_kind kind, int pred, const char *file, int line);
#define __syncthreads() ((void)gpu_emu_syncthreads(GPU_EMU_BAR_SYNC, 0, __FILE__, __LINE__))
#define __syncthreads_count(p) gpu_emu_syncthreads(GPU_EMU_BAR_COUNT, (p) != 0, __FILE__, __LINE__)
#define __syncthreads_and(p) gpu_emu_syncthreads(GPU_EMU_BAR_AND, (p) != 0, __FILE__, __LINE__)
#define __syncthreads_or(p) gpu_emu_syncthreads(GPU_EMU_BAR_OR, (p) != 0, __FILE__, __LINE__)
/* Blocks run one at a time in program order: memory fences have nothing to order. */
#define __threadfence() ((void)0)
#define __threadfence_block() ((void)0)

/* ---- warp collectives --------------------------------------------------------------------- */

enum gpu_emu_warp_kind {
	GPU_EMU_WARP_SYNC,
	GPU_EMU_WARP_SHFL,
	GPU_EMU_WARP_SHFL_UP,
	GPU_EMU_WARP_SHFL_DOWN,
	GPU_EMU_WARP_SHFL_XOR,
	GPU_EMU_WARP_BALLOT,
	GPU_EMU_WARP_ANY,
	GPU_EMU_WARP_ALL,
	GPU_EMU_WARP_WMMA, /* the wmma::*_sync calls */
};
/* Blocks until every lane of `mask` has arrived at a collective of the same kind with the same
 * mask, then returns this lane's result: the 8 value bytes of the source lane for shuffles, the
 * ballot / any / all result otherwise. */
uint64_t gpu_emu_warp(enum gpu_emu_warp_kind kind, unsigned mask, uint64_t value, int arg, int width,
		      const char *file, int line);
/* The lanes of the calling thread's warp that reach this call site together: it waits until no
 * lane of the warp can run on, then returns the lanes waiting at the same site (sched.cc). */
unsigned gpu_emu_activemask(const char *file, int line);

template <typename T> static inline uint64_t gpu_emu_to_bits(T v)
{
	static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
		      "warp shuffles move at most 8 bytes of a trivially copyable type");
	uint64_t b = 0;
	memcpy((void *)&b, (const void *)&v, sizeof(T));
	return b;
}
template <typename T> static inline T gpu_emu_from_bits(uint64_t b)
{
	T v;
	memcpy((void *)&v, (const void *)&b, sizeof(T));
	return v;
}
template <typename T>
static inline T gpu_emu_shfl(enum gpu_emu_warp_kind k, unsigned mask, T v, int arg, int width,
			     const char *file, int line)
{
	return gpu_emu_from_bits<T>(gpu_emu_warp(k, mask, gpu_emu_to_bits(v), arg, width, file, line));
}
#define GPU_EMU_SHFL_(k, mask, v, arg, ...) gpu_emu_shfl(k, mask, v, arg, __VA_ARGS__ + 0, __FILE__, __LINE__)
/* The optional width argument: an absent one reads as `+ 0`, which the scheduler takes as 32. */
#define __shfl_sync(mask, v, ...) GPU_EMU_SHFL_(GPU_EMU_WARP_SHFL, mask, v, __VA_ARGS__)
#define __shfl_up_sync(mask, v, ...) GPU_EMU_SHFL_(GPU_EMU_WARP_SHFL_UP, mask, v, __VA_ARGS__)
#define __shfl_down_sync(mask, v, ...) GPU_EMU_SHFL_(GPU_EMU_WARP_SHFL_DOWN, mask, v, __VA_ARGS__)
#define __shfl_xor_sync(mask, v, ...) GPU_EMU_SHFL_(GPU_EMU_WARP_SHFL_XOR, mask, v, __VA_ARGS__)
#define __ballot_sync(mask, p)                                                                               \
	((unsigned)gpu_emu_warp(GPU_EMU_WARP_BALLOT, mask, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __any_sync(mask, p) ((int)gpu_emu_warp(GPU_EMU_WARP_ANY, mask, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __all_sync(mask, p) ((int)gpu_emu_warp(GPU_EMU_WARP_ALL, mask, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __syncwarp(...)                                                                                       \
	((void)gpu_emu_warp(GPU_EMU_WARP_SYNC, gpu_emu_syncwarp_mask(__VA_ARGS__ + 0u, #__VA_ARGS__[0] == 0), \
			    0, 0, 32, __FILE__, __LINE__))
static inline unsigned gpu_emu_syncwarp_mask(unsigned mask, bool absent)
{
	return absent ? 0xffffffffu : mask;
}
#define __activemask() gpu_emu_activemask(__FILE__, __LINE__)
/* Aborts naming the call: WMMA needs 256-bit aligned pointers and a 16-byte multiple stride. */
[[noreturn]] void gpu_emu_wmma_misuse(const char *what, const void *p, unsigned ldm, const char *file,
				      int line);
/* The layout of WMMA fragment type `type` (nvcuda::wmma::fragment::gpu_emu_type) this run, each
 * lane holding `per_lane` elements: lane l's x[i] is element element[l * per_lane + i] of the tile
 * (row * cols + col), and slot[e] is a slot l * per_lane + i that holds element e. Fragment types
 * with two lanes per element (per_lane 16) hold each element in two slots. Emulation thread only. */
struct gpu_emu_wmma_map {
	uint16_t element[512];
	uint16_t slot[256];
};
const struct gpu_emu_wmma_map *gpu_emu_wmma_layout(int type, int per_lane);
/* One lane's operands of wmma::mma_sync, the value it brings to its warp collective: when the last
 * lane of the warp arrives, compute(peers) runs with every lane's operands (peers[l]: lane l's,
 * all of one call) and writes every lane's d, while they wait (sched.cc). */
struct gpu_emu_mma_operands {
	void (*compute)(const struct gpu_emu_mma_operands *const *peers);
	const void *a, *b, *c;
	void *d;
};

/* ---- atomics: one emulation thread runs every fiber, so plain read-modify-write is atomic ---- */

/* The operand is not deduced, so atomicAdd(&unsigned_counter, 1) works as with CUDA's overloads. */
template <typename T> struct gpu_emu_same {
	typedef T type;
};

template <typename T> static inline T atomicAdd(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = old + v;
	return old;
}
template <typename T> static inline T atomicSub(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = old - v;
	return old;
}
template <typename T> static inline T atomicExch(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = v;
	return old;
}
template <typename T> static inline T atomicMax(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = old < v ? v : old;
	return old;
}
template <typename T> static inline T atomicMin(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = v < old ? v : old;
	return old;
}
template <typename T>
static inline T atomicCAS(T *p, typename gpu_emu_same<T>::type compare, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	if (old == compare)
		*p = v;
	return old;
}
template <typename T> static inline T atomicOr(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = old | v;
	return old;
}
template <typename T> static inline T atomicAnd(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = old & v;
	return old;
}
template <typename T> static inline T atomicXor(T *p, typename gpu_emu_same<T>::type v)
{
	T old = *p;
	*p = old ^ v;
	return old;
}
static inline unsigned atomicInc(unsigned *p, unsigned limit)
{
	unsigned old = *p;
	*p = old >= limit ? 0 : old + 1;
	return old;
}

/* ---- intrinsics NVIDIA's headers keep device-only ----------------------------------------- */

/* Exact here, approximate on the GPU: compare with tolerances (gpu-testing.md). */
static inline float rsqrtf(float x)
{
	return 1.0f / sqrtf(x);
}
static inline double rsqrt(double x)
{
	return 1.0 / sqrt(x);
}
/* __expf, __logf, __sinf, __cosf, __powf: glibc's math.h declares them (its own names of expf,
 * logf, ...), so they need no definition here. */
static inline float __fdividef(float x, float y)
{
	return x / y;
}
static inline float __frcp_rn(float x)
{
	return 1.0f / x;
}
static inline float __fsqrt_rn(float x)
{
	return sqrtf(x);
}
static inline float __saturatef(float x)
{
	return x > 1.0f ? 1.0f : x > 0.0f ? x : 0.0f;
} /* NaN -> 0 */
static inline float __fmaf_rn(float a, float b, float c)
{
	return fmaf(a, b, c);
}
static inline float __fadd_rn(float a, float b)
{
	return a + b;
}
static inline float __fmul_rn(float a, float b)
{
	return a * b;
}
static inline int __float_as_int(float x)
{
	return gpu_emu_from_bits<int>(gpu_emu_to_bits(x));
}
static inline unsigned __float_as_uint(float x)
{
	return gpu_emu_from_bits<unsigned>(gpu_emu_to_bits(x));
}
static inline float __int_as_float(int x)
{
	return gpu_emu_from_bits<float>(gpu_emu_to_bits(x));
}
static inline float __uint_as_float(unsigned x)
{
	return gpu_emu_from_bits<float>(gpu_emu_to_bits(x));
}
static inline int __popc(unsigned x)
{
	return __builtin_popcount(x);
}
static inline int __popcll(unsigned long long x)
{
	return __builtin_popcountll(x);
}
static inline int __clz(int x)
{
	return x ? __builtin_clz((unsigned)x) : 32;
}
static inline int __clzll(long long x)
{
	return x ? __builtin_clzll((unsigned long long)x) : 64;
}
static inline int __ffs(int x)
{
	return __builtin_ffs(x);
}
static inline int __ffsll(long long x)
{
	return __builtin_ffsll(x);
}
static inline unsigned __brev(unsigned x)
{
	unsigned r = 0;
	for (int i = 0; i < 32; i++, x >>= 1)
		r = (r << 1) | (x & 1u);
	return r;
}
template <typename T> static inline T __ldg(const T *p)
{
	return *p;
}
template <typename T> static inline T __ldcs(const T *p)
{
	return *p;
}
template <typename T> static inline void __stcs(T *p, T v)
{
	*p = v;
}

/* Device min/max: CUDA has overloads for every arithmetic type in the global namespace. */
static inline int min(int a, int b)
{
	return a < b ? a : b;
}
static inline int max(int a, int b)
{
	return a > b ? a : b;
}
static inline unsigned min(unsigned a, unsigned b)
{
	return a < b ? a : b;
}
static inline unsigned max(unsigned a, unsigned b)
{
	return a > b ? a : b;
}
static inline long long min(long long a, long long b)
{
	return a < b ? a : b;
}
static inline long long max(long long a, long long b)
{
	return a > b ? a : b;
}
static inline unsigned long long min(unsigned long long a, unsigned long long b)
{
	return a < b ? a : b;
}
static inline unsigned long long max(unsigned long long a, unsigned long long b)
{
	return a > b ? a : b;
}
static inline float min(float a, float b)
{
	return fminf(a, b);
}
static inline float max(float a, float b)
{
	return fmaxf(a, b);
}
static inline double min(double a, double b)
{
	return fmin(a, b);
}
static inline double max(double a, double b)
{
	return fmax(a, b);
}

/* half and bf16: computed in fp32 and rounded once, as the hardware does for these. */
static inline __half __hfma(__half a, __half b, __half c)
{
	return __float2half(fmaf(__half2float(a), __half2float(b), __half2float(c)));
}
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c)
{
	return __float2bfloat16(fmaf(__bfloat162float(a), __bfloat162float(b), __bfloat162float(c)));
}
static inline __half hexp(__half a)
{
	return __float2half(expf(__half2float(a)));
}
static inline __half hsqrt(__half a)
{
	return __float2half(sqrtf(__half2float(a)));
}
static inline __half hrsqrt(__half a)
{
	return __float2half(1.0f / sqrtf(__half2float(a)));
}
static inline __nv_bfloat16 hexp(__nv_bfloat16 a)
{
	return __float2bfloat16(expf(__bfloat162float(a)));
}
static inline __nv_bfloat16 hsqrt(__nv_bfloat16 a)
{
	return __float2bfloat16(sqrtf(__bfloat162float(a)));
}
static inline __nv_bfloat16 hrsqrt(__nv_bfloat16 a)
{
	return __float2bfloat16(1.0f / sqrtf(__bfloat162float(a)));
}
/* bf16 -> int, round to nearest even; NaN gives 0 as on the GPU, out of range saturates. */
static inline int __bfloat162int_rn(__nv_bfloat16 a)
{
	float f = __bfloat162float(a);
	if (f != f)
		return 0;
	if (f >= 2147483648.0f)
		return 2147483647;
	if (f <= -2147483648.0f)
		return (-2147483647 - 1);
	return (int)nearbyintf(f);
}
static inline int __half2int_rn(__half a)
{
	float f = __half2float(a);
	return f != f ? 0 : (int)nearbyintf(f);
}

/* ---- WMMA (nvcuda::wmma): m16n16k16, bf16 or half inputs, fp32 accumulators ---------------- */

/* Which matrix element fragment.x[i] holds in which lane is unspecified on the GPU (it differs
 * between architectures), so the emulation draws it: every fragment type (use, element type,
 * layout) gets a layout of its own per run, a mapping of (lane, i) onto the tile's elements,
 * from HOLOD_GPU_EMU_WMMA_LAYOUT (sched.cc). Each lane holds num_elements elements, as many as
 * NVIDIA's mma.h gives it (8; 16 for half matrix_a/matrix_b, where every element sits in two
 * lanes), so element-wise loops over x[0..num_elements) that treat every element alike keep
 * working (fill_fragment, scaling), and a kernel that reads meaning into x[i]'s index or lane
 * computes garbage here as it may on some GPU. load/store/mma are warp collectives over all 32
 * lanes (each waits for the whole warp first), so a lane that skips one is reported as a deadlock.
 * Each lane loads and stores its own elements; mma_sync hands every lane's operands to the last
 * lane to arrive, which computes the warp's product (in fp32, k ascending, whatever the layout:
 * the same bits under every layout) into every lane's d. */
namespace nvcuda
{
namespace wmma
{

struct row_major {
};
struct col_major {
};
struct matrix_a {
};
struct matrix_b {
};
struct accumulator {
};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K> struct gpu_emu_shape;
template <int M, int N, int K> struct gpu_emu_shape<matrix_a, M, N, K> {
	enum { rows = M, cols = K, use = 0 };
};
template <int M, int N, int K> struct gpu_emu_shape<matrix_b, M, N, K> {
	enum { rows = K, cols = N, use = 1 };
};
template <int M, int N, int K> struct gpu_emu_shape<accumulator, M, N, K> {
	enum { rows = M, cols = N, use = 2 };
};
template <typename T> struct gpu_emu_elem {
	enum { index = std::is_same<T, __nv_bfloat16>::value ? 0 : std::is_same<T, __half>::value ? 1 : 2 };
};
template <typename L> struct gpu_emu_layout {
	enum { index = std::is_same<L, row_major>::value ? 0 : std::is_same<L, col_major>::value ? 1 : 2 };
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void> class fragment
{
	static_assert(M == 16 && N == 16 && K == 16,
		      "the CUDA emulation implements the m16n16k16 WMMA shape");
	static_assert(std::is_same<Use, accumulator>::value ?
			      std::is_same<T, float>::value :
			      std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
		      "the CUDA emulation implements bf16 and half inputs with fp32 accumulators");

      public:
	typedef T element_type;
	typedef T storage_element_type;
	/* per lane, as in NVIDIA's mma.h */
	enum {
		num_elements =
			!std::is_same<Use, accumulator>::value && std::is_same<T, __half>::value ? 16 : 8
	};
	T x[num_elements];
	/* the emulation's: the tile's shape and the index of this type's layout */
	enum {
		gpu_emu_rows = gpu_emu_shape<Use, M, N, K>::rows,
		gpu_emu_cols = gpu_emu_shape<Use, M, N, K>::cols,
		gpu_emu_type = gpu_emu_shape<Use, M, N, K>::use * 9 + gpu_emu_elem<T>::index * 3 +
			       gpu_emu_layout<Layout>::index,
	};
};

template <typename Use, int M, int N, int K, typename T, typename L>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, const T &v)
{
	for (int i = 0; i < f.num_elements; i++)
		f.x[i] = v;
}

static inline int gpu_emu_lane(void)
{
	return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32);
}

/* The layout of fragment type F this run. */
template <typename F> static inline const struct gpu_emu_wmma_map *gpu_emu_map(void)
{
	return gpu_emu_wmma_layout(F::gpu_emu_type, F::num_elements);
}

static inline void gpu_emu_wmma_enter(const char *what, const void *p, unsigned ldm, size_t elem,
				      const char *file, int line)
{
	if ((uintptr_t)p % 32 != 0 || (ldm * elem) % 16 != 0)
		gpu_emu_wmma_misuse(what, p, ldm, file, line);
	gpu_emu_warp(GPU_EMU_WARP_WMMA, 0xffffffffu, 0, 0, 32, file, line);
}

/* This lane's elements of the tile at p. */
template <typename Use, int M, int N, int K, typename T, typename L>
static inline void gpu_emu_load(fragment<Use, M, N, K, T, L> &f, const T *p, unsigned ldm, bool col)
{
	typedef fragment<Use, M, N, K, T, L> F;
	const uint16_t *el = gpu_emu_map<F>()->element + gpu_emu_lane() * F::num_elements;
	for (int i = 0; i < F::num_elements; i++) {
		int r = el[i] / F::gpu_emu_cols, c = el[i] % F::gpu_emu_cols;
		f.x[i] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
	}
}

template <typename Use, int M, int N, int K, typename T, typename L>
static inline void load_matrix_sync_at(const char *file, int line, fragment<Use, M, N, K, T, L> &f,
				       const T *p, unsigned ldm)
{
	static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load names its layout_t");
	gpu_emu_wmma_enter("wmma::load_matrix_sync", p, ldm, sizeof(T), file, line);
	gpu_emu_load(f, p, ldm, std::is_same<L, col_major>::value);
}

template <int M, int N, int K, typename T>
static inline void load_matrix_sync_at(const char *file, int line, fragment<accumulator, M, N, K, T> &f,
				       const T *p, unsigned ldm, layout_t layout)
{
	gpu_emu_wmma_enter("wmma::load_matrix_sync", p, ldm, sizeof(T), file, line);
	gpu_emu_load(f, p, ldm, layout == mem_col_major);
}

template <int M, int N, int K, typename T>
static inline void store_matrix_sync_at(const char *file, int line, T *p,
					const fragment<accumulator, M, N, K, T> &f, unsigned ldm,
					layout_t layout)
{
	typedef fragment<accumulator, M, N, K, T> F;
	gpu_emu_wmma_enter("wmma::store_matrix_sync", p, ldm, sizeof(T), file, line);
	const uint16_t *el = gpu_emu_map<F>()->element + gpu_emu_lane() * F::num_elements;
	for (int i = 0; i < F::num_elements; i++) {
		int r = el[i] / F::gpu_emu_cols, c = el[i] % F::gpu_emu_cols;
		(layout == mem_col_major ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c]) = f.x[i];
	}
}

/* The tile of fragment type F from every lane's x[] (one copy of each element). */
template <typename F>
static inline void gpu_emu_gather(float *tile, const struct gpu_emu_mma_operands *const *peers,
				  const void *gpu_emu_mma_operands::*which)
{
	const uint16_t *slot = gpu_emu_map<F>()->slot;
	for (int e = 0; e < F::gpu_emu_rows * F::gpu_emu_cols; e++)
		tile[e] = (float)static_cast<const F *>(peers[slot[e] / F::num_elements]->*which)
				  ->x[slot[e] % F::num_elements];
}

/* The warp's d = a * b + c, products and sums in fp32, k ascending, into every lane's d. */
template <typename FA, typename FB, typename FC>
static void gpu_emu_mma_compute(const struct gpu_emu_mma_operands *const *peers)
{
	enum { M = FC::gpu_emu_rows, N = FC::gpu_emu_cols, K = FA::gpu_emu_cols };
	float A[M * K], B[K * N], C[M * N];
	gpu_emu_gather<FA>(A, peers, &gpu_emu_mma_operands::a);
	gpu_emu_gather<FB>(B, peers, &gpu_emu_mma_operands::b);
	gpu_emu_gather<FC>(C, peers, &gpu_emu_mma_operands::c);
	const uint16_t *el = gpu_emu_map<FC>()->element;
	for (int l = 0; l < 32; l++) {
		FC *d = static_cast<FC *>(peers[l]->d);
		for (int i = 0; i < FC::num_elements; i++) {
			int e = el[l * FC::num_elements + i], r = e / N, c = e % N;
			float acc = C[e];
			for (int k = 0; k < K; k++)
				acc += A[r * K + k] * B[k * N + c];
			d->x[i] = acc;
		}
	}
}

template <int M, int N, int K, typename T, typename LA, typename LB>
static inline void mma_sync_at(const char *file, int line, fragment<accumulator, M, N, K, float> &d,
			       const fragment<matrix_a, M, N, K, T, LA> &a,
			       const fragment<matrix_b, M, N, K, T, LB> &b,
			       const fragment<accumulator, M, N, K, float> &c)
{
	struct gpu_emu_mma_operands mine = {
		gpu_emu_mma_compute<fragment<matrix_a, M, N, K, T, LA>, fragment<matrix_b, M, N, K, T, LB>,
				    fragment<accumulator, M, N, K, float>>,
		&a,
		&b,
		&c,
		&d,
	};
	gpu_emu_warp(GPU_EMU_WARP_WMMA, 0xffffffffu, (uint64_t)(uintptr_t)&mine, 0, 32, file, line);
}

} // namespace wmma
} // namespace nvcuda

#define load_matrix_sync(...) load_matrix_sync_at(__FILE__, __LINE__, __VA_ARGS__)
#define store_matrix_sync(...) store_matrix_sync_at(__FILE__, __LINE__, __VA_ARGS__)
#define mma_sync(...) mma_sync_at(__FILE__, __LINE__, __VA_ARGS__)

/* ---- launches ----------------------------------------------------------------------------- */

/* One kernel launch as the runtime sees it: the arguments are a heap copy owned by the record
 * (kernel parameters are passed by value, and a captured graph must keep them). */
struct gpu_emu_kernel_call {
	const void *kernel; /* identity for cudaFuncSetAttribute */
	void (*run)(const void *args);
	void *(*clone)(const void *args);
	void (*destroy)(void *args);
	void *args;
	const char *text; /* the launch's argument text, for messages */
	const char *file;
	int line;
};
/* Checks the configuration (recording the error for cudaGetLastError), then runs the grid, or
 * records it when `stream` is capturing. Takes ownership of call->args. */
void gpu_emu_launch(struct gpu_emu_kernel_call *call, dim3 grid, dim3 block, size_t smem, cudaStream_t stream);

/* The most devices HOLOD_GPU_EMU_DEVICES gives (runtime.cc). */
#define GPU_EMU_MAX_DEVICES 8
/* Aborts naming the launch when kernel argument `index`, a pointer, points into the memory of
 * another device than the one the kernel runs on (the stream's). */
void gpu_emu_check_kernel_pointer(const void *p, int index, cudaStream_t stream, const char *file, int line,
				  const char *text);
template <typename T>
static inline void gpu_emu_check_arg(const T &v, int index, cudaStream_t stream, const char *file, int line,
				     const char *text)
{
	if constexpr (std::is_pointer<T>::value)
		gpu_emu_check_kernel_pointer((const void *)v, index, stream, file, line, text);
}

template <typename Tuple, typename... KArgs> struct gpu_emu_thunk {
	static void run(const void *args)
	{
		void (*kernel)(KArgs...) = std::get<0>(*static_cast<const Tuple *>(args));
		/* Each thread gets its own copy of the parameters, as on the GPU. */
		Tuple t = *static_cast<const Tuple *>(args);
		std::apply([kernel](auto, auto... a) { kernel(a...); }, t);
	}
	static void *clone(const void *args)
	{
		return new Tuple(*static_cast<const Tuple *>(args));
	}
	static void destroy(void *args)
	{
		delete static_cast<Tuple *>(args);
	}
};

/* Copy-initialisation, as when nvcc passes an argument to a kernel parameter: an explicit-only
 * conversion that <<<>>> would reject is rejected here too. */
template <typename To> static inline To gpu_emu_implicit(To v)
{
	return v;
}

template <typename... KArgs, typename... Args>
static inline void gpu_emu_klaunch(const char *text, const char *file, int line, void (*kernel)(KArgs...),
				   dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args &&...args)
{
	static_assert(sizeof...(KArgs) == sizeof...(Args), "klaunch: wrong number of kernel arguments");
	typedef std::tuple<void (*)(KArgs...), std::decay_t<KArgs>...> Tuple;
	typedef gpu_emu_thunk<Tuple, KArgs...> Thunk;
	struct gpu_emu_kernel_call call = {
		(const void *)kernel,
		Thunk::run,
		Thunk::clone,
		Thunk::destroy,
		new Tuple(kernel, gpu_emu_implicit<std::decay_t<KArgs>>(std::forward<Args>(args))...),
		text,
		file,
		line,
	};
	std::apply(
		[&](auto, const auto &...a) {
			int i = 0;
			(gpu_emu_check_arg(a, i++, stream, file, line, text), ...);
		},
		*static_cast<const Tuple *>(call.args));
	gpu_emu_launch(&call, grid, block, smem, stream);
}
/* cuda_runtime.h declares its C++ overloads that take a kernel only for nvcc. */
template <typename... KArgs>
static inline cudaError_t cudaFuncSetAttribute(void (*kernel)(KArgs...), enum cudaFuncAttribute attr,
					       int value)
{
	return ::cudaFuncSetAttribute((const void *)kernel, attr, value);
}

template <typename... KArgs>
static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, void (*kernel)(KArgs...))
{
	return ::cudaFuncGetAttributes(attr, (const void *)kernel);
}

/* __constant__ and __device__ variables are ordinary host globals here: a symbol's address is its
 * device address. */
template <typename T>
static inline cudaError_t cudaMemcpyToSymbol(const T &symbol, const void *src, size_t count, size_t offset = 0,
					     enum cudaMemcpyKind kind = cudaMemcpyHostToDevice)
{
	return ::cudaMemcpyToSymbol((const void *)&symbol, src, count, offset, kind);
}
template <typename T>
static inline cudaError_t cudaMemcpyToSymbolAsync(const T &symbol, const void *src, size_t count,
						  size_t offset, enum cudaMemcpyKind kind,
						  cudaStream_t stream = 0)
{
	return ::cudaMemcpyToSymbolAsync((const void *)&symbol, src, count, offset, kind, stream);
}
template <typename T>
static inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t count, size_t offset = 0,
					       enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost)
{
	return ::cudaMemcpyFromSymbol(dst, (const void *)&symbol, count, offset, kind);
}
template <typename T> static inline cudaError_t cudaGetSymbolAddress(void **ret, const T &symbol)
{
	return ::cudaGetSymbolAddress(ret, (const void *)&symbol);
}

#define klaunch(...) gpu_emu_klaunch(#__VA_ARGS__, __FILE__, __LINE__, __VA_ARGS__)
