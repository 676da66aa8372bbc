/* holo-bench's measurements of the machine's own limits (machine.c): memory read bandwidth and
 * the bf16 multiply-add peak with every thread of the engine's pool, and the pool's cost of
 * starting a job. The engine command prints its rates as fractions of these. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* A buffer far larger than the caches, read by the pool's threads. */
struct bench_bw;
/* `bytes` is rounded down to a whole number of tasks of 64-byte lines; NULL (errno) on failure.
 * Word i of the buffer holds i + 1. */
struct bench_bw *bench_bw_create(size_t bytes);
void bench_bw_destroy(struct bench_bw *bw);
/* Bytes one pass reads. */
size_t bench_bw_bytes(const struct bench_bw *bw);
/* One timed pass over the whole buffer with every pool thread: bytes/s. */
double bench_bw_pass(struct bench_bw *bw);
/* Bytes of the buffer in 2 MiB pages (it is allocated as the engine's weights are, common.h
 * alloc_huge: whether the kernel backs it with huge pages decides the rate); -1: unknown. */
long long bench_bw_huge_bytes(const struct bench_bw *bw);
/* "N of M MB in 2 MiB pages" or "in 4 KiB pages" for the buffer, into buf. */
const char *bench_bw_pages(const struct bench_bw *bw, char *buf, size_t len);
/* The sum of the 64-bit words the last pass read (n (n + 1) / 2 for n words when every word
 * was read once). */
uint64_t bench_bw_last_sum(const struct bench_bw *bw);

/* The bf16 peak. The units, from the fastest: "amx" (tdpbf16ps on 16x16 tiles, only once the
 * kernel has granted the tile state), "avx512bf16" (vdpbf16ps), "fma" (fp32 FMA on 8 lanes,
 * bf16 widened first). */
struct bench_peak {
	const char *unit;
	double flops_per_s; /* all pool threads */
	const char *note;   /* why a faster unit was not used, or "" */
};
/* Measures the fastest unit this CPU (and its kernel) runs, or `unit` when not NULL, for at least
 * `seconds`. -ENOTSUP when `unit` cannot run here. */
int bench_bf16_peak(const char *unit, double seconds, struct bench_peak *ret_peak);
/* Runs `iters` iterations of `unit`'s kernel on the calling thread: each iteration is a known
 * number of instructions on all-ones inputs, so every fp32 accumulator ends at
 * iters * (its gain per instruction). Stores the value of one accumulator and the flops done;
 * -ENOTSUP when `unit` cannot run here. For the tests of the measurement. */
int bench_peak_kernel(const char *unit, long iters, float *ret_acc, double *ret_flops);
/* An accumulator's gain per instruction of `unit` (2 for vdpbf16ps: two products of 1 * 1). */
float bench_peak_gain(const char *unit);

/* The pool's cost of one job: the time a job of one 50-microsecond task per thread takes beyond
 * 50 microseconds, back to back (workers spinning) and after the workers have gone to sleep.
 * Medians of `n` jobs, in seconds. */
void bench_pool_wake(int n, double *ret_hot, double *ret_cold);
