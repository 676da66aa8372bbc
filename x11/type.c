/* x11 typing: UTF-8 text as key events, exactly.
 *
 * Characters on the current keymap (first two columns: plain and Shift) are typed with their
 * keycode; newline and tab become the Return and Tab keysyms (never control characters);
 * anything else is typed by binding a spare keycode to its keysym for the duration of the text.
 * Bindings are made in batches and restored only after d->rebind_settle_us, because a client
 * looks the keycode up in the keymap when it processes the event, not when we send it. */
#include "common.h"
#include "keys.h"
#include "x11-internal.h"

#include <X11/keysym.h>
#include <stdio.h>
#include <string.h>

static int type_keypos(struct x11_display *d, const struct x11_keypos *pos, unsigned shift_kc)
{
	uint32_t half = MAX(d->key_delay_us / 2, X11_MIN_KEY_DELAY_US / 2);
	int r;

	if (pos->shift) {
		r = x11_fake_key(d, shift_kc, true, half);
		if (r < 0)
			return r;
	}
	r = x11_fake_key(d, pos->keycode, true, half);
	if (r >= 0)
		r = x11_fake_key(d, pos->keycode, false, half);
	if (pos->shift)
		x11_fake_key(d, shift_kc, false, half);
	return r;
}

static int tap(struct x11_display *d, unsigned keycode)
{
	uint32_t half = MAX(d->key_delay_us / 2, X11_MIN_KEY_DELAY_US / 2);
	int r = x11_fake_key(d, keycode, true, half);

	if (r >= 0)
		r = x11_fake_key(d, keycode, false, half);
	return r;
}

int x11_type(struct x11_display *d, const char *utf8)
{
	struct x11_keymap km;
	struct x11_keypos pos;
	unsigned shift_kc, caps_kc = 0;
	size_t len;
	uint32_t cp;
	int r;

	char why[128];
	r = keys_text_validate(utf8, why, sizeof(why));
	if (r < 0) {
		log_debug("%s", utf8 ? why : "no text");
		return r;
	}
	len = strlen(utf8);
	if (len == 0)
		return 0;
	r = x11_keymap_load(d, &km);
	if (r < 0)
		return r;
	shift_kc = x11_keymap_find_plain(&km, XK_Shift_L);
	/* Caps Lock would turn "a" into "A" (and Shift+a back into "a"): switch it off while
	 * typing. */
	Window root_ret, child_ret;
	int rx, ry, wx, wy;
	unsigned mask = 0;
	XQueryPointer(d->dpy, d->root, &root_ret, &child_ret, &rx, &ry, &wx, &wy, &mask);
	caps_kc = mask & LockMask ? x11_keymap_find_plain(&km, XK_Caps_Lock) : 0;
	if (caps_kc) {
		r = tap(d, caps_kc);
		if (r < 0)
			goto finish_keymap;
	}
	for (size_t i = 0; i < len;) {
		/* 64 KiB of text takes minutes at the key delay: a stop must not wait for it. */
		if (d->interrupt && atomic_load(d->interrupt)) {
			r = -ECANCELED;
			goto finish_keymap;
		}
		size_t n = utf8_decode(utf8 + i, len - i, &cp);
		uint32_t sym = keys_text_keysym(cp);

		r = x11_keymap_resolve(d, &km, sym, &pos);
		if (r == -ENOSPC && km.n_bound > 0) {
			/* Out of spare keycodes: let clients catch up, restore, start a new batch.
			 */
			x11_keymap_finish(d, &km);
			r = x11_keymap_load(d, &km);
			if (r < 0)
				goto finish_keymap; /* Caps Lock goes back on all the same */
			r = x11_keymap_resolve(d, &km, sym, &pos);
		}
		if (r < 0)
			goto finish_keymap;
		if (pos.shift && !shift_kc) {
			r = -ENOTSUP;
			goto finish_keymap;
		}
		r = type_keypos(d, &pos, shift_kc);
		if (r < 0)
			goto finish_keymap;
		i += (size_t)n;
		if (cp == '\r' && i < len && utf8[i] == '\n')
			i++;
	}
	r = 0;
finish_keymap:
	if (caps_kc)
		tap(d, caps_kc);
	XSync(d->dpy, False);
	x11_keymap_finish(d, &km);
	return r;
}
