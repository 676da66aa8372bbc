/* The model worker (see the DESIGN comment in model-worker.h). */
#include "model-worker.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "ipc.h"

struct job {
	int (*fn)(struct worker_ctx *ctx, void *arg);
	void *arg;
	const struct model_seq_job *seq; /* a sequence job (fn NULL) */
	int result;
	bool done;
};

/* A sequence job in the batch, with its current work item. Model worker only. */
struct active {
	struct job *j;
	struct model_work w;
	size_t done; /* prefill: positions appended so far */
	size_t take; /* prefill: positions in this forward */
	bool fresh;  /* its work item was set during this forward's preparation */
};

/* A task waiting for admission. */
struct waiter {
	long long task;
	uint64_t bytes;
};

struct model_worker {
	char *dir;			       /* NULL: no model */
	struct engine_backend_options backend; /* as given; resolved by the load */

	pthread_mutex_t lock;
	pthread_cond_t wake; /* model worker: a job was queued, or stopping */
	pthread_cond_t done; /* submitters: a job finished, the queue has room, or the load ended */
	struct job *queue[MODEL_WORKER_QUEUE_MAX];
	size_t head, n_queued;
	bool stopping;
	enum model_worker_state state;
	char error[MODEL_WORKER_MAX_ERROR];
	int sessions;
	long long state_bytes;
	uint64_t load_us;
	int device_resets; /* backends recreated after a device fault */
	/* weight loading (engine_backend_options.progress): checkpoint bytes prepared of total,
	 * since load_t0; the last progress line logged at load_logged_us */
	uint64_t load_done, load_total, load_t0, load_end, load_logged_us;
	bool loaded; /* the load succeeded once: ctx's tokenizer, grammar and vision stay valid
		      * (a backend recreated after a device fault is LOADING again meanwhile) */
	/* Model worker only: the backend's device has failed for good (engine_backend_fault());
	 * it is recreated once no session is left on it. */
	bool device_failed;
	char device_error[MODEL_WORKER_MAX_ERROR / 2];

	/* Written by the model worker before the state becomes READY, immutable afterwards. */
	struct worker_ctx ctx;
	struct engine_model_info info;
	int tokens_per_tile;
	char content_sha256[65]; /* "" when the files could not be read */

	pthread_t thread;
	bool started;

	/* The scheduler of sequences: the active set is the worker's; the counters are read by
	 * status under the lock. */
	unsigned prefill_chunk, vision_slice;
	struct active *active;
	size_t n_active, cap_active, rr, vision_rr;
	size_t n_sequences; /* n_active, for status (under the lock) */
	size_t n_vision;    /* vision items among them, for status (under the lock) */
	unsigned long long batches, vision_slices;
	size_t largest_batch;
	/* Admission, under the lock: the budget (0: none), what admitted tasks reserved, and the
	 * tasks waiting in FIFO order; a session's size at a length, measured when the backend is
	 * made. */
	uint64_t budget, reserved;
	struct waiter *waiters;
	size_t n_waiters, cap_waiters;
	pthread_cond_t admitted;
	/* a session's state: fixed (conv, SSM) + per_pos per position held (KV) */
	uint64_t state_fixed;
	double state_per_pos;
	/* the CUDA plan's tasks: as many as run at once, and those whose sessions fit (-1: no
	 * plan of sessions) */
	int plan_tasks, plan_tasks_fit;
	char plan_warning[1024]; /* why tasks_fit < tasks, or empty */
};

static void set_failed(struct model_worker *et, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static void set_failed(struct model_worker *et, const char *format, ...)
{
	va_list ap;
	pthread_mutex_lock(&et->lock);
	va_start(ap, format);
	vsnprintf(et->error, sizeof(et->error), format, ap);
	va_end(ap);
	et->state = MODEL_WORKER_FAILED;
	pthread_cond_broadcast(&et->done);
	pthread_mutex_unlock(&et->lock);
}

/* Sizes sessions for admission with an empty session of the new backend (then destroyed),
 * and sets the budget its sessions may hold. Model worker, before READY. */
static void admission_setup(struct model_worker *et)
{
	struct engine_backend_info bi;
	struct engine_session *probe = engine_session_create_on(et->ctx.backend, 1);
	uint64_t fixed = 0, full = 0;
	bool sized = probe != NULL;
	if (probe) {
		fixed = engine_session_state_bytes_at(probe, 0);
		full = engine_session_state_bytes_at(probe, ENGINE_SESSION_MAX_TOKENS);
		engine_session_destroy(probe);
	} else {
		log_warning_errno(-errno,
				  "the model %s: cannot size its sessions; tasks are "
				  "admitted without a memory budget",
				  et->dir);
	}
	engine_backend_get_info(et->ctx.backend, &bi);
	uint64_t budget = bi.state_limit;
	/* on a device without a limit: what is free after the weights, less a tenth for the
	 * scratch and the graphs */
	if (!budget && bi.kind == ENGINE_BACKEND_CUDA && bi.memory_free)
		budget = bi.memory_free - bi.memory_free / 10 + bi.state_bytes;
	/* the plan's tasks (main.c: plan_sessions_min sessions each, as many tasks as displays):
	 * the budget holds the sessions of the tasks that fit and no more (the plan counts the
	 * vision tower and the reserve that the device's free memory does not yet show), so the
	 * others wait for admission instead of running out of device memory */
	int per = et->backend.plan_sessions_min >= 1 ? et->backend.plan_sessions_min : 1;
	int tasks = -1, tasks_fit = -1;
	char warning[sizeof(et->plan_warning)] = "";
	if (bi.has_plan && bi.plan.sessions >= 1) {
		tasks = MAX(bi.plan.sessions / per, 1);
		tasks_fit = MIN(bi.plan.sessions_fit / per, tasks);
		/* a task reserves at most `per` sessions as admission sizes them */
		uint64_t at = fixed + (uint64_t)((double)(full - fixed) / ENGINE_SESSION_MAX_TOKENS *
							 (double)bi.plan.context +
						 0.5);
		uint64_t held = (uint64_t)MAX(tasks_fit, 1) * (uint64_t)per * MAX(bi.plan.session, at);
		if (!bi.state_limit && sized && budget > held)
			budget = held;
		if (tasks_fit < tasks) {
			/* cut short only after a device name of hundreds of bytes */
			int n = snprintf(
				warning, sizeof(warning),
				"%s holds the sessions of %d of the %d tasks that may run at once (a "
				"task holds %d sessions of %d tokens, %.1f MiB each, beside %.1f MiB of "
				"weights): the others wait for admission until one ends; fewer "
				"displays, a shorter --context-tokens or smaller --weights would fit "
				"them all",
				bi.device, tasks_fit, tasks, per, bi.plan.context,
				(double)bi.plan.session / (1 << 20), (double)bi.plan.weight_bytes / (1 << 20));
			if (n < 0)
				warning[0] = '\0';
			log_warning("%s", warning);
		} else
			log_info("%s holds the sessions of the %d task%s that may run at once (%d "
				 "sessions of %d tokens each, %d fit)",
				 bi.device, tasks, tasks == 1 ? "" : "s", per, bi.plan.context,
				 bi.plan.sessions_fit);
	}
	pthread_mutex_lock(&et->lock);
	et->plan_tasks = tasks;
	et->plan_tasks_fit = tasks_fit;
	snprintf(et->plan_warning, sizeof(et->plan_warning), "%s", warning);
	et->budget = sized ? budget : 0;
	et->state_fixed = fixed;
	et->state_per_pos = (double)(full - fixed) / ENGINE_SESSION_MAX_TOKENS;
	pthread_mutex_unlock(&et->lock);
}

/* What a session holding n positions costs (a device's KV blocks may round it up a little). */
static uint64_t state_at(const struct model_worker *et, int n)
{
	return et->state_fixed + (uint64_t)(et->state_per_pos * (double)n + 0.5);
}

static void unload(struct worker_ctx *ctx)
{
	policy_masker_destroy(ctx->masker);
	policy_grammar_destroy((struct policy_grammar *)ctx->grammar);
	policy_masker_destroy(ctx->nano_masker);
	policy_grammar_destroy((struct policy_grammar *)ctx->nano_grammar);
	policy_masker_destroy(ctx->point_masker);
	policy_grammar_destroy((struct policy_grammar *)ctx->point_grammar);
	engine_vision_destroy(ctx->vision);
	engine_backend_destroy(ctx->backend);
	engine_model_destroy(ctx->model);
	memset(ctx, 0, sizeof(*ctx));
}

/* Longest part read into the model's content hash: config.json, the weights index, or the JSON
 * header of a single model.safetensors. Larger is not a checkpoint holod loads. */
#define MODEL_WORKER_HASH_MAX_PART (64u << 20)

/* Appends "name\n<size>\n<bytes>" of `size` bytes read from `f` at its position. */
static int hash_part(FILE *f, const char *name, uint64_t size, char **buf, size_t *len)
{
	if (size > MODEL_WORKER_HASH_MAX_PART)
		return -EFBIG;
	char head[NAME_MAX + 32];
	int n = snprintf(head, sizeof(head), "%s\n%llu\n", name, (unsigned long long)size);
	*buf = xrealloc(*buf, *len + (size_t)n + size);
	memcpy(*buf + *len, head, (size_t)n);
	if (size && fread(*buf + *len + n, 1, size, f) != size)
		return ferror(f) ? -EIO : -EBADMSG;
	*len += (size_t)n + size;
	return 0;
}

static int hash_file(const char *dir, const char *name, bool safetensors_header, char **buf, size_t *len)
{
	char *path = path_join(dir, name);
	FILE *f = fopen(path, "rbe");
	int r = 0;

	free(path);
	if (!f)
		return -errno;
	if (safetensors_header) {
		unsigned char le[8];
		uint64_t n = 0;
		if (fread(le, 1, sizeof(le), f) != sizeof(le)) {
			r = -EBADMSG;
			goto close;
		}
		for (int i = 7; i >= 0; i--)
			n = n << 8 | le[i];
		r = hash_part(f, name, n, buf, len);
	} else if (fseeko(f, 0, SEEK_END) == 0) {
		off_t size = ftello(f);
		rewind(f);
		r = size < 0 ? -errno : hash_part(f, name, (uint64_t)size, buf, len);
	} else {
		r = -errno;
	}
close:
	fclose(f);
	return r;
}

/* The model's content hash (provenance of instruction tasks): sha256 over config.json and the
 * weights index (model.safetensors.index.json, or the header of a single model.safetensors),
 * which name every tensor with its dtype, shape and byte range. Computed once, at load. */
static int model_content_hash(const char *dir, char ret[65])
{
	char *buf = NULL;
	size_t len = 0;
	int r = hash_file(dir, "config.json", false, &buf, &len);

	if (r >= 0) {
		r = hash_file(dir, "model.safetensors.index.json", false, &buf, &len);
		if (r == -ENOENT)
			r = hash_file(dir, "model.safetensors", true, &buf, &len);
	}
	if (r >= 0)
		ipc_sha256_hex(buf, len, ret);
	free(buf);
	return r;
}

/* Seconds between two progress lines of a weight load in the log. */
#define MODEL_WORKER_PROGRESS_LOG_US 2000000u

/* engine_backend_options.progress: the figures for the status, and a log line every
 * MODEL_WORKER_PROGRESS_LOG_US and at the end. Runs on the worker, inside the backend's creation. */
static void load_progress(void *arg, uint64_t done, uint64_t total)
{
	struct model_worker *et = arg;
	uint64_t now = time_mono_us();

	pthread_mutex_lock(&et->lock);
	et->load_done = done;
	et->load_total = total;
	if (done == total)
		et->load_end = now;
	bool log = done == total || now - et->load_logged_us >= MODEL_WORKER_PROGRESS_LOG_US;
	if (log)
		et->load_logged_us = now;
	double s = (double)(now - et->load_t0) / 1e6;
	pthread_mutex_unlock(&et->lock);
	if (log)
		log_info("the model %s: weights %.1f of %.1f MiB loaded (%.1f MiB/s)", et->dir,
			 (double)done / (1 << 20), (double)total / (1 << 20),
			 s > 0 ? (double)done / (1 << 20) / s : 0.0);
}

/* Starts the progress figures of a weight load and hooks load_progress() into `bo`. */
static void load_progress_start(struct model_worker *et, struct engine_backend_options *bo)
{
	pthread_mutex_lock(&et->lock);
	et->load_done = et->load_total = et->load_end = 0;
	et->load_t0 = et->load_logged_us = time_mono_us();
	pthread_mutex_unlock(&et->lock);
	bo->progress = load_progress;
	bo->progress_arg = et;
}

/* Loads everything an agent task needs; on failure the state says why and holod goes on
 * serving scripts. */
static void load(struct model_worker *et)
{
	struct worker_ctx *ctx = &et->ctx;
	char err[MODEL_WORKER_MAX_ERROR - 64] = "";
	uint64_t t0 = time_mono_us();
	int r;

	log_info("loading the model %s", et->dir);
	ctx->model = engine_model_load(et->dir, err, sizeof(err));
	if (!ctx->model) {
		set_failed(et, "cannot load the model %s: %s", et->dir, err[0] ? err : strerror(errno));
		goto fail;
	}
	engine_model_get_info(ctx->model, &et->info);
	/* before the weights are read or copied, which for a large model takes minutes */
	ctx->tok = engine_model_tokenizer(ctx->model);
	if (!ctx->tok) {
		set_failed(et, "the model %s has no tokenizer.json", et->dir);
		goto fail;
	}
	if ((r = model_content_hash(et->dir, et->content_sha256)) < 0) {
		log_warning_errno(r,
				  "the model %s: cannot hash config.json and its weights index; "
				  "tasks record no content hash",
				  et->dir);
		et->content_sha256[0] = '\0';
	}
	char why[256];
	struct engine_backend_options bo = et->backend;
	r = engine_backend_resolve(&bo, why, sizeof(why));
	if (r < 0) {
		set_failed(et, "%s", why);
		goto fail;
	}
	if (why[0])
		log_notice("%s", why);
	load_progress_start(et, &bo);
	ctx->backend = engine_backend_create(ctx->model, &bo, err, sizeof(err));
	if (!ctx->backend) {
		set_failed(et, "the model %s: %s", et->dir, err[0] ? err : strerror(errno));
		goto fail;
	}
	pthread_mutex_lock(&et->lock);
	et->backend = bo;
	pthread_mutex_unlock(&et->lock);
	admission_setup(et);
	ctx->vision = engine_vision_create(ctx->model, err, sizeof(err));
	if (!ctx->vision) {
		if (errno == ENOENT)
			set_failed(et,
				   "the model %s has no vision tower (vision_model.*, mlp1.*): "
				   "the agent needs a vision-language checkpoint",
				   et->dir);
		else
			set_failed(et, "the model %s: vision tower: %s", et->dir,
				   err[0] ? err : strerror(errno));
		goto fail;
	}
	int32_t image_id = engine_tokenizer_token_id(ctx->tok, "<image>");
	int32_t declared = engine_vision_image_token(ctx->vision);
	if (image_id < 0 || (declared >= 0 && declared != image_id)) {
		set_failed(et,
			   "the model %s: the tokenizer's <image> id (%d) differs from "
			   "config.json's img_context_token_id (%d)",
			   et->dir, (int)image_id, (int)declared);
		goto fail;
	}
	et->tokens_per_tile = engine_vision_tokens_per_tile(ctx->vision);
	ctx->grammar = policy_grammar_create_holo3();
	if (!ctx->grammar) {
		set_failed(et, "cannot build the step grammar: %s", strerror(errno));
		goto fail;
	}
	ctx->n_stop_ids = 0;
	static const char *const stops[] = {"<SPECIAL_12>", "</s>"};
	for (size_t i = 0; i < ARRAY_SIZE(stops); i++) {
		int32_t id = engine_tokenizer_token_id(ctx->tok, stops[i]);
		if (id >= 0)
			ctx->stop_ids[ctx->n_stop_ids++] = id;
	}
	if (ctx->n_stop_ids == 0 || ctx->stop_ids[0] != engine_tokenizer_token_id(ctx->tok, "<SPECIAL_12>")) {
		set_failed(et, "the model %s: its tokenizer has no <SPECIAL_12> end-of-turn token", et->dir);
		goto fail;
	}
	ctx->masker = policy_masker_create(ctx->grammar, ctx->tok, (size_t)et->info.vocab, ctx->stop_ids,
					   ctx->n_stop_ids);
	if (!ctx->masker) {
		set_failed(et, "the model %s: cannot build the token masks: %s", et->dir, strerror(errno));
		goto fail;
	}
	ctx->nano_grammar = policy_grammar_create_holo_nano();
	ctx->nano_masker = ctx->nano_grammar ?
				   policy_masker_create(ctx->nano_grammar, ctx->tok, (size_t)et->info.vocab,
							ctx->stop_ids, ctx->n_stop_ids) :
				   NULL;
	if (!ctx->nano_masker) {
		set_failed(et, "the model %s: cannot build the holo-nano step's token masks: %s", et->dir,
			   strerror(errno));
		goto fail;
	}
	/* Grounding's: built here once, not on the worker between two forwards per grounding. */
	ctx->point_grammar = policy_grammar_create_point();
	ctx->point_masker = ctx->point_grammar ?
				    policy_masker_create(ctx->point_grammar, ctx->tok, (size_t)et->info.vocab,
							 ctx->stop_ids, ctx->n_stop_ids) :
				    NULL;
	if (!ctx->point_masker) {
		set_failed(et, "the model %s: cannot build the point grammar's token masks: %s", et->dir,
			   strerror(errno));
		goto fail;
	}

	pthread_mutex_lock(&et->lock);
	et->load_us = time_mono_us() - t0;
	et->state = MODEL_WORKER_READY;
	et->loaded = true;
	pthread_cond_broadcast(&et->done);
	pthread_mutex_unlock(&et->lock);
	struct engine_backend_info bi;
	engine_backend_get_info(ctx->backend, &bi);
	log_info("model %s loaded in %.1f s: %.1fM parameters, %d layers (%s), vision %d "
		 "tokens per tile; language model on %s (%s), %s, weights %s (%.1f MiB), SSM "
		 "state %s",
		 et->dir, et->load_us / 1e6, et->info.n_params / 1e6, et->info.n_layers, et->info.pattern,
		 et->tokens_per_tile, bi.name, bi.device, engine_precision_name(bi.precision), bi.weights,
		 (double)bi.weight_bytes / (1 << 20), engine_precision_name(bi.ssm_state));
	return;
fail:
	unload(ctx);
	log_error("%s; instruction tasks are refused, scripts still work", et->error);
}

/* After a device fault, with no session left on the broken backend: a new backend on the same
 * device, or FAILED saying why not. Jobs wait meanwhile (the state is LOADING); the model, the
 * tokenizer, the vision tower, the grammars and their maskers are the backend's neighbours, not
 * its parts, and stay. Called with et->lock held; drops it while it works. */
static void recreate_backend(struct model_worker *et)
{
	struct worker_ctx *ctx = &et->ctx;
	char err[MODEL_WORKER_MAX_ERROR / 2] = "";
	uint64_t t0 = time_mono_us();

	et->state = MODEL_WORKER_LOADING;
	struct engine_backend_options bo = et->backend;
	pthread_mutex_unlock(&et->lock);

	log_notice("the model %s: recreating its %s backend after the device failure", et->dir,
		   engine_backend_kind_name(bo.kind));
	engine_backend_destroy(ctx->backend);
	load_progress_start(et, &bo);
	ctx->backend = engine_backend_create(ctx->model, &bo, err, sizeof(err));
	if (ctx->backend)
		admission_setup(et);

	pthread_mutex_lock(&et->lock);
	et->device_failed = false;
	et->device_resets++;
	if (!ctx->backend) {
		snprintf(et->error, sizeof(et->error),
			 "the model's device failed (%s) and its backend could not be recreated: %s",
			 et->device_error, err[0] ? err : strerror(errno));
		et->state = MODEL_WORKER_FAILED;
		log_error("%s; instruction tasks are refused, scripts still work", et->error);
	} else {
		et->state = MODEL_WORKER_READY;
		log_notice("the model %s: backend recreated in %.1f s", et->dir, (time_mono_us() - t0) / 1e6);
	}
	pthread_cond_broadcast(&et->done);
}

/* Under the lock: the job's result, for its submitter. */
static void finish_job(struct model_worker *et, struct job *j, int r)
{
	j->result = r;
	j->done = true;
	pthread_cond_broadcast(&et->done);
}

/* After a forward or a job: a device fault is noticed once; the jobs of other tasks fail with
 * it until their sessions are gone, then the backend is recreated. */
static void check_fault(struct model_worker *et)
{
	if (!et->device_failed &&
	    engine_backend_fault(et->ctx.backend, et->device_error, sizeof(et->device_error))) {
		et->device_failed = true;
		log_error("the model %s: its device failed: %s; the backend is recreated once the "
			  "tasks using it have ended",
			  et->dir, et->device_error);
	}
}

/* The work item of a ended with r: the job's next one, or the job's end. Model worker. */
static void work_ended(struct model_worker *et, struct active *a, int r)
{
	a->w = (struct model_work){0};
	a->done = 0;
	r = a->j->seq->next(&et->ctx, a->j->seq->arg, r, &a->w);
	a->fresh = true;
	if (r == 1)
		return;
	pthread_mutex_lock(&et->lock);
	finish_job(et, a->j, r);
	pthread_mutex_unlock(&et->lock);
	a->j = NULL;
}

/* A sequence job joins the batch with its first work item (or ends at once). */
static void activate(struct model_worker *et, struct job *j)
{
	if (et->n_active == et->cap_active) {
		et->cap_active = MAX(et->cap_active * 2, (size_t)8);
		et->active = xreallocarray(et->active, et->cap_active, sizeof(*et->active));
	}
	struct active *a = &et->active[et->n_active++];
	*a = (struct active){.j = j};
	a->j = j;
	int r = j->seq->next(&et->ctx, j->seq->arg, 0, &a->w);
	if (r != 1) {
		pthread_mutex_lock(&et->lock);
		finish_job(et, j, r);
		pthread_mutex_unlock(&et->lock);
		et->n_active--;
	}
}

/* One slice of vision work: the next vision item in turn (after the one served last) runs up
 * to vision_slice steps of its encode, after its job's check. Model worker. */
static void vision_slice(struct model_worker *et)
{
	size_t n = et->n_active;
	for (size_t k = 0; k < n; k++) {
		size_t i = (et->vision_rr + k) % n;
		struct active *a = &et->active[i];
		if (!a->j || a->w.kind != MODEL_WORK_VISION)
			continue;
		et->vision_rr = (i + 1) % n;
		int r = a->j->seq->check ? a->j->seq->check(a->j->seq->arg) : 0;
		if (r == 0) {
			r = engine_vision_encode_advance(a->w.vision, (int)et->vision_slice);
			check_fault(et);
			pthread_mutex_lock(&et->lock);
			et->vision_slices++;
			pthread_mutex_unlock(&et->lock);
		}
		if (r != 1)
			work_ended(et, a, r);
		return;
	}
}

/* One batched forward: every decoding session's next token and up to prefill_chunk positions
 * of prefill, handed out in turn (the first sequence served rotates). Model worker. */
static void tick(struct model_worker *et)
{
	size_t n = et->n_active, n_e = 0;
	struct engine_batch_entry *e = xcalloc(n, sizeof(*e));
	struct active **of = xcalloc(n, sizeof(*of));
	int *rs = xcalloc(n, sizeof(*rs));
	size_t budget = et->prefill_chunk;

	for (size_t i = 0; i < n; i++)
		et->active[i].fresh = false;
	for (size_t k = 0; k < n; k++) {
		struct active *a = &et->active[(et->rr + k) % n];
		if (!a->j || a->fresh || a->w.kind == MODEL_WORK_VISION)
			continue;
		if (a->w.kind == MODEL_WORK_DECODE) {
			int r = engine_generator_sample(a->w.gen, &e[n_e]);
			if (r == 1)
				of[n_e++] = a;
			else
				work_ended(et, a, r);
			continue;
		}
		if (!budget)
			continue;
		int r = a->j->seq->check ? a->j->seq->check(a->j->seq->arg) : 0;
		if (r < 0) {
			work_ended(et, a, r);
			continue;
		}
		a->take = MIN(a->w.n - a->done, budget);
		budget -= a->take;
		bool last = a->done + a->take == a->w.n;
		e[n_e] = (struct engine_batch_entry){.session = a->w.session,
						     .tokens = a->w.ids + a->done,
						     .n = a->take,
						     .refs = a->w.refs ? a->w.refs + a->done : NULL,
						     .want = last ? a->w.want : ENGINE_LOGITS_NONE,
						     .ret_logits = last ? a->w.logits : NULL};
		of[n_e++] = a;
	}
	et->rr = (et->rr + 1) % n;
	if (n_e) {
		int r = engine_forward_batch(et->ctx.backend, e, n_e);
		/* nothing changed (all or nothing): each entry alone, so that one session's
		 * failure (its context full, the state limit) is its own */
		for (size_t i = 0; i < n_e; i++)
			rs[i] = r;
		if (r < 0 && r != -EIO && n_e > 1)
			for (size_t i = 0; i < n_e; i++)
				rs[i] = engine_forward_batch(et->ctx.backend, &e[i], 1);
		check_fault(et);
		pthread_mutex_lock(&et->lock);
		et->batches++;
		et->largest_batch = MAX(et->largest_batch, n_e);
		pthread_mutex_unlock(&et->lock);
	}
	for (size_t i = 0; i < n_e; i++) {
		struct active *a = of[i];
		if (a->w.kind == MODEL_WORK_DECODE) {
			int st = engine_generator_fed(a->w.gen, rs[i]);
			if (st != 0)
				work_ended(et, a, st < 0 ? st : 0);
		} else if (rs[i] < 0) {
			work_ended(et, a, rs[i]);
		} else if ((a->done += a->take) == a->w.n) {
			work_ended(et, a, 0);
		}
	}
	vision_slice(et);
	size_t kept = 0, vision = 0;
	for (size_t i = 0; i < n; i++)
		if (et->active[i].j) {
			vision += et->active[i].w.kind == MODEL_WORK_VISION;
			et->active[kept++] = et->active[i];
		}
	et->n_active = kept;
	if (kept) {
		et->rr %= kept;
		et->vision_rr %= kept;
	}
	pthread_mutex_lock(&et->lock);
	et->n_vision = vision;
	pthread_mutex_unlock(&et->lock);
	free(rs);
	free(of);
	free(e);
}

static struct job *pop(struct model_worker *et)
{
	struct job *j = et->queue[et->head];
	et->head = (et->head + 1) % MODEL_WORKER_QUEUE_MAX;
	et->n_queued--;
	return j;
}

static void *worker_main(void *userdata)
{
	struct model_worker *et = userdata;

	if (et->dir)
		load(et);
	pthread_mutex_lock(&et->lock);
	for (;;) {
		while (!et->n_queued && !et->n_active && !et->stopping)
			pthread_cond_wait(&et->wake, &et->lock);
		if (et->stopping)
			break;
		/* Sequence jobs join the batch at once; one plain job runs between two forwards. */
		struct job *plain = NULL;
		while (et->n_queued && !plain) {
			struct job *j = pop(et);
			if (!j->seq) {
				plain = j;
				break;
			}
			pthread_mutex_unlock(&et->lock);
			activate(et, j);
			pthread_mutex_lock(&et->lock);
		}
		pthread_cond_broadcast(&et->done); /* the queue has room */
		pthread_mutex_unlock(&et->lock);

		if (plain) {
			int r = plain->fn(&et->ctx, plain->arg);
			check_fault(et);
			pthread_mutex_lock(&et->lock);
			finish_job(et, plain, r);
			pthread_mutex_unlock(&et->lock);
		}
		if (et->n_active)
			tick(et);

		pthread_mutex_lock(&et->lock);
		et->n_sequences = et->n_active;
		if (et->device_failed && et->sessions == 0 && !et->n_active && !et->stopping)
			recreate_backend(et);
	}
	/* Jobs left are answered; their submitters are waiting. */
	while (et->n_queued)
		finish_job(et, pop(et), -ESHUTDOWN);
	for (size_t i = 0; i < et->n_active; i++)
		finish_job(et, et->active[i].j, -ESHUTDOWN);
	et->n_active = 0;
	pthread_cond_broadcast(&et->done);
	pthread_mutex_unlock(&et->lock);
	return NULL;
}

struct model_worker *model_worker_create(const char *model_dir, const struct engine_backend_options *backend)
{
	struct model_worker *et = xcalloc(1, sizeof(*et));
	int r;

	et->backend = backend ? *backend : (struct engine_backend_options){.kind = ENGINE_BACKEND_AUTO};
	et->dir = model_dir ? xstrdup(model_dir) : NULL;
	et->state = model_dir ? MODEL_WORKER_LOADING : MODEL_WORKER_NONE;
	pthread_mutex_init(&et->lock, NULL);
	pthread_cond_init(&et->wake, NULL);
	pthread_cond_init(&et->done, NULL);
	pthread_cond_init(&et->admitted, NULL);
	et->prefill_chunk = MODEL_WORKER_DEFAULT_PREFILL_CHUNK;
	et->vision_slice = MODEL_WORKER_DEFAULT_VISION_SLICE;
	if ((r = pthread_create(&et->thread, NULL, worker_main, et)) != 0) {
		model_worker_destroy(et);
		errno = r;
		return NULL;
	}
	et->started = true;
	return et;
}

void model_worker_destroy(struct model_worker *et)
{
	if (!et)
		return;
	if (et->started) {
		pthread_mutex_lock(&et->lock);
		et->stopping = true;
		pthread_cond_broadcast(&et->wake);
		pthread_mutex_unlock(&et->lock);
		pthread_join(et->thread, NULL);
	}
	unload(&et->ctx);
	free(et->active);
	free(et->waiters);
	pthread_mutex_destroy(&et->lock);
	pthread_cond_destroy(&et->wake);
	pthread_cond_destroy(&et->done);
	pthread_cond_destroy(&et->admitted);
	free(et->dir);
	free(et);
}

enum model_worker_state model_worker_state(struct model_worker *et)
{
	pthread_mutex_lock(&et->lock);
	enum model_worker_state s = et->state;
	pthread_mutex_unlock(&et->lock);
	return s;
}

enum model_worker_state model_worker_wait_loaded(struct model_worker *et)
{
	pthread_mutex_lock(&et->lock);
	while (et->state == MODEL_WORKER_LOADING && !et->stopping)
		pthread_cond_wait(&et->done, &et->lock);
	enum model_worker_state s = et->state;
	pthread_mutex_unlock(&et->lock);
	return s;
}

const char *model_worker_error(struct model_worker *et)
{
	return model_worker_state(et) == MODEL_WORKER_FAILED ? et->error : NULL;
}

static bool loaded(struct model_worker *et)
{
	pthread_mutex_lock(&et->lock);
	bool l = et->loaded;
	pthread_mutex_unlock(&et->lock);
	return l;
}

const struct engine_tokenizer *model_worker_tokenizer(struct model_worker *et)
{
	return loaded(et) ? et->ctx.tok : NULL;
}

const struct policy_grammar *model_worker_grammar(struct model_worker *et)
{
	return loaded(et) ? et->ctx.grammar : NULL;
}

int model_worker_tokens_per_tile(struct model_worker *et)
{
	return loaded(et) ? et->tokens_per_tile : 0;
}

const struct engine_vision *model_worker_vision(struct model_worker *et)
{
	return loaded(et) ? et->ctx.vision : NULL;
}

static const char *state_name(enum model_worker_state s)
{
	switch (s) {
	case MODEL_WORKER_LOADING:
		return "loading";
	case MODEL_WORKER_READY:
		return "ready";
	case MODEL_WORKER_FAILED:
		return "failed";
	default:
		return "none";
	}
}

json_t *model_worker_provenance(struct model_worker *et)
{
	/* under the lock: after a device fault the backend is recreated */
	pthread_mutex_lock(&et->lock);
	if (et->state != MODEL_WORKER_READY) {
		pthread_mutex_unlock(&et->lock);
		return json_null();
	}
	const char *slash = strrchr(et->dir, '/');
	struct engine_backend_info bi;
	engine_backend_get_info(et->ctx.backend, &bi);
	json_t *o =
		json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:s, s:s, s:I}", "path", et->dir, "name",
			  slash && slash[1] ? slash + 1 : et->dir, "sha256",
			  et->content_sha256[0] ? json_string(et->content_sha256) : json_null(), "backend",
			  bi.name, "device", bi.device, "precision", engine_precision_name(bi.precision),
			  "ssm_state", engine_precision_name(bi.ssm_state), "weights", bi.weights,
			  "device_weight_bytes", (json_int_t)bi.weight_bytes);
	pthread_mutex_unlock(&et->lock);
	return o;
}

/* The CUDA backend's memory plan (engine.h struct engine_memory_plan), bytes, with holod's tasks
 * (-1: none planned) */
static json_t *plan_json(const struct engine_memory_plan *p, int tasks, int tasks_fit, const char *warning)
{
	json_t *o =
		json_pack("{s:s, s:{s:I, s:I, s:I, s:I}, s:I, s:I, s:i, s:i, s:I, s:I, s:I, s:I, "
			  "s:I, s:I, s:i}",
			  "weights", p->weights, "weights_by_part", "layers", (json_int_t)p->layers,
			  "lm_head", (json_int_t)p->head, "embeddings", (json_int_t)p->embeddings, "other",
			  (json_int_t)p->other, "weight_bytes", (json_int_t)p->weight_bytes, "vision_bytes",
			  (json_int_t)p->vision, "sessions", p->sessions, "context_tokens", p->context,
			  "session_bytes", (json_int_t)p->session, "scratch_bytes", (json_int_t)p->scratch,
			  "workspace_bytes", (json_int_t)p->workspace, "reserve_bytes",
			  (json_int_t)p->reserve, "total_bytes", (json_int_t)p->total, "free_bytes",
			  (json_int_t)p->free, "sessions_fit", p->sessions_fit);
	if (o) {
		json_object_set_new(o, "tasks", tasks >= 0 ? json_integer(tasks) : json_null());
		json_object_set_new(o, "tasks_fit", tasks_fit >= 0 ? json_integer(tasks_fit) : json_null());
		json_object_set_new(o, "warning", warning[0] ? json_string(warning) : json_null());
	}
	return o;
}

json_t *model_worker_status(struct model_worker *et)
{
	if (!et || !et->dir)
		return json_null();
	pthread_mutex_lock(&et->lock);
	const char *slash = strrchr(et->dir, '/');
	char name[NAME_MAX + 1];
	snprintf(name, sizeof(name), "%s", slash && slash[1] ? slash + 1 : et->dir);
	bool ready = et->state == MODEL_WORKER_READY;
	json_t *o =
		json_pack("{s:s, s:s, s:s, s:o, s:s, s:i, s:s, s:i}", "path", et->dir, "name", name, "state",
			  state_name(et->state), "error",
			  et->state == MODEL_WORKER_FAILED ? json_string(et->error) : json_null(), "backend",
			  engine_backend_kind_name(et->backend.kind), "threads", engine_get_threads(),
			  "kernels", engine_cpu_kernels(), "sessions", et->sessions);
	if (o) {
		json_object_set_new(o, "state_bytes", json_integer(et->state_bytes));
		if (et->load_t0) {
			uint64_t end = et->load_end ? et->load_end : time_mono_us();
			double s = (double)(end - et->load_t0) / 1e6;
			json_object_set_new(o, "load",
					    json_pack("{s:I, s:I, s:I, s:b}", "bytes",
						      (json_int_t)et->load_done, "total",
						      (json_int_t)et->load_total, "bytes_per_second",
						      (json_int_t)(s > 0 ? (double)et->load_done / s : 0),
						      "done", et->load_end != 0));
		}
		json_object_set_new(o, "device_resets", json_integer(et->device_resets));
		json_t *waiting = json_array();
		for (size_t i = 0; waiting && i < et->n_waiters; i++)
			json_array_append_new(waiting,
					      json_pack("{s:I, s:I}", "task", (json_int_t)et->waiters[i].task,
							"position", (json_int_t)(i + 1)));
		json_object_set_new(o, "batching",
				    json_pack("{s:i, s:I, s:I, s:I, s:I, s:i, s:I, s:I, s:o, s:I, s:o}",
					      "prefill_chunk", (int)et->prefill_chunk, "batches",
					      (json_int_t)et->batches, "sequences",
					      (json_int_t)et->n_sequences, "queued", (json_int_t)et->n_queued,
					      "largest_batch", (json_int_t)et->largest_batch, "vision_slice",
					      (int)et->vision_slice, "vision", (json_int_t)et->n_vision,
					      "vision_slices", (json_int_t)et->vision_slices, "budget_bytes",
					      et->budget ? json_integer((json_int_t)et->budget) : json_null(),
					      "reserved_bytes", (json_int_t)et->reserved, "waiting",
					      waiting ? waiting : json_array()));
		if (ready) {
			json_object_set_new(o, "parameters", json_integer((json_int_t)et->info.n_params));
			json_object_set_new(o, "weight_bytes",
					    json_integer((json_int_t)et->info.weight_bytes));
			json_object_set_new(o, "layers", json_integer(et->info.n_layers));
			json_object_set_new(o, "pattern", json_string(et->info.pattern));
			json_object_set_new(o, "hidden", json_integer(et->info.hidden));
			json_object_set_new(o, "vocab", json_integer(et->info.vocab));
			json_object_set_new(o, "vision", json_true());
			json_object_set_new(o, "tokens_per_tile", json_integer(et->tokens_per_tile));
			json_object_set_new(o, "load_ms", json_integer((json_int_t)(et->load_us / 1000)));
			/* the backend's figures are atomic or fixed at creation: readable from here */
			struct engine_backend_info bi;
			engine_backend_get_info(et->ctx.backend, &bi);
			json_object_set_new(o, "device", json_string(bi.device));
			json_object_set_new(o, "precision", json_string(engine_precision_name(bi.precision)));
			json_object_set_new(o, "ssm_state", json_string(engine_precision_name(bi.ssm_state)));
			json_object_set_new(o, "weights", json_string(bi.weights));
			json_object_set_new(o, "device_weight_bytes",
					    json_integer((json_int_t)bi.weight_bytes));
			json_object_set_new(o, "device_state_bytes", json_integer((json_int_t)bi.state_bytes));
			json_object_set_new(o, "device_memory_total",
					    bi.memory_total ? json_integer((json_int_t)bi.memory_total) :
							      json_null());
			json_object_set_new(o, "device_memory_free",
					    bi.memory_free ? json_integer((json_int_t)bi.memory_free) :
							     json_null());
			json_object_set_new(o, "device_plan",
					    bi.has_plan ? plan_json(&bi.plan, et->plan_tasks,
								    et->plan_tasks_fit, et->plan_warning) :
							  json_null());
		}
	}
	pthread_mutex_unlock(&et->lock);
	return o;
}

static int submit(struct model_worker *et, struct job *j);

int model_worker_call(struct model_worker *et, int (*fn)(struct worker_ctx *ctx, void *arg), void *arg)
{
	struct job j = {.fn = fn, .arg = arg};
	return submit(et, &j);
}

/* Queues j as model_worker_call() does and waits for its result. */
static int submit(struct model_worker *et, struct job *j)
{
	int r;

	pthread_mutex_lock(&et->lock);
	while (et->state == MODEL_WORKER_LOADING && !et->stopping)
		pthread_cond_wait(&et->done, &et->lock);
	while (!et->stopping && et->state == MODEL_WORKER_READY && et->n_queued == MODEL_WORKER_QUEUE_MAX)
		pthread_cond_wait(&et->done, &et->lock);
	if (et->stopping) {
		r = -ESHUTDOWN;
		goto unlock;
	}
	if (et->state != MODEL_WORKER_READY) {
		r = -ENODEV;
		goto unlock;
	}
	et->queue[(et->head + et->n_queued) % MODEL_WORKER_QUEUE_MAX] = j;
	et->n_queued++;
	pthread_cond_signal(&et->wake);
	while (!j->done)
		pthread_cond_wait(&et->done, &et->lock);
	r = j->result;
unlock:
	pthread_mutex_unlock(&et->lock);
	return r;
}

int model_worker_run(struct model_worker *et, const struct model_seq_job *job)
{
	struct job j = {.seq = job};
	return submit(et, &j);
}

int model_worker_set_prefill_chunk(struct model_worker *et, unsigned tokens)
{
	if (tokens < 1 || tokens > MODEL_WORKER_MAX_PREFILL_CHUNK)
		return -EINVAL;
	pthread_mutex_lock(&et->lock);
	et->prefill_chunk = tokens;
	pthread_mutex_unlock(&et->lock);
	return 0;
}

unsigned long long model_worker_batches(struct model_worker *et)
{
	pthread_mutex_lock(&et->lock);
	unsigned long long n = et->batches;
	pthread_mutex_unlock(&et->lock);
	return n;
}

unsigned long long model_worker_vision_slices(struct model_worker *et)
{
	pthread_mutex_lock(&et->lock);
	unsigned long long n = et->vision_slices;
	pthread_mutex_unlock(&et->lock);
	return n;
}

int model_worker_set_vision_slice(struct model_worker *et, unsigned steps)
{
	if (steps < 1 || steps > MODEL_WORKER_MAX_VISION_SLICE)
		return -EINVAL;
	pthread_mutex_lock(&et->lock);
	et->vision_slice = steps;
	pthread_mutex_unlock(&et->lock);
	return 0;
}

/* Milliseconds between two looks at a waiting task's stop flag. */
#define MODEL_WORKER_ADMIT_POLL_MS 50

static void drop_waiter(struct model_worker *et, long long task)
{
	for (size_t i = 0; i < et->n_waiters; i++)
		if (et->waiters[i].task == task) {
			memmove(&et->waiters[i], &et->waiters[i + 1],
				(et->n_waiters - i - 1) * sizeof(*et->waiters));
			et->n_waiters--;
			break;
		}
	pthread_cond_broadcast(&et->admitted);
}

int model_worker_admit(struct model_worker *et, long long task, int max_tokens, int copies, int prefix_tokens,
		       const atomic_int *stop, uint64_t deadline_us, uint64_t *ret_bytes, char *err,
		       size_t errlen)
{
	int r = 0;

	if (model_worker_wait_loaded(et) != MODEL_WORKER_READY)
		return -ENODEV;
	pthread_mutex_lock(&et->lock);
	if (!et->budget) {
		*ret_bytes = 0;
		goto unlock;
	}
	uint64_t bytes = (uint64_t)MAX(copies, 1) * state_at(et, max_tokens) + state_at(et, prefix_tokens);
	if (bytes > et->budget) {
		snprintf(
			err, errlen,
			"the task's model session needs %.1f MiB (a context of %d "
			"tokens, its snapshots and its prefix), more than the %.1f MiB the sessions may hold "
			"(--state-limit, or the device's free memory): lower --context-tokens or "
			"raise the limit",
			(double)bytes / (1 << 20), max_tokens, (double)et->budget / (1 << 20));
		r = -EFBIG;
		goto unlock;
	}
	if (et->n_waiters == et->cap_waiters) {
		et->cap_waiters = MAX(et->cap_waiters * 2, (size_t)8);
		et->waiters = xreallocarray(et->waiters, et->cap_waiters, sizeof(*et->waiters));
	}
	et->waiters[et->n_waiters++] = (struct waiter){.task = task, .bytes = bytes};
	bool logged = false;
	while (et->waiters[0].task != task || et->reserved + bytes > et->budget) {
		if (atomic_load(stop) || et->stopping) {
			drop_waiter(et, task);
			r = -ECANCELED;
			goto unlock;
		}
		if (time_mono_us() >= deadline_us) {
			drop_waiter(et, task);
			r = -ETIME;
			goto unlock;
		}
		if (!logged) {
			log_info("task %lld waits for the model: its session (%.1f MiB) does not fit "
				 "beside the %.1f MiB reserved of %.1f MiB",
				 task, (double)bytes / (1 << 20), (double)et->reserved / (1 << 20),
				 (double)et->budget / (1 << 20));
			logged = true;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += MODEL_WORKER_ADMIT_POLL_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&et->admitted, &et->lock, &ts);
	}
	drop_waiter(et, task);
	et->reserved += bytes;
	*ret_bytes = bytes;
	log_info("task %lld: model session admitted, %llu bytes reserved (%.1f of the %.1f MiB "
		 "budget in use)",
		 task, (unsigned long long)bytes, (double)et->reserved / (1 << 20),
		 (double)et->budget / (1 << 20));
unlock:
	pthread_mutex_unlock(&et->lock);
	return r;
}

void model_worker_release(struct model_worker *et, uint64_t bytes)
{
	pthread_mutex_lock(&et->lock);
	et->reserved -= MIN(bytes, et->reserved);
	pthread_cond_broadcast(&et->admitted);
	pthread_mutex_unlock(&et->lock);
}

int model_worker_wait_position(struct model_worker *et, long long task)
{
	int pos = 0;
	pthread_mutex_lock(&et->lock);
	for (size_t i = 0; i < et->n_waiters; i++)
		if (et->waiters[i].task == task)
			pos = (int)i + 1;
	pthread_mutex_unlock(&et->lock);
	return pos;
}

void model_worker_account(struct model_worker *et, int sessions_delta, long long bytes_delta)
{
	pthread_mutex_lock(&et->lock);
	et->sessions += sessions_delta;
	et->state_bytes += bytes_delta;
	pthread_mutex_unlock(&et->lock);
}
