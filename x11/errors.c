/* x11 errors: the process-wide X error handlers and the thread-local trap (see the DESIGN
 * comment in x11-internal.h). The one file of the module every other file may call, and that
 * calls none of them. */
#include "common.h"
#include "x11-internal.h"

#include <pthread.h>

static _Thread_local int trapped_error;
static pthread_once_t errors_once = PTHREAD_ONCE_INIT;

static int error_handler(Display *dpy, XErrorEvent *ev)
{
	/* Keep the first error: later ones are usually consequences of it. */
	if (!trapped_error)
		trapped_error = ev->error_code;
	log_debug("X error %d (request %d.%d) on %s", ev->error_code, ev->request_code, ev->minor_code,
		  DisplayString(dpy));
	return 0;
}

static int io_error_handler(Display *dpy)
{
	log_debug("lost the connection to X server %s", DisplayString(dpy));
	return 0;
}

static void io_error_exit_handler(Display *dpy, void *userdata)
{
	bool *lost = userdata;

	/* Returning is allowed since libX11 1.7: the Display is marked broken and later calls on
	 * it return at once; it must still be closed with XCloseDisplay. */
	*lost = true;
}

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;

void x11_global_lock(void)
{
	pthread_mutex_lock(&global_lock);
}

void x11_global_unlock(void)
{
	pthread_mutex_unlock(&global_lock);
}

void x11_close_connection(Display *dpy)
{
	x11_global_lock();
	XCloseDisplay(dpy);
	x11_global_unlock();
}

void x11_survive_io_errors(Display *dpy, bool *lost)
{
	XSetIOErrorExitHandler(dpy, io_error_exit_handler, lost);
}

static void errors_install_once(void)
{
	/* Several threads use Xlib at once (an executor and a kill switch per display), each on its
	 * own Display, but Xlib and its extension libraries keep process-wide lists (libXext's
	 * per-display extension records, which libXi's close hook frees): without XInitThreads
	 * their locks are no-ops, and two displays closed at once corrupted libXi's list (a double
	 * free in XCloseDisplay, integration-startup under ASan). Debian's libX11 does not call it
	 * by itself. This runs before the module's first XOpenDisplay, as Xlib requires. */
	if (!XInitThreads())
		log_warning("XInitThreads failed: Xlib is not safe to use from several threads");
	/* Xlib's default handlers print and exit the process; a daemon must survive a BadWindow
	 * and the end of the X session. */
	XSetErrorHandler(error_handler);
	XSetIOErrorHandler(io_error_handler);
}

void x11_errors_install(void)
{
	pthread_once(&errors_once, errors_install_once);
}

void x11_trap_begin(void)
{
	trapped_error = 0;
}

int x11_trap_peek(void)
{
	int e = trapped_error;
	trapped_error = 0;
	return e;
}

int x11_trap_end(Display *dpy)
{
	XSync(dpy, False);
	int e = trapped_error;
	trapped_error = 0;
	return e;
}
