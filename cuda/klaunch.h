/* klaunch.h: the one way .cu files launch kernels, under nvcc and under the CPU emulation.
 *
 *   klaunch(kernel, grid, block, dynamic_smem_bytes, stream, args...);
 *
 * is `kernel<<<grid, block, dynamic_smem_bytes, stream>>>(args...)` under nvcc and runs the grid on
 * the CPU under -Dcuda-emulation=true (cuda/emu/gpu_emu.h). As with <<<>>>, a refused
 * configuration is reported by cudaGetLastError(), never by a return value.
 *
 * GPU_DYNAMIC_SHARED(T, name) declares `T *const name`, the block's dynamic shared memory (32-byte
 * aligned, what WMMA's loads and stores need: more would pad a kernel's static shared memory up
 * to it; the emulation hands out exactly 32), inside a kernel body: the `extern __shared__` array under nvcc,
 * the running block's buffer under the emulation.
 */
#pragma once

#include <cuda_runtime.h>

#if defined(__CUDACC__)
#include <utility>

/* One untyped array for every kernel: nvcc rejects `extern __shared__ T name[]` declared with
 * two element types in one translation unit (templates instantiated for float and bf16). */
#define GPU_DYNAMIC_SHARED(T, name)                                                                          \
	extern __shared__ __align__(32) unsigned char gpu_dynamic_shared_bytes_[];                           \
	T *const name = reinterpret_cast<T *>(gpu_dynamic_shared_bytes_)

template <typename... KArgs, typename... Args>
static inline void klaunch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
			   Args &&...args)
{
	kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
}
#else
#include "emu/gpu_emu.h"
#endif
