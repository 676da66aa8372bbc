/* shotwriter: encodes, writes and hashes step screenshots on its own threads, off the executor's
 * critical path, and journals each one once its file is on disk (fsync'd and renamed into
 * place), so a journaled screenshot always has an intact PNG with the recorded sha256.
 *
 * Jobs go through a bounded queue (SHOTWRITER_QUEUE_MAX frames): when the writer falls behind,
 * shotwriter_submit blocks the executor rather than growing memory without bound. */
#pragma once

#include <stdint.h>

#include "journal.h"
#include "x11.h"

#define SHOTWRITER_QUEUE_MAX 16
/* PNG encoding dominates (about 50 ms for 1280x800 on a loaded core) and every step makes two
 * screenshots: a few encoders in parallel keep the queue from throttling the executor. */
#define SHOTWRITER_THREADS 3

struct shotwriter;

/* `state_dir` holds screenshots/<task>/<index>-<which>.png. `written(userdata)` is called on the
 * writer thread after each journaled screenshot. NULL + errno on failure. */
struct shotwriter *shotwriter_create(const char *state_dir, struct journal *j,
				     void (*written)(void *userdata), void *userdata);
/* Takes ownership of `frame` (also on failure). which: "before" or "after". */
int shotwriter_submit(struct shotwriter *w, int64_t task_id, int index, const char *which,
		      struct x11_frame *frame);
/* Writes every queued job, then stops the thread. Accepts NULL. */
void shotwriter_destroy(struct shotwriter *w);

