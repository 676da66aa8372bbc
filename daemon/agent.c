/* The agent loop (see agent.h for the threads).
 *
 * One step: capture the primary monitor -> the provider takes the observation (provider.h:
 * the local engine encodes it, a remote one keeps its PNG) -> the provider answers the step
 * from the task's history, retrying an invalid answer -> executor_step (journal, inject,
 * settle, "after" screenshot) -> the action's result goes into the next user turn. The loop
 * keeps the budgets, the history (results and steps) and the journal; it does not know which
 * provider runs. */
#include "agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "agent-history.h"
#include "common.h"
#include "feed.h"
#include "provider.h"
#include "secrets.h"
#include "stuck.h"

struct agent {
	const struct agent_config *cfg;
	const struct executor_task *t;
	struct executor_run run;
	/* results[i]: what the action answering observation i-1 did (text NULL: none);
	 * result_texts[i] owns its text. steps[i] answered observation i. */
	struct policy_tool_result *results;
	char **result_texts;
	struct policy_step *steps;
	size_t n_steps; /* answered steps (= steps[] entries) */
	size_t cap;
};

/* A step journaled as failed before its action ran: `call` its tool call (NULL: none). */
static void journal_unrun(struct agent *a, size_t index, const struct journal_agent_step *as,
			  const char *call, const char *tool_name, const char *error)
{
	struct journal_step s = {
		.task_id = a->t->id,
		.index = (int)index,
		.tool_call = call ? call : "null",
		.tool_name = tool_name,
		.coords = IPC_COORDS_MODEL,
		.has_monitor = true,
		.monitor = a->run.monitor,
		.started_us = time_real_us(),
		.agent = as,
	};
	struct journal_step_timing tm = {0};
	if (journal_step_begin(a->run.env->journal, &s) >= 0)
		journal_step_finish(a->run.env->journal, &s, "error", NULL, error, time_real_us(), &tm);
	a->run.env->progress(a->run.env->userdata);
}

static void journal_invalid(struct agent *a, size_t index, const struct journal_agent_step *as,
			    const char *error)
{
	journal_unrun(a, index, as, NULL, "invalid", error);
}

/* A step decided but not run (why: AGENT_TAKEOVER_SKIPPED or AGENT_PAUSE_SKIPPED): a person
 * took over the display, or paused the task, meanwhile. */
static void journal_skipped(struct agent *a, size_t index, const struct journal_agent_step *as,
			    const struct ipc_action *act, const char *why)
{
	char *call = ipc_action_to_json(act);
	journal_unrun(a, index, as, call, ipc_tool_to_string(act->tool), why);
	free(call);
}

static void history_free(struct agent *a)
{
	for (size_t i = 0; i < a->cap; i++)
		free(a->result_texts[i]);
	for (size_t i = 0; i < a->n_steps; i++)
		policy_step_finish(&a->steps[i]);
	free(a->results);
	free(a->result_texts);
	free(a->steps);
}

static void history_grow(struct agent *a, size_t index)
{
	if (index < a->cap)
		return;
	size_t cap = MAX(a->cap * 2, (size_t)16);
	a->results = xreallocarray(a->results, cap, sizeof(*a->results));
	a->result_texts = xreallocarray(a->result_texts, cap, sizeof(*a->result_texts));
	a->steps = xreallocarray(a->steps, cap, sizeof(*a->steps));
	memset(a->results + a->cap, 0, (cap - a->cap) * sizeof(*a->results));
	memset(a->result_texts + a->cap, 0, (cap - a->cap) * sizeof(*a->result_texts));
	memset(a->steps + a->cap, 0, (cap - a->cap) * sizeof(*a->steps));
	a->cap = cap;
}

/* Short text of an action for the log. */
static void describe(const struct ipc_action *act, char *buf, size_t len)
{
	if (ipc_tool_has_point(act->tool))
		snprintf(buf, len, "%s (%d,%d)", ipc_tool_to_string(act->tool), act->x, act->y);
	else
		snprintf(buf, len, "%s", ipc_tool_to_string(act->tool));
}
/* 32 bits for a task that sets no seed while holod has no --seed: from the kernel's random
 * source, or from the clock, the pid and the task id should it fail. */
static uint32_t draw_seed(int64_t task_id)
{
	uint32_t s;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) == (ssize_t)sizeof(s))
		return s;
	return (uint32_t)agent_step_seed((uint32_t)time_real_us() ^ (uint32_t)getpid(), (size_t)task_id);
}

uint64_t agent_step_seed(uint32_t task_seed, size_t index)
{
	/* splitmix64 of the pair: neighbouring seeds and steps give unrelated streams */
	uint64_t z = ((uint64_t)task_seed << 32 | (uint32_t)index) + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct provider_sampling agent_sampling(const struct agent_config *cfg, const struct policy_format *fmt,
					const struct ipc_task_options *o, int64_t task_id)
{
	struct provider_sampling s = {
		.temperature = o->has_temperature    ? o->temperature :
			       cfg->temperature >= 0 ? cfg->temperature :
						       fmt->sampling.temperature,
		.top_p = o->has_top_p	? o->top_p :
			 cfg->top_p > 0 ? cfg->top_p :
					  fmt->sampling.top_p,
		.seed = o->has_seed    ? o->seed :
			cfg->seed >= 0 ? (uint32_t)cfg->seed :
					 draw_seed(task_id),
	};
	return s;
}

json_t *agent_sampling_defaults(const struct agent_config *cfg, const struct policy_format *fmt)
{
	struct ipc_task_options none = {0};
	struct provider_sampling s = agent_sampling(cfg, fmt, &none, 0);
	return json_pack("{s:s, s:f, s:f, s:o}", "format", fmt->name, "temperature", s.temperature, "top_p",
			 s.top_p, "seed", cfg->seed >= 0 ? json_integer(cfg->seed) : json_null());
}

const struct policy_format *agent_format(const struct agent_config *cfg, const struct ipc_task_options *o)
{
	const struct policy_format *f = NULL;
	if (o->policy_format != IPC_POLICY_FORMAT_DEFAULT)
		f = policy_format_find(ipc_policy_format_to_string(o->policy_format));
	if (!f)
		f = cfg->format;
	return f ? f : &policy_format_holo3;
}

void agent_run(const struct agent_config *cfg, const struct executor_env *env, struct x11_display **d,
	       const char *display_name, const struct executor_task *t, struct executor_outcome *ret)
{
	const struct ipc_task_options *o = &t->req->options;
	struct provider *p = cfg->provider;
	struct agent a = {.cfg = cfg, .t = t};
	struct provider_task *pt = NULL;
	struct x11_frame *frame = NULL;
	char err[512] = "", date[16];
	int r = 0;
	const struct policy_format *fmt = agent_format(cfg, o);

	struct provider_task_args args = {
		.cfg = cfg,
		.t = t,
		.run = &a.run,
		.history = o->history != IPC_HISTORY_DEFAULT ? o->history : cfg->history,
		.format = fmt,
		.window = o->window ? o->window : cfg->window,
		.max_tiles = (int)(o->max_tiles ? o->max_tiles : cfg->max_tiles),
		.thinking =
			o->thinking == IPC_THINKING_DEFAULT ? cfg->thinking : o->thinking == IPC_THINKING_ON,
		/* within step_tokens, which counts them: at most half, so the step keeps room */
		.thinking_tokens = MIN(o->thinking_tokens ? o->thinking_tokens : cfg->thinking_tokens,
				       cfg->step_tokens / 2),
		.jump_forward = o->jump_forward == IPC_SWITCH_DEFAULT ? cfg->jump_forward :
									o->jump_forward == IPC_SWITCH_ON,
		.date = date,
		/* the task's format's defaults apply */
		.sampling = agent_sampling(cfg, fmt, o, t->id),
	};

	if (!p) {
		executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "no model: none loaded");
		return;
	}
	enum provider_state ps = p->ops->wait_ready(p);
	/* What produced the task (docs/journal.md): the model is null when none is loaded. */
	json_t *prov =
		json_pack("{s:s, s:o, s:{s:f, s:f, s:I}, s:s, s:I, s:I, s:I, s:I, s:I, s:b}", "provider",
			  p->ops->name, "model", p->ops->provenance(p), "sampling", "temperature",
			  args.sampling.temperature, "top_p", args.sampling.top_p, "seed",
			  (json_int_t)args.sampling.seed, "history", ipc_history_to_string(args.history),
			  "window", (json_int_t)args.window, "max_tiles", (json_int_t)args.max_tiles,
			  "context_tokens", (json_int_t)cfg->context_tokens, "step_tokens",
			  (json_int_t)cfg->step_tokens, "step_retries", (json_int_t)cfg->step_retries,
			  "constrained", !cfg->unconstrained);
	if (prov) {
		/* the format, and whose system text: holo-nano's published one (the user's verified
		 * copy) or holod's own (docs/policy.md) */
		json_object_set_new(prov, "policy_format", json_string(fmt->name));
		json_object_set_new(prov, "system_text",
				    json_string(fmt == &policy_format_holo_nano && cfg->published ?
							"published" :
							"holod"));
		json_object_set_new(prov, "thinking", json_boolean(args.thinking));
		json_object_set_new(prov, "thinking_tokens", json_integer(args.thinking_tokens));
		json_object_set_new(prov, "jump_forward", json_boolean(args.jump_forward));
	}
	if (ps != PROVIDER_READY) {
		const char *e = p->ops->error(p);
		executor_record_provenance(env, display_name, t, NULL, prov);
		json_decref(prov);
		executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "no model: %s", e ? e : "none loaded");
		return;
	}
	/* stuck steps (stuck.h): the task's numbers, else holod's */
	struct stuck stuck;
	stuck_init(&stuck, o->stuck_warn >= 0 ? (unsigned)o->stuck_warn : cfg->stuck_warn,
		   o->stuck_stop >= 0 ? (unsigned)o->stuck_stop : cfg->stuck_stop);
	if (prov)
		json_object_set_new(prov, "stuck",
				    json_pack("{s:I, s:I}", "warn", (json_int_t)stuck.warn, "stop",
					      (json_int_t)stuck.stop));
	r = executor_begin(env, d, display_name, t, prov, &a.run, err, sizeof(err));
	json_decref(prov);
	/* a dry run injects nothing: its screen never changes, only its actions count */
	a.run.hash_screens = !o->dry_run && (stuck.warn || stuck.stop);
	if (r < 0) {
		executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "%s", err);
		return;
	}

	/* the prompt's prefill before step 0: its events carry no step, their clock the task's */
	a.run.step = -1;
	a.run.step_t0_us = time_mono_us();
	time_t now = time(NULL);
	struct tm tmv;
	strftime(date, sizeof(date), "%Y-%m-%d", gmtime_r(&now, &tmv));
	r = p->ops->task_open(p, &args, &pt, err, sizeof(err));
	if (r == -ECANCELED) {
		executor_outcome_stopped(ret, t, "cancelled during step 0");
		goto release;
	}
	if (r < 0) {
		executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "%s", err);
		goto release;
	}

	for (size_t index = 0;; index++) {
		/* holoctl pause: hold here, between two steps, the session as it is; the step
		 * then looks at the screen again (its capture below) */
		uint64_t held_us = 0;
		bool took = false;
		if (env->pause_point && env->pause_point(env->userdata, t, &held_us, &took) != 0)
			a.run.deadline_us += held_us;
		if (took && index > 0 && a.results[index].text &&
		    !strstr(a.result_texts[index], AGENT_TAKEOVER_NOTE)) {
			/* the next observation says so: the screen is not what the last one showed */
			char *note = xasprintf("%s; %s", a.result_texts[index], AGENT_TAKEOVER_NOTE);
			free(a.result_texts[index]);
			a.result_texts[index] = note;
			a.results[index].text = note;
		}
		if (atomic_load(t->stop) != EXECUTOR_RUN) {
			executor_outcome_stopped(ret, t, "cancelled during step %zu", index);
			goto release;
		}
		if (index >= t->max_steps) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
					     "max_steps budget (%u) reached without an answer", t->max_steps);
			goto release;
		}
		if (time_mono_us() >= a.run.deadline_us) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
					     "max_seconds budget (%u s) exhausted after %zu steps",
					     t->max_seconds, index);
			goto release;
		}
		history_grow(&a, index);

		/* See. */
		uint64_t t0 = time_mono_us();
		a.run.step = (int)index;
		a.run.step_t0_us = t0;
		feed_progress(env->feed, t->id, (int)index, t0, "capture", NULL);
		if ((r = x11_capture(a.run.d, &a.run.monitor, &frame)) < 0) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "step %zu: screenshot failed: %s",
					     index, x11_strerror(r));
			goto release;
		}
		uint64_t capture_us = time_mono_us() - t0;
		r = pt->p->ops->observe(pt, index, frame, err, sizeof(err));
		if (r == -ECANCELED) {
			executor_outcome_stopped(ret, t, "cancelled during step %zu", index);
			goto release;
		}
		if (r < 0) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "step %zu: %s", index, err);
			goto release;
		}

		/* Think. */
		struct provider_history h = {.results = a.results, .steps = a.steps, .index = index};
		struct provider_step ps_ = {0};
		r = pt->p->ops->step(pt, &h, agent_step_seed(args.sampling.seed, index), &ps_);
		/* A value the model read off the screen is kept as its placeholder: in the journal,
		 * the history, and the action (which then types the same keys). */
		if (cfg->secrets) {
			size_t red = secrets_redact(cfg->secrets, &ps_.raw) +
				     secrets_redact(cfg->secrets, &ps_.reasoning);
			if (r == 0)
				red += secrets_redact(cfg->secrets, &ps_.step.thought) +
				       secrets_redact(cfg->secrets, &ps_.step.note) +
				       secrets_redact(cfg->secrets, &ps_.step.action.content) +
				       secrets_redact(cfg->secrets, &ps_.step.action.element);
			if (red)
				log_info("task %lld step %zu: %zu secret value(s) in the model's output "
					 "replaced by their placeholder",
					 (long long)t->id, index, red);
		}
		struct journal_agent_step as = ps_.as;
		as.thought = r == 0 ? ps_.step.thought : NULL;
		as.note = r == 0 ? ps_.step.note : NULL;
		as.raw_output = ps_.raw;
		as.reasoning = ps_.reasoning;
		as.prompt_text = ps_.prompt_text;
		as.user_turn = ps_.user_turn;
		as.prompt_sha256 = ps_.prompt_sha256[0] ? ps_.prompt_sha256 : NULL;
		as.prompt = ps_.prompt_mode;
		if (r == -ECANCELED) {
			provider_step_finish(&ps_);
			executor_outcome_stopped(ret, t, "cancelled during step %zu", index);
			goto release;
		}
		if (r == -ETIME) {
			provider_step_finish(&ps_);
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
					     "max_seconds budget (%u s) exhausted during step %zu",
					     t->max_seconds, index);
			goto release;
		}
		if (r == -EINTR) {
			/* Paused during the decode: nothing was decided, so nothing is acted or
			 * journaled; the step is decided again once the task resumes, on a new
			 * screenshot, from the state a never-paused step starts from. */
			log_info("task %lld step %zu: paused during its decode (%lld tokens); the "
				 "step is decided again once resumed",
				 (long long)t->id, index, ps_.as.tokens_decoded);
			feed_progress(env->feed, t->id, (int)index, t0, "interrupted", "{s:s}", "why",
				      "paused");
			provider_step_finish(&ps_);
			x11_frame_destroy(frame);
			frame = NULL;
			index--; /* the loop's index++ comes back to this step (unsigned: defined) */
			continue;
		}
		if (r < 0) {
			char *e0 = xasprintf("step %zu: %s after %d attempt(s); raw output: %.300s", index,
					     ps_.err[0] ? ps_.err : strerror(-r), ps_.as.attempts, ps_.raw);
			/* %.300s may have cut a character in two. */
			char *e = agent_text_valid_utf8(e0, strlen(e0));
			free(e0);
			journal_invalid(&a, index, &as, e);
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "%s", e);
			free(e);
			provider_step_finish(&ps_);
			goto release;
		}

		/* Act, through the scripts' code path. */
		char what[64], result[IPC_MAX_REPLY_BYTES + 256], *answer = NULL;
		bool action_failed;
		describe(&ps_.step.action, what, sizeof(what));
		log_info("task %lld step %zu: %s; thought: %.120s", (long long)t->id, index, what,
			 ps_.step.thought ? ps_.step.thought : "");
		if (feed_wanted(env->feed, t->id)) {
			char *call = ipc_action_to_json(&ps_.step.action);
			json_t *cj = call ? json_loads(call, 0, NULL) : NULL;
			free(call);
			feed_progress(env->feed, t->id, (int)index, t0, "action", "{s:o, s:s?}", "tool_call",
				      cj ? cj : json_null(), "thought", ps_.step.thought);
		}
		const bool took_over = env->taken_over && env->taken_over(env->userdata, t);
		const char *skip = took_over			     ? AGENT_TAKEOVER_SKIPPED :
				   t->pause && atomic_load(t->pause) ? AGENT_PAUSE_SKIPPED :
								       NULL;
		if (skip) {
			/* a person took over, or paused the task, while the step was decided (a
			 * decode that could not stop: provider.h's -EINTR): its action is not run;
			 * the task holds at the top of the loop, and the model reads why */
			log_info("task %lld step %zu: %s not run: %s", (long long)t->id, index, what,
				 took_over ? "the user took over" : "the task was paused");
			/* its acted event before its journaled step (feed.h) */
			feed_order_begin(env->feed);
			feed_progress(env->feed, t->id, (int)index, t0, "acted", "{s:b, s:s}", "ok", false,
				      "error", skip);
			journal_skipped(&a, index, &as, &ps_.step.action, skip);
			feed_order_end(env->feed);
			x11_frame_destroy(frame);
			frame = NULL;
			a.steps[index] = ps_.step;
			a.n_steps = index + 1;
			ps_.step = (struct policy_step){0};
			provider_step_finish(&ps_);
			history_grow(&a, index + 1);
			a.result_texts[index + 1] = xstrdup(skip);
			a.results[index + 1] = (struct policy_tool_result){.tool = a.steps[index].action.tool,
									   .error = true,
									   .text = a.result_texts[index + 1]};
			continue;
		}
		r = executor_step(&a.run, (int)index, &ps_.step.action, IPC_COORDS_MODEL, frame, capture_us,
				  &as, result, sizeof(result), &answer, &action_failed, err, sizeof(err));
		frame = NULL; /* its acted event was fed before it was journaled */
		a.steps[index] = ps_.step;
		a.n_steps = index + 1;
		ps_.step = (struct policy_step){0};
		provider_step_finish(&ps_);
		if (r == 1) {
			executor_outcome_set(ret, IPC_TASK_SUCCEEDED, answer, NULL);
			goto release;
		}
		if (r == -ECANCELED) {
			executor_outcome_stopped(ret, t, "cancelled during step %zu", index);
			goto release;
		}
		if (r == -ETIME) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
					     "max_seconds budget (%u s) exhausted during step %zu",
					     t->max_seconds, index);
			goto release;
		}
		if (r < 0 && (!action_failed || executor_connection_lost(r))) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "step %zu (%s): %s", index,
					     ipc_tool_to_string(a.steps[index].action.tool), err);
			goto release;
		}
		/* The next user turn tells the model what its action did (or why it failed), and
		 * that its steps change nothing when they have not for a while. */
		char warning[STUCK_MAX_WARNING];
		char *action_json = ipc_action_to_json(&a.steps[index].action);
		enum stuck_verdict sv = stuck_step(&stuck, index, action_json, a.run.screen_before,
						   a.run.screen_after, warning, sizeof(warning));
		free(action_json);
		if (sv != STUCK_NONE) {
			int jr = journal_step_stuck(env->journal, t->id, (int)index, warning);
			if (jr < 0)
				log_warning_errno(jr,
						  "task %lld step %zu: cannot journal its stuck "
						  "warning",
						  (long long)t->id, index);
			log_info("task %lld step %zu: %s", (long long)t->id, index, warning);
		}
		if (sv == STUCK_STOP) {
			json_t *ev = stuck_evidence(&stuck);
			char *text = ev ? json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
			int jr = text ? journal_task_stuck(env->journal, t->id, text) : -ENOMEM;
			if (jr < 0)
				log_warning_errno(jr, "task %lld: cannot journal why it is stuck",
						  (long long)t->id);
			const struct stuck_streak *k = stuck.stopped;
			if (k == &stuck.screen)
				executor_outcome_set(ret, IPC_TASK_STUCK, NULL,
						     "stuck: the screen did not change during %zu steps "
						     "in a row (steps %zu to %zu, screen sha256 %.12s...)",
						     k->n, k->first, k->first + k->n - 1, k->screen);
			else
				executor_outcome_set(ret, IPC_TASK_STUCK, NULL,
						     "stuck: the same action (%s) was repeated %zu times "
						     "in a row (steps %zu to %zu)",
						     ipc_tool_to_string(a.steps[index].action.tool), k->n,
						     k->first, k->first + k->n - 1);
			free(text);
			json_decref(ev);
			r = 0;
			goto release;
		}
		history_grow(&a, index + 1);
		/* What the action did as the task's format tells it (docs/policy.md, item 8: holo3
		 * in the model's coordinates, holo-nano as its harness); the journal keeps the
		 * executor's text. NULL: no result turn (holo-nano's update_plan). */
		const char *etext = r < 0 ? err : result;
		char *told = NULL;
		if (fmt->model_result(&a.steps[index].action, r < 0, etext,
				      r == 0 && strstr(etext, EXECUTOR_NO_FOCUS_WARNING) ?
					      EXECUTOR_NO_FOCUS_WARNING :
					      NULL,
				      &told) < 0)
			told = xstrdup(etext);
		if (sv != STUCK_NONE) {
			char *w = xasprintf("%s%s%s", told ? told : "", told && told[0] ? " " : "", warning);
			free(told);
			told = w;
		}
		a.result_texts[index + 1] = told;
		a.results[index + 1] = (struct policy_tool_result){.tool = a.steps[index].action.tool,
								   .error = r < 0,
								   .text = told};
		r = 0;
	}

release:
	stuck_finish(&stuck);
	x11_frame_destroy(frame);
	if (pt)
		pt->p->ops->task_close(pt);
	history_free(&a);
	executor_end(&a.run, d, r);
}
