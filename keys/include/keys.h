/* keys: key names and text to type, without a display.
 *
 * The one public header of the keys module, a leaf that ipc, policy and x11 share: the table
 * from the models' key vocabularies to X keysyms, "+"-joined combinations, and which text x11
 * can type. Everything here is pure and thread-safe and links nothing but libc and common; the
 * keysym values and X's own keysym names come from X's protocol headers at build time, so
 * holoctl validates requests without libX11.
 *
 * Errors: -EINVAL, with a sentence in errbuf where the function takes one.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Named limits. */
#define KEYS_MAX_PER_COMBO 9		/* libxdo's parser breaks at 10 (agent.md 3) */
#define KEYS_MAX_NAME 32		/* bytes of one key name, with its NUL */
#define KEYS_MAX_TEXT_BYTES (64 * 1024) /* one write action */

/* Maps a model key name ("enter", "esc", "ctrl", "cmd", "pagedown", "arrowleft", "a", "F5",
 * "space", ...) case-insensitively to an X keysym; X's own keysym names ("KP_Add", "XF86Back",
 * "U2014") are accepted as XStringToKeysym() spells them. -EINVAL for unknown names. */
int keys_lookup(const char *name, uint32_t *ret_keysym);
/* The i-th name of the model vocabularies' table (lowercase, "return", "enter", "esc", ...), in
 * the table's order; NULL past the end. Besides these keys_lookup() takes single characters,
 * f1..f24 and X's own keysym names. */
const char *keys_name(size_t i);
/* Splits a "+"-joined combination into at most `max` names copied into `names` (each
 * KEYS_MAX_NAME bytes). "+" itself is written as "ctrl++" or "+". Returns the count, or
 * -EINVAL with a message in errbuf (empty, too many keys, empty or too long name). */
int keys_combo_split(const char *combo, char names[][KEYS_MAX_NAME], size_t max, char *errbuf, size_t errlen);
/* Validates a "+"-joined combination; returns the number of keys, or -EINVAL with a message
 * such as "unknown key name 'ctr'" in errbuf. */
int keys_combo_validate(const char *combo, char *errbuf, size_t errlen);

/* The keysym X uses for a Unicode code point (Latin-1 keysyms below U+0100). */
uint32_t keys_keysym_from_codepoint(uint32_t cp);
/* The keysym that types one code point of text: Return for '\n' and '\r' ("\r\n" is one Return:
 * the caller skips the '\n' after a '\r'), Tab for '\t', 0 for any other control character,
 * which is never typed. */
uint32_t keys_text_keysym(uint32_t cp);
/* Whether x11 would type `utf8` (valid UTF-8, no control characters besides newline and tab,
 * at most KEYS_MAX_TEXT_BYTES): 0, or -EINVAL with a sentence in errbuf (may be NULL). Lets a
 * request be refused before it reaches a display. */
int keys_text_validate(const char *utf8, char *errbuf, size_t errlen);
