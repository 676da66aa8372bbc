/* The replay driver of the fuzz targets' seed corpora (the `unit` tests fuzz-*-corpus).
 *
 * Every file of `dir` named ok-* must be accepted and every bad-* rejected by `one` (true when
 * the target accepted the input), in the order of their names, so that a target with state
 * (fuzz-http's server) sees the same history on every file system. Each input is an exact-size
 * heap copy, so ASan reports a read of even one byte past it. Returns the test's exit code: 1
 * when a file cannot be read, an outcome differs, or fewer than `min_files` files were
 * replayed; else 0.
 */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int fuzz_replay(const char *dir, bool (*one)(const uint8_t *data, size_t size), int min_files)
{
	struct dirent **names, *e;
	int failures = 0, files = 0;
	int n = scandir(dir, &names, NULL, alphasort);

	if (n < 0) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; free(names[i++])) {
		e = names[i];
		bool want_ok = strncmp(e->d_name, "ok-", 3) == 0;
		char path[4096];
		uint8_t *buf;
		long size;
		FILE *f;

		if (!want_ok && strncmp(e->d_name, "bad-", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "rb");
		if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
			fprintf(stderr, "%s: cannot read\n", path);
			if (f)
				fclose(f);
			failures++;
			continue;
		}
		buf = malloc(size ? (size_t)size : 1);
		if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
			fprintf(stderr, "%s: short read\n", path);
			failures++;
		} else if (one(buf, (size_t)size) != want_ok) {
			fprintf(stderr, "%s: expected %s\n", e->d_name, want_ok ? "success" : "rejection");
			failures++;
		}
		fclose(f);
		free(buf);
		files++;
	}
	free(names);
	fprintf(stderr, "%d corpus files, %d failures\n", files, failures);
	if (files < min_files) {
		fprintf(stderr, "corpus too small: %d files (at least %d)\n", files, min_files);
		return 1;
	}
	return failures ? 1 : 0;
}
