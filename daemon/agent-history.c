/* The pure parts of an agent task's history (see agent-history.h). */
#include "agent-history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

size_t agent_history_limits(bool rebuild, long long context_tokens, long long step_tokens,
			    long long close_tokens, long long prefix_tokens, long long *ret_limits)
{
	const long long budget = context_tokens - step_tokens - close_tokens;
	size_t n = 0;

	if (rebuild)
		ret_limits[n++] = prefix_tokens + (budget - prefix_tokens) / 2;
	ret_limits[n++] = budget;
	return n;
}

int agent_history_fit(size_t index, long long limit,
		      int (*size)(void *userdata, size_t first, long long *ret_size), void *userdata,
		      size_t *ret_first)
{
	/* lo..hi brackets the answer; hi == index + 1 means none fits yet. */
	size_t lo = 0, hi = index + 1;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		long long n;
		int r = size(userdata, mid, &n);

		if (r < 0)
			return r;
		if (n <= limit)
			hi = mid;
		else
			lo = mid + 1;
	}
	*ret_first = hi;
	return 0;
}

char *agent_text_valid_utf8(const char *text, size_t len)
{
	char *out = xmalloc(len * 3 + 1);
	size_t o = 0;

	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_decode(text + i, len - i, &cp);

		if (n == 0 || cp == 0) {
			memcpy(out + o, UTF8_REPLACEMENT, 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(out + o, text + i, n);
		o += n;
		i += n;
	}
	out[o] = '\0';
	return out;
}

char *agent_prompt_text(const struct policy_piece *piece, const struct policy_piece *close, size_t cap)
{
	static const char image[] = "<image>";
	const size_t n_image = sizeof(image) - 1;
	size_t o = 0;
	char *out = xmalloc(cap + 16);
	const struct policy_piece *parts[] = {piece, close};

	for (size_t p = 0; p < ARRAY_SIZE(parts) && parts[p]; p++) {
		const char *t = parts[p]->text;
		size_t len = parts[p]->text_len;
		for (size_t i = 0; i < len && o < cap;) {
			size_t run = 0;
			while (i + (run + 1) * n_image <= len &&
			       memcmp(t + i + run * n_image, image, n_image) == 0)
				run++;
			if (run > 0) {
				o += (size_t)snprintf(out + o, cap + 16 - o, "<image>x%zu", run);
				i += run * n_image;
			} else {
				out[o++] = t[i++];
			}
		}
	}
	if (o >= cap) {
		o = cap;
		memcpy(out + o, "[...]", 5);
		o += 5;
	}
	out[o] = '\0';
	/* A cut may have split a character. */
	char *valid = agent_text_valid_utf8(out, o);
	free(out);
	return valid;
}
