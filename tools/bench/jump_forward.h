/* holo-bench's jump-forward comparison (docs/policy.md, "Jump-forward"): steps decoded under the
 * holo3 step grammar with and without the grammar-forced tokens appended in one forward. */
#pragma once

#include <stdint.h>

#include "engine.h"
#include "roofline.h"

/* Most forwards of the click steps recorded (jump-forward on). */
#define BENCH_JF_MAX_RUNS 1024
/* Size of the first step's text. */
#define BENCH_JF_TEXT 1024

/* Scripted click steps (jump_forward.c's click_steps: what a trained model writes), decoded
 * off and on like the greedy steps. */
struct bench_jf_click {
	int steps;
	uint64_t tokens, tokens_off, forced, forwards_off, forwards_on;
	double decode_ms_off, decode_ms_on;
	int incomplete;
	/* each forward with jump-forward on: 1 + the forced ids appended with its sampled one */
	uint16_t runs[BENCH_JF_MAX_RUNS];
	size_t n_runs;
};

struct bench_jf {
	int steps;	       /* steps decoded in each mode */
	uint64_t tokens;       /* tokens of the steps with jump-forward (sampled + forced) */
	uint64_t tokens_off;   /* tokens of the steps without it */
	uint64_t forced;       /* of `tokens`, appended without sampling (the lead included) */
	uint64_t forwards_off; /* decode forwards without it */
	uint64_t forwards_on;  /* with it */
	double decode_ms_off, decode_ms_on;
	int incomplete; /* steps that hit the token limit (either mode) */
	int lead;	/* ids appended with the observation before the first sample */
	/* the first step's text in each mode, its tokens separated by '|' (cut at the size) */
	char first_off[BENCH_JF_TEXT], first_on[BENCH_JF_TEXT];
	struct bench_jf_click click;
};

/* Most steps holo-bench's --jump-steps takes. */
#define BENCH_JF_MAX_STEPS 1000
/* Most ids of a step's lead (the run the grammar forces before the first sample). */
#define BENCH_JF_MAX_LEAD 32
/* Largest step decoded (tokens); a step that reaches it counts as incomplete. */
#define BENCH_JF_MAX_STEP_TOKENS 512

/* Decodes `steps` steps greedily on a session of backend b over model tokenizer tok (vocab
 * logits rows): a short chat prompt, then per step an observation line and a step decoded
 * under the holo3 grammar's masks, once with jump-forward off and once on, from the same state;
 * then min(steps, 4) scripted click steps the same way (ret->click). 0, or a negative errno with
 * a sentence in err. */
int bench_jump_forward(struct engine_backend *b, const struct engine_tokenizer *tok, int vocab, int steps,
		       struct bench_jf *ret, char *err, size_t errlen);

/* The summary line: "jump-forward steps=N tokens=T forced=F forwards_off=A forwards_on=B
 * decode_ms_off=X decode_ms_on=Y", its note and first steps, then the click steps' line
 * "jump-forward-click ..." with the same fields. */
void bench_jf_print(const struct bench_jf *jf);

/* The roofline's decode time of one click step (jf->click, averaged over its steps) for another
 * model's shapes lm on device d after `context` tokens: with jump-forward off one forward of 1
 * token per token, on the recorded forwards (1 + the forced ids each; roofline_forward_seconds:
 * about one token's forward while the weights' bytes bind). Milliseconds per step into
 * ret_ms_off and ret_ms_on. */
void bench_jf_predict(const struct bench_jf *jf, const struct roofline_lm *lm,
		      const struct roofline_device *d, double context, double *ret_ms_off, double *ret_ms_on);
/* "jump-forward-predicted model=M device=D context=C forwards_off=A forwards_on=B
 * step_ms_off=X step_ms_on=Y saved=Z%" (per click step). */
void bench_jf_print_prediction(const struct bench_jf *jf, const char *model, const struct roofline_lm *lm,
			       const struct roofline_device *d, double context);
