/* x11 input: pointer and key events through XTest, to whatever window has the focus.
 *
 * Pointer motion and buttons go through libxdo with CURRENTWINDOW (which is XTest underneath;
 * a real window id would make libxdo use XSendEvent, which GTK, Qt, Chromium and xterm ignore).
 * Keys go through raw XTest with this module's own key table and keymap lookup, because libxdo
 * skips unknown key names silently and mis-parses some sequences (agent.md 3).
 *
 * Every event is flushed and followed by a delay: the server handles XTest requests in order, but
 * clients that look at event timestamps (double-click, key repeat) need them spread out. */
#include "common.h"
#include "x11-internal.h"

#include <X11/extensions/XTest.h>
#include <X11/keysym.h>
#include <stdio.h>
#include <string.h>

static uint32_t half_delay(const struct x11_display *d)
{
	return MAX(d->key_delay_us / 2, X11_MIN_KEY_DELAY_US / 2);
}

void x11_input_set_key_delay_us(struct x11_display *d, uint32_t usec)
{
	d->key_delay_us = MAX(usec, X11_MIN_KEY_DELAY_US);
}

void x11_input_set_rebind_settle_us(struct x11_display *d, uint32_t usec)
{
	d->rebind_settle_us = usec;
}

void x11_input_set_interrupt(struct x11_display *d, const atomic_int *flag)
{
	d->interrupt = flag;
}

size_t x11_held_count(const struct x11_display *d)
{
	return d->n_held;
}

static int held_find(const struct x11_display *d, bool is_button, unsigned code)
{
	for (size_t i = 0; i < d->n_held; i++)
		if (d->held[i].is_button == is_button && d->held[i].code == code)
			return (int)i;
	return -1;
}

static int held_add(struct x11_display *d, bool is_button, unsigned code, bool temp)
{
	if (held_find(d, is_button, code) >= 0)
		return 0;
	if (d->n_held == X11_MAX_HELD)
		return -ENOSPC;
	d->held[d->n_held++] = (struct x11_held){is_button, code, temp};
	return 0;
}

/* i < 0 (not found) is a no-op, so callers can pass held_find's result. */
static void held_remove(struct x11_display *d, int i)
{
	if (i < 0)
		return;
	memmove(&d->held[i], &d->held[i + 1], (d->n_held - (size_t)i - 1) * sizeof(d->held[0]));
	d->n_held--;
}

int x11_fake_key(struct x11_display *d, unsigned keycode, bool press, uint32_t delay_us)
{
	if (d->lost)
		return -ECONNRESET;
	if (!XTestFakeKeyEvent(d->dpy, keycode, press ? True : False, CurrentTime))
		return -EIO;
	XFlush(d->dpy);
	if (delay_us)
		time_sleep_us(delay_us);
	return 0;
}

static int fake_button(struct x11_display *d, unsigned button, bool press, uint32_t delay_us)
{
	if (d->lost)
		return -ECONNRESET;
	int r = press ? xdo_mouse_down(d->xdo, CURRENTWINDOW, (int)button) :
			xdo_mouse_up(d->xdo, CURRENTWINDOW, (int)button);

	if (r != 0)
		return -EIO;
	XFlush(d->dpy);
	if (delay_us)
		time_sleep_us(delay_us);
	return 0;
}

static bool on_screen(const struct x11_display *d, int x, int y)
{
	return x >= 0 && y >= 0 && x < d->width && y < d->height;
}

static int move_raw(struct x11_display *d, int x, int y)
{
	if (d->lost)
		return -ECONNRESET;
	if (xdo_move_mouse(d->xdo, x, y, d->screen) != 0)
		return -EIO;
	/* A round trip: the server has moved the pointer before we send the next event. */
	XSync(d->dpy, False);
	return d->lost ? -ECONNRESET : 0;
}

int x11_move(struct x11_display *d, int x, int y)
{
	if (!on_screen(d, x, y))
		return -ERANGE;
	return move_raw(d, x, y);
}

int x11_click(struct x11_display *d, int x, int y, enum x11_button button, int count)
{
	int r;

	if (button != X11_BUTTON_LEFT && button != X11_BUTTON_MIDDLE && button != X11_BUTTON_RIGHT)
		return -EINVAL;
	if (count < 1 || count > X11_MAX_CLICKS)
		return -EINVAL;
	r = x11_move(d, x, y);
	if (r < 0)
		return r;
	/* Settle: some toolkits pick the target on motion (enter/leave) before a press. */
	time_sleep_us(half_delay(d));
	for (int i = 0; i < count; i++) {
		if (i > 0)
			time_sleep_us(X11_MULTI_CLICK_DELAY_US);
		r = fake_button(d, (unsigned)button, true, half_delay(d));
		if (r < 0)
			return r;
		r = fake_button(d, (unsigned)button, false, 0);
		if (r < 0)
			return r;
	}
	XSync(d->dpy, False);
	return 0;
}

int x11_drag(struct x11_display *d, int x1, int y1, int x2, int y2)
{
	int r;

	if (!on_screen(d, x1, y1) || !on_screen(d, x2, y2))
		return -ERANGE;
	r = move_raw(d, x1, y1);
	if (r < 0)
		return r;
	time_sleep_us(X11_DRAG_STEP_DELAY_US);
	r = fake_button(d, X11_BUTTON_LEFT, true, X11_DRAG_STEP_DELAY_US);
	if (r < 0)
		return r;
	/* Tracked, so an abort in the middle of a drag releases the button. */
	held_add(d, true, X11_BUTTON_LEFT, false);
	for (int i = 1; i <= X11_DRAG_STEPS; i++) {
		int x = x1 + (int)((int64_t)(x2 - x1) * i / X11_DRAG_STEPS);
		int y = y1 + (int)((int64_t)(y2 - y1) * i / X11_DRAG_STEPS);
		r = move_raw(d, x, y);
		if (r < 0)
			goto release_button;
		time_sleep_us(X11_DRAG_STEP_DELAY_US);
	}
	r = 0;
release_button:
	fake_button(d, X11_BUTTON_LEFT, false, 0);
	held_remove(d, held_find(d, true, X11_BUTTON_LEFT));
	XSync(d->dpy, False);
	return r;
}

int x11_pointer_position(struct x11_display *d, int *x, int *y)
{
	Window root_ret, child_ret;
	int rx, ry, wx, wy;
	unsigned mask = 0;

	if (!XQueryPointer(d->dpy, d->root, &root_ret, &child_ret, &rx, &ry, &wx, &wy, &mask))
		return -ENXIO; /* the pointer is on another screen */
	*x = rx;
	*y = ry;
	return 0;
}

int x11_drag_to(struct x11_display *d, int x, int y, int *ret_x1, int *ret_y1)
{
	int x1, y1;
	int r = x11_pointer_position(d, &x1, &y1);

	if (r < 0)
		return r;
	if (ret_x1)
		*ret_x1 = x1;
	if (ret_y1)
		*ret_y1 = y1;
	return x11_drag(d, x1, y1, x, y);
}

int x11_scroll(struct x11_display *d, int x, int y, enum x11_scroll direction, int notches)
{
	static const unsigned buttons[] = {
		[X11_SCROLL_UP] = 4,
		[X11_SCROLL_DOWN] = 5,
		[X11_SCROLL_LEFT] = 6,
		[X11_SCROLL_RIGHT] = 7,
	};
	int r;

	if ((unsigned)direction >= ARRAY_SIZE(buttons) || notches < 1 || notches > X11_MAX_SCROLL_NOTCHES)
		return -EINVAL;
	r = x11_move(d, x, y);
	if (r < 0)
		return r;
	time_sleep_us(half_delay(d));
	for (int i = 0; i < notches; i++) {
		r = fake_button(d, buttons[direction], true, half_delay(d));
		if (r < 0)
			return r;
		r = fake_button(d, buttons[direction], false, half_delay(d));
		if (r < 0)
			return r;
	}
	XSync(d->dpy, False);
	return 0;
}

/* ---- keys ------------------------------------------------------------------------------- */

static int lookup_all(const char *const *names, size_t n, uint32_t *syms)
{
	if (n == 0 || n > KEYS_MAX_PER_COMBO) {
		log_debug("key combination of %zu keys (1..%d allowed)", n, KEYS_MAX_PER_COMBO);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (!names[i] || keys_lookup(names[i], &syms[i]) < 0) {
			log_debug("unknown key name '%s'", names[i] ? names[i] : "(null)");
			return -EINVAL;
		}
	return 0;
}

int x11_key_names(struct x11_display *d, const char *const *names, size_t n)
{
	uint32_t syms[KEYS_MAX_PER_COMBO];
	struct x11_keypos pos[KEYS_MAX_PER_COMBO];
	bool shifted[KEYS_MAX_PER_COMBO] = {0}, already[KEYS_MAX_PER_COMBO] = {0};
	struct x11_keymap km;
	unsigned shift_kc = 0;
	size_t pressed = 0;
	int r;

	r = lookup_all(names, n, syms);
	if (r < 0)
		return r;
	r = x11_keymap_load(d, &km);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		r = x11_keymap_resolve(d, &km, syms[i], &pos[i]);
		if (r < 0)
			goto finish_keymap;
	}
	/* A key that sits on the Shift level ("ctrl+plus" on a US map) is pressed with Shift,
	 * as xdotool does, unless the combination already holds Shift. */
	shift_kc = x11_keymap_find_plain(&km, XK_Shift_L);
	for (size_t i = 0; i < n; i++)
		if (pos[i].shift && shift_kc) {
			bool have = false;
			for (size_t j = 0; j < n; j++)
				have |= syms[j] == XK_Shift_L || syms[j] == XK_Shift_R;
			shifted[i] = !have;
		}
	/* Keys already held with x11_key_down stay down: neither pressed again (a repeat) nor
	 * released at the end of the combination (which would drop a held modifier). */
	for (size_t i = 0; i < n; i++)
		already[i] = held_find(d, false, pos[i].keycode) >= 0;
	for (pressed = 0; pressed < n; pressed++) {
		if (already[pressed])
			continue;
		if (shifted[pressed]) {
			r = x11_fake_key(d, shift_kc, true, half_delay(d));
			if (r < 0)
				goto release_pressed;
		}
		r = x11_fake_key(d, pos[pressed].keycode, true, half_delay(d));
		if (r < 0) {
			if (shifted[pressed])
				x11_fake_key(d, shift_kc, false, 0);
			goto release_pressed;
		}
	}
	r = 0;
release_pressed:
	while (pressed > 0) {
		pressed--;
		if (already[pressed])
			continue;
		x11_fake_key(d, pos[pressed].keycode, false, half_delay(d));
		if (shifted[pressed])
			x11_fake_key(d, shift_kc, false, half_delay(d));
	}
	XSync(d->dpy, False);
finish_keymap:
	x11_keymap_finish(d, &km);
	return r;
}

int x11_key_combo(struct x11_display *d, const char *combo)
{
	char names[KEYS_MAX_PER_COMBO][KEYS_MAX_NAME];
	const char *ptrs[KEYS_MAX_PER_COMBO];
	char err[128];
	int n = keys_combo_split(combo, names, KEYS_MAX_PER_COMBO, err, sizeof(err));

	if (n < 0) {
		log_debug("%s", err);
		return n;
	}
	for (int i = 0; i < n; i++)
		ptrs[i] = names[i];
	return x11_key_names(d, ptrs, (size_t)n);
}

int x11_key_down(struct x11_display *d, const char *name)
{
	struct x11_keymap km;
	struct x11_keypos pos;
	uint32_t sym;
	int r;

	r = lookup_all(&name, 1, &sym);
	if (r < 0)
		return r;
	r = x11_keymap_load(d, &km);
	if (r < 0)
		return r;
	r = x11_keymap_resolve(d, &km, sym, &pos);
	if (r < 0)
		goto finish_keymap;
	if (held_find(d, false, pos.keycode) >= 0)
		goto finish_keymap; /* already down: pressing again would only auto-repeat */
	r = held_add(d, false, pos.keycode, pos.temp_binding);
	if (r < 0)
		goto finish_keymap;
	/* A binding made for a held key stays until its release. */
	if (pos.temp_binding)
		km.n_bound--;
	r = x11_fake_key(d, pos.keycode, true, half_delay(d));
	if (r < 0) {
		held_remove(d, held_find(d, false, pos.keycode));
		/* Taken out of km above: nothing else would restore the spare keycode. */
		if (pos.temp_binding)
			x11_keymap_unbind(d, pos.keycode);
	}
	XSync(d->dpy, False);
finish_keymap:
	x11_keymap_finish(d, &km);
	return r;
}

static void release_held(struct x11_display *d, int i)
{
	struct x11_held h = d->held[i];

	held_remove(d, i);
	if (h.is_button)
		fake_button(d, h.code, false, half_delay(d));
	else
		x11_fake_key(d, h.code, false, half_delay(d));
	if (h.temp_binding) {
		XSync(d->dpy, False);
		time_sleep_us(d->rebind_settle_us);
		x11_keymap_unbind(d, h.code);
	}
}

int x11_key_up(struct x11_display *d, const char *name)
{
	struct x11_keymap km;
	uint32_t sym;
	int r, found = -1;

	r = lookup_all(&name, 1, &sym);
	if (r < 0)
		return r;
	r = x11_keymap_load(d, &km);
	if (r < 0)
		return r;
	for (int kc = km.min_keycode; kc <= km.max_keycode && found < 0; kc++) {
		const KeySym *row = km.syms + (size_t)(kc - km.min_keycode) * (size_t)km.per_code;
		for (int col = 0; col < MIN(km.per_code, 2); col++)
			if (row[col] == sym && held_find(d, false, (unsigned)kc) >= 0)
				found = held_find(d, false, (unsigned)kc);
	}
	x11_keymap_finish(d, &km);
	if (found < 0) {
		log_debug("key_up '%s': key is not held", name);
		return -ENOENT;
	}
	release_held(d, found);
	XSync(d->dpy, False);
	return 0;
}

int x11_release_all(struct x11_display *d)
{
	/* Reverse order: modifiers pressed first are released last, as a person would. */
	while (d->n_held > 0)
		release_held(d, (int)d->n_held - 1);
	XSync(d->dpy, False);
	return d->lost ? -ECONNRESET : 0;
}
