/* Tests' backends. test_backend_create(): a backend of a model, created or the test stops
 * saying why (REQUIRE). test_env_backend(): the backend the environment names, which the
 * session tests run on (a model has no backend of its own: engine_session_create_on()).
 *
 * The backend conformance tests' one skip: a test run with $HOLOD_BACKEND=cuda (meson.build's
 * lm-*-cuda entries) on a build or machine without a CUDA device ends as skipped (exit 77),
 * as every other gpu-suite test does, instead of failing at its first model load. No GPU is a
 * reason to skip even on the CI machine (test_skip_missing fails there: CI installs tools, it
 * cannot install a GPU). Include after test.h and engine.h. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env-backend.h"

static inline void test_skip_without_env_backend(void)
{
	const char *name = getenv("HOLOD_BACKEND");
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_AUTO};
	char msg[256] = "";

	/* unset, "auto" or a bad name: nothing to skip for (a bad name fails the test later, as
	 * holod would refuse it) */
	if (!name || engine_backend_kind_parse(name, &o.kind) < 0 || o.kind != ENGINE_BACKEND_CUDA)
		return;
	if (engine_backend_resolve(&o, msg, sizeof(msg)) == -ENODEV) {
		fprintf(stderr, "skip: HOLOD_BACKEND=%s: %s\n", name, msg);
		exit(TEST_SKIP);
	}
}

/* Where $HOLOD_WEIGHTS names a format (the conformance tests' -q8/-q4 entries), that the
 * backend holds its layers in it: the variable reached test_env_backend(). */
static inline void test_check_env_weights(const struct engine_backend *b)
{
	const char *w = getenv("HOLOD_WEIGHTS");
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	if (w && (strcmp(w, "q8") == 0 || strcmp(w, "q4") == 0))
		CHECK_STR_EQ(info.weights, w);
}

static inline struct engine_backend *
test_backend_create(struct engine_model *m, enum engine_backend_kind kind, enum engine_precision p)
{
	char err[512] = "";
	struct engine_backend_options o = {.kind = kind, .precision = p};
	if (kind != ENGINE_BACKEND_CPU)
		o.device = test_gpu_device();
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	if (!b)
		fprintf(stderr, "engine_backend_create: %s\n", err);
	REQUIRE(b);
	return b;
}
