/* x11 windows: the client windows on the screen, the keyboard focus, activation.
 *
 * Listing walks the window tree with Xlib (a window manager reparents clients into frames, so
 * a client is found by its WM_CLASS, at most X11_WINDOW_DEPTH levels below the root); matching
 * is the caller's (ipc's PCRE2 matcher), which also needs the titles of everything seen for its
 * timeout messages, where libxdo's search would give ids only. Activation and the focused
 * client go through libxdo, whose EWMH request and client lookup are what xdotool users know. */
#include "common.h"
#include "x11-internal.h"

#include <stdlib.h>
#include <string.h>

#include <X11/Xatom.h>

/* Levels below the root searched for a client window (root > frame > client, with room for
 * window managers that nest deeper). */
#define X11_WINDOW_DEPTH 4

static char *latin1_to_utf8(const unsigned char *s, size_t n)
{
	char *out = xmalloc(2 * n + 1), *o = out;
	for (size_t i = 0; i < n && s[i]; i++) {
		if (s[i] < 0x80) {
			*o++ = (char)s[i];
		} else {
			*o++ = (char)(0xc0 | s[i] >> 6);
			*o++ = (char)(0x80 | (s[i] & 0x3f));
		}
	}
	*o = '\0';
	return out;
}

/* A property of 8-bit items of `type` (AnyPropertyType: any), malloc'd and NUL-terminated, cut
 * at X11_MAX_TITLE_BYTES; NULL when absent. */
static char *get_text_property(struct x11_display *d, Window w, Atom prop, Atom type, Atom *ret_type)
{
	Atom actual;
	int format;
	unsigned long n, after;
	unsigned char *data = NULL;
	char *out = NULL;

	if (XGetWindowProperty(d->dpy, w, prop, 0, X11_MAX_TITLE_BYTES / 4, False, type, &actual, &format, &n,
			       &after, &data) != Success ||
	    !data)
		return NULL;
	if (format == 8 && actual != None) {
		out = xstrndup((const char *)data, n);
		if (ret_type)
			*ret_type = actual;
	}
	XFree(data);
	return out;
}

static char *window_title(struct x11_display *d, Window w)
{
	Atom utf8 = XInternAtom(d->dpy, "UTF8_STRING", False);
	char *t = get_text_property(d, w, XInternAtom(d->dpy, "_NET_WM_NAME", False), utf8, NULL);
	if (t)
		return t;
	Atom type = None;
	t = get_text_property(d, w, XA_WM_NAME, AnyPropertyType, &type);
	if (t && type == XA_STRING) {
		char *u = latin1_to_utf8((const unsigned char *)t, strlen(t));
		free(t);
		return u;
	}
	return t ? t : xstrdup("");
}

/* A CARDINAL property's first item; false when absent. */
static bool get_cardinal(struct x11_display *d, Window w, const char *name, uint32_t *ret)
{
	Atom actual;
	int format;
	unsigned long n, after;
	unsigned char *data = NULL;
	bool found = false;

	if (XGetWindowProperty(d->dpy, w, XInternAtom(d->dpy, name, False), 0, 1, False, XA_CARDINAL, &actual,
			       &format, &n, &after, &data) == Success &&
	    data && n == 1 && format == 32) {
		/* Xlib hands 32-bit items as longs. */
		*ret = (uint32_t) * (unsigned long *)data;
		found = true;
	}
	if (data)
		XFree(data);
	return found;
}

/* Fills *ret for a viewable client window. 1: it is one, 0: not a viewable client. */
static int read_client(struct x11_display *d, Window w, struct x11_window *ret)
{
	XWindowAttributes wa;
	XClassHint hint = {0};
	Window child;
	int x, y;

	if (!XGetClassHint(d->dpy, w, &hint))
		return 0;
	if (!XGetWindowAttributes(d->dpy, w, &wa) || wa.map_state != IsViewable ||
	    !XTranslateCoordinates(d->dpy, w, d->root, 0, 0, &x, &y, &child)) {
		XFree(hint.res_name);
		XFree(hint.res_class);
		return 0;
	}
	uint32_t desktop = 0, pid = 0;
	bool has_desktop = get_cardinal(d, w, "_NET_WM_DESKTOP", &desktop);
	get_cardinal(d, w, "_NET_WM_PID", &pid);
	*ret = (struct x11_window){
		.id = w,
		.title = window_title(d, w),
		.class_name = xstrdup(hint.res_class ? hint.res_class : ""),
		.instance = xstrdup(hint.res_name ? hint.res_name : ""),
		.rect = {x, y, wa.width, wa.height},
		.desktop = !has_desktop		  ? X11_DESKTOP_NONE :
			   desktop == 0xFFFFFFFFu ? X11_DESKTOP_ALL :
						    (int64_t)desktop,
		.pid = pid,
	};
	XFree(hint.res_name);
	XFree(hint.res_class);
	return 1;
}

struct walk {
	struct x11_window *list;
	size_t n, cap;
};

static void walk(struct x11_display *d, Window w, int depth, struct walk *out)
{
	Window root, parent, *children = NULL;
	unsigned n = 0;

	if (out->n >= X11_MAX_WINDOWS || !XQueryTree(d->dpy, w, &root, &parent, &children, &n))
		return;
	for (unsigned i = 0; i < n && out->n < X11_MAX_WINDOWS; i++) {
		struct x11_window cw;
		if (read_client(d, children[i], &cw) > 0) {
			if (out->n == out->cap) {
				out->cap = out->cap ? 2 * out->cap : 16;
				out->list = xreallocarray(out->list, out->cap, sizeof(*out->list));
			}
			out->list[out->n++] = cw;
		} else if (depth + 1 < X11_WINDOW_DEPTH) {
			walk(d, children[i], depth + 1, out);
		}
	}
	if (children)
		XFree(children);
}

int x11_windows_list(struct x11_display *d, struct x11_window **ret, size_t *ret_n)
{
	struct walk out = {0};

	if (d->lost)
		return -ECONNRESET;
	/* Windows come and go during the walk: a BadWindow only drops that window. */
	x11_trap_begin();
	walk(d, d->root, 0, &out);
	x11_trap_end(d->dpy);
	if (d->lost) {
		x11_windows_free(out.list, out.n);
		return -ECONNRESET;
	}
	*ret = out.list;
	*ret_n = out.n;
	return 0;
}

void x11_windows_free(struct x11_window *w, size_t n)
{
	for (size_t i = 0; w && i < n; i++) {
		free(w[i].title);
		free(w[i].class_name);
		free(w[i].instance);
	}
	free(w);
}

int x11_focus_window(struct x11_display *d, uint64_t *ret_id)
{
	Window focus = None, client = None;
	int revert;

	if (d->lost)
		return -ECONNRESET;
	x11_trap_begin();
	XGetInputFocus(d->dpy, &focus, &revert);
	if (focus == PointerRoot) {
		/* Keys go to the window under the pointer: find its client. */
		Window root, child, w = d->root;
		int rx, ry, wx, wy;
		unsigned mask;
		for (int depth = 0; depth <= X11_WINDOW_DEPTH; depth++) {
			if (!XQueryPointer(d->dpy, w, &root, &child, &rx, &ry, &wx, &wy, &mask) ||
			    child == None)
				break;
			XClassHint hint = {0};
			if (XGetClassHint(d->dpy, child, &hint)) {
				XFree(hint.res_name);
				XFree(hint.res_class);
				client = child;
				break;
			}
			w = child;
		}
	} else if (focus != None && focus != d->root) {
		/* The focus may sit on a child of the client (toolkits' focus proxies): walk up to
		 * the window that carries WM_CLASS; a window without one anywhere above it is its
		 * own client. (libxdo's xdo_get_focused_window_sane() did this, but leaks the
		 * WM_STATE property it reads on every call.) */
		Window w = focus;
		client = focus;
		for (int depth = 0; depth <= X11_WINDOW_DEPTH && w != None && w != d->root; depth++) {
			XClassHint hint = {0};
			if (XGetClassHint(d->dpy, w, &hint)) {
				XFree(hint.res_name);
				XFree(hint.res_class);
				client = w;
				break;
			}
			Window root, parent, *children = NULL;
			unsigned n;
			if (!XQueryTree(d->dpy, w, &root, &parent, &children, &n))
				break;
			if (children)
				XFree(children);
			w = parent;
		}
	}
	x11_trap_end(d->dpy);
	if (d->lost)
		return -ECONNRESET;
	*ret_id = client;
	return 0;
}

bool x11_has_window_manager(struct x11_display *d)
{
	Atom check = XInternAtom(d->dpy, "_NET_SUPPORTING_WM_CHECK", False);
	Atom actual;
	int format;
	unsigned long n, after;
	unsigned char *data = NULL;
	bool found = false;

	x11_trap_begin();
	if (XGetWindowProperty(d->dpy, d->root, check, 0, 1, False, XA_WINDOW, &actual, &format, &n, &after,
			       &data) == Success &&
	    data && n == 1 && format == 32) {
		/* The check window must exist and point at itself: a WM that died leaves a stale
		 * property on the root. */
		Window w = (Window)((unsigned long *)data)[0];
		XFree(data);
		data = NULL;
		if (XGetWindowProperty(d->dpy, w, check, 0, 1, False, XA_WINDOW, &actual, &format, &n, &after,
				       &data) == Success &&
		    data && n == 1 && format == 32)
			found = (Window)((unsigned long *)data)[0] == w;
	}
	if (data)
		XFree(data);
	x11_trap_end(d->dpy);
	return found;
}

int x11_window_activate(struct x11_display *d, uint64_t id)
{
	int r, err;

	if (d->lost)
		return -ECONNRESET;
	x11_trap_begin();
	if (x11_has_window_manager(d) && xdo_activate_window(d->xdo, (Window)id) == 0) {
		r = 1;
	} else {
		xdo_raise_window(d->xdo, (Window)id);
		r = xdo_focus_window(d->xdo, (Window)id) == 0 ? 0 : -EIO;
	}
	XFlush(d->dpy);
	err = x11_trap_end(d->dpy);
	if (d->lost)
		return -ECONNRESET;
	if (err == BadWindow || err == BadMatch)
		return -ENOENT;
	return r;
}
