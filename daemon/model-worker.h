/* engine-thread: the one thread of holod that runs the model.
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
 *   - A device fault (engine_backend_fault(): a CUDA sticky error) fails the job that met it and
 *     every job after it until the sessions on the broken backend are gone (their tasks fail
 *     and close them); then the worker destroys the backend and creates a new one on the same
 *     device (state LOADING meanwhile, READY again, or FAILED saying why it could not). The
 *     model, tokenizer, vision tower and grammar are not the backend's and stay.
 *   - Shutdown: destroy after the scheduler is stopped (no job in flight); jobs still queued
 *     are answered -ESHUTDOWN. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "policy.h"

/* Jobs waiting at most; a submitter blocks while the queue is full. */
#define MODEL_WORKER_QUEUE_MAX 8
/* Longest load error kept for /v1/status. */
#define MODEL_WORKER_MAX_ERROR 512

enum model_worker_state {
	MODEL_WORKER_NONE,    /* holod runs without a model */
	MODEL_WORKER_LOADING,
	MODEL_WORKER_READY,
	MODEL_WORKER_FAILED,  /* the load failed: see the error; scripts still work */
};

/* What a job sees. Valid on the model worker, during the job. */
struct worker_ctx {
	struct engine_model *model;
	struct engine_backend *backend; /* the language model runs here; sessions live on it */
	const struct engine_tokenizer *tok;
	struct engine_vision *vision;
	const struct policy_grammar *grammar;
	struct policy_masker *masker;
	int32_t stop_ids[2]; /* <SPECIAL_12>, </s> */
	size_t n_stop_ids;
};

struct model_worker;

/* Starts the thread; when model_dir is non-NULL it begins loading it at once, with a backend
 * made from `backend` (NULL: auto; checked with engine_backend_resolve() by the caller, so a
 * backend that cannot run the model fails the load with its sentence). NULL + errno. */
struct model_worker *model_worker_create(const char *model_dir,
					const struct engine_backend_options *backend);
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

/* The "model" member of GET /v1/status: null without a model, else
 * {"path", "name", "state", "error", "backend", "parameters", "weight_bytes", "layers",
 *  "pattern", "hidden", "vocab", "vision", "tokens_per_tile", "threads", "kernels", "load_ms",
 *  "sessions", "state_bytes", "device_resets" (backends recreated after a device fault), "load"
 *  once the weights began loading ({"bytes", "total": checkpoint bytes prepared so far and in all,
 *  "bytes_per_second", "done"}: engine_backend_options.progress), and once ready "device", "precision", "device_weight_bytes",
 *  "device_state_bytes", "device_memory_total", "device_memory_free"}. A new reference, or
 *  NULL on OOM. */
json_t *model_worker_status(struct model_worker *et);

/* What produced a task, for its provenance: null unless READY, else {"path", "name", "sha256"
 * (config.json + weights index, hashed once at load; null when unreadable), "backend", "device",
 * "precision"}. A new reference, or NULL on OOM. */
json_t *model_worker_provenance(struct model_worker *et);

/* Runs fn(ctx, arg) on the model worker and returns its result. -ENODEV when no model is
 * loaded (NONE or FAILED; waits for a load in progress), -ESHUTDOWN when stopping. */
int model_worker_call(struct model_worker *et, int (*fn)(struct worker_ctx *ctx, void *arg),
		      void *arg);

/* Jobs account for the sessions they keep (shown by /v1/status): a created session adds
 * +1/bytes, a destroyed one -1/-bytes, a session that grew or shrank its delta. */
void model_worker_account(struct model_worker *et, int sessions_delta, long long bytes_delta);
