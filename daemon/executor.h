/* executor: runs one script task on the executor thread: maps each action to x11.h calls,
 * journals every step with its screenshots, enforces budgets, honours cancel and dry run.
 * Internal to the scheduler (scheduler.c owns the thread and the X connection). */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#include "ipc.h"
#include "journal.h"
#include "shotwriter.h"
#include "x11.h"

enum executor_stop {
	EXECUTOR_RUN = 0,
	EXECUTOR_CANCEL,   /* the user cancelled the task */
	EXECUTOR_SHUTDOWN, /* holod is stopping */
	EXECUTOR_KILL,     /* the kill switch fired (Escape pressed twice on a real keyboard) */
};

struct executor_task {
	int64_t id;
	const struct ipc_task_request *req;
	unsigned settle_ms, max_steps, max_seconds; /* effective values */
	atomic_int *stop;                           /* enum executor_stop, polled at safe points */
};

struct executor_env {
	struct journal *journal;
	struct shotwriter *writer;
	void (*progress)(void *userdata); /* after each journaled step */
	void *userdata;
};

/* The outcome of a task. `result` and `error` are malloc'd (or NULL). */
struct executor_outcome {
	enum ipc_task_status status;
	char *result;
	char *error;
};

/* Runs `t` on display `*d` (opened lazily here from `display_name` when *d is NULL, and closed
 * again when the connection fails so the next task reconnects). */
void executor_run(const struct executor_env *env, struct x11_display **d, const char *display_name,
		  const struct executor_task *t, struct executor_outcome *ret);
