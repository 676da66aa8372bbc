/* holo-infer --render: a conversation rendered to the chat prompt's text and ids, printed as JSON
 * for a diff against transformers' apply_chat_template (tools/chat_template_diff.py).
 *
 * The conversation comes from a JSON file in transformers' messages form: an array of
 * {"role": "system"|"user"|"assistant", "content": TEXT or [PART...]} (or {"messages": that}),
 * a PART being {"type": "text", "text": TEXT} or {"type": "image", "tiles": N}: an image is
 * rendered from its tile count, so no picture is needed to compare the prompts. The text parts
 * of one message are joined, as the template joins them.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "render.h"

/* Writes the sentence to err and returns err_code (a negative errno). */
static int __attribute__((format(printf, 4, 5)))
errorf(char *err, size_t errlen, int err_code, const char *format, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, format);
		vsnprintf(err, errlen, format, ap);
		va_end(ap);
	}
	return err_code;
}

static const char *const role_name[] = {
	[ENGINE_CHAT_SYSTEM] = "system",
	[ENGINE_CHAT_USER] = "user",
	[ENGINE_CHAT_ASSISTANT] = "assistant",
};

void render_conversation_finish(struct render_conversation *conv)
{
	for (size_t i = 0; i < conv->n; i++) {
		free((char *)conv->msgs[i].text);
		free((int *)conv->msgs[i].image_tiles);
	}
	free(conv->msgs);
	memset(conv, 0, sizeof(*conv));
}

/* One message's content into m; returns 0 or -EINVAL with the reason in err. */
static int read_content(const json_t *content, size_t k, struct engine_chat_message *m, char *err,
			size_t errlen)
{
	const json_t *part;
	size_t i, len = 0, n_images = 0;
	char *text;
	int *tiles;

	if (json_is_string(content)) {
		m->text = xstrdup(json_string_value(content));
		return 0;
	}
	if (!json_is_array(content))
		return errorf(err, errlen, -EINVAL,
			      "message %zu: content is neither a string nor a list of parts", k);
	if (json_array_size(content) > RENDER_MAX_PARTS)
		return errorf(err, errlen, -EINVAL, "message %zu: more than %d content parts", k,
			      RENDER_MAX_PARTS);
	json_array_foreach(content, i, part)
	{
		const char *type = json_string_value(json_object_get(part, "type"));
		const json_t *t = json_object_get(part, "text");

		if (type && strcmp(type, "text") == 0 && json_is_string(t))
			len += json_string_length(t);
		else if (type && strcmp(type, "image") == 0)
			n_images++;
		else
			return errorf(err, errlen, -EINVAL,
				      "message %zu part %zu: expected {\"type\": \"text\", \"text\": ...} "
				      "or {\"type\": \"image\", \"tiles\": N}",
				      k, i);
	}
	if (n_images > ENGINE_CHAT_MAX_IMAGES)
		return errorf(err, errlen, -EINVAL, "message %zu: more than %d images", k,
			      ENGINE_CHAT_MAX_IMAGES);
	text = xmalloc(len + 1);
	tiles = xmalloc(sizeof(*tiles) * (n_images + 1));
	len = 0;
	n_images = 0;
	json_array_foreach(content, i, part)
	{
		const json_t *t = json_object_get(part, "text"), *nt = json_object_get(part, "tiles");

		if (json_is_string(t)) {
			memcpy(text + len, json_string_value(t), json_string_length(t));
			len += json_string_length(t);
			continue;
		}
		if (!json_is_integer(nt) || json_integer_value(nt) < 1 ||
		    json_integer_value(nt) > ENGINE_VISION_MAX_TILES + 1) {
			free(text);
			free(tiles);
			return errorf(err, errlen, -EINVAL,
				      "message %zu part %zu: an image needs \"tiles\": 1..%d", k, i,
				      ENGINE_VISION_MAX_TILES + 1);
		}
		tiles[n_images++] = (int)json_integer_value(nt);
	}
	text[len] = '\0';
	m->text = text;
	m->image_tiles = tiles;
	m->n_images = n_images;
	return 0;
}

int render_conversation_load(const char *path, struct render_conversation *conv, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *arr, *msg;
	size_t i;
	int r = 0;

	memset(conv, 0, sizeof(*conv));
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return errorf(err, errlen, -EINVAL, "%s: line %d: %s", path, jerr.line, jerr.text);
	arr = json_is_object(root) ? json_object_get(root, "messages") : root;
	if (!json_is_array(arr) || json_array_size(arr) == 0) {
		r = errorf(err, errlen, -EINVAL, "%s: expected a non-empty list of messages", path);
		goto out;
	}
	if (json_array_size(arr) > RENDER_MAX_MESSAGES) {
		r = errorf(err, errlen, -EINVAL, "%s: more than %d messages", path, RENDER_MAX_MESSAGES);
		goto out;
	}
	conv->msgs = xcalloc(json_array_size(arr), sizeof(*conv->msgs));
	json_array_foreach(arr, i, msg)
	{
		const char *role = json_string_value(json_object_get(msg, "role"));
		struct engine_chat_message *m = &conv->msgs[i];
		size_t k;

		for (k = 0; k < ARRAY_SIZE(role_name); k++)
			if (role && strcmp(role, role_name[k]) == 0)
				break;
		if (k == ARRAY_SIZE(role_name)) {
			r = errorf(err, errlen, -EINVAL,
				   "%s: message %zu: role must be system, user or assistant", path, i);
			goto out;
		}
		m->role = (enum engine_chat_role)k;
		r = read_content(json_object_get(msg, "content"), i, m, err, errlen);
		if (r < 0)
			goto out;
		conv->n++;
		conv->n_images += m->n_images;
	}
out:
	json_decref(root);
	if (r < 0)
		render_conversation_finish(conv);
	return r;
}

int render_print(FILE *f, const struct engine_chat_tokens *t, bool reasoning)
{
	json_t *o = json_object(), *ids = json_array(), *imgs = json_array();
	char *s;
	int r = 0;

	for (size_t i = 0; i < t->n_ids; i++)
		json_array_append_new(ids, json_integer(t->ids[i]));
	for (size_t i = 0; i < t->n_images; i++)
		json_array_append_new(imgs,
				      json_pack("{s:I, s:I, s:i}", "begin", (json_int_t)t->images[i].begin,
						"n", (json_int_t)t->images[i].n, "tiles",
						t->images[i].n_tiles));
	json_object_set_new(o, "text", json_stringn(t->text ? t->text : "", t->text_len));
	json_object_set_new(o, "ids", ids);
	json_object_set_new(o, "images", imgs);
	json_object_set_new(o, "reasoning", json_boolean(reasoning));
	s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!s || fprintf(f, "%s\n", s) < 0)
		r = -EIO;
	free(s);
	json_decref(o);
	return r;
}
