/* stuck: notices an instruction task whose steps stopped changing anything (docs/policy.md,
 * "Stuck steps").
 *
 * Two streaks are kept over the task's steps, in order:
 *   - the screen: steps in a row whose screen after the action is the screen before it, all
 *     of them the same screen (the SHA-256 of its pixels);
 *   - the action: steps in a row that repeat one action on one target: the same tool with the
 *     same arguments, the `element` label aside and each point within STUCK_POINT_SLACK of the
 *     streak's first (model space: 10 of 1000; pixels for a script's).
 * When either streak reaches `warn` steps, stuck_step() writes a sentence for the model (which
 * agent.c appends to the tool output of the step); when one reaches `stop`, the verdict is
 * STUCK_STOP and stuck_evidence() describes it for the journal (the task ends `stuck`). 0
 * disables either.
 *
 * Pure: no X, no model, no clock; one per task, used on the executor thread only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ipc.h"
#include "x11.h"

/* How far a repeated action's point may be from the first's and still be "the same target". */
#define STUCK_POINT_SLACK 10
/* Longest warning sentence stuck_step() writes (with its NUL). */
#define STUCK_MAX_WARNING 512

enum stuck_verdict {
	STUCK_NONE,
	STUCK_WARN, /* the warning sentence was written */
	STUCK_STOP, /* a streak reached `stop`: end the task (the warning is written too) */
};

struct stuck_streak {
	size_t first, n; /* steps first .. first + n - 1 */
	char screen[65]; /* the screen streak's SHA-256 */
	json_t *action;	 /* the action streak's first action (owned) */
};

struct stuck {
	unsigned warn, stop;
	struct stuck_streak screen, action;
	const struct stuck_streak *stopped; /* the streak that reached `stop`, or NULL */
};

void stuck_init(struct stuck *s, unsigned warn, unsigned stop);
void stuck_finish(struct stuck *s);

/* Step `index` ran `action` (its JSON form, ipc_action_to_json) on the screen whose pixels hash
 * to `before` and left `after` (either NULL or "": not captured, which ends the screen streak).
 * Writes the sentence for the model into `warning` ("" with STUCK_NONE). */
enum stuck_verdict stuck_step(struct stuck *s, size_t index, const char *action, const char *before,
			      const char *after, char *warning, size_t wlen);

/* The evidence of a STUCK_STOP as a new JSON object (docs/journal.md, tasks.stuck):
 * {"reason": "unchanged_screen"|"repeated_action", "steps": [first, last], "count": n,
 *  "screen_sha256": hex|null, "action": {...}|null, "warn": N, "stop": M}; NULL on OOM. */
json_t *stuck_evidence(const struct stuck *s);

/* The SHA-256 (hex) of a frame's pixels, as stuck_step() compares them. */
void stuck_frame_hash(const struct x11_frame *f, char ret[65]);
