/* provider: where an instruction task's steps come from (issue 17).
 *
 * The agent loop (agent.c) sees the screen, acts, journals and keeps the budgets; a provider
 * turns the task's history into the next step. Two implement the ops table below:
 *   - local (provider-local.c): holod's own engine through the model worker, with one
 *     persistent session per task and the step grammar's token masks;
 *   - remote (provider-remote.c): an OpenAI-compatible server (vLLM, SGLang, llama.cpp's
 *     server) asked over HTTP with the step's JSON schema as its structured output.
 * The agent does not know which one runs: both answer a parsed policy_step or an error class
 * (below), and fill the same journal fields (journal_agent_step).
 *
 * DESIGN (threads): a provider is created by main.c before the executors start and destroyed
 * after they stopped; its non-task ops may be called from any
 * thread ( state, wait_ready, error, provenance, status). A provider_task belongs to the executor thread that
 * runs its task: every task op is called from it only. Each op that waits polls the task's stop flag (cancel,
 * kill switch, shutdown) and its deadline, so a stop ends it at once. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor.h"
#include "journal.h"
#include "policy.h"
#include "x11.h"

struct agent_config;
struct model_worker;
struct provider;
struct provider_task;

/* Longest error sentence an op writes. */
#define PROVIDER_MAX_ERROR 512

enum provider_state {
	PROVIDER_NONE,	  /* no model: instruction tasks are refused */
	PROVIDER_LOADING, /* tasks wait in the queue */
	PROVIDER_READY,
	PROVIDER_FAILED, /* provider_error says why */
};

/* How a task's steps are sampled, resolved by the agent (the task's fields, else holod's
 * options, else the policy format's defaults) and recorded in its provenance. A step's first
 * attempt samples with these (temperature 0: greedy); its seed is derived from `seed` and the
 * step index (agent.c), so the same seed samples the same steps. */
struct provider_sampling {
	double temperature; /* 0..IPC_MAX_TEMPERATURE */
	double top_p;	    /* (0, 1] */
	uint32_t seed;
};

/* What a task's conversation starts from. Strings and pointers outlive the task. */
struct provider_task_args {
	const struct agent_config *cfg;
	const struct executor_task *t;
	struct executor_run *run;	    /* the journal, the monitor, the deadline */
	enum ipc_history history;	    /* resolved: rolling, persistent or window */
	const struct policy_format *format; /* resolved: the prompt's and the steps' format */
	size_t window;			    /* observations sent with their image */
	int max_tiles;			    /* 0: the model's own budget */
	bool thinking;			    /* resolved: a think block before each step */
	unsigned thinking_tokens;	    /* resolved: its budget, within cfg->step_tokens */
	bool jump_forward;		    /* resolved: forced tokens appended in one forward (local) */
	const char *date;		    /* of the system prompt */
	struct provider_sampling sampling;
};

/* The task's history as the agent keeps it. Observation i's user turn tells results[i]
 * (results[i].text NULL: none, as for observation 0); steps[i] answered observation i, for
 * i < index; observation `index` is the one to answer now. */
struct provider_history {
	const struct policy_tool_result *results;
	const struct policy_step *steps;
	size_t index;
};

/* What one step returns. All strings are owned by it (provider_step_finish). */
struct provider_step {
	struct policy_step step;      /* valid when the op returned 0 */
	char *raw;		      /* the last attempt's output, valid UTF-8; never NULL after an op */
	char *reasoning;	      /* its think block's text (valid UTF-8), or NULL without one */
	char *prompt_text;	      /* what this step sent, as text (journal) */
	char *user_turn;	      /* the observation's user turn, "<image>" placeholder */
	char prompt_sha256[65];	      /* "" when not applicable */
	const char *prompt_mode;      /* "persistent", "window", "rolling" or "rebuild": static */
	struct journal_agent_step as; /* counts and timings; strings set by the agent */
	char *remote_model;	      /* the model name the server answered with (remote) */
	char err[PROVIDER_MAX_ERROR];
};

/* Frees the strings and the step (not the struct). Accepts a zeroed one. */
void provider_step_finish(struct provider_step *s);

/* The ops of one implementation. The task ops run on the task's executor thread. */
struct provider_ops {
	const char *name; /* "local", "remote" (journal, status) */
	enum provider_state (*state)(struct provider *p);
	/* Waits for a model still loading; returns the state after. */
	enum provider_state (*wait_ready)(struct provider *p);
	/* Why the provider cannot run tasks (a sentence), or NULL. */
	const char *(*error)(struct provider *p);
	/* The "model" member of a task's provenance (docs/journal.md); a new reference or NULL. */
	json_t *(*provenance)(struct provider *p);
	/* Prepares a task's conversation (local: the session and its prefix). 0, or -ECANCELED
	 * (stopped), or another -errno with err holding the task's failure sentence. */
	int (*task_open)(struct provider *p, const struct provider_task_args *args,
			 struct provider_task **ret, char *err, size_t errlen);
	/* Takes observation `index`'s screenshot (local: encodes it; remote: the PNG). 0,
	 * -ECANCELED, or -errno with err filled. */
	int (*observe)(struct provider_task *pt, size_t index, const struct x11_frame *frame, char *err,
		       size_t errlen);
	/* Asks for the step answering observation h->index, retrying an invalid answer up to
	 * cfg->step_retries times. 0 with ret->step parsed; -ECANCELED, -ETIME (the deadline);
	 * -EINTR: the task's pause flag (executor_task.pause) stopped the decode, nothing was
	 * decided, and the step is asked again for the same index after a new observe (local,
	 * window and rolling histories: their next step restores its snapshot anyway);
	 * else -errno with ret->err saying why (-EBADMSG: no valid step after every attempt).
	 * ret is filled (raw, counts, timings) whatever the outcome. */
	int (*step)(struct provider_task *pt, const struct provider_history *h, uint64_t seed,
		    struct provider_step *ret);
	/* Ends the task's conversation. Accepts NULL. */
	void (*task_close)(struct provider_task *pt);
	/* The "provider" member of GET /v1/status: {"name", ...}; a new reference or NULL. */
	json_t *(*status)(struct provider *p);
	void (*destroy)(struct provider *p);
};

/* The common head of every implementation's objects (first members). */
struct provider {
	const struct provider_ops *ops;
};

struct provider_task {
	struct provider *p;
};

/* The local engine, over a model worker that outlives it (which may hold no model). NULL +
 * errno. */
struct provider *provider_local_create(struct model_worker *worker);

/* The model sessions of --context-tokens an agent task of the local provider holds at most at
 * once (what its admission reserves): its session, the snapshot taken before decoding (with step
 * retries, or thinking in persistent history) and the rolling history's snapshot, plus the
 * prefix snapshot (at most a session). holod plans the device for this many per task. */
int provider_local_task_sessions(unsigned step_retries, bool thinking, enum ipc_history history);
/* The most of those any task may ask for (a task chooses its own history and thinking): what
 * holod plans the device for per task. */
int provider_local_task_sessions_max(unsigned step_retries);

/* What kind of server --remote names (--remote-server): vLLM gets its structured_outputs
 * field and the observation's image placeholder inside its text part, any other server
 * response_format and the parts in order (provider-remote.c). */
enum provider_remote_server {
	PROVIDER_REMOTE_AUTO, /* vLLM when GET /models says "owned_by": "vllm" */
	PROVIDER_REMOTE_VLLM,
	PROVIDER_REMOTE_OPENAI, /* any other OpenAI-compatible server */
};

/* "auto", "vllm", "openai" -> the kind, or -EINVAL. */
int provider_remote_server_from_string(const char *s);

/* The remote provider's configuration (holod's --remote options). */
struct provider_remote_config {
	const char *url;      /* the server's base URL (.../v1) or its chat completions URL */
	const char *model;    /* the model name sent; NULL: the first the server lists */
	const char *key_file; /* the bearer key's file (first line), or NULL */
	unsigned connect_timeout_s, timeout_s; /* connection; whole request */
	unsigned retries;		       /* retries of HTTP 429/5xx */
	bool images;			       /* false: the text-only layout (no screenshots sent) */
	enum provider_remote_server server;
};

/* An OpenAI-compatible server (provider-remote.c). Checks the URL and reads the key file (a
 * key file others can read is warned about). NULL + errno with err filled (a sentence that
 * never holds the key or the URL's credentials). */
struct provider *provider_remote_create(const struct provider_remote_config *c, char *err, size_t errlen);

/* Accepts NULL. */
void provider_destroy(struct provider *p);
