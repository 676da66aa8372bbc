/* holo-bench's jump-forward comparison (docs/policy.md, "Jump-forward"): steps decoded under the
 * holo3 step grammar with and without the grammar-forced tokens appended in one forward. */
#pragma once

#include <stdint.h>

#include "engine.h"

struct bench_jf {
	int steps;              /* steps decoded in each mode */
	uint64_t tokens;        /* tokens of the steps with jump-forward (sampled + forced) */
	uint64_t tokens_off;    /* tokens of the steps without it */
	uint64_t forced;        /* of `tokens`, appended without sampling */
	uint64_t forwards_off;  /* decode forwards without it */
	uint64_t forwards_on;   /* with it */
	double decode_ms_off, decode_ms_on;
	int incomplete;         /* steps that hit the token limit (either mode) */
	/* the first step's text in each mode, its tokens separated by '|' (cut at the size) */
	char first_off[1024], first_on[1024];
};

/* Most steps holo-bench's --jump-steps takes. */
#define BENCH_JF_MAX_STEPS 1000
/* Largest step decoded (tokens); a step that reaches it counts as incomplete. */
#define BENCH_JF_MAX_STEP_TOKENS 512

/* Decodes `steps` steps greedily on a session of backend b over model tokenizer tok (vocab
 * logits rows): a short chat prompt, then per step an observation line and a step decoded
 * under the holo3 grammar's masks, once with jump-forward off and once on, from the same state.
 * 0, or a negative errno with a sentence in err. */
int bench_jump_forward(struct engine_backend *b, const struct engine_tokenizer *tok, int vocab,
		       int steps, struct bench_jf *ret, char *err, size_t errlen);

/* The summary line: "jump-forward steps=N tokens=T forced=F forwards_off=A forwards_on=B
 * decode_ms_off=X decode_ms_on=Y". */
void bench_jf_print(const struct bench_jf *jf);
