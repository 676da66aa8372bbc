/* agent: runs one instruction task on the executor thread: look at the screen, ask the model
 * provider (provider.h: the local engine or a remote server) for the next step, act through the
 * executor's step function, repeat until the model answers or a budget ends it.
 *
 * DESIGN (threads): the loop runs on the executor thread, which alone owns the X connection
 * and the task's history. The provider's task ops run on it too; the local provider hands
 * everything that computes with the model to the model worker (model-worker.h), the remote
 * one waits on its HTTP transfer. The task's stop flag (cancel, kill switch, shutdown) is
 * atomic and polled by both (between decoded tokens and prefill chunks; in the transfer's
 * progress callback), so a stop takes effect at once. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "model-worker.h"
#include "executor.h"

/* Takeover (issue 32): the result of a step whose action a person's input stopped before it
 * ran, and what the model's next observation says once the task is handed back. */
#define AGENT_TAKEOVER_SKIPPED                                                                               \
	"not executed: the user took over the screen (input from a real keyboard or mouse)"
#define AGENT_TAKEOVER_NOTE "the user took over the screen and handed it back: it may have changed"
/* holoctl pause while a step was decided whose decode could not stop (a persistent session
 * keeps no state from before the step's prompt, so its decode runs to its end): the action is
 * not run, the session keeps the step, and the model reads this as its result. */
#define AGENT_PAUSE_SKIPPED "not executed: the task was paused while this step was decided"

/* Bytes of a step's decoded text kept (raw output in the journal). */
#define AGENT_MAX_RAW_BYTES (64 * 1024)
/* Bytes of a step's prompt text journaled (longer: cut, marked "[...]"). */
#define AGENT_MAX_PROMPT_TEXT_BYTES (64 * 1024)

struct provider;
struct secrets;

struct agent_config {
	struct provider *provider;	    /* where instruction tasks' steps come from */
	struct model_worker *worker;	    /* the local engine: grounding, and the local provider */
	enum ipc_history history;	    /* default of tasks that leave it unset */
	unsigned window;		    /* default K */
	unsigned max_tiles;		    /* default tile budget; 0: the checkpoint's */
	unsigned context_tokens;	    /* session size */
	unsigned step_tokens;		    /* most tokens decoded per step */
	unsigned step_retries;		    /* invalid steps retried before failing */
	double temperature;		    /* default of tasks that leave it unset; 0: greedy; -1: the
					     * policy format's (policy_format.sampling) */
	double top_p;			    /* default nucleus mass, (0, 1]; -1: the format's */
	long long seed;			    /* default seed, 0..IPC_MAX_SEED; -1: one drawn per task */
	bool thinking;			    /* default: a think block before each step (docs/policy.md) */
	unsigned thinking_tokens;	    /* default: most tokens of the think block, within step_tokens */
	const struct secrets *secrets;	    /* {{secret:NAME}} of `write` (secrets.h); NULL: none */
	const char *secret_names;	    /* their names as "A, B" for the system prompt; NULL: none */
	bool jump_forward;		    /* default: grammar-forced tokens appended in one forward */
	unsigned stuck_warn;		    /* default stuck steps before the model is told; 0: never */
	unsigned stuck_stop;		    /* default stuck steps that end a task `stuck`; 0: never */
	bool unconstrained;		    /* debug: no step grammar while decoding */
	const struct policy_format *format; /* default of tasks that leave it unset; NULL: holo3 */
	/* the published holo-nano texts read from the user's verified copy; NULL: holod's own */
	const struct policy_published *published;
};

struct ipc_task_options;
struct policy_format;
struct policy_published;
struct provider_sampling;

/* The sampling of a task with options `o` (provider_sampling): each of the task's fields, else
 * holod's option, else format `fmt`'s default; a task without a seed under a holod without
 * --seed gets one drawn now. */
struct provider_sampling agent_sampling(const struct agent_config *cfg, const struct policy_format *fmt,
					const struct ipc_task_options *o, int64_t task_id);
/* What a task that sets none of them samples with, for /v1/status: {"format", "temperature",
 * "top_p", "seed"} (seed null: drawn per task). A new reference, or NULL. */
json_t *agent_sampling_defaults(const struct agent_config *cfg, const struct policy_format *fmt);
/* The seed of step `index` of a task seeded `task_seed` (its first attempt's; a retry adds the
 * attempt number). */
uint64_t agent_step_seed(uint32_t task_seed, size_t index);

/* The policy format of a task with options `o`: the task's, else holod's, else holo3. */
const struct policy_format *agent_format(const struct agent_config *cfg, const struct ipc_task_options *o);

/* Runs instruction task `t` (see executor_run for the display). */
void agent_run(const struct agent_config *cfg, const struct executor_env *env, struct x11_display **d,
	       const char *display_name, const struct executor_task *t, struct executor_outcome *ret);
