/* Shared between the emulation's scheduler (sched.cc) and runtime (runtime.cc). */
#pragma once

#include "gpu_emu.h"

/* Runs every block of the grid on the emulation thread and returns when the grid is done. The
 * configuration has been checked. Serialises concurrent callers (one grid runs at a time). */
void gpu_emu_run_grid(const struct gpu_emu_kernel_call *call, dim3 grid, dim3 block, size_t smem);

/* Aborts the process after printing "gpu-emu: <message>" (programmer errors in kernels). */
[[noreturn]] void gpu_emu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
