/* The action executor (see executor.h). Runs on the executor thread only: it alone uses the X
 * connection it is handed. */
#include "executor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "desktop.h"
#include "engine.h"
#include "holod-config.h"
#include "secrets.h"
#include "stuck.h"

#define SLEEP_SLICE_US 20000 /* cancel and budget latency of wait / settle */

static const char *stop_error(int r)
{
	return r == -ECANCELED ? "cancelled" : r == -ETIME ? "max_seconds budget exhausted" : "stopped";
}

int executor_sleep(struct executor_run *run, uint64_t usec)
{
	uint64_t end = time_mono_us() + usec;
	for (;;) {
		if (atomic_load(run->t->stop) != EXECUTOR_RUN)
			return -ECANCELED;
		uint64_t now = time_mono_us();
		if (now >= run->deadline_us)
			return -ETIME;
		if (now >= end)
			return 0;
		time_sleep_us(MIN(MIN(end - now, run->deadline_us - now), (uint64_t)SLEEP_SLICE_US));
	}
}

static enum x11_button to_x11_button(enum ipc_button b)
{
	return b == IPC_BUTTON_RIGHT  ? X11_BUTTON_RIGHT :
	       b == IPC_BUTTON_MIDDLE ? X11_BUTTON_MIDDLE :
					X11_BUTTON_LEFT;
}

static enum x11_scroll to_x11_scroll(enum ipc_direction d)
{
	switch (d) {
	case IPC_DIRECTION_UP:
		return X11_SCROLL_UP;
	case IPC_DIRECTION_DOWN:
		return X11_SCROLL_DOWN;
	case IPC_DIRECTION_LEFT:
		return X11_SCROLL_LEFT;
	default:
		return X11_SCROLL_RIGHT;
	}
}

/* Model or pixel coordinates to root pixels. */
static int map_point(struct executor_run *run, const struct journal_step *s, int x, int y, int *px, int *py,
		     char *err, size_t errlen)
{
	int r;
	if (s->coords == IPC_COORDS_MODEL) {
		r = x11_map_model_point(&run->monitor, s->image_w, s->image_h, x, y, px, py);
		if (r < 0)
			snprintf(err, errlen, "cannot map model point (%d,%d): %s", x, y, x11_strerror(r));
		return r;
	}
	if (x >= run->root_w || y >= run->root_h) {
		snprintf(err, errlen, "point (%d,%d) is outside the screen (%dx%d pixels)", x, y, run->root_w,
			 run->root_h);
		return -ERANGE;
	}
	*px = x;
	*py = y;
	return 0;
}

/* Performs one action. Writes a short factual result, or an error message. */
/* Before a write or hotkey: whether a window has the keyboard focus. Without one the keys go
 * to the root window, almost always a mistake: the result says so, or, with require_focus,
 * the step fails. *ret_note receives the note for the result. */
static int check_focus(struct executor_run *run, const char **ret_note, char *err, size_t errlen)
{
	bool focused;
	char title[320];
	int r = desktop_focus(run, &focused, title, sizeof(title));
	*ret_note = "";
	if (r < 0) {
		snprintf(err, errlen, "%s", x11_strerror(r));
		return r;
	}
	if (focused)
		return 0;
	if (run->t->req->options.require_focus) {
		snprintf(err, errlen,
			 "no window has the keyboard focus (the keys would go to the "
			 "root window; require_focus is set): activate a window first");
		return -ENOTCONN;
	}
	*ret_note = " (" EXECUTOR_NO_FOCUS_WARNING ")";
	return 0;
}

static int inject(struct executor_run *run, const struct ipc_action *a, const struct journal_step *s,
		  const struct x11_frame *region_before, char *result, size_t rlen, char *err, size_t errlen)
{
	struct x11_display *d = run->d;
	const char *note = "";
	int r = 0;

	if ((a->tool == IPC_TOOL_WRITE || a->tool == IPC_TOOL_HOTKEY ||
	     a->tool == IPC_TOOL_HOLD_AND_TAP_KEY) &&
	    (r = check_focus(run, &note, err, errlen)) < 0)
		return r;

	switch (a->tool) {
	case IPC_TOOL_CLICK:
	case IPC_TOOL_DOUBLE_CLICK:
	case IPC_TOOL_TRIPLE_CLICK: {
		int count = a->tool == IPC_TOOL_CLICK ? 1 : a->tool == IPC_TOOL_DOUBLE_CLICK ? 2 : 3;
		r = x11_click(d, s->px, s->py, to_x11_button(a->button), count);
		snprintf(result, rlen, "clicked %s x%d at (%d,%d)",
			 a->button == IPC_BUTTON_RIGHT	? "right" :
			 a->button == IPC_BUTTON_MIDDLE ? "middle" :
							  "left",
			 count, s->px, s->py);
		break;
	}
	case IPC_TOOL_MOVE:
		r = x11_move(d, s->px, s->py);
		snprintf(result, rlen, "moved to (%d,%d)", s->px, s->py);
		break;
	case IPC_TOOL_DRAG:
		r = x11_drag(d, s->px, s->py, s->px2, s->py2);
		snprintf(result, rlen, "dragged (%d,%d) to (%d,%d)", s->px, s->py, s->px2, s->py2);
		break;
	case IPC_TOOL_DRAG_TO: {
		int x1 = 0, y1 = 0;
		r = x11_drag_to(d, s->px, s->py, &x1, &y1);
		snprintf(result, rlen, "dragged (%d,%d) to (%d,%d)", x1, y1, s->px, s->py);
		break;
	}
	case IPC_TOOL_SCROLL:
		r = x11_scroll(d, s->px, s->py, to_x11_scroll(a->direction), a->scroll_size);
		snprintf(result, rlen, "scrolled %d notches at (%d,%d)", a->scroll_size, s->px, s->py);
		break;
	case IPC_TOOL_WRITE: {
		/* {{secret:NAME}} becomes the value only here, in a buffer wiped after typing;
		 * the result counts the content as written, placeholders included, so that it
		 * does not tell a value's length */
		char *text = NULL;
		size_t n_secrets = 0;
		if (secrets_has_placeholder(a->content)) {
			r = secrets_expand(run->env->secrets, a->content, &text, &n_secrets, err, errlen);
			if (r < 0)
				return r;
		}
		if (a->overwrite)
			r = x11_key_combo(d, "ctrl+a");
		/* even a typing cut short may have shown part of a value */
		if (r >= 0 && n_secrets)
			run->typed_secret = true;
		if (r >= 0)
			r = x11_type(d, text ? text : a->content);
		secrets_text_free(text);
		if (r < 0)
			break;
		if (a->press_enter)
			r = x11_key_combo(d, "enter");
		snprintf(result, rlen, "typed %zu bytes%s%s%s", strlen(a->content),
			 n_secrets ? " (with secrets)" : "", a->press_enter ? " and Enter" : "", note);
		break;
	}
	case IPC_TOOL_HOTKEY:
		for (int i = 0; i < a->repeat_count && r >= 0; i++)
			r = x11_key_names(d, (const char *const *)a->keys, a->n_keys);
		{
			size_t off = (size_t)snprintf(result, rlen, "pressed ");
			for (size_t i = 0; i < a->n_keys && off < rlen; i++)
				off += (size_t)snprintf(result + off, rlen - off, "%s%s", i ? "+" : "",
							a->keys[i]);
			if (a->repeat_count > 1 && off < rlen)
				off += (size_t)snprintf(result + off, rlen - off, " x%d", a->repeat_count);
			if (off < rlen)
				snprintf(result + off, rlen - off, "%s", note);
		}
		break;
	case IPC_TOOL_HOLD_AND_TAP_KEY: {
		/* As the holo-nano harness does: the hold keys down in order, each tap key pressed
		 * and released, the hold keys released in reverse (also after a failure). */
		size_t held = 0;
		for (; held < a->n_hold_keys && r >= 0; held++)
			r = x11_key_down(d, a->hold_keys[held]);
		if (r < 0)
			held--;
		for (size_t i = 0; i < a->n_tap_keys && r >= 0; i++)
			r = x11_key_names(d, (const char *const *)&a->tap_keys[i], 1);
		while (held > 0) {
			int ru = x11_key_up(d, a->hold_keys[--held]);
			if (r >= 0 && ru < 0 && ru != -ENOENT)
				r = ru;
		}
		size_t off = (size_t)snprintf(result, rlen, "held ");
		for (size_t i = 0; i < a->n_hold_keys && off < rlen; i++)
			off += (size_t)snprintf(result + off, rlen - off, "%s%s", i ? "+" : "",
						a->hold_keys[i]);
		for (size_t i = 0; i < a->n_tap_keys && off < rlen; i++)
			off += (size_t)snprintf(result + off, rlen - off, "%s%s", i ? "," : ", tapped ",
						a->tap_keys[i]);
		if (off < rlen)
			snprintf(result + off, rlen - off, "%s", note);
		break;
	}
	case IPC_TOOL_UPDATE_PLAN:
		/* Nothing on the screen: the plan is in the journaled tool call, and the result
		 * is empty, as the holo-nano harness sends none after update_plan. */
		result[0] = '\0';
		break;
	case IPC_TOOL_KEY_DOWN:
		r = x11_key_down(d, a->key);
		snprintf(result, rlen, "holding %s", a->key);
		break;
	case IPC_TOOL_KEY_UP:
		r = x11_key_up(d, a->key);
		snprintf(result, rlen, "released %s", a->key);
		break;
	case IPC_TOOL_WAIT:
		r = executor_sleep(run, a->duration_ms * 1000ull);
		if (r < 0) {
			snprintf(err, errlen, "%s during wait", stop_error(r));
			return r;
		}
		snprintf(result, rlen, "waited %.3g s", a->duration_ms / 1000.0);
		break;
	case IPC_TOOL_ANSWER:
		snprintf(result, rlen, "answered");
		break;
	case IPC_TOOL_LAUNCH:
		return desktop_launch(run, a, result, rlen, err, errlen);
	case IPC_TOOL_WAIT_FOR:
		return desktop_wait_for(run, a, region_before, result, rlen, err, errlen);
	case IPC_TOOL_ACTIVATE:
		return desktop_activate(run, a, result, rlen, err, errlen);
	default:
		snprintf(err, errlen, "unknown tool");
		return -EINVAL;
	}
	if (r < 0)
		snprintf(err, errlen, "%s", x11_strerror(r));
	return r;
}

const char *executor_wait_kind_to_string(enum executor_wait_kind k)
{
	return k == EXECUTOR_WAIT_REPLY ? "reply" : k == EXECUTOR_WAIT_APPROVAL ? "approval" : NULL;
}

/* Who answered a wait and when, as the journal's `held` object (docs/journal.md). */
static char *held_json(const struct executor_wait *w, const char *decision, uint64_t since_us, json_t *extra)
{
	json_t *o = json_pack("{s:s, s:s, s:I}", "waited_for", executor_wait_kind_to_string(w->kind),
			      "decision", decision, "since_us", (json_int_t)since_us);
	if (o && w->answered_us) {
		json_object_set_new(o, "uid", json_integer(w->uid));
		json_object_set_new(o, "pid", json_integer(w->pid));
		json_object_set_new(o, "answered_us", json_integer((json_int_t)w->answered_us));
	}
	if (o && extra)
		json_object_update(o, extra);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return text;
}

/* ask_user: the question goes to the user (status, event stream), the reply is the result, the
 * next tool output the model reads. No reply within --ask-timeout fails the step (and the
 * task); a stop ends the wait. *ret_held: the journal's record of the answer. */
static int ask_user(struct executor_run *run, const struct ipc_action *a, int index, char *result,
		    size_t rlen, char **ret_held, char *err, size_t errlen)
{
	const struct executor_env *env = run->env;
	const struct executor_task *t = run->t;
	uint64_t since = time_real_us();
	int r;

	if (!env->wait_user) {
		snprintf(err, errlen, "nobody can answer a question here");
		return -ENOTSUP;
	}
	struct executor_wait w = {
		.kind = EXECUTOR_WAIT_REPLY,
		.details = json_pack("{s:i, s:s, s:I}", "step", index, "question",
				     a->content ? a->content : "", "timeout_s", (json_int_t)t->ask_timeout_s),
		.timeout_us = t->ask_timeout_s * 1000000ull,
		.deadline_us = run->deadline_us,
	};
	if (!w.details) {
		snprintf(err, errlen, "cannot show the question");
		return -ENOMEM;
	}
	log_info("task %lld step %d: asks the user (holoctl reply %lld TEXT): %.200s", (long long)t->id,
		 index, (long long)t->id, a->content ? a->content : "");
	r = env->wait_user(env->userdata, t, &w);
	json_decref(w.details);
	if (r == 0) {
		snprintf(result, rlen, "%s", w.text ? w.text : "");
		*ret_held = held_json(&w, "replied", since, NULL);
	} else if (r == -ETIMEDOUT) {
		snprintf(err, errlen, "no reply to the question within %u s (%s)", t->ask_timeout_s,
			 t->req->options.ask_timeout ? "the task's ask_timeout" : "--ask-timeout");
		*ret_held = held_json(&w, "timed_out", since, NULL);
	} else if (r == -ECANCELED || r == -ETIME) {
		snprintf(err, errlen, "%s while waiting for the user's reply", stop_error(r));
	} else {
		snprintf(err, errlen, "cannot wait for the reply: %s", strerror(-r));
	}
	free(w.text);
	return r;
}

/* The window an action acts on: the topmost one under its point, or for keys the focused one.
 * *ret_list (freed with x11_windows_free) owns what *ret_w points into; *ret_w NULL: none. */
static void target_window(struct executor_run *run, const struct ipc_action *a, const struct journal_step *s,
			  struct x11_window **ret_list, size_t *ret_n, const struct x11_window **ret_w)
{
	struct x11_window *list = NULL;
	size_t n = 0;
	uint64_t focus = 0;

	*ret_list = NULL;
	*ret_n = 0;
	*ret_w = NULL;
	bool keys = a->tool == IPC_TOOL_WRITE || a->tool == IPC_TOOL_HOTKEY || a->tool == IPC_TOOL_KEY_DOWN ||
		    a->tool == IPC_TOOL_KEY_UP || a->tool == IPC_TOOL_HOLD_AND_TAP_KEY;
	if ((!s->has_point && !keys) || x11_windows_list(run->d, &list, &n) < 0)
		return;
	if (keys && x11_focus_window(run->d, &focus) < 0)
		focus = 0;
	for (size_t i = n; i-- > 0 && !*ret_w;) {
		const struct x11_rect *r = &list[i].rect;
		if (keys ? list[i].id == focus :
			   s->px >= r->x && s->py >= r->y && s->px < r->x + r->width &&
				    s->py < r->y + r->height)
			*ret_w = &list[i];
	}
	*ret_list = list;
	*ret_n = n;
}

/* The part of the screen a person looks at to approve: 256x256 pixels around the action's point,
 * or the top-left part (at most 480x320) of the window it types into; as a PNG data URL, or
 * NULL. */
#define HOLD_CROP_SIZE 256
static char *target_crop(const struct executor_run *run, const struct journal_step *s,
			 const struct x11_window *w, const struct x11_frame *frame)
{
	const struct x11_rect *m = &run->monitor;
	struct x11_rect area;

	if (s->has_point) {
		area = (struct x11_rect){s->px - HOLD_CROP_SIZE / 2, s->py - HOLD_CROP_SIZE / 2,
					 HOLD_CROP_SIZE, HOLD_CROP_SIZE};
	} else if (w) {
		area = (struct x11_rect){w->rect.x, w->rect.y, MIN(w->rect.width, 480),
					 MIN(w->rect.height, 320)};
	} else {
		return NULL;
	}
	area.width = MIN(area.width, m->width);
	area.height = MIN(area.height, m->height);
	area.x = MAX(m->x, MIN(area.x, m->x + m->width - area.width));
	area.y = MAX(m->y, MIN(area.y, m->y + m->height - area.height));
	struct x11_frame *crop = desktop_crop(frame, m, &area);
	uint8_t *png = NULL;
	size_t n = 0;
	char *url = NULL;
	if (crop && x11_frame_encode_png(crop, &png, &n) >= 0)
		url = approval_png_data_url(png, n);
	free(png);
	x11_frame_destroy(crop);
	return url;
}

/* --approve: holds the step when the task's mode and the rules say so, until the user approves
 * (0), denies (-EPERM, the reason in err: what the model reads, or what fails a script's step) or
 * nobody answers within --approve-timeout (-ETIMEDOUT: the step fails closed). 0 at once when the
 * step is not held. -ECANCELED / -ETIME when the task is stopped while it waits. *ret_held: the
 * journal's record. */
static int approve_step(struct executor_run *run, const struct ipc_action *a, const struct journal_step *s,
			const struct x11_frame *frame, char **ret_held, char *err, size_t errlen)
{
	const struct executor_env *env = run->env;
	const struct executor_task *t = run->t;
	struct x11_window *list;
	const struct x11_window *tw;
	char why[512];
	size_t n;
	int r;

	if (t->approve == IPC_APPROVE_NONE || t->approve == IPC_APPROVE_DEFAULT || !approval_acts(a->tool))
		return 0;
	target_window(run, a, s, &list, &n, &tw);
	struct approval_window aw = {tw ? tw->title : NULL, tw ? tw->class_name : NULL,
				     tw ? tw->instance : NULL};
	bool held;
	if (env->approval_rules) {
		held = approval_check(env->approval_rules, t->approve, a, tw ? &aw : NULL, &run->held_keys,
				      why, sizeof(why));
	} else {
		held = true; /* no rules to say it is safe: fail closed */
		snprintf(why, sizeof(why), "no approval rules are loaded");
	}
	if (!held) {
		x11_windows_free(list, n);
		return 0;
	}
	if (!env->wait_user) {
		x11_windows_free(list, n);
		snprintf(err, errlen, "not run: it needs approval (%s) and nobody can give it here", why);
		return -EPERM;
	}
	uint64_t since = time_real_us();
	char *crop = target_crop(run, s, tw, frame);
	json_t *action = json_loads(s->tool_call, 0, NULL);
	const struct journal_agent_step *ag = s->agent;
	struct executor_wait w = {
		.kind = EXECUTOR_WAIT_APPROVAL,
		.details = json_pack("{s:i, s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:I}", "step", s->index,
				     "action", action ? action : json_null(), "reason", why, "mode",
				     ipc_approve_to_string(t->approve), "thought",
				     ag && ag->thought ? json_string(ag->thought) : json_null(), "point",
				     s->has_point ? json_pack("{s:i, s:i}", "x", s->px, "y", s->py) :
						    json_null(),
				     "target",
				     tw ? json_pack("{s:s?, s:s?, s:s?}", "title", tw->title, "class",
						    tw->class_name, "instance", tw->instance) :
					  json_null(),
				     "crop", crop ? json_string(crop) : json_null(), "timeout_s",
				     (json_int_t)t->approve_timeout_s),
		.timeout_us = t->approve_timeout_s * 1000000ull,
		.deadline_us = run->deadline_us,
	};
	free(crop);
	x11_windows_free(list, n);
	if (!w.details) {
		snprintf(err, errlen, "not run: cannot show it for approval");
		return -ENOMEM;
	}
	log_info("task %lld step %d: %s waits for approval (holoctl approve %lld): %s", (long long)t->id,
		 s->index, s->tool_name, (long long)t->id, why);
	r = env->wait_user(env->userdata, t, &w);
	json_decref(w.details);
	json_t *extra = json_pack("{s:s, s:s}", "mode", ipc_approve_to_string(t->approve), "reason", why);
	if (r == 0 && w.approved) {
		*ret_held = held_json(&w, "approved", since, extra);
	} else if (r == 0) {
		if (extra && w.text)
			json_object_set_new(extra, "denial", json_string(w.text));
		*ret_held = held_json(&w, "denied", since, extra);
		snprintf(err, errlen, "denied by the user%s%s", w.text ? ": " : "", w.text ? w.text : "");
		r = -EPERM;
	} else if (r == -ETIMEDOUT) {
		*ret_held = held_json(&w, "timed_out", since, extra);
		snprintf(err, errlen, "not approved within %u s (--approve-timeout): not run",
			 t->approve_timeout_s);
	} else if (r == -ECANCELED || r == -ETIME) {
		snprintf(err, errlen, "%s while waiting for approval", stop_error(r));
	} else {
		snprintf(err, errlen, "cannot wait for approval: %s", strerror(-r));
	}
	json_decref(extra);
	free(w.text);
	return r;
}

static int capture(struct executor_run *run, struct x11_frame **ret, char *err, size_t errlen)
{
	int r = x11_capture(run->d, &run->monitor, ret);
	if (r < 0)
		snprintf(err, errlen, "screenshot failed: %s", x11_strerror(r));
	return r;
}

/* Asks the model for the point(s) of a grounded action; writes them to s->model_* and what
 * was located, with the time taken, to `located`. */
static int ground(struct executor_run *run, const struct ipc_action *a, const struct x11_frame *frame,
		  struct journal_step *s, char *located, size_t llen, char *err, size_t errlen)
{
	const struct executor_env *env = run->env;
	const char *targets[2] = {a->target, a->target2};
	int *xs[2] = {&s->model_x, &s->model_x2}, *ys[2] = {&s->model_y, &s->model_y2};
	size_t off = 0;

	if (!env->ground) {
		snprintf(err, errlen,
			 "a target needs a model to locate it, and holod runs without "
			 "one (--model)");
		return -ENODEV;
	}
	for (size_t i = 0; i < 2; i++) {
		if (!targets[i])
			continue;
		uint64_t t0 = time_mono_us();
		int r = env->ground(env->ground_ctx, run->t, run->deadline_us, frame, targets[i], xs[i],
				    ys[i], err, errlen);
		if (r < 0)
			return r;
		int n = snprintf(located + off, llen - off,
				 "%s\"%s\" located at (%d,%d) of 1000 in "
				 "%.0f ms",
				 off ? "; " : "", targets[i], *xs[i], *ys[i], (time_mono_us() - t0) / 1e3);
		off = n < 0 ? off : MIN(llen - 1, off + (size_t)n);
	}
	return 0;
}

int executor_step(struct executor_run *run, int index, const struct ipc_action *a, enum ipc_coords coords,
		  struct x11_frame *before, uint64_t capture_us, const struct journal_agent_step *agent,
		  char *result, size_t rlen, char **ret_answer, bool *ret_action_failed, char *err,
		  size_t errlen)
{
	const struct ipc_task_request *req = run->t->req;
	const bool dry = req->options.dry_run;
	struct journal_step s = {0};
	struct journal_step_timing tm = {0};
	struct x11_frame *frame = before;
	char *tool_call = NULL, *held = NULL;
	int r;

	*ret_action_failed = false;
	result[0] = '\0';
	tool_call = ipc_action_to_json(a);
	if (!tool_call) {
		x11_frame_destroy(frame);
		snprintf(err, errlen, "cannot serialise the action");
		return -ENOMEM;
	}
	/* A screenshot of an earlier step that could not be written (a full disk) ends the task
	 * before this step acts: its record would be lost too. */
	char shoterr[512];
	if ((r = shotwriter_task_error(run->env->writer, run->t->id, shoterr, sizeof(shoterr))) < 0) {
		x11_frame_destroy(frame);
		snprintf(err, errlen, "not run: %s", shoterr);
		goto free_call;
	}
	s.task_id = run->t->id;
	s.index = index;
	s.tool_call = tool_call;
	s.tool_name = ipc_tool_to_string(a->tool);
	s.agent = agent;
	s.coords = coords;
	s.has_point = ipc_tool_has_point(a->tool);
	s.has_point2 = a->tool == IPC_TOOL_DRAG;
	s.model_x = a->x;
	s.model_y = a->y;
	s.model_x2 = a->x2;
	s.model_y2 = a->y2;
	s.has_monitor = true;
	s.monitor = run->monitor;
	s.started_us = time_real_us();

	uint64_t t0 = time_mono_us();
	if (!frame && (r = capture(run, &frame, err, errlen)) < 0)
		goto free_call;
	s.image_w = frame->width;
	s.image_h = frame->height;
	run->screen_before[0] = run->screen_after[0] = '\0';
	if (run->hash_screens)
		stuck_frame_hash(frame, run->screen_before);
	uint64_t t1 = time_mono_us();
	tm.capture_us = before ? capture_us : t1 - t0;

	char maperr[512] = "", located[IPC_MAX_TARGET_BYTES * 2 + 160] = "";
	int mr = 0;
	if (ipc_action_is_grounded(a)) {
		/* The model's point is in model space over the frame it saw: journaled and mapped
		 * as a model click is. */
		s.coords = IPC_COORDS_MODEL;
		mr = ground(run, a, frame, &s, located, sizeof(located), maperr, sizeof(maperr));
		if (mr == -ECANCELED || mr == -ETIME) {
			x11_frame_destroy(frame);
			snprintf(err, errlen, "%s while locating the target", stop_error(mr));
			r = mr;
			goto free_call;
		}
	}
	if (mr >= 0 && s.has_point)
		mr = map_point(run, &s, s.model_x, s.model_y, &s.px, &s.py, maperr, sizeof(maperr));
	if (mr >= 0 && s.has_point2)
		mr = map_point(run, &s, s.model_x2, s.model_y2, &s.px2, &s.py2, maperr, sizeof(maperr));
	if (mr < 0)
		s.has_point = s.has_point2 = false;
	uint64_t t2 = time_mono_us();
	tm.map_us = t2 - t1;

	if ((r = journal_step_begin(run->env->journal, &s)) < 0) {
		x11_frame_destroy(frame);
		snprintf(err, errlen, "not run: cannot journal it in %s: %s", journal_path(run->env->journal),
			 strerror(-r));
		goto free_call;
	}
	/* Held for approval before anything happens (the frame is still ours: its crop is shown). */
	int gr = mr >= 0 && !dry ? approve_step(run, a, &s, frame, &held, err, errlen) : 0;
	struct x11_frame *region_before = NULL;
	if (a->tool == IPC_TOOL_WAIT_FOR && a->wait_kind == IPC_WAIT_REGION_CHANGED) {
		const struct x11_rect area = {a->rx, a->ry, a->rw, a->rh};
		region_before = desktop_crop(frame, &run->monitor, &area);
	}
	shotwriter_submit(run->env->writer, s.task_id, index, "before", frame);
	frame = NULL;

	if (mr < 0) {
		r = mr;
		snprintf(err, errlen, "%s", maperr);
		*ret_action_failed = true;
	} else if (gr < 0) {
		/* Denied: the model reads why and goes on (a script's step fails); not approved in
		 * time, or no way to ask: the task fails, nothing was done. */
		r = gr;
		*ret_action_failed = gr == -EPERM;
	} else if (a->tool == IPC_TOOL_ASK_USER) {
		/* Nothing touches the desktop, so a dry run asks too: its model needs the reply. A
		 * question left unanswered fails the task (not the model's to retry). */
		r = ask_user(run, a, index, result, rlen, &held, err, errlen);
	} else if (dry) {
		r = 0;
		snprintf(result, rlen, "dry run: nothing injected");
	} else {
		run->typed_secret = false;
		r = inject(run, a, &s, region_before, result, rlen, err, errlen);
		if (r >= 0)
			approval_held_note(&run->held_keys, a);
		s.sensitive = run->typed_secret;
		*ret_action_failed = r < 0 && r != -ECANCELED && r != -ETIME;
		size_t used = strlen(result);
		if (r >= 0 && located[0] && used < rlen)
			snprintf(result + used, rlen - used, "; %s", located);
	}
	x11_frame_destroy(region_before);
	uint64_t t3 = time_mono_us();
	tm.inject_us = t3 - t2;

	unsigned settle = run->t->settle_ms;
	if (r >= 0 && !dry && settle && a->tool != IPC_TOOL_ANSWER && a->tool != IPC_TOOL_UPDATE_PLAN &&
	    a->tool != IPC_TOOL_ASK_USER) {
		int sr = executor_sleep(run, settle * 1000ull);
		/* A stop during the settle pause is noticed at the next step; this one is done. */
		(void)sr;
	}
	uint64_t t4 = time_mono_us();
	tm.settle_us = t4 - t3;

	char cerr[160];
	if (capture(run, &frame, cerr, sizeof(cerr)) >= 0) {
		if (run->hash_screens)
			stuck_frame_hash(frame, run->screen_after);
		shotwriter_submit(run->env->writer, s.task_id, index, "after", frame);
		frame = NULL;
	} else {
		log_warning("task %lld step %d: %s", (long long)s.task_id, index, cerr);
	}
	tm.capture_after_us = time_mono_us() - t4;

	s.held = held;
	/* An agent's step: what its action did goes to the followers before the step is
	 * journaled, under the feed's order lock (feed.h), so that no stream shows the journaled
	 * step before it. */
	struct feed *feed = agent ? run->env->feed : NULL;
	feed_order_begin(feed);
	if (agent && (r >= 0 || *ret_action_failed))
		feed_progress(feed, s.task_id, run->step, run->step_t0_us, "acted", "{s:b, s:s}", "ok",
			      r >= 0, r >= 0 ? "result" : "error", r >= 0 ? result : err);
	int jr = journal_step_finish(run->env->journal, &s,
				     r < 0 ? "error" :
				     dry   ? "dry_run" :
					     "ok",
				     r < 0 ? NULL : result, r < 0 ? err : NULL, time_real_us(), &tm);
	feed_order_end(feed);
	if (jr < 0 && r >= 0) {
		r = jr;
		snprintf(err, errlen, "cannot journal its end in %s: %s", journal_path(run->env->journal),
			 strerror(-jr));
		*ret_action_failed = false;
	}
	run->env->progress(run->env->userdata);
	if (r >= 0 && a->tool == IPC_TOOL_ANSWER) {
		*ret_answer = xstrdup(a->content);
		r = 1;
	}
free_call:
	free(held);
	free(tool_call);
	return r;
}

void executor_outcome_set(struct executor_outcome *ret, enum ipc_task_status status, char *result,
			  const char *format, ...)
{
	ret->status = status;
	ret->result = result;
	ret->error = NULL;
	if (format) {
		va_list ap;
		va_start(ap, format);
		if (vasprintf(&ret->error, format, ap) < 0)
			ret->error = NULL;
		va_end(ap);
	}
}

void executor_outcome_stopped(struct executor_outcome *ret, const struct executor_task *t,
			      const char *cancelled, ...)
{
	va_list ap;

	switch (atomic_load(t->stop)) {
	case EXECUTOR_KILL:
		executor_outcome_set(ret, IPC_TASK_CANCELLED, NULL, "%s", EXECUTOR_KILL_SWITCH_ERROR);
		break;
	case EXECUTOR_SHUTDOWN:
		/* The scheduler fills in the reason holod gave for stopping. */
		executor_outcome_set(ret, IPC_TASK_INTERRUPTED, NULL, NULL);
		break;
	default:
		executor_outcome_set(ret, IPC_TASK_CANCELLED, NULL, NULL);
		va_start(ap, cancelled);
		if (vasprintf(&ret->error, cancelled, ap) < 0)
			ret->error = NULL;
		va_end(ap);
	}
}

bool executor_connection_lost(int r)
{
	return r == -EIO || r == -EPIPE || r == -ECONNRESET || r == -X11_ERR_NO_DISPLAY;
}

void executor_record_provenance(const struct executor_env *env, const char *display_name,
				const struct executor_task *t, const struct x11_display *d, json_t *extra)
{
	const char *display = display_name ? display_name : getenv("DISPLAY");
	json_t *screen = json_null();
	int w, h;

	if (d) {
		x11_display_size(d, &w, &h);
		screen = json_pack("{s:i, s:i}", "width", w, "height", h);
	}
	json_t *o = json_pack("{s:s, s:o, s:o, s:{s:I, s:I, s:I, s:I}}", "holod_version", HOLOD_VERSION,
			      "display", display ? json_string(display) : json_null(), "screen",
			      screen ? screen : json_null(), "budgets", "max_steps", (json_int_t)t->max_steps,
			      "max_seconds", (json_int_t)t->max_seconds, "settle_ms",
			      (json_int_t)t->settle_ms, "ask_timeout", (json_int_t)t->ask_timeout_s);
	if (o && extra && json_object_update(o, extra) < 0) {
		json_decref(o);
		o = NULL;
	}
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	int r = text ? journal_task_provenance(env->journal, t->id, text) : -ENOMEM;
	if (r < 0)
		log_warning_errno(r, "task %lld: cannot journal its provenance", (long long)t->id);
	free(text);
	json_decref(o);
}

int executor_begin(const struct executor_env *env, struct x11_display **d, const char *display_name,
		   const struct executor_task *t, json_t *provenance, struct executor_run *ret, char *err,
		   size_t errlen)
{
	struct executor_run run = {.env = env, .t = t};

	run.deadline_us = time_mono_us() + t->max_seconds * 1000000ull;
	if (!*d) {
		*d = x11_display_open(display_name);
		if (!*d) {
			int e = errno;
			snprintf(err, errlen, "cannot open display %s: %s",
				 display_name ? display_name : "$DISPLAY", x11_strerror(-e));
			executor_record_provenance(env, display_name, t, NULL, provenance);
			return -e;
		}
	}
	executor_record_provenance(env, display_name, t, *d, provenance);
	run.d = *d;
	run.display_name = display_name;
	/* The stop flag interrupts a long write between two characters (EXECUTOR_RUN is 0). */
	x11_input_set_interrupt(run.d, t->stop);
	x11_display_size(run.d, &run.root_w, &run.root_h);
	if (x11_display_monitors(run.d, &run.monitor, 1) < 1)
		run.monitor = (struct x11_rect){0, 0, run.root_w, run.root_h};
	*ret = run;
	return 0;
}

void executor_end(struct executor_run *run, struct x11_display **d, int last_error)
{
	x11_input_set_interrupt(run->d, NULL); /* the flag goes with the task */
	/* Never leave a key or button held after a task, whatever its outcome. */
	if (x11_release_all(run->d) < 0 || executor_connection_lost(last_error)) {
		x11_display_close(*d);
		*d = NULL;
	}
}

/* How a screen differs from a recorded one. */
struct screen_diff {
	double differing; /* fraction of pixels with any channel different */
	double mean_abs;  /* mean absolute difference over all channels, 0..255 */
};

/* Compares `frame` with the replayed task's "before" screenshot of step `step`. 0 with *ret
 * filled (a different size counts every pixel as differing); -errno with err filled when the
 * recording cannot be read. */
static int compare_recorded(const struct executor_run *run, int64_t task, uint32_t step,
			    const struct x11_frame *frame, struct screen_diff *ret, char *err, size_t errlen)
{
	char *rel = NULL, *sha = NULL, why[256];
	int r;

	if (!run->env->state_dir) {
		snprintf(err, errlen,
			 "holod has no state directory to read task %lld's screenshots "
			 "from",
			 (long long)task);
		return -ENOENT;
	}
	if ((r = journal_screenshot_get(run->env->journal, task, (int)step, "before", &rel, &sha)) < 0) {
		snprintf(err, errlen, "task %lld has no screenshot of step %u to compare with%s",
			 (long long)task, step, r == -ENOENT ? "" : ": the journal cannot be read");
		return r;
	}
	char *path = path_join(run->env->state_dir, rel);
	struct engine_image *img = engine_image_load_png(path, why, sizeof(why));
	free(path);
	free(rel);
	free(sha);
	if (!img) {
		r = -errno;
		snprintf(err, errlen, "cannot read task %lld's screenshot of step %u: %s", (long long)task,
			 step, why);
		return r;
	}
	int w = engine_image_width(img), h = engine_image_height(img);
	if (w != frame->width || h != frame->height) {
		*ret = (struct screen_diff){.differing = 1.0, .mean_abs = 255.0};
		engine_image_destroy(img);
		return 0;
	}
	const uint8_t *rec = engine_image_rgb(img);
	uint64_t differing = 0, abs_sum = 0;
	for (int y = 0; y < h; y++) {
		const uint8_t *a = frame->pixels + (size_t)y * frame->stride;
		const uint8_t *b = rec + (size_t)y * 3 * (size_t)w;
		for (int x = 0; x < 3 * w; x += 3) {
			unsigned d0 = (unsigned)abs(a[x] - b[x]), d1 = (unsigned)abs(a[x + 1] - b[x + 1]),
				 d2 = (unsigned)abs(a[x + 2] - b[x + 2]);
			differing += (d0 | d1 | d2) != 0;
			abs_sum += d0 + d1 + d2;
		}
	}
	engine_image_destroy(img);
	double pixels = (double)w * (double)h;
	*ret = (struct screen_diff){.differing = pixels > 0 ? (double)differing / pixels : 0,
				    .mean_abs = pixels > 0 ? (double)abs_sum / (3 * pixels) : 0};
	return 0;
}

/* Journals action `a` as step `index` that was not run: status error with `error` as the
 * reason and `frame` (owned) as its before screenshot, so that a review shows the screen the
 * step was refused on. A failure to journal it is logged: the task fails with the reason
 * anyway. */
static void journal_not_run(struct executor_run *run, int index, const struct ipc_action *a,
			    enum ipc_coords coords, struct x11_frame *frame, uint64_t capture_us,
			    const char *error)
{
	struct journal_step s = {.task_id = run->t->id,
				 .index = index,
				 .tool_name = ipc_tool_to_string(a->tool),
				 .coords = coords,
				 .has_monitor = true,
				 .monitor = run->monitor,
				 .image_w = frame->width,
				 .image_h = frame->height,
				 .started_us = time_real_us()};
	struct journal_step_timing tm = {.capture_us = capture_us};
	char *tool_call = ipc_action_to_json(a);
	int r = tool_call ? 0 : -ENOMEM;

	s.tool_call = tool_call;
	if (r < 0 || (r = journal_step_begin(run->env->journal, &s)) < 0) {
		log_warning("task %lld step %d: cannot journal the step that was not run: %s",
			    (long long)run->t->id, index, strerror(-r));
		x11_frame_destroy(frame);
		free(tool_call);
		return;
	}
	shotwriter_submit(run->env->writer, s.task_id, index, "before", frame);
	if ((r = journal_step_finish(run->env->journal, &s, "error", NULL, error, time_real_us(), &tm)) < 0)
		log_warning("task %lld step %d: cannot journal why it was not run: %s", (long long)run->t->id,
			    index, strerror(-r));
	run->env->progress(run->env->userdata);
	free(tool_call);
}

void executor_run(const struct executor_env *env, struct x11_display **d, const char *display_name,
		  const struct executor_task *t, struct executor_outcome *ret)
{
	struct executor_run run;
	const struct ipc_task_request *req = t->req;
	char err[1024];
	char result[IPC_MAX_REPLY_BYTES + 1024];
	char *answer = NULL;
	bool action_failed;
	int r = 0;

	if (req->kind != IPC_TASK_KIND_SCRIPT) {
		executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "not a script task");
		return;
	}
	if (executor_begin(env, d, display_name, t, NULL, &run, err, sizeof(err)) < 0) {
		executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "%s", err);
		return;
	}
	for (size_t i = 0; i < req->n_actions; i++) {
		/* holoctl pause: a script holds between two actions too */
		uint64_t held_us = 0;
		bool took = false;
		if (i > 0 && env->pause_point && env->pause_point(env->userdata, t, &held_us, &took) != 0)
			run.deadline_us += held_us;
		if (atomic_load(t->stop) != EXECUTOR_RUN) {
			executor_outcome_stopped(ret, t, "cancelled after %zu of %zu steps", i,
						 req->n_actions);
			goto release;
		}
		if (i >= t->max_steps) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
					     "max_steps budget (%u) reached with %zu actions left",
					     t->max_steps, req->n_actions - i);
			goto release;
		}
		if (time_mono_us() >= run.deadline_us) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
					     "max_seconds budget (%u s) exhausted after %zu steps",
					     t->max_seconds, i);
			goto release;
		}
		err[0] = '\0';
		struct x11_frame *before = NULL;
		uint64_t capture_us = 0;
		if (req->check_steps) {
			/* A replay --check: the screen this action is about to act on must be the
			 * one the recorded step acted on. */
			struct screen_diff diff = {0};
			uint64_t t0 = time_mono_us();
			if ((r = x11_capture(run.d, &run.monitor, &before)) < 0) {
				executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
						     "step %zu: screenshot failed: %s", i, x11_strerror(r));
				goto release;
			}
			capture_us = time_mono_us() - t0;
			if ((r = compare_recorded(&run, req->replay_of, req->check_steps[i], before, &diff,
						  err, sizeof(err))) < 0) {
				x11_frame_destroy(before);
				executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "step %zu: %s", i, err);
				goto release;
			}
			if (diff.differing > req->check_threshold) {
				snprintf(err, sizeof(err),
					 "the screen differs from step %u of task %lld: %.2f%% of the "
					 "pixels differ (mean absolute difference %.2f of 255), above the "
					 "threshold of %.2f%%",
					 req->check_steps[i], (long long)req->replay_of,
					 100.0 * diff.differing, diff.mean_abs, 100.0 * req->check_threshold);
				char *why = xasprintf("not run: %s", err);
				journal_not_run(&run, (int)i, &req->actions[i], req->coords, before,
						capture_us, why);
				free(why);
				executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "step %zu: %s", i, err);
				r = 0;
				goto release;
			}
			log_info("task %lld step %zu: the screen matches step %u of task %lld (%.2f%% "
				 "of the pixels differ)",
				 (long long)t->id, i, req->check_steps[i], (long long)req->replay_of,
				 100.0 * diff.differing);
		}
		r = executor_step(&run, (int)i, &req->actions[i], req->coords, before, capture_us, NULL,
				  result, sizeof(result), &answer, &action_failed, err, sizeof(err));
		if (r == 1) {
			executor_outcome_set(ret, IPC_TASK_SUCCEEDED, answer, NULL);
			goto release;
		}
		if (r == -ECANCELED) {
			executor_outcome_stopped(ret, t, "cancelled during step %zu (%s)", i,
						 ipc_tool_to_string(req->actions[i].tool));
			goto release;
		}
		if (r == -ETIME) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL,
					     "max_seconds budget (%u s) exhausted during step %zu",
					     t->max_seconds, i);
			goto release;
		}
		if (r < 0) {
			executor_outcome_set(ret, IPC_TASK_FAILED, NULL, "step %zu (%s): %s", i,
					     ipc_tool_to_string(req->actions[i].tool), err);
			goto release;
		}
	}
	executor_outcome_set(ret, IPC_TASK_SUCCEEDED, NULL, NULL);

release:
	executor_end(&run, d, r);
}
