/* ground: where a script's grounded target ("target": "the Save button") is on the screen, as
 * the local engine sees it (ground.c), whatever provider instruction tasks use. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct executor_task;
struct x11_frame;

/* executor_env.ground (ground_ctx: the struct agent_config): one constrained step on a fresh
 * session, no history: the system text of the task's policy format (holod's --policy-format
 * for a script), the target in that format's words as the task (policy_format.ground_text), the
 * screenshot `frame`, then a greedy decode under policy_grammar_create_point(); the point is in
 * model space over `frame`. Runs on the executor thread, the work on the model worker; waits
 * for a model still loading. -ENODEV without a model, -ECANCELED / -ETIME when the task is
 * stopped, -E2BIG when the prompt and screenshot pass --context-tokens, else -errno; err says
 * why. */
int ground_locate(void *ground_ctx, const struct executor_task *t, uint64_t deadline_us,
		  const struct x11_frame *frame, const char *target, int *ret_mx, int *ret_my, char *err,
		  size_t errlen);
