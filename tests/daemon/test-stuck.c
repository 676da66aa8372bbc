/* Stuck steps (daemon/stuck.c): the two streaks, the point slack and the `element` label, the
 * warn and stop thresholds (0: off) and the evidence journaled. */
#include <jansson.h>
#include <string.h>

#include "stuck.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

#define A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const char *click(int x, int y, const char *element)
{
	static char buf[4][160];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]),
		 "{\"tool_name\":\"click\",\"element\":\"%s\",\"x\":%d,\"y\":%d,\"button\":\"left\"}",
		 element, x, y);
	return buf[k];
}

/* The screen left unchanged: A -> A each step while the actions differ. */
static void test_unchanged_screen(void)
{
	struct stuck s;
	char w[STUCK_MAX_WARNING];

	stuck_init(&s, 3, 5);
	CHECK_INT_EQ(stuck_step(&s, 0, click(100, 100, "a"), A, A, w, sizeof(w)), STUCK_NONE);
	CHECK_STR_EQ(w, "");
	CHECK_INT_EQ(stuck_step(&s, 1, click(500, 100, "b"), A, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 2, click(900, 100, "c"), A, A, w, sizeof(w)), STUCK_WARN);
	CHECK(strstr(w, "The screen has not changed during the last 3 steps (steps 0 to 2)"));
	CHECK(!strstr(w, "repeated"));
	CHECK(strstr(w, "Do something different."));
	CHECK_INT_EQ(stuck_step(&s, 3, click(100, 500, "d"), A, A, w, sizeof(w)), STUCK_WARN);
	CHECK(strstr(w, "last 4 steps (steps 0 to 3)"));
	CHECK_INT_EQ(stuck_step(&s, 4, click(500, 500, "e"), A, A, w, sizeof(w)), STUCK_STOP);
	json_t *ev = stuck_evidence(&s);
	REQUIRE(ev);
	CHECK_STR_EQ(json_string_value(json_object_get(ev, "reason")), "unchanged_screen");
	CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(ev, "steps"), 0)), 0);
	CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(ev, "steps"), 1)), 4);
	CHECK_INT_EQ(json_integer_value(json_object_get(ev, "count")), 5);
	CHECK_STR_EQ(json_string_value(json_object_get(ev, "screen_sha256")), A);
	CHECK(json_is_null(json_object_get(ev, "action")));
	CHECK_INT_EQ(json_integer_value(json_object_get(ev, "warn")), 3);
	CHECK_INT_EQ(json_integer_value(json_object_get(ev, "stop")), 5);
	json_decref(ev);
	stuck_finish(&s);

	/* a change ends the streak; so does another unchanged screen, or a missing capture */
	stuck_init(&s, 2, 0);
	CHECK_INT_EQ(stuck_step(&s, 0, click(1, 1, ""), A, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 1, click(200, 1, ""), A, B, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 2, click(400, 1, ""), B, B, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 3, click(600, 1, ""), A, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 4, click(800, 1, ""), A, "", w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 5, click(999, 1, ""), A, A, w, sizeof(w)), STUCK_NONE);
	/* stop 0: never stops, however long */
	for (size_t i = 6; i < 40; i++)
		CHECK_INT_EQ(stuck_step(&s, i, click((int)(i * 20), 900, ""), A, A, w, sizeof(w)), STUCK_WARN);
	CHECK(strstr(w, "last 35 steps (steps 5 to 39)"));
	stuck_finish(&s);
}

/* One action on one target, the screen changing: the element label aside, points within the
 * slack of the first. */
static void test_repeated_action(void)
{
	struct stuck s;
	char w[STUCK_MAX_WARNING];

	stuck_init(&s, 3, 4);
	CHECK_INT_EQ(stuck_step(&s, 0, click(500, 500, "OK"), A, B, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 1, click(505, 495, "the OK button"), B, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 2, click(510, 490, "OK"), A, B, w, sizeof(w)), STUCK_WARN);
	CHECK(strstr(w, "You repeated the same action (click at (500,500)) 3 times in a row "
			"(steps 0 to 2)."));
	CHECK(!strstr(w, "screen"));
	/* within the slack of the streak's first point, not of the previous one's */
	CHECK_INT_EQ(stuck_step(&s, 3, click(511, 500, "OK"), B, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 4, click(511, 500, "OK"), A, B, w, sizeof(w)), STUCK_NONE);
	/* another argument: another action */
	CHECK_INT_EQ(stuck_step(&s, 5,
				"{\"tool_name\":\"click\",\"element\":\"OK\",\"x\":511,"
				"\"y\":500,\"button\":\"right\"}",
				B, A, w, sizeof(w)),
		     STUCK_NONE);
	/* actions without a point: the whole call */
	const char *hk = "{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"s\"],\"repeat_count\":1}";
	const char *hk2 = "{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"o\"],\"repeat_count\":1}";
	CHECK_INT_EQ(stuck_step(&s, 6, hk, A, B, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 7, hk, B, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 8, hk, A, B, w, sizeof(w)), STUCK_WARN);
	CHECK(strstr(w, "(hotkey ctrl+s) 3 times"));
	CHECK_INT_EQ(stuck_step(&s, 9, hk, B, A, w, sizeof(w)), STUCK_STOP);
	json_t *ev = stuck_evidence(&s);
	REQUIRE(ev);
	CHECK_STR_EQ(json_string_value(json_object_get(ev, "reason")), "repeated_action");
	CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(ev, "steps"), 0)), 6);
	CHECK_INT_EQ(json_integer_value(json_array_get(json_object_get(ev, "steps"), 1)), 9);
	CHECK(json_is_null(json_object_get(ev, "screen_sha256")));
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(ev, "action"), "tool_name")),
		     "hotkey");
	json_decref(ev);
	stuck_finish(&s);

	stuck_init(&s, 3, 4);
	CHECK_INT_EQ(stuck_step(&s, 0, hk, A, B, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 1, hk2, B, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 2, hk, A, B, w, sizeof(w)), STUCK_NONE);
	stuck_finish(&s);
}

/* Both at once: both sentences, and the evidence names the screen and the action. */
static void test_both(void)
{
	struct stuck s;
	char w[STUCK_MAX_WARNING];

	stuck_init(&s, 2, 3);
	CHECK_INT_EQ(stuck_step(&s, 0, click(250, 250, "x"), A, A, w, sizeof(w)), STUCK_NONE);
	CHECK_INT_EQ(stuck_step(&s, 1, click(250, 250, "x"), A, A, w, sizeof(w)), STUCK_WARN);
	CHECK(strstr(w, "The screen has not changed during the last 2 steps"));
	CHECK(strstr(w, "You repeated the same action (click at (250,250)) 2 times"));
	CHECK(strlen(w) < sizeof(w));
	CHECK_INT_EQ(stuck_step(&s, 2, click(250, 250, "x"), A, A, w, sizeof(w)), STUCK_STOP);
	json_t *ev = stuck_evidence(&s);
	REQUIRE(ev);
	CHECK_STR_EQ(json_string_value(json_object_get(ev, "screen_sha256")), A);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(ev, "action"), "x")), 250);
	json_decref(ev);
	stuck_finish(&s);

	/* 0 and 0: nothing, ever */
	stuck_init(&s, 0, 0);
	for (size_t i = 0; i < 20; i++)
		CHECK_INT_EQ(stuck_step(&s, i, click(250, 250, "x"), A, A, w, sizeof(w)), STUCK_NONE);
	CHECK(!stuck_evidence(&s));
	stuck_finish(&s);
}

/* The frame hash is the SHA-256 of the pixels: equal frames, equal hashes. */
static void test_frame_hash(void)
{
	uint8_t px[2 * 3 * 2] = {0};
	struct x11_frame f = {.width = 2, .height = 2, .stride = 6, .pixels = px};
	char h1[65], h2[65];
	stuck_frame_hash(&f, h1);
	CHECK_STR_EQ(h1, "15ec7bf0b50732b49f8228e07d24365338f9e3ab994b00af08e5a3bffe55fd8b");
	px[7] = 1;
	stuck_frame_hash(&f, h2);
	CHECK(strcmp(h1, h2) != 0);
}

int main(void)
{
	test_unchanged_screen();
	test_repeated_action();
	test_both();
	test_frame_hash();
	return test_exit();
}
