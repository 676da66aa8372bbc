/* engine: the chat prompt of the Nemotron-Nano-VL v2 family (model.md 5.2), rendered to ids.
 *
 * Each turn is rendered to the text the base model's chat template would produce for it
 * (NVIDIA-Nemotron-Nano-12B-v2-VL's, as tools/nemotron_vl_template.py restates it), with the
 * reference processor's image expansion, and that text is tokenized with parse_special as HF
 * does with add_special_tokens=False. The first turn carries what the template writes before
 * any message: the BOS token and the system block, empty when the first turn is not a system
 * turn (model.md 5.2 has the BOS decision and its evidence). Turns never depend on what follows
 * them (only the generation prompt depends on what came before, through the reasoning switch),
 * so rendering turn by turn and rendering the whole conversation give the same ids: special
 * tokens split the text in HF tokenizers, and every turn starts with one.
 *
 * Threads: a struct engine_chat is used by one thread at a time; the tokenizer it reads may be
 * shared.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "loader.h"
#include "model.h"

#define MARK_SYSTEM "<SPECIAL_10>"
#define MARK_TURN "<SPECIAL_11>"
#define MARK_END "<SPECIAL_12>"
#define MARK_EOS "</s>"
#define MARK_BOS "<s>"
#define MARK_IMG "<img>"
#define MARK_IMAGE "<image>"
#define MARK_IMG_END "</img>"
#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"
#define SWITCH_ON "/think"
#define SWITCH_OFF "/no_think"
#define THINK_GUARD "<_end_think>" /* the template's stand-in for </think> while it removes /think */

struct engine_chat {
	const struct engine_tokenizer *tok;
	int32_t id_system, id_turn, id_end, id_eos; /* id_eos -1 when the tokenizer has no </s> */
	int32_t id_bos;				    /* -1 when the tokenizer has no <s> */
	int32_t id_img, id_image, id_img_end;	    /* -1 without vision */
	int tokens_per_tile;			    /* 0 without vision */
	bool reasoning_default;
	bool reasoning; /* what the next generation prompt opens */
	bool started;	/* a turn was rendered: a system turn may no longer come */
};

/* A growable byte string; every helper returns 0 or -ENOMEM. */
struct sbuf {
	char *p;
	size_t len, cap;
};

static int sbuf_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static int sbuf_str(struct sbuf *b, const char *s)
{
	return sbuf_add(b, s, strlen(s));
}

/* ---- text helpers (Python str semantics) ---------------------------------------------------- */

static const char *find(const char *s, size_t len, const char *needle)
{
	size_t n = strlen(needle);

	for (size_t i = 0; n <= len && i <= len - n; i++)
		if (memcmp(s + i, needle, n) == 0)
			return s + i;
	return NULL;
}

static size_t count(const char *s, size_t len, const char *needle)
{
	size_t n = strlen(needle), k = 0;
	const char *p;

	while ((p = find(s, len, needle))) {
		k++;
		len -= (size_t)(p - s) + n;
		s = p + n;
	}
	return k;
}

/* out = s.replace(needle, with): non-overlapping, left to right. out must not alias s. */
static int replace_all(struct sbuf *out, const char *s, size_t len, const char *needle, const char *with)
{
	size_t n = strlen(needle);
	const char *p;
	int r = 0;

	out->len = 0;
	r = sbuf_add(out, "", 0);
	while (r == 0 && (p = find(s, len, needle))) {
		r = sbuf_add(out, s, (size_t)(p - s));
		if (r == 0)
			r = sbuf_str(out, with);
		len -= (size_t)(p - s) + n;
		s = p + n;
	}
	return r ? r : sbuf_add(out, s, len);
}

/* The template's text cleaning: s.replace('</think>', '<_end_think>').replace('/think', '')
 * .replace('/no_think', '').replace('<_end_think>', '</think>'), so the switches go and a
 * '</think>' in the text stays whole. */
static int clean(struct sbuf *out, const char *s, size_t len)
{
	struct sbuf a = {0};
	int r = replace_all(out, s, len, THINK_CLOSE, THINK_GUARD);

	if (r == 0)
		r = replace_all(&a, out->p, out->len, SWITCH_ON, "");
	if (r == 0)
		r = replace_all(out, a.p, a.len, SWITCH_OFF, "");
	if (r == 0)
		r = replace_all(&a, out->p, out->len, THINK_GUARD, THINK_CLOSE);
	if (r == 0) {
		out->len = 0;
		r = sbuf_add(out, a.p, a.len);
	}
	free(a.p);
	return r;
}

/* Python's str.isspace() for one code point. */
static bool py_space(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
	       c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
	       c == 0x205f || c == 0x3000;
}

/* The code point at s[0..len) and its length (the caller checked the text is valid UTF-8;
 * an invalid byte would count as one non-space U+FFFD). */
static uint32_t utf8_at(const unsigned char *s, size_t len, size_t *ret_n)
{
	uint32_t c;

	*ret_n = utf8_decode(s, len, &c);
	if (!*ret_n) {
		*ret_n = 1;
		return 0xfffd;
	}
	return c;
}

/* str.strip(): [*ret_begin, *ret_end) of s. */
static void strip(const char *s, size_t len, size_t *ret_begin, size_t *ret_end)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t b = 0, e = len, n;

	while (b < e && py_space(utf8_at(u + b, e - b, &n)))
		b += n;
	while (e > b) {
		size_t k = e - 1;

		while (k > b && (u[k] & 0xc0) == 0x80)
			k--;
		if (!py_space(utf8_at(u + k, e - k, &n)) || k + n != e)
			break;
		e = k;
	}
	*ret_begin = b;
	*ret_end = e;
}

/* ---- the renderer ---------------------------------------------------------------------------- */

void engine_chat_tokens_finish(struct engine_chat_tokens *t)
{
	if (!t)
		return;
	free(t->ids);
	free(t->images);
	free(t->text);
	memset(t, 0, sizeof(*t));
}

static int32_t marker(const struct engine_chat *c, const char *s, bool required, char *errbuf, size_t errlen,
		      int *r)
{
	int32_t id = engine_tokenizer_token_id(c->tok, s);

	if (id < 0 && required && *r == 0)
		*r = st_errorf(errbuf, errlen, -EINVAL,
			       "the tokenizer has no token '%s' (chat format of model.md 5.2)", s);
	return id < 0 ? -1 : id;
}

/* images: the image markers are required; config_image_token: the vision config's id of
 * <image> (-1: none to check). */
static struct engine_chat *create(const struct engine_tokenizer *tok, bool images, int tokens_per_tile,
				  int32_t config_image_token, bool reasoning, char *errbuf, size_t errlen)
{
	struct engine_chat *c;
	int r = 0;

	if (!tok) {
		st_errorf(errbuf, errlen, -EINVAL, "no tokenizer");
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->tok = tok;
	c->id_system = marker(c, MARK_SYSTEM, true, errbuf, errlen, &r);
	c->id_turn = marker(c, MARK_TURN, true, errbuf, errlen, &r);
	c->id_end = marker(c, MARK_END, true, errbuf, errlen, &r);
	c->id_eos = marker(c, MARK_EOS, false, errbuf, errlen, &r);
	c->id_bos = marker(c, MARK_BOS, false, errbuf, errlen, &r);
	c->id_img = c->id_image = c->id_img_end = -1;
	if (images) {
		c->id_img = marker(c, MARK_IMG, true, errbuf, errlen, &r);
		c->id_image = marker(c, MARK_IMAGE, true, errbuf, errlen, &r);
		c->id_img_end = marker(c, MARK_IMG_END, true, errbuf, errlen, &r);
		c->tokens_per_tile = tokens_per_tile;
		if (r == 0 && config_image_token >= 0 && config_image_token != c->id_image)
			r = st_errorf(
				errbuf, errlen, -EINVAL,
				"config.json's img_context_token_id %d is not the tokenizer's '<image>' (%d)",
				(int)config_image_token, (int)c->id_image);
		if (r == 0 && c->tokens_per_tile < 1)
			r = st_errorf(errbuf, errlen, -EINVAL, "the vision encoder gives no tokens per tile");
	}
	if (r < 0) {
		free(c);
		errno = -r;
		return NULL;
	}
	c->reasoning_default = c->reasoning = reasoning;
	return c;
}

struct engine_chat *engine_chat_create(const struct engine_tokenizer *tok, const struct engine_vision *vision,
				       bool reasoning, char *errbuf, size_t errlen)
{
	return create(tok, vision != NULL, vision ? engine_vision_tokens_per_tile(vision) : 0,
		      vision ? engine_vision_image_token(vision) : -1, reasoning, errbuf, errlen);
}

struct engine_chat *engine_chat_create_raw(const struct engine_tokenizer *tok, int tokens_per_tile,
					   bool reasoning, char *errbuf, size_t errlen)
{
	if (tokens_per_tile < 0 || tokens_per_tile > (int)ENGINE_CHAT_MAX_TOKENS_PER_TILE) {
		st_errorf(errbuf, errlen, -EINVAL, "%d tokens per tile (0..%d)", tokens_per_tile,
			  (int)ENGINE_CHAT_MAX_TOKENS_PER_TILE);
		errno = EINVAL;
		return NULL;
	}
	return create(tok, tokens_per_tile > 0, tokens_per_tile, -1, reasoning, errbuf, errlen);
}

struct engine_chat *engine_chat_dup(const struct engine_chat *c)
{
	struct engine_chat *d = malloc(sizeof(*d));

	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	*d = *c;
	return d;
}

void engine_chat_destroy(struct engine_chat *c)
{
	free(c);
}

void engine_chat_reset(struct engine_chat *c)
{
	c->reasoning = c->reasoning_default;
	c->started = false;
}

bool engine_chat_reasoning(const struct engine_chat *c)
{
	return c->reasoning;
}

size_t engine_chat_stop_ids(const struct engine_chat *c, int32_t ret_ids[2])
{
	size_t n = 0;

	ret_ids[n++] = c->id_end;
	if (c->id_eos >= 0 && c->id_eos != c->id_end)
		ret_ids[n++] = c->id_eos;
	return n;
}

int32_t engine_chat_image_token(const struct engine_chat *c)
{
	return c->id_image;
}

/* Tokenizes `text` and appends it to *out, with the image ranges found in it (they must be
 * n_images runs of tiles[k] * tokens_per_tile <image> ids) and the text. `want_special` is the
 * number of special ids the render put in; more means the message text brought its own. */
static int emit(struct engine_chat *c, const struct sbuf *text, const int *tiles, size_t n_images,
		size_t want_special, struct engine_chat_tokens *out, char *errbuf, size_t errlen)
{
	int32_t *ids = NULL, *grown_ids;
	struct engine_chat_image *grown_img;
	char *grown_text;
	size_t n = 0, n_special = 0, k = 0;
	int r;

	r = engine_tokenizer_encode(c->tok, text->p, text->len, true, &ids, &n);
	if (r == -EILSEQ)
		return st_errorf(errbuf, errlen, r, "the message is not valid UTF-8");
	if (r < 0)
		return st_errorf(errbuf, errlen, r, "cannot tokenize the message: %s", strerror(-r));
	for (size_t i = 0; i < n; i++)
		n_special += engine_tokenizer_is_special(c->tok, ids[i]);
	if (n_special != want_special) {
		r = st_errorf(
			errbuf, errlen, -EINVAL,
			"the message text contains special tokens (%zu found where the format puts %zu)",
			n_special, want_special);
		goto out;
	}
	grown_ids = realloc(out->ids, sizeof(*ids) * (out->n_ids + n + 1));
	if (!grown_ids) {
		r = -ENOMEM;
		goto out;
	}
	out->ids = grown_ids;
	grown_img = realloc(out->images, sizeof(*out->images) * (out->n_images + n_images + 1));
	if (!grown_img) {
		r = -ENOMEM;
		goto out;
	}
	out->images = grown_img;
	grown_text = realloc(out->text, out->text_len + text->len + 1);
	if (!grown_text) {
		r = -ENOMEM;
		goto out;
	}
	out->text = grown_text;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		if (c->id_image < 0 || ids[i] != c->id_image) {
			i++;
			continue;
		}
		while (j < n && ids[j] == c->id_image)
			j++;
		/* the render put each image's run between <img> and </img>; the special-token count
		 * above rules out any other run */
		if (k == n_images || j - i != (size_t)tiles[k] * (size_t)c->tokens_per_tile) {
			r = st_errorf(errbuf, errlen, -EINVAL, "image placeholders do not match the images");
			goto out;
		}
		out->images[out->n_images + k] =
			(struct engine_chat_image){.begin = out->n_ids + i, .n = j - i, .n_tiles = tiles[k]};
		k++;
		i = j;
	}
	if (k != n_images) {
		r = st_errorf(errbuf, errlen, -EINVAL, "image placeholders do not match the images");
		goto out;
	}
	memcpy(out->ids + out->n_ids, ids, sizeof(*ids) * n);
	out->n_ids += n;
	out->n_images += n_images;
	memcpy(out->text + out->text_len, text->p, text->len);
	out->text_len += text->len;
	out->text[out->text_len] = '\0';
out:
	free(ids);
	return r;
}

/* Appends s[begin..end) with every <image> placeholder expanded (model.md 5.2). */
static int expand_images(const struct engine_chat *c, struct sbuf *b, const char *s, size_t len,
			 const int *tiles, size_t n_images)
{
	const char *p;
	size_t k = 0;
	int r = 0;

	while (r == 0 && (p = find(s, len, MARK_IMAGE))) {
		r = sbuf_add(b, s, (size_t)(p - s));
		if (r == 0)
			r = sbuf_str(b, MARK_IMG);
		for (size_t i = 0;
		     r == 0 && k < n_images && i < (size_t)tiles[k] * (size_t)c->tokens_per_tile; i++)
			r = sbuf_str(b, MARK_IMAGE);
		if (r == 0)
			r = sbuf_str(b, MARK_IMG_END);
		k++;
		len -= (size_t)(p - s) + strlen(MARK_IMAGE);
		s = p + strlen(MARK_IMAGE);
	}
	return r ? r : sbuf_add(b, s, len);
}

/* Appends the template's opening to b and returns the special ids it holds: the BOS token and
 * the system block's marker. */
static size_t opening(const struct engine_chat *c, struct sbuf *b, int *r)
{
	size_t n = 0;

	if (c->id_bos >= 0) {
		*r = *r ? *r : sbuf_str(b, MARK_BOS);
		n += engine_tokenizer_is_special(c->tok, c->id_bos);
	}
	*r = *r ? *r : sbuf_str(b, MARK_SYSTEM "System\n");
	return n + engine_tokenizer_is_special(c->tok, c->id_system);
}

/* The reasoning switch of one system or user text: '/think' in text.replace('</think>', '')
 * turns it on, else '/no_think' in text turns it off. */
static int think_switch(const char *s, size_t len, bool *reasoning)
{
	struct sbuf tmp = {0};
	int r = replace_all(&tmp, s, len, THINK_CLOSE, "");

	if (r == 0 && find(tmp.p, tmp.len, SWITCH_ON))
		*reasoning = true;
	else if (r == 0 && find(s, len, SWITCH_OFF))
		*reasoning = false;
	free(tmp.p);
	return r;
}

int engine_chat_append(struct engine_chat *c, const struct engine_chat_message *m,
		       struct engine_chat_tokens *out, char *errbuf, size_t errlen)
{
	struct sbuf content = {0}, cleaned = {0}, text = {0};
	const char *body;
	size_t len, b, e, want_special = 0, total_tiles = 0;
	bool reasoning = c->reasoning;
	int r = 0;

	if (!m || !m->text || !out || (m->n_images && !m->image_tiles))
		return st_errorf(errbuf, errlen, -EINVAL, "bad arguments");
	len = strlen(m->text);
	if (len > ENGINE_CHAT_MAX_TEXT_BYTES)
		return st_errorf(errbuf, errlen, -E2BIG, "the message is longer than %u bytes",
				 ENGINE_CHAT_MAX_TEXT_BYTES);
	if (m->n_images > ENGINE_CHAT_MAX_IMAGES)
		return st_errorf(errbuf, errlen, -E2BIG, "a message may hold at most %d images",
				 ENGINE_CHAT_MAX_IMAGES);
	if (m->role == ENGINE_CHAT_SYSTEM && c->started)
		return st_errorf(errbuf, errlen, -EINVAL, "a system turn can only be the first turn");
	if (m->role != ENGINE_CHAT_SYSTEM && m->role != ENGINE_CHAT_USER && m->role != ENGINE_CHAT_ASSISTANT)
		return st_errorf(errbuf, errlen, -EINVAL, "unknown role %d", (int)m->role);
	if (m->n_images && m->role != ENGINE_CHAT_USER)
		return st_errorf(errbuf, errlen, -EINVAL, "only user turns may hold images");
	if (m->n_images && c->tokens_per_tile == 0)
		return st_errorf(errbuf, errlen, -EINVAL,
				 "images need a renderer created with the vision encoder");
	for (size_t i = 0; i < m->n_images; i++) {
		if (m->image_tiles[i] < 1 || m->image_tiles[i] > ENGINE_VISION_MAX_TILES + 1)
			return st_errorf(errbuf, errlen, -EINVAL, "image %zu has %d tiles", i,
					 m->image_tiles[i]);
		total_tiles += (size_t)m->image_tiles[i];
	}

	if (m->role != ENGINE_CHAT_ASSISTANT) {
		r = think_switch(m->text, len, &reasoning);
		if (r < 0)
			goto out;
	}
	if (m->n_images) {
		/* a list content: the image parts become placeholders in front of the text unless it
		 * has its own, "<image>\n" for one image, "<image 1><image> <image 2><image>\n" for
		 * more; the text loses its leading newlines */
		const char *t = m->text;
		size_t tl = len;

		if (count(t, tl, MARK_IMAGE) == 0) {
			for (size_t i = 0; r == 0 && i < m->n_images; i++) {
				char tag[48];

				if (m->n_images == 1)
					r = sbuf_str(&content, MARK_IMAGE);
				else {
					snprintf(tag, sizeof(tag), "%s<image %zu>" MARK_IMAGE, i ? " " : "",
						 i + 1);
					r = sbuf_str(&content, tag);
				}
			}
			if (r == 0)
				r = sbuf_str(&content, "\n");
		}
		while (tl && *t == '\n') {
			t++;
			tl--;
		}
		if (r == 0)
			r = sbuf_add(&content, t, tl);
	} else {
		/* a string content is cleaned and stripped before the turn cleans it again */
		r = clean(&cleaned, m->text, len);
		if (r == 0) {
			strip(cleaned.p, cleaned.len, &b, &e);
			r = sbuf_add(&content, cleaned.p + b, e - b);
		}
	}
	/* the user turn cleans its content (again) */
	if (r == 0 && m->role == ENGINE_CHAT_USER)
		r = clean(&cleaned, content.p, content.len);
	if (r < 0)
		goto out;
	body = m->role == ENGINE_CHAT_USER ? cleaned.p : content.p;
	len = m->role == ENGINE_CHAT_USER ? cleaned.len : content.len;
	strip(body, len, &b, &e);
	if (count(body + b, e - b, MARK_IMAGE) != m->n_images) {
		r = st_errorf(errbuf, errlen, -EINVAL,
			      "the text has %zu '<image>' placeholders for %zu images",
			      count(body + b, e - b, MARK_IMAGE), m->n_images);
		goto out;
	}

	if (!c->started) {
		want_special += opening(c, &text, &r);
		if (r == 0 && m->role != ENGINE_CHAT_SYSTEM)
			r = sbuf_str(&text, "\n"); /* the empty system block */
	}
	switch (m->role) {
	case ENGINE_CHAT_SYSTEM:
		break;
	case ENGINE_CHAT_USER:
		r = r ? r : sbuf_str(&text, MARK_TURN "User\n");
		break;
	case ENGINE_CHAT_ASSISTANT:
		r = r ? r : sbuf_str(&text, MARK_TURN "Assistant\n");
		break;
	}
	if (r == 0)
		r = expand_images(c, &text, body + b, e - b, m->image_tiles, m->n_images);
	if (r == 0)
		r = sbuf_str(&text, m->role == ENGINE_CHAT_ASSISTANT ? "\n" MARK_END "\n" : "\n");
	if (r < 0)
		goto out;
	if (m->role != ENGINE_CHAT_SYSTEM)
		want_special += engine_tokenizer_is_special(c->tok, c->id_turn);
	if (m->role == ENGINE_CHAT_ASSISTANT)
		want_special += engine_tokenizer_is_special(c->tok, c->id_end);
	if (m->n_images)
		want_special += m->n_images * (size_t)(engine_tokenizer_is_special(c->tok, c->id_img) +
						       engine_tokenizer_is_special(c->tok, c->id_img_end)) +
				total_tiles * (size_t)c->tokens_per_tile *
					engine_tokenizer_is_special(c->tok, c->id_image);
	r = emit(c, &text, m->image_tiles, m->n_images, want_special, out, errbuf, errlen);
	if (r < 0)
		goto out;
	c->reasoning = reasoning;
	c->started = true;
out:
	if (r == -ENOMEM)
		st_errorf(errbuf, errlen, r, "out of memory");
	free(content.p);
	free(cleaned.p);
	free(text.p);
	return r;
}

static int emit_fixed(struct engine_chat *c, const char *s, size_t want_special,
		      struct engine_chat_tokens *out)
{
	struct sbuf text = {0};
	int r = sbuf_str(&text, s);

	if (r == 0)
		r = emit(c, &text, NULL, 0, want_special, out, NULL, 0);
	free(text.p);
	if (r == 0)
		c->started = true;
	return r;
}

int engine_chat_generation_prompt(struct engine_chat *c, struct engine_chat_tokens *out)
{
	int32_t id_open = engine_tokenizer_token_id(c->tok, THINK_OPEN);
	int32_t id_close = engine_tokenizer_token_id(c->tok, THINK_CLOSE);
	struct sbuf text = {0};
	size_t want = 0;
	int r = 0;

	/* before any turn the template has its opening and an empty user turn */
	if (!c->started) {
		want += opening(c, &text, &r) + engine_tokenizer_is_special(c->tok, c->id_turn);
		r = r ? r : sbuf_str(&text, "\n" MARK_TURN "User\n\n");
	}
	r = r ? r :
		sbuf_str(&text, c->reasoning ? MARK_TURN "Assistant\n" THINK_OPEN "\n" :
					       MARK_TURN "Assistant\n" THINK_OPEN THINK_CLOSE);
	want += engine_tokenizer_is_special(c->tok, c->id_turn) +
		engine_tokenizer_is_special(c->tok, id_open) +
		(c->reasoning ? 0 : engine_tokenizer_is_special(c->tok, id_close));
	if (r == 0)
		r = emit(c, &text, NULL, 0, want, out, NULL, 0);
	free(text.p);
	if (r == 0)
		c->started = true;
	return r;
}

int engine_chat_close_generation(struct engine_chat *c, struct engine_chat_tokens *out)
{
	return emit_fixed(c, MARK_END "\n", engine_tokenizer_is_special(c->tok, c->id_end), out);
}

int engine_chat_close_content(struct engine_chat *c, struct engine_chat_tokens *out)
{
	return emit_fixed(c, "\n" MARK_END "\n", engine_tokenizer_is_special(c->tok, c->id_end), out);
}

int engine_chat_render(struct engine_chat *c, const struct engine_chat_message *msgs, size_t n,
		       bool add_generation_prompt, struct engine_chat_tokens *out, char *errbuf, size_t errlen)
{
	size_t n_ids = out->n_ids, n_images = out->n_images, text_len = out->text_len;
	bool turns = false;
	int r = 0;

	engine_chat_reset(c);
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = engine_chat_append(c, &msgs[i], out, errbuf, errlen);
		turns |= msgs[i].role != ENGINE_CHAT_SYSTEM;
	}
	/* the template renders an empty user turn when the system turn is all there is */
	if (r == 0 && n && !turns)
		r = engine_chat_append(c, &(struct engine_chat_message){ENGINE_CHAT_USER, "", NULL, 0}, out,
				       errbuf, errlen);
	if (r == 0 && add_generation_prompt)
		r = engine_chat_generation_prompt(c, out);
	if (r < 0) {
		out->n_ids = n_ids;
		out->n_images = n_images;
		out->text_len = text_len;
		if (out->text)
			out->text[text_len] = '\0';
		engine_chat_reset(c);
	}
	return r;
}

/* ---- the checkpoint's template ----------------------------------------------------------------- */

int engine_chat_check_template(const char *name, const char *source, size_t len, char *msg, size_t msglen)
{
	static const char *const markers[] = {
		MARK_SYSTEM "System", MARK_TURN "User", MARK_TURN "Assistant", MARK_END,
		THINK_OPEN,	      "bos_token", /* the prompt opens with BOS (model.md 5.2) */
	};
	/* markers of other chat formats, named when present */
	static const char *const foreign[] = {
		"<|im_start|>", "<|start_header_id|>", "[INST]",       "<start_of_turn>",
		"<|user|>",	"<|assistant|>",       "<extra_id_1>",
	};
	struct sbuf s = {0};
	size_t n_missing = 0, n_foreign = 0;
	int r = 0;

	if (!source)
		return -EINVAL;
	r = sbuf_str(&s, name ? name : "the chat template");
	r = r ? r : sbuf_str(&s, ": a different chat format");
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(markers); i++) {
		if (find(source, len, markers[i]))
			continue;
		r = sbuf_str(&s, n_missing++ ? ", '" : "; it lacks '");
		r = r ? r : sbuf_str(&s, markers[i]);
		r = r ? r : sbuf_str(&s, "'");
	}
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(foreign); i++) {
		if (!find(source, len, foreign[i]))
			continue;
		r = sbuf_str(&s, n_foreign++ ? ", '" : "; it uses '");
		r = r ? r : sbuf_str(&s, foreign[i]);
		r = r ? r : sbuf_str(&s, "'");
	}
	if (r == 0 && (n_missing || n_foreign))
		r = sbuf_str(&s, " (model.md 5.2 format expected; prompts are rendered in that format)");
	if (r == 0 && msg && msglen)
		snprintf(msg, msglen, "%s", (n_missing || n_foreign) ? s.p : "");
	free(s.p);
	if (r < 0)
		return r;
	return n_missing || n_foreign ? ENGINE_CHAT_TEMPLATE_DIFFERENT : ENGINE_CHAT_TEMPLATE_KNOWN;
}

/* Reads dir/name whole; -ENOENT when absent. */
static int read_file(const char *dir, const char *name, char **ret, size_t *ret_len, char *msg, size_t msglen)
{
	char *path = path_join(dir, name), *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (r != -ENOENT)
			st_errorf(msg, msglen, -EINVAL, "%s: %s", name, strerror(-r));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		r = st_errorf(msg, msglen, -EINVAL, "%s: %s", name, strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size > ENGINE_CHAT_MAX_TEMPLATE_BYTES) {
		r = st_errorf(msg, msglen, -EFBIG, "%s: larger than %u bytes", name,
			      ENGINE_CHAT_MAX_TEMPLATE_BYTES);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);

		if (k <= 0) {
			r = st_errorf(msg, msglen, -EINVAL, "%s: read error", name);
			goto out;
		}
		got += (size_t)k;
	}
	buf[got] = '\0';
	*ret = buf;
	*ret_len = got;
	buf = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(path);
	if (r < 0 && r != -ENOENT && r != -EFBIG && r != -ENOMEM)
		r = -EINVAL;
	return r;
}

int engine_chat_check_model(const struct engine_model *model, char *msg, size_t msglen)
{
	const char *dir;
	char *text = NULL;
	json_t *root = NULL;
	const json_t *tmpl;
	size_t len;
	int r;

	if (msg && msglen)
		msg[0] = '\0';
	if (!model || !model->files || !(dir = model_files_dir(model->files)))
		return -EINVAL;
	/* transformers reads chat_template.jinja before tokenizer_config.json */
	r = read_file(dir, "chat_template.jinja", &text, &len, msg, msglen);
	if (r == 0) {
		r = engine_chat_check_template("chat_template.jinja", text, len, msg, msglen);
		goto out;
	}
	if (r != -ENOENT)
		goto out;
	r = read_file(dir, "tokenizer_config.json", &text, &len, msg, msglen);
	if (r == -ENOENT)
		goto none;
	if (r < 0)
		goto out;
	root = json_loadb(text, len, 0, NULL);
	if (!json_is_object(root)) {
		r = st_errorf(msg, msglen, -EINVAL, "tokenizer_config.json: not a JSON object");
		goto out;
	}
	tmpl = json_object_get(root, "chat_template");
	if (json_is_array(tmpl)) {
		const json_t *pick = NULL, *e;
		size_t i;

		json_array_foreach(tmpl, i, e)
		{
			const json_t *nm = json_object_get(e, "name");

			if (!pick || (json_is_string(nm) && strcmp(json_string_value(nm), "default") == 0))
				pick = e;
		}
		tmpl = pick ? json_object_get(pick, "template") : NULL;
		if (!json_is_string(tmpl)) {
			r = st_errorf(msg, msglen, -EINVAL,
				      "tokenizer_config.json: chat_template list has no usable template");
			goto out;
		}
	}
	if (!tmpl || json_is_null(tmpl))
		goto none;
	if (!json_is_string(tmpl)) {
		r = st_errorf(msg, msglen, -EINVAL, "tokenizer_config.json: chat_template is not a string");
		goto out;
	}
	r = engine_chat_check_template("tokenizer_config.json chat_template", json_string_value(tmpl),
				       json_string_length(tmpl), msg, msglen);
	goto out;
none:
	st_errorf(msg, msglen, 0,
		  "the checkpoint ships no chat template (no chat_template.jinja, no chat_template in "
		  "tokenizer_config.json): the built-in model.md 5.2 format is used");
	r = ENGINE_CHAT_TEMPLATE_NONE;
out:
	json_decref(root);
	free(text);
	return r;
}
