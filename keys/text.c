/* keys: which text can be typed, and the keysym of each character (see keys.h). */
#include "common.h"
#include "keys.h"

#include <X11/keysym.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

uint32_t keys_keysym_from_codepoint(uint32_t cp)
{
	/* Latin-1 keysyms equal their code points; the rest use the Unicode keysym range. */
	if ((cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff))
		return cp;
	return 0x01000000u | cp;
}

uint32_t keys_text_keysym(uint32_t cp)
{
	if (cp == '\n' || cp == '\r')
		return XK_Return;
	if (cp == '\t')
		return XK_Tab;
	if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
		return 0;
	return keys_keysym_from_codepoint(cp);
}

int keys_text_validate(const char *utf8, char *errbuf, size_t errlen)
{
	uint32_t cp;
	size_t len;

	if (!utf8)
		return -EINVAL;
	len = strnlen(utf8, KEYS_MAX_TEXT_BYTES + 1);
	if (len > KEYS_MAX_TEXT_BYTES) {
		if (errbuf)
			snprintf(errbuf, errlen, "text longer than %d bytes", KEYS_MAX_TEXT_BYTES);
		return -EINVAL;
	}
	for (size_t i = 0; i < len;) {
		size_t n = utf8_decode(utf8 + i, len - i, &cp);
		if (!n) {
			if (errbuf)
				snprintf(errbuf, errlen, "invalid UTF-8 at byte %zu", i);
			return -EINVAL;
		}
		if (!keys_text_keysym(cp)) {
			if (errbuf)
				snprintf(errbuf, errlen,
					 "control character U+%04X at byte %zu cannot be typed (only "
					 "newline and tab are)",
					 (unsigned)cp, i);
			return -EINVAL;
		}
		i += n;
	}
	return 0;
}
