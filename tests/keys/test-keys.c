/* Unit: the key-name table, X's keysym names, combination parsing and which text can be typed
 * (the keys module: no display, no X library). */
#include "common.h"
#include "keys.h"
#include "test.h"

#include <X11/XF86keysym.h>
#include <X11/keysym.h>

TEST_DEFINE_GLOBALS;

static uint32_t ks(const char *name)
{
	uint32_t k = 0;
	int r = keys_lookup(name, &k);
	if (r < 0) {
		fprintf(stderr, "lookup '%s' failed\n", name);
		test_failures++;
	}
	return k;
}

static void test_names(void)
{
	/* Model vocabularies meet in one table, case-insensitively. */
	CHECK_INT_EQ(ks("enter"), XK_Return);
	CHECK_INT_EQ(ks("Return"), XK_Return);
	CHECK_INT_EQ(ks("ESC"), XK_Escape);
	CHECK_INT_EQ(ks("escape"), XK_Escape);
	CHECK_INT_EQ(ks("ctrl"), XK_Control_L);
	CHECK_INT_EQ(ks("Control"), XK_Control_L);
	CHECK_INT_EQ(ks("cmd"), XK_Super_L);
	CHECK_INT_EQ(ks("super"), XK_Super_L);
	CHECK_INT_EQ(ks("win"), XK_Super_L);
	CHECK_INT_EQ(ks("meta"), XK_Super_L);
	CHECK_INT_EQ(ks("alt"), XK_Alt_L);
	CHECK_INT_EQ(ks("option"), XK_Alt_L);
	CHECK_INT_EQ(ks("shift"), XK_Shift_L);
	CHECK_INT_EQ(ks("pagedown"), XK_Next);
	CHECK_INT_EQ(ks("PgDn"), XK_Next);
	CHECK_INT_EQ(ks("pageup"), XK_Prior);
	CHECK_INT_EQ(ks("ArrowLeft"), XK_Left);
	CHECK_INT_EQ(ks("left"), XK_Left);
	CHECK_INT_EQ(ks("arrowup"), XK_Up);
	CHECK_INT_EQ(ks("home"), XK_Home);
	CHECK_INT_EQ(ks("end"), XK_End);
	CHECK_INT_EQ(ks("delete"), XK_Delete);
	CHECK_INT_EQ(ks("del"), XK_Delete);
	CHECK_INT_EQ(ks("backspace"), XK_BackSpace);
	CHECK_INT_EQ(ks("tab"), XK_Tab);
	CHECK_INT_EQ(ks("space"), XK_space);
	CHECK_INT_EQ(ks("f1"), XK_F1);
	CHECK_INT_EQ(ks("F12"), XK_F12);
	CHECK_INT_EQ(ks("f24"), XK_F24);
	CHECK_INT_EQ(ks("a"), XK_a);
	CHECK_INT_EQ(ks("A"), XK_a); /* "ctrl+A" means the A key */
	CHECK_INT_EQ(ks("7"), XK_7);
	CHECK_INT_EQ(ks("-"), XK_minus);
	CHECK_INT_EQ(ks("+"), XK_plus);
	CHECK_INT_EQ(ks("minus"), XK_minus);
	CHECK_INT_EQ(ks("plus"), XK_plus);
	CHECK_INT_EQ(ks("comma"), XK_comma);
	CHECK_INT_EQ(ks("period"), XK_period);
	CHECK_INT_EQ(ks("slash"), XK_slash);
	CHECK_INT_EQ(ks("backslash"), XK_backslash);
	CHECK_INT_EQ(ks("ö"), XK_odiaeresis);
	CHECK_INT_EQ(ks("日"), 0x10065e5);
	CHECK_INT_EQ(ks("KP_Add"), XK_KP_Add);
	CHECK_INT_EQ(ks("XF86Back"), XF86XK_Back);
	/* X's names come from the keysym headers, vendors' included, as XStringToKeysym spells
	 * them: case-sensitively, XF86keysym.h's _EVDEVK() values computed, "U" + hex. */
	CHECK_INT_EQ(ks("Hangul"), XK_Hangul);
	CHECK_INT_EQ(ks("ISO_Left_Tab"), XK_ISO_Left_Tab);
	CHECK_INT_EQ(ks("XF86MonBrightnessUp"), XF86XK_MonBrightnessUp);
	CHECK_INT_EQ(ks("XF86BrightnessAuto"), 0x100810F4);
	CHECK_INT_EQ(ks("hpReset"), 0x1000FF6C);
	CHECK_INT_EQ(ks("U2014"), 0x1002014);
	CHECK_INT_EQ(ks("U41"), 'A');
	CHECK_INT_EQ(ks("volumeup"), XF86XK_AudioRaiseVolume);

	/* Unknown names are errors, never silently dropped. */
	uint32_t k = 0xdead;
	CHECK_INT_EQ(keys_lookup("ctr", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("f25", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("f0", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup(NULL, &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("\x01", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("\xc3", &k), -EINVAL); /* truncated UTF-8 */
	CHECK_INT_EQ(keys_lookup("0x41", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("kp_add", &k), -EINVAL); /* X's names are case-sensitive */
	CHECK_INT_EQ(keys_lookup("U1B", &k), -EINVAL);	  /* a control character */
	CHECK_INT_EQ(keys_lookup("UD800", &k), -EINVAL);  /* a surrogate */
	CHECK_INT_EQ(keys_lookup("U110000", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("U+41", &k), -EINVAL);
	CHECK_INT_EQ(keys_lookup("averyveryveryverylongkeynamethatgoeson", &k), -EINVAL);
	CHECK_INT_EQ(k, 0xdead); /* untouched on error */
}

static void test_combos(void)
{
	char err[128];

	CHECK_INT_EQ(keys_combo_validate("ctrl+shift+t", err, sizeof(err)), 3);
	CHECK_INT_EQ(keys_combo_validate("Return", err, sizeof(err)), 1);
	CHECK_INT_EQ(keys_combo_validate("ctrl++", err, sizeof(err)), 2);
	CHECK_INT_EQ(keys_combo_validate("+", err, sizeof(err)), 1);
	CHECK_INT_EQ(keys_combo_validate("ctrl+minus", err, sizeof(err)), 2);
	CHECK_INT_EQ(keys_combo_validate("a+b+c+d+e+f+g+h+i", err, sizeof(err)), 9);

	err[0] = 0;
	CHECK_INT_EQ(keys_combo_validate("ctrl+ctr+t", err, sizeof(err)), -EINVAL);
	CHECK_STR_EQ(err, "unknown key name 'ctr'");
	CHECK_INT_EQ(keys_combo_validate("", err, sizeof(err)), -EINVAL);
	CHECK_STR_EQ(err, "empty key combination");
	CHECK_INT_EQ(keys_combo_validate(NULL, err, sizeof(err)), -EINVAL);
	CHECK_INT_EQ(keys_combo_validate("a+b+c+d+e+f+g+h+i+j", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "more than 9 keys") != NULL);
	CHECK_INT_EQ(keys_combo_validate("ctrl+", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "empty key name") != NULL);
	CHECK_INT_EQ(keys_combo_validate("+a", err, sizeof(err)), -EINVAL);

	char names[KEYS_MAX_PER_COMBO][KEYS_MAX_NAME];
	CHECK_INT_EQ(keys_combo_split("ctrl++", names, KEYS_MAX_PER_COMBO, err, sizeof(err)), 2);
	CHECK_STR_EQ(names[0], "ctrl");
	CHECK_STR_EQ(names[1], "+");
}

static void test_text(void)
{
	char err[128];

	/* Newline and tab are keys; other control characters are refused with where they are. */
	CHECK_INT_EQ(keys_text_validate("a\tb\r\nc\n", err, sizeof(err)), 0);
	CHECK_INT_EQ(keys_text_keysym('\n'), XK_Return);
	CHECK_INT_EQ(keys_text_keysym('\r'), XK_Return);
	CHECK_INT_EQ(keys_text_keysym('\t'), XK_Tab);
	CHECK_INT_EQ(keys_text_keysym(0x1b), 0);
	CHECK_INT_EQ(keys_text_keysym(0x85), 0);
	CHECK_INT_EQ(keys_text_validate("ok\x1b[2J", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "control character U+001B at byte 2") != NULL);
	CHECK_INT_EQ(keys_text_validate(NULL, NULL, 0), -EINVAL);
	char *big = xmalloc(KEYS_MAX_TEXT_BYTES + 2);
	memset(big, 'x', KEYS_MAX_TEXT_BYTES + 1);
	big[KEYS_MAX_TEXT_BYTES + 1] = '\0';
	CHECK_INT_EQ(keys_text_validate(big, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "text longer than 65536 bytes") != NULL);
	big[KEYS_MAX_TEXT_BYTES] = '\0';
	CHECK_INT_EQ(keys_text_validate(big, err, sizeof(err)), 0);
	free(big);

	/* Text to type is decoded by common's utf8_decode: what it rejects is never typed. */
	CHECK_INT_EQ(keys_text_validate("A\xc3\xb6\xe2\x9c\x93\xf0\x9f\x98\x80", err, sizeof(err)), 0);
	CHECK_INT_EQ(keys_text_validate("ab\xc0\xaf", err, sizeof(err)), -EINVAL); /* overlong */
	CHECK(strstr(err, "invalid UTF-8 at byte 2") != NULL);
	CHECK_INT_EQ(keys_text_validate("\xed\xa0\x80", err, sizeof(err)), -EINVAL); /* surrogate */
	CHECK_INT_EQ(keys_text_validate("\xe2\x9c", err, sizeof(err)), -EINVAL);     /* truncated */
	CHECK_INT_EQ(keys_text_validate("\xff", err, sizeof(err)), -EINVAL);
	CHECK_INT_EQ(keys_keysym_from_codepoint('a'), XK_a);
	CHECK_INT_EQ(keys_keysym_from_codepoint(0xe9), XK_eacute);
	CHECK_INT_EQ(keys_keysym_from_codepoint(0x2014), 0x1002014);
}

int main(void)
{
	test_names();
	test_combos();
	test_text();
	return test_exit();
}
