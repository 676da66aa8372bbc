/* x11 internals shared by the module's files (and by its white-box tests). Not installed, not
 * included outside x11/ and tests/x11/.
 *
 * DESIGN (threads): a struct x11_display is one Xlib connection plus one libxdo handle on it; the
 * caller guarantees one thread at a time. The X error handler is process-wide (Xlib offers no
 * other kind), so errors are trapped in a thread-local slot: Xlib runs the handler on the thread
 * that reads the error off the wire, which is the thread that owns that connection. The kill
 * switch has its own connection on its own thread and uses the same trap. */
#pragma once

#include "x11.h"

#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/extensions/XShm.h>
#include <xdo.h>

/* Defaults of x11.h's delays, and the floor below which events could be coalesced or reordered
 * by clients that look at timestamps (libxdo's delay 0 problem). */
#define X11_DEFAULT_KEY_DELAY_US 12000u
#define X11_MIN_KEY_DELAY_US 1000u
#define X11_MULTI_CLICK_DELAY_US 100000u
#define X11_DRAG_STEP_DELAY_US 8000u
#define X11_DRAG_STEPS 12
/* Time a temporary keycode binding stays after its last key event by default (d->rebind_settle_us,
 * x11_input_set_rebind_settle_us), so clients have processed the key before the mapping they look
 * it up in changes again (Xlib refreshes a client's keymap lazily, on its next lookup after a
 * MappingNotify). */
#define X11_REBIND_SETTLE_US 200000u
#define X11_MAX_HELD 32
#define X11_MAX_TEMP_BINDINGS 64

struct x11_held {
	bool is_button;
	unsigned code;	   /* keycode or button number */
	bool temp_binding; /* keycode was bound by us for this key: unbind on release */
};

struct x11_display {
	Display *dpy;
	xdo_t *xdo;
	char *name;
	int screen;
	Window root;
	int width, height;

	/* capture */
	bool shm_available; /* extension present and an attach on this connection succeeded */
	bool shm_enabled;   /* x11_capture_set_shm */
	XShmSegmentInfo shm_info;
	XImage *shm_image; /* attached segment of shm_w x shm_h, or NULL */
	int shm_w, shm_h;

	/* Set by the I/O error exit handler when the server connection is lost: every call then
	 * fails with -ECONNRESET instead of Xlib exiting the process. */
	bool lost;

	/* input */
	uint32_t key_delay_us;
	uint32_t rebind_settle_us;   /* x11_input_set_rebind_settle_us */
	const atomic_int *interrupt; /* x11_input_set_interrupt; NULL: none */
	struct x11_held held[X11_MAX_HELD];
	size_t n_held;
};

/* ---- error trap (errors.c) -------------------------------------------------------------- */

/* Installs the process-wide handler once; safe to call repeatedly from any thread. */
void x11_errors_install(void);
/* Xlib's extension libraries keep process-wide records that their calls change without Xlib's
 * locks: libXext registers each display with the Generic Event extension (one global record,
 * created lazily) on an extension's first use on it, and every extension's close hook, run by
 * XCloseDisplay, takes it out again (libXi the same for its own record). Two displays doing
 * either at once, as the executors and kill switches of several displays do when holod stops,
 * freed a record twice (ASan) or leaked one. So every connection of the module is opened and
 * set up (each extension it uses queried once) and closed under this one lock; extension calls
 * on a set-up display find their records without changing them. */
void x11_global_lock(void);
void x11_global_unlock(void);
/* XCloseDisplay under the lock. */
void x11_close_connection(Display *dpy);
/* Makes a lost server connection set *lost and return, where Xlib's default exits the process
 * (a daemon outlives the X session it drives). */
void x11_survive_io_errors(Display *dpy, bool *lost);
/* Starts trapping on this thread: clears the slot. */
void x11_trap_begin(void);
/* XSyncs `dpy` and returns the first X error code seen since x11_trap_begin (0: none). */
int x11_trap_end(Display *dpy);
/* The same without the XSync, after a request that waited for its reply (errors arrive before
 * the reply, so they have been handled already): saves a round trip on the capture path. */
int x11_trap_peek(void);

/* ---- capture (capture.c) ---------------------------------------------------------------- */

/* Converts a ZPixmap of 24 or 32 bits per pixel with 8-bit TrueColor masks, in either byte order,
 * into f's packed RGB (f->width x f->height, already allocated). Reads only the image's geometry,
 * byte order, masks and data, so tests can feed it layouts Xvfb cannot produce. -ENOTSUP for
 * other layouts (16-bit colour, 10-bit channels). */
int x11_image_to_frame(const XImage *img, struct x11_frame *f);
/* Detaches and frees the display's MIT-SHM capture segment, if any (x11_display_close). */
void x11_capture_release(struct x11_display *d);

/* ---- keymap (keymap.c): keysym <-> keycode on the live server map ----------------------- */

/* Where a keysym is typed: keycode and whether Shift is needed (core map columns 0 and 1). */
struct x11_keypos {
	unsigned keycode;
	bool shift;
	bool temp_binding;
};

struct x11_keymap {
	int min_keycode, max_keycode, per_code;
	KeySym *syms;			       /* (max - min + 1) * per_code, from XGetKeyboardMapping */
	unsigned bound[X11_MAX_TEMP_BINDINGS]; /* keycodes we bound, to restore */
	size_t n_bound;
};

/* Reads the server's current core keyboard map. */
int x11_keymap_load(struct x11_display *d, struct x11_keymap *km);
/* Looks `keysym` up in the map; if absent, binds a spare keycode (one with no symbols) to it,
 * verifies the server took it, and records it in km->bound. -ENOSPC when no spare keycode is
 * left, -EIO when the server did not take the binding. */
int x11_keymap_resolve(struct x11_display *d, struct x11_keymap *km, uint32_t keysym, struct x11_keypos *ret);
/* Restores every keycode in km->bound to no symbols (after d->rebind_settle_us when any was
 * used) and frees the map. */
void x11_keymap_finish(struct x11_display *d, struct x11_keymap *km);
/* Restores one bound keycode to no symbols. */
void x11_keymap_unbind(struct x11_display *d, unsigned keycode);
/* Keycode of a modifier keysym such as XK_Shift_L (0 if the map lacks it). */
unsigned x11_keymap_find_plain(const struct x11_keymap *km, uint32_t keysym);

/* ---- input primitives (input.c) --------------------------------------------------------- */

/* One key event through XTest, flushed, followed by `delay_us`. */
int x11_fake_key(struct x11_display *d, unsigned keycode, bool press, uint32_t delay_us);

/* ---- kill switch filter (killswitch.c), pure so it can be tested on recorded events ------- */

struct x11_ks_event {
	const char *device_name; /* name of the XI2 source device (sourceid) */
	bool device_is_master;	 /* delivered through a master (deviceid): a duplicate */
	bool is_escape;		 /* the keycode maps to Escape */
	bool is_repeat;		 /* XIKeyRepeat set */
	uint64_t time_ms;	 /* server timestamp */
};

struct x11_ks_state {
	unsigned window_ms;
	bool have_last;
	uint64_t last_ms;
};

/* True when events from this device must be ignored: masters (duplicates of their slaves) and
 * XTest devices, i.e. any name containing "XTEST" ("Virtual core XTEST keyboard", "<master>
 * XTEST keyboard"), so that keys we inject never count. */
bool x11_ks_device_ignored(const char *device_name, bool device_is_master);
/* Feeds one raw key press; returns true when it completes a double Escape within window_ms. The
 * state is reset after a trigger and by any other physical key. */
bool x11_ks_feed(struct x11_ks_state *s, const struct x11_ks_event *ev);

/* Test hooks of a live kill switch: raw key presses seen (from any slave device, before the
 * XTest filter) and triggers so far. trust_xtest makes the listener accept XTest slave devices, so
 * a test on Xvfb (which has no other keyboard) can drive the thread, the XI2 selection and the
 * double-Escape logic end to end; nothing outside tests may call it. */
unsigned x11_killswitch_seen(struct x11_killswitch *k);
unsigned x11_killswitch_triggered(struct x11_killswitch *k);
/* Inputs of a person reported to the takeover callback. */
unsigned x11_killswitch_inputs(struct x11_killswitch *k);
void x11_killswitch_trust_xtest_for_test(struct x11_killswitch *k, bool trust);
