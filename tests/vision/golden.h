/* Helpers for the vision golden tests: fixture paths and F32 arrays from the safetensors files
 * tools/make_vision_golden.py writes (read with the engine's own safetensors parser). */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#include "loader.h"
#include "test.h"

static inline const char *golden_source_root(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");

	return root ? root : ".";
}

/* "<source>/tests/fixtures/vision/<name>" in a static buffer. */
static inline const char *golden_path(const char *name)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "%s/tests/fixtures/vision/%s", golden_source_root(), name);
	return buf;
}

static inline struct st_file *golden_open(const char *name)
{
	struct st_file *f = NULL;
	char err[256];

	if (st_file_open(golden_path(name), &f, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", name, err);
		exit(1);
	}
	return f;
}

/* The F32 tensor `name` (fatal when absent); *ret_n receives its element count. */
static inline const float *golden_get(const struct st_file *f, const char *name, size_t *ret_n)
{
	const struct st_entry *e = st_file_find(f, name);

	if (!e || e->t.dtype != TENSOR_F32) {
		fprintf(stderr, "golden tensor %s missing or not F32\n", name);
		exit(1);
	}
	if (ret_n)
		*ret_n = e->t.nbytes / sizeof(float);
	return e->t.data;
}

/* Running max |a - b| with the place it happened, for tolerance reports. */
struct golden_diff {
	double max_abs;
	size_t at;
	size_t n;
};

static inline void golden_diff_add(struct golden_diff *d, double got, double want, size_t i)
{
	double e = got > want ? got - want : want - got;

	if (!(e <= d->max_abs)) { /* also catches NaN */
		d->max_abs = e != e ? 1e30 : e;
		d->at = i;
	}
	d->n++;
}
