/* x11 suite: pointer and key input through XTest, checked in holo-test-client's event log. */
#include "common.h"
#include "test.h"
#include "x11-test-util.h"
#include "x11.h"

#include <stdlib.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

static const char *log_path;

struct count_arg {
	const char *prefix;
	int n;
};

static bool count_reached(const char *contents, void *arg)
{
	struct count_arg *c = arg;
	return xt_count_lines(contents, c->prefix) >= c->n;
}

/* Waits until at least n lines start with prefix, then returns the exact count. */
static int wait_lines(const char *prefix, int n)
{
	struct count_arg c = {prefix, n};
	xt_wait_until(log_path, count_reached, &c, XT_WAIT_MS);
	char *s = xt_read_file(log_path);
	int got = xt_count_lines(s, prefix);
	free(s);
	return got;
}

static int lines_now(const char *prefix)
{
	char *s = xt_read_file(log_path);
	int got = xt_count_lines(s, prefix);
	free(s);
	return got;
}

/* Sentinel for "nothing was sent": events of one X connection arrive in order, so once the
 * motion to (x,y) injected after the calls that must send nothing is in the log, any event they
 * had sent is there too. Returns the lines with `prefix` at that point. */
static int lines_after_sentinel_motion(struct x11_display *d, int x, int y, const char *prefix)
{
	char sentinel[64];

	snprintf(sentinel, sizeof(sentinel), "motion x=%d y=%d ", x, y);
	CHECK_INT_EQ(lines_now(sentinel), 0);
	CHECK_INT_EQ(x11_move(d, x, y), 0);
	CHECK_INT_EQ(wait_lines(sentinel, 1), 1);
	return lines_now(prefix);
}

struct needle_arg {
	const char *needle;
	int n;
};

static bool needle_reached(const char *contents, void *arg)
{
	struct needle_arg *a = arg;
	int n = 0;

	for (const char *p = strstr(contents, a->needle); p; p = strstr(p + 1, a->needle))
		n++;
	return n >= a->n;
}

/* The same with a key: `name` pressed and released; its release is the last event. */
static int lines_after_sentinel_key(struct x11_display *d, const char *name, const char *prefix)
{
	char needle[64];
	char *s = xt_read_file(log_path);

	snprintf(needle, sizeof(needle), "keysym=%s state=", name);
	CHECK(s && !strstr(s, needle));
	free(s);
	CHECK_INT_EQ(x11_key_combo(d, name), 0);
	struct needle_arg want = {needle, 2}; /* the press line and the release line */
	CHECK(xt_wait_until(log_path, needle_reached, &want, XT_WAIT_MS));
	return lines_now(prefix);
}

/* Server times (ms) of the press lines with this prefix. */
static int press_times(const char *prefix, unsigned long *times, int max)
{
	char *s = xt_read_file(log_path);
	int n = 0;
	for (const char *p = s; p && *p && n < max; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, prefix, strlen(prefix)) == 0) {
			const char *t = strstr(p, "time=");
			times[n++] = t ? strtoul(t + 5, NULL, 10) : 0;
		}
	free(s);
	return n;
}

static void test_clicks(struct x11_display *d)
{
	/* A left click lands on the requested pixel (the red block). */
	CHECK_INT_EQ(x11_click(d, 35, 35, X11_BUTTON_LEFT, 1), 0);
	CHECK_INT_EQ(wait_lines("press button=1 x=35 y=35 root_x=35 root_y=35", 1), 1);
	CHECK_INT_EQ(wait_lines("release button=1 x=35 y=35", 1), 1);
	char *s = xt_read_file(log_path);
	CHECK(strstr(s, "x=35 y=35 root_x=35 root_y=35 state=0x0") != NULL);
	CHECK(strstr(s, "target=red") != NULL);
	free(s);

	CHECK_INT_EQ(x11_click(d, 95, 36, X11_BUTTON_RIGHT, 1), 0);
	CHECK_INT_EQ(wait_lines("press button=3 x=95 y=36 ", 1), 1);
	CHECK_INT_EQ(wait_lines("release button=3 x=95 y=36 ", 1), 1);
	CHECK_INT_EQ(x11_click(d, 155, 37, X11_BUTTON_MIDDLE, 1), 0);
	CHECK_INT_EQ(wait_lines("press button=2 x=155 y=37 ", 1), 1);

	/* Double and triple: that many presses, close enough for a toolkit's double-click time. */
	unsigned long t[4];
	CHECK_INT_EQ(x11_click(d, 60, 95, X11_BUTTON_LEFT, 2), 0);
	CHECK_INT_EQ(wait_lines("release button=1 x=60 y=95 ", 2), 2);
	CHECK_INT_EQ(press_times("press button=1 x=60 y=95 ", t, 4), 2);
	CHECK(t[1] - t[0] < test_time_limit_us(400000) / 1000);
	CHECK_INT_EQ(x11_click(d, 61, 96, X11_BUTTON_LEFT, 3), 0);
	CHECK_INT_EQ(wait_lines("release button=1 x=61 y=96 ", 3), 3);
	CHECK_INT_EQ(press_times("press button=1 x=61 y=96 ", t, 4), 3);
	CHECK(t[2] - t[0] < test_time_limit_us(800000) / 1000);

	/* Bad arguments: errors, no events (no press, release, scroll or motion before the
	 * sentinel). */
	int before = lines_now("press "), before_release = lines_now("release "),
	    before_scroll = lines_now("scroll "), before_motion = lines_now("motion ");
	CHECK_INT_EQ(x11_click(d, 640, 10, X11_BUTTON_LEFT, 1), -ERANGE);
	CHECK_INT_EQ(x11_click(d, 10, -1, X11_BUTTON_LEFT, 1), -ERANGE);
	CHECK_INT_EQ(x11_click(d, 10, 10, X11_BUTTON_LEFT, 0), -EINVAL);
	CHECK_INT_EQ(x11_click(d, 10, 10, X11_BUTTON_LEFT, 4), -EINVAL);
	CHECK_INT_EQ(x11_click(d, 10, 10, (enum x11_button)4, 1), -EINVAL);
	CHECK_INT_EQ(x11_move(d, 0, 480), -ERANGE);
	CHECK_INT_EQ(x11_drag(d, 10, 10, 700, 10), -ERANGE);
	CHECK_INT_EQ(x11_scroll(d, 10, 10, X11_SCROLL_UP, 0), -EINVAL);
	CHECK_INT_EQ(x11_scroll(d, 10, 10, X11_SCROLL_UP, X11_MAX_SCROLL_NOTCHES + 1), -EINVAL);
	CHECK_INT_EQ(x11_scroll(d, 10, 999, X11_SCROLL_UP, 1), -ERANGE);
	CHECK_INT_EQ(lines_after_sentinel_motion(d, 321, 123, "motion "), before_motion + 1);
	CHECK_INT_EQ(lines_now("press "), before);
	CHECK_INT_EQ(lines_now("release "), before_release);
	CHECK_INT_EQ(lines_now("scroll "), before_scroll);
}

static void test_move_drag_scroll(struct x11_display *d)
{
	CHECK_INT_EQ(x11_move(d, 123, 234), 0);
	CHECK_INT_EQ(wait_lines("motion x=123 y=234 ", 1), 1);

	/* Drag: press at A, intermediate motions with button 1 held, release at B. */
	CHECK_INT_EQ(x11_drag(d, 20, 140, 260, 150), 0);
	CHECK_INT_EQ(wait_lines("release button=1 x=260 y=150 ", 1), 1);
	CHECK_INT_EQ(lines_now("press button=1 x=20 y=140 "), 1);
	CHECK(lines_now("motion") > 0);
	char *s = xt_read_file(log_path);
	const char *press = strstr(s, "press button=1 x=20 y=140 ");
	const char *release = strstr(s, "release button=1 x=260 y=150 ");
	int held_motions = 0;
	for (const char *p = press; p && p < release; p = strchr(p + 1, '\n'))
		held_motions += strncmp(p, "\nmotion", 7) == 0 && strstr(p, "state=0x100") &&
				strstr(p, "state=0x100") < strchr(p + 1, '\n');
	CHECK(held_motions >= 5);
	free(s);
	CHECK_INT_EQ(x11_held_count(d), 0);

	/* drag_to: from wherever the pointer is (holo-nano's drag_to_desktop). */
	int px = -1, py = -1, x1 = -1, y1 = -1;
	CHECK_INT_EQ(x11_move(d, 30, 150), 0);
	CHECK_INT_EQ(x11_pointer_position(d, &px, &py), 0);
	CHECK_INT_EQ(px, 30);
	CHECK_INT_EQ(py, 150);
	CHECK_INT_EQ(x11_drag_to(d, 250, 160, &x1, &y1), 0);
	CHECK_INT_EQ(x1, 30);
	CHECK_INT_EQ(y1, 150);
	CHECK_INT_EQ(wait_lines("release button=1 x=250 y=160 ", 1), 1);
	CHECK_INT_EQ(lines_now("press button=1 x=30 y=150 "), 1);
	CHECK_INT_EQ(x11_pointer_position(d, &px, &py), 0);
	CHECK_INT_EQ(px, 250);
	CHECK_INT_EQ(x11_drag_to(d, 5000, 10, NULL, NULL), -ERANGE);
	CHECK_INT_EQ(x11_held_count(d), 0);

	/* Scroll N notches: N presses of button 5 (down) / 4 (up) / 6 / 7 at the pointer. */
	CHECK_INT_EQ(x11_scroll(d, 100, 200, X11_SCROLL_DOWN, 3), 0);
	CHECK_INT_EQ(wait_lines("scroll direction=down x=100 y=200", 3), 3);
	CHECK_INT_EQ(x11_scroll(d, 101, 200, X11_SCROLL_UP, 2), 0);
	CHECK_INT_EQ(wait_lines("scroll direction=up x=101 y=200", 2), 2);
	CHECK_INT_EQ(x11_scroll(d, 102, 200, X11_SCROLL_RIGHT, 1), 0);
	CHECK_INT_EQ(wait_lines("scroll direction=right x=102 y=200", 1), 1);
	CHECK_INT_EQ(x11_scroll(d, 103, 200, X11_SCROLL_LEFT, 4), 0);
	CHECK_INT_EQ(wait_lines("scroll direction=left x=103 y=200", 4), 4);
}

static void test_keys(struct x11_display *d)
{
	/* ctrl+a: the a key with Control held (state 0x4), text ^A. */
	CHECK_INT_EQ(x11_key_combo(d, "ctrl+a"), 0);
	CHECK_INT_EQ(wait_lines("key keycode=38 keysym=a state=0x4 text=01", 1), 1);
	CHECK_INT_EQ(wait_lines("keyrelease keycode=37 keysym=Control_L", 1), 1);

	/* A keysym missing from the keymap, through a temporarily bound keycode. */
	CHECK_INT_EQ(x11_key_combo(d, "ö"), 0);
	CHECK_INT_EQ(wait_lines("key keycode=", 3), 3); /* Control_L, a, odiaeresis */
	char *s = xt_read_file(log_path);
	CHECK(strstr(s, "keysym=odiaeresis state=0x0 text=c3b6") != NULL);
	free(s);

	/* Names as an array (the model's hotkey.keys), "+" as a key of its own. */
	const char *keys[] = {"shift", "Tab"};
	CHECK_INT_EQ(x11_key_names(d, keys, 2), 0);
	CHECK_INT_EQ(wait_lines("key keycode=23 keysym=ISO_Left_Tab state=0x1", 1), 1);

	/* Errors: nothing is sent for a combination with an unknown key, or too many, or none. */
	/* Counted after a first sentinel, so that shift+Tab's releases are in already. */
	int before = lines_after_sentinel_key(d, "F8", "key "), before_release = lines_now("keyrelease ");
	CHECK_INT_EQ(x11_key_combo(d, "ctrl+ctr+t"), -EINVAL);
	CHECK_INT_EQ(x11_key_combo(d, ""), -EINVAL);
	CHECK_INT_EQ(x11_key_combo(d, "a+b+c+d+e+f+g+h+i+j"), -EINVAL);
	CHECK_INT_EQ(x11_key_names(d, keys, 0), -EINVAL);
	const char *bad[] = {"ctrl", "nosuchkey"};
	CHECK_INT_EQ(x11_key_names(d, bad, 2), -EINVAL);
	CHECK_INT_EQ(x11_key_down(d, "nosuchkey"), -EINVAL);
	CHECK_INT_EQ(x11_key_up(d, "shift"), -ENOENT); /* not held */
	/* F7's press is the one key line after `before`; its release the one keyrelease line. */
	CHECK_INT_EQ(lines_after_sentinel_key(d, "F7", "key "), before + 1);
	CHECK_INT_EQ(lines_now("keyrelease "), before_release + 1);

	/* key_down / key_up with held-key tracking (shift+Tab above pressed Shift once). */
	CHECK_INT_EQ(lines_now("key keycode=50 keysym=Shift_L"), 1);
	CHECK_INT_EQ(x11_key_down(d, "shift"), 0);
	CHECK_INT_EQ(wait_lines("key keycode=50 keysym=Shift_L", 2), 2);
	CHECK_INT_EQ(x11_held_count(d), 1);
	CHECK_INT_EQ(x11_key_down(d, "shift"), 0); /* already held: no second press */
	CHECK_INT_EQ(x11_held_count(d), 1);
	CHECK_INT_EQ(x11_key_up(d, "shift"), 0);
	CHECK_INT_EQ(wait_lines("keyrelease keycode=50 keysym=Shift_L", 2), 2);
	CHECK_INT_EQ(x11_held_count(d), 0);
	CHECK_INT_EQ(lines_now("key keycode=50 keysym=Shift_L"), 2);

	/* A combination with a key held by key_down leaves it held: ctrl down, "ctrl+c", then c
	 * alone still has Control. */
	CHECK_INT_EQ(x11_key_down(d, "ctrl"), 0);
	CHECK_INT_EQ(x11_key_combo(d, "ctrl+c"), 0);
	CHECK_INT_EQ(x11_key_combo(d, "c"), 0);
	CHECK_INT_EQ(wait_lines("key keycode=54 keysym=c state=0x4 text=03", 2), 2);
	CHECK_INT_EQ(x11_held_count(d), 1);
	CHECK_INT_EQ(x11_key_up(d, "ctrl"), 0);
	CHECK_INT_EQ(x11_held_count(d), 0);

	/* release_all releases everything held, the last pressed first. */
	CHECK_INT_EQ(x11_key_down(d, "ctrl"), 0);
	CHECK_INT_EQ(x11_key_down(d, "b"), 0);
	CHECK_INT_EQ(wait_lines("key keycode=56 keysym=b state=0x4 text=02", 1), 1);
	CHECK_INT_EQ(x11_held_count(d), 2);
	CHECK_INT_EQ(x11_release_all(d), 0);
	CHECK_INT_EQ(x11_held_count(d), 0);
	CHECK_INT_EQ(wait_lines("keyrelease keycode=37 keysym=Control_L", 3), 3);
	s = xt_read_file(log_path);
	const char *rb = strstr(s, "keyrelease keycode=56 keysym=b");
	CHECK(rb && strstr(rb, "keyrelease keycode=37 keysym=Control_L"));
	free(s);

	/* A key on the Shift level gets Shift added: "ctrl++" is ctrl+shift+equal on a US map. */
	CHECK_INT_EQ(x11_key_combo(d, "ctrl++"), 0);
	CHECK_INT_EQ(wait_lines("key keycode=21 keysym=plus state=0x5", 1), 1);
	CHECK_INT_EQ(x11_key_combo(d, "ctrl+plus"), 0);
	CHECK_INT_EQ(wait_lines("key keycode=21 keysym=plus state=0x5", 2), 2);
}

int main(int argc, char **argv)
{
	static const char *const extra[] = {"-br", NULL};
	struct xt_xvfb x;

	REQUIRE(argc == 2);
	REQUIRE(xt_xvfb_start(&x, "640x480x24", extra) == 0);
	pid_t client = xt_client_start(argv[1], "input", "400x300+0+0", &log_path);
	REQUIRE(client > 0);
	struct x11_display *d = x11_display_open(NULL);
	REQUIRE(d);
	x11_input_set_key_delay_us(d, 4000);
	/* the client reads the keys of unmapped characters in time on a loaded machine too */
	x11_input_set_rebind_settle_us(d, (uint32_t)test_time_limit_us(200000));

	test_clicks(d);
	test_move_drag_scroll(d);
	test_keys(d);

	x11_display_close(d);
	xt_kill(client);
	xt_xvfb_stop(&x);
	return test_exit();
}
