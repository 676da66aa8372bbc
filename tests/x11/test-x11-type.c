/* x11 suite: typing UTF-8 exactly, into holo-test-client (Xlib + XIM) and into xterm (a real
 * terminal from Debian, whose bytes reach `cat > FILE` through a pty). */
#include "common.h"
#include "test.h"
#include "x11-internal.h"
#include "x11-test-util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

static const char text[] = "Hello, wörld! ✓ — 日本語\tTab\nLine";

static bool text_is(const char *contents, void *want)
{
	char *got = xt_client_text(contents);
	bool ok = strcmp(got, want) == 0;
	free(got);
	return ok;
}

struct tail_arg {
	size_t skip;
	const char *want;
};

/* The client text received after the first `skip` bytes of the log. */
static bool tail_text_is(const char *contents, void *arg)
{
	struct tail_arg *t = arg;
	if (strlen(contents) < t->skip)
		return false;
	char *got = xt_client_text(contents + t->skip);
	bool ok = strcmp(got, t->want) == 0;
	free(got);
	return ok;
}

/* The client text received after the first `skip` bytes of the log contains `want`. */
static bool tail_text_has(const char *contents, void *arg)
{
	struct tail_arg *t = arg;
	if (strlen(contents) < t->skip)
		return false;
	char *got = xt_client_text(contents + t->skip);
	bool ok = strstr(got, t->want) != NULL;
	free(got);
	return ok;
}

static bool file_is(const char *contents, void *want)
{
	return strcmp(contents, want) == 0;
}

static int spare_keycodes(struct x11_display *d)
{
	struct x11_keymap km;
	int n = 0;

	REQUIRE(x11_keymap_load(d, &km) == 0);
	for (int kc = km.min_keycode; kc <= km.max_keycode; kc++) {
		bool empty = true;
		for (int i = 0; i < km.per_code; i++)
			empty &= km.syms[(size_t)(kc - km.min_keycode) * (size_t)km.per_code + i] == NoSymbol;
		n += empty;
	}
	x11_keymap_finish(d, &km);
	return n;
}

static void *raise_later(void *flag)
{
	usleep(200000);
	atomic_store((atomic_int *)flag, 1);
	return NULL;
}

/* A stop (the executor's flag) interrupts a long text between two characters: -ECANCELED long
 * before the text could have been typed, and the display types again once detached. */
static void test_interrupt(struct x11_display *d)
{
	enum { N = 1000 }; /* at least 6 s at the 6 ms key delay of this test */
	static atomic_int flag;
	char *many_x = xmalloc(N + 1);
	pthread_t th;

	memset(many_x, 'x', N);
	many_x[N] = '\0';
	atomic_store(&flag, 0);
	x11_input_set_interrupt(d, &flag);
	REQUIRE(pthread_create(&th, NULL, raise_later, &flag) == 0);
	uint64_t t0 = time_mono_us();
	CHECK_INT_EQ(x11_type(d, many_x), -ECANCELED);
	uint64_t took = time_mono_us() - t0;
	pthread_join(th, NULL);
	CHECK(took < test_time_limit_us(3000000));
	CHECK_INT_EQ(x11_type(d, "x"), -ECANCELED); /* still raised: nothing typed */
	x11_input_set_interrupt(d, NULL);
	CHECK_INT_EQ(x11_type(d, "x"), 0);
	CHECK_INT_EQ(x11_held_count(d), 0);
	free(many_x);
}

static void test_client(struct x11_display *d, const char *client_path)
{
	const char *log;
	pid_t client = xt_client_start(client_path, "type", "400x300+0+0", &log);
	REQUIRE(client > 0);
	int spare = spare_keycodes(d);
	CHECK(spare > 0);

	CHECK_INT_EQ(x11_type(d, text), 0);
	if (!xt_wait_until(log, text_is, (void *)text, XT_WAIT_MS)) {
		char *s = xt_read_file(log), *got = xt_client_text(s);
		fprintf(stderr, "client received \"%s\"\nexpected        \"%s\"\n", got, text);
		test_failures++;
		free(got);
		free(s);
	}
	/* The keycodes bound for ö ✓ — 日 本 語 are free again. */
	CHECK_INT_EQ(spare_keycodes(d), spare);

	/* With Caps Lock on, the text still comes out as given (and Caps Lock stays on). */
	char *before_caps = xt_read_file(log);
	size_t skip = strlen(before_caps);
	free(before_caps);
	CHECK_INT_EQ(x11_key_combo(d, "capslock"), 0);
	CHECK_INT_EQ(x11_type(d, "aB1\n"), 0);
	CHECK_INT_EQ(x11_key_combo(d, "a"), 0);
	CHECK_INT_EQ(x11_key_combo(d, "capslock"), 0);
	CHECK_INT_EQ(x11_key_combo(d, "a"), 0);
	struct tail_arg ta = {skip, "aB1\nAa"};
	if (!xt_wait_until(log, tail_text_is, &ta, XT_WAIT_MS)) {
		char *all = xt_read_file(log), *got = xt_client_text(all + skip);
		fprintf(stderr, "with Caps Lock: \"%s\", expected \"aB1\\nAa\"\n", got);
		test_failures++;
		free(got);
		free(all);
	}

	/* Outside the Basic Multilingual Plane, a Latin-1 character typed with a bound keycode and
	 * "\r\n" as one Return. */
	char *before_emoji = xt_read_file(log);
	struct tail_arg te = {strlen(before_emoji), "😀 ÿ\nx"};
	free(before_emoji);
	CHECK_INT_EQ(x11_type(d, "😀 ÿ\r\nx"), 0);
	if (!xt_wait_until(log, tail_text_is, &te, XT_WAIT_MS)) {
		char *all = xt_read_file(log), *got = xt_client_text(all + te.skip);
		fprintf(stderr, "got \"%s\", expected \"%s\"\n", got, te.want);
		test_failures++;
		free(got);
		free(all);
	}

	/* More distinct characters than one batch of bindings (X11_MAX_TEMP_BINDINGS): the
	 * bindings are restored and reused mid-text, and the text still arrives exactly. */
	char many[3 * (X11_MAX_TEMP_BINDINGS + 10) + 1];
	size_t mlen = 0;
	for (uint32_t cp = 0x4e00; cp < 0x4e00 + X11_MAX_TEMP_BINDINGS + 10; cp++) {
		many[mlen++] = (char)(0xe0 | (cp >> 12));
		many[mlen++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		many[mlen++] = (char)(0x80 | (cp & 0x3f));
	}
	many[mlen] = '\0';
	char *before_many = xt_read_file(log);
	struct tail_arg tm = {strlen(before_many), many};
	free(before_many);
	CHECK_INT_EQ(x11_type(d, many), 0);
	if (!xt_wait_until(log, tail_text_is, &tm, XT_WAIT_MS)) {
		char *all = xt_read_file(log), *got = xt_client_text(all + tm.skip);
		fprintf(stderr, "got \"%s\"\nexpected \"%s\"\n", got, many);
		test_failures++;
		free(got);
		free(all);
	}
	CHECK_INT_EQ(spare_keycodes(d), spare);

	/* Invalid input: an error and no key events before the sentinel. */
	char *s = xt_read_file(log);
	int before = xt_count_lines(s, "key ");
	struct tail_arg sentinel = {strlen(s), "z"};
	free(s);
	CHECK_INT_EQ(x11_type(d, "ab\xc3"), -EINVAL);	     /* truncated UTF-8 */
	CHECK_INT_EQ(x11_type(d, "a\xed\xa0\x80"), -EINVAL); /* surrogate */
	CHECK_INT_EQ(x11_type(d, "bell\a"), -EINVAL);	     /* control character */
	CHECK_INT_EQ(x11_type(d, NULL), -EINVAL);
	char *big = xmalloc(KEYS_MAX_TEXT_BYTES + 2);
	memset(big, 'x', KEYS_MAX_TEXT_BYTES + 1);
	big[KEYS_MAX_TEXT_BYTES + 1] = '\0';
	CHECK_INT_EQ(x11_type(d, big), -EINVAL);
	free(big);
	CHECK_INT_EQ(x11_type(d, ""), 0);
	/* Sentinel: events of one connection arrive in order, so once the "z" typed last is in the
	 * log, anything the refused texts had typed is there too: the client received "z" alone since
	 * the first of them. */
	CHECK_INT_EQ(x11_type(d, "z"), 0);
	CHECK(xt_wait_until(log, tail_text_has, &sentinel, XT_WAIT_MS));
	s = xt_read_file(log);
	char *got = xt_client_text(s + sentinel.skip);
	CHECK_STR_EQ(got, "z");
	CHECK_INT_EQ(xt_count_lines(s, "key "), before + 1);
	free(got);
	free(s);
	xt_kill(client);
}

/* The pointer is over a window other than the root (xterm has mapped). */
static bool xterm_mapped(struct x11_display *d)
{
	Window root, child = None;
	int rx, ry, wx, wy;
	unsigned mask;

	XQueryPointer(d->dpy, d->root, &root, &child, &rx, &ry, &wx, &wy, &mask);
	return child != None;
}

static void test_xterm(struct x11_display *d)
{
	char out[512], ready[512], cmd[1200];

	snprintf(out, sizeof(out), "%s/xterm.out", xt_tmpdir());
	snprintf(ready, sizeof(ready), "%s/xterm.ready", xt_tmpdir());
	/* Cooked mode with icrnl (xterm sends Return as \r), no flow control; ^D ends the last
	 * line. */
	snprintf(cmd, sizeof(cmd), "stty sane icrnl -ixon; echo ok > '%s'; exec cat > '%s'", ready, out);
	setenv("LC_ALL", "C.UTF-8", 1);
	const char *argv[] = {"xterm", "-u8", "-geometry", "80x24+0+0", "-e", "sh", "-c", cmd, NULL};
	pid_t xterm = xt_spawn(argv);
	REQUIRE(xterm > 0);
	if (!xt_wait_for(ready, "ok", XT_WAIT_MS)) {
		fprintf(stderr, "xterm did not start\n");
		test_failures++;
		xt_kill(xterm);
		return;
	}
	/* Keyboard focus follows the pointer (no window manager, focus PointerRoot). */
	bool mapped = false;
	for (int i = 0; i < 500 && !mapped; i++) {
		CHECK_INT_EQ(x11_move(d, 100, 100), 0);
		mapped = xterm_mapped(d);
		if (!mapped)
			usleep(20000);
	}
	CHECK(mapped);
	XSetInputFocus(d->dpy, PointerRoot, RevertToPointerRoot, CurrentTime);
	XSync(d->dpy, False);

	CHECK_INT_EQ(x11_type(d, text), 0);
	CHECK_INT_EQ(x11_key_combo(d, "ctrl+d"), 0);
	if (!xt_wait_until(out, file_is, (void *)text, XT_WAIT_MS)) {
		char *got = xt_read_file(out);
		fprintf(stderr, "xterm wrote    \"%s\"\nexpected       \"%s\"\n", got ? got : "(none)", text);
		test_failures++;
		free(got);
	}
	CHECK_INT_EQ(x11_key_combo(d, "ctrl+d"), 0);
	xt_kill(xterm);
}

int main(int argc, char **argv)
{
	struct xt_xvfb x;

	REQUIRE(argc == 2);
	REQUIRE(xt_xvfb_start(&x, "640x480x24", NULL) == 0);
	struct x11_display *d = x11_display_open(NULL);
	REQUIRE(d);
	x11_input_set_key_delay_us(d, 6000);
	/* the client reads the keys of unmapped characters in time on a loaded machine too */
	x11_input_set_rebind_settle_us(d, (uint32_t)test_time_limit_us(200000));
	test_client(d, argv[1]);
	test_interrupt(d);
	if (access("/usr/bin/xterm", X_OK) == 0)
		test_xterm(d);
	else
		fprintf(stderr, "xterm not installed: typing into xterm not checked\n");
	x11_display_close(d);
	xt_xvfb_stop(&x);
	return test_exit();
}
