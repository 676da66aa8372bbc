/* x11 keymap: where a keysym sits on the live keyboard map, and temporary bindings of spare
 * keycodes for keysyms the map lacks (libxdo's technique, with verification and restore). */
#include "common.h"
#include "x11-internal.h"

#include <stdlib.h>
#include <string.h>

int x11_keymap_load(struct x11_display *d, struct x11_keymap *km)
{
	int per = 0;

	memset(km, 0, sizeof(*km));
	if (d->lost)
		return -ECONNRESET;
	XDisplayKeycodes(d->dpy, &km->min_keycode, &km->max_keycode);
	km->syms = XGetKeyboardMapping(d->dpy, (KeyCode)km->min_keycode,
				       km->max_keycode - km->min_keycode + 1, &per);
	if (!km->syms || per <= 0) {
		if (km->syms)
			XFree(km->syms);
		km->syms = NULL;
		return -EIO;
	}
	km->per_code = per;
	return 0;
}

static KeySym *row(const struct x11_keymap *km, unsigned keycode)
{
	return km->syms + (size_t)(keycode - (unsigned)km->min_keycode) * (size_t)km->per_code;
}

unsigned x11_keymap_find_plain(const struct x11_keymap *km, uint32_t keysym)
{
	for (int kc = km->min_keycode; kc <= km->max_keycode; kc++)
		if (row(km, (unsigned)kc)[0] == keysym)
			return (unsigned)kc;
	return 0;
}

static bool row_empty(const struct x11_keymap *km, unsigned keycode)
{
	const KeySym *r = row(km, keycode);

	for (int i = 0; i < km->per_code; i++)
		if (r[i] != NoSymbol)
			return false;
	return true;
}

void x11_keymap_unbind(struct x11_display *d, unsigned keycode)
{
	KeySym none = NoSymbol;

	XChangeKeyboardMapping(d->dpy, (int)keycode, 1, &none, 1);
	XSync(d->dpy, False);
}

static int bind_spare(struct x11_display *d, struct x11_keymap *km, uint32_t keysym, unsigned *ret_keycode)
{
	/* Both columns: the keysym must come out with or without Shift held. */
	KeySym syms[2] = {keysym, keysym};
	int per = 0;

	if (km->n_bound == X11_MAX_TEMP_BINDINGS)
		return -ENOSPC;
	/* From the top: low spare keycodes are where hardware keys of other layouts tend to be. */
	for (int kc = km->max_keycode; kc >= km->min_keycode; kc--) {
		if (!row_empty(km, (unsigned)kc))
			continue;
		x11_trap_begin();
		XChangeKeyboardMapping(d->dpy, kc, 2, syms, 1);
		int xerr = x11_trap_end(d->dpy);
		KeySym *now = XGetKeyboardMapping(d->dpy, (KeyCode)kc, 1, &per);
		bool took = !xerr && now && per >= 1 && now[0] == keysym;
		if (now)
			XFree(now);
		if (!took) {
			log_debug("binding keycode %d to keysym 0x%x did not take (X error %d)", kc, keysym,
				  xerr);
			x11_keymap_unbind(d, (unsigned)kc);
			return -EIO;
		}
		KeySym *r = row(km, (unsigned)kc);
		r[0] = keysym;
		if (km->per_code > 1)
			r[1] = keysym;
		km->bound[km->n_bound++] = (unsigned)kc;
		*ret_keycode = (unsigned)kc;
		return 0;
	}
	return -ENOSPC;
}

int x11_keymap_resolve(struct x11_display *d, struct x11_keymap *km, uint32_t keysym, struct x11_keypos *ret)
{
	unsigned kc;
	int r;

	for (int col = 0; col < MIN(km->per_code, 2); col++)
		for (kc = (unsigned)km->min_keycode; kc <= (unsigned)km->max_keycode; kc++)
			if (row(km, kc)[col] == keysym) {
				bool temp = false;
				for (size_t i = 0; i < km->n_bound; i++)
					temp |= km->bound[i] == kc;
				*ret = (struct x11_keypos){kc, col == 1 && !temp, temp};
				return 0;
			}
	r = bind_spare(d, km, keysym, &kc);
	if (r < 0)
		return r;
	*ret = (struct x11_keypos){kc, false, true};
	return 0;
}

void x11_keymap_finish(struct x11_display *d, struct x11_keymap *km)
{
	if (km->n_bound > 0) {
		XSync(d->dpy, False);
		time_sleep_us(d->rebind_settle_us);
		for (size_t i = 0; i < km->n_bound; i++)
			x11_keymap_unbind(d, km->bound[i]);
	}
	if (km->syms)
		XFree(km->syms);
	memset(km, 0, sizeof(*km));
}
