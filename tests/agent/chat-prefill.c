/* chat-prefill MODEL_DIR EXPORT_DIR: the round trip of `holoctl export --format chat`.
 *
 * Re-renders every line of EXPORT_DIR/chat.jsonl with the engine's chat renderer
 * (engine_chat_*) and the model's tokenizer, the way the agent builds its session, and checks
 * the ids against what the session actually prefilled (the counts and SHA-256 digests the
 * journal recorded, exported under "prefill"):
 *   - the prefix: the system and task turns;
 *   - persistent steps: the step's user turn, the generation prompt and, for a valid step, the
 *     close of the assistant turn, continuing the conversation state; with thinking (the
 *     prompt's "reasoning"), the close is "</think>" + the step without its think block, and
 *     the exported assistant content (the raw output) loses its think block everywhere;
 *   - window steps (and a persistent or rolling session's rebuild): from the prefix again, the
 *     turns of the history that fitted (the earliest first turn whose ids count what the step
 *     prefilled), screenshots older than the window replaced by the export's eviction text,
 *     assistant turns as the canonical step the agent re-serializes;
 *   - rolling steps: the end of that window, the evicted turn and the window that the step
 *     appended to its snapshot (the rest of the window, which the snapshot held, is the same
 *     ids in every earlier step's);
 *   - each image: the tile grid the model's preprocessing chooses for the exported PNG is the
 *     recorded one, so the image's token span (tiles x tokens_per_tile) is determined.
 * Prints one line per task; exits 0 when everything matches, 1 at the first mismatch (which
 * it names), 2 for a usage, model or file error. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "ipc.h"
#include "policy.h"

/* One chat line at most (a task's turns; images are files beside it). */
#define MAX_LINE_BYTES (64u << 20)

struct step_in {
	const char *result;    /* the previous action's result in a user turn of its own, or NULL */
	const char *user;      /* the user turn's text, "<image>" placeholder */
	const char *image;     /* its screenshot, relative to the export directory */
	int tiles;	       /* recorded tile count */
	const char *assistant; /* the model's step; NULL for an invalid one */
	const char *mode;      /* persistent, window, rolling, rebuild */
	bool valid;
	long long tokens; /* ids prefilled by the step */
	const char *sha256;
};

struct task_in {
	long long id;
	const struct policy_format *fmt; /* the line's format: the history's steps */
	const char *system, *task;
	int tokens_per_tile;
	bool reasoning;
	const char *evicted;
	bool rolling; /* the history mode: a rebuild does not close its turn */
	size_t window;
	int max_tiles;
	long long prefix_tokens;
	const char *prefix_sha256;
	struct step_in *steps;
	size_t n_steps;
};

static void sha_ids(const int32_t *ids, size_t n, char ret[65])
{
	uint8_t *bytes = xmalloc(n * 4 + 1);
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++)
			bytes[i * 4 + (size_t)b] = (uint8_t)((uint32_t)ids[i] >> (8 * b));
	ipc_sha256_hex(bytes, n * 4, ret);
	free(bytes);
}

static const char *str(json_t *o, const char *name)
{
	return json_string_value(json_object_get(o, name));
}

static bool role_is(json_t *msg, const char *role)
{
	const char *r = str(msg, "role");
	return r && strcmp(r, role) == 0;
}

/* Reads a line's members into *t (pointing into `line`). 0, or -EINVAL with err filled. */
static int parse_task(json_t *line, struct task_in *t, char *err, size_t errlen)
{
	json_t *msgs = json_object_get(line, "messages");
	json_t *prefill = json_object_get(line, "prefill");
	json_t *prefix = json_object_get(prefill, "prefix");
	json_t *psteps = json_object_get(prefill, "steps");

	memset(t, 0, sizeof(*t));
	t->id = json_integer_value(json_object_get(line, "task_id"));
	t->fmt = policy_format_find(str(line, "format"));
	t->tokens_per_tile = (int)json_integer_value(json_object_get(line, "tokens_per_tile"));
	t->reasoning = json_is_true(json_object_get(line, "reasoning"));
	t->evicted = str(line, "evicted");
	t->rolling = str(line, "history") && strcmp(str(line, "history"), "rolling") == 0;
	t->window = (size_t)json_integer_value(json_object_get(line, "window"));
	t->max_tiles = (int)json_integer_value(json_object_get(line, "max_tiles"));
	t->prefix_tokens = json_integer_value(json_object_get(prefix, "tokens"));
	t->prefix_sha256 = str(prefix, "sha256");
	if (json_array_size(msgs) < 2 || !t->fmt || !t->evicted || !t->prefix_sha256 || t->window < 1 ||
	    t->tokens_per_tile < 1 || !json_is_array(psteps) || !role_is(json_array_get(msgs, 0), "system") ||
	    !role_is(json_array_get(msgs, 1), "user")) {
		snprintf(err, errlen,
			 "task %lld: not a chat export line (format, messages, "
			 "prefill, window, tokens_per_tile, evicted)",
			 t->id);
		return -EINVAL;
	}
	t->system = str(json_array_get(msgs, 0), "content");
	t->task = str(json_array_get(msgs, 1), "content");
	t->steps = xcalloc(json_array_size(psteps) + 1, sizeof(*t->steps));
	const char *result = NULL; /* a user message without images: the next step's result */
	for (size_t i = 2; i < json_array_size(msgs); i++) {
		json_t *m = json_array_get(msgs, i);
		if (role_is(m, "user") && !json_object_get(m, "images") && !result && str(m, "content")) {
			result = str(m, "content");
		} else if (role_is(m, "user") && t->n_steps < json_array_size(psteps)) {
			struct step_in *s = &t->steps[t->n_steps++];
			s->result = result;
			result = NULL;
			json_t *img = json_array_get(json_object_get(m, "images"), 0);
			json_t *ps = json_array_get(psteps, t->n_steps - 1);
			s->user = str(m, "content");
			s->image = str(img, "path");
			s->tiles = (int)json_integer_value(json_object_get(img, "tiles"));
			s->mode = str(ps, "prompt");
			s->valid = json_is_true(json_object_get(ps, "valid"));
			s->tokens = json_integer_value(json_object_get(ps, "tokens"));
			s->sha256 = str(ps, "sha256");
			if (!s->user || !s->image || !s->mode || !s->sha256) {
				snprintf(err, errlen,
					 "task %lld: message %zu lacks its text, image "
					 "or prefill record",
					 t->id, i);
				return -EINVAL;
			}
		} else if (role_is(m, "assistant") && t->n_steps > 0 && !t->steps[t->n_steps - 1].assistant) {
			t->steps[t->n_steps - 1].assistant = str(m, "content");
		} else {
			snprintf(err, errlen, "task %lld: message %zu is out of order", t->id, i);
			return -EINVAL;
		}
	}
	if (t->n_steps != json_array_size(psteps) || result) {
		snprintf(err, errlen, "task %lld: %zu user turns for %zu prefilled steps", t->id, t->n_steps,
			 json_array_size(psteps));
		return -EINVAL;
	}
	/* thinking: the raw output is the think block, "</think>", then the step */
	for (size_t k = 0; t->reasoning && k < t->n_steps; k++) {
		const char *a = t->steps[k].assistant;
		size_t think_len, step_at;

		if (!a)
			continue;
		if (policy_split_thinking(a, strlen(a), &think_len, &step_at) < 0) {
			snprintf(err, errlen, "task %lld step %zu: thinking, and no %s in the output", t->id,
				 k, POLICY_THINK_CLOSE);
			return -EINVAL;
		}
		t->steps[k].assistant = a + step_at;
	}
	return 0;
}

/* What closes a thinking step's turn in a persistent session before the end of turn: the
 * ids of "</think>" + the step (provider-local.c, drop_thinking). */
static int think_close(const struct engine_tokenizer *tok, const char *step, struct engine_chat_tokens *out)
{
	char *text = xasprintf("%s%s", POLICY_THINK_CLOSE, step);
	int32_t *ids;
	size_t n;
	int r = engine_tokenizer_encode(tok, text, strlen(text), true, &ids, &n);

	free(text);
	if (r < 0)
		return r;
	out->ids = xreallocarray(out->ids, out->n_ids + n + 1, sizeof(*ids));
	memcpy(out->ids + out->n_ids, ids, n * sizeof(*ids));
	out->n_ids += n;
	free(ids);
	return 0;
}

static int append(struct engine_chat *c, enum engine_chat_role role, const char *text, const int *tiles,
		  size_t n_images, struct engine_chat_tokens *out, char *err, size_t errlen)
{
	struct engine_chat_message m = {.role = role, .text = text, .image_tiles = tiles, .n_images = n_images};
	return engine_chat_append(c, &m, out, err, errlen);
}

/* A step's user turn(s): the result's of its own, if any, then the observation's; evicted: its
 * "<image>" placeholder becomes the eviction text. */
static int user_turn(struct engine_chat *c, const struct task_in *t, const struct step_in *s, bool evicted,
		     struct engine_chat_tokens *out, char *err, size_t errlen)
{
	const char *at = strstr(s->user, "<image>");
	if (s->result) {
		int r = append(c, ENGINE_CHAT_USER, s->result, NULL, 0, out, err, errlen);
		if (r < 0)
			return r;
	}
	if (!evicted || !at)
		return append(c, ENGINE_CHAT_USER, s->user, &s->tiles, evicted ? 0 : 1, out, err, errlen);
	char *text = xasprintf("%.*s%s%s", (int)(at - s->user), s->user, t->evicted, at + strlen("<image>"));
	int r = append(c, ENGINE_CHAT_USER, text, NULL, 0, out, err, errlen);
	free(text);
	return r;
}

/* A history assistant turn: the step as the agent re-serializes it (canonical layout). */
static int assistant_turn(struct engine_chat *c, const struct task_in *t, const struct step_in *s,
			  struct engine_chat_tokens *out, char *err, size_t errlen)
{
	struct policy_step step;
	char perr[160];
	int r;

	if (!s->assistant) {
		snprintf(err, errlen, "an invalid step has no assistant turn to carry in a window");
		return -EINVAL;
	}
	if ((r = t->fmt->step_parse(s->assistant, strlen(s->assistant), &step, perr, sizeof(perr))) < 0) {
		snprintf(err, errlen, "the assistant turn is not a valid step: %s", perr);
		return r;
	}
	char *json = t->fmt->step_to_json(&step);
	policy_step_finish(&step);
	if (!json)
		return -errno;
	r = append(c, ENGINE_CHAT_ASSISTANT, json, NULL, 0, out, err, errlen);
	free(json);
	return r;
}

/* From the prefix state: steps first..k with screenshots of the last `window` only, the
 * generation prompt and, for a valid rebuild, the close (with thinking, "</think>" + the step
 * first). *ret_chat gets the state after it. */
static int render_window(const struct engine_tokenizer *tok, const struct task_in *t,
			 const struct engine_chat *prefix, size_t first, size_t k, bool close,
			 struct engine_chat **ret_chat, struct engine_chat_tokens *out, char *err,
			 size_t errlen)
{
	struct engine_chat *c = engine_chat_dup(prefix);
	size_t first_image = k + 1 > t->window ? k + 1 - t->window : 0;
	int r = c ? 0 : -ENOMEM;

	for (size_t i = first; i <= k && r == 0; i++) {
		r = user_turn(c, t, &t->steps[i], i < first_image, out, err, errlen);
		if (r == 0 && i < k)
			r = assistant_turn(c, t, &t->steps[i], out, err, errlen);
	}
	if (r == 0)
		r = engine_chat_generation_prompt(c, out);
	if (r == 0 && close && t->reasoning)
		r = t->steps[k].assistant ? think_close(tok, t->steps[k].assistant, out) : -EINVAL;
	if (r == 0 && close)
		r = engine_chat_close_content(c, out);
	if (r < 0) {
		engine_chat_destroy(c);
		return r;
	}
	*ret_chat = c;
	return 0;
}

/* The tile grid the model's preprocessing picks for the exported screenshot. */
static int check_tiles(const char *dir, const struct engine_vision_preprocess *pp, const struct task_in *t,
		       const struct step_in *s, size_t k, char *err, size_t errlen)
{
	char *path = path_join(dir, s->image), perr[512];
	struct engine_image *img = engine_image_load_png(path, perr, sizeof(perr));
	struct engine_vision_grid grid;
	int max_tiles = t->max_tiles > 0 ? MIN(pp->max_tiles, t->max_tiles) : pp->max_tiles;
	int r;

	free(path);
	if (!img) {
		snprintf(err, errlen, "task %lld step %zu: %s", t->id, k, perr);
		return -errno;
	}
	r = engine_vision_select_grid(engine_image_width(img), engine_image_height(img), pp->tile_size,
				      max_tiles, pp->use_thumbnail, &grid);
	if (r == 0 && grid.n_tiles != s->tiles) {
		snprintf(err, errlen,
			 "task %lld step %zu: %s (%dx%d) makes %d tiles, the step "
			 "recorded %d",
			 t->id, k, s->image, engine_image_width(img), engine_image_height(img), grid.n_tiles,
			 s->tiles);
		r = -EBADMSG;
	}
	engine_image_destroy(img);
	return r;
}

/* Re-renders one task. 0 when every count and digest matches; -EBADMSG with err naming the
 * first difference; another -errno for a line the renderer refuses. */
static int check_task(const struct engine_tokenizer *tok, const struct engine_vision_preprocess *pp,
		      const char *dir, const struct task_in *t, long long *ret_ids, char *err, size_t errlen)
{
	char cerr[512] = "", sha[65];
	struct engine_chat_tokens out = {0};
	struct engine_chat *cur =
		engine_chat_create_raw(tok, t->tokens_per_tile, t->reasoning, cerr, sizeof(cerr));
	struct engine_chat *prefix = NULL;
	int r;

	if (!cur) {
		snprintf(err, errlen, "task %lld: %s", t->id, cerr);
		return -errno;
	}
	r = append(cur, ENGINE_CHAT_SYSTEM, t->system, NULL, 0, &out, cerr, sizeof(cerr));
	if (r == 0)
		r = append(cur, ENGINE_CHAT_USER, t->task, NULL, 0, &out, cerr, sizeof(cerr));
	if (r < 0) {
		snprintf(err, errlen, "task %lld prefix: %s", t->id, cerr);
		goto finish;
	}
	sha_ids(out.ids, out.n_ids, sha);
	if ((long long)out.n_ids != t->prefix_tokens || strcmp(sha, t->prefix_sha256) != 0) {
		snprintf(err, errlen,
			 "task %lld prefix: rendered %zu ids (sha256 %.12s), the session "
			 "prefilled %lld (sha256 %.12s)",
			 t->id, out.n_ids, sha, t->prefix_tokens, t->prefix_sha256);
		r = -EBADMSG;
		goto finish;
	}
	*ret_ids = (long long)out.n_ids;
	prefix = engine_chat_dup(cur);
	if (!prefix) {
		r = -ENOMEM;
		goto finish;
	}
	for (size_t k = 0; k < t->n_steps; k++) {
		const struct step_in *s = &t->steps[k];
		if ((r = check_tiles(dir, pp, t, s, k, err, errlen)) < 0)
			goto finish;
		engine_chat_tokens_finish(&out);
		if (strcmp(s->mode, "persistent") == 0) {
			struct engine_chat *work = engine_chat_dup(cur);
			r = work ? user_turn(work, t, s, false, &out, cerr, sizeof(cerr)) : -ENOMEM;
			if (r == 0)
				r = engine_chat_generation_prompt(work, &out);
			if (r == 0 && s->valid && t->reasoning)
				r = think_close(tok, s->assistant, &out);
			if (r == 0 && s->valid)
				r = engine_chat_close_content(work, &out);
			if (r < 0) {
				engine_chat_destroy(work);
			} else {
				engine_chat_destroy(cur);
				cur = work;
			}
		} else {
			/* The earliest first turn whose rendering has the count prefilled (the
			 * count falls as `first` grows, so it is the only candidate); a rolling
			 * step prefilled the end of it, from the first turn on. */
			bool rebuild = strcmp(s->mode, "rebuild") == 0, found = false;
			bool suffix = strcmp(s->mode, "rolling") == 0;
			for (size_t first = 0; first <= k; first++) {
				struct engine_chat *work = NULL;
				engine_chat_tokens_finish(&out);
				int rr = render_window(tok, t, prefix, first, k,
						       rebuild && s->valid && !t->rolling, &work, &out, cerr,
						       sizeof(cerr));
				if ((r = rr) < 0)
					break;
				if (suffix && s->tokens >= 0 && (long long)out.n_ids >= s->tokens) {
					size_t skip = out.n_ids - (size_t)s->tokens;
					memmove(out.ids, out.ids + skip, (size_t)s->tokens * sizeof(*out.ids));
					out.n_ids = (size_t)s->tokens;
				}
				if ((long long)out.n_ids == s->tokens) {
					engine_chat_destroy(cur);
					cur = work;
					found = true;
					break;
				}
				engine_chat_destroy(work);
			}
			if (r == 0 && !found) {
				snprintf(err, errlen,
					 "task %lld step %zu (%s): no start of the history "
					 "renders the %lld ids the session prefilled",
					 t->id, k, s->mode, s->tokens);
				r = -EBADMSG;
				goto finish;
			}
		}
		if (r < 0) {
			snprintf(err, errlen, "task %lld step %zu: %s", t->id, k,
				 cerr[0] ? cerr : strerror(-r));
			goto finish;
		}
		sha_ids(out.ids, out.n_ids, sha);
		if ((long long)out.n_ids != s->tokens || strcmp(sha, s->sha256) != 0) {
			snprintf(err, errlen,
				 "task %lld step %zu (%s): rendered %zu ids (sha256 "
				 "%.12s), the session prefilled %lld (sha256 %.12s)",
				 t->id, k, s->mode, out.n_ids, sha, s->tokens, s->sha256);
			r = -EBADMSG;
			goto finish;
		}
		*ret_ids += (long long)out.n_ids;
	}
finish:
	engine_chat_tokens_finish(&out);
	engine_chat_destroy(cur);
	engine_chat_destroy(prefix);
	return r;
}

int main(int argc, char **argv)
{
	char err[1024] = "";
	int status = 2;

	if (argc != 3) {
		fprintf(stderr, "usage: %s MODEL_DIR EXPORT_DIR\n", argv[0]);
		return 2;
	}
	struct engine_model *model = engine_model_load(argv[1], err, sizeof(err));
	if (!model) {
		fprintf(stderr, "%s: %s\n", argv[1], err);
		return 2;
	}
	struct engine_vision *vision = engine_vision_create(model, err, sizeof(err));
	const struct engine_tokenizer *tok = engine_model_tokenizer(model);
	char *file = path_join(argv[2], "chat.jsonl");
	FILE *in = fopen(file, "re");
	char *buf = xmalloc(MAX_LINE_BYTES + 2);
	struct engine_vision_preprocess pp;
	size_t n_tasks = 0;

	if (!vision || !tok) {
		fprintf(stderr, "%s: %s\n", argv[1], vision ? "no tokenizer.json" : err);
		goto cleanup;
	}
	if (!in) {
		fprintf(stderr, "cannot open %s: %s\n", file, strerror(errno));
		goto cleanup;
	}
	engine_vision_get_preprocess(vision, &pp);
	status = 0;
	while (fgets(buf, (int)MAX_LINE_BYTES + 2, in)) {
		json_error_t je;
		json_t *line = json_loads(buf, 0, &je);
		struct task_in t;
		long long ids = 0;
		if (!line) {
			fprintf(stderr, "%s: line %zu: %s\n", file, n_tasks + 1, je.text);
			status = 2;
			break;
		}
		int r = parse_task(line, &t, err, sizeof(err));
		if (r == 0)
			r = check_task(tok, &pp, argv[2], &t, &ids, err, sizeof(err));
		if (r == 0)
			printf("task %lld: prefix and %zu steps, %lld ids: all match what the "
			       "session prefilled\n",
			       t.id, t.n_steps, ids);
		else
			printf("%s\n", err);
		free(t.steps);
		json_decref(line);
		n_tasks++;
		if (r < 0) {
			status = r == -EBADMSG ? 1 : 2;
			break;
		}
	}
	if (status == 0 && n_tasks == 0) {
		fprintf(stderr, "%s has no task\n", file);
		status = 2;
	}
cleanup:
	if (in)
		fclose(in);
	free(buf);
	free(file);
	engine_vision_destroy(vision);
	engine_model_destroy(model);
	return status;
}
