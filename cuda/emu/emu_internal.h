/* Shared between the emulation's scheduler (sched.cc) and runtime (runtime.cc). */
#pragma once

#include "gpu_emu.h"

/* Runs every block of the grid on the emulation thread and returns when the grid is done. The
 * configuration has been checked. Serialises concurrent callers (one grid runs at a time). */
void gpu_emu_run_grid(const struct gpu_emu_kernel_call *call, dim3 grid, dim3 block, size_t smem);

/* Whether the grid (or library call standing in for one) about to run must not: the context is
 * broken by an injected fault, or the fault fires now (HOLOD_GPU_EMU_FAULT, runtime.cc). */
bool gpu_emu_grid_faults(void);

/* Records host work (a library stand-in's call, such as cublasLtMatmul) into the graph that
 * `stream` is capturing: cudaGraphLaunch runs call->run(call->args) on the replaying thread, in
 * order with the graph's kernels and copies; instantiation clones the args, the graph destroys
 * them. The stream must be capturing (the caller asks cudaStreamIsCapturing first; outside a
 * capture it runs the work itself). Takes ownership of call->args; call->kernel is unused. */
void gpu_emu_capture_host_work(struct gpu_emu_kernel_call *call, cudaStream_t stream);

/* True when the `bytes` bytes at `p` lie inside one live cudaMalloc allocation. Every pointer
 * is host memory here, so a library stand-in asks this before dereferencing what a GPU could not
 * (a host pointer, or a range running past its allocation). Walks the allocation table: for
 * per-call checks, not per element. */
bool gpu_emu_is_device_range(const void *p, size_t bytes);

/* The device whose cudaMalloc block holds byte p, or -1 when none does. */
int gpu_emu_device_of(const void *p);
/* The calling host thread's current device (cudaSetDevice). */
int gpu_emu_current_device(void);
/* The device of `stream` (the current one for the default stream). */
int gpu_emu_stream_device(cudaStream_t stream);
/* Invalidates `stream`'s capture, if it is capturing (a library call refused inside it). */
void gpu_emu_invalidate_capture(cudaStream_t stream);

/* Lazy module loading: a function (a kernel, or a library stand-in's function named by any
 * stable address) used outside a capture is loaded on the current device from then on; its first
 * use inside a capture returns false with a message naming file:line and `what` (the caller
 * fails the capture) unless HOLOD_GPU_EMU_CAPTURE_LOAD=allow. */
bool gpu_emu_module_use(const void *key, bool capturing, const char *what, const char *file, int line);

/* The value of environment variable `var`: "4096", "64M", "80G" (K/M/G are powers of 1024);
 * `fallback` when unset or empty; aborts naming the variable when malformed. */
size_t gpu_emu_parse_size(const char *s, size_t fallback, const char *var);

/* Aborts the process after printing "gpu-emu: <message>" (programmer errors in kernels). */
[[noreturn]] void gpu_emu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cudaErrorLaunchOutOfResources when a block of `threads` threads of `kernel` needs more registers
 * than an SM of sm_<arch_major>0 has, by the kernel's line in cuda/resource-budget.txt (or in
 * $HOLOD_GPU_EMU_BUDGET); else cudaSuccess. Aborts naming a kernel without a line (budget.cc). */
cudaError_t gpu_emu_check_registers(const void *kernel, unsigned long long threads, int arch_major);
