/* Grounding a script's target (ground.h): one constrained point on a fresh session of the
 * local engine, whatever the task's provider.
 *
 * DESIGN (threads): ground_locate runs on the executor thread, which renders the prompt and
 * waits; the job (its encode, prefill and point decode) runs on the model worker
 * (model-worker.h), batched with the other tasks' work, and owns the session it creates. The
 * task's stop flag is polled between work items. */
#include "ground.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "common.h"
#include "provider-local.h"

/* Tokens decoded at most for a point: {"x":1000,"y":1000} is 19 bytes. */
#define GROUND_MAX_TOKENS 32

enum ground_phase {
	GROUND_ENCODE, /* the screenshot, a slice between two forwards */
	GROUND_PREFIX, /* the prompt, in the batches' prefill chunks */
	GROUND_PIECE,  /* the screenshot turn, into logits */
	GROUND_DECODE, /* the point, as decode rows of the batches */
};

struct ground_job {
	const struct agent_config *cfg;
	struct engine_session *session; /* fresh, this job's */
	const struct policy_piece *prefix;
	struct encode_job *enc;		  /* the screenshot, encoded by the job itself */
	int n_tiles;			  /* what ground_locate rendered the turn (and admitted) for */
	const struct policy_piece *piece; /* the screenshot turn */
	bool err_whole;			  /* err is the whole message, not why the target was not found */
	const atomic_int *stop;
	uint64_t deadline_us;
	int x, y;
	char raw[GROUND_MAX_TOKENS * POLICY_MASK_MAX_TOKEN_BYTES + 1];
	size_t raw_len;
	char err[256];
	/* the state machine (a sequence job of the worker) */
	enum ground_phase phase;
	struct engine_row_ref *refs;
	float *logits;
	struct policy_masker *mk; /* the model's point masker (worker_ctx), shared */
	struct policy_matcher m;
	const struct engine_tokenizer *tok;
	bool complete; /* a stop id ended a point the grammar accepts */
	int error;     /* why ground_token stopped the decode: -EBADMSG; 0 */
	struct engine_generator *gen;
};

static int ground_check(void *arg)
{
	struct ground_job *j = arg;
	return local_stop_check(j->stop, j->deadline_us);
}

/* Before each sample: the stop flag and the deadline, then the point grammar's mask. */
static int ground_logits(void *userdata, float *logits, int vocab)
{
	struct ground_job *j = userdata;

	(void)vocab;
	int r = local_stop_check(j->stop, j->deadline_us);
	if (r < 0)
		return r;
	if (policy_masker_apply(j->mk, &j->m, logits) <= 0) {
		snprintf(j->err, sizeof(j->err), "no point within %d tokens: %.100s", GROUND_MAX_TOKENS,
			 j->raw);
		return -EBADMSG;
	}
	return 0;
}

/* After each sample: the grammar follows the id; the point ends at a stop id it accepts. */
static int ground_token(void *userdata, int32_t id)
{
	struct ground_job *j = userdata;
	const uint8_t *bytes;
	size_t len;

	int r = policy_masker_feed(j->mk, &j->m, id);
	if (r == 1) {
		j->complete = true;
		return 1;
	}
	if (r < 0) {
		snprintf(j->err, sizeof(j->err), "token %d breaks the point grammar", (int)id);
		j->error = -EBADMSG;
		return 1;
	}
	if (engine_tokenizer_token_bytes(j->tok, id, &bytes, &len) == 0 && j->raw_len + len < sizeof(j->raw)) {
		memcpy(j->raw + j->raw_len, bytes, len);
		j->raw_len += len;
		j->raw[j->raw_len] = '\0';
	}
	return 0;
}

/* The job's end: everything it made goes, the session and the screenshot's rows (device
 * memory on CUDA: they never outlive a job without a session, so the worker never recreates
 * the backend under them). */
static int ground_finish(struct ground_job *j, int r)
{
	engine_generator_destroy(j->gen);
	j->gen = NULL;
	free(j->logits);
	j->logits = NULL;
	free(j->refs);
	j->refs = NULL;
	if (j->session) {
		model_worker_account(j->cfg->worker, -1, 0);
		engine_session_destroy(j->session);
		j->session = NULL;
	}
	engine_rows_destroy(j->enc->rows);
	j->enc->rows = NULL;
	return r;
}

/* Grounding as a sequence job, a fresh session (no history): the screenshot encoded in
 * slices, the prompt and the screenshot turn prefilled in the batches' chunks, then a greedy
 * decode under the point grammar as decode rows of the batches, so whatever the weights say
 * the answer is a point in 0..1000; the other tasks keep decoding throughout. */
static int ground_next(struct worker_ctx *ctx, void *arg, int r, struct model_work *ret_work)
{
	struct ground_job *j = arg;
	char why[256];

	switch (j->phase) {
	case GROUND_ENCODE:
		if ((r = local_encode_step(ctx, j->enc, r, ret_work)) == 1)
			return 1;
		if (local_stopped(r))
			return ground_finish(j, r);
		if (r < 0) {
			snprintf(j->err, sizeof(j->err), "%s", j->enc->err[0] ? j->enc->err : strerror(-r));
			j->err_whole = true;
			return ground_finish(j, r);
		}
		/* the turn was rendered (and admitted) for the grid ground_locate chose */
		if (j->enc->n_tiles != j->n_tiles) {
			snprintf(j->err, sizeof(j->err),
				 "the screenshot was encoded as %d tiles where %d were expected",
				 j->enc->n_tiles, j->n_tiles);
			j->err_whole = true;
			return ground_finish(j, -EIO);
		}
		j->session = engine_session_create_on(ctx->backend, (int)j->cfg->context_tokens);
		if (!j->session)
			return ground_finish(j, -errno);
		model_worker_account(j->cfg->worker, 1, 0);
		j->logits = xmalloc((size_t)engine_session_vocab(j->session) * sizeof(*j->logits));
		j->phase = GROUND_PREFIX;
		*ret_work = (struct model_work){.kind = MODEL_WORK_PREFILL,
						.session = j->session,
						.ids = j->prefix->ids,
						.n = j->prefix->n_ids,
						.want = ENGINE_LOGITS_NONE};
		return 1;
	case GROUND_PREFIX:
	case GROUND_PIECE:
		if (r < 0) {
			if (!local_stopped(r))
				snprintf(j->err, sizeof(j->err), "prefill failed: %s",
					 engine_backend_strerror(ctx->backend, r, why, sizeof(why)));
			return ground_finish(j, r);
		}
		if (j->phase == GROUND_PREFIX) {
			const struct policy_piece *p = j->piece;
			j->refs = xcalloc(p->n_ids, sizeof(*j->refs));
			for (size_t k = 0; k < p->n_images; k++)
				for (size_t i = 0; i < p->images[k].n_tokens; i++)
					j->refs[p->images[k].offset + i] =
						(struct engine_row_ref){.rows = j->enc->rows, .row = i};
			j->phase = GROUND_PIECE;
			*ret_work = (struct model_work){.kind = MODEL_WORK_PREFILL,
							.session = j->session,
							.ids = p->ids,
							.refs = j->refs,
							.n = p->n_ids,
							.want = ENGINE_LOGITS_LAST,
							.logits = j->logits};
			return 1;
		}
		/* built with the model (a trie over the whole vocabulary: ~0.1 s at 131k ids, which
		 * here would stall every session's next token), its mask cache warm across groundings */
		j->mk = ctx->point_masker;
		policy_matcher_init(&j->m, ctx->point_grammar);
		j->tok = ctx->tok;
		struct engine_generate_params p = {
			.sampling = {.temperature = 0.0f},
			.max_new_tokens = GROUND_MAX_TOKENS,
			.on_token = ground_token,
			.logits_hook = ground_logits,
			.userdata = j,
		};
		j->gen = engine_generator_create(j->session, NULL, &p, j->logits);
		if (!j->gen)
			return ground_finish(j, -errno);
		j->phase = GROUND_DECODE;
		*ret_work =
			(struct model_work){.kind = MODEL_WORK_DECODE, .session = j->session, .gen = j->gen};
		return 1;
	case GROUND_DECODE:
		break;
	}
	if (r == 0 && j->error < 0)
		r = j->error;
	if (r == 0 && !j->complete) {
		snprintf(j->err, sizeof(j->err), "no point within %d tokens: %.100s", GROUND_MAX_TOKENS,
			 j->raw);
		r = -EBADMSG;
	}
	if (r < 0) {
		if (!j->err[0] && !local_stopped(r))
			snprintf(j->err, sizeof(j->err), "decoding failed: %s",
				 engine_backend_strerror(ctx->backend, r, why, sizeof(why)));
		return ground_finish(j, r);
	}
	r = sscanf(j->raw, "{\"x\":%d,\"y\":%d}", &j->x, &j->y) == 2 ? 0 : -EBADMSG;
	if (r < 0)
		snprintf(j->err, sizeof(j->err), "the point \"%.100s\" does not parse", j->raw);
	return ground_finish(j, r);
}

int ground_locate(void *ground_ctx, const struct executor_task *t, uint64_t deadline_us,
		  const struct x11_frame *frame, const char *target, int *ret_mx, int *ret_my, char *err,
		  size_t errlen)
{
	const struct agent_config *cfg = ground_ctx;
	struct policy_piece prefix = {0}, piece = {0};
	struct policy_renderer *renderer = NULL;
	struct encode_job ej = {.stop = t->stop};
	uint64_t reserved = 0;
	char *task = NULL;
	int r;

	if (model_worker_wait_loaded(cfg->worker) != MODEL_WORKER_READY) {
		const char *e = model_worker_error(cfg->worker);
		snprintf(err, errlen, "a target needs a model to locate it: %s", e ? e : "none is loaded");
		return -ENODEV;
	}
	/* The task's format (holod's --policy-format for a script): its system text, task turn
	 * and observation wrapper, and its sentence for the target (docs/policy.md) */
	const struct policy_format *fmt = t->req      ? agent_format(cfg, &t->req->options) :
					  cfg->format ? cfg->format :
							&policy_format_holo3;
	char date[16];
	time_t now = time(NULL);
	struct tm tmv;
	strftime(date, sizeof(date), "%Y-%m-%d", gmtime_r(&now, &tmv));
	struct policy_env penv = {.screen_width = frame->width,
				  .screen_height = frame->height,
				  .date = date,
				  .max_steps = t->max_steps,
				  .max_time_s = t->max_seconds,
				  .published = fmt == &policy_format_holo_nano ? cfg->published : NULL,
				  .secret_names = cfg->secret_names};
	renderer = policy_renderer_create(fmt, model_worker_tokenizer(cfg->worker), &penv,
					  model_worker_tokens_per_tile(cfg->worker));
	if (!renderer) {
		r = -errno;
		snprintf(err, errlen, "cannot build the prompt renderer: %s", strerror(-r));
		return r;
	}
	task = fmt->ground_text(target);
	if (!task) {
		r = -errno;
		snprintf(err, errlen, "cannot write the target's prompt: %s", strerror(-r));
		goto finish;
	}
	log_info("task %lld: locating \"%.200s\" in the %s format", (long long)t->id, target, fmt->name);
	if ((r = policy_render_prefix(renderer, task, &prefix)) < 0) {
		snprintf(err, errlen, "cannot render the target into a prompt%s",
			 r == -EINVAL ? ": it contains one of the model's special tokens" : "");
		goto finish;
	}
	struct engine_image *img =
		engine_image_from_rgb(frame->width, frame->height, frame->stride, frame->pixels);
	if (!img) {
		r = -errno;
		snprintf(err, errlen, "%s", strerror(-r));
		goto finish;
	}
	r = local_encode_prepare(cfg->worker, img, (int)cfg->max_tiles, &ej);
	if (r < 0) {
		snprintf(err, errlen, "%s", ej.err);
		goto finish;
	}
	/* The screenshot turn for the grid the encode will choose, so that the grounding session,
	 * which lives across the batches' forwards beside the admitted sessions, is admitted as
	 * they are: for the prompt, the turn and the point. */
	struct engine_vision_preprocess pp;
	struct engine_vision_grid grid;
	engine_vision_get_preprocess(model_worker_vision(cfg->worker), &pp);
	if ((r = engine_vision_select_grid(frame->width, frame->height, pp.tile_size,
					   ej.max_tiles > 0 ? ej.max_tiles : pp.max_tiles, pp.use_thumbnail,
					   &grid)) < 0) {
		snprintf(err, errlen, "cannot tile a %dx%d screenshot: %s", frame->width, frame->height,
			 strerror(-r));
		goto finish;
	}
	if ((r = policy_render_step(renderer, &(struct policy_observation){.n_tiles = grid.n_tiles}, false,
				    &piece)) < 0) {
		snprintf(err, errlen, "cannot render the screenshot turn: %s", strerror(-r));
		goto finish;
	}
	size_t need = prefix.n_ids + piece.n_ids + GROUND_MAX_TOKENS;
	if (need > cfg->context_tokens) {
		snprintf(err, errlen,
			 "cannot locate \"%.200s\": its prompt and screenshot take %zu tokens, more "
			 "than the %u of --context-tokens",
			 target, need, cfg->context_tokens);
		r = -E2BIG;
		goto finish;
	}
	char why[512];
	r = model_worker_admit(cfg->worker, (long long)t->id, (int)need, 1, 0, t->stop, deadline_us,
			       &reserved, why, sizeof(why));
	if (r < 0) {
		snprintf(err, errlen, "cannot locate \"%.200s\": %s", target,
			 r == -EFBIG ? why : strerror(-r));
		goto finish;
	}
	struct ground_job gj = {.cfg = cfg,
				.prefix = &prefix,
				.enc = &ej,
				.n_tiles = grid.n_tiles,
				.piece = &piece,
				.stop = t->stop,
				.deadline_us = deadline_us};
	r = model_worker_run(cfg->worker,
			     &(struct model_seq_job){.next = ground_next, .check = ground_check, .arg = &gj});
	if (r < 0 && gj.err_whole) {
		snprintf(err, errlen, "%s", gj.err);
		goto finish;
	}
	if (r < 0) {
		snprintf(err, errlen, "cannot locate \"%.200s\": %s", target,
			 gj.err[0] ? gj.err : strerror(-r));
		goto finish;
	}
	*ret_mx = gj.x;
	*ret_my = gj.y;
finish:
	model_worker_release(cfg->worker, reserved);
	local_encode_cleanup(&ej);
	policy_piece_finish(&piece);
	policy_piece_finish(&prefix);
	policy_renderer_destroy(renderer);
	free(task);
	return r;
}
