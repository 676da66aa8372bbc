/* The thought of a step as it is decoded (see thought-stream.h). */
#include "thought-stream.h"

#include <string.h>

#include "common.h"

void thought_stream_init(struct thought_stream *ts)
{
	memset(ts, 0, sizeof(*ts));
	ts->hex_len = -1;
}

static size_t put_cp(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Length of the UTF-8 sequence lead byte b starts; 0: not a lead byte. */
static size_t seq_len(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xc2 && b <= 0xdf)
		return 2;
	if (b >= 0xe0 && b <= 0xef)
		return 3;
	if (b >= 0xf0 && b <= 0xf4)
		return 4;
	return 0;
}

/* Whether part[0..len) is a whole, valid character (no overlong form, no surrogate). */
static bool valid_char(const uint8_t *p, size_t len)
{
	uint32_t cp;
	if (len == 1)
		return true;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return false;
	if (len == 2)
		return true;
	if (len == 3) {
		cp = (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
		return cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
	}
	cp = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 | (uint32_t)(p[2] & 0x3f) << 6 |
	     (p[3] & 0x3f);
	return cp >= 0x10000 && cp <= 0x10ffff;
}

/* A raw byte of the thought's string: kept until its character is whole. */
static size_t put_byte(struct thought_stream *ts, uint8_t b, char *out)
{
	size_t w = 0;
	if (ts->part_len && (b & 0xc0) != 0x80) {
		w += put_cp(0xfffd, out); /* a character cut short */
		ts->part_len = 0;
	}
	if (!ts->part_len && !seq_len(b))
		return w + put_cp(0xfffd, out + w);
	ts->part[ts->part_len++] = b;
	size_t need = seq_len(ts->part[0]);
	if (ts->part_len < need)
		return w;
	if (valid_char(ts->part, need)) {
		memcpy(out + w, ts->part, need);
		w += need;
	} else {
		w += put_cp(0xfffd, out + w);
	}
	ts->part_len = 0;
	return w;
}

/* A \uXXXX escape of the thought: surrogate pairs joined, a lone half U+FFFD. */
static size_t put_escape_u(struct thought_stream *ts, uint32_t u, char *out)
{
	size_t w = 0;
	if (ts->high) {
		if (u >= 0xdc00 && u <= 0xdfff) {
			uint32_t cp = 0x10000 + ((ts->high - 0xd800) << 10) + (u - 0xdc00);
			ts->high = 0;
			return put_cp(cp, out);
		}
		w += put_cp(0xfffd, out);
		ts->high = 0;
	}
	if (u >= 0xd800 && u <= 0xdbff) {
		ts->high = u;
		return w;
	}
	if (u >= 0xdc00 && u <= 0xdfff)
		return w + put_cp(0xfffd, out + w);
	return w + put_cp(u, out + w);
}

/* One byte inside the thought's string. */
static size_t thought_byte(struct thought_stream *ts, char c, char *out)
{
	size_t w = 0;
	if (ts->hex_len >= 0) {
		ts->hex[ts->hex_len++] = c;
		if (ts->hex_len < 4)
			return 0;
		uint32_t u = 0;
		bool ok = true;
		for (int i = 0; i < 4; i++) {
			int v = hex_digit(ts->hex[i]);
			ok = ok && v >= 0;
			u = u << 4 | (uint32_t)(v < 0 ? 0 : v);
		}
		ts->hex_len = -1;
		return ok ? put_escape_u(ts, u, out) : put_cp(0xfffd, out);
	}
	if (ts->escape) {
		ts->escape = false;
		if (c == 'u') {
			ts->hex_len = 0;
			return 0;
		}
		if (ts->high) { /* a high surrogate not followed by its low half */
			w += put_cp(0xfffd, out);
			ts->high = 0;
		}
		static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
		const char *p = strchr(from, c);
		return w + (p && c ? put_byte(ts, (uint8_t)to[p - from], out + w) : put_cp(0xfffd, out + w));
	}
	if (c == '\\') { /* a \u escape may follow a high surrogate */
		ts->escape = true;
		return 0;
	}
	if (ts->high) {
		w += put_cp(0xfffd, out);
		ts->high = 0;
	}
	if (c == '"') {
		ts->in_string = ts->in_thought = false;
		ts->done = true;
		if (ts->part_len) {
			w += put_cp(0xfffd, out + w);
			ts->part_len = 0;
		}
		return w;
	}
	return w + put_byte(ts, (uint8_t)c, out + w);
}

size_t thought_stream_feed(struct thought_stream *ts, const char *bytes, size_t n, char *out)
{
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		char c = bytes[i];
		if (ts->in_thought) {
			w += thought_byte(ts, c, out + w);
			continue;
		}
		if (ts->in_string) {
			if (ts->escape) {
				ts->escape = false;
				if (ts->key_string)
					ts->key_len = sizeof(ts->key); /* not "thought" */
			} else if (c == '\\') {
				ts->escape = true;
			} else if (c == '"') {
				ts->in_string = false;
				if (ts->key_string) {
					ts->key_string = false;
					ts->expect_key = false;
					ts->thought_key =
						ts->key_len == 7 && memcmp(ts->key, "thought", 7) == 0;
				}
			} else if (ts->key_string) {
				if (ts->key_len < sizeof(ts->key))
					ts->key[ts->key_len] = c;
				if (ts->key_len < sizeof(ts->key))
					ts->key_len++;
			}
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		bool value_next = ts->value_next;
		ts->value_next = false;
		switch (c) {
		case '"':
			ts->in_string = true;
			if (ts->depth == 1 && ts->expect_key) {
				ts->key_string = true;
				ts->key_len = 0;
			} else if (ts->depth == 1 && value_next && ts->thought_key && !ts->done) {
				ts->in_thought = true;
			}
			break;
		case '{':
		case '[':
			if (ts->depth++ == 0)
				ts->expect_key = c == '{';
			break;
		case '}':
		case ']':
			if (ts->depth > 0)
				ts->depth--;
			break;
		case ':':
			ts->value_next = ts->depth == 1;
			break;
		case ',':
			ts->expect_key = ts->depth == 1;
			break;
		default:
			break;
		}
	}
	return w;
}
