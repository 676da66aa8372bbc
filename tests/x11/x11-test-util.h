/* Helpers of the x11 suite: a private Xvfb per test, child processes, polling a client's log.
 * Every wait polls with a generous deadline (the CI machine is shared and loaded). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define XT_WAIT_MS 10000

struct xt_xvfb {
	pid_t pid;
	char display[32];
};

/* Starts `Xvfb -displayfd` with "-screen 0 <screen>" (e.g. "1024x768x24") plus `extra` args
 * (NULL-terminated, may be NULL), and sets $DISPLAY to it. Skips the test when Xvfb is not
 * installed (test_skip_missing: fails it on the CI machine); returns -1 if it fails to start. */
int xt_xvfb_start(struct xt_xvfb *x, const char *screen, const char *const *extra);
void xt_xvfb_stop(struct xt_xvfb *x);

/* A fresh directory under $TMPDIR (or /tmp); the path is static storage. Removed at exit. */
const char *xt_tmpdir(void);

/* fork+exec argv (NULL-terminated) with stdin from /dev/null; returns the pid or -1. */
pid_t xt_spawn(const char *const *argv);
void xt_kill(pid_t pid);

/* The whole file as a NUL-terminated string (NULL if unreadable). Caller frees. */
char *xt_read_file(const char *path);
/* Polls until the file contains `needle` (true) or timeout_ms passes (false). */
bool xt_wait_for(const char *path, const char *needle, int timeout_ms);
/* Polls until `pred(contents, arg)` holds. */
bool xt_wait_until(const char *path, bool (*pred)(const char *contents, void *arg), void *arg, int timeout_ms);
/* Lines of the log starting with `prefix` (e.g. "press button=1 "). */
int xt_count_lines(const char *contents, const char *prefix);
/* The text the client received: the concatenated `text=` of its key lines, Return ("\r") read
 * as "\n". Caller frees. */
char *xt_client_text(const char *contents);

/* Starts holo-test-client at `geometry` logging to <tmpdir>/<name>.log and waits for "ready".
 * Returns the pid (log path in ret_log, static storage per name) or -1. */
pid_t xt_client_start(const char *client_path, const char *name, const char *geometry, const char **ret_log);
