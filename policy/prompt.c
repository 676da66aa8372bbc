/* The conversation of agent.md 1.2 as token ids, rendered through the engine's chat renderer.
 *
 * engine_chat_* (engine/chat/chat.c) is the one implementation of the chat format of model.md 5.2:
 * turn markers, content stripping, the /think switch, image expansion, the generation prompt,
 * tokenization (golden-tested against the reference template). This file only decides what the
 * turns say: the system prompt, "Task: ...", the tool result wrappers, the <observation> with its
 * image placeholder (or "[screenshot evicted]"), the canonical step of an assistant turn. As in
 * the template, message text may not contain special tokens (a task or a tool result cannot
 * forge a turn: -EINVAL), nor "<image>" beyond the screenshot's own placeholder.
 *
 * The renderer keeps the conversation state (a turn was rendered; the reasoning switch) of
 * what it rendered last, and a copy of the state after the prefix, which window mode and a
 * rebuild start from again (they restore the session snapshot taken there).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "policy-internal.h"

struct policy_renderer {
	const struct policy_format *fmt;
	struct policy_env env;	    /* a copy; its strings are the caller's */
	struct engine_chat *chat;   /* the state after the last piece rendered */
	struct engine_chat *prefix; /* the state after the prefix; NULL until one is rendered */
	int32_t stop_id;
};

void policy_piece_finish(struct policy_piece *p)
{
	if (!p)
		return;
	free(p->ids);
	free(p->text);
	free(p->images);
	memset(p, 0, sizeof(*p));
}

/* Moves rendered tokens into a piece (ids and text never NULL). */
static void to_piece(struct engine_chat_tokens *t, struct policy_piece *ret)
{
	struct policy_piece p = {0};

	p.images = xcalloc(t->n_images + 1, sizeof(*p.images));
	for (size_t k = 0; k < t->n_images; k++)
		p.images[k] =
			(struct policy_image_slot){.offset = t->images[k].begin, .n_tokens = t->images[k].n};
	p.n_images = t->n_images;
	p.ids = t->ids ? t->ids : xmalloc(sizeof(*p.ids));
	p.n_ids = t->n_ids;
	p.text = t->text ? t->text : xstrdup("");
	p.text_len = t->text_len;
	free(t->images);
	memset(t, 0, sizeof(*t));
	*ret = p;
}

/* Ends a render on `work` (a copy of a renderer state): on success the renderer continues from
 * it and *ret gets the tokens; on failure nothing changes. Frees or keeps work and t. */
static int done(struct policy_renderer *r, struct engine_chat *work, struct engine_chat_tokens *t, int err,
		struct policy_piece *ret)
{
	if (err < 0) {
		engine_chat_destroy(work);
		engine_chat_tokens_finish(t);
		return err;
	}
	engine_chat_destroy(r->chat);
	r->chat = work;
	to_piece(t, ret);
	return 0;
}

struct policy_renderer *policy_renderer_create(const struct policy_format *fmt,
					       const struct engine_tokenizer *tok,
					       const struct policy_env *env, int tokens_per_tile)
{
	struct policy_renderer *r;
	int32_t stops[2];

	if (!fmt || !tok || !env || env->screen_width <= 0 || env->screen_height <= 0 ||
	    tokens_per_tile <= 0 || tokens_per_tile > (int)ENGINE_CHAT_MAX_TOKENS_PER_TILE) {
		errno = EINVAL;
		return NULL;
	}
	r = xcalloc(1, sizeof(*r));
	r->fmt = fmt;
	r->env = *env;
	r->chat = engine_chat_create_raw(tok, tokens_per_tile, env->reasoning, NULL, 0);
	if (!r->chat) {
		/* the arguments were checked: a marker is missing */
		int err = errno == ENOMEM ? ENOMEM : ENOENT;
		free(r);
		errno = err;
		return NULL;
	}
	engine_chat_stop_ids(r->chat, stops);
	r->stop_id = stops[0];
	return r;
}

void policy_renderer_destroy(struct policy_renderer *r)
{
	if (!r)
		return;
	engine_chat_destroy(r->chat);
	engine_chat_destroy(r->prefix);
	free(r);
}

int32_t policy_renderer_stop_id(const struct policy_renderer *r)
{
	return r->stop_id;
}

static int append(struct engine_chat *c, enum engine_chat_role role, const char *text, const int *tiles,
		  size_t n_images, struct engine_chat_tokens *t)
{
	struct engine_chat_message m = {.role = role, .text = text, .image_tiles = tiles, .n_images = n_images};

	return engine_chat_append(c, &m, t, NULL, 0);
}

static char *task_text(const char *task)
{
	return xasprintf("Task: %s", task);
}

int policy_prefix_text(const struct policy_renderer *r, const char *task, char **ret_system, char **ret_user)
{
	if (!task)
		return -EINVAL;
	char *sys = r->fmt->system_text(&r->env);
	if (!sys)
		return -errno;
	*ret_system = sys;
	*ret_user = task_text(task);
	return 0;
}

int policy_render_prefix(struct policy_renderer *r, const char *task, struct policy_piece *ret)
{
	struct engine_chat_tokens t = {0};
	struct engine_chat *work, *prefix;
	char *sys, *user;
	int err;

	if (!task)
		return -EINVAL;
	sys = r->fmt->system_text(&r->env);
	if (!sys)
		return -errno;
	work = engine_chat_dup(r->chat);
	if (!work) {
		free(sys);
		return -ENOMEM;
	}
	engine_chat_reset(work);
	user = task_text(task);
	err = append(work, ENGINE_CHAT_SYSTEM, sys, NULL, 0, &t);
	if (err == 0)
		err = append(work, ENGINE_CHAT_USER, user, NULL, 0, &t);
	free(user);
	free(sys);
	prefix = err == 0 ? engine_chat_dup(work) : NULL;
	if (err == 0 && !prefix)
		err = -ENOMEM;
	err = done(r, work, &t, err, ret);
	if (err == 0) {
		engine_chat_destroy(r->prefix);
		r->prefix = prefix;
	}
	return err;
}

char *policy_format_result_text(const struct policy_format *fmt, const struct policy_tool_result *res)
{
	const char *name = fmt->tool_name(res->tool);
	const char *tag = res->error ? "error" : "tool_output";
	const char *text = res->text ? res->text : "";
	const char *nl = fmt->turns.result_newlines ? "\n" : "";
	size_t n = strlen(text);

	if (!name) {
		errno = EINVAL;
		return NULL;
	}
	if (fmt->turns.result_max_chars) {
		/* characters, as Python's slicing counts them: UTF-8 lead bytes */
		size_t chars = 0, i = 0;
		for (; i < n; i++)
			if (((unsigned char)text[i] & 0xc0) != 0x80 && chars++ == fmt->turns.result_max_chars)
				break;
		n = i;
	}
	return xasprintf("<%s tool=\"%s\">%s%.*s%s</%s>", tag, name, nl, (int)n, text, nl, tag);
}

char *policy_format_observation_text(const struct policy_format *fmt, bool evicted)
{
	return xasprintf("%s%s%s", fmt->turns.observation_open, evicted ? fmt->turns.evicted : "<image>",
			 fmt->turns.observation_close);
}

/* One observation's user turn: the previous action's result, then the screenshot (or its
 * eviction note) inside the observation wrapper. */
char *policy_format_user_text(const struct policy_format *fmt, const struct policy_observation *obs,
			      bool evicted)
{
	if (!fmt || !obs) {
		errno = EINVAL;
		return NULL;
	}
	char *o = policy_format_observation_text(fmt, evicted);
	if (!obs->result)
		return o;
	char *res = policy_format_result_text(fmt, obs->result);
	if (!res) {
		free(o);
		return NULL;
	}
	char *all = xasprintf("%s\n%s", res, o);
	free(res);
	free(o);
	return all;
}

static int user_turn(const struct policy_renderer *r, struct engine_chat *c,
		     const struct policy_observation *obs, bool evicted, struct engine_chat_tokens *t)
{
	char *text;
	int err;

	if (!obs)
		return -EINVAL;
	if (obs->result && r->fmt->turns.result_own_turn) {
		/* the result in a user turn of its own, before the observation's */
		text = policy_format_result_text(r->fmt, obs->result);
		if (!text)
			return -errno;
		err = append(c, ENGINE_CHAT_USER, text, NULL, 0, t);
		free(text);
		if (err < 0)
			return err;
		text = policy_format_observation_text(r->fmt, evicted);
	} else {
		text = policy_format_user_text(r->fmt, obs, evicted);
	}
	if (!text)
		return -errno;
	err = append(c, ENGINE_CHAT_USER, text, &obs->n_tiles, evicted ? 0 : 1, t);
	free(text);
	return err;
}

static int assistant_turn(const struct policy_renderer *r, struct engine_chat *c,
			  const struct policy_step *step, struct engine_chat_tokens *t)
{
	char *json;
	int err;

	if (!step)
		return -EINVAL;
	json = r->fmt->step_to_json(step);
	if (!json)
		return -errno;
	err = append(c, ENGINE_CHAT_ASSISTANT, json, NULL, 0, t);
	free(json);
	return err;
}

int policy_render_step(struct policy_renderer *r, const struct policy_observation *obs, bool evicted,
		       struct policy_piece *ret)
{
	struct engine_chat_tokens t = {0};
	struct engine_chat *work = engine_chat_dup(r->chat);
	int err;

	if (!work)
		return -ENOMEM;
	err = user_turn(r, work, obs, evicted, &t);
	if (err == 0)
		err = engine_chat_generation_prompt(work, &t);
	return done(r, work, &t, err, ret);
}

int policy_render_close(struct policy_renderer *r, struct policy_piece *ret)
{
	struct engine_chat_tokens t = {0};
	struct engine_chat *work = engine_chat_dup(r->chat);

	if (!work)
		return -ENOMEM;
	return done(r, work, &t, engine_chat_close_content(work, &t), ret);
}

int policy_render_assistant(struct policy_renderer *r, const struct policy_step *step,
			    struct policy_piece *ret)
{
	struct engine_chat_tokens t = {0};
	struct engine_chat *work = engine_chat_dup(r->chat);

	if (!work)
		return -ENOMEM;
	return done(r, work, &t, assistant_turn(r, work, step, &t), ret);
}

int policy_render_window(struct policy_renderer *r, const struct policy_observation *obs,
			 const struct policy_step *steps, size_t n_done, size_t keep, struct policy_piece *ret)
{
	struct engine_chat_tokens t = {0};
	struct engine_chat *work;
	size_t first_image;
	int err = 0;

	if (!obs || (n_done && !steps) || keep < 1)
		return -EINVAL;
	work = engine_chat_dup(r->prefix ? r->prefix : r->chat);
	if (!work)
		return -ENOMEM;
	if (!r->prefix)
		engine_chat_reset(work);
	first_image = n_done + 1 > keep ? n_done + 1 - keep : 0;
	for (size_t i = 0; i <= n_done && err == 0; i++) {
		err = user_turn(r, work, &obs[i], i < first_image, &t);
		if (err == 0 && i < n_done)
			err = assistant_turn(r, work, &steps[i], &t);
	}
	if (err == 0)
		err = engine_chat_generation_prompt(work, &t);
	return done(r, work, &t, err, ret);
}

int policy_render_rolling(struct policy_renderer *r, const struct policy_observation *obs,
			  const struct policy_step *steps, size_t n_done, size_t keep, size_t n_held,
			  struct policy_piece *ret_evicted, struct policy_piece *ret_window)
{
	struct engine_chat_tokens held = {0}, ev = {0}, t = {0};
	struct engine_chat *work;
	size_t first_image;
	int err = 0;

	if (!obs || (n_done && !steps) || keep < 1 || !ret_evicted || !ret_window)
		return -EINVAL;
	first_image = n_done + 1 > keep ? n_done + 1 - keep : 0;
	if (n_held > first_image)
		return -EINVAL;
	work = engine_chat_dup(r->prefix ? r->prefix : r->chat);
	if (!work)
		return -ENOMEM;
	if (!r->prefix)
		engine_chat_reset(work);
	/* The same turns as policy_render_window, each into the part it belongs to. */
	for (size_t i = 0; i <= n_done && err == 0; i++) {
		struct engine_chat_tokens *to = i < n_held ? &held : i < first_image ? &ev : &t;
		err = user_turn(r, work, &obs[i], i < first_image, to);
		if (err == 0 && i < n_done)
			err = assistant_turn(r, work, &steps[i], to);
	}
	if (err == 0)
		err = engine_chat_generation_prompt(work, &t);
	engine_chat_tokens_finish(&held);
	if (err < 0) {
		engine_chat_tokens_finish(&ev);
		engine_chat_tokens_finish(&t);
		engine_chat_destroy(work);
		return err;
	}
	to_piece(&ev, ret_evicted);
	return done(r, work, &t, 0, ret_window);
}
