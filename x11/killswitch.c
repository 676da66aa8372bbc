/* x11 kill switch: double Escape on a physical keyboard, seen through XInput2 raw events.
 *
 * DESIGN (threads): x11_killswitch_create opens a second X connection on the caller's thread
 * (so that errors such as a missing XInput2 are reported synchronously), selects the events,
 * then hands the connection to a listener thread which owns it from then on. The creator keeps
 * only the write end of a pipe; x11_killswitch_destroy writes to it, joins the thread and closes
 * the connection afterwards. `fn` runs on the listener thread and must be thread-safe (typically
 * it sets an atomic flag or writes to an eventfd of the task runner). Raw events reach us no
 * matter which window has the focus and even while another client grabs the keyboard. */
#include "common.h"
#include "x11-internal.h"

#include <X11/extensions/XInput2.h>
#include <X11/keysym.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KS_MAX_DEVICES 128
#define KS_MAX_ESC_KEYCODES 8

struct ks_device {
	int id;
	bool is_master;
	char name[64];
};

struct x11_killswitch {
	Display *dpy;
	int xi_opcode;
	pthread_t thread;
	bool thread_started;
	int stop_pipe[2];
	void (*fn)(void *userdata);
	void (*input_fn)(void *userdata); /* any input of a person (takeover); NULL: none */
	void *userdata;
	struct x11_ks_state state;
	bool lost; /* server connection lost: the listener ends */

	struct ks_device devices[KS_MAX_DEVICES];
	size_t n_devices;
	unsigned esc_keycodes[KS_MAX_ESC_KEYCODES];
	size_t n_esc;

	/* Test hooks (x11-internal.h): counters read from other threads. */
	atomic_uint seen;
	atomic_uint triggered;
	atomic_uint inputs;
	atomic_bool trust_xtest;
};

bool x11_ks_device_ignored(const char *device_name, bool device_is_master)
{
	if (device_is_master)
		return true;
	/* Unknown device (removed between event and query): not evidence of a person. */
	if (!device_name)
		return true;
	return strstr(device_name, "XTEST") != NULL;
}

bool x11_ks_feed(struct x11_ks_state *s, const struct x11_ks_event *ev)
{
	if (ev->is_repeat)
		return false;
	if (!ev->is_escape) {
		s->have_last = false;
		return false;
	}
	if (s->have_last && ev->time_ms >= s->last_ms && ev->time_ms - s->last_ms <= s->window_ms) {
		s->have_last = false;
		return true;
	}
	s->have_last = true;
	s->last_ms = ev->time_ms;
	return false;
}

static void load_devices(struct x11_killswitch *k)
{
	int n = 0;
	XIDeviceInfo *info = XIQueryDevice(k->dpy, XIAllDevices, &n);

	k->n_devices = 0;
	for (int i = 0; info && i < n && k->n_devices < KS_MAX_DEVICES; i++) {
		struct ks_device *dev = &k->devices[k->n_devices++];
		dev->id = info[i].deviceid;
		dev->is_master = info[i].use == XIMasterKeyboard || info[i].use == XIMasterPointer;
		snprintf(dev->name, sizeof(dev->name), "%s", info[i].name ? info[i].name : "");
	}
	if (info)
		XIFreeDeviceInfo(info);
}

static void load_escape_keycodes(struct x11_killswitch *k)
{
	int min, max, per = 0;
	KeySym *syms;

	k->n_esc = 0;
	XDisplayKeycodes(k->dpy, &min, &max);
	syms = XGetKeyboardMapping(k->dpy, (KeyCode)min, max - min + 1, &per);
	for (int kc = min; syms && kc <= max && k->n_esc < KS_MAX_ESC_KEYCODES; kc++)
		if (per > 0 && syms[(size_t)(kc - min) * (size_t)per] == XK_Escape)
			k->esc_keycodes[k->n_esc++] = (unsigned)kc;
	if (syms)
		XFree(syms);
}

static const struct ks_device *find_device(const struct x11_killswitch *k, int id)
{
	for (size_t i = 0; i < k->n_devices; i++)
		if (k->devices[i].id == id)
			return &k->devices[i];
	return NULL;
}

/* A raw event of any kind from a device: whether a person made it (not XTest, not the master's
 * copy of a slave's event). */
static bool from_person(struct x11_killswitch *k, const XIRawEvent *re)
{
	const struct ks_device *via = find_device(k, re->deviceid);
	const struct ks_device *src = find_device(k, re->sourceid);
	if (via && via->is_master)
		return false;
	atomic_fetch_add(&k->seen, 1);
	return !x11_ks_device_ignored(src ? src->name : NULL, false) ||
	       (atomic_load(&k->trust_xtest) && src && !src->is_master);
}

/* A button press or a motion: takeover only. */
static void handle_raw_input(struct x11_killswitch *k, const XIRawEvent *re)
{
	if (!from_person(k, re))
		return;
	atomic_fetch_add(&k->inputs, 1);
	k->input_fn(k->userdata);
}

static void handle_raw(struct x11_killswitch *k, const XIRawEvent *re)
{
	/* With XIAllDevices a press arrives twice: from the slave (deviceid == sourceid) and
	 * from its master (deviceid = master, sourceid = slave). The name that tells a keyboard
	 * from XTest is the source's; the master copy is dropped as a duplicate. */
	const struct ks_device *via = find_device(k, re->deviceid);
	const struct ks_device *src = find_device(k, re->sourceid);
	struct x11_ks_event ev = {
		.device_name = src ? src->name : NULL,
		.device_is_master = via ? via->is_master : false,
		.is_repeat = (re->flags & XIKeyRepeat) != 0,
		.time_ms = re->time,
	};

	if (ev.device_is_master)
		return;
	atomic_fetch_add(&k->seen, 1);
	for (size_t i = 0; i < k->n_esc; i++)
		ev.is_escape |= k->esc_keycodes[i] == (unsigned)re->detail;
	if (x11_ks_device_ignored(ev.device_name, ev.device_is_master) &&
	    !(atomic_load(&k->trust_xtest) && src && !src->is_master))
		return;
	if (k->input_fn) {
		atomic_fetch_add(&k->inputs, 1);
		k->input_fn(k->userdata);
	}
	if (k->fn && x11_ks_feed(&k->state, &ev)) {
		atomic_fetch_add(&k->triggered, 1);
		log_debug("kill switch: double Escape from '%s'", ev.device_name);
		k->fn(k->userdata);
	}
}

static void *listener(void *arg)
{
	struct x11_killswitch *k = arg;
	struct pollfd fds[2] = {
		{.fd = ConnectionNumber(k->dpy), .events = POLLIN},
		{.fd = k->stop_pipe[0], .events = POLLIN},
	};

	x11_errors_install();
	while (!k->lost) {
		while (XPending(k->dpy) && !k->lost) {
			XEvent ev;
			XNextEvent(k->dpy, &ev);
			if (ev.type == MappingNotify) {
				XRefreshKeyboardMapping(&ev.xmapping);
				if (ev.xmapping.request == MappingKeyboard)
					load_escape_keycodes(k);
				continue;
			}
			if (ev.xcookie.type != GenericEvent || ev.xcookie.extension != k->xi_opcode ||
			    !XGetEventData(k->dpy, &ev.xcookie))
				continue;
			if (ev.xcookie.evtype == XI_RawKeyPress)
				handle_raw(k, ev.xcookie.data);
			else if ((ev.xcookie.evtype == XI_RawButtonPress ||
				  ev.xcookie.evtype == XI_RawMotion) &&
				 k->input_fn)
				handle_raw_input(k, ev.xcookie.data);
			else if (ev.xcookie.evtype == XI_HierarchyChanged)
				load_devices(k);
			XFreeEventData(k->dpy, &ev.xcookie);
		}
		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		if (fds[0].revents & (POLLERR | POLLHUP))
			break;
	}
	return NULL;
}

struct x11_killswitch *x11_killswitch_create(const char *display_name, unsigned window_ms,
					     void (*fn)(void *userdata), void *userdata)
{
	return x11_killswitch_create_input(display_name, window_ms, fn, NULL, userdata);
}

struct x11_killswitch *x11_killswitch_create_input(const char *display_name, unsigned window_ms,
						   void (*fn)(void *userdata),
						   void (*input_fn)(void *userdata), void *userdata)
{
	unsigned char mask_bits[XIMaskLen(XI_LASTEVENT)] = {0};
	XIEventMask mask = {XIAllDevices, sizeof(mask_bits), mask_bits};
	struct x11_killswitch *k;
	int ev, er, major = 2, minor = 0, r;
	const char *name = display_name ? display_name : getenv("DISPLAY");

	if ((!fn && !input_fn) || (fn && window_ms == 0)) {
		errno = EINVAL;
		return NULL;
	}
	x11_errors_install();
	k = xcalloc(1, sizeof(*k));
	k->stop_pipe[0] = k->stop_pipe[1] = -1;
	k->fn = fn;
	k->input_fn = input_fn;
	k->userdata = userdata;
	k->state.window_ms = window_ms;
	/* opened and its XInput set up under the module's lock (x11-internal.h) */
	x11_global_lock();
	k->dpy = name && *name ? XOpenDisplay(name) : NULL;
	if (!k->dpy) {
		x11_global_unlock();
		const char *wl = getenv("WAYLAND_DISPLAY");
		r = wl && *wl ? X11_ERR_WAYLAND : X11_ERR_NO_DISPLAY;
		goto free_killswitch;
	}
	x11_survive_io_errors(k->dpy, &k->lost);
	bool xi = XQueryExtension(k->dpy, "XInputExtension", &k->xi_opcode, &ev, &er) &&
		  XIQueryVersion(k->dpy, &major, &minor) == Success;
	x11_global_unlock();
	if (!xi) {
		r = ENOTSUP;
		goto close_connection;
	}
	XISetMask(mask_bits, XI_RawKeyPress);
	XISetMask(mask_bits, XI_HierarchyChanged);
	if (input_fn) {
		XISetMask(mask_bits, XI_RawButtonPress);
		XISetMask(mask_bits, XI_RawMotion);
	}
	x11_trap_begin();
	XISelectEvents(k->dpy, DefaultRootWindow(k->dpy), &mask, 1);
	if (x11_trap_end(k->dpy)) {
		r = EIO;
		goto close_connection;
	}
	load_devices(k);
	load_escape_keycodes(k);
	if (pipe2(k->stop_pipe, O_CLOEXEC) < 0) {
		r = errno;
		goto close_connection;
	}
	r = pthread_create(&k->thread, NULL, listener, k);
	if (r != 0)
		goto close_pipe;
	k->thread_started = true;
	return k;

close_pipe:
	close(k->stop_pipe[0]);
	close(k->stop_pipe[1]);
close_connection:
	x11_close_connection(k->dpy);
free_killswitch:
	free(k);
	errno = r;
	return NULL;
}

void x11_killswitch_destroy(struct x11_killswitch *k)
{
	if (!k)
		return;
	if (k->thread_started) {
		char c = 'q';
		while (write(k->stop_pipe[1], &c, 1) < 0 && errno == EINTR)
			;
		pthread_join(k->thread, NULL);
	}
	if (k->stop_pipe[0] >= 0) {
		close(k->stop_pipe[0]);
		close(k->stop_pipe[1]);
	}
	if (k->dpy)
		x11_close_connection(k->dpy);
	free(k);
}

/* Test hooks, declared in x11-internal.h. */
unsigned x11_killswitch_seen(struct x11_killswitch *k)
{
	return atomic_load(&k->seen);
}

unsigned x11_killswitch_inputs(struct x11_killswitch *k)
{
	return atomic_load(&k->inputs);
}

unsigned x11_killswitch_triggered(struct x11_killswitch *k)
{
	return atomic_load(&k->triggered);
}

void x11_killswitch_trust_xtest_for_test(struct x11_killswitch *k, bool trust)
{
	atomic_store(&k->trust_xtest, trust);
}
