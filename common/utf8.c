/* UTF-8: the one decoder, validator and encoder of the tree (see common.h). */
#include "common.h"

/* The lead byte's sequence length and the allowed range of the first continuation byte
 * (Unicode Table 3-7, which leaves no room for overlong forms, surrogates or code points above
 * U+10FFFF); 0 for bytes that cannot start a sequence. */
static size_t utf8_lead(uint8_t b, uint8_t *lo, uint8_t *hi)
{
	*lo = 0x80;
	*hi = 0xBF;
	if (b < 0x80)
		return 1;
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF) {
		if (b == 0xE0)
			*lo = 0xA0;
		else if (b == 0xED)
			*hi = 0x9F;
		return 3;
	}
	if (b >= 0xF0 && b <= 0xF4) {
		if (b == 0xF0)
			*lo = 0x90;
		else if (b == 0xF4)
			*hi = 0x8F;
		return 4;
	}
	return 0;
}

size_t utf8_decode(const void *s, size_t len, uint32_t *ret_cp)
{
	const uint8_t *u = s;
	uint8_t lo, hi;
	size_t n;
	uint32_t cp;

	if (!len)
		return 0;
	n = utf8_lead(u[0], &lo, &hi);
	if (!n || n > len)
		return 0;
	cp = n == 1 ? u[0] : (uint32_t)u[0] & (0x7Fu >> n);
	for (size_t i = 1; i < n; i++) {
		if (u[i] < lo || u[i] > hi)
			return 0;
		lo = 0x80;
		hi = 0xBF;
		cp = (cp << 6) | (u[i] & 0x3Fu);
	}
	*ret_cp = cp;
	return n;
}

bool utf8_valid(const void *s, size_t len)
{
	const uint8_t *u = s;
	size_t i = 0;
	uint32_t cp;

	while (i < len) {
		size_t n;

		if (u[i] < 0x80) {
			i++;
			continue;
		}
		n = utf8_decode(u + i, len - i, &cp);
		if (!n)
			return false;
		i += n;
	}
	return true;
}

size_t utf8_encode(uint32_t cp, char out[UTF8_MAX_SEQ])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp >= 0xD800 && cp <= 0xDFFF)
		return 0;
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	if (cp > 0x10FFFF)
		return 0;
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

size_t utf8_invalid_prefix(const void *s, size_t len)
{
	const uint8_t *u = s;
	uint8_t lo, hi;
	size_t n;

	if (!len)
		return 0;
	n = utf8_lead(u[0], &lo, &hi);
	if (!n)
		return 1;
	for (size_t i = 1; i < n; i++) {
		if (i >= len)
			return 0; /* a proper prefix: more bytes may complete it */
		if (u[i] < lo || u[i] > hi)
			return i;
		lo = 0x80;
		hi = 0xBF;
	}
	return 0;
}
