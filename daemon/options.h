/* holod's configuration: one table of options drives command-line parsing, environment
 * variables, the config file (`key = value` lines), validation, --help and --dump-config.
 * Precedence, lowest first: built-in default < config file < environment < command line. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "engine.h"

/* Displays one holod drives at most (--displays, --display repeated). */
#define HOLOD_MAX_DISPLAYS 16
/* Highest N of --virtual WxH@:N. */
#define HOLOD_MAX_DISPLAY_NUMBER 9999
/* Longest config-file path after ~ and $VAR expansion. */
#define HOLOD_MAX_CONFIG_PATH 4096

struct holod_config {
	char *config_path;  /* --config, $HOLOD_CONFIG, $XDG_CONFIG_HOME/holod/holod.conf */
	char *socket_path;  /* --socket, $HOLOD_SOCKET, $XDG_RUNTIME_DIR/holod/holod.sock */
	char *state_dir;    /* --state-dir, $HOLOD_STATE_DIR, $XDG_STATE_HOME/holod */
	char *display;	    /* --display, $DISPLAY: one name or a comma-separated list (the
			       command line may repeat --display); NULL: none */
	char *virtual_size; /* --virtual WxH[@:N]: start and own Xvfbs of that size */
	int virtual_width, virtual_height;
	int virtual_number; /* the N of WxH@:N: the first virtual display's number; -1: any */
	unsigned n_virtual; /* --displays: how many Xvfbs --virtual starts */
	char *session;	    /* --session auto|none|CMD: what runs on each virtual display once it
			       is up (auto: XVFB_AUTO_WM when installed) */
	/* Derived by options_parse: the displays driven, one executor each (HOLOD_MAX_DISPLAYS at
	 * most); empty with --virtual (main.c fills them in as the Xvfbs come up) and when no
	 * display is known. */
	char **displays;
	size_t n_displays;
	bool display_cmdline;	    /* a --display of the command line was seen: the next one appends */
	bool require_model;	    /* a model that cannot be loaded makes holod exit non-zero */
	unsigned settle_ms;	    /* default pause after each action */
	unsigned max_steps;	    /* default step budget of a task */
	unsigned max_seconds;	    /* default time budget of a task */
	unsigned kill_switch_ms;    /* double-Escape window of the kill switch; 0: off */
	unsigned ask_timeout_s;	    /* an ask_user step's wait for the reply */
	char *approve;		    /* none | risky | all: the tasks' default approval mode */
	unsigned approve_timeout_s; /* a held action's wait for approval */
	char *approve_rules;	    /* the rules of risky (JSON); NULL: the built-in ones */
	unsigned prune_days;	    /* tasks finished longer ago are pruned after each task; 0: off */
	char *model_dir;	    /* --model DIR: checkpoint loaded at start-up; NULL: scripts only */
	char *backend;		    /* --backend auto|cpu|cuda: where the language model runs */
	char *precision;	    /* --precision default|bf16|fp32 */
	char *weights;		    /* --weights default|bf16|q8|q4|fp8: the linear layers' format */
	char *ssm_state;	    /* --ssm-state fp32|bf16: the Mamba SSM state's storage */
	unsigned device;	    /* --device N: the CUDA device index */
	struct engine_backend_options engine_backend; /* the above, parsed and resolved */
	char *history;		      /* default history mode of instruction tasks: persistent | window */
	char *takeover;		      /* a person's input on a task's display: pause | ignore | cancel */
	char *policy_format;	      /* default policy format of instruction tasks: holo3 | holo-nano */
	char *published_dir;	      /* the published holo-nano texts' local copy; NULL: none */
	unsigned window;	      /* default observations kept with their image (window mode, rebuilds) */
	unsigned max_tiles;	      /* default image tile budget per observation; 0: the checkpoint's */
	unsigned context_tokens;      /* session size; persistent sessions are rebuilt before it */
	unsigned state_limit_kib;     /* session state the model may hold; 0: none (CUDA: free memory) */
	unsigned batch_prefill_chunk; /* prefill positions per batched forward at most */
	unsigned batch_vision_slice;  /* vision encoder steps between two forwards at most */
	unsigned step_tokens;	      /* most tokens decoded for one step */
	unsigned step_retries;	      /* invalid steps retried before the task fails */
	char *thinking;		      /* on | off: steps open a think block before the step */
	unsigned thinking_tokens;     /* most tokens of a step's think block */
	char *secrets_file;	      /* --secrets FILE; NULL: $XDG_CONFIG_HOME/holod/secrets if present */
	char *secret_env;	      /* --secret-env NAME[,NAME]: environment variables that are secrets */
	char *jump_forward;    /* on | off: the tokens the step grammar forces appended in one forward */
	unsigned stuck_warn;   /* stuck steps in a row before the model is told; 0: never */
	unsigned stuck_stop;   /* stuck steps in a row that end a task `stuck`; 0: never */
	double temperature;    /* default sampling temperature; 0: greedy; -1: the format's */
	double top_p;	       /* default nucleus mass, (0, 1]; -1: the format's */
	long long seed;	       /* default seed of a task's sampling; -1: one drawn per task */
	char *remote;	       /* --remote URL: steps from an OpenAI-compatible server */
	char *remote_model;    /* the model name sent; NULL: the server's first */
	char *remote_key_file; /* bearer key file */
	unsigned remote_connect_timeout; /* seconds */
	unsigned remote_timeout;	 /* seconds, a whole request */
	unsigned remote_retries;	 /* HTTP 429/5xx retries */
	char *remote_images;		 /* png | none */
	char *remote_server;		 /* auto | vllm | openai (provider_remote_server_from_string) */
	char *log_level;
	bool help, dump_config, version;
	bool debug_unconstrained; /* debug: decode without the step grammar */
};

/* Fills `cfg` from argv, the environment and the config file. Returns 0, or -EINVAL after
 * printing a message that names the option (and file:line for the config file). */
int options_parse(struct holod_config *cfg, int argc, char **argv);
void options_print_help(FILE *f, const char *argv0);
/* Every option as `key = value`; the output is a valid config file. */
void options_dump(FILE *f, const struct holod_config *cfg);
void options_finish(struct holod_config *cfg);
