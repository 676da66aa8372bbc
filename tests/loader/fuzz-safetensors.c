/* Fuzz target for the checkpoint parsers: the safetensors header (st_parse) and config.json
 * (model_config_parse), both from memory.
 *
 * Input: the first byte selects the parser ('C': config.json text, anything else: a
 * safetensors file), the rest is the input. On success the result's invariants are checked and
 * a violation aborts, so the fuzzer reports it like a crash.
 *
 * With libFuzzer (from the repository root):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DHOLOD_LIBFUZZER -D_GNU_SOURCE \
 *     -Icommon -Iengine tests/loader/fuzz-safetensors.c engine/safetensors.c engine/config.c \
 *     common/alloc.c $(pkg-config --cflags --libs jansson) -lm -o /tmp/fuzz-safetensors
 *   mkdir -p /tmp/fuzz-corpus && cp -r tests/loader/corpus/. /tmp/fuzz-corpus/
 *   /tmp/fuzz-safetensors -max_len=65536 /tmp/fuzz-corpus
 * New crashers go into tests/loader/corpus/ named bad-* (the parser must reject them) or ok-*
 * (it must accept them).
 *
 * Without HOLOD_LIBFUZZER this file builds a replay driver (a `unit` test): for every file of
 * the corpus directory given as argv[1] it runs the target and checks the outcome the file's
 * name promises: ok-* must parse, bad-* must be rejected with a message.
 */
#include <dirent.h>
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
int main(int argc, char **argv)
{
	struct dirent *e;
	int failures = 0, n = 0;
	DIR *d;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
		return 2;
	}
	d = opendir(argv[1]);
	if (!d) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	while ((e = readdir(d))) {
		bool want_ok = strncmp(e->d_name, "ok-", 3) == 0;
		char *path;
		uint8_t *buf;
		long len;
		FILE *f;

		if (!want_ok && strncmp(e->d_name, "bad-", 4) != 0)
			continue;
		path = xasprintf("%s/%s", argv[1], e->d_name);
		f = fopen(path, "rb");
		if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0) {
			fprintf(stderr, "%s: cannot read\n", path);
			failures++;
			if (f)
				fclose(f);
			free(path);
			continue;
		}
		rewind(f);
		/* an exact-size heap copy, so ASan sees any read past the input */
		buf = xmalloc(len ? (size_t)len : 1);
		if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
			fprintf(stderr, "%s: short read\n", path);
			failures++;
		} else if (run_one(buf, (size_t)len) != want_ok) {
			fprintf(stderr, "%s: expected the parser to %s it\n", e->d_name, want_ok ? "accept" : "reject");
			failures++;
		}
		n++;
		fclose(f);
		free(buf);
		free(path);
	}
	closedir(d);
	if (n < 10) {
		fprintf(stderr, "only %d corpus files found in %s\n", n, argv[1]);
		failures++;
	}
	printf("replayed %d corpus files, %d failure(s)\n", n, failures);
	return failures ? 1 : 0;
}
#endif
