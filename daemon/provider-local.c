/* The local provider: holod's own engine through the model worker (provider.h).
 *
 * One observation: encoded from the image by a sequence job of the worker, a slice of the
 * preprocessing or the vision tower between two batched forwards. One step: render the new
 * prompt tokens (persistent: this observation's user turn and the generation prompt; window,
 * or a persistent session near its cap: the prefix snapshot plus the history with only the
 * last K screenshots; rolling: the rolling snapshot, then the observation that leaves the
 * window in its evicted form, snapshotted again, then the last K observations) -> a sequence
 * job of the worker (model-worker.h), batched with the other tasks' work: prefill them and
 * decode one step under the grammar's token masks, retrying an invalid step by sampling again.
 *
 * Rolling (the default): the task keeps a snapshot of the prefix plus every observation
 * already evicted (its user turn with "[screenshot evicted]" and its assistant turn), so the
 * model sees exactly window mode's context while a step prefills K observations and one
 * evicted turn, however long the task runs. The snapshot is charged to the state budget like
 * the session (one more state at admission). When the snapshot, the evicted turn and the window
 * would pass --context-tokens, the step rebuilds as a persistent session does: from the prefix
 * snapshot, the recent history that fits half the room ("rebuild"), the evicted part of it
 * snapshotted as the new rolling base.
 *
 * Token accounting per step (journaled): `tokens_appended` are the prompt tokens prefilled by
 * this step's job (persistent: user turn + generation prompt + the close of the assistant
 * turn; window: the whole window; rolling: the evicted turn + the window), `tokens_decoded`
 * the tokens sampled and fed back (with jump-forward also the forced ones, the step's lead
 * included, which is appended with the prompt: step_lead), and `session_tokens` the session
 * length afterwards. So, for
 * a persistent session, session[k] = session[k-1] + appended[k] + decoded[k]; for a window,
 * session[k] = prefix + appended[k] + decoded[k]; rolling, session[k] = base[k] + appended[k] +
 * decoded[k] with base[k] the rolling snapshot's length before the step (the prefix, plus the
 * evicted turns appended by the steps before).
 *
 * DESIGN (threads): the task ops run on the executor thread, which owns the prompt renderer;
 * everything that computes with the model (vision encoding, prefill, constrained decoding,
 * snapshots) is a job handed to the model worker (model-worker.h), which owns the session;
 * the executor waits for each job. The task's stop flag is atomic and polled by the jobs
 * between decoded tokens, prefill chunks and vision slices, so a stop takes effect within one
 * forward's time. */
#include "provider.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agent-history.h"
#include "common.h"
#include "feed.h"
#include "provider-local.h"
#include "thought-stream.h"

/* Tokens that close an assistant turn ("\n<SPECIAL_12>\n"), bounded generously. */
#define CLOSE_TOKENS_MAX 8
/* Most ids of a step's lead (step_lead): holo3's `{"note":` is a few. */
#define STEP_LEAD_MAX 32
/* Sampling of a retried step: greedy would repeat the invalid answer. */
#define RETRY_TEMPERATURE 0.7f

struct local_provider {
	struct provider base;
	struct model_worker *worker;
};

/* What the local provider keeps of an observation. */
struct obs_rec {
	int n_tiles;
	struct engine_rows *rows; /* image embeddings, kept for the last `window` observations,
				   * on the backend's device when it has one; freed by jobs */
	size_t n_rows;
};

struct local_task {
	struct provider_task base;
	const struct agent_config *cfg;
	const struct executor_task *t;
	struct executor_run *run;
	struct policy_renderer *renderer;
	const struct policy_format *fmt;
	struct policy_env penv;
	enum ipc_history history;
	size_t window;
	int max_tiles;
	struct provider_sampling sampling;
	bool thinking;		  /* a think block before each step */
	unsigned thinking_tokens; /* its budget */
	bool jump_forward;	  /* forced tokens appended in one forward (attempt_forced) */
	int tokens_per_tile, hidden, vocab;
	const struct provider_history *h;	     /* during a step */
	uint64_t last_preprocess_us, last_encode_us; /* of the observation being answered */

	/* Model worker objects: touched by jobs only. */
	struct engine_session *session;
	struct engine_snapshot *prefix;
	struct engine_snapshot *rolling; /* rolling: the prefix and the evicted turns held;
					  * NULL: the prefix snapshot is the base */
	int rolling_tokens;		 /* its length (the prefix's while it is NULL) */
	/* Rolling: the base holds the evicted turns of obs[roll_first .. roll_first + roll_held);
	 * roll_lost: a step dropped it and could not replace it (the next one rebuilds). */
	size_t roll_first, roll_held;
	bool roll_lost;
	long long accounted_bytes;
	uint64_t reserved; /* admission (model_worker_admit), given back at close */
	/* Rolling: the turns a step paused during its decode evicted into the base (it prefilled
	 * them and took the new base); the step decided again reports them as its own, as the
	 * step never paused would have (n_ids 0: none). */
	struct policy_piece paused_evicted;
	const char *paused_mode; /* and how that step's prompt was made */

	int prefix_tokens;
	int session_tokens;
	struct obs_rec *obs;
	size_t cap;
};

/* ---- worker jobs (run on the model worker) ----------------------------------------------- */

/* A progress event of the task's step under way for its followers (feed.h); nothing is built
 * when nobody follows. The executor thread waits for the job meanwhile, so its run is stable. */
#define progress(a, phase, ...)                                                                              \
	feed_progress((a)->run->env->feed, (a)->t->id, (a)->run->step, (a)->run->step_t0_us, phase,          \
		      __VA_ARGS__)

/* The step grammar and its masker of format fmt, built at load (model-worker.c). */
static const struct policy_grammar *step_grammar(const struct worker_ctx *ctx, const struct policy_format *fmt)
{
	return fmt == &policy_format_holo_nano ? ctx->nano_grammar : ctx->grammar;
}

static struct policy_masker *step_masker(const struct worker_ctx *ctx, const struct policy_format *fmt)
{
	return fmt == &policy_format_holo_nano ? ctx->nano_masker : ctx->masker;
}

static void account(struct local_task *a)
{
	long long now = a->session ? (long long)engine_session_state_bytes(a->session) : 0;
	if (a->prefix)
		now += (long long)engine_snapshot_bytes(a->prefix);
	if (a->rolling)
		now += (long long)engine_snapshot_bytes(a->rolling);
	model_worker_account(a->cfg->worker, 0, now - a->accounted_bytes);
	a->accounted_bytes = now;
}

struct open_job {
	struct local_task *a;
	const struct policy_piece *prefix;
	const atomic_int *stop;
	uint64_t deadline_us;
	uint64_t t0, prefill_us;
	bool started;
};

int local_stop_check(const atomic_int *stop, uint64_t deadline_us)
{
	if (atomic_load(stop) != EXECUTOR_RUN)
		return -ECANCELED;
	if (time_mono_us() >= deadline_us)
		return -ETIME;
	return 0;
}

/* The states of --context-tokens a task holds at once: its session, the snapshot before decoding
 * (retries, and a persistent session's thinking, drop_thinking, go back to it) and the rolling
 * history's snapshot; admission counts its prefix snapshot apart. */
static int task_copies(unsigned step_retries, bool thinking, enum ipc_history history)
{
	return (step_retries > 0 || (thinking && history == IPC_HISTORY_PERSISTENT) ? 2 : 1) +
	       (history == IPC_HISTORY_ROLLING ? 1 : 0);
}

int provider_local_task_sessions(unsigned step_retries, bool thinking, enum ipc_history history)
{
	return task_copies(step_retries, thinking, history) + 1; /* and the prefix snapshot */
}

int provider_local_task_sessions_max(unsigned step_retries)
{
	static const enum ipc_history histories[] = {IPC_HISTORY_PERSISTENT, IPC_HISTORY_WINDOW,
						     IPC_HISTORY_ROLLING};
	int most = 0;
	for (size_t i = 0; i < sizeof(histories) / sizeof(histories[0]); i++)
		for (int thinking = 0; thinking <= 1; thinking++)
			most = MAX(most, provider_local_task_sessions(step_retries, thinking, histories[i]));
	return most;
}

static int open_check(void *arg)
{
	struct open_job *j = arg;
	if (j->a->session)
		progress(j->a, "prefill", "{s:s, s:i, s:I}", "what", "prompt", "done",
			 engine_session_n_tokens(j->a->session), "total", (json_int_t)j->prefix->n_ids);
	return local_stop_check(j->stop, j->deadline_us);
}

/* A sequence job: the session, the prefix prefilled in the worker's batches, its snapshot. */
static int open_next(struct worker_ctx *ctx, void *arg, int r, struct model_work *ret_work)
{
	struct open_job *j = arg;
	struct local_task *a = j->a;

	if (!j->started) {
		j->started = true;
		j->t0 = time_mono_us();
		a->session = engine_session_create_on(ctx->backend, (int)a->cfg->context_tokens);
		if (!a->session)
			return -errno;
		model_worker_account(a->cfg->worker, 1, 0);
		a->hidden = engine_session_hidden(a->session);
		a->vocab = engine_session_vocab(a->session);
		*ret_work = (struct model_work){.kind = MODEL_WORK_PREFILL,
						.session = a->session,
						.ids = j->prefix->ids,
						.n = j->prefix->n_ids,
						.want = ENGINE_LOGITS_NONE};
		return 1;
	}
	if (r < 0)
		return r;
	a->prefix = engine_session_snapshot(a->session);
	if (!a->prefix)
		return -errno;
	a->prefix_tokens = engine_session_n_tokens(a->session);
	a->session_tokens = a->prefix_tokens;
	a->rolling_tokens = a->prefix_tokens;
	j->prefill_us = time_mono_us() - j->t0;
	account(a);
	progress(a, "prefill", "{s:s, s:I, s:I}", "what", "prompt", "done", (json_int_t)j->prefix->n_ids,
		 "total", (json_int_t)j->prefix->n_ids);
	return 0;
}

static int job_close(struct worker_ctx *ctx, void *arg)
{
	struct local_task *a = arg;
	if (a->session)
		model_worker_account(a->cfg->worker, -1, 0);
	engine_snapshot_destroy(a->prefix);
	engine_snapshot_destroy(a->rolling);
	engine_session_destroy(a->session);
	a->prefix = NULL;
	a->rolling = NULL;
	a->session = NULL;
	for (size_t i = 0; i < a->cap; i++) {
		engine_rows_destroy(a->obs[i].rows);
		a->obs[i].rows = NULL;
	}
	account(a);
	return 0;
}

int local_encode_prepare(struct model_worker *w, struct engine_image *img, int max_tiles, struct encode_job *j)
{
	const struct engine_vision *v = model_worker_vision(w);
	struct engine_vision_preprocess pp;

	j->img = img;
	if (!v) {
		snprintf(j->err, sizeof(j->err), "the model is not loaded");
		return -ENODEV;
	}
	engine_vision_get_preprocess(v, &pp);
	j->max_tiles = max_tiles > 0 ? MIN(pp.max_tiles, max_tiles) : 0;
	return 0;
}

bool local_stopped(int r)
{
	return r == -ECANCELED || r == -ETIME;
}

static int encode_check(void *arg)
{
	struct encode_job *j = arg;
	int total = 0, done = j->vj ? engine_vision_encode_progress(j->vj, &total) : 0;
	if (j->a && total > 0 && j->n_tiles > 0) {
		/* the tile the next slice works on */
		int tile = MIN(j->n_tiles, (int)((long long)done * j->n_tiles / total) + 1);
		if (tile != j->tile) {
			j->tile = tile;
			progress(j->a, "vision", "{s:i, s:i}", "tile", tile, "tiles", j->n_tiles);
		}
	}
	return local_stop_check(j->stop, UINT64_MAX);
}

int local_encode_step(struct worker_ctx *ctx, struct encode_job *j, int r, struct model_work *ret_work)
{
	char why[256];

	if (!j->started) {
		j->started = true;
		engine_rows_destroy(j->drop);
		j->drop = NULL;
		engine_rows_destroy(j->redo);
		j->redo = NULL;
		j->t0 = time_mono_us();
		struct engine_vision_grid grid;
		if ((r = engine_vision_encode_begin_image(ctx->backend, ctx->vision, j->img, j->max_tiles,
							  &grid, &j->vj)) < 0) {
			snprintf(j->err, sizeof(j->err), "image preprocessing failed: %s", strerror(-r));
			return r;
		}
		j->n_tiles = grid.n_tiles;
		j->n_rows = (size_t)grid.n_tiles * (size_t)engine_vision_tokens_per_tile(ctx->vision);
		*ret_work = (struct model_work){.kind = MODEL_WORK_VISION, .vision = j->vj};
		return 1;
	}
	if (r == 0)
		r = engine_vision_encode_finish(j->vj, &j->rows);
	j->preprocess_us = engine_vision_encode_preprocess_us(j->vj);
	engine_vision_job_destroy(j->vj);
	j->vj = NULL;
	j->encode_us = time_mono_us() - j->t0;
	if (r < 0 && !local_stopped(r))
		snprintf(j->err, sizeof(j->err), "vision encoder failed: %s",
			 engine_backend_strerror(ctx->backend, r, why, sizeof(why)));
	return r;
}

static int encode_next(struct worker_ctx *ctx, void *arg, int r, struct model_work *ret_work)
{
	return local_encode_step(ctx, arg, r, ret_work);
}

void local_encode_cleanup(struct encode_job *j)
{
	engine_vision_job_destroy(j->vj);
	j->vj = NULL;
	engine_image_destroy(j->img);
	j->img = NULL;
}

struct attempt;

struct step_job {
	struct local_task *a;
	bool restore_prefix;  /* window, or a rebuild of a persistent session */
	bool restore_rolling; /* rolling: the rolling snapshot (or the prefix's) */
	/* rolling: prefilled first, then the session becomes the new rolling base (rebase) */
	const struct policy_piece *evict;
	bool rebase;
	const struct policy_piece *piece;
	struct engine_rows *const *slot_rows; /* one per image of the piece */
	const struct policy_piece *close;     /* appended after a valid step; NULL in window mode */
	/* thinking: each attempt decodes a think block first (at most think_budget tokens); in a
	 * persistent session the valid step's turn is then rewritten without it: the session goes
	 * back to its generation prompt and gets "</think>" + the step + `close` (think_close) */
	bool thinking;
	unsigned think_budget;
	struct policy_piece think_close;
	const atomic_int *stop;
	const atomic_bool *pause; /* stops the decode with -EINTR (NULL: a persistent session,
				   * whose state before the step's prompt is not kept) */
	uint64_t deadline_us;
	uint64_t seed;
	/* progress events: the prefill's start; the decode's text streamed so far (the think
	 * block up to think_streamed, the step's JSON read up to scanned by `thought`) */
	long long prefill_base;
	size_t think_streamed, scanned;
	bool think_done;
	struct thought_stream thought;
	/* out */
	char *raw;
	size_t raw_len;
	size_t think_len, step_at; /* thinking: raw's think text, and where its step starts */
	struct policy_step step;
	int attempts;
	long long decoded;
	uint64_t forwards, forced; /* all attempts: decode forwards, ids jumped over (forced) */
	bool closed;		   /* `close` was appended */
	bool dropped, rebased;	   /* the old rolling base was destroyed; the new one replaced it */
	uint64_t prefill_us, decode_us;
	char err[512];
	/* the state machine (a sequence job of the worker) */
	int phase;
	struct engine_row_ref *refs;
	/* jump-forward: the step's lead (step_lead), prefilled after the piece (prefill_ids) */
	int32_t lead[STEP_LEAD_MAX];
	size_t n_lead;
	int32_t *prefill_ids;
	float *logits0;
	struct engine_snapshot *before_decode;
	struct engine_generator *gen;
	struct attempt *at;	 /* the generator's callbacks' state */
	long long tokens_before; /* the session's length before the attempt */
	uint64_t t0, t1;
};

static void raw_add(struct step_job *j, const uint8_t *bytes, size_t n)
{
	if (j->raw_len + n > AGENT_MAX_RAW_BYTES)
		n = AGENT_MAX_RAW_BYTES - j->raw_len;
	memcpy(j->raw + j->raw_len, bytes, n);
	j->raw_len += n;
	j->raw[j->raw_len] = '\0';
}

/* What engine_generate's callbacks need for one decode attempt. */
struct attempt {
	struct worker_ctx *ctx;
	struct step_job *j;
	struct policy_matcher m;
	bool constrained;
	unsigned think_tokens; /* sampled inside the think block */
	unsigned tokens;       /* sampled in all */
	bool complete;	       /* a stop id ended a step the grammar accepts (or, unconstrained, any) */
	int error;	       /* why a callback stopped the loop: -EBADMSG; 0 */
};

/* Before each sample: the stop flag and the deadline, then the grammar's mask. */
static int attempt_logits(void *userdata, float *logits, int vocab)
{
	struct attempt *at = userdata;
	struct step_job *j = at->j;

	(void)vocab;
	if (atomic_load(j->stop) != EXECUTOR_RUN)
		return -ECANCELED;
	if (time_mono_us() >= j->deadline_us)
		return -ETIME;
	/* holoctl pause: the step under way stops between two tokens; the next one starts from
	 * the snapshot a window or rolling step restores anyway (local_step) */
	if (j->pause && atomic_load(j->pause))
		return -EINTR;
	/* the thinking budget spent: the block may only close, then the step follows */
	if (at->constrained && j->thinking && at->think_tokens >= j->think_budget)
		policy_matcher_close_thinking(&at->m);
	if (at->constrained && policy_masker_apply(step_masker(at->ctx, at->j->a->fmt), &at->m, logits) <= 0) {
		snprintf(j->err, sizeof(j->err), "the step grammar allows no token after %zu bytes",
			 j->raw_len);
		return -EBADMSG;
	}
	return 0;
}

/* The end of the text of raw[from, end) that is whole UTF-8 characters. */
static size_t whole_chars(const char *raw, size_t from, size_t end)
{
	size_t e = end;
	while (e > from && ((uint8_t)raw[e - 1] & 0xc0) == 0x80)
		e--;
	if (e > from) {
		uint8_t b = (uint8_t)raw[e - 1];
		size_t need = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
		if (end - (e - 1) >= need)
			return end;
		return e - 1;
	}
	return from;
}

/* After each token, for the followers: the think block's new text, then the thought's as the
 * step's JSON is written (thought-stream.h), in one "decode" event. Nothing when nobody
 * follows; a follower that comes later gets what was decoded so far in its first event. */
static void stream_decode(struct attempt *at)
{
	struct step_job *j = at->j;
	struct local_task *a = j->a;
	const size_t close_len = strlen(POLICY_THINK_CLOSE);
	size_t think_from = j->think_streamed, think_to = think_from;

	if (!feed_wanted(a->run->env->feed, a->t->id))
		return;
	if (j->thinking && !j->think_done) {
		size_t tl, sa;
		if (policy_split_thinking(j->raw, j->raw_len, &tl, &sa) == 0) {
			think_to = tl;
			j->think_done = true;
			j->scanned = sa;
		} else if (j->raw_len > close_len) {
			/* a "</think>" may be arriving: keep back what could be its start */
			think_to = whole_chars(j->raw, think_from, j->raw_len - (close_len - 1));
		}
		if (think_to < think_from)
			think_to = think_from;
		j->think_streamed = think_to;
	}
	char out[THOUGHT_STREAM_OUT(256)];
	size_t n = 0;
	if (!j->thinking || j->think_done) {
		while (j->scanned < j->raw_len) {
			size_t k = MIN(j->raw_len - j->scanned, (size_t)256);
			if (n + THOUGHT_STREAM_OUT(k) > sizeof(out))
				break;
			n += thought_stream_feed(&j->thought, j->raw + j->scanned, k, out + n);
			j->scanned += k;
		}
	}
	json_t *o = json_pack("{s:i, s:i}", "attempt", j->attempts, "tokens", (int)at->tokens);
	if (!o)
		return;
	if (think_to > think_from)
		json_object_set_new(o, "thinking", json_stringn(j->raw + think_from, think_to - think_from));
	if (n)
		json_object_set_new(o, "thought", json_stringn(out, n));
	progress(a, "decode", "O", o);
	json_decref(o);
}

/* After each sample: the grammar follows the id; the step ends at a stop id it accepts. */
static int attempt_token(void *userdata, int32_t id)
{
	struct attempt *at = userdata;
	struct step_job *j = at->j;
	const uint8_t *bytes;
	size_t len;

	if (at->constrained) {
		if (policy_matcher_thinking(&at->m))
			at->think_tokens++;
		int r = policy_masker_feed(step_masker(at->ctx, at->j->a->fmt), &at->m, id);
		if (r == 1) {
			at->complete = true;
			return 1;
		}
		if (r < 0) {
			snprintf(j->err, sizeof(j->err), "token %d breaks the step grammar", (int)id);
			at->error = -EBADMSG;
			return 1;
		}
	} else {
		for (size_t i = 0; i < at->ctx->n_stop_ids; i++)
			if (id == at->ctx->stop_ids[i]) {
				at->complete = true;
				return 1;
			}
	}
	if (engine_tokenizer_token_bytes(at->ctx->tok, id, &bytes, &len) == 0)
		raw_add(j, bytes, len);
	at->tokens++;
	stream_decode(at);
	return 0;
}

/* Jump-forward (docs/policy.md): after a sampled id, the ids of the bytes the step grammar now
 * forces, which the generator appends with it in one forward; the grammar and the raw text
 * follow them here. Not inside a think block (its text is free; its forced close is a few
 * bytes once in a step). */
static int attempt_forced(void *userdata, int32_t *ids, size_t cap)
{
	struct attempt *at = userdata;
	struct policy_masker *mk = step_masker(at->ctx, at->j->a->fmt);
	const uint8_t *bytes;
	size_t len;

	if (!at->constrained || !at->j->a->jump_forward || policy_matcher_thinking(&at->m))
		return 0;
	int n = policy_masker_forced(mk, at->ctx->tok, &at->m, ids, cap);
	for (int i = 0; i < n; i++) {
		if (policy_masker_feed(mk, &at->m, ids[i]) != 0)
			return -EBADMSG; /* policy_masker_forced gives only ids the mask allows */
		if (engine_tokenizer_token_bytes(at->ctx->tok, ids[i], &bytes, &len) == 0)
			raw_add(at->j, bytes, len);
	}
	return n;
}

/* Jump-forward at the step's start (docs/policy.md): the ids of the bytes the step grammar
 * forces before the model's first choice (holo3's `{"note":`, its boundary rule as after a
 * sampled id), which the step appends with its prompt rather than sampling them one forward
 * each; none with jump-forward off, unconstrained or thinking (the think block comes first).
 * Worker thread (the masker). */
static size_t step_lead(struct worker_ctx *ctx, const struct local_task *a, bool thinking, int32_t *ids,
			size_t cap)
{
	struct policy_matcher m;

	if (a->cfg->unconstrained || !a->jump_forward || thinking)
		return 0;
	/* room for the samples: the lead counts in step_tokens */
	cap = MIN(cap, a->cfg->step_tokens > 1 ? (size_t)a->cfg->step_tokens - 1 : 0);
	policy_matcher_init(&m, step_grammar(ctx, a->fmt));
	int n = policy_masker_forced(step_masker(ctx, a->fmt), ctx->tok, &m, ids, cap);
	return n > 0 ? (size_t)n : 0;
}

enum step_phase {
	STEP_START,
	STEP_EVICT,   /* rolling: the evicted turns, then the new rolling snapshot */
	STEP_PREFILL, /* the piece, into logits0 */
	STEP_DECODE,  /* an attempt, under the grammar */
	STEP_CLOSE,   /* the close of the assistant turn */
};

/* The prefill of the work item handed out in `phase`: how far it got. */
static void prefill_progress(struct step_job *j, bool whole)
{
	const struct policy_piece *p = j->phase == STEP_EVICT ? j->evict : j->piece;
	long long done =
		whole ? (long long)p->n_ids : engine_session_n_tokens(j->a->session) - j->prefill_base;
	done = MIN(done, (long long)p->n_ids); /* the step's lead after the piece */
	progress(j->a, "prefill", "{s:s, s:I, s:I}", "what",
		 j->phase == STEP_EVICT ? "evicted" : "observation", "done", (json_int_t)done, "total",
		 (json_int_t)p->n_ids);
}

static int step_check(void *arg)
{
	struct step_job *j = arg;
	if (j->phase == STEP_EVICT || j->phase == STEP_PREFILL)
		prefill_progress(j, false);
	return local_stop_check(j->stop, j->deadline_us);
}

/* A decode attempt from the state right after the prompt (logits0): a generator with the
 * grammar as its logits hook, which the worker steps in its batches. */
static int attempt_start(struct worker_ctx *ctx, struct step_job *j, struct model_work *ret_work)
{
	struct local_task *a = j->a;
	/* A retry of a greedy step must sample, or it would repeat itself. */
	float temp = (float)a->sampling.temperature;
	if (j->attempts > 1 && temp <= 0.0f)
		temp = RETRY_TEMPERATURE;
	*j->at = (struct attempt){.ctx = ctx, .j = j, .constrained = !a->cfg->unconstrained};
	struct engine_generate_params p = {
		.sampling = {.temperature = temp,
			     .top_p = (float)a->sampling.top_p,
			     .seed = j->seed + (uint64_t)j->attempts},
		.max_new_tokens = (int)(a->cfg->step_tokens - j->n_lead),
		.on_token = attempt_token,
		.logits_hook = attempt_logits,
		.forced = attempt_forced,
		.userdata = j->at,
	};
	const struct policy_grammar *g = step_grammar(ctx, a->fmt);
	if (j->thinking)
		(void)policy_matcher_init_thinking(&j->at->m, g); /* both formats have one */
	else
		policy_matcher_init(&j->at->m, g);
	j->raw_len = 0;
	j->raw[0] = '\0';
	j->think_streamed = j->scanned = 0;
	j->think_done = false;
	thought_stream_init(&j->thought);
	/* the lead, prefilled with the prompt (and in the snapshot a retry restores), is the
	 * step's first text: the grammar and the raw text follow it as after a forced run */
	for (size_t i = 0; i < j->n_lead; i++) {
		const uint8_t *bytes;
		size_t len;
		if (policy_masker_feed(step_masker(ctx, a->fmt), &j->at->m, j->lead[i]) != 0)
			return -EBADMSG; /* policy_masker_forced gives only ids the mask allows */
		if (engine_tokenizer_token_bytes(ctx->tok, j->lead[i], &bytes, &len) == 0)
			raw_add(j, bytes, len);
	}
	j->tokens_before = engine_session_n_tokens(a->session) - (long long)j->n_lead;
	j->gen = engine_generator_create(a->session, NULL, &p, j->logits0);
	if (!j->gen)
		return -errno;
	*ret_work = (struct model_work){.kind = MODEL_WORK_DECODE, .session = a->session, .gen = j->gen};
	return 1;
}

/* The attempt's generation ended with r: 0 when a stop id ended a step the grammar accepts
 * (or, unconstrained, any text) and it parses; -EBADMSG when the step ran past step_tokens,
 * broke the grammar or does not parse; -ECANCELED / -ETIME; or an engine error. */
static int attempt_end(struct step_job *j, int r)
{
	struct local_task *a = j->a;
	uint64_t forwards, forced;

	engine_generator_stats(j->gen, &forwards, &forced);
	j->forwards += forwards;
	j->forced += forced + j->n_lead;
	engine_generator_destroy(j->gen);
	j->gen = NULL;
	/* What was fed back: every id sampled but the one that ended the loop. */
	j->decoded = engine_session_n_tokens(a->session) - j->tokens_before;
	if (r < 0)
		return r;
	if (j->at->error < 0)
		return j->at->error;
	if (!j->at->complete) {
		snprintf(j->err, sizeof(j->err), "no complete step within %u tokens", a->cfg->step_tokens);
		return -EBADMSG;
	}
	char perr[256];
	j->think_len = j->step_at = 0;
	if (j->thinking && policy_split_thinking(j->raw, j->raw_len, &j->think_len, &j->step_at) < 0) {
		snprintf(j->err, sizeof(j->err), "invalid step: no %s ends the thinking", POLICY_THINK_CLOSE);
		return -EBADMSG;
	}
	if (a->fmt->step_parse(j->raw + j->step_at, j->raw_len - j->step_at, &j->step, perr, sizeof(perr)) <
	    0) {
		snprintf(j->err, sizeof(j->err), "invalid step: %s", perr);
		return -EBADMSG;
	}
	return 0;
}

static int step_finish(struct step_job *j, int r)
{
	struct local_task *a = j->a;

	engine_generator_destroy(j->gen);
	j->gen = NULL;
	a->session_tokens = engine_session_n_tokens(a->session);
	account(a);
	engine_snapshot_destroy(j->before_decode);
	j->before_decode = NULL;
	free(j->logits0);
	j->logits0 = NULL;
	free(j->refs);
	j->refs = NULL;
	free(j->prefill_ids);
	j->prefill_ids = NULL;
	free(j->at);
	j->at = NULL;
	return r;
}

/* Persistent and thinking: the session goes back to its generation prompt ("<think>\n") and
 * the turn is closed with "</think>", the step as decoded and `close`, so that the history
 * holds no think text (docs/policy.md, thinking). j->close becomes that piece. */
static int drop_thinking(struct worker_ctx *ctx, struct step_job *j)
{
	struct policy_piece *tc = &j->think_close;
	size_t tl = strlen(POLICY_THINK_CLOSE), sl = j->raw_len - j->step_at, n = 0;
	char *text = xmalloc(tl + sl + j->close->text_len + 1);
	int32_t *ids = NULL;
	int r;

	if ((r = engine_session_restore(j->a->session, j->before_decode)) < 0) {
		snprintf(j->err, sizeof(j->err), "cannot restore the generation prompt: %s", strerror(-r));
		free(text);
		return r;
	}
	memcpy(text, POLICY_THINK_CLOSE, tl);
	memcpy(text + tl, j->raw + j->step_at, sl);
	if ((r = engine_tokenizer_encode(ctx->tok, text, tl + sl, true, &ids, &n)) < 0) {
		snprintf(j->err, sizeof(j->err), "cannot tokenize the step: %s", strerror(-r));
		free(text);
		return r;
	}
	tc->ids = xreallocarray(ids, n + j->close->n_ids, sizeof(*ids));
	memcpy(tc->ids + n, j->close->ids, j->close->n_ids * sizeof(*ids));
	tc->n_ids = n + j->close->n_ids;
	memcpy(text + tl + sl, j->close->text, j->close->text_len);
	tc->text_len = tl + sl + j->close->text_len;
	text[tc->text_len] = '\0';
	tc->text = text;
	j->close = tc;
	return 0;
}

/* The step as a sequence job: restore (window, rebuild) -> prefill the piece -> decode
 * attempts under the grammar, an invalid one retried from the snapshot taken before decoding
 * -> prefill the close of the assistant turn. */
static int step_next(struct worker_ctx *ctx, void *arg, int r, struct model_work *ret_work)
{
	struct step_job *j = arg;
	struct local_task *a = j->a;
	const struct policy_piece *p = j->piece;
	char why[256];

	switch ((enum step_phase)j->phase) {
	case STEP_START:
		j->raw = xmalloc(AGENT_MAX_RAW_BYTES + 1);
		j->raw[0] = '\0';
		j->logits0 = xmalloc((size_t)a->vocab * sizeof(float));
		j->at = xcalloc(1, sizeof(*j->at));
		j->t0 = time_mono_us();
		if (j->restore_prefix && (r = engine_session_restore(a->session, a->prefix)) < 0) {
			snprintf(j->err, sizeof(j->err), "cannot restore the prefix snapshot: %s",
				 strerror(-r));
			return step_finish(j, r);
		}
		const struct engine_snapshot *base = a->rolling ? a->rolling : a->prefix;
		if (j->restore_rolling && (r = engine_session_restore(a->session, base)) < 0) {
			snprintf(j->err, sizeof(j->err), "cannot restore the rolling snapshot: %s",
				 strerror(-r));
			return step_finish(j, r);
		}
		if (j->rebase) {
			/* The session holds what the old base did: drop it before the new one is
			 * taken, so that the task never holds more states than it was admitted for. */
			j->dropped = a->rolling != NULL;
			engine_snapshot_destroy(a->rolling);
			a->rolling = NULL;
			account(a);
			if (j->evict && j->evict->n_ids) {
				j->phase = STEP_EVICT;
				j->prefill_base = engine_session_n_tokens(a->session);
				*ret_work = (struct model_work){.kind = MODEL_WORK_PREFILL,
								.session = a->session,
								.ids = j->evict->ids,
								.n = j->evict->n_ids,
								.want = ENGINE_LOGITS_NONE};
				return 1;
			}
		}
		/* nothing evicted to prefill */
		/* fall through */
	case STEP_EVICT:
		if (r < 0) {
			if (!local_stopped(r))
				snprintf(j->err, sizeof(j->err), "prefill failed: %s",
					 engine_backend_strerror(ctx->backend, r, why, sizeof(why)));
			return step_finish(j, r);
		}
		if (j->rebase) {
			if (!(a->rolling = engine_session_snapshot(a->session)))
				return step_finish(j, -errno);
			a->rolling_tokens = engine_session_n_tokens(a->session);
			j->rebased = true;
			account(a);
		}
		j->n_lead = step_lead(ctx, a, j->thinking, j->lead, STEP_LEAD_MAX);
		if (p->n_images) {
			/* the lead's positions (after the piece) are plain ids: zero refs */
			j->refs = xcalloc(p->n_ids + j->n_lead, sizeof(*j->refs));
			for (size_t k = 0; k < p->n_images; k++)
				for (size_t i = 0; i < p->images[k].n_tokens; i++)
					j->refs[p->images[k].offset + i] =
						(struct engine_row_ref){.rows = j->slot_rows[k], .row = i};
		}
		const int32_t *ids = p->ids;
		if (j->n_lead) {
			j->prefill_ids = xreallocarray(NULL, p->n_ids + j->n_lead, sizeof(*ids));
			memcpy(j->prefill_ids, p->ids, p->n_ids * sizeof(*ids));
			memcpy(j->prefill_ids + p->n_ids, j->lead, j->n_lead * sizeof(*ids));
			ids = j->prefill_ids;
		}
		j->phase = STEP_PREFILL;
		j->prefill_base = engine_session_n_tokens(a->session);
		*ret_work = (struct model_work){.kind = MODEL_WORK_PREFILL,
						.session = a->session,
						.ids = ids,
						.refs = j->refs,
						.n = p->n_ids + j->n_lead,
						.want = ENGINE_LOGITS_LAST,
						.logits = j->logits0};
		return 1;
	case STEP_PREFILL:
		if (r < 0) {
			if (!local_stopped(r))
				snprintf(j->err, sizeof(j->err), "prefill failed: %s",
					 engine_backend_strerror(ctx->backend, r, why, sizeof(why)));
			return step_finish(j, r);
		}
		j->t1 = time_mono_us();
		j->prefill_us = j->t1 - j->t0;
		prefill_progress(j, true);
		if ((a->cfg->step_retries > 0 || (j->thinking && j->close)) &&
		    !(j->before_decode = engine_session_snapshot(a->session)))
			return step_finish(j, -errno);
		j->attempts = 1;
		j->phase = STEP_DECODE;
		if ((r = attempt_start(ctx, j, ret_work)) < 0)
			return step_finish(j, r);
		return 1;
	case STEP_DECODE:
		r = attempt_end(j, r);
		if (r == -EBADMSG && j->attempts <= (int)a->cfg->step_retries) {
			log_info("task %lld: %s; retrying (attempt %d of %u)", (long long)a->t->id, j->err,
				 j->attempts + 1, a->cfg->step_retries + 1);
			progress(a, "retry", "{s:i, s:s}", "attempt", j->attempts + 1, "error", j->err);
			if ((r = engine_session_restore(a->session, j->before_decode)) < 0)
				return step_finish(j, r);
			j->attempts++;
			if ((r = attempt_start(ctx, j, ret_work)) < 0)
				return step_finish(j, r);
			return 1;
		}
		j->decode_us = time_mono_us() - j->t1;
		log_debug("task %lld: %d attempt(s), %llu decode forwards, %llu forced tokens "
			  "(jump-forward %s)",
			  (long long)a->t->id, j->attempts, (unsigned long long)j->forwards,
			  (unsigned long long)j->forced, a->jump_forward ? "on" : "off");
		if (r < 0 && r != -EBADMSG && r != -EINTR && !local_stopped(r))
			snprintf(j->err, sizeof(j->err), "decoding failed: %s",
				 engine_backend_strerror(ctx->backend, r, why, sizeof(why)));
		if (r < 0 || !j->close)
			return step_finish(j, r);
		if (j->thinking && (r = drop_thinking(ctx, j)) < 0)
			return step_finish(j, r);
		j->phase = STEP_CLOSE;
		*ret_work = (struct model_work){.kind = MODEL_WORK_PREFILL,
						.session = a->session,
						.ids = j->close->ids,
						.n = j->close->n_ids,
						.want = ENGINE_LOGITS_NONE};
		return 1;
	case STEP_CLOSE:
		j->closed = r == 0;
		if (r < 0 && !local_stopped(r))
			snprintf(j->err, sizeof(j->err), "cannot close the assistant turn: %s",
				 engine_backend_strerror(ctx->backend, r, why, sizeof(why)));
		return step_finish(j, r);
	}
	return step_finish(j, -EINVAL);
}

/* ---- prompts (executor thread) ------------------------------------------------------------ */

/* The SHA-256 (hex) of the ids of `piece` followed by those of `close` (may be NULL), each
 * as 4 little-endian bytes: what a step prefilled, journaled so that a chat export re-rendered
 * elsewhere can be checked against it (docs/journal.md). A digest rather than the ids: a
 * window step re-prefills its whole history, thousands of ids per step, all of which the
 * exported turns already determine. */
static void prefill_sha256(const struct policy_piece *piece, const struct policy_piece *close, char ret[65])
{
	size_t n = piece->n_ids + (close ? close->n_ids : 0);
	uint8_t *bytes = xmalloc(n * 4 + 1);

	for (size_t i = 0; i < n; i++) {
		uint32_t v = (uint32_t)(i < piece->n_ids ? piece->ids[i] : close->ids[i - piece->n_ids]);
		for (int b = 0; b < 4; b++)
			bytes[i * 4 + (size_t)b] = (uint8_t)(v >> (8 * b));
	}
	ipc_sha256_hex(bytes, n * 4, ret);
	free(bytes);
}

/* Journals the prefix the session starts from and how the turns after it are written
 * (docs/journal.md, `prompt`), for the chat export. A failure is logged, not fatal: the task
 * itself does not depend on it. */
static void journal_prompt(struct local_task *a, const struct policy_piece *prefix, bool reasoning)
{
	char *system = NULL, *user = NULL, sha[65];
	int r;

	if ((r = policy_prefix_text(a->renderer, a->t->req->instruction, &system, &user)) < 0) {
		log_warning("task %lld: cannot journal its prompt: %s", (long long)a->t->id, strerror(-r));
		return;
	}
	prefill_sha256(prefix, NULL, sha);
	char *obs = policy_format_observation_text(a->fmt, false);
	json_t *o =
		json_pack("{s:s, s:s, s:s, s:s, s:i, s:b, s:s, s:s?, s:b, s:I, s:s}", "format", a->fmt->name,
			  "system_text", a->penv.published ? "published" : "holod", "system", system, "user",
			  user, "tokens_per_tile", a->tokens_per_tile, "reasoning", reasoning, "evicted",
			  a->fmt->turns.evicted, "observation", obs, "result_turn",
			  a->fmt->turns.result_own_turn, "tokens", (json_int_t)prefix->n_ids, "sha256", sha);
	free(obs);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!text || (r = journal_task_prompt(a->run->env->journal, a->t->id, text)) < 0)
		log_warning("task %lld: cannot journal its prompt: %s", (long long)a->t->id,
			    strerror(text ? -r : ENOMEM));
	free(text);
	json_decref(o);
	free(system);
	free(user);
}

/* Renders the history window: obs[first..index] with steps[first..index-1], images of the last
 * `window` observations. ret_slots receives their rows. With ret_evicted (rolling), the same
 * conversation without the `held` evicted observations after `first` that the rolling base
 * holds: the newly evicted turns into ret_evicted, the window into ret. */
static int render_history(struct local_task *a, size_t first, size_t index, size_t held,
			  struct policy_piece *ret_evicted, struct policy_piece *ret,
			  struct engine_rows ***ret_slots)
{
	size_t n = index + 1 - first;
	struct policy_observation *obs = xcalloc(n, sizeof(*obs));
	for (size_t i = 0; i < n; i++) {
		const struct obs_rec *o = &a->obs[first + i];
		obs[i].n_tiles = o->n_tiles;
		const struct policy_tool_result *res = &a->h->results[first + i];
		obs[i].result = res->text ? res : NULL;
	}
	int r = ret_evicted ?
			policy_render_rolling(a->renderer, obs, a->h->steps + first, n - 1, a->window, held,
					      ret_evicted, ret) :
			policy_render_window(a->renderer, obs, a->h->steps + first, n - 1, a->window, ret);
	free(obs);
	if (r < 0)
		return r;
	struct engine_rows **slots = xcalloc(ret->n_images + 1, sizeof(*slots));
	for (size_t k = 0; k < ret->n_images; k++) {
		const struct obs_rec *o = &a->obs[index + 1 - ret->n_images + k];
		if (!o->rows || o->n_rows != ret->images[k].n_tokens) {
			free(slots);
			policy_piece_finish(ret);
			policy_piece_finish(ret_evicted);
			return -EINVAL;
		}
		slots[k] = o->rows;
	}
	*ret_slots = slots;
	return 0;
}

/* The size of the history from step `first` on, for agent_history_fit: the prefix and what
 * render_history makes. */
struct fit_arg {
	struct local_task *a;
	size_t index;
	char *err;
	size_t errlen;
};

static int history_size(void *userdata, size_t first, long long *ret_size)
{
	struct fit_arg *f = userdata;
	struct policy_piece p = {0};
	struct engine_rows **slots = NULL;
	int r = render_history(f->a, first, f->index, 0, NULL, &p, &slots);

	if (r < 0) {
		snprintf(f->err, f->errlen, "cannot render the history: %s", strerror(-r));
		return r;
	}
	*ret_size = f->a->prefix_tokens + (long long)p.n_ids;
	free(slots);
	policy_piece_finish(&p);
	return 0;
}

/* The step's prompt: persistent -> this observation's turn (or a rebuild near the cap);
 * window -> the history that fits. */
static int build_prompt(struct local_task *a, size_t index, struct policy_piece *ret,
			struct engine_rows ***ret_slots, bool *ret_restore, const char **ret_mode, char *err,
			size_t errlen)
{
	long long limits[AGENT_HISTORY_MAX_LIMITS];
	bool rebuild = a->history == IPC_HISTORY_PERSISTENT;
	size_t n_limits = agent_history_limits(rebuild, a->cfg->context_tokens, a->cfg->step_tokens,
					       CLOSE_TOKENS_MAX, a->prefix_tokens, limits);
	struct obs_rec *o = &a->obs[index];
	int r;

	if (a->history == IPC_HISTORY_PERSISTENT) {
		struct policy_observation obs = {.n_tiles = o->n_tiles,
						 .result = a->h->results[index].text ? &a->h->results[index] :
										       NULL};
		if ((r = policy_render_step(a->renderer, &obs, false, ret)) < 0) {
			snprintf(err, errlen, "cannot render the observation: %s", strerror(-r));
			return r;
		}
		/* The last limit is the whole budget. */
		if (a->session_tokens + (long long)ret->n_ids <= limits[n_limits - 1]) {
			struct engine_rows **slots = xcalloc(2, sizeof(*slots));
			slots[0] = o->rows;
			*ret_slots = slots;
			*ret_restore = false;
			*ret_mode = "persistent";
			return 0;
		}
		policy_piece_finish(ret);
		*ret_mode = "rebuild";
	} else {
		*ret_mode = "window";
	}
	/* From the prefix snapshot: as much recent history as fits the first limit that any
	 * does. */
	struct fit_arg f = {a, index, err, errlen};
	for (size_t l = 0; l < n_limits; l++) {
		size_t first;
		if ((r = agent_history_fit(index, limits[l], history_size, &f, &first)) < 0)
			return r;
		if (first > index)
			continue;
		if ((r = render_history(a, first, index, 0, NULL, ret, ret_slots)) < 0) {
			snprintf(err, errlen, "cannot render the history: %s", strerror(-r));
			return r;
		}
		*ret_restore = true;
		return 0;
	}
	snprintf(err, errlen,
		 "the observation does not fit the context of %u tokens "
		 "(--context-tokens)",
		 a->cfg->context_tokens);
	return -ENOSPC;
}

/* Observations evicted when obs[first..index] is the history: all but the last `window`. */
static size_t evicted_after(const struct local_task *a, size_t first, size_t index)
{
	size_t n = index + 1 - first;
	return n > a->window ? n - a->window : 0;
}

/* The rolling step's prompt: from the rolling base, the observations evicted since (one from
 * step K on) into ret_evicted, then the window into ret; or, when the base with them would
 * pass the budget (or a failed step lost the base), a rebuild from the prefix snapshot: the
 * recent history that fits half the room after the prefix (else the whole budget), its evicted
 * part snapshotted as the new base. *ret_first and *ret_held: the base after the step. */
static int build_rolling(struct local_task *a, size_t index, struct policy_piece *ret_evicted,
			 struct policy_piece *ret, struct engine_rows ***ret_slots, struct step_job *sj,
			 size_t *ret_first, size_t *ret_held, const char **ret_mode, char *err, size_t errlen)
{
	long long limits[AGENT_HISTORY_MAX_LIMITS];
	size_t n_limits = agent_history_limits(true, a->cfg->context_tokens, a->cfg->step_tokens,
					       CLOSE_TOKENS_MAX, a->prefix_tokens, limits);
	int r;

	if (!a->roll_lost) {
		r = render_history(a, a->roll_first, index, a->roll_held, ret_evicted, ret, ret_slots);
		if (r < 0) {
			snprintf(err, errlen, "cannot render the history: %s", strerror(-r));
			return r;
		}
		/* The last limit is the whole budget. */
		if (a->rolling_tokens + (long long)(ret_evicted->n_ids + ret->n_ids) <= limits[n_limits - 1]) {
			sj->restore_rolling = true;
			sj->rebase = ret_evicted->n_ids > 0;
			*ret_first = a->roll_first;
			*ret_held = evicted_after(a, a->roll_first, index);
			*ret_mode = "rolling";
			return 0;
		}
		policy_piece_finish(ret_evicted);
		policy_piece_finish(ret);
		free(*ret_slots);
		*ret_slots = NULL;
	}
	struct fit_arg f = {a, index, err, errlen};
	for (size_t l = 0; l < n_limits; l++) {
		size_t first;
		if ((r = agent_history_fit(index, limits[l], history_size, &f, &first)) < 0)
			return r;
		if (first > index)
			continue;
		if ((r = render_history(a, first, index, 0, ret_evicted, ret, ret_slots)) < 0) {
			snprintf(err, errlen, "cannot render the history: %s", strerror(-r));
			return r;
		}
		sj->restore_prefix = true;
		sj->rebase = true;
		*ret_first = first;
		*ret_held = evicted_after(a, first, index);
		*ret_mode = "rebuild";
		return 0;
	}
	snprintf(err, errlen,
		 "the observation does not fit the context of %u tokens "
		 "(--context-tokens)",
		 a->cfg->context_tokens);
	return -ENOSPC;
}

/* ---- the ops (executor thread) ------------------------------------------------------------- */

static struct local_provider *local_of(struct provider *p)
{
	return (struct local_provider *)p;
}

static enum provider_state state_of(enum model_worker_state s)
{
	switch (s) {
	case MODEL_WORKER_NONE:
		return PROVIDER_NONE;
	case MODEL_WORKER_LOADING:
		return PROVIDER_LOADING;
	case MODEL_WORKER_READY:
		return PROVIDER_READY;
	case MODEL_WORKER_FAILED:
		break;
	}
	return PROVIDER_FAILED;
}

static enum provider_state local_state(struct provider *p)
{
	return state_of(model_worker_state(local_of(p)->worker));
}

static enum provider_state local_wait_ready(struct provider *p)
{
	return state_of(model_worker_wait_loaded(local_of(p)->worker));
}

static const char *local_error(struct provider *p)
{
	return model_worker_error(local_of(p)->worker);
}

static json_t *local_provenance(struct provider *p)
{
	return model_worker_provenance(local_of(p)->worker);
}

static void local_task_close(struct provider_task *pt)
{
	struct local_task *a = (struct local_task *)pt;

	if (!a)
		return;
	if (a->session || a->prefix)
		model_worker_call(a->cfg->worker, job_close, a);
	model_worker_release(a->cfg->worker, a->reserved);
	for (size_t i = 0; i < a->cap; i++)
		engine_rows_destroy(a->obs[i].rows); /* left by a failed job_close only */
	free(a->obs);
	policy_piece_finish(&a->paused_evicted);
	policy_renderer_destroy(a->renderer);
	free(a);
}

static int local_task_open(struct provider *p, const struct provider_task_args *args,
			   struct provider_task **ret, char *err, size_t errlen)
{
	struct local_provider *lp = local_of(p);
	const struct executor_task *t = args->t;
	struct local_task *a = xcalloc(1, sizeof(*a));
	struct policy_piece prefix = {0};
	int r;

	a->base.p = p;
	a->cfg = args->cfg;
	a->t = t;
	a->run = args->run;
	a->history = args->history;
	a->window = args->window;
	a->max_tiles = args->max_tiles;
	a->sampling = args->sampling;
	a->thinking = args->thinking;
	a->thinking_tokens = args->thinking_tokens;
	a->jump_forward = args->jump_forward;
	a->tokens_per_tile = model_worker_tokens_per_tile(lp->worker);
	a->fmt = args->format ? args->format : &policy_format_holo3;
	a->penv = (struct policy_env){.screen_width = a->run->monitor.width,
				      .screen_height = a->run->monitor.height,
				      .date = args->date,
				      .reasoning = args->thinking,
				      .max_steps = t->max_steps,
				      .max_time_s = t->max_seconds,
				      .published =
					      a->fmt == &policy_format_holo_nano ? a->cfg->published : NULL,
				      .secret_names = a->cfg->secret_names};
	a->renderer = policy_renderer_create(a->fmt, model_worker_tokenizer(lp->worker), &a->penv,
					     a->tokens_per_tile);
	if (!a->renderer) {
		r = -errno;
		snprintf(err, errlen, "cannot build the prompt renderer: %s", strerror(-r));
		goto close_task;
	}
	if ((r = policy_render_prefix(a->renderer, t->req->instruction, &prefix)) < 0) {
		if (r == -EINVAL)
			/* The chat renderer refuses text that holds a special token of the
			 * tokenizer: it would forge a turn marker or an image slot. */
			snprintf(err, errlen,
				 "cannot render the prompt: the instruction contains one of the "
				 "model's special tokens (a turn marker such as <SPECIAL_11>, or "
				 "<image>, <img>, <think>); rephrase it without them");
		else
			snprintf(err, errlen, "cannot render the prompt: %s", strerror(-r));
		goto close_task;
	}
	struct open_job oj = {.a = a, .prefix = &prefix, .stop = t->stop, .deadline_us = a->run->deadline_us};
	/* admission: the session waits until what it may grow to fits the state budget */
	r = model_worker_admit(lp->worker, (long long)t->id, (int)a->cfg->context_tokens,
			       task_copies(a->cfg->step_retries, a->thinking, a->history), (int)prefix.n_ids,
			       t->stop, UINT64_MAX, &a->reserved, err, errlen);
	if (r == -ENODEV)
		snprintf(err, errlen, "the model is not loaded: %s",
			 model_worker_error(lp->worker) ? model_worker_error(lp->worker) : "none");
	if (r < 0)
		goto close_task;
	progress(a, "admitted", NULL);
	r = model_worker_run(lp->worker,
			     &(struct model_seq_job){.next = open_next, .check = open_check, .arg = &oj});
	if (r == -ETIME) {
		snprintf(err, errlen,
			 "max_seconds budget (%u s) exhausted while prefilling the prompt "
			 "(%zu tokens)",
			 t->max_seconds, prefix.n_ids);
		goto close_task;
	}
	if (r < 0 && r != -ECANCELED) {
		char why[512];
		snprintf(err, errlen, "cannot prefill the prompt (%zu tokens): %s", prefix.n_ids,
			 engine_backend_strerror(engine_session_backend(a->session), r, why, sizeof(why)));
		goto close_task;
	}
	if (r < 0)
		goto close_task;
	journal_prompt(a, &prefix, a->penv.reasoning);
	log_info("task %lld: %s history (window %zu), prompt prefix %d tokens in %.1f ms", (long long)t->id,
		 ipc_history_to_string(a->history), a->window, a->prefix_tokens, oj.prefill_us / 1000.0);
	policy_piece_finish(&prefix);
	*ret = &a->base;
	return 0;

close_task:
	policy_piece_finish(&prefix);
	local_task_close(&a->base);
	return r;
}

static void obs_grow(struct local_task *a, size_t index)
{
	if (index < a->cap)
		return;
	size_t cap = MAX(a->cap * 2, (size_t)16);
	a->obs = xreallocarray(a->obs, cap, sizeof(*a->obs));
	memset(a->obs + a->cap, 0, (cap - a->cap) * sizeof(*a->obs));
	a->cap = cap;
}

static int local_observe(struct provider_task *pt, size_t index, const struct x11_frame *frame, char *err,
			 size_t errlen)
{
	struct local_task *a = (struct local_task *)pt;
	int r;

	obs_grow(a, index);
	struct engine_image *img =
		engine_image_from_rgb(frame->width, frame->height, frame->stride, frame->pixels);
	if (!img) {
		r = -errno;
		snprintf(err, errlen, "%s", strerror(-r));
		return r;
	}
	struct encode_job ej = {.a = a, .stop = a->t->stop};
	r = local_encode_prepare(a->cfg->worker, img, a->max_tiles, &ej);
	if (r == 0) {
		if (index >= a->window) {
			ej.drop = a->obs[index - a->window].rows;
			a->obs[index - a->window].rows = NULL;
		}
		ej.redo = a->obs[index].rows;
		a->obs[index].rows = NULL;
		r = model_worker_run(a->cfg->worker, &(struct model_seq_job){.next = encode_next,
									     .check = encode_check,
									     .arg = &ej});
		/* a job that never ran (the worker stopping) leaves the rows for job_close */
		if (ej.drop)
			a->obs[index - a->window].rows = ej.drop;
		if (ej.redo)
			a->obs[index].rows = ej.redo;
	}
	local_encode_cleanup(&ej);
	if (r < 0) {
		if (r != -ECANCELED)
			snprintf(err, errlen, "%s", ej.err[0] ? ej.err : strerror(-r));
		return r;
	}
	struct obs_rec *ob = &a->obs[index];
	ob->n_tiles = ej.n_tiles;
	ob->rows = ej.rows;
	ob->n_rows = ej.n_rows;
	a->last_preprocess_us = ej.preprocess_us;
	a->last_encode_us = ej.encode_us;
	return 0;
}

static int local_step(struct provider_task *pt, const struct provider_history *h, uint64_t seed,
		      struct provider_step *ret)
{
	struct local_task *a = (struct local_task *)pt;
	size_t index = h->index;
	struct obs_rec *ob = &a->obs[index];
	struct policy_piece piece = {0}, close = {0}, evicted = {0};
	struct engine_rows **slots = NULL;
	size_t roll_first = 0, roll_held = 0;
	const bool rolling = a->history == IPC_HISTORY_ROLLING;
	struct step_job sj = {.a = a,
			      .stop = a->t->stop,
			      .deadline_us = a->run->deadline_us,
			      .seed = seed,
			      .thinking = a->thinking,
			      .think_budget = a->thinking_tokens,
			      .pause = a->history != IPC_HISTORY_PERSISTENT ? a->t->pause : NULL};
	const char *mode = NULL;
	int r;

	a->h = h;
	ret->as.provider = "local";
	ret->as.prompt_tokens = ret->as.completion_tokens = ret->as.server_us = -1;
	ret->as.tiles = ob->n_tiles;
	ret->as.preprocess_us = a->last_preprocess_us;
	ret->as.encode_us = a->last_encode_us;
	if (rolling)
		r = build_rolling(a, index, &evicted, &piece, &slots, &sj, &roll_first, &roll_held, &mode,
				  ret->err, sizeof(ret->err));
	else
		r = build_prompt(a, index, &piece, &slots, &sj.restore_prefix, &mode, ret->err,
				 sizeof(ret->err));
	if (r < 0)
		goto finish;
	if (a->history == IPC_HISTORY_PERSISTENT && (r = policy_render_close(a->renderer, &close)) < 0) {
		snprintf(ret->err, sizeof(ret->err), "cannot render: %s", strerror(-r));
		goto finish;
	}
	/* A step decided again after a pause during its decode: the turns it evicted then are in
	 * the base already (nothing to prefill), and are this step's, as they would have been */
	if (a->paused_evicted.n_ids && !sj.rebase && !sj.restore_prefix) {
		policy_piece_finish(&evicted);
		evicted = a->paused_evicted;
		a->paused_evicted = (struct policy_piece){0};
		mode = a->paused_mode;
	}
	policy_piece_finish(&a->paused_evicted);
	sj.evict = &evicted;
	sj.piece = &piece;
	sj.slot_rows = slots;
	sj.close = a->history == IPC_HISTORY_PERSISTENT ? &close : NULL;
	r = model_worker_run(a->cfg->worker,
			     &(struct model_seq_job){.next = step_next, .check = step_check, .arg = &sj});
	if (rolling) {
		/* The base follows what the worker made of it. */
		if (sj.rebased) {
			a->roll_first = roll_first;
			a->roll_held = roll_held;
			a->roll_lost = false;
		} else if (sj.dropped) {
			a->roll_lost = true;
		}
		if (r == -EINTR && sj.rebased && evicted.n_ids) {
			/* copied: `evicted` is reported below and freed (evicted turns hold no
			 * image) */
			struct policy_piece *k = &a->paused_evicted;
			k->ids = xreallocarray(NULL, evicted.n_ids, sizeof(*evicted.ids));
			memcpy(k->ids, evicted.ids, evicted.n_ids * sizeof(*evicted.ids));
			k->n_ids = evicted.n_ids;
			k->text = xmalloc(evicted.text_len + 1);
			memcpy(k->text, evicted.text, evicted.text_len + 1);
			k->text_len = evicted.text_len;
			a->paused_mode = mode;
		}
	}
	ret->raw = agent_text_valid_utf8(sj.raw ? sj.raw : "", sj.raw ? sj.raw_len : 0);
	size_t think_len, step_at;
	if (a->thinking && sj.raw && policy_split_thinking(sj.raw, sj.raw_len, &think_len, &step_at) == 0)
		ret->reasoning = agent_text_valid_utf8(sj.raw, think_len);
	else if (a->thinking && sj.raw) /* cut by the budget of step_tokens: all of it */
		ret->reasoning = agent_text_valid_utf8(sj.raw, sj.raw_len);
	/* What was prefilled, in order: rolling, the evicted turns then the window. */
	const struct policy_piece *head = rolling ? &evicted : &piece;
	const struct policy_piece *tail = rolling ? &piece : sj.closed ? sj.close : NULL;
	ret->prompt_text = agent_prompt_text(head, tail, AGENT_MAX_PROMPT_TEXT_BYTES);
	struct policy_observation this_obs = {.n_tiles = ob->n_tiles,
					      .result = h->results[index].text ? &h->results[index] : NULL};
	ret->user_turn = policy_format_user_text(a->fmt, &this_obs, false);
	prefill_sha256(head, tail, ret->prompt_sha256);
	ret->prompt_mode = mode;
	ret->as.attempts = sj.attempts;
	ret->as.tokens_appended =
		(long long)(evicted.n_ids + piece.n_ids) + (sj.closed ? (long long)sj.close->n_ids : 0);
	ret->as.tokens_decoded = sj.decoded;
	ret->as.tokens_forced = (long long)sj.forced;
	ret->as.decode_forwards = (long long)sj.forwards;
	ret->as.session_tokens = a->session_tokens;
	ret->as.prefill_us = sj.prefill_us;
	ret->as.decode_us = sj.decode_us;
	if (sj.err[0])
		snprintf(ret->err, sizeof(ret->err), "%s", sj.err);
	/* A step can parse and then fail to close its turn (a stop, the deadline, an engine
	 * error): it is not acted on, so its strings are not kept either. */
	if (r < 0)
		policy_step_finish(&sj.step);
	else
		ret->step = sj.step;
finish:
	free(sj.raw);
	if (!ret->raw)
		ret->raw = xstrdup("");
	policy_piece_finish(&piece);
	policy_piece_finish(&close);
	policy_piece_finish(&sj.think_close);
	policy_piece_finish(&evicted);
	free(slots);
	return r;
}

static json_t *local_status(struct provider *p)
{
	(void)p;
	return json_pack("{s:s}", "name", "local");
}

static void local_destroy(struct provider *p)
{
	free(p);
}

static const struct provider_ops local_ops = {
	.name = "local",
	.state = local_state,
	.wait_ready = local_wait_ready,
	.error = local_error,
	.provenance = local_provenance,
	.task_open = local_task_open,
	.observe = local_observe,
	.step = local_step,
	.task_close = local_task_close,
	.status = local_status,
	.destroy = local_destroy,
};

struct provider *provider_local_create(struct model_worker *worker)
{
	struct local_provider *lp = calloc(1, sizeof(*lp));

	if (!lp)
		return NULL;
	lp->base.ops = &local_ops;
	lp->worker = worker;
	return &lp->base;
}
