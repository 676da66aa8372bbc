/* holo-infer --render: a conversation file read into chat messages, and the rendered prompt
 * printed as JSON (render.c has the file's form). */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "engine.h"

#define RENDER_MAX_MESSAGES 1024 /* messages in one conversation file */
#define RENDER_MAX_PARTS 256	 /* content parts in one message */

struct render_conversation {
	struct engine_chat_message *msgs; /* texts and tile arrays owned */
	size_t n, n_images;
};

/* Reads path. Returns 0, or -EINVAL with one sentence in err naming what is wrong. */
int render_conversation_load(const char *path, struct render_conversation *conv, char *err, size_t errlen);
/* Accepts a zeroed struct. */
void render_conversation_finish(struct render_conversation *conv);
/* One line: {"text": ..., "ids": [...], "images": [{"begin", "n", "tiles"}...], "reasoning": b}.
 * Returns 0 or -EIO. */
int render_print(FILE *f, const struct engine_chat_tokens *t, bool reasoning);
