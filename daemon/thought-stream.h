/* thought-stream: the "thought" member of a step, decoded as the model writes the step's JSON
 * text piece by piece (issue 32), so a follower sees the thought token by token. The text
 * streamed is the JSON string's value, the same the step parser journals once the step is
 * whole; a piece never ends inside a UTF-8 character. Pure: no I/O, no allocation. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct thought_stream {
	int depth; /* of objects and arrays; 1: inside the step's object */
	bool in_string, escape;
	bool expect_key;  /* depth 1: the next string is a member name */
	bool key_string;  /* the string being read is a member name at depth 1 */
	bool value_next;  /* depth 1: after the ':' of a member */
	bool thought_key; /* the last member name at depth 1 was "thought" */
	bool in_thought;  /* inside the thought's string */
	bool done;	  /* the thought's string ended */
	char key[8];	  /* the member name read so far, when it fits */
	size_t key_len;
	char hex[4];	 /* a \u escape's digits */
	int hex_len;	 /* -1: not in one */
	uint32_t high;	 /* a high surrogate waiting for its low half, or 0 */
	uint8_t part[4]; /* a UTF-8 character of the thought not whole yet */
	size_t part_len;
};

void thought_stream_init(struct thought_stream *ts);
/* Reads n more bytes of the step's text and writes the thought's characters they complete
 * to out, which holds at least THOUGHT_STREAM_OUT(n) bytes; returns how many it wrote. An
 * invalid sequence becomes U+FFFD (the grammar lets none through). */
#define THOUGHT_STREAM_OUT(n) (3 * (n) + 8)
size_t thought_stream_feed(struct thought_stream *ts, const char *bytes, size_t n, char *out);
