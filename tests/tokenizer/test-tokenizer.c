/* Tokenizer against Hugging Face `tokenizers` (fixtures from tools/make_tokenizer_fixture.py):
 * identical ids for every corpus entry with and without special-token parsing, identical decoded
 * text, lossless round trips, a streaming decoder that never emits part of a character, lookups
 * by name, precise load errors for broken files, thread safety of the shared word cache, and
 * encode throughput (printed). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common.h"
#include "engine.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char fixture_dir[4096];
static char tmpdir[64];

static bool ids_equal(const int32_t *ids, size_t n, const json_t *expected)
{
	if (json_array_size(expected) != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (json_integer_value(json_array_get(expected, i)) != ids[i])
			return false;
	}
	return true;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
	fprintf(stderr, "  %s:", what);
	for (size_t i = 0; i < n && i < 40; i++)
		fprintf(stderr, " %d", ids[i]);
	fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static int32_t *ids_from_json(const json_t *arr, size_t *ret_n)
{
	size_t n = json_array_size(arr);
	int32_t *ids = malloc((n ? n : 1) * sizeof(*ids));

	REQUIRE(ids);
	for (size_t i = 0; i < n; i++)
		ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
	*ret_n = n;
	return ids;
}

/* Streams ids one by one: every chunk must be whole UTF-8, the whole must equal `expected`. */
static void check_streaming(const struct engine_tokenizer *tok, const int32_t *ids, size_t n,
			    bool skip_special, const char *expected, size_t expected_len)
{
	struct engine_detok *d = engine_detok_create(tok, skip_special);
	char *all = malloc(4 * expected_len + 64);
	size_t total = 0, cap = 4 * expected_len + 64;
	const char *chunk;
	size_t len;

	REQUIRE(d && all);
	for (size_t i = 0; i < n; i++) {
		CHECK_INT_EQ(engine_detok_push(d, ids[i], &chunk, &len), 0);
		CHECK(strlen(chunk) == len || memchr(chunk, 0, len));
		CHECK(utf8_valid(chunk, len));
		REQUIRE(total + len <= cap);
		memcpy(all + total, chunk, len);
		total += len;
	}
	CHECK_INT_EQ(engine_detok_flush(d, &chunk, &len), 0);
	CHECK(utf8_valid(chunk, len));
	REQUIRE(total + len <= cap);
	memcpy(all + total, chunk, len);
	total += len;
	CHECK(total == expected_len && memcmp(all, expected, total) == 0);
	engine_detok_destroy(d);
	free(all);
}

static void test_fixture(const json_t *fx, const char *kind)
{
	char path[4200], err[512];
	const json_t *cases = json_object_get(fx, "cases"), *c;
	const json_t *names = json_object_get(fx, "token_ids");
	bool lossless = json_is_true(json_object_get(fx, "lossless"));
	struct engine_tokenizer *tok;
	const char *name;
	json_t *v;
	size_t i;

	snprintf(path, sizeof(path), "%s/%s", fixture_dir,
		 json_string_value(json_object_get(fx, "tokenizer")));
	tok = engine_tokenizer_load(path, err, sizeof(err));
	if (!tok)
		fprintf(stderr, "%s: %s\n", kind, err);
	REQUIRE(tok);

	CHECK_INT_EQ(engine_tokenizer_vocab_size(tok), json_integer_value(json_object_get(fx, "vocab_size")));
	json_object_foreach((json_t *)names, name, v)
	{
		CHECK_INT_EQ(engine_tokenizer_token_id(tok, name), json_integer_value(v));
		CHECK_STR_EQ(engine_tokenizer_token_str(tok, (int32_t)json_integer_value(v)), name);
	}
	CHECK_INT_EQ(engine_tokenizer_token_id(tok, "<SPECIAL_12>"), 12);
	CHECK_INT_EQ(engine_tokenizer_token_id(tok, "<no such token>"), -ENOENT);
	CHECK(engine_tokenizer_is_special(tok, 11));
	CHECK(engine_tokenizer_is_special(tok, engine_tokenizer_token_id(tok, "<image>")));
	CHECK(!engine_tokenizer_is_special(tok, engine_tokenizer_token_id(tok, "<think>")));
	CHECK(!engine_tokenizer_is_special(tok, engine_tokenizer_token_id(tok, "a")));
	{
		const uint8_t *bytes;
		size_t len;

		/* "Ġ" is the byte-level spelling of a space: it decodes to the byte 0x20. */
		CHECK_INT_EQ(engine_tokenizer_token_bytes(tok, engine_tokenizer_token_id(tok, "Ġ"), &bytes,
							  &len),
			     0);
		CHECK(len == 1 && bytes[0] == ' ');
		CHECK_INT_EQ(engine_tokenizer_token_bytes(tok, 12, &bytes, &len), 0);
		CHECK(len == 12 && memcmp(bytes, "<SPECIAL_12>", 12) == 0);
		CHECK_INT_EQ(engine_tokenizer_token_bytes(tok, (int32_t)engine_tokenizer_vocab_size(tok),
							  &bytes, &len),
			     -ENOENT);
		CHECK_INT_EQ(engine_tokenizer_token_bytes(tok, -1, &bytes, &len), -ENOENT);
	}

	json_array_foreach(cases, i, c)
	{
		const char *text = json_string_value(json_object_get(c, "text"));
		size_t text_len = json_string_length(json_object_get(c, "text"));
		const json_t *want = json_object_get(c, "ids");
		const json_t *want_plain = json_object_get(c, "ids_no_special");
		const char *dec = json_string_value(json_object_get(c, "decoded"));
		size_t dec_len = json_string_length(json_object_get(c, "decoded"));
		const char *dec_skip = json_string_value(json_object_get(c, "decoded_skip_special"));
		int32_t *ids = NULL, *ids2 = NULL;
		size_t n = 0, n2 = 0, out_len = 0;
		char *out = NULL;

		CHECK_INT_EQ(engine_tokenizer_encode(tok, text, text_len, true, &ids, &n), 0);
		if (!ids_equal(ids, n, want)) {
			fprintf(stderr, "%s case %zu \"%.60s\": ids differ from tokenizers\n", kind, i, text);
			print_ids("got     ", ids, n);
			test_failures++;
		}
		CHECK_INT_EQ(engine_tokenizer_encode(tok, text, text_len, false, &ids2, &n2), 0);
		if (!ids_equal(ids2, n2, want_plain)) {
			fprintf(stderr, "%s case %zu \"%.60s\": ids (special not parsed) differ\n", kind, i,
				text);
			print_ids("got     ", ids2, n2);
			test_failures++;
		}

		CHECK_INT_EQ(engine_tokenizer_decode(tok, ids, n, false, &out, &out_len), 0);
		CHECK(out && out_len == dec_len && memcmp(out, dec, dec_len) == 0);
		free(out);
		out = NULL;
		CHECK_INT_EQ(engine_tokenizer_decode(tok, ids, n, true, &out, &out_len), 0);
		CHECK_STR_EQ(out, dec_skip);
		free(out);
		out = NULL;
		/* Special parsing off: the decoded text is HF's; without a prefix space byte-level BPE is
		 * lossless, except where an lstrip/rstrip added token swallows whitespace (<ref>). */
		CHECK_INT_EQ(engine_tokenizer_decode(tok, ids2, n2, false, &out, &out_len), 0);
		CHECK_STR_EQ(out, json_string_value(json_object_get(c, "decoded_no_special")));
		if (lossless && !memmem(text, text_len, "ref>", 4))
			CHECK(out && out_len == text_len && memcmp(out, text, text_len) == 0);
		free(out);

		check_streaming(tok, ids, n, false, dec, dec_len);
		free(ids);
		free(ids2);
	}

	json_array_foreach(json_object_get(fx, "decode_cases"), i, c)
	{
		const char *dec = json_string_value(json_object_get(c, "decoded"));
		size_t dec_len = json_string_length(json_object_get(c, "decoded")), n, out_len;
		int32_t *ids = ids_from_json(json_object_get(c, "ids"), &n);
		char *out = NULL;

		CHECK_INT_EQ(engine_tokenizer_decode(tok, ids, n, false, &out, &out_len), 0);
		if (!(out && out_len == dec_len && memcmp(out, dec, dec_len) == 0)) {
			fprintf(stderr, "%s decode case %zu: got \"%s\" want \"%s\"\n", kind, i, out, dec);
			test_failures++;
		}
		free(out);
		check_streaming(tok, ids, n, false, dec, dec_len);
		if (json_object_get(c, "decoded_skip_special")) {
			const char *skip = json_string_value(json_object_get(c, "decoded_skip_special"));

			CHECK_INT_EQ(engine_tokenizer_decode(tok, ids, n, true, &out, &out_len), 0);
			CHECK_STR_EQ(out, skip);
			free(out);
			check_streaming(tok, ids, n, true, skip, strlen(skip));
		}
		free(ids);
	}
	engine_tokenizer_destroy(tok);
}

static int32_t byte_token(const struct engine_tokenizer *tok, uint8_t byte)
{
	const uint8_t *b;
	size_t bl;

	for (int32_t id = 0; id < (int32_t)engine_tokenizer_vocab_size(tok); id++) {
		if (engine_tokenizer_token_bytes(tok, id, &b, &bl) == 0 && bl == 1 && b[0] == byte &&
		    !engine_tokenizer_is_special(tok, id))
			return id;
	}
	return -1;
}

/* An emoji split over four tokens: nothing comes out until its last byte arrives. */
static void test_streaming_partial(const struct engine_tokenizer *tok)
{
	static const char emoji[] = "\xF0\x9F\x98\x80";
	struct engine_detok *d = engine_detok_create(tok, true);
	const char *chunk;
	size_t len, n;
	int32_t *ids;

	REQUIRE(d);
	/* Spelled by its four single-byte tokens, so it is cut whatever the vocabulary merges. */
	n = 4;
	ids = malloc(n * sizeof(*ids));
	REQUIRE(ids);
	for (size_t i = 0; i < n; i++) {
		ids[i] = byte_token(tok, (uint8_t)emoji[i]);
		REQUIRE(ids[i] >= 0);
	}
	for (size_t i = 0; i < n; i++) {
		CHECK_INT_EQ(engine_detok_push(d, ids[i], &chunk, &len), 0);
		if (i + 1 < n)
			CHECK_INT_EQ(len, 0);
		else
			CHECK(len == 4 && memcmp(chunk, emoji, 4) == 0);
	}
	free(ids);
	/* With skip_special, a special token produces no output. */
	CHECK_INT_EQ(engine_detok_push(d, 12, &chunk, &len), 0);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(engine_detok_push(d, -5, &chunk, &len), -EINVAL);
	CHECK_INT_EQ(engine_detok_flush(d, &chunk, &len), 0);
	CHECK_INT_EQ(len, 0);
	engine_detok_destroy(d);
	engine_detok_destroy(NULL);
}

/* Half a character at the end of the stream becomes one U+FFFD on flush, never raw bytes. */
static void test_streaming_flush(const struct engine_tokenizer *tok)
{
	struct engine_detok *d = engine_detok_create(tok, false);
	int32_t e4 = byte_token(tok, 0xE4), b8 = byte_token(tok, 0xB8), ad = byte_token(tok, 0xAD);
	const char *chunk;
	size_t len;

	REQUIRE(d && e4 >= 0 && b8 >= 0 && ad >= 0);
	CHECK_INT_EQ(engine_detok_push(d, e4, &chunk, &len), 0);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(engine_detok_push(d, b8, &chunk, &len), 0);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(engine_detok_flush(d, &chunk, &len), 0);
	CHECK(len == 3 && memcmp(chunk, "\xEF\xBF\xBD", 3) == 0);
	/* After a flush the decoder starts over: a whole 中 comes out at its last byte. */
	CHECK_INT_EQ(engine_detok_push(d, e4, &chunk, &len), 0);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(engine_detok_push(d, b8, &chunk, &len), 0);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(engine_detok_push(d, ad, &chunk, &len), 0);
	CHECK(len == 3 && memcmp(chunk, "\xE4\xB8\xAD", 3) == 0);
	/* An invalid continuation: the stuck lead byte is replaced as soon as it cannot complete. */
	CHECK_INT_EQ(engine_detok_push(d, e4, &chunk, &len), 0);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(engine_detok_push(d, engine_tokenizer_token_id(tok, "a"), &chunk, &len), 0);
	CHECK(len == 4 && memcmp(chunk,
				 "\xEF\xBF\xBD"
				 "a",
				 4) == 0);
	engine_detok_destroy(d);
}

static void test_encode_errors(const struct engine_tokenizer *tok)
{
	int32_t *ids = NULL;
	size_t n = 99;
	char *out = NULL;
	size_t out_len;
	int32_t bad[] = {1, 1 << 30};

	CHECK_INT_EQ(engine_tokenizer_encode(tok, "\xC3(", 2, true, &ids, &n), -EILSEQ);
	CHECK_INT_EQ(engine_tokenizer_encode(tok, "\xED\xA0\x80", 3, true, &ids, &n), -EILSEQ);
	CHECK(ids == NULL && n == 99);
	CHECK_INT_EQ(engine_tokenizer_encode(tok, "", 0, true, &ids, &n), 0);
	CHECK(ids != NULL && n == 0);
	free(ids);
	CHECK_INT_EQ(engine_tokenizer_encode(tok, NULL, 0, true, &ids, &n), 0);
	CHECK(n == 0);
	free(ids);
	CHECK_INT_EQ(engine_tokenizer_encode(tok, "x", ENGINE_TOKENIZER_MAX_INPUT_BYTES + 1ul, true, &ids, &n),
		     -E2BIG);
	CHECK_INT_EQ(engine_tokenizer_decode(tok, bad, 2, false, &out, &out_len), -EINVAL);
	CHECK(out == NULL);
}

/* A huge whitespace run and a huge word: no regex stack failure, lossless round trip. */
static void test_long_inputs(const struct engine_tokenizer *tok)
{
	size_t len = 1 << 20;
	char *text = malloc(len), *out = NULL;
	int32_t *ids = NULL;
	size_t n = 0, out_len = 0;

	REQUIRE(text);
	memset(text, ' ', len);
	text[0] = 'x';
	text[len / 2] = '\n';
	text[len - 1] = 'y';
	CHECK_INT_EQ(engine_tokenizer_encode(tok, text, len, true, &ids, &n), 0);
	CHECK_INT_EQ(engine_tokenizer_decode(tok, ids, n, false, &out, &out_len), 0);
	CHECK(out && out_len == len && memcmp(out, text, len) == 0);
	free(ids);
	free(out);
	memset(text, 'q', len);
	for (size_t i = 0; i < len; i += 7)
		text[i] = 'u';
	CHECK_INT_EQ(engine_tokenizer_encode(tok, text, len, true, &ids, &n), 0);
	CHECK(n > 0 && n < len);
	CHECK_INT_EQ(engine_tokenizer_decode(tok, ids, n, false, &out, &out_len), 0);
	CHECK(out && out_len == len && memcmp(out, text, len) == 0);
	free(ids);
	free(out);
	free(text);
}

/* ---- variants: other pre-tokenizer and BPE options against HF ------------------------------- */

/* Each variant patches fields of tekken/tokenizer.json; HF's ids for the patched file are in
 * expected.json. Covers Split String, Removed, MergedWithPrevious/Next, Contiguous, invert, nested Sequence,
 * ByteLevel add_prefix_space, unk/fuse_unk, byte_fallback, dropped unknown characters and
 * ignore_merges. */
static void test_variants(const json_t *variants, const char *base_path)
{
	json_error_t jerr;
	json_t *base = json_load_file(base_path, JSON_ALLOW_NUL, &jerr);
	const char *name;
	json_t *v;
	char path[256];

	REQUIRE(base);
	REQUIRE(json_object_size(variants) >= 12);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/holod-tok-XXXXXX");
	REQUIRE(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/variant.json", tmpdir);
	json_object_foreach((json_t *)variants, name, v)
	{
		json_t *doc = json_deep_copy(base), *patch = json_object_get(v, "patch"), *c;
		struct engine_tokenizer *tok;
		const char *key;
		json_t *val;
		char err[512];
		size_t i;

		REQUIRE(doc);
		json_object_foreach(patch, key, val)
		{
			if (strcmp(key, "model") == 0)
				json_object_update(json_object_get(doc, "model"), val);
			else if (strcmp(key, "vocab_add") == 0)
				json_object_update(json_object_get(json_object_get(doc, "model"), "vocab"),
						   val);
			else
				json_object_set(doc, key, val);
		}
		REQUIRE(json_dump_file(doc, path, 0) == 0);
		json_decref(doc);
		tok = engine_tokenizer_load(path, err, sizeof(err));
		if (!tok) {
			fprintf(stderr, "variant %s: %s\n", name, err);
			test_failures++;
			continue;
		}
		json_array_foreach(json_object_get(v, "cases"), i, c)
		{
			const json_t *text = json_object_get(c, "text");
			int32_t *ids;
			size_t n;

			CHECK_INT_EQ(engine_tokenizer_encode(tok, json_string_value(text),
							     json_string_length(text), true, &ids, &n),
				     0);
			if (!ids_equal(ids, n, json_object_get(c, "ids"))) {
				fprintf(stderr, "variant %s case %zu \"%s\": ids differ from tokenizers\n",
					name, i, json_string_value(text));
				print_ids("got", ids, n);
				test_failures++;
			}
			free(ids);
		}
		engine_tokenizer_destroy(tok);
	}
	unlink(path);
	rmdir(tmpdir);
	json_decref(base);
}

/* ---- properties on random input ------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

/* Random text from pieces that stress the pre-tokenizer and the added-token matcher. Leaves out
 * <ref>/</ref>, whose lstrip/rstrip deliberately drop whitespace. */
static size_t random_text(char *out, size_t cap)
{
	static const char *pieces[] = {
		"a",
		"Z",
		"the",
		" ",
		"  ",
		"\t",
		"\n",
		"\r\n",
		"\xC2\x85",
		"\xC2\xA0",
		"\xE3\x80\x80",
		"\xC3\xA9",
		"e\xCC\x81",
		"\xE4\xB8\xAD",
		"\xE6\x96\x87",
		"\xF0\x9F\x98\x80",
		"\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
		"\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
		"7",
		"42",
		"'s",
		"'ll",
		"/",
		"//",
		"!",
		"?",
		".",
		"(",
		"{",
		"_",
		"-",
		"<s>",
		"</s>",
		"<SPECIAL_1",
		"<SPECIAL_11>",
		"<image>",
		"<img>",
		"</img>",
		"<think>",
		"</think>",
		"<box>",
		"<",
		">",
		"\xD0\xBF\xD1\x80\xD0\xB8",
		"\xD9\x85\xD8\xB1",
		"\x01",
		"\x7F",
	};
	size_t len = 0, n = rng() % 40;

	for (size_t i = 0; i < n; i++) {
		const char *p = pieces[rng() % ARRAY_SIZE(pieces)];
		size_t pl = strlen(p);

		if (len + pl >= cap)
			break;
		memcpy(out + len, p, pl);
		len += pl;
	}
	out[len] = '\0';
	return len;
}

static void test_random_roundtrip(const struct engine_tokenizer *tok)
{
	char text[512], *out;
	int32_t *ids;
	size_t n, out_len;

	for (int iter = 0; iter < 3000; iter++) {
		size_t len = random_text(text, sizeof(text));

		for (int special = 0; special < 2; special++) {
			REQUIRE(engine_tokenizer_encode(tok, text, len, special, &ids, &n) == 0);
			CHECK_INT_EQ(engine_tokenizer_decode(tok, ids, n, false, &out, &out_len), 0);
			if (!(out_len == len && memcmp(out, text, len) == 0)) {
				fprintf(stderr, "round trip (special %d) lost \"%s\": got \"%s\"\n", special,
					text, out);
				test_failures++;
			}
			free(out);
			free(ids);
		}
	}
}

/* Random ids: decode always yields valid UTF-8, and streaming yields exactly the same text. */
static void test_random_decode(const struct engine_tokenizer *tok)
{
	size_t vocab = engine_tokenizer_vocab_size(tok);

	for (int iter = 0; iter < 1000; iter++) {
		int32_t ids[24];
		size_t n = rng() % ARRAY_SIZE(ids), out_len;
		char *out;

		for (size_t i = 0; i < n; i++)
			ids[i] = (int32_t)(rng() % vocab);
		for (int skip = 0; skip < 2; skip++) {
			REQUIRE(engine_tokenizer_decode(tok, ids, n, skip, &out, &out_len) == 0);
			CHECK(utf8_valid(out, out_len));
			check_streaming(tok, ids, n, skip, out, out_len);
			free(out);
		}
	}
}

/* Corrupted copies of a real tokenizer.json: each loads or fails with a message; never crashes
 * (the ASan build runs this). */
static void test_corrupt_files(const char *good_path)
{
	static const char junk[] = "{}[]\",:0123456789-a\\ \xC3\xFF";
	char path[256], err[512];
	FILE *f = fopen(good_path, "rb");
	char *good, *bad;
	long size;
	int failed = 0;

	REQUIRE(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, 0, SEEK_SET);
	good = malloc((size_t)size);
	bad = malloc((size_t)size);
	REQUIRE(good && bad && fread(good, 1, (size_t)size, f) == (size_t)size);
	fclose(f);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/holod-tok-XXXXXX");
	REQUIRE(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/corrupt.json", tmpdir);
	for (int iter = 0; iter < 200; iter++) {
		struct engine_tokenizer *tok;
		size_t len = (size_t)size;

		memcpy(bad, good, len);
		if (iter % 3 == 0) {
			len = rng() % len;
		} else {
			for (int k = 0; k < 1 + iter % 4; k++)
				bad[rng() % len] = junk[rng() % (sizeof(junk) - 1)];
		}
		f = fopen(path, "wb");
		REQUIRE(f && fwrite(bad, 1, len, f) == len);
		fclose(f);
		err[0] = '\0';
		errno = 0;
		tok = engine_tokenizer_load(path, err, sizeof(err));
		if (!tok) {
			failed++;
			CHECK(errno > 0);
			CHECK(strncmp(err, path, strlen(path)) == 0 && strlen(err) > strlen(path) + 2);
		} else {
			int32_t *ids;
			size_t n;

			CHECK_INT_EQ(engine_tokenizer_encode(tok, "Hello <s> world", 15, true, &ids, &n), 0);
			free(ids);
		}
		engine_tokenizer_destroy(tok);
	}
	/* Every truncation breaks the JSON, so at least a third of the copies must be refused. */
	CHECK(failed >= 67);
	unlink(path);
	rmdir(tmpdir);
	free(good);
	free(bad);
}

/* ---- concurrency and throughput ----------------------------------------------------------- */

struct corpus {
	char *text;
	size_t len;
};

struct thread_arg {
	const struct engine_tokenizer *tok;
	const struct corpus *corpus;
	const int32_t *want;
	size_t want_n;
	int failures;
};

static void *encode_thread(void *p)
{
	struct thread_arg *a = p;

	for (int k = 0; k < 3; k++) {
		int32_t *ids;
		size_t n;

		if (engine_tokenizer_encode(a->tok, a->corpus->text, a->corpus->len, true, &ids, &n) != 0) {
			a->failures++;
			continue;
		}
		if (n != a->want_n || memcmp(ids, a->want, n * sizeof(*ids)) != 0)
			a->failures++;
		free(ids);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_threads_and_speed(const struct engine_tokenizer *tok, const json_t *cases)
{
	struct corpus corpus = {0};
	size_t cap = 0, i;
	const json_t *c;
	int32_t *ids, *ids2;
	size_t n, n2;
	pthread_t th[4];
	struct thread_arg args[4];
	double t0, t1;

	/* ~2 MB of varied text built from the corpus, leaving out the deliberately huge words
	 * (they are 90% of the corpus bytes and would measure only the uncached BPE path). */
	while (corpus.len < (2u << 20)) {
		json_array_foreach(cases, i, c)
		{
			size_t len = json_string_length(json_object_get(c, "text"));

			if (len > 256)
				continue;

			if (corpus.len + len + 1 > cap) {
				cap = (corpus.len + len + 1) * 2;
				corpus.text = realloc(corpus.text, cap);
				REQUIRE(corpus.text);
			}
			memcpy(corpus.text + corpus.len, json_string_value(json_object_get(c, "text")), len);
			corpus.len += len;
			corpus.text[corpus.len++] = '\n';
		}
	}
	t0 = now_s();
	REQUIRE(engine_tokenizer_encode(tok, corpus.text, corpus.len, true, &ids, &n) == 0);
	t1 = now_s();
	fprintf(stderr, "encode: %.2f MB in %.3f s = %.1f MB/s, %zu tokens\n", corpus.len / 1e6, t1 - t0,
		corpus.len / 1e6 / (t1 - t0), n);
	/* The second pass is served from the word cache and must agree with the first. */
	REQUIRE(engine_tokenizer_encode(tok, corpus.text, corpus.len, true, &ids2, &n2) == 0);
	CHECK(n == n2 && memcmp(ids, ids2, n * sizeof(*ids)) == 0);
	free(ids2);
	free(ids);

	/* Four threads share the tokenizer (and its word cache) on a 256 kB part of the text. */
	corpus.len = 256u << 10;
	while (corpus.text[corpus.len - 1] != '\n')
		corpus.len--;
	REQUIRE(engine_tokenizer_encode(tok, corpus.text, corpus.len, true, &ids, &n) == 0);
	for (int k = 0; k < 4; k++) {
		args[k] = (struct thread_arg){.tok = tok, .corpus = &corpus, .want = ids, .want_n = n};
		REQUIRE(pthread_create(&th[k], NULL, encode_thread, &args[k]) == 0);
	}
	for (int k = 0; k < 4; k++) {
		pthread_join(th[k], NULL);
		CHECK_INT_EQ(args[k].failures, 0);
	}
	free(ids);
	free(corpus.text);
}

/* ---- load errors ---------------------------------------------------------------------------- */

static void expect_load_error(const char *name, const char *content, int want_errno, const char *want_msg)
{
	char path[256], err[512];
	struct engine_tokenizer *tok;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.json", tmpdir, name);
	f = fopen(path, "w");
	REQUIRE(f);
	fputs(content, f);
	fclose(f);
	errno = 0;
	tok = engine_tokenizer_load(path, err, sizeof(err));
	CHECK(tok == NULL);
	CHECK_INT_EQ(errno, want_errno);
	if (!strstr(err, want_msg) || !strstr(err, path)) {
		fprintf(stderr, "%s: error \"%s\" lacks \"%s\"\n", name, err, want_msg);
		test_failures++;
	}
	engine_tokenizer_destroy(tok);
	unlink(path);
}

#define MINI_HEAD "{\"added_tokens\":[],\"normalizer\":null,"
#define MINI_PRE "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
#define MINI_DEC "\"decoder\":{\"type\":\"ByteLevel\"},"
#define MINI_MODEL "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}"

static void test_load_errors(void)
{
	char err[512];
	struct engine_tokenizer *tok;
	char path[256];
	FILE *f;
	int32_t *ids;
	size_t n;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/holod-tok-XXXXXX");
	REQUIRE(mkdtemp(tmpdir));

	/* The minimal valid file loads and merges "ab". */
	snprintf(path, sizeof(path), "%s/ok.json", tmpdir);
	f = fopen(path, "w");
	REQUIRE(f);
	fputs(MINI_HEAD MINI_PRE MINI_DEC MINI_MODEL, f);
	fclose(f);
	tok = engine_tokenizer_load(path, err, sizeof(err));
	if (!tok)
		fprintf(stderr, "minimal file: %s\n", err);
	CHECK(tok != NULL);
	if (tok) {
		CHECK_INT_EQ(engine_tokenizer_encode(tok, "abab", 4, true, &ids, &n), 0);
		CHECK(n == 2 && ids[0] == 2 && ids[1] == 2);
		free(ids);
		/* A character outside the vocabulary with no unk token is dropped, as HF does. */
		CHECK_INT_EQ(engine_tokenizer_encode(tok, "abc", 3, true, &ids, &n), 0);
		CHECK(n == 1 && ids[0] == 2);
		free(ids);
		engine_tokenizer_destroy(tok);
	}
	unlink(path);

	/* An added token the vocabulary already has keeps the vocabulary's id, as in HF; the id the
	 * file gives it (7) stays unused and does not count in the vocabulary size. */
	snprintf(path, sizeof(path), "%s/addedinvocab.json", tmpdir);
	f = fopen(path, "w");
	REQUIRE(f);
	fputs("{\"added_tokens\":[{\"id\":7,\"content\":\"<x>\",\"special\":true}],\"normalizer\":"
	      "null," MINI_PRE MINI_DEC "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"<"
	      "x>\":3},\"merges\":[\"a b\"]}}",
	      f);
	fclose(f);
	tok = engine_tokenizer_load(path, err, sizeof(err));
	CHECK(tok != NULL);
	if (tok) {
		CHECK_INT_EQ(engine_tokenizer_token_id(tok, "<x>"), 3);
		CHECK_INT_EQ(engine_tokenizer_vocab_size(tok), 4);
		CHECK(engine_tokenizer_is_special(tok, 3));
		CHECK_INT_EQ(engine_tokenizer_encode(tok, "ab<x>b", 6, true, &ids, &n), 0);
		CHECK(n == 3 && ids[0] == 2 && ids[1] == 3 && ids[2] == 1);
		free(ids);
		engine_tokenizer_destroy(tok);
	}
	unlink(path);

	/* Ids of added tokens the model lacks are assigned as HF assigns them, after the model's
	 * (the file's 0 would collide with "a"); a repeated content is skipped. */
	snprintf(path, sizeof(path), "%s/addedids.json", tmpdir);
	f = fopen(path, "w");
	REQUIRE(f);
	fputs("{\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"special\":true},"
	      "{\"id\":0,\"content\":\"<s>\",\"special\":false},{\"id\":9,\"content\":\"<t>\"}]," MINI_PRE
		      MINI_DEC MINI_MODEL,
	      f);
	fclose(f);
	tok = engine_tokenizer_load(path, err, sizeof(err));
	CHECK(tok != NULL);
	if (tok) {
		CHECK_INT_EQ(engine_tokenizer_token_id(tok, "<s>"), 3);
		CHECK_INT_EQ(engine_tokenizer_token_id(tok, "<t>"), 4);
		CHECK_INT_EQ(engine_tokenizer_vocab_size(tok), 5);
		CHECK(engine_tokenizer_is_special(tok, 3));
		CHECK(!engine_tokenizer_is_special(tok, 4));
		CHECK_STR_EQ(engine_tokenizer_token_str(tok, 0), "a");
		engine_tokenizer_destroy(tok);
	}
	unlink(path);

	errno = 0;
	snprintf(path, sizeof(path), "%s/missing.json", tmpdir);
	CHECK(engine_tokenizer_load(path, err, sizeof(err)) == NULL);
	CHECK_INT_EQ(errno, ENOENT);
	CHECK(strstr(err, "cannot open") != NULL);

	expect_load_error("malformed", "{\"model\": {\"type\": \"BPE\",, }", EINVAL,
			  "invalid JSON at line 1, column");
	expect_load_error("truncated", MINI_HEAD MINI_PRE, EINVAL, "invalid JSON at line");
	expect_load_error("array", "[1, 2]", EINVAL, "the top level is not a JSON object");
	expect_load_error("nomodel", "{\"added_tokens\":[]}", EINVAL, "\"model\" is missing");
	expect_load_error("wordpiece",
			  MINI_HEAD MINI_PRE MINI_DEC
			  "\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}",
			  EINVAL, "model.type \"WordPiece\" is not supported");
	expect_load_error("badmerge",
			  MINI_HEAD MINI_PRE MINI_DEC "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":"
						      "1,\"ab\":2},\"merges\":[\"a b\",[\"a\",\"zz\"]]}}",
			  EINVAL, "model.merges[1]: token \"zz\" is not in the vocabulary");
	expect_load_error("badmerged",
			  MINI_HEAD MINI_PRE MINI_DEC
			  "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
			  EINVAL, "model.merges[0]: merged token \"ab\" is not in the vocabulary");
	expect_load_error(
		"mergeform",
		MINI_HEAD MINI_PRE MINI_DEC
		"\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b c\"]}}",
		EINVAL, "model.merges[0]: \"a b c\" is not two tokens separated by one space");
	expect_load_error("nfc",
			  "{\"added_tokens\":[],\"normalizer\":{\"type\":\"NFC\"}," MINI_PRE MINI_DEC
				  MINI_MODEL,
			  EINVAL, "normalizer \"NFC\" is not supported");
	expect_load_error(
		"seqnfkc",
		"{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"}]}," MINI_PRE
			MINI_DEC MINI_MODEL,
		EINVAL, "normalizer \"NFKC\" is not supported");
	expect_load_error("metaspace",
			  MINI_HEAD "\"pre_tokenizer\":{\"type\":\"Metaspace\"}," MINI_DEC MINI_MODEL, EINVAL,
			  "pre_tokenizer type \"Metaspace\" is not supported");
	expect_load_error("badregex",
			  MINI_HEAD "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(ab\"},"
				    "\"behavior\":\"Isolated\",\"invert\":false}," MINI_DEC MINI_MODEL,
			  EINVAL, "pre_tokenizer: pattern \"(ab\": at offset 3:");
	expect_load_error("badbehavior",
			  MINI_HEAD "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" "
				    "\"},\"behavior\":\"Sideways\"}," MINI_DEC MINI_MODEL,
			  EINVAL, "behavior \"Sideways\" is not supported");
	expect_load_error("wpdecoder", MINI_HEAD MINI_PRE "\"decoder\":{\"type\":\"WordPiece\"}," MINI_MODEL,
			  EINVAL, "decoder \"WordPiece\" is not supported");
	expect_load_error("hugeid",
			  MINI_HEAD MINI_PRE MINI_DEC
			  "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999},\"merges\":[]}}",
			  E2BIG, "model.vocab \"a\": id 99999999 is outside");
	expect_load_error("negid",
			  MINI_HEAD MINI_PRE MINI_DEC
			  "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}",
			  EINVAL, "id -1 is outside");
	expect_load_error("dupid",
			  MINI_HEAD MINI_PRE MINI_DEC
			  "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}",
			  EINVAL, "id 0 is also");
	expect_load_error(
		"unk",
		MINI_HEAD MINI_PRE MINI_DEC
		"\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"unk_token\":\"<unk>\"}}",
		EINVAL, "model.unk_token \"<unk>\" is not in the vocabulary");
	expect_load_error("dropout",
			  MINI_HEAD MINI_PRE MINI_DEC
			  "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"dropout\":0.1}}",
			  EINVAL, "model.dropout is set");
	rmdir(tmpdir);
	engine_tokenizer_destroy(NULL);
}

int main(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	char path[4200];
	json_error_t jerr;
	json_t *expected, *fixtures;
	const char *kind;
	json_t *fx;

	snprintf(fixture_dir, sizeof(fixture_dir), "%s/tests/fixtures/tokenizer", root ? root : ".");
	snprintf(path, sizeof(path), "%s/expected.json", fixture_dir);
	expected = json_load_file(path, JSON_ALLOW_NUL, &jerr);
	if (!expected)
		fprintf(stderr, "%s: %s\n", path, jerr.text);
	REQUIRE(expected);
	fprintf(stderr, "fixtures made with tokenizers %s\n",
		json_string_value(json_object_get(expected, "tokenizers_version")));
	fixtures = json_object_get(expected, "fixtures");
	REQUIRE(json_object_size(fixtures) == 2);
	json_object_foreach(fixtures, kind, fx) test_fixture(fx, kind);

	{
		char err[512];
		struct engine_tokenizer *tok;

		snprintf(path, sizeof(path), "%s/tekken/tokenizer.json", fixture_dir);
		tok = engine_tokenizer_load(path, err, sizeof(err));
		REQUIRE(tok);
		test_streaming_partial(tok);
		test_streaming_flush(tok);
		test_encode_errors(tok);
		test_long_inputs(tok);
		test_random_roundtrip(tok);
		test_random_decode(tok);
		test_threads_and_speed(tok, json_object_get(json_object_get(fixtures, "tekken"), "cases"));
		engine_tokenizer_destroy(tok);
	}
	test_load_errors();
	snprintf(path, sizeof(path), "%s/tekken/tokenizer.json", fixture_dir);
	test_variants(json_object_get(expected, "variants"), path);
	snprintf(path, sizeof(path), "%s/tekken/tokenizer.json", fixture_dir);
	test_corrupt_files(path);
	json_decref(expected);
	return test_exit();
}
