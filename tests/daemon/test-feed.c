/* The progress feed (daemon/feed.c) and the thought's streaming decoder
 * (daemon/thought-stream.c), issue 32: an event nobody follows is never built or queued; a
 * follower gets its task's events in order, and only those; a slow follower's queue is
 * bounded and says how many it lost; the thought fed in pieces of every size (down to one
 * byte, cutting characters and escapes in two) decodes to what jansson reads from the whole
 * step, which is what the journal keeps. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "feed.h"
#include "test.h"
#include "thought-stream.h"

TEST_DEFINE_GLOBALS;

static int wakes;
static void wake(void *arg)
{
	(void)arg;
	wakes++;
}

static void test_feed(void)
{
	struct feed *f = feed_create(wake, NULL);
	char *buf = NULL;
	size_t len = 0;

	/* nobody follows: nothing is built, nobody is woken */
	CHECK(!feed_wanted(f, 7));
	feed_progress(f, 7, 0, 0, "capture", NULL);
	CHECK_INT_EQ(wakes, 0);

	struct feed_sub *a = feed_subscribe(f, 7), *b = feed_subscribe(f, 8);
	CHECK(feed_wanted(f, 7));
	CHECK(feed_wanted(f, 8));
	CHECK(!feed_wanted(f, 9));
	feed_progress(f, 7, 2, 0, "prefill", "{s:i, s:i}", "done", 10, "total", 40);
	feed_progress(f, 9, 0, 0, "capture", NULL); /* no follower of task 9 */
	feed_progress(f, 7, 2, 0, "decode", "{s:i, s:s}", "tokens", 1, "thought", "I w");
	CHECK_INT_EQ(wakes, 2);
	CHECK_INT_EQ((int)feed_take(b, &buf, &len), 0);
	CHECK(feed_take(a, &buf, &len) > 0);
	CHECK_STR_EQ(buf, "{\"event\":\"progress\",\"task_id\":7,\"step\":2,\"phase\":\"prefill\","
			  "\"done\":10,\"total\":40}\n"
			  "{\"event\":\"progress\",\"task_id\":7,\"step\":2,\"phase\":\"decode\","
			  "\"tokens\":1,\"thought\":\"I w\"}\n");
	free(buf);
	buf = NULL;
	len = 0;
	CHECK_INT_EQ((int)feed_take(a, &buf, &len), 0);
	feed_status(f, 7, "paused");
	feed_take(a, &buf, &len);
	CHECK_STR_EQ(buf, "{\"event\":\"status\",\"task_id\":7,\"status\":\"paused\"}\n");
	free(buf);
	buf = NULL;
	len = 0;

	/* a follower that never reads: bounded, and told how many events it lost */
	char text[1000];
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	int n = 2 * FEED_MAX_QUEUED_BYTES / (int)sizeof(text);
	for (int i = 0; i < n; i++)
		feed_progress(f, 8, 0, 0, "decode", "{s:s}", "thought", text);
	feed_take(b, &buf, &len);
	CHECK(len <= FEED_MAX_QUEUED_BYTES + 200);
	const char *last = buf + len - 1;
	while (last > buf && last[-1] != '\n')
		last--;
	json_t *o = json_loads(last, 0, NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(o, "phase")), "dropped");
	json_int_t lost = json_integer_value(json_object_get(o, "events"));
	CHECK(lost > 0);
	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	CHECK_INT_EQ((long long)lines - 1 + lost, n);
	json_decref(o);
	free(buf);

	feed_unsubscribe(a);
	CHECK(!feed_wanted(f, 7));
	feed_unsubscribe(b);
	int w = wakes;
	feed_progress(f, 8, 0, 0, "capture", NULL);
	CHECK_INT_EQ(wakes, w);
	feed_destroy(f);
}

/* Feeds `step` in pieces of `piece` bytes; the decoded thought must be `want`. */
static void check_stream(const char *step, size_t piece, const char *want)
{
	struct thought_stream ts;
	size_t n = strlen(step), got_len = 0;
	char *got = malloc(THOUGHT_STREAM_OUT(n) + 1);

	thought_stream_init(&ts);
	for (size_t i = 0; i < n; i += piece) {
		size_t k = n - i < piece ? n - i : piece;
		char out[THOUGHT_STREAM_OUT(64)];
		REQUIRE(k <= 64);
		size_t w = thought_stream_feed(&ts, step + i, k, out);
		/* every piece is whole characters */
		json_t *s = json_stringn(out, w);
		CHECK(w == 0 || s != NULL);
		json_decref(s);
		memcpy(got + got_len, out, w);
		got_len += w;
	}
	got[got_len] = '\0';
	if (strcmp(got, want) != 0)
		fprintf(stderr, "piece %zu: got '%s', want '%s'\n", piece, got, want);
	CHECK(strcmp(got, want) == 0);
	CHECK(ts.done);
	free(got);
}

static void test_thought_stream(void)
{
	static const char *const steps[] = {
		"{\"note\":null,\"thought\":\"Click the red block.\",\"tool_call\":{\"tool_name\":"
		"\"click\",\"element\":\"thought\",\"x\":5,\"y\":9}}",
		/* a note holding the word and braces; escapes; non-ASCII; a surrogate pair */
		"{\"note\": \"\\\"thought\\\": {[x\", \"thought\" : \"a\\\"b\\\\c\\n\\u00e9 "
		"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\ud83d\\ude00 \\/\", \"tool_call\": "
		"{\"tool_name\": \"answer\", \"content\": \"\\\"thought\\\"\"}}",
		/* tool_call first (holo-nano's order may differ), a nested "thought" member */
		"{\"tool_call\":{\"tool_name\":\"write\",\"thought\":\"no\",\"content\":\"x\"},"
		"\"thought\":\"yes\",\"note\":\"n\"}",
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		json_error_t err;
		json_t *o = json_loads(steps[i], 0, &err);
		REQUIRE(o);
		const char *want = json_string_value(json_object_get(o, "thought"));
		REQUIRE(want);
		for (size_t piece = 1; piece <= 64; piece++)
			check_stream(steps[i], piece, want);
		json_decref(o);
	}
	/* a lone surrogate and a broken character become U+FFFD */
	check_stream("{\"thought\":\"a\\ud800b\xe2\x82z\"}", 1,
		     "a\xef\xbf\xbd"
		     "b\xef\xbf\xbdz");
}

int main(void)
{
	test_feed();
	test_thought_stream();
	return test_exit();
}
