/* Per-call-site device timing on a context's stream (gpu.h, "profile").
 *
 * Each begin/end pair records two CUDA events on the stream; the pairs wait in a pending ring
 * until gpu_profile_report() (or a full ring) synchronises and adds their elapsed times to the
 * site. Events are created once and reused, so a profiled forward allocates nothing per call. On
 * the emulation an event's time is the host clock when the stream reaches it.
 */
#include "gpu.h"
#include "gpu_internal.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Distinct call sites one context profiles (the forward has a few dozen). */
#define PROFILE_MAX_SITES 128
/* Begin/end pairs in flight before the host waits for the stream and folds them in. */
#define PROFILE_MAX_PENDING 512

struct profile_site {
	enum gpu_profile_kind kind;
	const char *name; /* the caller's static string */
	uint64_t calls;
	double ms;
};

struct profile_pending {
	int site;
	cudaEvent_t start, end;
};

struct gpu_profile {
	struct profile_site sites[PROFILE_MAX_SITES];
	int n_sites;
	struct profile_pending pending[PROFILE_MAX_PENDING];
	int n_pending;
	int open; /* pending index of the pair begun and not ended, -1 when none */
	struct gpu_copy_counts copies;
};

int gpu_profile_enable(struct gpu_context *g, bool on)
{
	GPU_BIND_OR_RETURN(g);
	if (!on) {
		gpu_profile_free(g);
		return 0;
	}
	if (g->profile)
		return 0;
	struct gpu_profile *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->open = -1;
	for (int i = 0; i < PROFILE_MAX_PENDING; i++) {
		int r = GPU_CHECK(cudaEventCreate(&p->pending[i].start));
		if (r >= 0)
			r = GPU_CHECK(cudaEventCreate(&p->pending[i].end));
		if (r < 0) {
			g->profile = p;
			gpu_profile_free(g);
			return r;
		}
	}
	g->profile = p;
	return 0;
}

bool gpu_profile_enabled(const struct gpu_context *g)
{
	return g->profile != NULL;
}

void gpu_profile_free(struct gpu_context *g)
{
	struct gpu_profile *p = g->profile;
	if (!p)
		return;
	for (int i = 0; i < PROFILE_MAX_PENDING; i++) {
		if (p->pending[i].start)
			cudaEventDestroy(p->pending[i].start);
		if (p->pending[i].end)
			cudaEventDestroy(p->pending[i].end);
	}
	free(p);
	g->profile = NULL;
}

/* Waits for the stream and adds every pending pair's time to its site. */
static int fold_pending(struct gpu_context *g)
{
	struct gpu_profile *p = g->profile;
	int r = GPU_CHECK(cudaStreamSynchronize((cudaStream_t)g->stream));
	for (int i = 0; i < p->n_pending && r >= 0; i++) {
		float ms = 0;
		r = GPU_CHECK(cudaEventElapsedTime(&ms, p->pending[i].start, p->pending[i].end));
		p->sites[p->pending[i].site].ms += ms;
	}
	p->n_pending = 0;
	return r;
}

static int find_site(struct gpu_profile *p, enum gpu_profile_kind kind, const char *name)
{
	for (int i = 0; i < p->n_sites; i++)
		if (p->sites[i].kind == kind &&
		    (p->sites[i].name == name || strcmp(p->sites[i].name, name) == 0))
			return i;
	if (p->n_sites == PROFILE_MAX_SITES)
		return -ENOSPC;
	p->sites[p->n_sites] = (struct profile_site){.kind = kind, .name = name};
	return p->n_sites++;
}

int gpu_profile_begin(struct gpu_context *g, enum gpu_profile_kind kind, const char *site)
{
	GPU_BIND_OR_RETURN(g);
	struct gpu_profile *p = g->profile;
	if (!p)
		return 0;
	if (p->open >= 0)
		return -EINVAL;
	int s = find_site(p, kind, site);
	if (s < 0)
		return s;
	if (p->n_pending == PROFILE_MAX_PENDING) {
		int r = fold_pending(g);
		if (r < 0)
			return r;
	}
	struct profile_pending *e = &p->pending[p->n_pending];
	int r = GPU_CHECK(cudaEventRecord(e->start, (cudaStream_t)g->stream));
	if (r < 0)
		return r;
	e->site = s;
	p->open = p->n_pending;
	return 0;
}

int gpu_profile_end(struct gpu_context *g)
{
	GPU_BIND_OR_RETURN(g);
	struct gpu_profile *p = g->profile;
	if (!p)
		return 0;
	if (p->open < 0)
		return -EINVAL;
	struct profile_pending *e = &p->pending[p->open];
	p->open = -1;
	int r = GPU_CHECK(cudaEventRecord(e->end, (cudaStream_t)g->stream));
	if (r < 0)
		return r;
	p->sites[e->site].calls++;
	p->n_pending++;
	return 0;
}

int gpu_profile_report(struct gpu_context *g, char ***ret_lines)
{
	GPU_BIND_OR_RETURN(g);
	struct gpu_profile *p = g->profile;
	*ret_lines = NULL;
	if (!p)
		return 0;
	int r = fold_pending(g);
	if (r < 0)
		return r;
	char **lines = calloc((size_t)p->n_sites + 1, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	int n = 0;
	for (int i = 0; i < p->n_sites; i++) {
		const struct profile_site *s = &p->sites[i];
		if (!s->calls)
			continue;
		bool kernel = s->kind == GPU_PROFILE_KERNEL;
		if (asprintf(&lines[n], "%s %s %s=%llu ms=%.3f", kernel ? "kernel" : "gemm", s->name,
			     kernel ? "launches" : "calls", (unsigned long long)s->calls, s->ms) < 0) {
			gpu_profile_lines_free(lines);
			return -ENOMEM;
		}
		n++;
	}
	*ret_lines = lines;
	return n;
}

void gpu_profile_lines_free(char **lines)
{
	for (size_t i = 0; lines && lines[i]; i++)
		free(lines[i]);
	free(lines);
}

void gpu_profile_clear(struct gpu_context *g)
{
	struct gpu_profile *p = g->profile;
	if (!p)
		return;
	(void)gpu_bind(g);
	(void)fold_pending(g);
	p->n_sites = 0;
	p->copies = (struct gpu_copy_counts){0};
}

void gpu_profile_copy(struct gpu_context *g, int kind, size_t bytes)
{
	struct gpu_profile *p = g->profile;
	if (!p)
		return;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		p->copies.to_device_calls++;
		p->copies.to_device_bytes += bytes;
		break;
	case cudaMemcpyDeviceToHost:
		p->copies.to_host_calls++;
		p->copies.to_host_bytes += bytes;
		break;
	default:
		p->copies.on_device_calls++;
		p->copies.on_device_bytes += bytes;
		break;
	}
}

void gpu_profile_copies(const struct gpu_context *g, struct gpu_copy_counts *ret)
{
	*ret = g->profile ? g->profile->copies : (struct gpu_copy_counts){0};
}
