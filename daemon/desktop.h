/* desktop: the script-only actions that look at windows and programs rather than pixels:
 * launch, wait_for, activate, and the keyboard focus check of write and hotkey. Internal to the
 * executor; runs on the executor thread with the task's X connection. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "executor.h"

/* Interval between two looks at the windows or the screen while waiting. */
#define DESKTOP_POLL_US 50000
/* Windows named in a timeout message at most. */
#define DESKTOP_MAX_WINDOWS_NAMED 8

/* Each returns 0 with a short factual result, or -errno with a sentence in err: -ETIMEDOUT
 * (the condition did not hold within the step's timeout; err says what was seen instead),
 * -ECANCELED / -ETIME (the task was stopped or ran out of max_seconds while waiting), others. */
int desktop_launch(struct executor_run *run, const struct ipc_action *a, char *result, size_t rlen, char *err,
		   size_t errlen);
/* region_before: wait_for.region_changed's region cut from the step's before-screenshot. */
int desktop_wait_for(struct executor_run *run, const struct ipc_action *a,
		     const struct x11_frame *region_before, char *result, size_t rlen, char *err,
		     size_t errlen);
int desktop_activate(struct executor_run *run, const struct ipc_action *a, char *result, size_t rlen,
		     char *err, size_t errlen);

/* Whether a client window has the keyboard focus; its title into `title` when it has (may be
 * cut). 0 or -errno. */
int desktop_focus(struct executor_run *run, bool *ret_focused, char *title, size_t tlen);

/* The pixels of `area` (root coordinates) cut from `frame`, captured at `origin`. NULL when the
 * area is not inside the frame. */
struct x11_frame *desktop_crop(const struct x11_frame *frame, const struct x11_rect *origin,
			       const struct x11_rect *area);
