/* Fuzz target for what an OpenAI-compatible server sends the remote provider: a chat
 * completion as server-sent events or as one JSON body, and header lines (remote-reply.h).
 *
 * Input: the first byte selects what the rest is:
 *   's' an event stream and 'j' a non-streamed body, both after a "200" status line and fed in
 *       pieces of 1 + (second byte % 61) bytes, then ended (remote_reply_end);
 *   'h' header lines separated by '\n' (status lines, Retry-After).
 * Invariants (a violation aborts): a refusal is -E2BIG or -EPROTO and says why; the answer's
 * text stays within AGENT_MAX_RAW_BYTES and NUL-terminated, the body's bytes within
 * REMOTE_MAX_RESPONSE_BYTES, the model name within REMOTE_MAX_MODEL_NAME, the usage -1 or a
 * count, Retry-After -1 or within REMOTE_MAX_RETRY_AFTER_S. An input is accepted when every
 * feed and the end returned 0 (a header input always is). The reasoning (a server's
 * "reasoning" / "reasoning_content") keeps within AGENT_MAX_RAW_BYTES too.
 *
 * Built with libFuzzer by tools/fuzz/build.sh (docs/fuzzing.md). Without HOLOD_LIBFUZZER this
 * file builds a replay driver (the `unit` test fuzz-remote-reply-corpus, tests/remote/meson.build): every
 * file of the corpus directory given as argv[1] must have the outcome its name promises (ok-*: accepted,
 * bad-*: refused). `--write-seeds DIR` writes the seed corpus (the table below) into DIR. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "common.h"
#include "remote-reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int last_outcome; /* 1: accepted, 0: refused */

static void check(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "invariant violated: %s\n", what);
		abort();
	}
}

static void check_reply(const struct remote_reply *rep, int r)
{
	check(r == 0 || r == -E2BIG || r == -EPROTO, "a refusal is E2BIG or EPROTO");
	check(r == 0 || rep->err[0] != '\0', "a refusal says why");
	check(rep->content.len <= AGENT_MAX_RAW_BYTES, "the text is within its limit");
	check(!rep->content.data || rep->content.data[rep->content.len] == '\0',
	      "the text is NUL-terminated");
	check(rep->reasoning.len <= AGENT_MAX_RAW_BYTES, "the reasoning is within its limit");
	check(!rep->reasoning.data || rep->reasoning.data[rep->reasoning.len] == '\0',
	      "the reasoning is NUL-terminated");
	check(rep->total <= REMOTE_MAX_RESPONSE_BYTES, "the answer is within its limit");
	check(strlen(rep->model) <= REMOTE_MAX_MODEL_NAME, "the model name is within its limit");
	check(rep->prompt_tokens >= -1 && rep->completion_tokens >= -1, "usage is a count or -1");
	check(rep->retry_after_s >= -1 && rep->retry_after_s <= REMOTE_MAX_RETRY_AFTER_S,
	      "Retry-After is capped");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct remote_reply rep;
	int r = 0;

	last_outcome = 0;
	if (size == 0)
		return 0;
	if (data[0] == 'h') {
		remote_reply_init(&rep, true, REMOTE_MAX_RESPONSE_BYTES);
		for (size_t off = 1; off < size;) {
			const uint8_t *nl = memchr(data + off, '\n', size - off);
			size_t len = nl ? (size_t)(nl - (data + off)) + 1 : size - off;
			remote_reply_header(&rep, (const char *)data + off, len);
			off += len;
		}
		check_reply(&rep, 0);
		remote_reply_finish(&rep);
		last_outcome = 1;
		return 0;
	}
	if ((data[0] != 's' && data[0] != 'j') || size < 2)
		return 0;
	static const char status[] = "HTTP/1.1 200 OK\r\n";
	size_t piece = 1 + data[1] % 61;
	remote_reply_init(&rep, data[0] == 's', REMOTE_MAX_RESPONSE_BYTES);
	remote_reply_header(&rep, status, sizeof(status) - 1);
	check(rep.status == 200, "the status line is read");
	for (size_t off = 2; off < size && r == 0; off += piece) {
		r = remote_reply_feed(&rep, (const char *)data + off, MIN(piece, size - off));
		check_reply(&rep, r);
	}
	if (r == 0) {
		r = remote_reply_end(&rep);
		check_reply(&rep, r);
	}
	remote_reply_finish(&rep);
	last_outcome = r == 0;
	return 0;
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

struct seed {
	const char *name;
	const char *text; /* the selector byte, the piece byte, then the body */
};

#define CHUNK(content)                                                                                       \
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":"              \
	"[{\"index\":0,\"delta\":{\"content\":\"" content "\"}}]}\n\n"

static const struct seed seeds[] = {
	{"ok-stream",
	 "s\x07"
	 "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n" CHUNK(
		 "{\\\"note\\\":null,")
		 CHUNK("\\\"thought\\\":\\\"t\\\"}") "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,"
						     "\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"},
	{"ok-stream-crlf-comments", "s\x00"
				    ": keep-alive\r\nevent: message\r\n"
				    "data:{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n\r\n"
				    "data: [DONE]"},
	{"ok-stream-no-newline-at-end", "s\x3c" CHUNK("a") "data: [DONE]"},
	{"ok-stream-empty", "s\x05"},
	{"ok-stream-negative-usage", "s\x02"
				     "data: {\"usage\":{\"prompt_tokens\":-4,"
				     "\"completion_tokens\":\"7\"},\"model\":5}\n\n"},
	{"ok-plain", "j\x10{\"id\":\"c\",\"model\":\"fake\",\"choices\":[{\"index\":0,\"message\":"
		     "{\"role\":\"assistant\",\"content\":\"{}\"}}],\"usage\":{\"prompt_tokens\":1,"
		     "\"completion_tokens\":2}}"},
	{"ok-stream-reasoning", "s\x0b"
				"data: {\"choices\":[{\"delta\":{\"reasoning\":\"look \"}}]}\n\n"
				"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"first\"}}]}\n\n"
				"data: {\"choices\":[{\"delta\":{\"reasoning\":7,\"content\":\"{}\"}}]}\n\n"
				"data: [DONE]\n\n"},
	{"ok-plain-reasoning", "j\x13{\"choices\":[{\"message\":{\"reasoning_content\":\"why\","
			       "\"content\":\"{}\"}}]}"},
	{"ok-plain-in-stream", "s\x09{\n  \"choices\": [{\"message\": {\"content\": \"hi\"}}]\n}\n"},
	{"ok-header-429", "hHTTP/1.1 429 Too Many Requests\r\nRetry-After: 3600\r\n"},
	{"ok-header-date", "hHTTP/2 503\r\nretry-after: Wed, 21 Oct 2026 07:28:00 GMT\r\n"},
	{"ok-header-junk", "hHTTP/\nRetry-After:\nRetry-After: -5\nX: y\n"},
	{"bad-event-not-json", "s\x03"
			       "data: {\"choices\":[\n\n"},
	{"bad-error-event", "s\x01"
			    "data: {\"error\":{\"message\":\"overloaded\"}}\n\n"},
	{"bad-error-string", "j\x20{\"error\":\"no such model\"}"},
	{"bad-plain-garbage", "j\x00<html>502 Bad Gateway</html>"},
	{"bad-stream-garbage", "s\x30<html>\n502\n</html>"},
};

static int write_seeds(const char *dir)
{
	for (size_t i = 0; i < ARRAY_SIZE(seeds); i++) {
		char path[4096];
		/* Seeds hold a NUL as the piece byte: their size is the string's plus that. */
		size_t n = 2 + strlen(seeds[i].text + 2);
		FILE *f;

		if (seeds[i].text[0] == 'h')
			n = strlen(seeds[i].text);
		snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name);
		f = fopen(path, "wb");
		if (!f || fwrite(seeds[i].text, 1, n, f) != n || fclose(f) != 0) {
			perror(path);
			return 1;
		}
	}
	return 0;
}

static bool replay_one(const uint8_t *data, size_t size)
{
	LLVMFuzzerTestOneInput(data, size);
	return last_outcome;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
		return write_seeds(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR | --write-seeds DIR\n", argv[0]);
		return 2;
	}
	return fuzz_replay(argv[1], replay_one, 15);
}
#endif
