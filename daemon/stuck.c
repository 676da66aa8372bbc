/* Stuck steps (see stuck.h). */
#include "stuck.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void stuck_init(struct stuck *s, unsigned warn, unsigned stop)
{
	*s = (struct stuck){.warn = warn, .stop = stop};
}

void stuck_finish(struct stuck *s)
{
	json_decref(s->action.action);
	s->action.action = NULL;
}

void stuck_frame_hash(const struct x11_frame *f, char ret[65])
{
	/* x11 frames are packed RGB: stride is width * 3, no padding to leave out */
	ipc_sha256_hex(f->pixels, f->stride * (size_t)f->height, ret);
}

static bool point_near(const json_t *a, const json_t *b, const char *x, const char *y)
{
	json_t *ax = json_object_get(a, x), *ay = json_object_get(a, y);
	json_t *bx = json_object_get(b, x), *by = json_object_get(b, y);
	if (!ax && !bx && !ay && !by)
		return true;
	if (!json_is_integer(ax) || !json_is_integer(ay) || !json_is_integer(bx) || !json_is_integer(by))
		return false;
	return llabs(json_integer_value(ax) - json_integer_value(bx)) <= STUCK_POINT_SLACK &&
	       llabs(json_integer_value(ay) - json_integer_value(by)) <= STUCK_POINT_SLACK;
}

/* The same action on the same target: the same tool and arguments but for the `element`
 * label and the points, which may differ by the slack. */
static bool same_action(const json_t *a, const json_t *b)
{
	static const char *const loose[] = {"element", "x", "y", "x2", "y2"};
	if (!point_near(a, b, "x", "y") || !point_near(a, b, "x2", "y2"))
		return false;
	json_t *ca = json_deep_copy(a), *cb = json_deep_copy(b);
	bool same = false;
	if (ca && cb) {
		for (size_t i = 0; i < ARRAY_SIZE(loose); i++) {
			json_object_del(ca, loose[i]);
			json_object_del(cb, loose[i]);
		}
		same = json_equal(ca, cb);
	}
	json_decref(ca);
	json_decref(cb);
	return same;
}

/* "click at (500,500)", "hotkey ctrl+s": how the warning names the repeated action. */
static void describe(const json_t *a, char *buf, size_t len)
{
	const char *tool = json_string_value(json_object_get(a, "tool_name"));
	json_t *x = json_object_get(a, "x"), *y = json_object_get(a, "y");
	json_t *keys = json_object_get(a, "keys");
	int n = snprintf(buf, len, "%s", tool ? tool : "an action");
	size_t off = n < 0 ? 0 : MIN((size_t)n, len - 1);
	if (json_is_integer(x) && json_is_integer(y)) {
		snprintf(buf + off, len - off, " at (%lld,%lld)", (long long)json_integer_value(x),
			 (long long)json_integer_value(y));
	} else if (json_is_array(keys)) {
		size_t i;
		json_t *k;
		json_array_foreach(keys, i, k)
		{
			n = snprintf(buf + off, len - off, "%s%s", i ? "+" : " ",
				     json_string_value(k) ? json_string_value(k) : "?");
			off = n < 0 ? off : MIN(off + (size_t)n, len - 1);
		}
	}
}

static void append(char *buf, size_t len, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *format, ...)
{
	size_t off = strlen(buf);
	va_list ap;
	if (off + 1 >= len)
		return;
	va_start(ap, format);
	vsnprintf(buf + off, len - off, format, ap);
	va_end(ap);
}

enum stuck_verdict stuck_step(struct stuck *s, size_t index, const char *action, const char *before,
			      const char *after, char *warning, size_t wlen)
{
	warning[0] = '\0';

	/* the screen: unchanged by this step, and the streak's screen */
	if (before && after && before[0] && strcmp(before, after) == 0) {
		if (s->screen.n && s->screen.first + s->screen.n == index &&
		    strcmp(s->screen.screen, after) == 0) {
			s->screen.n++;
		} else {
			s->screen.first = index;
			s->screen.n = 1;
			snprintf(s->screen.screen, sizeof(s->screen.screen), "%s", after);
		}
	} else {
		s->screen.n = 0;
	}

	/* the action: the streak's first one again */
	json_t *a = action ? json_loads(action, 0, NULL) : NULL;
	if (json_is_object(a) && s->action.n && s->action.first + s->action.n == index &&
	    same_action(s->action.action, a)) {
		s->action.n++;
		json_decref(a);
	} else if (json_is_object(a)) {
		json_decref(s->action.action);
		s->action.action = a;
		s->action.first = index;
		s->action.n = 1;
	} else {
		json_decref(a);
		s->action.n = 0;
	}

	enum stuck_verdict v = STUCK_NONE;
	if (s->warn && s->screen.n >= s->warn) {
		append(warning, wlen,
		       "The screen has not changed during the last %zu steps (steps %zu to %zu): "
		       "your actions had no visible effect.",
		       s->screen.n, s->screen.first, s->screen.first + s->screen.n - 1);
		v = STUCK_WARN;
	}
	if (s->warn && s->action.n >= s->warn) {
		char what[160];
		describe(s->action.action, what, sizeof(what));
		append(warning, wlen,
		       "%sYou repeated the same action (%s) %zu times in a row "
		       "(steps %zu to %zu).",
		       warning[0] ? " " : "", what, s->action.n, s->action.first,
		       s->action.first + s->action.n - 1);
		v = STUCK_WARN;
	}
	if (v == STUCK_WARN)
		append(warning, wlen, " Do something different.");
	if (s->stop && (s->screen.n >= s->stop || s->action.n >= s->stop)) {
		s->stopped = s->screen.n >= s->stop ? &s->screen : &s->action;
		v = STUCK_STOP;
	}
	return v;
}

json_t *stuck_evidence(const struct stuck *s)
{
	const struct stuck_streak *k = s->stopped;
	if (!k)
		return NULL;
	bool screen = k == &s->screen;
	/* the other streak, when it is one (two steps or more) up to the same step, is evidence
	 * too */
	bool both_screen = screen || (s->screen.n >= 2 &&
				      s->screen.first + s->screen.n == s->action.first + s->action.n);
	bool both_action = !screen || (s->action.n >= 2 &&
				       s->action.first + s->action.n == s->screen.first + s->screen.n);
	return json_pack("{s:s, s:[I, I], s:I, s:o, s:o, s:I, s:I}", "reason",
			 screen ? "unchanged_screen" : "repeated_action", "steps", (json_int_t)k->first,
			 (json_int_t)(k->first + k->n - 1), "count", (json_int_t)k->n, "screen_sha256",
			 both_screen && s->screen.n ? json_string(s->screen.screen) : json_null(), "action",
			 both_action && s->action.n ? json_deep_copy(s->action.action) : json_null(), "warn",
			 (json_int_t)s->warn, "stop", (json_int_t)s->stop);
}
