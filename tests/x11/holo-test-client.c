/* holo-test-client: a plain Xlib window that records every input event it receives, for tests
 * that inject input (the x11 suite, the daemon's integration tests).
 *
 * usage: holo-test-client --log FILE [--geometry WxH+X+Y] [--no-focus] [--class NAME]
 *
 * The window (default 400x300+0+0, no window manager needed) shows, in window coordinates:
 *   red    #ff0000  block at (10,10)  50x50
 *   green  #00ff00  block at (70,10)  50x50
 *   blue   #0000ff  block at (130,10) 50x50
 *   color  #123456  block at (190,10) 50x50
 *   button #808080  at (10,80)  100x30, labelled "OK"
 *   text field white with a black 1-pixel border at (10,130) 280x30
 *   the rest of the window is white (#ffffff).
 * Unless --no-focus, the client gives itself the input focus once mapped. With --class the
 * window carries WM_CLASS (NAME, NAME) and _NET_WM_PID, as applications' windows do, so holod
 * lists it among the client windows; without, it has neither.
 *
 * Log format: UTF-8 text, one event per line, "<event> key=value ...", flushed after each line.
 * x/y are window coordinates, root_x/root_y root coordinates, state the X modifier/button mask
 * in hex, time the X server timestamp in ms. Lines:
 *   ready window=0x1a00001 x=0 y=0 width=400 height=300   (mapped, painted, focused)
 *   motion x= y= root_x= root_y= state=
 *   press button=N x= y= root_x= root_y= state= time= target=red|green|blue|color|button|field|none
 *   release button=N x= y= root_x= root_y= state= time=
 *   scroll direction=up|down|left|right x= y=      (after the press line of buttons 4..7)
 *   key keycode=N keysym=NAME state= text=HEX      (KeyPress; text is the UTF-8 from
 *        Xutf8LookupString through an XIM input context, hex-encoded, "-" when empty;
 *        Return gives "0d", Tab "09", ctrl+a "01")
 *   keyrelease keycode=N keysym=NAME state=
 *   focus in|out
 * The client exits on SIGTERM or SIGINT. */
#include <X11/Xlib.h>
#include <X11/Xatom.h>
#include <X11/Xutil.h>
#include <X11/keysym.h>
#include <errno.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <langinfo.h>
#include <unistd.h>

static volatile sig_atomic_t quit;

static void on_signal(int sig)
{
	quit = 1;
}

static const struct block {
	const char *name;
	int x, y, w, h;
	unsigned long rgb;
} blocks[] = {
	{"red", 10, 10, 50, 50, 0xff0000},     {"green", 70, 10, 50, 50, 0x00ff00},
	{"blue", 130, 10, 50, 50, 0x0000ff},   {"color", 190, 10, 50, 50, 0x123456},
	{"button", 10, 80, 100, 30, 0x808080}, {"field", 10, 130, 280, 30, 0xffffff},
};

static FILE *logf_;

static void logline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logline(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(logf_, fmt, ap);
	va_end(ap);
	fputc('\n', logf_);
	fflush(logf_);
}

static unsigned long pixel_for(Display *dpy, unsigned long rgb)
{
	XColor c = {
		.red = (unsigned short)(((rgb >> 16) & 0xff) * 0x101),
		.green = (unsigned short)(((rgb >> 8) & 0xff) * 0x101),
		.blue = (unsigned short)((rgb & 0xff) * 0x101),
		.flags = DoRed | DoGreen | DoBlue,
	};

	XAllocColor(dpy, DefaultColormap(dpy, DefaultScreen(dpy)), &c);
	return c.pixel;
}

static void paint(Display *dpy, Window w, GC gc, int width, int height)
{
	XSetForeground(dpy, gc, pixel_for(dpy, 0xffffff));
	XFillRectangle(dpy, w, gc, 0, 0, (unsigned)width, (unsigned)height);
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		XSetForeground(dpy, gc, pixel_for(dpy, blocks[i].rgb));
		XFillRectangle(dpy, w, gc, blocks[i].x, blocks[i].y, (unsigned)blocks[i].w,
			       (unsigned)blocks[i].h);
	}
	XSetForeground(dpy, gc, pixel_for(dpy, 0x000000));
	XDrawRectangle(dpy, w, gc, 10, 130, 279, 29);
	XDrawString(dpy, w, gc, 50, 100, "OK", 2);
}

static const char *target_at(int x, int y)
{
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
		if (x >= blocks[i].x && x < blocks[i].x + blocks[i].w && y >= blocks[i].y &&
		    y < blocks[i].y + blocks[i].h)
			return blocks[i].name;
	return "none";
}

/* XKeysymToString mallocs (and never frees) the name of a Unicode keysym: format those here. */
static const char *keysym_name(KeySym sym, char *buf, size_t size)
{
	const char *name;

	if ((sym & 0xff000000) == 0x01000000) {
		snprintf(buf, size, "U%04lX", (unsigned long)(sym & 0xffffff));
		return buf;
	}
	name = sym != NoSymbol ? XKeysymToString(sym) : NULL;
	return name ? name : "NoSymbol";
}

static void log_key(Display *dpy, XIC ic, XKeyEvent *ev)
{
	char buf[256], hex[2 * sizeof(buf) + 1];
	KeySym sym = NoSymbol;
	Status status;
	int n = Xutf8LookupString(ic, ev, buf, sizeof(buf), &sym, &status);
	char namebuf[16];

	if (status != XLookupChars && status != XLookupBoth)
		n = 0;
	if (status != XLookupKeySym && status != XLookupBoth)
		sym = XLookupKeysym(ev, 0);
	for (int i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", (unsigned char)buf[i]);
	if (n == 0)
		strcpy(hex, "-");
	logline("key keycode=%u keysym=%s state=0x%x text=%s", ev->keycode,
		keysym_name(sym, namebuf, sizeof(namebuf)), ev->state, hex);
}

static int parse_geometry(const char *s, int *w, int *h, int *x, int *y)
{
	return sscanf(s, "%dx%d+%d+%d", w, h, x, y) == 4 && *w > 0 && *h > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *log_path = NULL, *class_name = NULL;
	int width = 400, height = 300, wx = 0, wy = 0;
	bool focus = true, mapped = false, exposed = false, ready = false;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--log") == 0 && i + 1 < argc)
			log_path = argv[++i];
		else if (strcmp(argv[i], "--geometry") == 0 && i + 1 < argc) {
			if (parse_geometry(argv[++i], &width, &height, &wx, &wy) < 0) {
				fprintf(stderr, "holo-test-client: bad geometry '%s'\n", argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "--no-focus") == 0)
			focus = false;
		else if (strcmp(argv[i], "--class") == 0 && i + 1 < argc)
			class_name = argv[++i];
		else {
			fprintf(stderr, "usage: holo-test-client --log FILE [--geometry WxH+X+Y] "
					"[--no-focus] [--class NAME]\n");
			return 2;
		}
	}
	if (!log_path) {
		fprintf(stderr, "holo-test-client: --log FILE is required\n");
		return 2;
	}
	logf_ = fopen(log_path, "w");
	if (!logf_) {
		fprintf(stderr, "holo-test-client: %s: %s\n", log_path, strerror(errno));
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	/* UTF-8 for Xutf8LookupString, and the built-in input method (no external IM server). */
	setlocale(LC_ALL, "");
	if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
		setlocale(LC_CTYPE, "C.UTF-8");
	XSetLocaleModifiers("@im=none");

	Display *dpy = XOpenDisplay(NULL);
	if (!dpy) {
		fprintf(stderr, "holo-test-client: cannot open display\n");
		return 1;
	}
	int scr = DefaultScreen(dpy);
	XSetWindowAttributes attrs = {.background_pixel = WhitePixel(dpy, scr)};
	Window w = XCreateWindow(dpy, RootWindow(dpy, scr), wx, wy, (unsigned)width, (unsigned)height, 0,
				 CopyFromParent, InputOutput, CopyFromParent, CWBackPixel, &attrs);
	XStoreName(dpy, w, "holo-test-client");
	XSizeHints hints = {.flags = USPosition | USSize, .x = wx, .y = wy, .width = width, .height = height};
	XSetWMNormalHints(dpy, w, &hints);
	if (class_name) {
		XClassHint class_hint = {.res_name = (char *)class_name, .res_class = (char *)class_name};
		long pid = (long)getpid();
		XSetClassHint(dpy, w, &class_hint);
		XChangeProperty(dpy, w, XInternAtom(dpy, "_NET_WM_PID", False), XA_CARDINAL, 32,
				PropModeReplace, (unsigned char *)&pid, 1);
	}
	XIM im = XOpenIM(dpy, NULL, NULL, NULL);
	if (!im) {
		fprintf(stderr, "holo-test-client: XOpenIM failed\n");
		return 1;
	}
	XIC ic = XCreateIC(im, XNInputStyle, XIMPreeditNothing | XIMStatusNothing, XNClientWindow, w,
			   XNFocusWindow, w, NULL);
	if (!ic) {
		fprintf(stderr, "holo-test-client: XCreateIC failed\n");
		return 1;
	}
	long im_mask = 0;
	XGetICValues(ic, XNFilterEvents, &im_mask, NULL);
	XSelectInput(dpy, w,
		     ExposureMask | StructureNotifyMask | KeyPressMask | KeyReleaseMask | ButtonPressMask |
			     ButtonReleaseMask | PointerMotionMask | FocusChangeMask | im_mask);
	GC gc = XCreateGC(dpy, w, 0, NULL);
	XMapRaised(dpy, w);
	XFlush(dpy);

	struct pollfd pfd = {.fd = ConnectionNumber(dpy), .events = POLLIN};
	while (!quit) {
		if (!XPending(dpy)) {
			poll(&pfd, 1, 200);
			continue;
		}
		XEvent ev;
		XNextEvent(dpy, &ev);
		if (XFilterEvent(&ev, None))
			continue;
		switch (ev.type) {
		case MapNotify:
			mapped = true;
			break;
		case Expose:
			if (ev.xexpose.count == 0) {
				paint(dpy, w, gc, width, height);
				exposed = true;
			}
			break;
		case MappingNotify:
			XRefreshKeyboardMapping(&ev.xmapping);
			break;
		case FocusIn:
		case FocusOut:
			logline("focus %s", ev.type == FocusIn ? "in" : "out");
			break;
		case MotionNotify:
			logline("motion x=%d y=%d root_x=%d root_y=%d state=0x%x", ev.xmotion.x, ev.xmotion.y,
				ev.xmotion.x_root, ev.xmotion.y_root, ev.xmotion.state);
			break;
		case ButtonPress:
		case ButtonRelease: {
			XButtonEvent *b = &ev.xbutton;
			bool press = ev.type == ButtonPress;
			logline("%s button=%u x=%d y=%d root_x=%d root_y=%d state=0x%x "
				"time=%lu%s%s",
				press ? "press" : "release", b->button, b->x, b->y, b->x_root, b->y_root,
				b->state, (unsigned long)b->time, press ? " target=" : "",
				press ? target_at(b->x, b->y) : "");
			static const char *dirs[] = {"up", "down", "left", "right"};
			if (press && b->button >= 4 && b->button <= 7)
				logline("scroll direction=%s x=%d y=%d", dirs[b->button - 4], b->x, b->y);
			break;
		}
		case KeyPress:
			log_key(dpy, ic, &ev.xkey);
			break;
		case KeyRelease: {
			char namebuf[16];
			KeySym sym = XLookupKeysym(&ev.xkey, 0);
			logline("keyrelease keycode=%u keysym=%s state=0x%x", ev.xkey.keycode,
				keysym_name(sym, namebuf, sizeof(namebuf)), ev.xkey.state);
			break;
		}
		default:
			break;
		}
		if (!ready && mapped && exposed) {
			if (focus)
				XSetInputFocus(dpy, w, RevertToParent, CurrentTime);
			XSync(dpy, False);
			XSetICFocus(ic);
			logline("ready window=0x%lx x=%d y=%d width=%d height=%d", w, wx, wy, width, height);
			ready = true;
		}
	}
	XDestroyIC(ic);
	XCloseIM(im);
	XFreeGC(dpy, gc);
	XDestroyWindow(dpy, w);
	XCloseDisplay(dpy);
	fclose(logf_);
	return 0;
}
