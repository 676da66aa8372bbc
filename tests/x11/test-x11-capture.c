/* x11 suite: capture (SHM and XGetImage, whole screen and sub-rects), monitors, display errors.
 * Pixels are compared with the colours holo-test-client paints at known places. */
#include "common.h"
#include "test.h"
#include "x11-test-util.h"
#include "x11.h"

#include <X11/Xlib.h>
#include <X11/extensions/Xrandr.h>
#include <stdlib.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

/* Where the client window is put on the root window. */
#define WX 50
#define WY 40

static uint32_t px(const struct x11_frame *f, int x, int y)
{
	const uint8_t *p = f->pixels + (size_t)y * f->stride + (size_t)x * 3;
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

#define CHECK_PX(f, x, y, rgb)                                                                               \
	do {                                                                                                 \
		uint32_t _got = px((f), (x), (y));                                                           \
		if (_got != (rgb)) {                                                                         \
			fprintf(stderr, "%s:%d: pixel (%d,%d) is #%06x, expected #%06x\n", __FILE__,         \
				__LINE__, (x), (y), _got, (unsigned)(rgb));                                  \
			test_failures++;                                                                     \
		}                                                                                            \
	} while (0)

/* Every painted region of the client, checked at its corners and centre, in root coordinates
 * shifted by (ox, oy) into the frame. */
static int check_client(const struct x11_frame *f, int ox, int oy)
{
	static const struct {
		int x, y, w, h;
		uint32_t rgb;
	} regions[] = {
		{10, 10, 50, 50, 0xff0000},  {70, 10, 50, 50, 0x00ff00}, {130, 10, 50, 50, 0x0000ff},
		{190, 10, 50, 50, 0x123456}, {10, 80, 30, 30, 0x808080},
	};
	int checked = 0;

	for (size_t i = 0; i < ARRAY_SIZE(regions); i++) {
		int x0 = WX + regions[i].x - ox, y0 = WY + regions[i].y - oy;
		int x1 = x0 + regions[i].w - 1, y1 = y0 + regions[i].h - 1;
		if (x0 < 0 || y0 < 0 || x1 >= f->width || y1 >= f->height)
			continue;
		checked++;
		CHECK_PX(f, x0, y0, regions[i].rgb);
		CHECK_PX(f, x1, y1, regions[i].rgb);
		/* Every pixel: the row conversion works in lanes of 4 pixels with a scalar tail. */
		int wrong = 0;
		for (int y = y0; y <= y1; y++)
			for (int x = x0; x <= x1; x++)
				wrong += px(f, x, y) != regions[i].rgb;
		CHECK_INT_EQ(wrong, 0);
		/* Just outside the block: the white window background. */
		if (x0 > 0)
			CHECK_PX(f, x0 - 1, y0, 0xffffff);
	}
	return checked;
}

static void test_whole_screen(struct x11_display *d, struct x11_frame **ret_shm_frame)
{
	struct x11_frame *f = NULL;

	CHECK(x11_capture_uses_shm(d));
	REQUIRE(x11_capture(d, NULL, &f) == 0);
	CHECK(x11_capture_uses_shm(d)); /* the attach worked on a local server */
	CHECK_INT_EQ(f->width, 640);
	CHECK_INT_EQ(f->height, 480);
	CHECK(f->stride >= 640 * 3);
	CHECK_INT_EQ(check_client(f, 0, 0), 5);
	CHECK_PX(f, 0, 0, 0x000000);	 /* Xvfb -br: black root */
	CHECK_PX(f, 639, 479, 0x000000); /* last pixel */
	CHECK_PX(f, WX, WY, 0xffffff);	 /* window's top-left pixel */
	*ret_shm_frame = f;
}

static void test_subrect(struct x11_display *d)
{
	struct x11_rect area = {WX + 10, WY + 10, 240, 50};
	struct x11_frame *f = NULL;

	REQUIRE(x11_capture(d, &area, &f) == 0);
	CHECK_INT_EQ(f->width, 240);
	CHECK_INT_EQ(f->height, 50);
	CHECK_INT_EQ(check_client(f, area.x, area.y), 4);
	CHECK_PX(f, 0, 0, 0xff0000);
	CHECK_PX(f, 50, 0, 0xffffff);
	CHECK_PX(f, 229, 49, 0x123456);
	CHECK_PX(f, 230, 49, 0xffffff);
	/* Reuse: a bigger area in the same frame, then a smaller one. */
	struct x11_rect big = {0, 0, 640, 480};
	REQUIRE(x11_capture_into(d, &big, f) == 0);
	CHECK_INT_EQ(f->width, 640);
	check_client(f, 0, 0);
	struct x11_rect small = {WX + 70, WY + 10, 3, 2};
	REQUIRE(x11_capture_into(d, &small, f) == 0);
	CHECK_INT_EQ(f->width, 3);
	CHECK_INT_EQ(f->height, 2);
	CHECK_PX(f, 2, 1, 0x00ff00);
	x11_frame_destroy(f);
}

/* Strips of every width from 1 to 40 across red | white | green: both the 4-pixel lanes and
 * the tails of the row conversion, at every alignment. */
static void test_widths(struct x11_display *d)
{
	struct x11_frame *f = x11_frame_create(1, 1);
	int wrong = 0;

	REQUIRE(f);
	for (int w = 1; w <= 40; w++) {
		struct x11_rect strip = {WX + 50 + w % 5, WY + 20, w, 2};
		REQUIRE(x11_capture_into(d, &strip, f) == 0);
		CHECK_INT_EQ(f->width, w);
		for (int x = 0; x < w; x++) {
			int wx = strip.x - WX + x;
			uint32_t want = wx < 60 ? 0xff0000 : wx < 70 ? 0xffffff : 0x00ff00;
			wrong += px(f, x, 0) != want || px(f, x, 1) != want;
		}
	}
	CHECK_INT_EQ(wrong, 0);
	x11_frame_destroy(f);
}

static void test_errors(struct x11_display *d)
{
	struct x11_frame *f = (struct x11_frame *)0x1;
	struct x11_rect outside = {600, 400, 41, 10}, empty = {0, 0, 0, 10}, neg = {-1, 0, 10, 10};

	CHECK_INT_EQ(x11_capture(d, &outside, &f), -ERANGE);
	CHECK_INT_EQ(x11_capture(d, &empty, &f), -ERANGE);
	CHECK_INT_EQ(x11_capture(d, &neg, &f), -ERANGE);
	CHECK(f == (struct x11_frame *)0x1); /* untouched */
}

/* Two RandR monitors (left and right half, the right one primary), defined on the live server
 * as `xrandr --setmonitor` does: x11_display_monitors lists the primary first, and capturing a
 * monitor's rectangle gives that monitor's pixels. */
static void test_monitors(struct x11_display *d)
{
	Display *dpy = XOpenDisplay(NULL);
	struct x11_rect mons[4];
	struct x11_frame *f = NULL;
	int ev, er;

	REQUIRE(dpy);
	if (!XRRQueryExtension(dpy, &ev, &er)) {
		fprintf(stderr, "no RandR: monitors not checked\n");
		XCloseDisplay(dpy);
		return;
	}
	static const struct {
		const char *name;
		int x, w;
		bool primary;
	} defs[] = {{"HOLO-LEFT", 0, 320, false}, {"HOLO-RIGHT", 320, 320, true}};
	for (size_t i = 0; i < ARRAY_SIZE(defs); i++) {
		XRRMonitorInfo *m = XRRAllocateMonitor(dpy, 0);
		m->name = XInternAtom(dpy, defs[i].name, False);
		m->primary = defs[i].primary;
		m->x = defs[i].x;
		m->y = 0;
		m->width = defs[i].w;
		m->height = 480;
		m->mwidth = 100;
		m->mheight = 150;
		XRRSetMonitor(dpy, DefaultRootWindow(dpy), m);
		XRRFreeMonitors(m);
	}
	XSync(dpy, False);
	/* Xvfb's own output keeps its automatic monitor (the whole screen): three in all. */
	int n = x11_display_monitors(d, mons, ARRAY_SIZE(mons));
	CHECK_INT_EQ(n, 3);
	CHECK_INT_EQ(mons[0].x, 320); /* primary first */
	CHECK_INT_EQ(mons[0].width, 320);
	int left = -1;
	for (int i = 1; i < MIN(n, 4); i++)
		if (mons[i].x == 0 && mons[i].y == 0 && mons[i].width == 320 && mons[i].height == 480)
			left = i;
	CHECK(left > 0);
	/* Fewer slots than monitors: the count is still the total, the slot holds the primary. */
	struct x11_rect one[1];
	CHECK_INT_EQ(x11_display_monitors(d, one, 1), 3);
	CHECK_INT_EQ(one[0].x, 320);
	/* The left monitor holds the client's blocks, at the same coordinates. */
	if (left > 0) {
		REQUIRE(x11_capture(d, &mons[left], &f) == 0);
		CHECK_INT_EQ(f->width, 320);
		CHECK_INT_EQ(check_client(f, 0, 0), 5);
		x11_frame_destroy(f);
	}
	for (size_t i = 0; i < ARRAY_SIZE(defs); i++)
		XRRDeleteMonitor(dpy, DefaultRootWindow(dpy), XInternAtom(dpy, defs[i].name, False));
	XCloseDisplay(dpy);
}

static void test_open_errors(const char *good)
{
	/* Not an X server: a clear error, Wayland named when WAYLAND_DISPLAY is set. */
	unsetenv("WAYLAND_DISPLAY");
	errno = 0;
	CHECK(x11_display_open(":4242") == NULL);
	CHECK_INT_EQ(errno, X11_ERR_NO_DISPLAY);
	setenv("WAYLAND_DISPLAY", "wayland-0", 1);
	errno = 0;
	CHECK(x11_display_open(":4242") == NULL);
	CHECK_INT_EQ(errno, X11_ERR_WAYLAND);
	CHECK(strstr(x11_strerror(-X11_ERR_WAYLAND), "Wayland") != NULL);
	unsetenv("DISPLAY");
	errno = 0;
	CHECK(x11_display_open(NULL) == NULL);
	CHECK_INT_EQ(errno, X11_ERR_WAYLAND);
	unsetenv("WAYLAND_DISPLAY");
	errno = 0;
	CHECK(x11_display_open(NULL) == NULL);
	CHECK_INT_EQ(errno, X11_ERR_NO_DISPLAY);
	CHECK(strstr(x11_strerror(-X11_ERR_NO_DISPLAY), "DISPLAY") != NULL);
	setenv("DISPLAY", good, 1);
}

/* A server without MIT-SHM: capture falls back to XGetImage by itself. One without XTEST: the
 * display is refused with X11_ERR_NO_XTEST (input could not work). */
static void test_missing_extensions(const char *client_path)
{
	static const char *const no_shm[] = {"-br", "-extension", "MIT-SHM", NULL};
	static const char *const no_xtest[] = {"-extension", "XTEST", NULL};
	struct xt_xvfb xs, xt;
	struct x11_frame *f = NULL;
	const char *log;

	REQUIRE(xt_xvfb_start(&xs, "640x480x24", no_shm) == 0);
	pid_t client = xt_client_start(client_path, "noshm", "400x300+50+40", &log);
	REQUIRE(client > 0);
	struct x11_display *d = x11_display_open(xs.display);
	REQUIRE(d);
	CHECK(!x11_capture_uses_shm(d));
	REQUIRE(x11_capture(d, NULL, &f) == 0);
	CHECK_INT_EQ(check_client(f, 0, 0), 5);
	CHECK_PX(f, 639, 479, 0x000000);
	x11_frame_destroy(f);
	x11_display_close(d);
	xt_kill(client);
	xt_xvfb_stop(&xs);

	REQUIRE(xt_xvfb_start(&xt, "320x240x24", no_xtest) == 0);
	errno = 0;
	CHECK(x11_display_open(xt.display) == NULL);
	CHECK_INT_EQ(errno, X11_ERR_NO_XTEST);
	CHECK(strstr(x11_strerror(-X11_ERR_NO_XTEST), "XTEST") != NULL);
	xt_xvfb_stop(&xt);
}

static void test_depth16(void)
{
	struct xt_xvfb x16;
	struct x11_frame *f = NULL;

	REQUIRE(xt_xvfb_start(&x16, "320x240x16", NULL) == 0);
	struct x11_display *d = x11_display_open(x16.display);
	REQUIRE(d);
	/* 16-bit colour is refused with a clear error, on both paths. */
	CHECK_INT_EQ(x11_capture(d, NULL, &f), -ENOTSUP);
	x11_capture_set_shm(d, false);
	CHECK_INT_EQ(x11_capture(d, NULL, &f), -ENOTSUP);
	x11_display_close(d);
	xt_xvfb_stop(&x16);
}

int main(int argc, char **argv)
{
	static const char *const extra[] = {"-br", NULL};
	struct xt_xvfb x;
	struct x11_frame *shm_frame = NULL, *plain = NULL;
	const char *log;
	struct x11_rect mons[4];

	REQUIRE(argc == 2);
	REQUIRE(xt_xvfb_start(&x, "640x480x24", extra) == 0);
	pid_t client = xt_client_start(argv[1], "capture", "400x300+50+40", &log);
	REQUIRE(client > 0);
	struct x11_display *d = x11_display_open(NULL);
	REQUIRE(d);
	CHECK_STR_EQ(x11_display_name(d), x.display);
	int w = 0, h = 0;
	x11_display_size(d, &w, &h);
	CHECK_INT_EQ(w, 640);
	CHECK_INT_EQ(h, 480);
	int n = x11_display_monitors(d, mons, ARRAY_SIZE(mons));
	CHECK(n >= 1);
	CHECK_INT_EQ(mons[0].x, 0);
	CHECK_INT_EQ(mons[0].y, 0);
	CHECK_INT_EQ(mons[0].width, 640);
	CHECK_INT_EQ(mons[0].height, 480);

	test_monitors(d);
	test_whole_screen(d, &shm_frame);
	test_subrect(d);
	test_widths(d);
	test_errors(d);

	/* The XGetImage path gives the same pixels. */
	x11_capture_set_shm(d, false);
	CHECK(!x11_capture_uses_shm(d));
	REQUIRE(x11_capture(d, NULL, &plain) == 0);
	CHECK_INT_EQ(plain->width, shm_frame->width);
	CHECK_INT_EQ(plain->height, shm_frame->height);
	CHECK(memcmp(plain->pixels, shm_frame->pixels, shm_frame->stride * 480) == 0);
	check_client(plain, 0, 0);
	test_subrect(d);
	test_widths(d);
	x11_capture_set_shm(d, true);
	CHECK(x11_capture_uses_shm(d));

	/* PNG of a real capture decodes (size sanity: compressed well below raw). */
	uint8_t *png = NULL;
	size_t png_size = 0;
	CHECK_INT_EQ(x11_frame_encode_png(shm_frame, &png, &png_size), 0);
	CHECK(png_size > 100 && png_size < 640 * 480 * 3 / 10);
	free(png);

	x11_frame_destroy(plain);
	x11_frame_destroy(shm_frame);
	x11_display_close(d);
	xt_kill(client);
	test_open_errors(x.display);
	test_depth16();
	xt_xvfb_stop(&x);
	test_missing_extensions(argv[1]);
	return test_exit();
}
