/* x11 display: connection, size, monitors, error messages. */
#include "common.h"
#include "x11-internal.h"

#include <stdlib.h>
#include <string.h>

#include <X11/extensions/XTest.h>
#include <X11/extensions/Xrandr.h>

const char *x11_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case X11_ERR_WAYLAND:
		return "this is a Wayland session without X access: XTest cannot reach Wayland "
		       "clients (run an X11 session, or set DISPLAY to an X server)";
	case X11_ERR_NO_DISPLAY:
		return "cannot connect to the X server: DISPLAY is unset or the server refused the "
		       "connection (check DISPLAY and XAUTHORITY)";
	case X11_ERR_NO_XTEST: /* ENOTSUP: also an unsupported visual, or no XInput2 */
		return "not supported by this X server: input needs the XTEST extension, the kill "
		       "switch XInput2, and capture a 24-bit TrueColor screen";
	case ENOENT:
		return "the key is not held";
	case ECONNRESET:
		return "the connection to the X server was lost (the X session ended?)";
	case ERANGE:
		return "coordinates or area outside the screen";
	case EINVAL:
		return "invalid argument (unknown key name, empty or too long key combination, "
		       "invalid UTF-8 or out-of-range count)";
	case ENOSPC:
		return "no spare keycode left to bind a character that is missing from the keymap";
	case EIO:
		return "the X server did not apply a request (keyboard mapping or image transfer)";
	case ENOMEM:
		return "out of memory";
	default:
		return strerror(err < 0 ? -err : err);
	}
}

struct x11_display *x11_display_open(const char *name)
{
	const char *resolved = name ? name : getenv("DISPLAY");
	const char *wayland = getenv("WAYLAND_DISPLAY");
	struct x11_display *d = NULL;
	int ev, er, maj, min, err;

	x11_errors_install();
	if (!resolved || !*resolved) {
		errno = wayland && *wayland ? X11_ERR_WAYLAND : X11_ERR_NO_DISPLAY;
		return NULL;
	}
	d = xcalloc(1, sizeof(*d));
	d->name = xstrdup(resolved);
	d->key_delay_us = X11_DEFAULT_KEY_DELAY_US;
	d->rebind_settle_us = X11_REBIND_SETTLE_US;
	d->shm_enabled = true;
	/* opened and every extension it uses set up under the module's lock (x11-internal.h) */
	x11_global_lock();
	d->dpy = XOpenDisplay(resolved);
	if (!d->dpy) {
		x11_global_unlock();
		log_debug("XOpenDisplay(%s) failed", resolved);
		err = wayland && *wayland ? X11_ERR_WAYLAND : X11_ERR_NO_DISPLAY;
		goto free_display;
	}
	if (!XTestQueryExtension(d->dpy, &ev, &er, &maj, &min)) {
		x11_global_unlock();
		err = X11_ERR_NO_XTEST;
		goto close_connection;
	}
	x11_survive_io_errors(d->dpy, &d->lost);
	d->screen = DefaultScreen(d->dpy);
	d->root = RootWindow(d->dpy, d->screen);
	d->width = DisplayWidth(d->dpy, d->screen);
	d->height = DisplayHeight(d->dpy, d->screen);
	d->shm_available = XShmQueryExtension(d->dpy);
	XRRQueryExtension(d->dpy, &ev, &er); /* x11_display_monitors' */
	/* The screen argument of libxdo's move is the X screen; pointer events go to the focused
	 * window through XTest when the window is CURRENTWINDOW (agent.md 3). */
	d->xdo = xdo_new_with_opened_display(d->dpy, d->name, 0);
	x11_global_unlock();
	if (!d->xdo) {
		err = ENOMEM;
		goto close_connection;
	}
	return d;

close_connection:
	x11_close_connection(d->dpy);
free_display:
	free(d->name);
	free(d);
	errno = err; /* after the cleanup, which may clobber errno */
	return NULL;
}

void x11_display_close(struct x11_display *d)
{
	if (!d)
		return;
	if (d->dpy)
		x11_release_all(d);
	x11_capture_release(d);
	if (d->xdo)
		xdo_free(d->xdo);
	if (d->dpy)
		x11_close_connection(d->dpy);
	free(d->name);
	free(d);
}

const char *x11_display_name(const struct x11_display *d)
{
	return d->name;
}

int x11_display_refresh(struct x11_display *d)
{
	Window root;
	int x, y;
	unsigned w, h, border, depth;

	if (d->lost)
		return -ECONNRESET;
	/* The screen can change size under us (a RandR resolution change): ask the server rather
	 * than trusting what Xlib read at connect. */
	if (!XGetGeometry(d->dpy, d->root, &root, &x, &y, &w, &h, &border, &depth))
		return d->lost ? -ECONNRESET : -EIO;
	if (d->lost)
		return -ECONNRESET;
	d->width = (int)w;
	d->height = (int)h;
	return 0;
}

void x11_display_size(const struct x11_display *d, int *ret_width, int *ret_height)
{
	*ret_width = d->width;
	*ret_height = d->height;
}

int x11_display_monitors(struct x11_display *d, struct x11_rect *ret, size_t max)
{
	int ev, er, n = 0;
	XRRMonitorInfo *mons = NULL;
	size_t out = 0;

	if (d->lost)
		return -ECONNRESET;
	if (XRRQueryExtension(d->dpy, &ev, &er))
		mons = XRRGetMonitors(d->dpy, d->root, True, &n);
	if (!mons || n <= 0) {
		if (mons)
			XRRFreeMonitors(mons);
		if (max > 0)
			ret[0] = (struct x11_rect){0, 0, d->width, d->height};
		return 1;
	}
	/* Primary first, then the others in server order. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			if ((pass == 0) != !!mons[i].primary)
				continue;
			if (out < max)
				ret[out] = (struct x11_rect){mons[i].x, mons[i].y, mons[i].width,
							     mons[i].height};
			out++;
		}
	XRRFreeMonitors(mons);
	return n;
}
