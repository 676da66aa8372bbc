/* Fuzz target for the checkpoint parsers: the safetensors header (st_parse) and config.json
 * (model_config_parse), both from memory.
 *
 * Input: the first byte selects the parser ('C': config.json text, anything else: a
 * safetensors file), the rest is the input. On success the result's invariants are checked and
 * a violation aborts, so the fuzzer reports it like a crash.
 *
 * With libFuzzer: tools/fuzz/build.sh, then tools/fuzz/run.sh safetensors (docs/fuzzing.md).
 * New crashers go into tests/checkpoint/corpus/ named bad-* (the parser must reject them) or ok-*
 * (it must accept them).
 *
 * Without HOLOD_LIBFUZZER this file builds a replay driver (a `unit` test): for every file of
 * the corpus directory given as argv[1] it runs the target and checks the outcome the file's
 * name promises: ok-* must parse, bad-* must be rejected with a message.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "loader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_st(const struct st_file *f, const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < f->n_entries; i++) {
		const struct st_entry *e = &f->entries[i];
		const uint8_t *p = e->t.data;
		size_t n = st_dtype_size(e->t.dtype);

		for (int d = 0; d < e->t.ndim; d++) {
			if (e->t.shape[d] < 0)
				abort();
			n *= (size_t)e->t.shape[d];
		}
		if (n != e->t.nbytes || e->end - e->begin != n)
			abort();
		if (p < buf || p > buf + len || (size_t)(buf + len - p) < n)
			abort();
		if ((uintptr_t)(p - buf) % st_dtype_size(e->t.dtype) != 0)
			abort();
		if (i > 0 && strcmp(f->entries[i - 1].name, e->name) >= 0)
			abort();
		if (st_file_find(f, e->name) != e)
			abort();
		/* read the first and last byte: ASan catches a pointer outside the buffer */
		if (n > 0) {
			volatile uint8_t first = p[0], last = p[n - 1];

			(void)first;
			(void)last;
		}
	}
}

static void check_config(const struct model_config *c)
{
	const struct lm_config *lm = &c->lm;

	if (lm->n_layers < 1 || lm->n_layers > MODEL_MAX_LAYERS || strlen(lm->pattern) != (size_t)lm->n_layers)
		abort();
	if (strspn(lm->pattern, "M*-") != (size_t)lm->n_layers)
		abort();
	if (lm->hidden < 1 || lm->hidden > MODEL_MAX_DIM || !(lm->eps > 0 && lm->eps < 1))
		abort();
	if (isnan(lm->dt_min) || isnan(lm->dt_max) || lm->dt_min > lm->dt_max)
		abort();
	if (lm->n_heads && (lm->n_kv_heads < 1 || lm->n_heads % lm->n_kv_heads))
		abort();
}

/* 1: parsed, 0: rejected with a message. */
static int run_one(const uint8_t *data, size_t size)
{
	char errbuf[512] = "";
	int r;

	if (size == 0)
		return 0;
	if (data[0] == 'C') {
		struct model_config c;

		r = model_config_parse((const char *)data + 1, size - 1, &c, errbuf, sizeof(errbuf));
		if (r == 0)
			check_config(&c);
	} else {
		struct st_file *f = NULL;

		r = st_parse(data + 1, size - 1, &f, errbuf, sizeof(errbuf));
		if (r == 0)
			check_st(f, data + 1, size - 1);
		else if (f)
			abort();
		st_file_destroy(f);
	}
	if (r < 0 && errbuf[0] == '\0')
		abort();
	return r == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_one(data, size);
	return 0;
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

static bool replay_one(const uint8_t *data, size_t size)
{
	return run_one(data, size);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
		return 2;
	}
	return fuzz_replay(argv[1], replay_one, 10);
}
#endif
