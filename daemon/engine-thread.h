/* engine-thread: the one thread of holod that runs the model.
 *
 * DESIGN (where the threads meet):
 *   - The engine thread owns the model, its vision tower, the constrained-decoding masker and
 *     every session. It loads the checkpoint first thing after it starts (so holod serves
 *     scripts while a large model is still being mapped), then takes jobs.
 *   - Other threads (the executor thread running an agent task) hand it jobs through a bounded
 *     queue (ENGINE_THREAD_QUEUE_MAX entries; a submitter waits while it is full) and wait for
 *     each job's result: engine_thread_call() is synchronous. A job is a function that runs on the
 *     engine thread with the engine context; sessions created by jobs are handed back to the
 *     caller as opaque pointers that only later jobs may touch.
 *   - HTTP threads read the load state and the figures of /v1/status under the thread's mutex
 *     (engine_thread_status); the model information is immutable once loaded.
 *   - What is immutable and thread-safe after loading may be read by any thread once the state
 *     is ENGINE_THREAD_READY: the tokenizer (engine.h: encode/decode are thread-safe) and the
 *     step grammar (policy.h). The masker is not (its cache is unlocked): jobs only.
 *   - Long jobs poll the caller's cancel flag themselves (between decoded tokens, between
 *     prefill chunks); the engine thread never blocks on anything but its queue.
 *   - Shutdown: destroy after the scheduler is stopped (no job in flight); jobs still queued
 *     are answered -ESHUTDOWN. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "policy.h"

/* Jobs waiting at most; a submitter blocks while the queue is full. */
#define ENGINE_THREAD_QUEUE_MAX 8
/* Longest load error kept for /v1/status. */
#define ENGINE_THREAD_MAX_ERROR 512

enum engine_thread_state {
	ENGINE_THREAD_NONE,    /* holod runs without a model */
	ENGINE_THREAD_LOADING,
	ENGINE_THREAD_READY,
	ENGINE_THREAD_FAILED,  /* the load failed: see the error; scripts still work */
};

/* What a job sees. Valid on the engine thread, during the job. */
struct engine_ctx {
	struct engine_model *model;
	struct engine_backend *backend; /* the language model runs here; sessions live on it */
	const struct engine_tokenizer *tok;
	struct engine_vision *vision;
	const struct policy_grammar *grammar;
	struct policy_masker *masker;
	int32_t stop_ids[2]; /* <SPECIAL_12>, </s> */
	size_t n_stop_ids;
};

struct engine_thread;

/* Starts the thread; when model_dir is non-NULL it begins loading it at once, with a backend
 * made from `backend` (NULL: auto; checked with engine_backend_resolve() by the caller, so a
 * backend that cannot run the model fails the load with its sentence). NULL + errno. */
struct engine_thread *engine_thread_create(const char *model_dir,
					   const struct engine_backend_options *backend);
/* Joins the thread and frees the model. No job may be in flight. Accepts NULL. */
void engine_thread_destroy(struct engine_thread *et);

enum engine_thread_state engine_thread_state(struct engine_thread *et);
/* Blocks until the load has ended (READY or FAILED) and returns the state. */
enum engine_thread_state engine_thread_wait_loaded(struct engine_thread *et);
/* The load error (a sentence), or NULL. Valid until the thread is destroyed. */
const char *engine_thread_error(struct engine_thread *et);

/* Read-only, thread-safe parts of a READY model (NULL before). */
const struct engine_tokenizer *engine_thread_tokenizer(struct engine_thread *et);
const struct policy_grammar *engine_thread_grammar(struct engine_thread *et);
/* Image tokens per tile of the vision tower (0 before READY). */
int engine_thread_tokens_per_tile(struct engine_thread *et);

/* The "model" member of GET /v1/status: null without a model, else
 * {"path", "name", "state", "error", "backend", "parameters", "weight_bytes", "layers",
 *  "pattern", "hidden", "vocab", "vision", "tokens_per_tile", "threads", "kernels", "load_ms",
 *  "sessions", "state_bytes", and once ready "device", "precision", "device_weight_bytes",
 *  "device_state_bytes", "device_memory_total", "device_memory_free"}. A new reference, or
 *  NULL on OOM. */
json_t *engine_thread_status(struct engine_thread *et);

/* What produced a task, for its provenance: null unless READY, else {"path", "name", "sha256"
 * (config.json + weights index, hashed once at load; null when unreadable), "backend", "device",
 * "precision"}. A new reference, or NULL on OOM. */
json_t *engine_thread_provenance(struct engine_thread *et);

/* Runs fn(ctx, arg) on the engine thread and returns its result. -ENODEV when no model is
 * loaded (NONE or FAILED; waits for a load in progress), -ESHUTDOWN when stopping. */
int engine_thread_call(struct engine_thread *et, int (*fn)(struct engine_ctx *ctx, void *arg),
		       void *arg);

/* Jobs account for the sessions they keep (shown by /v1/status): a created session adds
 * +1/bytes, a destroyed one -1/-bytes, a session that grew or shrank its delta. */
void engine_thread_account(struct engine_thread *et, int sessions_delta, long long bytes_delta);
