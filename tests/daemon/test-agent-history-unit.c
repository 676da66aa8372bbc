/* unit suite: the agent's history logic without X or a model (daemon/agent-history.h):
 *   - fitting: the earliest step whose history fits, found in O(log steps) renderings, none
 *     when even the last step alone is too big, a rendering error passed on; the limits a
 *     window and a rebuilt persistent session try;
 *   - text hygiene: the journal's copies of the model's output and of a step's prompt are valid
 *     UTF-8 (invalid bytes and NUL as U+FFFD), image runs written once, cut at the cap. */
#include "agent-history.h"
#include "common.h"
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

TEST_DEFINE_GLOBALS;

/* A history of steps of given sizes: the size from `first` on is the sum of sizes[first..]. */
struct fake_history {
	const long long *sizes;
	size_t n;
	int calls;
	size_t fail_at; /* a rendering error for this first step; n: none */
};

static int fake_size(void *userdata, size_t first, long long *ret_size)
{
	struct fake_history *h = userdata;
	long long sum = 0;

	h->calls++;
	if (first == h->fail_at)
		return -ENOMEM;
	for (size_t i = first; i < h->n; i++)
		sum += h->sizes[i];
	*ret_size = sum;
	return 0;
}

static void test_fit(void)
{
	static const long long sizes[] = {500, 300, 300, 200, 100, 100, 50, 50};
	struct fake_history h = {sizes, ARRAY_SIZE(sizes), 0, ARRAY_SIZE(sizes)};
	size_t first = 99;
	const size_t index = ARRAY_SIZE(sizes) - 1;

	/* Everything fits: from the start. */
	CHECK_INT_EQ(agent_history_fit(index, 10000, fake_size, &h, &first), 0);
	CHECK_INT_EQ(first, 0);
	/* 600 fits from step 3 on (200+100+100+50+50 = 500), not from step 2 (800). */
	h.calls = 0;
	CHECK_INT_EQ(agent_history_fit(index, 600, fake_size, &h, &first), 0);
	CHECK_INT_EQ(first, 3);
	CHECK(h.calls <= 4); /* log2(8) + 1 renderings, not one per candidate */
	/* Exactly the limit fits. */
	CHECK_INT_EQ(agent_history_fit(index, 500, fake_size, &h, &first), 0);
	CHECK_INT_EQ(first, 3);
	/* Only the last step. */
	CHECK_INT_EQ(agent_history_fit(index, 50, fake_size, &h, &first), 0);
	CHECK_INT_EQ(first, index);
	/* Not even the last step: none (index + 1). */
	CHECK_INT_EQ(agent_history_fit(index, 49, fake_size, &h, &first), 0);
	CHECK_INT_EQ(first, index + 1);
	/* The first step of a task (index 0): it fits or nothing does. */
	struct fake_history one = {sizes, 1, 0, 1};
	CHECK_INT_EQ(agent_history_fit(0, 500, fake_size, &one, &first), 0);
	CHECK_INT_EQ(first, 0);
	CHECK_INT_EQ(agent_history_fit(0, 499, fake_size, &one, &first), 0);
	CHECK_INT_EQ(first, 1);
	/* A rendering error is returned. */
	h.fail_at = 3;
	CHECK_INT_EQ(agent_history_fit(index, 600, fake_size, &h, &first), -ENOMEM);

	/* The limits: budget = context - step - close; a rebuild tries half the room first. */
	long long limits[AGENT_HISTORY_MAX_LIMITS];
	CHECK_INT_EQ(agent_history_limits(false, 8192, 512, 8, 1000, limits), 1);
	CHECK_INT_EQ(limits[0], 8192 - 512 - 8);
	CHECK_INT_EQ(agent_history_limits(true, 8192, 512, 8, 1000, limits), 2);
	CHECK_INT_EQ(limits[0], 1000 + (8192 - 512 - 8 - 1000) / 2);
	CHECK_INT_EQ(limits[1], 8192 - 512 - 8);
}

static void test_text(void)
{
	/* Valid text is kept byte for byte; invalid bytes, truncation and NUL become U+FFFD. */
	char *s = agent_text_valid_utf8("a\xc3\xa9z", 4);
	CHECK_STR_EQ(s, "a\xc3\xa9z");
	free(s);
	s = agent_text_valid_utf8("a\xff"
				  "b\xe2\x82",
				  5);
	CHECK_STR_EQ(s, "a" UTF8_REPLACEMENT "b" UTF8_REPLACEMENT UTF8_REPLACEMENT);
	CHECK(utf8_valid(s, strlen(s)));
	free(s);
	s = agent_text_valid_utf8("x\0y", 3);
	CHECK_STR_EQ(s, "x" UTF8_REPLACEMENT "y");
	free(s);
	s = agent_text_valid_utf8("\xed\xa0\x80", 3); /* a surrogate: three bytes, three U+FFFD */
	CHECK_STR_EQ(s, UTF8_REPLACEMENT UTF8_REPLACEMENT UTF8_REPLACEMENT);
	free(s);
	s = agent_text_valid_utf8(NULL, 0);
	CHECK_STR_EQ(s, "");
	free(s);

	/* The prompt's text: image runs once with their count, both pieces, cut at the cap. */
	char turn[] = "<img><image><image><image></img>Click.";
	char close[] = "</s>";
	struct policy_piece p = {.text = turn, .text_len = strlen(turn)};
	struct policy_piece c = {.text = close, .text_len = strlen(close)};
	s = agent_prompt_text(&p, &c, 1024);
	CHECK_STR_EQ(s, "<img><image>x3</img>Click.</s>");
	free(s);
	s = agent_prompt_text(&p, NULL, 1024);
	CHECK_STR_EQ(s, "<img><image>x3</img>Click.");
	free(s);
	s = agent_prompt_text(&p, &c, 8);
	CHECK_STR_EQ(s, "<img><im[...]");
	free(s);
	/* A cut inside a character leaves valid UTF-8. */
	char accented[] = "caf\xc3\xa9!";
	struct policy_piece e = {.text = accented, .text_len = strlen(accented)};
	s = agent_prompt_text(&e, NULL, 4);
	CHECK_STR_EQ(s, "caf" UTF8_REPLACEMENT "[...]");
	free(s);
}

int main(void)
{
	test_fit();
	test_text();
	return test_exit();
}
