/* x11: see and drive an X11 desktop (capture, input through XTest, kill switch, coordinates).
 *
 * The one public header of the x11 module; no Xlib types appear here.
 *
 * Threads: Xlib and libxdo are not thread-safe. A struct x11_display is one X connection and must
 * be used by one thread at a time (the thread that runs a task's actions). The kill switch owns a
 * second connection on its own thread. The pure helpers (coordinate mapping, PNG
 * encoding) touch no connection and may be called from any thread.
 *
 * Errors: functions return >= 0 or a negative errno; constructors return NULL and set errno.
 * x11_strerror() turns the module's errors into a sentence a user can act on. When the X server
 * goes away, the process survives (Xlib would exit it by default): every later call on that
 * display returns -ECONNRESET, and the display must still be closed.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keys.h"

/* Named limits. */
#define X11_MAX_MONITORS 16
#define X11_MAX_SCROLL_NOTCHES 100
#define X11_MAX_CLICKS 3

/* Errors specific to this module (besides ordinary errnos). */
#define X11_ERR_WAYLAND EPROTONOSUPPORT /* WAYLAND_DISPLAY set but no X server reachable */
#define X11_ERR_NO_DISPLAY EHOSTDOWN	/* no $DISPLAY, or the server refused the connection */
#define X11_ERR_NO_XTEST ENOTSUP	/* server lacks the XTEST extension */

struct x11_display;
struct x11_killswitch;

struct x11_rect {
	int x, y, width, height;
};

/* A captured image: packed 8-bit RGB, `stride` bytes per row (>= 3 * width). */
struct x11_frame {
	int width, height;
	size_t stride;
	uint8_t *pixels;
};

/* ---- display ---------------------------------------------------------------------------- */

/* Opens `name` (NULL: $DISPLAY). On failure returns NULL with errno set to X11_ERR_WAYLAND,
 * X11_ERR_NO_DISPLAY, X11_ERR_NO_XTEST or an ordinary errno. */
struct x11_display *x11_display_open(const char *name);
void x11_display_close(struct x11_display *d);
/* A sentence for a negative errno returned by this module, e.g. for -X11_ERR_WAYLAND:
 * "this is a Wayland session without X access: XTest cannot reach Wayland clients". */
const char *x11_strerror(int err);

const char *x11_display_name(const struct x11_display *d);
/* Re-reads the root window's size from the server (the screen may have been resized since the
 * connection was opened); capture bounds and input checks use it from then on. Call it when a
 * task starts. -ECONNRESET when the server is gone. */
int x11_display_refresh(struct x11_display *d);
/* Root window size in pixels, as of the connection or the last x11_display_refresh. */
void x11_display_size(const struct x11_display *d, int *ret_width, int *ret_height);
/* Monitors from XRandR (the whole screen as one monitor when RandR reports none). Writes up to
 * `max` rectangles, returns how many monitors exist (may exceed max). The primary monitor first. */
int x11_display_monitors(struct x11_display *d, struct x11_rect *ret, size_t max);

/* ---- capture ---------------------------------------------------------------------------- */

/* MIT-SHM is used when the server offers it and the client is local; otherwise XGetImage.
 * x11_capture_set_shm(d, false) forces XGetImage (tests, benchmarks). */
void x11_capture_set_shm(struct x11_display *d, bool enable);
bool x11_capture_uses_shm(const struct x11_display *d);

/* Captures `area` (NULL: the whole root window) into a new frame. -ERANGE if area is empty or
 * not inside the root window. 24- and 32-bit TrueColor visuals are supported; others -ENOTSUP. */
int x11_capture(struct x11_display *d, const struct x11_rect *area, struct x11_frame **ret);
/* Same, reusing `frame`'s buffer when it is large enough (the hot path of an agent step). */
int x11_capture_into(struct x11_display *d, const struct x11_rect *area, struct x11_frame *frame);

struct x11_frame *x11_frame_create(int width, int height);
void x11_frame_destroy(struct x11_frame *f);

/* PNG (libpng, fast compression level). The buffer is malloc'd; the caller frees it. */
int x11_frame_encode_png(const struct x11_frame *f, uint8_t **ret_data, size_t *ret_size);
int x11_frame_write_png(const struct x11_frame *f, const char *path);

/* ---- input (XTest to the focused window) ------------------------------------------------ */

enum x11_button {
	X11_BUTTON_LEFT = 1,
	X11_BUTTON_MIDDLE = 2,
	X11_BUTTON_RIGHT = 3,
};

enum x11_scroll {
	X11_SCROLL_UP,
	X11_SCROLL_DOWN,
	X11_SCROLL_LEFT,
	X11_SCROLL_RIGHT,
};

/* Delays between injected events, in microseconds (default 12000 between keys, 100000 between
 * the clicks of a double or triple click, 8000 between drag motions). Key delays below 1000 are
 * raised to 1000: events with no delay at all get reordered or coalesced by some clients. */
void x11_input_set_key_delay_us(struct x11_display *d, uint32_t usec);
/* How long a keycode bound for a character the keymap lacks stays bound after its last key
 * event (default 200000): a client translates a key with the keymap of the moment it reads the
 * event, so one that reads it later sees another character. Longer is safer on a loaded
 * machine, slower for text with such characters. */
void x11_input_set_rebind_settle_us(struct x11_display *d, uint32_t usec);
/* While *flag is nonzero, x11_type stops between two characters and returns -ECANCELED (Caps
 * Lock and the keymap restored as on any other return): a long write can be stopped at once.
 * NULL detaches; the flag must outlive its use on this display. */
void x11_input_set_interrupt(struct x11_display *d, const atomic_int *flag);

/* Coordinates are root-window pixels; -ERANGE when outside the root window. */
int x11_move(struct x11_display *d, int x, int y);
/* count: 1 (click), 2 (double), 3 (triple). */
int x11_click(struct x11_display *d, int x, int y, enum x11_button button, int count);
/* Press at (x1,y1), move in several steps (past toolkits' drag thresholds), release at (x2,y2). */
int x11_drag(struct x11_display *d, int x1, int y1, int x2, int y2);
/* The pointer's position in root pixels; -ENXIO when it is on another screen. */
int x11_pointer_position(struct x11_display *d, int *x, int *y);
/* x11_drag from the pointer's current position (written to ret_x1, ret_y1 when not NULL) to
 * (x,y): the holo-nano harness's drag_to. */
int x11_drag_to(struct x11_display *d, int x, int y, int *ret_x1, int *ret_y1);
/* Moves to (x,y) then sends `notches` wheel clicks (buttons 4/5/6/7). 1..X11_MAX_SCROLL_NOTCHES. */
int x11_scroll(struct x11_display *d, int x, int y, enum x11_scroll direction, int notches);

/* Key combination such as "ctrl+shift+t" or "Return": all keys pressed in order, released in
 * reverse. Key names are validated with keys_lookup (keys.h) first: -EINVAL for an unknown name, an
 * empty combination or more than KEYS_MAX_PER_COMBO keys. */
int x11_key_combo(struct x11_display *d, const char *combo);
/* The same with the names given as an array (the model's `hotkey.keys`). */
int x11_key_names(struct x11_display *d, const char *const *names, size_t n);
/* Press / release one key, tracking held keys; x11_release_all releases every held key and
 * mouse button (on abort, error, end of task). Pressing a held key again does nothing;
 * x11_key_up of a key that is not held returns -ENOENT and sends nothing. */
int x11_key_down(struct x11_display *d, const char *name);
int x11_key_up(struct x11_display *d, const char *name);
int x11_release_all(struct x11_display *d);
/* Number of keys and buttons currently held by us. */
size_t x11_held_count(const struct x11_display *d);

/* Types UTF-8 text exactly: keymap characters through XTest, newline and tab as Return and Tab
 * keysyms ("\r\n" is one Return), characters missing from the keymap by binding a spare keycode
 * to them (verified, restored afterwards). An active Caps Lock is switched off for the duration.
 * -EINVAL for invalid UTF-8, other control characters, or text longer than KEYS_MAX_TEXT_BYTES;
 * -ENOSPC when the keymap has no spare keycode; -ECANCELED when interrupted (see
 * x11_input_set_interrupt), with a prefix of the text typed. */
int x11_type(struct x11_display *d, const char *utf8);

/* ---- windows ---------------------------------------------------------------------------- */

#define X11_MAX_WINDOWS 1024	 /* client windows listed at most */
#define X11_MAX_TITLE_BYTES 1024 /* longer titles are cut */

/* A client window (one that carries WM_CLASS), as listed by x11_windows_list. */
struct x11_window {
	uint64_t id;
	char *title;	      /* _NET_WM_NAME, else WM_NAME (Latin-1 converted), UTF-8; "" if none */
	char *class_name;     /* WM_CLASS class, e.g. "Mousepad"; "" if none */
	char *instance;	      /* WM_CLASS instance, e.g. "mousepad" */
	struct x11_rect rect; /* root coordinates */
	/* _NET_WM_DESKTOP: the virtual desktop, X11_DESKTOP_ALL on every one (sticky),
	 * X11_DESKTOP_NONE when the window does not say (no EWMH window manager). */
	int64_t desktop;
	uint32_t pid; /* _NET_WM_PID, 0 when the window does not say */
};
#define X11_DESKTOP_ALL -1
#define X11_DESKTOP_NONE -2

/* The viewable client windows, bottom to top of the stacking order, at most X11_MAX_WINDOWS.
 * *ret is freed with x11_windows_free. -ECONNRESET when the server is gone. */
int x11_windows_list(struct x11_display *d, struct x11_window **ret, size_t *ret_n);
void x11_windows_free(struct x11_window *w, size_t n);
/* The client window that has the keyboard focus (focus PointerRoot: the client under the
 * pointer), or 0 in *ret_id when keys would go to the root window or nowhere. */
int x11_focus_window(struct x11_display *d, uint64_t *ret_id);
/* True when an EWMH window manager runs (_NET_SUPPORTING_WM_CHECK is live). */
bool x11_has_window_manager(struct x11_display *d);
/* Raises and focuses window `id`: through the window manager (_NET_ACTIVE_WINDOW) when one runs
 * (returns 1), else XRaiseWindow + XSetInputFocus (returns 0). Does not wait for the focus.
 * -ENOENT when the window is gone. */
int x11_window_activate(struct x11_display *d, uint64_t id);

/* ---- coordinates (pure) ----------------------------------------------------------------- */

/* Model space (0..1000 over the image of sent_w x sent_h that the model saw) to root pixels of
 * `monitor`, as agent.md 3: px = mon_x + clamp(round(x/1000*W_sent) * W_mon / W_sent, 0, W_mon-1).
 * -ERANGE when x or y is outside 0..1000, -EINVAL for empty sizes. */
int x11_map_model_point(const struct x11_rect *monitor, int sent_w, int sent_h, int mx, int my, int *ret_px,
			int *ret_py);

/* ---- kill switch ------------------------------------------------------------------------ */

/* Listens on its own connection and thread for two presses of Escape within `window_ms` from a
 * physical keyboard (XInput2 raw events; the XTest slave devices are ignored, so our own injected
 * keys never trigger it), then calls `fn(userdata)` from its thread. NULL + errno on failure
 * (-ENOTSUP when the server lacks XInput2 >= 2.0). */
struct x11_killswitch *x11_killswitch_create(const char *display_name, unsigned window_ms,
					     void (*fn)(void *userdata), void *userdata);
/* The same listener, and besides (input_fn non-NULL) any input of a person on the display (a
 * key, a button, a pointer motion from a device that is not XTest: a takeover, issue 32) calls
 * input_fn(userdata) from its thread, at once and for every such event. fn may be NULL (no
 * double Escape; window_ms is then unused); one of the two must be set. */
struct x11_killswitch *x11_killswitch_create_input(const char *display_name, unsigned window_ms,
						   void (*fn)(void *userdata),
						   void (*input_fn)(void *userdata), void *userdata);
void x11_killswitch_destroy(struct x11_killswitch *k);
