/* holo-bench x11: screen capture (MIT-SHM and XGetImage) against a memcpy of the same bytes,
 * PNG encoding, and the click round trip (inject through XTest until a client sees the press).
 *
 * By default it starts its own 1920x1080x24 Xvfb and paints a desktop-like screen (flat panels,
 * lines of text, a gradient) so that PNG figures are not those of a black screen. */
#include "common.h"
#include "bench.h"
#include "x11.h"

#include <X11/Xlib.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BENCH_W 1920
#define BENCH_H 1080

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorts the samples; returns the median in ms. ns[0] is then the minimum, the figure least
 * disturbed by other load on a shared machine. */
static double median_ms(uint64_t *ns, int n)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	return (n % 2 ? (double)ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2.0) / 1e6;
}

static double min_ms(const uint64_t *sorted)
{
	return (double)sorted[0] / 1e6;
}

/* Starts Xvfb on a free display number; returns its pid and writes ":N" into name. */
static pid_t start_xvfb(char *name, size_t size)
{
	int fds[2];
	char fdarg[16], buf[32] = {0};
	ssize_t got = 0;

	if (pipe(fds) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		close(fds[0]);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		snprintf(fdarg, sizeof(fdarg), "%d", fds[1]);
		execlp("Xvfb", "Xvfb", "-displayfd", fdarg, "-screen", "0", "1920x1080x24", "-nolisten",
		       "tcp", "-noreset", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	/* Xvfb writes the number and the newline separately, and dies if the pipe is closed in
	 * between: read up to the newline. */
	struct pollfd p = {fds[0], POLLIN, 0};
	while ((size_t)got < sizeof(buf) - 1 && !memchr(buf, '\n', (size_t)got) && poll(&p, 1, 20000) > 0) {
		ssize_t r = read(fds[0], buf + got, sizeof(buf) - 1 - (size_t)got);
		if (r <= 0)
			break;
		got += r;
	}
	close(fds[0]);
	if (!memchr(buf, '\n', (size_t)got)) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		return -1;
	}
	snprintf(name, size, ":%d", atoi(buf));
	return pid;
}

/* A window over the whole screen with desktop-like content; it also receives the clicks of the
 * round-trip measurement. */
static Window paint_desktop(Display *dpy)
{
	int scr = DefaultScreen(dpy);
	Window w = XCreateSimpleWindow(dpy, RootWindow(dpy, scr), 0, 0, BENCH_W, BENCH_H, 0, 0, 0xf0f0f0);
	XSetWindowAttributes attrs = {.override_redirect = True};
	XChangeWindowAttributes(dpy, w, CWOverrideRedirect, &attrs);
	XSelectInput(dpy, w, ButtonPressMask | ExposureMask);
	XMapRaised(dpy, w);
	XSync(dpy, False);
	GC gc = XCreateGC(dpy, w, 0, NULL);
	/* Title bar, side panel, gradient banner, then many lines of text. */
	XSetForeground(dpy, gc, 0x2b3a55);
	XFillRectangle(dpy, w, gc, 0, 0, BENCH_W, 40);
	XSetForeground(dpy, gc, 0xdde3ea);
	XFillRectangle(dpy, w, gc, 0, 40, 300, BENCH_H - 40);
	for (int x = 300; x < BENCH_W; x++) {
		XSetForeground(dpy, gc, (unsigned long)((x * 255 / BENCH_W) << 16 | 0x4080));
		XDrawLine(dpy, w, gc, x, 40, x, 200);
	}
	XSetForeground(dpy, gc, 0x202020);
	static const char line[] = "The quick brown fox jumps over the lazy dog 0123456789 -- "
				   "holod benchmark text, a screen full of it like a document.";
	for (int y = 220, i = 0; y < BENCH_H; y += 16, i++)
		XDrawString(dpy, w, gc, 320 + (i % 7) * 3, y, line + (i % 13), (int)sizeof(line) - 14);
	for (int y = 60, i = 0; y < BENCH_H; y += 24, i++)
		XDrawString(dpy, w, gc, 12, y, "Sidebar entry", 13 - (i % 5));
	XFreeGC(dpy, gc);
	XSync(dpy, False);
	return w;
}

/* Waits for the ButtonPress of the click; returns 0 or -ETIMEDOUT. */
static int wait_press(Display *dpy)
{
	struct pollfd p = {ConnectionNumber(dpy), POLLIN, 0};
	uint64_t deadline = time_mono_us() + 5000000;

	for (;;) {
		while (XPending(dpy)) {
			XEvent ev;
			XNextEvent(dpy, &ev);
			if (ev.type == ButtonPress)
				return 0;
		}
		if (time_mono_us() > deadline)
			return -ETIMEDOUT;
		poll(&p, 1, 100);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-bench x11 [--display NAME] [--iterations N]\n"
		   "  --display NAME   use this X display (default: start a 1920x1080 Xvfb)\n"
		   "  --iterations N   samples per measurement (default 50)\n");
}

int bench_x11_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"display", required_argument, NULL, 'd'},
		{"iterations", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *display = NULL;
	char own_display[32];
	pid_t xvfb = 0;
	int n = 50, c, ret = 1;

	while ((c = getopt_long(argc, argv, "d:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			display = optarg;
			break;
		case 'n':
			n = atoi(optarg);
			if (n < 3 || n > 100000) {
				fprintf(stderr, "holo-bench x11: --iterations must be 3..100000\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!display) {
		xvfb = start_xvfb(own_display, sizeof(own_display));
		if (xvfb < 0) {
			fprintf(stderr, "holo-bench x11: could not start Xvfb (use --display)\n");
			return 1;
		}
		display = own_display;
	}

	uint64_t *ns = xcalloc((size_t)n, sizeof(*ns));
	uint64_t *ns_plain = xcalloc((size_t)n, sizeof(*ns));
	uint64_t *ns_memcpy = xcalloc((size_t)n, sizeof(*ns));
	struct x11_frame *frame = NULL, *frame_plain = NULL;
	struct x11_display *plain = NULL;
	uint8_t *src = NULL, *dst = NULL;
	Display *listener = XOpenDisplay(display);
	struct x11_display *d = x11_display_open(display);
	if (!d || !listener) {
		fprintf(stderr, "holo-bench x11: cannot open %s: %s\n", display, x11_strerror(-errno));
		goto close_displays;
	}
	paint_desktop(listener);
	int w, h;
	x11_display_size(d, &w, &h);
	printf("x11 benchmark on %s (%dx%d), %d samples each, medians\n", display, w, h, n);

	/* Capture with MIT-SHM, capture with XGetImage (a second connection with SHM off) and the
	 * reference, a memcpy of the bytes the server hands over (4 per pixel), interleaved in
	 * each round so that all three see the same load on a shared machine. */
	plain = x11_display_open(display);
	if (!plain) {
		fprintf(stderr, "holo-bench x11: cannot open %s\n", display);
		goto close_displays;
	}
	x11_capture_set_shm(plain, false);
	size_t bytes = (size_t)w * (size_t)h * 4;
	src = xmalloc(bytes);
	dst = xmalloc(bytes);
	memset(src, 0x5a, bytes);
	memset(dst, 0, bytes);
	/* Warm-up: segment attach, allocations, page faults. */
	if (x11_capture(d, NULL, &frame) < 0 || x11_capture(plain, NULL, &frame_plain) < 0) {
		fprintf(stderr, "holo-bench x11: capture failed\n");
		goto close_displays;
	}
	if (!x11_capture_uses_shm(d))
		printf("  (MIT-SHM unavailable on this display: both rows use XGetImage)\n");
	for (int i = 0; i < n; i++) {
		uint64_t t0 = time_mono_ns();
		int r = x11_capture_into(d, NULL, frame);
		uint64_t t1 = time_mono_ns();
		if (r >= 0)
			r = x11_capture_into(plain, NULL, frame_plain);
		uint64_t t2 = time_mono_ns();
		memcpy(dst, src, bytes);
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		uint64_t t3 = time_mono_ns();
		if (r < 0) {
			fprintf(stderr, "holo-bench x11: capture: %s\n", x11_strerror(r));
			goto close_displays;
		}
		ns[i] = t1 - t0;
		ns_plain[i] = t2 - t1;
		ns_memcpy[i] = t3 - t2;
	}
	double cap_ms[2] = {median_ms(ns_plain, n), median_ms(ns, n)};
	double memcpy_ms = median_ms(ns_memcpy, n);
	double shm_min = min_ms(ns), plain_min = min_ms(ns_plain), memcpy_min = min_ms(ns_memcpy);

	/* PNG encoding of the captured desktop. */
	size_t png_size = 0;
	int png_n = MIN(n, 20);
	for (int i = 0; i < png_n; i++) {
		uint8_t *png = NULL;
		uint64_t t0 = time_mono_ns();
		int r = x11_frame_encode_png(frame, &png, &png_size);
		ns[i] = time_mono_ns() - t0;
		free(png);
		if (r < 0) {
			fprintf(stderr, "holo-bench x11: PNG: %s\n", x11_strerror(r));
			goto close_displays;
		}
	}
	double png_ms = median_ms(ns, png_n);
	uint64_t ns_png[1] = {ns[0]};

	/* Click round trip: x11_click() until the window's connection has the ButtonPress. */
	x11_input_set_key_delay_us(d, 0); /* the floor, X11_MIN_KEY_DELAY_US */
	for (int i = 0; i < n; i++) {
		uint64_t t0 = time_mono_ns();
		int r = x11_click(d, 400 + i % 100, 500, X11_BUTTON_LEFT, 1);
		if (r < 0 || wait_press(listener) < 0) {
			fprintf(stderr, "holo-bench x11: click round trip failed\n");
			goto close_displays;
		}
		ns[i] = time_mono_ns() - t0;
	}
	double click_ms = median_ms(ns, n);

	printf("                          median          min\n");
	printf("  capture MIT-SHM       %8.3f ms  %8.3f ms  (%.2fx / %.2fx memcpy)\n", cap_ms[1], shm_min,
	       cap_ms[1] / memcpy_ms, shm_min / memcpy_min);
	printf("  capture XGetImage     %8.3f ms  %8.3f ms  (%.2fx / %.2fx memcpy)\n", cap_ms[0], plain_min,
	       cap_ms[0] / memcpy_ms, plain_min / memcpy_min);
	printf("  memcpy %.1f MB        %8.3f ms  %8.3f ms  (reference)\n", bytes / 1048576.0, memcpy_ms,
	       memcpy_min);
	printf("  PNG encode            %8.3f ms  %8.3f ms  (%zu bytes, level 1, filter sub; %d "
	       "samples)\n",
	       png_ms, min_ms(ns_png), png_size, png_n);
	printf("  click round trip      %8.3f ms  %8.3f ms  (x11_click until ButtonPress)\n", click_ms,
	       min_ms(ns));
	printf("  goal SHM/memcpy < 3x: %s (median), %s (min)\n",
	       cap_ms[1] / memcpy_ms < 3 ? "met" : "NOT met", shm_min / memcpy_min < 3 ? "met" : "NOT met");
	ret = 0;

close_displays:
	free(src);
	free(dst);
	x11_frame_destroy(frame);
	x11_frame_destroy(frame_plain);
	x11_display_close(plain);
	x11_display_close(d);
	if (listener)
		XCloseDisplay(listener);
	free(ns);
	free(ns_plain);
	free(ns_memcpy);
	if (xvfb > 0) {
		kill(xvfb, SIGTERM);
		waitpid(xvfb, NULL, 0);
	}
	return ret;
}
