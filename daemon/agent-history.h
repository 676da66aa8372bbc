/* agent-history: the pure parts of an agent task's history, apart from X and the model, so
 * that they are unit-tested on their own (tests/daemon/test-agent-history-unit.c):
 *   - fitting: the earliest step from which the history fits a token limit, and the limits a
 *     window or a rebuilt persistent session tries (agent.md 2);
 *   - text hygiene: what the journal keeps of the model's output and of a step's prompt is
 *     valid UTF-8, bounded, with images' runs of <image> tokens written once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "policy.h"

/* Most limits agent_history_limits() returns. */
#define AGENT_HISTORY_MAX_LIMITS 2

/* The token limits to fit the history of a restored prefix into, in the order to try: a window
 * fills the whole budget; a persistent session being rebuilt first tries half of the room after
 * the prefix, so that the next steps can append again, then the whole budget. The budget is
 * the context less the room a step decodes and closes its turn in. Returns how many limits
 * were written to ret_limits (at most AGENT_HISTORY_MAX_LIMITS). */
size_t agent_history_limits(bool rebuild, long long context_tokens, long long step_tokens,
			    long long close_tokens, long long prefix_tokens, long long *ret_limits);

/* The earliest first step in 0..index whose history (steps first..index) fits `limit`, given
 * size(first), which must not grow as first grows (starting later only drops turns): a binary
 * search, so size is called O(log index) times. *ret_first = index + 1 when none fits. Returns
 * 0, or size's negative errno. */
int agent_history_fit(size_t index, long long limit,
		      int (*size)(void *userdata, size_t first, long long *ret_size), void *userdata,
		      size_t *ret_first);

/* A copy of len bytes of text that is valid UTF-8 (what JSON and the journal's readers need):
 * every byte of an invalid sequence, and NUL, becomes U+FFFD. The model's raw output is sampled
 * token by token and may end inside a character or, without the grammar, be any bytes. */
char *agent_text_valid_utf8(const char *text, size_t len);

/* The text of what a step appended, for the journal: the pieces' text (close may be NULL) with
 * each image's run of <image> tokens written once with its count ("<image>x12"), cut at
 * `cap` bytes with "[...]" after the cut, valid UTF-8 (a cut may split a character). */
char *agent_prompt_text(const struct policy_piece *piece, const struct policy_piece *close, size_t cap);
