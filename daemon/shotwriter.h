/* shotwriter: encodes, writes and hashes step screenshots on its own threads, off the executor's
 * critical path, and journals each one once its file is on disk (fsync'd and renamed into
 * place), so a journaled screenshot always has an intact PNG with the recorded sha256.
 *
 * Jobs go through a bounded queue (SHOTWRITER_QUEUE_MAX frames): when the writer falls behind,
 * shotwriter_submit blocks the executor rather than growing memory without bound.
 *
 * A screenshot that cannot be written (a full disk) is neither journaled nor left half-written;
 * its task's first such failure is kept for the executor, which fails the task with it. */
#pragma once

#include <stdint.h>

#include "journal.h"
#include "x11.h"

#define SHOTWRITER_QUEUE_MAX 16
/* PNG encoding dominates (about 50 ms for 1280x800 on a loaded core) and every step makes two
 * screenshots: a few encoders in parallel keep the queue from throttling the executor. */
#define SHOTWRITER_THREADS 3

struct shotwriter;

/* `state_dir` holds screenshots/<task>/<index>-<which>.png. Removes the partial files
 * (<name>.png.tmp) a killed holod left there; call it once the state directory is locked.
 * `written(userdata)` is called on the writer thread after each journaled screenshot. NULL +
 * errno on failure. */
struct shotwriter *shotwriter_create(const char *state_dir, struct journal *j,
				     void (*written)(void *userdata), void *userdata);
/* Takes ownership of `frame` (also on failure). which: "before" or "after". */
int shotwriter_submit(struct shotwriter *w, int64_t task_id, int index, const char *which,
		      struct x11_frame *frame);
/* Blocks until every job submitted so far is written or has failed (any thread but a writer's). */
void shotwriter_sync(struct shotwriter *w);
/* The first screenshot of task `task_id` that could not be encoded, written or journaled (a full
 * disk: -ENOSPC): its -errno, with `err` set to a message naming the file; 0 when none has failed
 * so far. Jobs still queued are not waited for: call shotwriter_sync first to include them. Only
 * the failure of the most recent task that had one is kept. */
int shotwriter_task_error(struct shotwriter *w, int64_t task_id, char *err, size_t errlen);
/* Writes every queued job, then stops the thread. Accepts NULL. */
void shotwriter_destroy(struct shotwriter *w);
