/* The conversation of agent.md 1.2 with the chat markers of model.md 5.2, as token ids.
 *
 * Text between special tokens is collected and encoded as one run with parse_special off, which
 * is how Hugging Face tokenizes a rendered chat (added tokens split the text first), and also
 * means task text, notes or tool output cannot smuggle in a turn marker. Markers and image tags
 * are emitted as ids read from the tokenizer. Every piece starts and ends at such a boundary,
 * so appending pieces one by one gives the tokens of the whole conversation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "policy-internal.h"

#define MARK_SYSTEM "<SPECIAL_10>"
#define MARK_TURN "<SPECIAL_11>"
#define MARK_END "<SPECIAL_12>"
#define EVICTED "[screenshot evicted]"
/* Largest tile count of one observation (ENGINE_VISION_MAX_TILES plus a thumbnail). */
#define MAX_TILES (ENGINE_VISION_MAX_TILES + 1)

struct policy_renderer {
	const struct policy_format *fmt;
	const struct engine_tokenizer *tok;
	struct policy_env env;
	int tokens_per_tile;
	int32_t id_system, id_turn, id_end, id_img, id_image, id_img_end;
};

struct builder {
	const struct policy_renderer *r;
	struct policy_piece p;
	size_t cap_ids, cap_text, cap_images;
	char *pending; /* text not yet encoded */
	size_t n_pending, cap_pending;
	int err;
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

static void grow(void **buf, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return;
	size_t c = MAX(*cap * 2, MAX(need, (size_t)64));
	*buf = xreallocarray(*buf, c, elem);
	*cap = c;
}

static void add_text_only(struct builder *b, const char *s, size_t n)
{
	grow((void **)&b->p.text, &b->cap_text, b->p.text_len + n + 1, 1);
	memcpy(b->p.text + b->p.text_len, s, n);
	b->p.text_len += n;
	b->p.text[b->p.text_len] = 0;
}

static void add_id(struct builder *b, int32_t id)
{
	grow((void **)&b->p.ids, &b->cap_ids, b->p.n_ids + 1, sizeof(*b->p.ids));
	b->p.ids[b->p.n_ids++] = id;
}

static void text(struct builder *b, const char *s, size_t n)
{
	grow((void **)&b->pending, &b->cap_pending, b->n_pending + n + 1, 1);
	memcpy(b->pending + b->n_pending, s, n);
	b->n_pending += n;
	add_text_only(b, s, n);
}

static void str(struct builder *b, const char *s)
{
	text(b, s, strlen(s));
}

static void flush(struct builder *b)
{
	int32_t *ids = NULL;
	size_t n = 0;
	if (b->n_pending == 0 || b->err)
		return;
	int r = engine_tokenizer_encode(b->r->tok, b->pending, b->n_pending, false, &ids, &n);
	if (r < 0) {
		b->err = r;
		return;
	}
	grow((void **)&b->p.ids, &b->cap_ids, b->p.n_ids + n, sizeof(*b->p.ids));
	memcpy(b->p.ids + b->p.n_ids, ids, n * sizeof(*ids));
	b->p.n_ids += n;
	free(ids);
	b->n_pending = 0;
}

static void special(struct builder *b, int32_t id, const char *name)
{
	flush(b);
	add_id(b, id);
	add_text_only(b, name, strlen(name));
}

static void image(struct builder *b, int n_tiles)
{
	const struct policy_renderer *r = b->r;
	size_t n = (size_t)n_tiles * (size_t)r->tokens_per_tile;
	special(b, r->id_img, "<img>");
	grow((void **)&b->p.images, &b->cap_images, b->p.n_images + 1, sizeof(*b->p.images));
	b->p.images[b->p.n_images++] = (struct policy_image_slot){.offset = b->p.n_ids,
								   .n_tokens = n};
	grow((void **)&b->p.ids, &b->cap_ids, b->p.n_ids + n, sizeof(*b->p.ids));
	for (size_t i = 0; i < n; i++) {
		b->p.ids[b->p.n_ids++] = r->id_image;
		add_text_only(b, "<image>", 7);
	}
	special(b, r->id_img_end, "</img>");
}

static int finish(struct builder *b, struct policy_piece *ret)
{
	flush(b);
	free(b->pending);
	if (b->err < 0) {
		policy_piece_finish(&b->p);
		return b->err;
	}
	if (!b->p.text)
		add_text_only(b, "", 0);
	if (!b->p.ids)
		b->p.ids = xmalloc(sizeof(*b->p.ids));
	*ret = b->p;
	return 0;
}

/* Text with leading and trailing whitespace removed (the template strips turn contents). */
static void stripped(struct builder *b, const char *s)
{
	size_t n = strlen(s);
	while (n && strchr(" \t\r\n", s[n - 1]))
		n--;
	while (n && strchr(" \t\r\n", *s))
		s++, n--;
	text(b, s, n);
}

struct policy_renderer *policy_renderer_create(const struct policy_format *fmt,
					       const struct engine_tokenizer *tok,
					       const struct policy_env *env, int tokens_per_tile)
{
	if (!fmt || !tok || !env || env->screen_width <= 0 || env->screen_height <= 0 ||
	    tokens_per_tile <= 0 || tokens_per_tile > 4096) {
		errno = EINVAL;
		return NULL;
	}
	struct policy_renderer *r = xcalloc(1, sizeof(*r));
	r->fmt = fmt;
	r->tok = tok;
	r->env = *env;
	r->tokens_per_tile = tokens_per_tile;
	struct {
		int32_t *id;
		const char *name;
	} marks[] = {
		{&r->id_system, MARK_SYSTEM}, {&r->id_turn, MARK_TURN}, {&r->id_end, MARK_END},
		{&r->id_img, "<img>"},        {&r->id_image, "<image>"}, {&r->id_img_end, "</img>"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(marks); i++) {
		*marks[i].id = engine_tokenizer_token_id(tok, marks[i].name);
		if (*marks[i].id < 0) {
			free(r);
			errno = ENOENT;
			return NULL;
		}
	}
	return r;
}

void policy_renderer_destroy(struct policy_renderer *r)
{
	free(r);
}

int32_t policy_renderer_stop_id(const struct policy_renderer *r)
{
	return r->id_end;
}

int policy_render_prefix(struct policy_renderer *r, const char *task, struct policy_piece *ret)
{
	struct builder b = {.r = r};
	if (!task)
		return -EINVAL;
	char *sys = r->fmt->system_text(&r->env);
	if (!sys)
		return -errno;
	special(&b, r->id_system, MARK_SYSTEM);
	str(&b, "System\n");
	stripped(&b, sys);
	str(&b, "\n");
	free(sys);
	special(&b, r->id_turn, MARK_TURN);
	str(&b, "User\nTask: ");
	stripped(&b, task);
	str(&b, "\n");
	return finish(&b, ret);
}

static void generation_prompt(struct builder *b)
{
	special(b, b->r->id_turn, MARK_TURN);
	str(b, b->r->env.reasoning ? "Assistant\n<think>\n" : "Assistant\n<think></think>");
}

static int user_turn(struct builder *b, const struct policy_observation *obs, bool evicted)
{
	char head[64];
	if (!obs || (!evicted && (obs->n_tiles < 1 || obs->n_tiles > MAX_TILES)))
		return -EINVAL;
	special(b, b->r->id_turn, MARK_TURN);
	str(b, "User\n");
	if (obs->result) {
		const char *name = ipc_tool_to_string(obs->result->tool);
		if (!name)
			return -EINVAL;
		const char *tag = obs->result->error ? "error" : "tool_output";
		snprintf(head, sizeof(head), "<%s tool=\"%s\">", tag, name);
		str(b, head);
		str(b, obs->result->text ? obs->result->text : "");
		snprintf(head, sizeof(head), "</%s>\n", tag);
		str(b, head);
	}
	str(b, "<observation>");
	if (evicted)
		str(b, EVICTED);
	else
		image(b, obs->n_tiles);
	str(b, "</observation>\n");
	return 0;
}

int policy_render_step(struct policy_renderer *r, const struct policy_observation *obs,
		       bool evicted, struct policy_piece *ret)
{
	struct builder b = {.r = r};
	int err = user_turn(&b, obs, evicted);
	if (err < 0) {
		b.err = err;
		return finish(&b, ret);
	}
	generation_prompt(&b);
	return finish(&b, ret);
}

int policy_render_close(struct policy_renderer *r, struct policy_piece *ret)
{
	struct builder b = {.r = r};
	str(&b, "\n");
	special(&b, r->id_end, MARK_END);
	str(&b, "\n");
	return finish(&b, ret);
}

static int assistant_turn(struct builder *b, const struct policy_step *step)
{
	char *json = b->r->fmt->step_to_json(step);
	if (!json)
		return -errno;
	special(b, b->r->id_turn, MARK_TURN);
	str(b, "Assistant\n");
	str(b, json);
	free(json);
	str(b, "\n");
	special(b, b->r->id_end, MARK_END);
	str(b, "\n");
	return 0;
}

int policy_render_assistant(struct policy_renderer *r, const struct policy_step *step,
			    struct policy_piece *ret)
{
	struct builder b = {.r = r};
	b.err = assistant_turn(&b, step);
	return finish(&b, ret);
}

int policy_render_window(struct policy_renderer *r, const struct policy_observation *obs,
			 const struct policy_step *steps, size_t n_done, size_t keep,
			 struct policy_piece *ret)
{
	struct builder b = {.r = r};
	if (!obs || (n_done && !steps) || keep < 1)
		return -EINVAL;
	size_t first_image = n_done + 1 > keep ? n_done + 1 - keep : 0;
	for (size_t i = 0; i <= n_done && b.err == 0; i++) {
		int err = user_turn(&b, &obs[i], i < first_image);
		if (err == 0 && i < n_done)
			err = assistant_turn(&b, &steps[i]);
		if (err < 0)
			b.err = err;
	}
	if (b.err == 0)
		generation_prompt(&b);
	return finish(&b, ret);
}
