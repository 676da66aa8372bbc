/* Unit: the kill switch's decision on recorded XInput2 raw key events (no display).
 *
 * Xvfb has no keyboard besides the XTest ones, so whether events from a real keyboard trigger the
 * switch and events from XTest do not is checked here on event data: the device table is that of
 * `xinput list` on a laptop, the events are XI_RawKeyPress (sourceid, detail = keycode, flags,
 * time) as the listener receives them; keycode 9 is Escape with the evdev keymap. The replay
 * mirrors the listener: look the source up, drop ignored devices, feed the rest. */
#include "common.h"
#include "test.h"
#include "x11-internal.h"

TEST_DEFINE_GLOBALS;

static const struct {
	int id;
	bool master;
	const char *name;
} devices[] = {
	{2, true, "Virtual core pointer"},
	{3, true, "Virtual core keyboard"},
	{4, false, "Virtual core XTEST pointer"},
	{5, false, "Virtual core XTEST keyboard"},
	{6, false, "Power Button"},
	{11, false, "AT Translated Set 2 keyboard"},
	{14, false, "Logitech USB Keyboard"},
	{17, false, "agent XTEST keyboard"}, /* XTest slave of a second master (XIAddMaster) */
};

struct raw {
	int deviceid, sourceid;
	unsigned keycode;
	bool repeat;
	uint64_t time;
};

#define ESC 9
#define KEY_A 38

static int replay(const struct raw *ev, size_t n, unsigned window_ms)
{
	struct x11_ks_state s = {.window_ms = window_ms};
	int triggers = 0;

	for (size_t i = 0; i < n; i++) {
		const char *name = NULL;
		bool master = false;
		for (size_t d = 0; d < ARRAY_SIZE(devices); d++) {
			if (devices[d].id == ev[i].sourceid)
				name = devices[d].name;
			if (devices[d].id == ev[i].deviceid)
				master = devices[d].master;
		}
		if (x11_ks_device_ignored(name, master))
			continue;
		struct x11_ks_event e = {name, master, ev[i].keycode == ESC, ev[i].repeat, ev[i].time};
		triggers += x11_ks_feed(&s, &e);
	}
	return triggers;
}

#define REPLAY(window, ...)                                                                                  \
	({                                                                                                   \
		static const struct raw _ev[] = {__VA_ARGS__};                                               \
		replay(_ev, ARRAY_SIZE(_ev), (window));                                                      \
	})

int main(void)
{
	/* Which devices count. */
	CHECK(x11_ks_device_ignored("Virtual core XTEST keyboard", false));
	CHECK(x11_ks_device_ignored("agent XTEST keyboard", false));
	CHECK(x11_ks_device_ignored("Virtual core keyboard", true));
	CHECK(x11_ks_device_ignored(NULL, false));
	CHECK(!x11_ks_device_ignored("AT Translated Set 2 keyboard", false));

	/* Our own injected double Escape (XTest slave, and its master's duplicate): nothing. */
	CHECK_INT_EQ(REPLAY(500, {5, 5, ESC, false, 1000}, {3, 5, ESC, false, 1000}, {5, 5, ESC, false, 1080},
			    {3, 5, ESC, false, 1080}),
		     0);
	/* A person's double Escape 200 ms apart: one trigger. */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {3, 11, ESC, false, 1000},
			    {11, 11, ESC, false, 1200}, {3, 11, ESC, false, 1200}),
		     1);
	/* Two physical keyboards count together (one person, two keyboards). */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {14, 14, ESC, false, 1300}), 1);
	/* Physical then injected Escape: the injected one does not complete it... */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {5, 5, ESC, false, 1100}), 0);
	/* ...and injected keys between two physical Escapes do not break it either. */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {5, 5, KEY_A, false, 1100},
			    {17, 17, ESC, false, 1150}, {11, 11, ESC, false, 1300}),
		     1);
	/* Too slow: 700 ms apart with a 500 ms window; the late one starts a new pair. */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {11, 11, ESC, false, 1700}), 0);
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {11, 11, ESC, false, 1700},
			    {11, 11, ESC, false, 1900}),
		     1);
	/* Another physical key in between resets. */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {11, 11, KEY_A, false, 1100},
			    {11, 11, ESC, false, 1200}),
		     0);
	/* Auto-repeat of a held Escape is not a second press. */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {11, 11, ESC, true, 1100}), 0);
	/* The master's copy of one physical press must not pair with the press itself. */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {3, 11, ESC, false, 1000}), 0);
	/* Three quick presses trigger once (state resets after a trigger). */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 1000}, {11, 11, ESC, false, 1100},
			    {11, 11, ESC, false, 1200}),
		     1);
	/* Unknown source device (unplugged between event and query): ignored. */
	CHECK_INT_EQ(REPLAY(500, {99, 99, ESC, false, 1000}, {99, 99, ESC, false, 1100}), 0);
	/* Server time wrapped or went backwards: not a pair. */
	CHECK_INT_EQ(REPLAY(500, {11, 11, ESC, false, 5000}, {11, 11, ESC, false, 1000}), 0);
	return test_exit();
}
