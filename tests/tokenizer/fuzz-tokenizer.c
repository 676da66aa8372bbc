/* Fuzz target for the tokenizer: the tokenizer.json loader, encode and decode.
 *
 * Input: the first byte selects what the rest is:
 *   'L'  a tokenizer.json (loaded from memory); when it loads, a fixed text is encoded and decoded
 *   'E'  text encoded with the Tekken-style fixture tokenizer (both special-token modes)
 *   'D'  little-endian int32 ids decoded with the fixture tokenizer (batch and streaming)
 * Invariants are checked on every success and a violation aborts, so the fuzzer reports it like a
 * crash: encode fails exactly for invalid UTF-8; decoded text is valid UTF-8; streaming decode
 * gives exactly the batch text, chunk by chunk valid UTF-8; with special tokens not parsed, the
 * fixture gives back the text it encoded (except around <ref>/</ref>, which strip whitespace).
 *
 * With libFuzzer: tools/fuzz/build.sh, then tools/fuzz/run.sh tokenizer (docs/fuzzing.md).
 * New crashers go into tests/tokenizer/corpus/ named bad-* (must be rejected: the load or the
 * encode/decode fails with an error) or ok-* (must succeed).
 *
 * Without HOLOD_LIBFUZZER this file builds a replay driver (a `unit` test): every file of the
 * corpus directory given as argv[1] is run and must have the outcome its name promises.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "tokenizer_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sample[] =
	"Hello <s> w\xC3\xB6rld <image>\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 123\r\n\tend";

static struct engine_tokenizer *fixture;
static int last_outcome; /* 1: accepted, 0: rejected */

static void check(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "invariant violated: %s\n", what);
		abort();
	}
}

static const struct engine_tokenizer *get_fixture(void)
{
	if (!fixture) {
		const char *root = getenv("HOLOD_SOURCE_ROOT");
		char path[4096], err[512];

		snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/tekken/tokenizer.json",
			 root ? root : ".");
		fixture = engine_tokenizer_load(path, err, sizeof(err));
		if (!fixture) {
			fprintf(stderr, "%s\n", err);
			abort();
		}
	}
	return fixture;
}

/* Decodes ids in one go and streamed; both must agree and be valid UTF-8. Returns the result. */
static int decode_both(const struct engine_tokenizer *tok, const int32_t *ids, size_t n, bool skip,
		       char **ret_text, size_t *ret_len)
{
	struct engine_detok *d;
	struct tok_buf streamed = {0};
	const char *chunk;
	size_t len;
	char *text;
	size_t text_len;
	int r, rs = 0;

	r = engine_tokenizer_decode(tok, ids, n, skip, &text, &text_len);
	d = engine_detok_create(tok, skip);
	check(d != NULL, "detok_create");
	for (size_t i = 0; i < n && rs == 0; i++) {
		rs = engine_detok_push(d, ids[i], &chunk, &len);
		if (rs == 0) {
			check(utf8_valid((const uint8_t *)chunk, len), "streamed chunk is valid UTF-8");
			check(tok_buf_append(&streamed, chunk, len) == 0, "append");
		}
	}
	if (rs == 0) {
		check(engine_detok_flush(d, &chunk, &len) == 0, "flush");
		check(utf8_valid((const uint8_t *)chunk, len), "flushed chunk is valid UTF-8");
		check(tok_buf_append(&streamed, chunk, len) == 0, "append");
	}
	engine_detok_destroy(d);
	check((r == 0) == (rs == 0), "batch and streaming decode agree on errors");
	if (r == 0) {
		check(utf8_valid((const uint8_t *)text, text_len), "decoded text is valid UTF-8");
		check(text[text_len] == '\0', "decoded text is NUL-terminated");
		check(streamed.len == text_len &&
			      memcmp(streamed.data ? streamed.data : "", text, text_len) == 0,
		      "streaming decode equals batch decode");
		*ret_text = text;
		*ret_len = text_len;
	}
	tok_buf_finish(&streamed);
	return r;
}

static int run_encode(const struct engine_tokenizer *tok, const char *text, size_t len, bool lossless)
{
	bool valid = utf8_valid((const uint8_t *)text, len);
	int result = 0;

	for (int special = 0; special < 2; special++) {
		int32_t *ids;
		size_t n, out_len;
		char *out;
		int r = engine_tokenizer_encode(tok, text, len, special, &ids, &n);

		check(valid ? r == 0 : r == -EILSEQ, "encode fails exactly for invalid UTF-8");
		if (r < 0) {
			result = r;
			continue;
		}
		for (size_t i = 0; i < n; i++)
			check(ids[i] >= 0 && (size_t)ids[i] < engine_tokenizer_vocab_size(tok),
			      "ids in range");
		check(decode_both(tok, ids, n, false, &out, &out_len) == 0, "decode of encoded ids");
		if (lossless && !special && !memmem(text, len, "ref>", 4))
			check(out_len == len && memcmp(out, text, len) == 0, "round trip is lossless");
		free(out);
		free(ids);
	}
	return result;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *rest = (const char *)data + 1;
	size_t n = size ? size - 1 : 0;

	last_outcome = 0;
	if (size == 0)
		return 0;
	switch (data[0]) {
	case 'L': {
		char err[512];
		struct engine_tokenizer *tok = tok_load_buffer(rest, n, "fuzz.json", err, sizeof(err));

		if (!tok) {
			check(errno > 0 && strncmp(err, "fuzz.json: ", 11) == 0 && strlen(err) > 11,
			      "a failed load says why");
			return 0;
		}
		(void)run_encode(tok, sample, sizeof(sample) - 1, false);
		engine_tokenizer_destroy(tok);
		last_outcome = 1;
		return 0;
	}
	case 'E':
		last_outcome = run_encode(get_fixture(), rest, n, true) == 0;
		return 0;
	case 'D': {
		size_t count = n / 4, len;
		int32_t *ids = malloc((count ? count : 1) * sizeof(*ids));
		char *text;

		check(ids != NULL, "malloc");
		for (size_t i = 0; i < count; i++) {
			const uint8_t *p = (const uint8_t *)rest + 4 * i;

			ids[i] = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
					   (uint32_t)p[3] << 24);
		}
		for (int skip = 0; skip < 2; skip++) {
			int r = decode_both(get_fixture(), ids, count, skip, &text, &len);

			last_outcome = r == 0;
			if (r == 0)
				free(text);
		}
		free(ids);
		return 0;
	}
	default:
		return 0;
	}
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

static bool replay_one(const uint8_t *data, size_t size)
{
	LLVMFuzzerTestOneInput(data, size);
	return last_outcome;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
		return 2;
	}
	int r = fuzz_replay(argv[1], replay_one, 20);
	engine_tokenizer_destroy(fixture);
	return r;
}
#endif
