/* model worker: the one thread of holod that runs the model.
 *
 * DESIGN (where the threads meet):
 *   - The model worker owns the model, its vision tower, the constrained-decoding masker and
 *     every session. It loads the checkpoint first thing after it starts (so holod serves
 *     scripts while a large model is still being mapped), then takes jobs.
 *   - Other threads (the executor thread running an agent task) hand it jobs through a bounded
 *     queue (MODEL_WORKER_QUEUE_MAX entries; a submitter waits while it is full) and wait for
 *     each job's result: model_worker_call() is synchronous. A job is a function that runs on the
 *     model worker with the worker context; sessions created by jobs are handed back to the
 *     caller as opaque pointers that only later jobs may touch.
 *   - HTTP threads read the load state and the figures of /v1/status under the thread's mutex
 *     (model_worker_status); the model information is immutable once loaded.
 *   - What is immutable and thread-safe after loading may be read by any thread once the state
 *     is MODEL_WORKER_READY: the tokenizer (engine.h: encode/decode are thread-safe) and the
 *     step grammar (policy.h). The masker is not (its cache is unlocked): jobs only.
 *   - Long jobs poll the caller's cancel flag themselves (between decoded tokens, between
 *     prefill chunks); the model worker never blocks on anything but its queue.
 *   - The worker is a scheduler of sequences (continuous batching, issue 16): a sequence job
 *     (model_worker_run) hands it work items on one session, a prefill of some ids or a decode
 *     by an engine generator, and the worker runs the items of every task in batched forwards:
 *     each forward advances every decoding session by one token and adds at most
 *     `prefill_chunk` positions of prefill (shared out in turn among the sessions prefilling),
 *     so a long prefill delays another session's next token by one forward at most. A vision
 *     work item (a screenshot's resumable encode) runs one slice of `vision_slice` steps
 *     between two forwards, the items taking turns, so a screenshot delays a decoder's next
 *     token by one slice at most. Plain jobs (model_worker_call: session creation and close)
 *     run between two forwards. A work item that fails (a stop, a deadline, an engine error) ends its own job;
 *     a forward that fails without changing anything is run again entry by entry so that the
 *     failure lands on the session that caused it, and the others go on.
 *   - Admission: a task's session is admitted only while what it may grow to (its context
 *     plus its prefix snapshot) fits the state budget (the backend's state_limit; on CUDA
 *     without one, the device memory free after the weights, at most the sessions of the
 *     tasks the load's device plan fits: holod plans one task's sessions per display and
 *     warns when fewer fit) beside the sessions admitted before it; others wait in FIFO
 *     order, their position shown by /v1/status and the task (model_worker_wait_position);
 *     one that cannot fit even alone is refused. The executor threads wait in
 *     model_worker_admit(), never the worker.
 *   - A device fault (engine_backend_fault(): a CUDA sticky error) fails the job that met it and
 *     every job after it until the sessions on the broken backend are gone (their tasks fail
 *     and close them); then the worker destroys the backend and creates a new one on the same
 *     device (state LOADING meanwhile, READY again, or FAILED saying why it could not). The
 *     model, tokenizer, vision tower and grammar are not the backend's and stay.
 *   - Shutdown: destroy after the scheduler is stopped (no job in flight); jobs still queued
 *     are answered -ESHUTDOWN. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "policy.h"

/* Jobs waiting at most; a submitter blocks while the queue is full. */
#define MODEL_WORKER_QUEUE_MAX 8
/* Longest load error kept for /v1/status. */
#define MODEL_WORKER_MAX_ERROR 512

enum model_worker_state {
	MODEL_WORKER_NONE, /* holod runs without a model */
	MODEL_WORKER_LOADING,
	MODEL_WORKER_READY,
	MODEL_WORKER_FAILED, /* the load failed: see the error; scripts still work */
};

/* What a job sees. Valid on the model worker, during the job. */
struct worker_ctx {
	struct engine_model *model;
	struct engine_backend *backend; /* the language model runs here; sessions live on it */
	const struct engine_tokenizer *tok;
	struct engine_vision *vision;
	const struct policy_grammar *grammar; /* a holo3 step */
	struct policy_masker *masker;
	const struct policy_grammar *nano_grammar; /* a holo-nano step */
	struct policy_masker *nano_masker;
	const struct policy_grammar *point_grammar; /* a grounding's answer */
	struct policy_masker *point_masker;
	int32_t stop_ids[2]; /* <SPECIAL_12>, </s> */
	size_t n_stop_ids;
};

struct model_worker;

/* Starts the thread; when model_dir is non-NULL it begins loading it at once, with a backend
 * made from `backend` (NULL: auto; checked with engine_backend_resolve() by the caller, so a
 * backend that cannot run the model fails the load with its sentence). NULL + errno. */
struct model_worker *model_worker_create(const char *model_dir, const struct engine_backend_options *backend);
/* Joins the thread and frees the model. No job may be in flight. Accepts NULL. */
void model_worker_destroy(struct model_worker *et);

enum model_worker_state model_worker_state(struct model_worker *et);
/* Blocks until the load has ended (READY or FAILED) and returns the state. */
enum model_worker_state model_worker_wait_loaded(struct model_worker *et);
/* The load error (a sentence), or NULL. Valid until the thread is destroyed. */
const char *model_worker_error(struct model_worker *et);

/* Read-only, thread-safe parts of a model once loaded (NULL before the load succeeded; they stay
 * while a backend is recreated after a device fault). */
const struct engine_tokenizer *model_worker_tokenizer(struct model_worker *et);
const struct policy_grammar *model_worker_grammar(struct model_worker *et);
/* Image tokens per tile of the vision tower (0 before the load succeeded). */
int model_worker_tokens_per_tile(struct model_worker *et);
/* The vision tower (immutable: its preprocessing may run on any thread; its encodes are jobs'),
 * NULL before the load succeeded. */
const struct engine_vision *model_worker_vision(struct model_worker *et);

/* The "model" member of GET /v1/status: null without a model, else
 * {"path", "name", "state", "error", "backend", "parameters", "weight_bytes", "layers",
 *  "pattern", "hidden", "vocab", "vision", "tokens_per_tile", "threads", "kernels", "load_ms",
 *  "sessions", "state_bytes", "device_resets" (backends recreated after a device fault), "load"
 *  once the weights began loading ({"bytes", "total": checkpoint bytes prepared so far and in all,
 *  "bytes_per_second", "done"}: engine_backend_options.progress; with --weights q8|q4 the
 *  bytes quantized), and once ready "device", "precision", "weights" (the linear layers'
 *  format: "q8", "q4" or the checkpoint's dtype), "ssm_state", "device_weight_bytes" (the
 *  weights the backend holds: the quantized layers' bytes in place of their source's),
 *  "device_state_bytes", "device_memory_total", "device_memory_free"}, and "batching":
 *  {"prefill_chunk", "batches" (forwards of sequence work), "sequences" (jobs in the batch
 *  now), "largest_batch" (sessions in one forward at most), "vision_slice", "vision" (vision
 *  encodes in flight), "vision_slices" (slices run), "budget_bytes" (admission; null:
 *  none), "reserved_bytes", "waiting": [{"task", "position"}...]}. A new reference, or
 *  NULL on OOM. */
json_t *model_worker_status(struct model_worker *et);

/* What produced a task, for its provenance: null unless READY, else {"path", "name", "sha256"
 * (config.json + weights index, hashed once at load; null when unreadable), "backend", "device",
 * "precision", "ssm_state", "weights", "device_weight_bytes"}. A new reference, or NULL on OOM. */
json_t *model_worker_provenance(struct model_worker *et);

/* Runs fn(ctx, arg) on the model worker and returns its result. -ENODEV when no model is
 * loaded (NONE or FAILED; waits for a load in progress), -ESHUTDOWN when stopping. */
int model_worker_call(struct model_worker *et, int (*fn)(struct worker_ctx *ctx, void *arg), void *arg);

/* Prefill positions one batched forward takes at most (--batch-prefill-chunk). */
#define MODEL_WORKER_DEFAULT_PREFILL_CHUNK 256
#define MODEL_WORKER_MAX_PREFILL_CHUNK 65536
/* Sets it (1..MODEL_WORKER_MAX_PREFILL_CHUNK); call before the first job. -EINVAL. */
int model_worker_set_prefill_chunk(struct model_worker *et, unsigned tokens);

/* Vision steps one slice of a resumable encode runs at most between two forwards
 * (engine_vision_encode_advance(): on the CPU a ViT block or half the projector of a tile). */
#define MODEL_WORKER_DEFAULT_VISION_SLICE 1
#define MODEL_WORKER_MAX_VISION_SLICE 1024
/* Sets it (1..MODEL_WORKER_MAX_VISION_SLICE); call before the first job. -EINVAL. */
int model_worker_set_vision_slice(struct model_worker *et, unsigned steps);

/* What a sequence job asks of the worker next: one work item on one session. */
enum model_work_kind {
	MODEL_WORK_PREFILL, /* append ids[0..n) (refs: NULL or [n] image rows) in chunks */
	MODEL_WORK_DECODE,  /* step `gen` (an engine generator over `session`) until it ends */
	MODEL_WORK_VISION,  /* advance `vision` (a resumable encode) until every tile is encoded */
};

struct model_work {
	enum model_work_kind kind;
	struct engine_session *session;
	const int32_t *ids;
	const struct engine_row_ref *refs;
	size_t n;
	enum engine_logits want; /* of the last position: NONE or LAST (into logits[vocab]) */
	float *logits;
	struct engine_generator *gen;
	struct engine_vision_job *vision;
};

/* A job the worker runs as a state machine (on the worker, like a plain job's function):
 * next() is called first with r = 0 and then each time its work item ended, with the item's
 * result (0; the generator's error; the forward's error; the encoder's error; check()'s
 * error). It fills *ret_work and returns 1 to go on, or returns the job's result (0 or a
 * negative errno). check(), when set, runs before every prefill chunk and every vision slice:
 * a negative errno (a stop, a deadline) ends the item with it. The ids, refs and generator of a work item
 * stay valid until next() is called. */
struct model_seq_job {
	int (*next)(struct worker_ctx *ctx, void *arg, int r, struct model_work *ret_work);
	int (*check)(void *arg);
	void *arg;
};

/* Runs a sequence job on the worker beside the others and returns its result; the same
 * errors as model_worker_call(). */
int model_worker_run(struct model_worker *et, const struct model_seq_job *job);

/* Forwards the worker has run (batches of sequence work): what the fairness of the scheduler
 * is counted in. Any thread. */
unsigned long long model_worker_batches(struct model_worker *et);
/* Slices of vision work the worker has run. Any thread. */
unsigned long long model_worker_vision_slices(struct model_worker *et);

/* Admission of task `task`'s session: it holds up to `copies` states of up to max_tokens
 * positions at once (the session, and a snapshot of it taken before decoding) and a snapshot
 * of prefix_tokens; waits (FIFO, polling *stop every 50 ms: nonzero stops it) until that fits
 * the state budget beside the sessions admitted before, or until deadline_us (time_mono_us();
 * UINT64_MAX: none). Returns 0 with *ret_bytes reserved (give them back with
 * model_worker_release()); -ECANCELED when stopped; -ETIME past the deadline; -ENODEV without a
 * model; -EFBIG when it cannot fit even alone (err says how much it needs and what the budget
 * is). Called from the task's thread, never the worker. */
int model_worker_admit(struct model_worker *et, long long task, int max_tokens, int copies, int prefix_tokens,
		       const atomic_int *stop, uint64_t deadline_us, uint64_t *ret_bytes, char *err,
		       size_t errlen);
void model_worker_release(struct model_worker *et, uint64_t bytes);
/* Task `task`'s position among the sessions waiting for admission (1: next), or 0. */
int model_worker_wait_position(struct model_worker *et, long long task);

/* Jobs account for the sessions they keep (shown by /v1/status): a created session adds
 * +1/bytes, a destroyed one -1/-bytes, a session that grew or shrank its delta. */
void model_worker_account(struct model_worker *et, int sessions_delta, long long bytes_delta);
