/* launch: starts a program for a script's `launch` step, detached from holod.
 *
 * The program runs in its own session and process group (a signal to holod's group, such as
 * Ctrl-C in holod's terminal, does not reach it, and `kill -- -PID` stops it with its
 * children), on the task's display (DISPLAY set), stdin from /dev/null, stdout and stderr
 * appended to a log file, signal mask and dispositions reset. It is double-forked: holod never
 * has to reap it, and its pid is reported once exec succeeded. Callable from any thread (only
 * async-signal-safe calls between fork and exec). */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Starts argv[0] (searched in PATH) with `argv` (NULL-terminated) and DISPLAY=display, output
 * appended to log_path (created 0600). 0 with *ret_pid, or -errno with a sentence in err: the
 * program not found (-ENOENT), not executable (-EACCES), the log not writable. */
int launch_spawn(char *const argv[], const char *display, const char *log_path, pid_t *ret_pid, char *err,
		 size_t errlen);
