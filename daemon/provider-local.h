/* The local engine's sequence jobs that the local provider (provider-local.c) and grounding
 * (ground.c) share: a screenshot's encode, and the stop checks of every job.
 *
 * DESIGN (threads): a job is prepared on the executor thread, which then waits while the model
 * worker (model-worker.h) runs its steps between two batched forwards; the stop flag is the
 * task's, atomic. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "model-worker.h"

struct local_task;

/* An observation's encode: the screenshot encoded from the image as a sequence job of the
 * worker (engine_vision_encode_begin_image(): the preprocessing, on the device where the
 * backend has one, then the tiles), one slice between two batched forwards
 * (MODEL_WORK_VISION), so the other tasks keep decoding. */
struct encode_job {
	struct local_task *a; /* whose progress events; NULL: none (grounding) */
	int tile;	      /* the tile the last one named */
	const atomic_int *stop;
	struct engine_image *img; /* the job's, read by the worker while the caller waits */
	int max_tiles;		  /* 0 or within the checkpoint's budget */
	int n_tiles;
	size_t n_rows;
	struct engine_rows *drop; /* the rows of an observation that left the window */
	struct engine_rows *redo; /* the rows of this observation's earlier screenshot, when its
				   * step paused during its decode and observes again */
	struct engine_vision_job *vj;
	struct engine_rows *rows;
	bool started;
	uint64_t preprocess_us, encode_us, t0;
	char err[256];
};

/* The job takes img (also on failure); max_tiles is clamped to the checkpoint's budget.
 * -ENODEV with err set when the model is not loaded. */
int local_encode_prepare(struct model_worker *w, struct engine_image *img, int max_tiles,
			 struct encode_job *j);
/* The encode's work items (a model_seq_job's next, on the model worker): the resumable encode,
 * then its rows. Returns 1 with *ret_work to run, 0 when the rows are in j->rows, or -errno
 * (err says why, unless stopped). encode_us is the time from its first slice (the
 * preprocessing) to its last, the other tasks' forwards between them included; preprocess_us
 * is the preprocessing slice's. */
int local_encode_step(struct worker_ctx *ctx, struct encode_job *j, int r, struct model_work *ret_work);
/* The image, and what the job left when it ended early (the worker stopping: its device's
 * tiles and rows then go as a failed job_close leaves an observation's rows). The rows stay
 * the caller's. */
void local_encode_cleanup(struct encode_job *j);

/* Before each work item of a sequence job: the stop flag (-ECANCELED), then the deadline
 * (-ETIME). */
int local_stop_check(const atomic_int *stop, uint64_t deadline_us);
/* A stop flag or a deadline ended the work, not a failure of its own. */
bool local_stopped(int r);
