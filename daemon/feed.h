/* feed: a task's progress events during a step, for the followers of its event stream
 * (issue 32): queued behind N, admitted, capture, vision tile i of n, prefill tokens done of
 * total, the thought as it is decoded, the action and its result. Nothing of it is journaled:
 * the journal keeps the steps as before, and an event no one follows is never built.
 *
 * DESIGN (threads, cost):
 *   - Emitters: the executor thread (capture, action) and the model worker (vision, prefill,
 *     decode: from a sequence job's callbacks, while the executor thread waits for the job).
 *     Followers: the HTTP threads of GET /v1/tasks/{id}/events, one subscription each.
 *   - feed_wanted() is one relaxed atomic load while no stream is open anywhere, so an emitter
 *     costs a function call per event when nobody follows; with followers it takes the
 *     feed's mutex to look for the task's subscriptions. feed_progress() checks it before it
 *     builds anything.
 *   - Each subscription queues the lines it has not taken yet, at most FEED_MAX_QUEUED_BYTES:
 *     beyond that, events are dropped and counted, and the follower's next take ends with
 *     {"event": "progress", "phase": "dropped", "events": N}. A slow follower never holds an
 *     emitter back.
 *   - Every emit calls the wake function given at creation (the scheduler's waiters), outside
 *     the feed's mutex.
 *   - A step's "acted" event comes before its journaled "step" event on a stream: the
 *     executor holds the feed's order lock (feed_order_begin/end) from that event until the
 *     step is journaled, and a stream (http.c) holds it from taking its events until it has
 *     read the journal's steps, so a step it reads was journaled after its events were
 *     queued and before they were taken, never between. Lock order: the order lock, then the
 *     feed's mutex or the journal's. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of event lines one subscription keeps waiting at most. */
#define FEED_MAX_QUEUED_BYTES (1024 * 1024)
/* Bytes of the text of one decode event at most (a token's piece of the thought). */
#define FEED_MAX_TEXT_BYTES 4096

struct feed;
struct feed_sub;

/* wake(arg) is called after each emit that queued a line. NULL + errno. */
struct feed *feed_create(void (*wake)(void *arg), void *arg);
/* Every subscription must be gone. Accepts NULL. */
void feed_destroy(struct feed *f);

/* Follows task `task` from now on. Never fails (allocation aborts). */
struct feed_sub *feed_subscribe(struct feed *f, int64_t task);
/* Accepts NULL. */
void feed_unsubscribe(struct feed_sub *s);

/* True when someone follows task `task`. Any thread. */
bool feed_wanted(struct feed *f, int64_t task);

/* Queues {"event": "progress", "task_id": task, "step": step (omitted when < 0),
 * "phase": phase, "elapsed_ms": since step_t0_us (time_mono_us(); omitted when 0), members
 * of json_pack(fmt, ...)} for each follower of the task; builds nothing when there is none.
 * fmt NULL: no more members. f NULL: nothing. */
void feed_progress(struct feed *f, int64_t task, int step, uint64_t step_t0_us, const char *phase,
		   const char *fmt, ...);

/* Queues {"event": "status", "task_id": task, "status": status} for the task's followers: a
 * change of a task's status that its "end" event does not tell (running, paused), sent by
 * the thread that made it after journaling it, so it comes in order with the progress events. */
void feed_status(struct feed *f, int64_t task, const char *status);

/* The order lock (above). f NULL: nothing. */
void feed_order_begin(struct feed *f);
void feed_order_end(struct feed *f);

/* Appends the lines queued for `s` (each ending in '\n') to *buf (malloc'd, *len bytes) and
 * returns how many bytes it appended. */
size_t feed_take(struct feed_sub *s, char **buf, size_t *len);
