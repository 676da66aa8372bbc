/* keys: the one table from model vocabularies to X keysyms (agent.md 3), combinations, and X's
 * own keysym names (see keys.h). */
#include "common.h"
#include "keys.h"

#include <X11/XF86keysym.h>
#include <X11/keysym.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Names are matched case-insensitively. Several vocabularies meet here: xdotool/X keysym names,
 * browser KeyboardEvent.key names (ArrowLeft, PageDown), pyautogui names (pgdn, win, option) and
 * macOS names (cmd, option). */
static const struct {
	const char *name;
	uint32_t keysym;
} key_table[] = {
	{"return", XK_Return},
	{"enter", XK_Return},
	{"kp_enter", XK_KP_Enter},
	{"esc", XK_Escape},
	{"escape", XK_Escape},
	{"tab", XK_Tab},
	{"space", XK_space},
	{"spacebar", XK_space},
	{"backspace", XK_BackSpace},
	{"back_space", XK_BackSpace},
	{"bksp", XK_BackSpace},
	{"delete", XK_Delete},
	{"del", XK_Delete},
	{"insert", XK_Insert},
	{"ins", XK_Insert},
	{"home", XK_Home},
	{"end", XK_End},
	{"pageup", XK_Prior},
	{"page_up", XK_Prior},
	{"pgup", XK_Prior},
	{"prior", XK_Prior},
	{"pagedown", XK_Next},
	{"page_down", XK_Next},
	{"pgdn", XK_Next},
	{"next", XK_Next},
	{"left", XK_Left},
	{"arrowleft", XK_Left},
	{"arrow_left", XK_Left},
	{"leftarrow", XK_Left},
	{"right", XK_Right},
	{"arrowright", XK_Right},
	{"arrow_right", XK_Right},
	{"rightarrow", XK_Right},
	{"up", XK_Up},
	{"arrowup", XK_Up},
	{"arrow_up", XK_Up},
	{"uparrow", XK_Up},
	{"down", XK_Down},
	{"arrowdown", XK_Down},
	{"arrow_down", XK_Down},
	{"downarrow", XK_Down},
	{"ctrl", XK_Control_L},
	{"control", XK_Control_L},
	{"ctrl_l", XK_Control_L},
	{"control_l", XK_Control_L},
	{"lctrl", XK_Control_L},
	{"ctrlleft", XK_Control_L},
	{"ctrl_r", XK_Control_R},
	{"control_r", XK_Control_R},
	{"rctrl", XK_Control_R},
	{"ctrlright", XK_Control_R},
	{"shift", XK_Shift_L},
	{"shift_l", XK_Shift_L},
	{"lshift", XK_Shift_L},
	{"shiftleft", XK_Shift_L},
	{"shift_r", XK_Shift_R},
	{"rshift", XK_Shift_R},
	{"shiftright", XK_Shift_R},
	{"alt", XK_Alt_L},
	{"option", XK_Alt_L},
	{"alt_l", XK_Alt_L},
	{"lalt", XK_Alt_L},
	{"altleft", XK_Alt_L},
	{"alt_r", XK_Alt_R},
	{"ralt", XK_Alt_R},
	{"altright", XK_Alt_R},
	{"altgr", XK_ISO_Level3_Shift},
	{"cmd", XK_Super_L},
	{"command", XK_Super_L},
	{"super", XK_Super_L},
	{"super_l", XK_Super_L},
	{"win", XK_Super_L},
	{"windows", XK_Super_L},
	{"meta", XK_Super_L},
	{"os", XK_Super_L},
	{"super_r", XK_Super_R},
	{"capslock", XK_Caps_Lock},
	{"caps_lock", XK_Caps_Lock},
	{"numlock", XK_Num_Lock},
	{"num_lock", XK_Num_Lock},
	{"scrolllock", XK_Scroll_Lock},
	{"scroll_lock", XK_Scroll_Lock},
	{"printscreen", XK_Print},
	{"print", XK_Print},
	{"prtsc", XK_Print},
	{"prtscr", XK_Print},
	{"pause", XK_Pause},
	{"break", XK_Break},
	{"menu", XK_Menu},
	{"apps", XK_Menu},
	{"contextmenu", XK_Menu},
	{"minus", XK_minus},
	{"hyphen", XK_minus},
	{"dash", XK_minus},
	{"plus", XK_plus},
	{"equal", XK_equal},
	{"equals", XK_equal},
	{"comma", XK_comma},
	{"period", XK_period},
	{"dot", XK_period},
	{"slash", XK_slash},
	{"backslash", XK_backslash},
	{"semicolon", XK_semicolon},
	{"colon", XK_colon},
	{"apostrophe", XK_apostrophe},
	{"quote", XK_apostrophe},
	{"singlequote", XK_apostrophe},
	{"quotedbl", XK_quotedbl},
	{"doublequote", XK_quotedbl},
	{"grave", XK_grave},
	{"backtick", XK_grave},
	{"backquote", XK_grave},
	{"tilde", XK_asciitilde},
	{"asciitilde", XK_asciitilde},
	{"exclam", XK_exclam},
	{"exclamation", XK_exclam},
	{"at", XK_at},
	{"numbersign", XK_numbersign},
	{"hash", XK_numbersign},
	{"pound", XK_numbersign},
	{"dollar", XK_dollar},
	{"percent", XK_percent},
	{"caret", XK_asciicircum},
	{"asciicircum", XK_asciicircum},
	{"ampersand", XK_ampersand},
	{"asterisk", XK_asterisk},
	{"star", XK_asterisk},
	{"parenleft", XK_parenleft},
	{"leftparen", XK_parenleft},
	{"parenright", XK_parenright},
	{"rightparen", XK_parenright},
	{"bracketleft", XK_bracketleft},
	{"leftbracket", XK_bracketleft},
	{"bracketright", XK_bracketright},
	{"rightbracket", XK_bracketright},
	{"braceleft", XK_braceleft},
	{"leftbrace", XK_braceleft},
	{"braceright", XK_braceright},
	{"rightbrace", XK_braceright},
	{"less", XK_less},
	{"lessthan", XK_less},
	{"greater", XK_greater},
	{"greaterthan", XK_greater},
	{"question", XK_question},
	{"questionmark", XK_question},
	{"underscore", XK_underscore},
	{"bar", XK_bar},
	{"pipe", XK_bar},
	{"volumeup", XF86XK_AudioRaiseVolume},
	{"volumedown", XF86XK_AudioLowerVolume},
	{"volumemute", XF86XK_AudioMute},
	{"mute", XF86XK_AudioMute},
	{"playpause", XF86XK_AudioPlay},
};

/* X's keysym names, as XStringToKeysym() knows them: generated from the same headers that
 * libX11's own table is made from (keysym-names.awk), so no X library is needed here. */
struct keysym_name {
	const char *name;
	uint32_t keysym;
};
#include "keysym-names.h"

/* XStringToKeysym() without libX11: an exact (case-sensitive) name, or "U" and the hex of a
 * code point ("U2014"), which only a printable character has. */
static int x_keysym_name(const char *name, size_t len, uint32_t *ret_keysym)
{
	for (size_t i = 0; i < ARRAY_SIZE(keysym_names); i++)
		if (strcmp(name, keysym_names[i].name) == 0) {
			*ret_keysym = keysym_names[i].keysym;
			return 0;
		}
	if (name[0] == 'U' && len >= 2 && len <= 7 && strspn(name + 1, "0123456789abcdefABCDEF") == len - 1) {
		uint32_t cp = (uint32_t)strtoul(name + 1, NULL, 16);

		if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return -EINVAL;
		*ret_keysym = keys_keysym_from_codepoint(cp);
		return 0;
	}
	return -EINVAL;
}

const char *keys_name(size_t i)
{
	return i < ARRAY_SIZE(key_table) ? key_table[i].name : NULL;
}

int keys_lookup(const char *name, uint32_t *ret_keysym)
{
	size_t len;
	uint32_t cp;

	if (!name || !*name)
		return -EINVAL;
	len = strlen(name);
	if (len >= KEYS_MAX_NAME)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(key_table); i++)
		if (strcasecmp(name, key_table[i].name) == 0) {
			*ret_keysym = key_table[i].keysym;
			return 0;
		}
	/* f1..f24 (X defines F1..F35 contiguously). */
	if ((name[0] == 'f' || name[0] == 'F') && len >= 2 && len <= 3 && name[1] >= '1' && name[1] <= '9' &&
	    (len == 2 || (name[2] >= '0' && name[2] <= '9'))) {
		int n = atoi(name + 1);
		if (n >= 1 && n <= 24) {
			*ret_keysym = XK_F1 + (uint32_t)(n - 1);
			return 0;
		}
		return -EINVAL;
	}
	/* One character: letters by their lowercase key (a hotkey "ctrl+A" means the A key),
	 * anything else by its own keysym. */
	if (utf8_decode(name, len, &cp) == len) {
		if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
			return -EINVAL;
		if (cp >= 'A' && cp <= 'Z')
			cp += 'a' - 'A';
		*ret_keysym = keys_keysym_from_codepoint(cp);
		return 0;
	}
	/* Exact X keysym names ("KP_Add", "XF86Back") for callers that already speak X. */
	return x_keysym_name(name, len, ret_keysym);
}

int keys_combo_split(const char *combo, char names[][KEYS_MAX_NAME], size_t max, char *errbuf, size_t errlen)
{
	size_t n = 0;
	const char *p = combo;

	if (!combo || !*combo) {
		snprintf(errbuf, errlen, "empty key combination");
		return -EINVAL;
	}
	for (;;) {
		size_t len = strcspn(p, "+");
		const char *tok = p;

		/* An empty token followed by '+' is the plus key itself: "ctrl++", "+". */
		if (len == 0 && *p == '+')
			len = 1;
		if (len == 0) {
			snprintf(errbuf, errlen, "empty key name in '%s'", combo);
			return -EINVAL;
		}
		if (n == max) {
			snprintf(errbuf, errlen, "more than %zu keys in '%s'", max, combo);
			return -EINVAL;
		}
		if (len >= KEYS_MAX_NAME) {
			snprintf(errbuf, errlen, "key name too long in '%s'", combo);
			return -EINVAL;
		}
		memcpy(names[n], tok, len);
		names[n][len] = '\0';
		n++;
		p += len;
		if (!*p)
			break;
		if (*p != '+') {
			snprintf(errbuf, errlen, "malformed key combination '%s'", combo);
			return -EINVAL;
		}
		p++;
		if (!*p) {
			snprintf(errbuf, errlen, "empty key name in '%s'", combo);
			return -EINVAL;
		}
	}
	return (int)n;
}

int keys_combo_validate(const char *combo, char *errbuf, size_t errlen)
{
	char names[KEYS_MAX_PER_COMBO][KEYS_MAX_NAME];
	uint32_t ks;
	int n = keys_combo_split(combo, names, KEYS_MAX_PER_COMBO, errbuf, errlen);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		if (keys_lookup(names[i], &ks) < 0) {
			snprintf(errbuf, errlen, "unknown key name '%s'", names[i]);
			return -EINVAL;
		}
	return n;
}
