/* The backend a test's or a bench's sessions run on, as the environment names it:
 * test_env_backend(). A model has no backend of its own (engine_session_create_on() takes one);
 * tests and holo-bench policy take theirs here. Needs engine.h alone (include it first); no test
 * machinery, so holo-bench includes it too. */
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A backend of m as the environment says, holod's variables: the CPU, in $HOLOD_PRECISION
 * (fp32 or bf16; unset, engine_model_cpu_precision()'s) with the SSM state stored as
 * $HOLOD_SSM_STATE says (fp32 or bf16; unset, fp32) and the linear layers in $HOLOD_WEIGHTS
 * (default, bf16, q8 or q4; unset, as stored), unless $HOLOD_BACKEND=cuda (with
 * $HOLOD_PRECISION=fp32, the default there, or bf16) puts it on CUDA device $HOLOD_DEVICE
 * (unset, 0): the hook the backend conformance suite runs every session test through
 * (tests/lm/meson.build), on device 1 of two emulated ones too (the -device1 entries). A bad
 * value is refused rather than run on the CPU. NULL + errno (EINVAL, and
 * engine_backend_create()'s errors), the reason on stderr. The caller destroys it
 * (engine_backend_destroy()) before the model. */
static inline struct engine_backend *test_env_backend(const struct engine_model *m)
{
	const char *kind = getenv("HOLOD_BACKEND"), *precision = getenv("HOLOD_PRECISION");
	const char *ssm = getenv("HOLOD_SSM_STATE"), *device = getenv("HOLOD_DEVICE");
	const char *weights = getenv("HOLOD_WEIGHTS");
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU};
	char *end = NULL, err[512] = "";
	long dev = device && *device ? strtol(device, &end, 10) : 0;
	bool cpu = !kind || !*kind || strcmp(kind, "cpu") == 0;
	if (!cpu)
		o.precision = ENGINE_PRECISION_FP32;
	if ((!cpu && strcmp(kind, "cuda") != 0) ||
	    (precision && *precision && engine_precision_parse(precision, &o.precision) < 0) ||
	    (ssm && *ssm && engine_precision_parse(ssm, &o.ssm_state) < 0) ||
	    (weights && *weights && engine_weights_parse(weights, &o.weights) < 0) || (end && *end) ||
	    dev < 0 || dev > INT_MAX) {
		fprintf(stderr,
			"HOLOD_BACKEND=%s HOLOD_PRECISION=%s HOLOD_SSM_STATE=%s HOLOD_WEIGHTS=%s "
			"HOLOD_DEVICE=%s: expected cpu or cuda, fp32 or bf16, default, bf16, q8 or q4, "
			"and a device number\n",
			kind ? kind : "", precision ? precision : "", ssm ? ssm : "", weights ? weights : "",
			device ? device : "");
		errno = EINVAL;
		return NULL;
	}
	if (!cpu) {
		o.kind = ENGINE_BACKEND_CUDA;
		o.device = (int)dev;
	}
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	if (!b) {
		int e = errno;
		fprintf(stderr, "test_env_backend: %s\n", err[0] ? err : strerror(e));
		errno = e;
	}
	return b;
}
