/* executor: runs one script task on the executor thread: maps each action to x11.h calls,
 * journals every step with its screenshots, enforces budgets, honours cancel and dry run.
 * The agent (agent.c) drives the same step function with the model's actions, so a model's
 * click and a script's click take one code path. Internal to the scheduler (scheduler.c owns
 * the thread and the X connection). */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "feed.h"
#include "ipc.h"
#include "approval.h"
#include "journal.h"
#include "shotwriter.h"
#include "x11.h"

enum executor_stop {
	EXECUTOR_RUN = 0,
	EXECUTOR_CANCEL,   /* the user cancelled the task */
	EXECUTOR_SHUTDOWN, /* holod is stopping */
	EXECUTOR_KILL,	   /* the kill switch fired (Escape pressed twice on a real keyboard) */
};

#define EXECUTOR_KILL_SWITCH_ERROR "stopped by the kill switch (Escape pressed twice on the keyboard)"

struct executor_task {
	int64_t id;
	const struct ipc_task_request *req;
	unsigned settle_ms, max_steps, max_seconds; /* effective values */
	unsigned ask_timeout_s;			    /* an ask_user step's wait for the reply */
	enum ipc_approve approve;		    /* the task's approval mode (not DEFAULT) */
	unsigned approve_timeout_s;		    /* a held action's wait for approval */
	atomic_int *stop;			    /* enum executor_stop, polled at safe points */
	/* holoctl pause (or a takeover) asked, read between decoded tokens: a step's decode then
	 * stops and the step is decided again after the pause (agent.c); NULL: never */
	const atomic_bool *pause;
};

/* What a step waits for from the task's user (docs/api.md, "The user in the loop"). */
enum executor_wait_kind {
	EXECUTOR_WAIT_REPLY = 1, /* ask_user: the text of `holoctl reply` */
	EXECUTOR_WAIT_APPROVAL,	 /* a held action: `holoctl approve` or `deny` */
};

/* "reply", "approval". */
const char *executor_wait_kind_to_string(enum executor_wait_kind k);

/* One wait, on the executor's stack while the step waits. The waiter fills the request; the
 * answering thread (HTTP) fills the answer under the scheduler's lock. */
struct executor_wait {
	enum executor_wait_kind kind;
	json_t *details;      /* what the user is shown: the question, or the held action (owned
				 by the step; the scheduler shows a copy) */
	uint64_t timeout_us;  /* no answer within it: -ETIMEDOUT */
	uint64_t deadline_us; /* the task's max_seconds deadline (monotonic): -ETIME */
	/* The answer. */
	bool approved; /* EXECUTOR_WAIT_APPROVAL: approve (true) or deny */
	char *text;    /* the reply, or the denial's reason (NULL: none); malloc'd, the
			  waiter frees it */
	unsigned uid;  /* who answered: the peer's uid and pid on the socket */
	int pid;
	uint64_t answered_us; /* when (real time) */
};

struct secrets;

struct executor_env {
	struct journal *journal;
	struct shotwriter *writer;
	/* The journal's screenshot paths are relative to it; launch steps write their programs'
	 * output to <state_dir>/logs/<task>.log. NULL: none (launch then uses ./logs/). */
	const char *state_dir;
	void (*progress)(void *userdata); /* after each journaled step */
	void *userdata;
	struct feed *feed; /* progress events for the task's followers (feed.h); may be NULL */
	/* Locates a grounded action's target on `frame` (the primary monitor as captured) and
	 * writes its point in model space (0..1000 over the frame); NULL when holod has no model.
	 * deadline_us: the task's max_seconds deadline (monotonic).
	 * 0, -ECANCELED / -ETIME (stopped), or -errno with a sentence in err. Called on the
	 * executor thread. */
	int (*ground)(void *ground_ctx, const struct executor_task *t, uint64_t deadline_us,
		      const struct x11_frame *frame, const char *target, int *ret_mx, int *ret_my, char *err,
		      size_t errlen);
	void *ground_ctx;
	/* Shows `w` as what task `t` waits for (status, event stream) and blocks until it is
	 * answered (0, w's answer filled), w->timeout_us passes (-ETIMEDOUT), the task is stopped
	 * (-ECANCELED) or its deadline passes (-ETIME). Called on the executor thread; uses
	 * `userdata`. */
	int (*wait_user)(void *userdata, const struct executor_task *t, struct executor_wait *w);
	/* Between two steps: holds while the task is paused (holoctl pause) until it is resumed
	 * or stopped. 0: it was not paused; 1: it was, and is resumed; -ECANCELED: stopped while
	 * paused. *ret_held_us: how long it held (its max_seconds budget does not count it);
	 * *ret_takeover: a person's input on the display paused it (scheduler_takeover).
	 * Called on the executor thread; uses `userdata`; NULL: tasks never pause. */
	int (*pause_point)(void *userdata, const struct executor_task *t, uint64_t *ret_held_us,
			   bool *ret_takeover);
	/* Whether a person's input on the display asked task `t` to pause (a takeover not held
	 * yet): the step's action is then not run. Executor thread; NULL: never. */
	bool (*taken_over)(void *userdata, const struct executor_task *t);
	/* The values of {{secret:NAME}} in `write` (secrets.h); NULL: none. */
	const struct secrets *secrets;
	/* What --approve risky holds (approval.h); NULL: the built-in rules are not loaded, and
	 * risky holds every action (fails closed). */
	const struct approval_rules *approval_rules;
};

/* The outcome of a task. `result` and `error` are malloc'd (or NULL). */
struct executor_outcome {
	enum ipc_task_status status;
	char *result;
	char *error;
};

/* Fills *ret: `result` is taken over (malloc'd or NULL); `format` (NULL: no error) is the
 * error text. */
void executor_outcome_set(struct executor_outcome *ret, enum ipc_task_status status, char *result,
			  const char *format, ...) __attribute__((format(printf, 4, 5)));

/* The outcome of a task its stop flag ended: the kill switch's error, 'interrupted' for a
 * shutdown, or 'cancelled' with the printf-style `cancelled` message. */
void executor_outcome_stopped(struct executor_outcome *ret, const struct executor_task *t,
			      const char *cancelled, ...) __attribute__((format(printf, 3, 4)));

/* One task's use of the display, between executor_begin and executor_end. */
struct executor_run {
	const struct executor_env *env;
	const struct executor_task *t;
	struct x11_display *d;
	const char *display_name; /* for launched programs' DISPLAY */
	struct x11_rect monitor;  /* the primary monitor: what is captured and mapped against */
	int root_w, root_h;
	uint64_t deadline_us; /* monotonic, from max_seconds */
	/* Set by the caller: executor_step hashes the step's screens (stuck.h) into
	 * screen_before / screen_after ("" when not captured). */
	bool hash_screens;
	char screen_before[65], screen_after[65];
	/* the step under way, for its progress events (feed.h): index and start (monotonic) */
	int step;
	uint64_t step_t0_us;
	/* Set by executor_step when the step typed a secret: its screenshots are sensitive. */
	bool typed_secret;
	/* The keys the task's key_down steps hold down: --approve risky counts them with a later
	 * step's keys (approval.h). */
	struct approval_held held_keys;
};

/* Journals the task's provenance (docs/journal.md): holod's version, the display and its
 * screen size (null when d is NULL), the effective budgets, and the members of `extra` (may be
 * NULL; not taken). A failure to journal it is logged, not fatal. */
void executor_record_provenance(const struct executor_env *env, const char *display_name,
				const struct executor_task *t, const struct x11_display *d, json_t *extra);

/* Opens the display if needed (*d NULL), records the task's provenance with `provenance`'s
 * members added (see executor_record_provenance) and fills *ret. -errno with err filled on
 * failure. */
int executor_begin(const struct executor_env *env, struct x11_display **d, const char *display_name,
		   const struct executor_task *t, json_t *provenance, struct executor_run *ret, char *err,
		   size_t errlen);
/* Releases every held key and button; closes *d when that fails or when last_error says the
 * connection was lost, so the next task reconnects. */
void executor_end(struct executor_run *run, struct x11_display **d, int last_error);
/* True for errors that mean the X connection is gone. */
bool executor_connection_lost(int err);
/* Sleeps in slices: 0, -ECANCELED when the task is stopped, -ETIME at its deadline. */
int executor_sleep(struct executor_run *run, uint64_t usec);

/* What an action's result adds when its keys went to the root window (no window had the
 * focus): " (" EXECUTOR_NO_FOCUS_WARNING ")". */
#define EXECUTOR_NO_FOCUS_WARNING IPC_NO_FOCUS_WARNING

/* One journaled action. `before` (owned, may be NULL: captured here) is the screenshot the step
 * is decided on; `agent` (may be NULL) is what the model said. Writes the step's factual result
 * (on success) or error text. Returns 0, 1 when the action was `answer` (*ret_answer receives
 * its content), or a negative errno: -ECANCELED / -ETIME (stopped during a wait), or a failure;
 * *ret_action_failed tells a failure of the action itself (mapping, injection) from one of the
 * machinery (capture, journal). An agent's step (`agent` set) that ran its action, or whose
 * action failed, feeds its "acted" progress event before it is journaled (feed.h). */
int executor_step(struct executor_run *run, int index, const struct ipc_action *a, enum ipc_coords coords,
		  struct x11_frame *before, uint64_t capture_us, const struct journal_agent_step *agent,
		  char *result, size_t rlen, char **ret_answer, bool *ret_action_failed, char *err,
		  size_t errlen);

/* Runs `t` on display `*d` (opened lazily here from `display_name` when *d is NULL, and closed
 * again when the connection fails so the next task reconnects). */
void executor_run(const struct executor_env *env, struct x11_display **d, const char *display_name,
		  const struct executor_task *t, struct executor_outcome *ret);
