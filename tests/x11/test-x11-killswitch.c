/* x11 suite: the kill switch on a live server.
 *
 * Xvfb has no keyboard besides XTest, so the case "a person presses Escape twice" cannot be
 * produced here; the device filter that tells the two apart is tested on recorded event data in
 * test-x11-killswitch-filter.c. Live, this test proves (1) our own injected Escapes reach the
 * listener and do NOT trigger it, (2) with the XTest filter lifted by a test hook, the same
 * Escapes go all the way through XI2, the thread and the double-Escape timing to the callback,
 * (3) the end of the X server is survived by both connections, (4) the takeover listener
 * reports input of any kind but XTest's, and with the filter lifted reports ours. */
#include "common.h"
#include "test.h"
#include "x11-internal.h"
#include "x11-test-util.h"

#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

static atomic_int fired, inputs;

static void on_input(void *userdata)
{
	CHECK(userdata == (void *)&inputs);
	atomic_fetch_add(&inputs, 1);
}

static void on_kill(void *userdata)
{
	CHECK(userdata == (void *)&fired);
	atomic_fetch_add(&fired, 1);
}

/* Polls `get(k)` until it reaches `want` (generous deadline for a loaded machine). */
static unsigned wait_count(struct x11_killswitch *k, unsigned (*get)(struct x11_killswitch *), unsigned want)
{
	for (int i = 0; i < XT_WAIT_MS / 10 && get(k) < want; i++)
		usleep(10000);
	return get(k);
}

int main(int argc, char **argv)
{
	struct xt_xvfb x;

	REQUIRE(xt_xvfb_start(&x, "320x240x24", NULL) == 0);
	struct x11_display *d = x11_display_open(NULL);
	REQUIRE(d);
	x11_input_set_key_delay_us(d, 4000);

	errno = 0;
	CHECK(x11_killswitch_create(NULL, 0, on_kill, &fired) == NULL);
	CHECK_INT_EQ(errno, EINVAL);
	errno = 0;
	CHECK(x11_killswitch_create(":4243", 500, on_kill, &fired) == NULL);
	CHECK_INT_EQ(errno, X11_ERR_NO_DISPLAY);

	/* A wide window: a loaded machine must not make the two Escapes too slow. */
	struct x11_killswitch *k = x11_killswitch_create(NULL, 2000, on_kill, &fired);
	REQUIRE(k);

	/* (1) Our own double Escape: seen by the listener, ignored. */
	CHECK_INT_EQ(x11_key_combo(d, "Escape"), 0);
	CHECK_INT_EQ(x11_key_combo(d, "esc"), 0);
	CHECK(wait_count(k, x11_killswitch_seen, 2) >= 2);
	/* Also a later key, so that the listener has certainly processed both Escapes. */
	CHECK_INT_EQ(x11_key_combo(d, "a"), 0);
	CHECK(wait_count(k, x11_killswitch_seen, 3) >= 3);
	CHECK_INT_EQ(x11_killswitch_triggered(k), 0);
	CHECK_INT_EQ(atomic_load(&fired), 0);

	/* (2) The same path with XTest trusted. Sent in one go (no wait in between, so a slow
	 * listener cannot stretch the pair beyond the window): Escape, a, Escape, a, Escape, Escape.
	 * Another key resets the pair, so only the last two Escapes trigger (without the reset the
	 * first Escape-a-Escape would trigger too: 2). */
	x11_killswitch_trust_xtest_for_test(k, true);
	unsigned seen = x11_killswitch_seen(k);
	static const char *const seq[] = {"Escape", "a", "Escape", "a", "Escape", "Escape"};
	for (size_t i = 0; i < ARRAY_SIZE(seq); i++)
		CHECK_INT_EQ(x11_key_combo(d, seq[i]), 0);
	CHECK(wait_count(k, x11_killswitch_seen, seen + 6) >= seen + 6);
	CHECK_INT_EQ(wait_count(k, x11_killswitch_triggered, 1), 1);
	CHECK_INT_EQ(atomic_load(&fired), 1);

	/* (4) Takeover (issue 32): the input listener reports any key, button or pointer motion of
	 * a person, and never holod's own (XTest) input; trusted for the test, the same events go
	 * through to its callback. */
	errno = 0;
	CHECK(x11_killswitch_create_input(NULL, 0, NULL, NULL, &inputs) == NULL);
	CHECK_INT_EQ(errno, EINVAL);
	struct x11_killswitch *in = x11_killswitch_create_input(NULL, 0, NULL, on_input, &inputs);
	REQUIRE(in);
	CHECK_INT_EQ(x11_click(d, 10, 10, X11_BUTTON_LEFT, 1), 0);
	CHECK_INT_EQ(x11_key_combo(d, "a"), 0);
	CHECK(wait_count(in, x11_killswitch_seen, 2) >= 2); /* the click's, the key's */
	CHECK_INT_EQ(x11_killswitch_inputs(in), 0);
	CHECK_INT_EQ(atomic_load(&inputs), 0);
	x11_killswitch_trust_xtest_for_test(in, true);
	CHECK_INT_EQ(x11_click(d, 20, 20, X11_BUTTON_LEFT, 1), 0);
	CHECK(wait_count(in, x11_killswitch_inputs, 1) >= 1);
	CHECK(atomic_load(&inputs) >= 1);
	unsigned before = x11_killswitch_inputs(in);
	CHECK_INT_EQ(x11_key_combo(d, "b"), 0);
	CHECK(wait_count(in, x11_killswitch_inputs, before + 1) >= before + 1);
	/* no double-Escape callback on a listener without one */
	CHECK_INT_EQ(x11_killswitch_triggered(in), 0);
	x11_killswitch_destroy(in);

	x11_killswitch_destroy(NULL);

	/* The X server goes away (the session ends): calls fail with -ECONNRESET instead of Xlib
	 * exiting the process, and the kill switch's thread ends so destroy returns. */
	int w0, h0, w1, h1;
	x11_display_size(d, &w0, &h0);
	CHECK_INT_EQ(x11_display_refresh(d), 0);
	x11_display_size(d, &w1, &h1);
	CHECK(w1 == w0 && h1 == h0 && w1 > 0 && h1 > 0);
	xt_xvfb_stop(&x);
	/* holod asks this first before a task: it must notice the server is gone. */
	CHECK_INT_EQ(x11_display_refresh(d), -ECONNRESET);
	struct x11_frame *f = NULL;
	CHECK_INT_EQ(x11_capture(d, NULL, &f), -ECONNRESET);
	CHECK_INT_EQ(x11_capture(d, NULL, &f), -ECONNRESET);
	CHECK_INT_EQ(x11_click(d, 1, 1, X11_BUTTON_LEFT, 1), -ECONNRESET);
	CHECK_INT_EQ(x11_key_combo(d, "a"), -ECONNRESET);
	CHECK_INT_EQ(x11_type(d, "abc"), -ECONNRESET);
	CHECK(strstr(x11_strerror(-ECONNRESET), "lost") != NULL);
	x11_killswitch_destroy(k);
	x11_display_close(d);
	return test_exit();
}
