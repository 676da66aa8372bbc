/* holod's contacts with the operating system: the listening socket, the service manager,
 * a private X server. Called from the main thread only. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* The API socket. Creates the socket's directory (0700) when it is missing; refuses an existing
 * one that others may write to unless it is sticky, and never changes its mode. Refuses a path
 * that holds something other than a socket. Takes `<path>.lock` (flock) so that a second holod
 * is refused (-EADDRINUSE, with the message logged), removes a stale socket left by a crashed
 * holod, binds the socket with mode 0600 and listens. */
struct listen_socket {
	int fd;
	int lock_fd;
	char *path;
	char *lock_path;
};
int listen_socket_open(struct listen_socket *ls, const char *path);
/* Closes and unlinks what listen_socket_open created. Accepts a zeroed struct. */
void listen_socket_close(struct listen_socket *ls);

/* Takes `<dir>/holod.lock` (flock) for the life of the process, so that two holods never share
 * a journal even with different sockets: -EBUSY (message logged) when another holds it. */
int state_lock_take(const char *dir, int *ret_fd);

/* Creates the state directory (0700) or makes an existing one of holod's uid private: the
 * journal and the screenshots hold what tasks typed and saw. Tightening is logged with the old
 * mode; a directory of another uid is refused. */
int state_dir_prepare(const char *dir);

/* sd_notify without libsystemd: one datagram to $NOTIFY_SOCKET ("@..." is abstract).
 * notify_init() takes the variable out of holod's environment (sd_notify's unset_environment)
 * before any child starts: the Xvfbs holod starts speak the protocol too, and their READY=1
 * would tell the service manager holod is ready while its model still loads. notify_send():
 * 0 when there is no socket, 1 when sent, -errno on failure. */
void notify_init(void);
int notify_send(const char *state);

/* A private Xvfb of width x height owned by holod: display `number` (-1: the first free one,
 * which Xvfb reports through -displayfd), killed by xvfb_stop (and by the kernel via
 * PR_SET_PDEATHSIG if holod dies). xvfb_start returns once the server accepts clients. */
struct xvfb {
	pid_t pid;
	char *display;	   /* ":N" */
	pid_t session_pid; /* --session: its process group leader; 0: none (or reaped) */
};
int xvfb_start(struct xvfb *x, int width, int height, int number);
/* Starts `command` through /bin/sh on the display, in its own process group (so that the
 * programs it starts are stopped with it), stdin from /dev/null, output to holod's stderr. */
int xvfb_start_session(struct xvfb *x, const char *command);
/* --session auto: the window manager started on each virtual display when it is installed
 * (a small one in Debian, with EWMH focus and activation), and how long holod waits for it to
 * manage the display before it announces readiness: a program a first task launches before the
 * manager runs would not get the focus. */
#define XVFB_AUTO_WM "openbox"
#define XVFB_AUTO_WM_COMMAND "exec openbox --sm-disable"
#define XVFB_WM_START_TIMEOUT_MS 15000
/* Whether `program` is an executable file in one of $PATH's directories (an empty entry is the
 * current directory; no $PATH: /usr/local/bin:/usr/bin:/bin). */
bool xvfb_program_in_path(const char *program);
/* Waits until a window manager manages the display (x11_has_window_manager), the session
 * exits (then reaped: session_pid 0) or timeout_ms pass. Returns 0 when one runs,
 * -ETIMEDOUT, -ECHILD (the session exited) or -errno; the caller logs. */
int xvfb_wait_window_manager(struct xvfb *x, unsigned timeout_ms);
/* Stops the session's process group (SIGTERM, then SIGKILL after a grace period), then the
 * server. Accepts a zeroed struct. */
void xvfb_stop(struct xvfb *x);
