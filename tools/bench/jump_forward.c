/* holo-bench's jump-forward comparison (jump_forward.h): greedy steps under the holo3 step
 * grammar, decoded by the stepping generator as holod's local provider decodes them (the mask as
 * the logits hook, the matcher fed each id, policy_masker_forced() as the forced callback when
 * on), each step once without and once with jump-forward from the same session state. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jump_forward.h"
#include "policy.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct jf_decode {
	struct policy_masker *mk;
	const struct engine_tokenizer *tok;
	struct policy_matcher m;
	bool jump;
	bool complete;
	int error;
};

static int jf_logits(void *userdata, float *logits, int vocab)
{
	struct jf_decode *d = userdata;
	(void)vocab;
	return policy_masker_apply(d->mk, &d->m, logits) > 0 ? 0 : -EBADMSG;
}

static int jf_token(void *userdata, int32_t id)
{
	struct jf_decode *d = userdata;
	int r = policy_masker_feed(d->mk, &d->m, id);
	if (r == 1)
		d->complete = true;
	else if (r < 0)
		d->error = r;
	return r != 0;
}

static int jf_forced(void *userdata, int32_t *ids, size_t cap)
{
	struct jf_decode *d = userdata;
	if (!d->jump)
		return 0;
	int n = policy_masker_forced(d->mk, d->tok, &d->m, ids, cap);
	for (int i = 0; i < n; i++)
		if (policy_masker_feed(d->mk, &d->m, ids[i]) != 0)
			return -EBADMSG;
	return n;
}

static bool is_stop(int32_t id, const int32_t *stops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (stops[i] == id)
			return true;
	return false;
}

/* One step from the session's state (logits: its last row). */
static int decode_step(struct engine_backend *b, struct engine_session *s, const float *logits,
		       struct jf_decode *d, const struct policy_grammar *g, const int32_t *stops,
		       size_t n_stops, uint64_t *ret_tokens, uint64_t *ret_forwards,
		       uint64_t *ret_forced, double *ret_ms, bool *ret_complete, char *text,
		       size_t text_size)
{
	policy_matcher_init(&d->m, g);
	d->complete = false;
	d->error = 0;
	struct engine_generate_params p = {
		.sampling = {.temperature = 0},
		.max_new_tokens = BENCH_JF_MAX_STEP_TOKENS,
		.stop_ids = stops,
		.n_stop_ids = n_stops,
		.on_token = jf_token,
		.logits_hook = jf_logits,
		.forced = jf_forced,
		.userdata = d,
	};
	struct engine_generator *gen = engine_generator_create(s, NULL, &p, logits);
	if (!gen)
		return -errno;
	double t0 = now_ms();
	int r;
	while ((r = engine_generators_step(b, &gen, 1)) > 0)
		;
	*ret_ms += now_ms() - t0;
	if (r == 0)
		r = engine_generator_status(gen) < 0 ? engine_generator_status(gen) : 0;
	if (r == 0 && d->error)
		r = d->error;
	size_t n, len = 0;
	uint64_t forwards, forced;
	const int32_t *ids = engine_generator_ids(gen, &n);
	for (size_t i = 0; text && i < n && !is_stop(ids[i], stops, n_stops); i++) {
		const uint8_t *tb;
		size_t bl;
		if (engine_tokenizer_token_bytes(d->tok, ids[i], &tb, &bl) < 0 ||
		    len + bl + 2 > text_size)
			break;
		if (i)
			text[len++] = '|';
		memcpy(text + len, tb, bl);
		len += bl;
	}
	if (text)
		text[len] = '\0';
	engine_generator_stats(gen, &forwards, &forced);
	/* the stop id that ended a complete step is not a token of it */
	*ret_tokens += d->complete ? n - 1 : n;
	*ret_forwards += forwards;
	*ret_forced += forced;
	*ret_complete = d->complete;
	engine_generator_destroy(gen);
	return r;
}

int bench_jump_forward(struct engine_backend *b, const struct engine_tokenizer *tok, int vocab,
		       int steps, struct bench_jf *ret, char *err, size_t errlen)
{
	static const char prompt[] =
		"<SPECIAL_11>System\nYou operate a Linux desktop. Answer with one JSON step."
		"<SPECIAL_12>\n<SPECIAL_11>User\nTask: open the settings and turn on dark mode."
		"<SPECIAL_12>\n";
	struct policy_grammar *g = policy_grammar_create_holo3();
	struct policy_masker *mk = NULL;
	struct engine_session *s = NULL;
	struct engine_snapshot *snap = NULL;
	int32_t *ids = NULL, stops[2];
	size_t n_ids = 0, n_stops = 0;
	float *logits = malloc((size_t)vocab * sizeof(float));
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	ret->steps = steps;
	if (!g || !logits) {
		r = -ENOMEM;
		snprintf(err, errlen, "out of memory for the step grammar");
		goto out;
	}
	for (size_t i = 0; i < 2; i++) {
		int32_t id = engine_tokenizer_token_id(tok, i ? "</s>" : "<SPECIAL_12>");
		if (id >= 0)
			stops[n_stops++] = id;
	}
	if (!(mk = policy_masker_create(g, tok, (size_t)vocab, stops, n_stops))) {
		r = -errno;
		snprintf(err, errlen, "cannot build the step masker: %s", strerror(errno));
		goto out;
	}
	if ((r = engine_tokenizer_encode(tok, prompt, strlen(prompt), true, &ids, &n_ids)) < 0) {
		snprintf(err, errlen, "cannot tokenize the prompt: %s", strerror(-r));
		goto out;
	}
	s = engine_session_create_on(b, (int)n_ids + 64 + BENCH_JF_MAX_STEP_TOKENS);
	if (!s || (r = engine_session_append(s, ids, NULL, n_ids, ENGINE_LOGITS_NONE, NULL)) < 0 ||
	    !(snap = engine_session_snapshot(s))) {
		r = r < 0 ? r : -ENOMEM;
		snprintf(err, errlen, "cannot prefill the prompt: %s", strerror(-r));
		goto out;
	}
	struct jf_decode d = {.mk = mk, .tok = tok};
	for (int k = 0; k < steps; k++) {
		char obs[128];
		snprintf(obs, sizeof(obs),
			 "<SPECIAL_11>User\n<observation>screen %d</observation><SPECIAL_12>\n"
			 "<SPECIAL_11>Assistant\n", k + 1);
		free(ids);
		ids = NULL;
		if ((r = engine_tokenizer_encode(tok, obs, strlen(obs), true, &ids, &n_ids)) < 0) {
			snprintf(err, errlen, "cannot tokenize an observation: %s", strerror(-r));
			goto out;
		}
		for (int on = 0; on < 2; on++) {
			uint64_t unused = 0;
			bool complete = false;
			d.jump = on;
			if ((r = engine_session_restore(s, snap)) < 0 ||
			    (r = engine_session_append(s, ids, NULL, n_ids, ENGINE_LOGITS_LAST,
						       logits)) < 0) {
				snprintf(err, errlen, "cannot append step %d's observation: %s", k + 1,
					 strerror(-r));
				goto out;
			}
			r = decode_step(b, s, logits, &d, g, stops, n_stops,
					on ? &ret->tokens : &ret->tokens_off,
					on ? &ret->forwards_on : &ret->forwards_off,
					on ? &ret->forced : &unused,
					on ? &ret->decode_ms_on : &ret->decode_ms_off, &complete,
					k ? NULL : on ? ret->first_on : ret->first_off,
					sizeof(ret->first_on));
			if (r < 0) {
				snprintf(err, errlen, "step %d (jump-forward %s) failed: %s", k + 1,
					 on ? "on" : "off", strerror(-r));
				goto out;
			}
			ret->incomplete += !complete;
		}
	}
	r = 0;
out:
	free(ids);
	free(logits);
	engine_snapshot_destroy(snap);
	engine_session_destroy(s);
	policy_masker_destroy(mk);
	policy_grammar_destroy(g);
	return r;
}

void bench_jf_print(const struct bench_jf *jf)
{
	printf("jump-forward steps=%d tokens=%llu forced=%llu forwards_off=%llu forwards_on=%llu "
	       "decode_ms_off=%.2f decode_ms_on=%.2f\n", jf->steps,
	       (unsigned long long)jf->tokens, (unsigned long long)jf->forced,
	       (unsigned long long)jf->forwards_off, (unsigned long long)jf->forwards_on,
	       jf->decode_ms_off, jf->decode_ms_on);
	printf("(greedy steps under the holo3 grammar, each decoded from the same state with "
	       "jump-forward off (%llu tokens) and on; %d incomplete)\n",
	       (unsigned long long)jf->tokens_off, jf->incomplete);
	printf("first step, tokens separated by |: off %s\n", jf->first_off);
	printf("first step, tokens separated by |: on  %s\n", jf->first_on);
}
