/* scheduler: the task queue of the displays holod drives, and one executor thread per display
 * that runs tasks one at a time, in FIFO order.
 *
 * DESIGN (who owns what, where the threads meet):
 *   - main thread: creates and destroys everything, waits for signals, calls scheduler_stop.
 *   - HTTP threads (libmicrohttpd, one per connection): submit, cancel, read a snapshot, and wait
 *     for progress (scheduler_wait); they read task and step data from the journal, never from
 *     the executor.
 *   - executor thread (one per display): owns its display's X connection and kill switch (Xlib
 *     is not thread-safe, so no other thread touches them), the running task's request and its
 *     budgets; writes tasks and steps to the journal; hands frames to the screenshot writer.
 *     Instruction tasks on several displays share the one model worker: their jobs queue
 *     there (model-worker.h).
 *   - one queue serves every display: an idle executor takes the oldest task that names its
 *     display or none, so a task runs on the display it asks for or on the first free one, and
 *     no display ever runs two tasks at once. Task ids are the journal's, global.
 *   - screenshot writer thread: see shotwriter.h; it journals screenshot rows on its own.
 *   - a step that waits for its user (ask_user's reply, an --approve gate) blocks its executor
 *     thread in executor_env.wait_user: its struct executor_wait, on that thread's stack, hangs
 *     off the running task under the lock until an HTTP thread answers it (scheduler_answer,
 *     which fills it under the lock and broadcasts `changed`), it times out or the task stops
 *     (polled every 20 ms: cancel sets the atomic flag without a broadcast).
 *   The queue, each display's `running` pointer, the stop flag and the progress counter are guarded by the
 *   scheduler's mutex; a task's cancel flag is atomic so the executor can poll it without the
 *   lock. Every journal change that a waiter may care about bumps the progress counter and
 *   broadcasts `changed`, which is how event streams and POST /v1/actions learn of progress. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "agent.h"
#include "executor.h"
#include "ipc.h"
#include "journal.h"
#include "shotwriter.h"

struct scheduler;

/* Displays one scheduler drives at most. */
#define SCHEDULER_MAX_DISPLAYS 16

struct scheduler_config {
	/* X display names, one executor each (1..SCHEDULER_MAX_DISPLAYS, distinct); none
	 * (n_displays 0): one executor on $DISPLAY at connect time. */
	const char *const *displays;
	size_t n_displays;
	unsigned settle_ms; /* defaults for requests that leave them unset */
	unsigned max_steps;
	unsigned max_seconds;
	unsigned kill_switch_ms; /* double-Escape window; 0: no kill switch */
	/* what a person's input on a display does to its running task, for tasks that leave it
	 * unset (IPC_TAKEOVER_DEFAULT here: pause) */
	enum ipc_takeover takeover;
	unsigned ask_timeout_s;			     /* an ask_user step's wait for its reply */
	enum ipc_approve approve;		     /* the tasks' default approval mode (not DEFAULT) */
	unsigned approve_timeout_s;		     /* a held action's wait for approval */
	const struct approval_rules *approval_rules; /* outlives the scheduler */
	const char *state_dir;			     /* screenshot paths of the journal are relative to it */
	unsigned prune_days;			     /* automatic retention after each task; 0: off */
	struct agent_config agent; /* instruction tasks (agent.worker may run without a model) */
};

/* Retention (--prune-days): removes the tasks that finished more than `days` days ago with
 * their steps and screenshots, logging what was freed; does nothing for 0. */
void scheduler_prune_old(struct journal *j, const char *state_dir, unsigned days);

/* Starts the executor thread. The journal and the writer must outlive the scheduler; `cfg`'s
 * strings are copied. NULL + errno on failure. */
struct scheduler *scheduler_create(const struct scheduler_config *cfg, struct journal *j,
				   struct shotwriter *w);
/* Stops (see scheduler_stop) and frees. Accepts NULL. */
void scheduler_destroy(struct scheduler *s);

/* Journals a new task as 'queued' and appends it to the queue; takes ownership of `req` (also
 * on failure). -ENXIO when req->options.display names no display of this scheduler,
 * -ESHUTDOWN once stopping. */
int scheduler_submit(struct scheduler *s, struct ipc_task_request *req, int64_t *ret_id);

/* Cancels a task: a queued one becomes 'cancelled' at once (returns 0), the running one stops at
 * the next safe point (returns 1). -ENOENT unknown id, -EALREADY already finished. */
int scheduler_cancel(struct scheduler *s, int64_t id);

/* Cancels every queued task (now) and every running one (at its next safe point), as
 * scheduler_cancel does each; *ret_cancelled and *ret_stopping receive their ids (new arrays).
 * Tasks submitted later are not affected. */
int scheduler_cancel_all(struct scheduler *s, json_t **ret_cancelled, json_t **ret_stopping);

/* {"queue": [ids...], "displays": [{"name": name|null, "running": id|null,
 *  "connected": bool, "waiting": what the running task waits for|null}...]}: the displays in
 * the order of the configuration. */
json_t *scheduler_snapshot(struct scheduler *s);

/* What running task `id` waits for from its user, or NULL (not running, or not waiting):
 * {"for": "reply"|"approval", "since_us": T, ...the step's details (docs/api.md)}. */
json_t *scheduler_waiting(struct scheduler *s, int64_t id);

/* Answers what running task `id` waits for: a reply's `text` (kind EXECUTOR_WAIT_REPLY), or an
 * approval (approve true) or denial with its reason `text` (may be NULL); uid and pid say who
 * (the journal keeps them). 0; or -errno with a sentence in `why`: -ENOENT no such task,
 * -ESRCH it has finished, -EBUSY it does not wait for this (queued, running, or waiting for
 * the other kind), -EALREADY the wait was answered already (a second approve). */
int scheduler_answer(struct scheduler *s, int64_t id, enum executor_wait_kind kind, bool approve,
		     const char *text, unsigned uid, int pid, char *why, size_t whylen);
/* Pauses running task `id` between two steps (holoctl pause): it finishes the step under way
 * and holds before the next, its session kept, until scheduler_resume or a stop. 1: it will
 * hold at its next step; 0: it already holds (or was asked to). -ENOENT unknown, -EBUSY
 * queued (only a running task pauses), -EALREADY finished. */
int scheduler_pause(struct scheduler *s, int64_t id);
/* Hands a paused task back (or withdraws a pause not reached yet): it looks at the screen
 * again and goes on. 0; -EINVAL running but not paused; -ENOENT, -EBUSY, -EALREADY as above. */
int scheduler_resume(struct scheduler *s, int64_t id);
/* 0: task `id` is not paused; 1: a pause was asked and is not reached yet; 2: it holds. */
int scheduler_paused(struct scheduler *s, int64_t id);

/* The feed of the tasks' progress events (feed.h), which the executors and the model worker
 * fill and event streams follow; it wakes scheduler_wait's waiters (without moving
 * scheduler_journal_progress). Lives as long as the scheduler. */
struct feed *scheduler_feed(struct scheduler *s);
/* How many tasks run or wait before queued task `id` (the queued tasks before it, and the
 * running ones on the displays it may run on); -ENOENT when it is not queued. */
int scheduler_queue_position(struct scheduler *s, int64_t id);
/* The part of the progress counter that journal and queue changes moved: a waiter that sees
 * it unchanged has nothing new to read from the journal. */
uint64_t scheduler_journal_progress(struct scheduler *s);

/* The progress counter; scheduler_wait blocks until it differs from `seen` or timeout_ms passes,
 * and returns the current value. Stopping moves it too (when it starts and when it is done). */
uint64_t scheduler_progress(struct scheduler *s);
uint64_t scheduler_wait(struct scheduler *s, uint64_t seen, unsigned timeout_ms);
void scheduler_notify(struct scheduler *s);
/* True once scheduler_stop has joined the executor: no task will change any more. */
bool scheduler_stopped(struct scheduler *s);

/* What the kill switch of display `index` (in configuration order) does when it fires (called
 * from its thread): that display's running task stops at its next safe point (between decoded
 * tokens for an agent) and becomes 'cancelled'. Tasks on other displays run on. */
void scheduler_kill_switch(struct scheduler *s, size_t index);

/* What the takeover listener of display `index` does when a person's input arrives there
 * (called from its thread, for every such event): the running task pauses at once (its step's
 * action, when not run yet, is not run), is cancelled, or goes on, as its takeover mode says. */
void scheduler_takeover(struct scheduler *s, size_t index);

/* Begins shutdown: refuses new tasks, marks queued tasks 'interrupted', stops the running task
 * at its next safe point (it is marked 'interrupted' with `reason`), releases held keys and
 * buttons, joins the executor and wakes every waiter. Idempotent. Main thread only. */
void scheduler_stop(struct scheduler *s, const char *reason);
