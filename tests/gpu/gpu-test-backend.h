/* The GPU tests' backend of a model: created, or the test stops saying why (test.h's REQUIRE).
 * Include after test.h and engine.h. */
#pragma once

#include <stdio.h>

static inline struct engine_backend *gpu_test_backend(struct engine_model *m,
						      enum engine_backend_kind kind,
						      enum engine_precision p)
{
	char err[512] = "";
	struct engine_backend_options o = {.kind = kind, .precision = p};
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	if (!b)
		fprintf(stderr, "engine_backend_create: %s\n", err);
	REQUIRE(b);
	return b;
}
