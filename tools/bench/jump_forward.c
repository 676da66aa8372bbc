/* holo-bench's jump-forward comparison (jump_forward.h): greedy steps under the holo3 step
 * grammar, decoded by the stepping generator as holod's local provider decodes them (the mask as
 * the logits hook, the matcher fed each id, policy_masker_forced() as the forced callback when
 * on, the step's lead appended with the observation), each step once without and once with
 * jump-forward from the same session state; then the same for scripted click steps (click_steps
 * below: what a trained model writes, each sample the first id of the canonical encoding of the
 * rest of the script), whose forwards feed the roofline prediction for another model's shapes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "jump_forward.h"
#include "policy.h"

/* Canonical click steps of holo3's format (~100-190 bytes; the example click step has
 * 172): a note or null, a thought, the element and the point. */
static const char *const click_steps[] = {
	"{\"note\":null,\"thought\":\"The settings window is open; the Appearance section holds "
	"the theme.\",\"tool_call\":{\"tool_name\":\"click\",\"element\":\"Appearance tab in the "
	"left sidebar\",\"x\":112,\"y\":348}}",
	"{\"note\":\"Dark mode is under Appearance.\",\"thought\":\"Turn on the dark mode "
	"switch.\",\"tool_call\":{\"tool_name\":\"click\",\"element\":\"Dark mode switch\","
	"\"x\":861,\"y\":402}}",
	"{\"note\":null,\"thought\":\"Press OK to close the dialog.\",\"tool_call\":{\"tool_name\":"
	"\"click\",\"element\":\"OK button\",\"x\":640,\"y\":712}}",
	"{\"note\":\"The file manager lists Documents; the report is in Reports.\",\"thought\":"
	"\"Open the Reports folder by double-checking its row first.\",\"tool_call\":{\"tool_name\":"
	"\"click\",\"element\":\"Reports folder row\",\"x\":305,\"y\":221,\"button\":\"left\"}}",
};

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
	/* scripted: the step's text, and the bytes of it decoded so far */
	const char *script;
	size_t pos;
	/* the forwards' lengths (a sampled id and the forced ids after it), when runs is set */
	uint16_t *runs;
	size_t n_runs, max_runs;
};

static void advance(struct jf_decode *d, int32_t id)
{
	const uint8_t *b;
	size_t len;
	if (d->script && engine_tokenizer_token_bytes(d->tok, id, &b, &len) == 0)
		d->pos += len;
}

/* Scripted: every id but the one the script goes on with is masked: the first id of the
 * canonical encoding of the rest of the script, or, where the mask refuses that one, the
 * allowed id that covers most of it. At the script's end the grammar allows the stop ids
 * alone. */
static int script_mask(struct jf_decode *d, float *logits, int vocab)
{
	const char *rest = d->script + d->pos;
	size_t left = strlen(rest);
	int32_t *ids = NULL, want = -1;
	size_t n = 0, best = 0;

	if (!left)
		return 0;
	if (engine_tokenizer_encode(d->tok, rest, left, false, &ids, &n) == 0 && n && ids[0] >= 0 &&
	    ids[0] < vocab && logits[ids[0]] != -INFINITY)
		want = ids[0];
	free(ids);
	for (int i = 0; want < 0 && i < vocab; i++) {
		const uint8_t *b;
		size_t len;
		if (logits[i] == -INFINITY || engine_tokenizer_token_bytes(d->tok, i, &b, &len) < 0 ||
		    len > left || len <= best || memcmp(b, rest, len) != 0)
			continue;
		best = len;
		want = i;
	}
	for (int i = 0; i < vocab; i++)
		if (i != want)
			logits[i] = -INFINITY;
	return want >= 0 ? 0 : -EBADMSG;
}

static int jf_logits(void *userdata, float *logits, int vocab)
{
	struct jf_decode *d = userdata;
	if (policy_masker_apply(d->mk, &d->m, logits) <= 0)
		return -EBADMSG;
	return d->script ? script_mask(d, logits, vocab) : 0;
}

static int jf_token(void *userdata, int32_t id)
{
	struct jf_decode *d = userdata;
	int r = policy_masker_feed(d->mk, &d->m, id);
	if (r == 1)
		d->complete = true;
	else if (r < 0)
		d->error = r;
	if (r == 0)
		advance(d, id);
	return r != 0;
}

static int jf_forced(void *userdata, int32_t *ids, size_t cap)
{
	struct jf_decode *d = userdata;
	int n = d->jump ? policy_masker_forced(d->mk, d->tok, &d->m, ids, cap) : 0;
	for (int i = 0; i < n; i++) {
		if (policy_masker_feed(d->mk, &d->m, ids[i]) != 0)
			return -EBADMSG;
		advance(d, ids[i]);
	}
	if (d->runs && d->n_runs < d->max_runs)
		d->runs[d->n_runs++] = (uint16_t)(1 + n);
	return n;
}

static bool is_stop(int32_t id, const int32_t *stops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (stops[i] == id)
			return true;
	return false;
}

/* Appends text's ids' bytes to text (size text_size, '|' between tokens, cut when full). */
static void add_tokens(const struct engine_tokenizer *tok, const int32_t *ids, size_t n, char *text,
		       size_t text_size)
{
	size_t len = strlen(text);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *tb;
		size_t bl;
		if (engine_tokenizer_token_bytes(tok, ids[i], &tb, &bl) < 0 || len + bl + 2 > text_size)
			break;
		if (len)
			text[len++] = '|';
		memcpy(text + len, tb, bl);
		len += bl;
	}
	text[len] = '\0';
}

/* One step from the session's state (logits: its last row), the matcher d->m past the step's
 * lead (n_lead ids, appended with the prompt). */
static int decode_step(struct engine_backend *b, struct engine_session *s, const float *logits,
		       struct jf_decode *d, size_t n_lead, const int32_t *stops, size_t n_stops,
		       uint64_t *ret_tokens, uint64_t *ret_forwards, uint64_t *ret_forced, double *ret_ms,
		       bool *ret_complete, char *text, size_t text_size)
{
	d->complete = false;
	d->error = 0;
	struct engine_generate_params p = {
		.sampling = {.temperature = 0},
		.max_new_tokens = BENCH_JF_MAX_STEP_TOKENS - (int)n_lead,
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
	size_t n;
	uint64_t forwards, forced;
	const int32_t *ids = engine_generator_ids(gen, &n);
	if (text)
		add_tokens(d->tok, ids, n && is_stop(ids[n - 1], stops, n_stops) ? n - 1 : n, text, text_size);
	engine_generator_stats(gen, &forwards, &forced);
	/* the stop id that ended a complete step is not a token of it; the lead is */
	*ret_tokens += n_lead + (d->complete ? n - 1 : n);
	*ret_forwards += forwards;
	*ret_forced += n_lead + forced;
	*ret_complete = d->complete;
	engine_generator_destroy(gen);
	return r;
}

/* The per-mode counters of a run of steps (greedy or scripted). */
struct jf_counts {
	uint64_t *tokens, *forwards, *forced;
	double *ms;
	char *first; /* the first step's text, or NULL */
};

/* Steps k = 0..steps-1 from the snapshot: the observation of step k, then the step decoded
 * with jump-forward off and on (scripts[k] when scripts is set, else greedily); the forwards of
 * the steps with it on into runs. */
static int run_steps(struct engine_backend *b, struct engine_session *s, const struct engine_snapshot *snap,
		     struct jf_decode *d, const struct policy_grammar *g, const int32_t *stops,
		     size_t n_stops, const char *const *scripts, int steps, const struct jf_counts mode[2],
		     int *ret_incomplete, int *ret_lead, uint16_t *runs, size_t max_runs, size_t *ret_n_runs,
		     float *logits, char *err, size_t errlen)
{
	int32_t *ids = NULL, *with_lead = NULL, lead[BENCH_JF_MAX_LEAD];
	size_t n_ids = 0;
	int r = 0;

	for (int k = 0; k < steps; k++) {
		char obs[128];
		snprintf(obs, sizeof(obs),
			 "<SPECIAL_11>User\n<observation>screen %d</observation><SPECIAL_12>\n"
			 "<SPECIAL_11>Assistant\n",
			 k + 1);
		free(ids);
		ids = NULL;
		if ((r = engine_tokenizer_encode(d->tok, obs, strlen(obs), true, &ids, &n_ids)) < 0) {
			snprintf(err, errlen, "cannot tokenize an observation: %s", strerror(-r));
			goto out;
		}
		free(with_lead);
		if (!(with_lead = malloc((n_ids + BENCH_JF_MAX_LEAD) * sizeof(*ids)))) {
			r = -ENOMEM;
			snprintf(err, errlen, "out of memory for step %d's observation", k + 1);
			goto out;
		}
		memcpy(with_lead, ids, n_ids * sizeof(*ids));
		for (int on = 0; on < 2; on++) {
			bool complete = false;
			size_t n_lead = 0;
			d->jump = on;
			d->script = scripts ? scripts[k] : NULL;
			d->pos = 0;
			d->runs = on ? runs : NULL;
			d->max_runs = max_runs;
			/* jump-forward's lead: what the grammar forces before the model's first
			 * choice (`{"note":`) is appended with the observation, as holod does */
			policy_matcher_init(&d->m, g);
			if (on) {
				r = policy_masker_forced(d->mk, d->tok, &d->m, lead, BENCH_JF_MAX_LEAD);
				n_lead = r > 0 ? (size_t)r : 0;
				for (size_t i = 0; i < n_lead; i++) {
					if (policy_masker_feed(d->mk, &d->m, lead[i]) != 0) {
						r = -EBADMSG;
						snprintf(err, errlen, "the lead breaks the grammar");
						goto out;
					}
					advance(d, lead[i]);
				}
				memcpy(with_lead + n_ids, lead, n_lead * sizeof(*ids));
				*ret_lead = (int)n_lead;
			}
			char *text = k ? NULL : mode[on].first;
			if (text) {
				text[0] = '\0';
				add_tokens(d->tok, lead, n_lead, text, BENCH_JF_TEXT);
			}
			if ((r = engine_session_restore(s, snap)) < 0 ||
			    (r = engine_session_append(s, with_lead, NULL, n_ids + n_lead, ENGINE_LOGITS_LAST,
						       logits)) < 0) {
				snprintf(err, errlen, "cannot append step %d's observation: %s", k + 1,
					 strerror(-r));
				goto out;
			}
			r = decode_step(b, s, logits, d, n_lead, stops, n_stops, mode[on].tokens,
					mode[on].forwards, mode[on].forced, mode[on].ms, &complete, text,
					BENCH_JF_TEXT);
			if (r < 0) {
				snprintf(err, errlen, "%s step %d (jump-forward %s) failed: %s",
					 scripts ? "click" : "greedy", k + 1, on ? "on" : "off", strerror(-r));
				goto out;
			}
			if (scripts && complete && d->pos != strlen(scripts[k])) {
				r = -EBADMSG;
				snprintf(err, errlen, "click step %d ended after %zu of its %zu bytes", k + 1,
					 d->pos, strlen(scripts[k]));
				goto out;
			}
			*ret_incomplete += !complete;
			if (on && runs) {
				runs += d->n_runs;
				max_runs -= d->n_runs;
				*ret_n_runs += d->n_runs;
			}
			d->n_runs = 0;
		}
	}
	r = 0;
out:
	d->runs = NULL;
	d->script = NULL;
	free(ids);
	free(with_lead);
	return r;
}

int bench_jump_forward(struct engine_backend *b, const struct engine_tokenizer *tok, int vocab, int steps,
		       struct bench_jf *ret, char *err, size_t errlen)
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
	uint64_t unused = 0;
	const struct jf_counts greedy[2] = {
		{&ret->tokens_off, &ret->forwards_off, &unused, &ret->decode_ms_off, ret->first_off},
		{&ret->tokens, &ret->forwards_on, &ret->forced, &ret->decode_ms_on, ret->first_on},
	};
	if ((r = run_steps(b, s, snap, &d, g, stops, n_stops, NULL, steps, greedy, &ret->incomplete,
			   &ret->lead, NULL, 0, &(size_t){0}, logits, err, errlen)) < 0)
		goto out;
	/* the click steps, as many as there are steps (at most the scripts) */
	struct bench_jf_click *c = &ret->click;
	c->steps = MIN(steps, (int)(sizeof(click_steps) / sizeof(click_steps[0])));
	const struct jf_counts click[2] = {
		{&c->tokens_off, &c->forwards_off, &unused, &c->decode_ms_off, NULL},
		{&c->tokens, &c->forwards_on, &c->forced, &c->decode_ms_on, NULL},
	};
	int lead = 0;
	r = run_steps(b, s, snap, &d, g, stops, n_stops, click_steps, c->steps, click, &c->incomplete, &lead,
		      c->runs, BENCH_JF_MAX_RUNS, &c->n_runs, logits, err, errlen);
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
	const struct bench_jf_click *c = &jf->click;
	printf("jump-forward steps=%d tokens=%llu forced=%llu forwards_off=%llu forwards_on=%llu "
	       "decode_ms_off=%.2f decode_ms_on=%.2f\n",
	       jf->steps, (unsigned long long)jf->tokens, (unsigned long long)jf->forced,
	       (unsigned long long)jf->forwards_off, (unsigned long long)jf->forwards_on, jf->decode_ms_off,
	       jf->decode_ms_on);
	printf("(greedy steps under the holo3 grammar, each decoded from the same state with "
	       "jump-forward off (%llu tokens) and on, its first %d ids (the lead) appended with "
	       "the observation; %d incomplete)\n",
	       (unsigned long long)jf->tokens_off, jf->lead, jf->incomplete);
	printf("first step, tokens separated by |: off %s\n", jf->first_off);
	printf("first step, tokens separated by |: on  %s\n", jf->first_on);
	if (!c->steps)
		return;
	printf("jump-forward-click steps=%d tokens=%llu forced=%llu forwards_off=%llu "
	       "forwards_on=%llu decode_ms_off=%.2f decode_ms_on=%.2f\n",
	       c->steps, (unsigned long long)c->tokens, (unsigned long long)c->forced,
	       (unsigned long long)c->forwards_off, (unsigned long long)c->forwards_on, c->decode_ms_off,
	       c->decode_ms_on);
	printf("(scripted click steps of 100-190 bytes, each sample the first id of the canonical "
	       "encoding of the rest: %.0f%% fewer forwards with jump-forward; off %llu tokens; "
	       "%d incomplete)\n",
	       c->forwards_off ? 100.0 * (1.0 - (double)c->forwards_on / c->forwards_off) : 0.0,
	       (unsigned long long)c->tokens_off, c->incomplete);
}

void bench_jf_predict(const struct bench_jf *jf, const struct roofline_lm *lm,
		      const struct roofline_device *d, double context, double *ret_ms_off, double *ret_ms_on)
{
	const struct bench_jf_click *c = &jf->click;
	double off = 0, on = 0;
	size_t ones = c->forwards_on > c->n_runs ? c->forwards_on - c->n_runs : 0;

	if (!c->steps) {
		*ret_ms_off = *ret_ms_on = 0;
		return;
	}
	double one = roofline_forward_seconds(lm, d, context, 1);
	off = (double)c->forwards_off * one;
	on = (double)ones * one;
	for (size_t i = 0; i < c->n_runs; i++)
		on += roofline_forward_seconds(lm, d, context, c->runs[i]);
	*ret_ms_off = off * 1e3 / c->steps;
	*ret_ms_on = on * 1e3 / c->steps;
}

void bench_jf_print_prediction(const struct bench_jf *jf, const char *model, const struct roofline_lm *lm,
			       const struct roofline_device *d, double context)
{
	const struct bench_jf_click *c = &jf->click;
	double off, on;

	if (!c->steps)
		return;
	bench_jf_predict(jf, lm, d, context, &off, &on);
	printf("jump-forward-predicted model=%s device=%s context=%.0f forwards_off=%.1f "
	       "forwards_on=%.1f step_ms_off=%.1f step_ms_on=%.1f saved=%.0f%%\n",
	       model, d->name, context, (double)c->forwards_off / c->steps, (double)c->forwards_on / c->steps,
	       off, on, off > 0 ? 100.0 * (1.0 - on / off) : 0.0);
}
