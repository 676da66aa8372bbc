/* The desktop actions (see desktop.h). Waits poll every DESKTOP_POLL_US through
 * executor_sleep, so a cancel, the kill switch and max_seconds stop them within one poll. */
#include "desktop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"
#include "launch.h"

static bool frames_equal(const struct x11_frame *a, const struct x11_frame *b)
{
	if (a->width != b->width || a->height != b->height)
		return false;
	for (int y = 0; y < a->height; y++)
		if (memcmp(a->pixels + (size_t)y * a->stride, b->pixels + (size_t)y * b->stride,
			   (size_t)a->width * 3) != 0)
			return false;
	return true;
}

struct x11_frame *desktop_crop(const struct x11_frame *frame, const struct x11_rect *origin,
			       const struct x11_rect *area)
{
	int x = area->x - origin->x, y = area->y - origin->y;
	if (x < 0 || y < 0 || area->width <= 0 || area->height <= 0 || x + area->width > frame->width ||
	    y + area->height > frame->height)
		return NULL;
	struct x11_frame *f = x11_frame_create(area->width, area->height);
	if (!f)
		return NULL;
	for (int row = 0; row < area->height; row++)
		memcpy(f->pixels + (size_t)row * f->stride,
		       frame->pixels + (size_t)(y + row) * frame->stride + (size_t)x * 3,
		       (size_t)area->width * 3);
	return f;
}

/* "\"Untitled - Mousepad\" (Mousepad), ..." of the windows in `w`, or "none". */
static void describe_windows(const struct x11_window *w, size_t n, char *buf, size_t size)
{
	size_t off = 0;
	buf[0] = '\0';
	if (n == 0) {
		snprintf(buf, size, "none");
		return;
	}
	/* Topmost first: the end of the stacking order is what the user sees. */
	for (size_t k = 0; k < n && k < DESKTOP_MAX_WINDOWS_NAMED && off < size; k++) {
		const struct x11_window *x = &w[n - 1 - k];
		int m = snprintf(buf + off, size - off, "%s\"%.80s\" (%s)", k ? ", " : "", x->title,
				 x->class_name);
		off = m < 0 ? size : off + (size_t)m;
	}
	if (n > DESKTOP_MAX_WINDOWS_NAMED && off < size)
		snprintf(buf + off, size - off, " and %zu more", n - DESKTOP_MAX_WINDOWS_NAMED);
}

/* Window ids that do not count (those that were there before a launch). */
struct id_set {
	uint64_t *ids;
	size_t n;
};

static bool id_set_has(const struct id_set *set, uint64_t id)
{
	for (size_t i = 0; set && i < set->n; i++)
		if (set->ids[i] == id)
			return true;
	return false;
}

/* The topmost window matching mt in the list and not in `old` (may be NULL), or NULL. */
static const struct x11_window *find(const struct ipc_window_matcher *mt, const struct x11_window *w,
				     size_t n, const struct id_set *old)
{
	for (size_t k = n; k-- > 0;)
		if (!id_set_has(old, w[k].id) &&
		    ipc_window_matcher_test(mt, w[k].title, w[k].class_name, w[k].instance))
			return &w[k];
	return NULL;
}

static int stop_message(int r, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s while waiting for %s",
		 r == -ECANCELED ? "cancelled" : "max_seconds budget exhausted", what);
	return r;
}

static int display_error(int r, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", x11_strerror(r));
	return r;
}

/* Waits for a matching window to be mapped (want_present) or gone; on success the found
 * window's title and class go into result, and its id into *ret_id (may be NULL). */
static int wait_window(struct executor_run *run, const struct ipc_window_match *m, bool want_present,
		       const struct id_set *old, uint32_t timeout_ms, uint64_t *ret_id, char *found,
		       size_t flen, char *err, size_t errlen)
{
	char desc[IPC_MAX_MATCH_BYTES * 3 + 64], what[sizeof(desc) + 64];
	struct ipc_window_matcher *mt = ipc_window_matcher_create(m, err, errlen);
	uint64_t start = time_mono_us(), end = start + timeout_ms * 1000ull;
	int r;

	if (!mt)
		return -errno;
	ipc_window_match_describe(m, desc, sizeof(desc));
	snprintf(what, sizeof(what), "%s %s",
		 !want_present ? "no window with" :
		 old	       ? "a new window with" :
				 "a window with",
		 desc);
	for (;;) {
		struct x11_window *w = NULL;
		size_t n = 0;
		if ((r = x11_windows_list(run->d, &w, &n)) < 0) {
			display_error(r, err, errlen);
			break;
		}
		const struct x11_window *hit = find(mt, w, n, old);
		if (want_present ? hit != NULL : hit == NULL) {
			if (hit && ret_id)
				*ret_id = hit->id;
			if (hit)
				snprintf(found, flen, "window \"%.200s\" (%s) after %.2f s", hit->title,
					 hit->class_name, (time_mono_us() - start) / 1e6);
			else
				snprintf(found, flen, "no window with %.300s after %.2f s", desc,
					 (time_mono_us() - start) / 1e6);
			x11_windows_free(w, n);
			r = 0;
			break;
		}
		if (time_mono_us() >= end) {
			char seen[1024];
			if (want_present) {
				describe_windows(w, n, seen, sizeof(seen));
				snprintf(err, errlen,
					 "timed out after %.3g s waiting for %s; windows "
					 "on the screen: %s",
					 timeout_ms / 1000.0, what, seen);
			} else {
				snprintf(err, errlen,
					 "timed out after %.3g s waiting for %s; still "
					 "there: \"%.200s\" (%s)",
					 timeout_ms / 1000.0, what, hit->title, hit->class_name);
			}
			x11_windows_free(w, n);
			r = -ETIMEDOUT;
			break;
		}
		x11_windows_free(w, n);
		if ((r = executor_sleep(run, DESKTOP_POLL_US)) < 0) {
			stop_message(r, what, err, errlen);
			break;
		}
	}
	ipc_window_matcher_destroy(mt);
	return r;
}

/* The focused client window's title (and class), or "" with *ret_focused false. */
static int focus_info(struct executor_run *run, bool *ret_focused, uint64_t *ret_id, char *title, size_t tlen)
{
	uint64_t id;
	int r = x11_focus_window(run->d, &id);
	if (r < 0)
		return r;
	*ret_focused = id != 0;
	*ret_id = id;
	title[0] = '\0';
	if (!id)
		return 0;
	struct x11_window *w = NULL;
	size_t n = 0;
	if ((r = x11_windows_list(run->d, &w, &n)) < 0)
		return r;
	snprintf(title, tlen, "a window that is not mapped");
	for (size_t k = 0; k < n; k++)
		if (w[k].id == id)
			snprintf(title, tlen, "\"%.200s\" (%s)", w[k].title, w[k].class_name);
	x11_windows_free(w, n);
	return 0;
}

int desktop_focus(struct executor_run *run, bool *ret_focused, char *title, size_t tlen)
{
	uint64_t id;
	return focus_info(run, ret_focused, &id, title, tlen);
}

/* Waits until window `id` (or, id 0, any window matching mt) has the focus. */
static int wait_focus(struct executor_run *run, const struct ipc_window_match *m, uint64_t id,
		      uint32_t timeout_ms, char *found, size_t flen, char *err, size_t errlen)
{
	char desc[IPC_MAX_MATCH_BYTES * 3 + 64], what[sizeof(desc) + 64];
	struct ipc_window_matcher *mt = ipc_window_matcher_create(m, err, errlen);
	uint64_t start = time_mono_us(), end = start + timeout_ms * 1000ull;
	int r;

	if (!mt)
		return -errno;
	ipc_window_match_describe(m, desc, sizeof(desc));
	snprintf(what, sizeof(what), "the focus on a window with %s", desc);
	for (;;) {
		bool focused;
		uint64_t fid;
		char title[320];
		if ((r = focus_info(run, &focused, &fid, title, sizeof(title))) < 0) {
			display_error(r, err, errlen);
			break;
		}
		bool ok = false;
		if (focused && id)
			ok = fid == id;
		else if (focused) {
			struct x11_window *w = NULL;
			size_t n = 0;
			if ((r = x11_windows_list(run->d, &w, &n)) < 0) {
				display_error(r, err, errlen);
				break;
			}
			for (size_t k = 0; k < n && !ok; k++)
				ok = w[k].id == fid &&
				     ipc_window_matcher_test(mt, w[k].title, w[k].class_name, w[k].instance);
			x11_windows_free(w, n);
		}
		if (ok) {
			snprintf(found, flen, "%s has the focus after %.2f s", title,
				 (time_mono_us() - start) / 1e6);
			r = 0;
			break;
		}
		if (time_mono_us() >= end) {
			snprintf(err, errlen, "timed out after %.3g s waiting for %s; the focus is %s%s",
				 timeout_ms / 1000.0, what, focused ? "on " : "on no window",
				 focused ? title : " (keys would go to the root window)");
			r = -ETIMEDOUT;
			break;
		}
		if ((r = executor_sleep(run, DESKTOP_POLL_US)) < 0) {
			stop_message(r, what, err, errlen);
			break;
		}
	}
	ipc_window_matcher_destroy(mt);
	return r;
}

static int wait_stable(struct executor_run *run, const struct ipc_action *a, char *result, size_t rlen,
		       char *err, size_t errlen)
{
	uint64_t start = time_mono_us(), end = start + a->timeout_ms * 1000ull;
	uint64_t changed = start;
	struct x11_frame *prev = NULL, *cur = NULL;
	char what[96];
	int r;

	snprintf(what, sizeof(what), "the screen to stay unchanged for %u ms", a->stable_ms);
	if ((r = x11_capture(run->d, NULL, &prev)) < 0)
		return display_error(r, err, errlen);
	for (;;) {
		if ((r = executor_sleep(run, DESKTOP_POLL_US)) < 0) {
			stop_message(r, what, err, errlen);
			break;
		}
		if ((r = x11_capture(run->d, NULL, &cur)) < 0) {
			display_error(r, err, errlen);
			break;
		}
		uint64_t now = time_mono_us();
		if (!frames_equal(prev, cur)) {
			changed = now;
			x11_frame_destroy(prev);
			prev = cur;
		} else {
			x11_frame_destroy(cur);
		}
		cur = NULL;
		if (now - changed >= a->stable_ms * 1000ull) {
			snprintf(result, rlen, "the screen was unchanged for %u ms after %.2f s",
				 a->stable_ms, (now - start) / 1e6);
			r = 0;
			break;
		}
		if (now >= end) {
			snprintf(err, errlen,
				 "timed out after %.3g s waiting for %s; it last changed "
				 "%.0f ms before the timeout",
				 a->timeout_ms / 1000.0, what, (now - changed) / 1e3);
			r = -ETIMEDOUT;
			break;
		}
	}
	x11_frame_destroy(prev);
	return r;
}

static int wait_region(struct executor_run *run, const struct ipc_action *a, const struct x11_frame *before,
		       char *result, size_t rlen, char *err, size_t errlen)
{
	const struct x11_rect area = {a->rx, a->ry, a->rw, a->rh};
	uint64_t start = time_mono_us(), end = start + a->timeout_ms * 1000ull;
	char what[128];
	int r;

	snprintf(what, sizeof(what), "the region %dx%d at (%d,%d) to change", a->rw, a->rh, a->rx, a->ry);
	if (!before) {
		snprintf(err, errlen,
			 "the region %dx%d at (%d,%d) is not inside the captured "
			 "monitor (%dx%d at (%d,%d))",
			 a->rw, a->rh, a->rx, a->ry, run->monitor.width, run->monitor.height, run->monitor.x,
			 run->monitor.y);
		return -ERANGE;
	}
	for (;;) {
		struct x11_frame *cur = NULL;
		if ((r = x11_capture(run->d, &area, &cur)) < 0)
			return display_error(r, err, errlen);
		bool same = frames_equal(before, cur);
		x11_frame_destroy(cur);
		if (!same) {
			snprintf(result, rlen, "%s: changed after %.2f s", what + 4,
				 (time_mono_us() - start) / 1e6);
			return 0;
		}
		if (time_mono_us() >= end) {
			snprintf(err, errlen,
				 "timed out after %.3g s waiting for %s; it stayed as in "
				 "the step's before-screenshot",
				 a->timeout_ms / 1000.0, what);
			return -ETIMEDOUT;
		}
		if ((r = executor_sleep(run, DESKTOP_POLL_US)) < 0)
			return stop_message(r, what, err, errlen);
	}
}

int desktop_wait_for(struct executor_run *run, const struct ipc_action *a,
		     const struct x11_frame *region_before, char *result, size_t rlen, char *err,
		     size_t errlen)
{
	switch (a->wait_kind) {
	case IPC_WAIT_WINDOW:
	case IPC_WAIT_WINDOW_GONE:
		return wait_window(run, &a->match, a->wait_kind == IPC_WAIT_WINDOW, NULL, a->timeout_ms, NULL,
				   result, rlen, err, errlen);
	case IPC_WAIT_FOCUS:
		return wait_focus(run, &a->match, 0, a->timeout_ms, result, rlen, err, errlen);
	case IPC_WAIT_SCREEN_STABLE:
		return wait_stable(run, a, result, rlen, err, errlen);
	case IPC_WAIT_REGION_CHANGED:
		return wait_region(run, a, region_before, result, rlen, err, errlen);
	}
	snprintf(err, errlen, "unknown wait_for condition");
	return -EINVAL;
}

int desktop_activate(struct executor_run *run, const struct ipc_action *a, char *result, size_t rlen,
		     char *err, size_t errlen)
{
	char desc[IPC_MAX_MATCH_BYTES * 3 + 64], seen[1024], found[400];
	struct ipc_window_matcher *mt = ipc_window_matcher_create(&a->match, err, errlen);
	struct x11_window *w = NULL;
	size_t n = 0;
	int r;

	if (!mt)
		return -errno;
	ipc_window_match_describe(&a->match, desc, sizeof(desc));
	if ((r = x11_windows_list(run->d, &w, &n)) < 0) {
		display_error(r, err, errlen);
		goto free_matcher;
	}
	const struct x11_window *hit = find(mt, w, n, NULL);
	if (!hit) {
		describe_windows(w, n, seen, sizeof(seen));
		snprintf(err, errlen, "no window with %s to activate; windows on the screen: %s", desc, seen);
		r = -ENOENT;
		goto free_list;
	}
	uint64_t id = hit->id;
	char title[300];
	snprintf(title, sizeof(title), "\"%.200s\" (%s)", hit->title, hit->class_name);
	if ((r = x11_window_activate(run->d, id)) < 0) {
		snprintf(err, errlen, "cannot activate %s: %s", title,
			 r == -ENOENT ? "it went away" : x11_strerror(r));
		goto free_list;
	}
	const char *how = r == 1 ? "through the window manager" :
				   "by direct focus (no window "
				   "manager)";
	if ((r = wait_focus(run, &a->match, id, a->timeout_ms, found, sizeof(found), err, errlen)) < 0)
		goto free_list;
	snprintf(result, rlen, "activated %s %s; %s", title, how, found);
free_list:
	x11_windows_free(w, n);
free_matcher:
	ipc_window_matcher_destroy(mt);
	return r;
}

int desktop_launch(struct executor_run *run, const struct ipc_action *a, char *result, size_t rlen, char *err,
		   size_t errlen)
{
	const char *dir = run->env->state_dir ? run->env->state_dir : ".";
	char *logs = xasprintf("%s/logs", dir);
	char *log_path = xasprintf("%s/%lld.log", logs, (long long)run->t->id);
	char found[400] = "";
	struct id_set old = {0};
	pid_t pid;
	int r;

	if (mkdir(logs, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		snprintf(err, errlen, "cannot create the log directory %s: %s", logs, strerror(-r));
		goto free_paths;
	}
	/* "Its first window": one that was not on the screen before the launch (a second
	 * editor must not be satisfied by the first one's window). */
	if (a->has_match) {
		struct x11_window *w = NULL;
		size_t n = 0;
		if ((r = x11_windows_list(run->d, &w, &n)) < 0) {
			display_error(r, err, errlen);
			goto free_paths;
		}
		old.ids = xcalloc(n + 1, sizeof(*old.ids));
		for (size_t k = 0; k < n; k++)
			old.ids[old.n++] = w[k].id;
		x11_windows_free(w, n);
	}
	if ((r = launch_spawn(a->argv, run->display_name ? run->display_name : x11_display_name(run->d),
			      log_path, &pid, err, errlen)) < 0)
		goto free_paths;
	int off = snprintf(result, rlen, "started %.100s (pid %d, output in %s)", a->argv[0], (int)pid,
			   log_path);
	if (a->has_match) {
		uint64_t id = 0;
		if ((r = wait_window(run, &a->match, true, &old, a->timeout_ms, &id, found, sizeof(found),
				     err, errlen)) < 0) {
			/* The program runs on: say which one the timeout is about. */
			char why[512];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "started %.100s (pid %d) but %s", a->argv[0], (int)pid, why);
			goto free_paths;
		}
		/* No window manager gives a new window the focus: without this the next keys
		 * would go to the root window (a window that went away meanwhile is left alone) */
		const char *focused = "";
		if (!x11_has_window_manager(run->d)) {
			int fr = x11_window_activate(run->d, id);
			if (fr < 0 && fr != -ENOENT) {
				snprintf(err, errlen,
					 "started %.100s (pid %d) but cannot focus its "
					 "%s: %s",
					 a->argv[0], (int)pid, found, x11_strerror(fr));
				r = fr;
				goto free_paths;
			}
			if (fr >= 0)
				focused = ", focused directly (no window manager)";
		}
		if (off > 0 && (size_t)off < rlen)
			snprintf(result + off, rlen - (size_t)off, "; %s%s", found, focused);
	}
	r = 0;
free_paths:
	free(old.ids);
	free(log_path);
	free(logs);
	return r;
}
