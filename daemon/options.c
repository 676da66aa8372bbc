/* The option table and everything derived from it (see options.h). */
#include "options.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "ipc.h"
#include "model-worker.h"
#include "policy.h"

enum option_type {
	OPT_PATH, /* a file system path, taken as given */
	OPT_STRING,
	OPT_UINT,
	OPT_SIZE,	   /* WxH[@:N] */
	OPT_DISPLAYS,	   /* display names, comma-separated; repeated on the command line */
	OPT_LEVEL,	   /* log level name */
	OPT_FLAG,	   /* command line only, no value */
	OPT_HISTORY,	   /* an instruction task's history mode */
	OPT_TAKEOVER,	   /* what a person's input on the display does to its task */
	OPT_TEMPERATURE,   /* a sampling temperature, 0..IPC_MAX_TEMPERATURE, or "format" (-1) */
	OPT_TOP_P,	   /* a nucleus mass, (0, 1], or "format" (-1) */
	OPT_SEED,	   /* a seed, 0..IPC_MAX_SEED, or "random" (-1) */
	OPT_BACKEND,	   /* an engine backend kind name */
	OPT_PRECISION,	   /* an engine precision name */
	OPT_SSM_STATE,	   /* the SSM state's storage: an engine precision name */
	OPT_WEIGHTS,	   /* the linear layers' format: an engine weights name */
	OPT_ONOFF,	   /* "on" or "off" */
	OPT_POLICY_FORMAT, /* a policy format's name */
	OPT_APPROVE,	   /* an approval mode: none, risky, all */
};

/* Tokens a session must leave for the prompt besides one step's decode budget. */
#define OPT_MIN_PROMPT_ROOM 1024u
/* Highest CUDA device index --device accepts. */
#define OPT_MAX_DEVICE 63u

struct option_def {
	const char *name; /* --name on the command line, name in the config file */
	const char *env;  /* environment variable, or NULL */
	enum option_type type;
	size_t offset;
	unsigned min, max; /* OPT_UINT */
	const char *def;   /* default as text; NULL: derived (see resolve_defaults) or unset */
	const char *metavar;
	const char *help;
	bool in_file; /* may appear in the config file */
};

#define OFF(m) offsetof(struct holod_config, m)

static const struct option_def options[] = {
	{"config", "HOLOD_CONFIG", OPT_PATH, OFF(config_path), 0, 0, NULL, "PATH",
	 "config file (default $XDG_CONFIG_HOME/holod/holod.conf; a missing default file is fine)", false},
	{"socket", IPC_SOCKET_ENV, OPT_PATH, OFF(socket_path), 0, 0, NULL, "PATH",
	 "Unix socket of the API (default $XDG_RUNTIME_DIR/holod/holod.sock)", true},
	{"state-dir", "HOLOD_STATE_DIR", OPT_PATH, OFF(state_dir), 0, 0, NULL, "DIR",
	 "journal database and screenshots (default $XDG_STATE_HOME/holod)", true},
	{"display", "DISPLAY", OPT_DISPLAYS, OFF(display), 0, 0, NULL, "NAME",
	 "X display to drive (default $DISPLAY); repeat it, or list names with commas, to drive "
	 "several at once",
	 true},
	{"virtual", "HOLOD_VIRTUAL", OPT_SIZE, OFF(virtual_size), 0, 0, NULL, "WxH[@:N]",
	 "start and own private Xvfbs of this size instead of using --display (@:N: the first one "
	 "is display :N, the next :N+1...; default: free numbers)",
	 true},
	{"displays", "HOLOD_DISPLAYS", OPT_UINT, OFF(n_virtual), 1, HOLOD_MAX_DISPLAYS, "1", "N",
	 "how many Xvfbs --virtual starts; each display runs its own tasks", true},
	{"session", "HOLOD_SESSION", OPT_STRING, OFF(session), 0, 0, "auto", "auto|none|CMD",
	 "with --virtual: what runs on each virtual display once it is up: auto (a window manager, "
	 "openbox, when it is installed), none, or CMD run through /bin/sh",
	 true},
	{"settle-ms", "HOLOD_SETTLE_MS", OPT_UINT, OFF(settle_ms), 0, IPC_MAX_SETTLE_MS, "100", "MS",
	 "default pause after each action before the 'after' screenshot", true},
	{"max-steps", "HOLOD_MAX_STEPS", OPT_UINT, OFF(max_steps), 1, IPC_MAX_TASK_STEPS, "200", "N",
	 "default step budget of a task", true},
	{"max-seconds", "HOLOD_MAX_SECONDS", OPT_UINT, OFF(max_seconds), 1, IPC_MAX_TASK_SECONDS, "600", "S",
	 "default wall-time budget of a task", true},
	{"kill-switch-ms", "HOLOD_KILL_SWITCH_MS", OPT_UINT, OFF(kill_switch_ms), 0, 5000, "600", "MS",
	 "two Escape presses on a real keyboard within MS stop the running task (0: off)", true},
	{"ask-timeout", "HOLOD_ASK_TIMEOUT", OPT_UINT, OFF(ask_timeout_s), 1, IPC_MAX_TASK_SECONDS, "600", "S",
	 "how long a task whose model asks the user a question (ask_user) waits for `holoctl "
	 "reply`; then the task fails saying so (the task's max_seconds still applies)",
	 true},
	{"approve", "HOLOD_APPROVE", OPT_APPROVE, OFF(approve), 0, 0, "none", "MODE",
	 "default of every task (scripts, instructions, holoctl do): which actions wait for "
	 "`holoctl approve` or `deny` before they run: none, risky (what the approval rules name: "
	 "--approve-rules) or all",
	 true},
	{"approve-timeout", "HOLOD_APPROVE_TIMEOUT", OPT_UINT, OFF(approve_timeout_s), 1,
	 IPC_MAX_TASK_SECONDS, "300", "S",
	 "how long a held action waits for approval; then the step fails without acting, and the "
	 "task with it",
	 true},
	{"approve-rules", "HOLOD_APPROVE_RULES", OPT_PATH, OFF(approve_rules), 0, 0, NULL, "FILE",
	 "the approval rules of --approve risky (JSON: hotkeys, terminals, tools, windows; "
	 "docs/api.md); default: holod's built-in rules",
	 true},
	{"prune-days", "HOLOD_PRUNE_DAYS", OPT_UINT, OFF(prune_days), 0, IPC_MAX_PRUNE_AGE_S / 86400, "0", "D",
	 "remove tasks (steps, screenshots) that finished more than D days ago, at start-up and "
	 "after each task (0: keep everything)",
	 true},
	{"model", "HOLOD_MODEL", OPT_PATH, OFF(model_dir), 0, 0, NULL, "DIR",
	 "model checkpoint to load at start-up (config.json, safetensors, tokenizer.json); "
	 "without one only scripts run",
	 true},
	{"backend", "HOLOD_BACKEND", OPT_BACKEND, OFF(backend), 0, 0, "auto", "B",
	 "where the language model runs: auto, cpu or cuda (auto: cuda when a device can run it, "
	 "else the cpu; a backend that cannot is refused at start-up)",
	 true},
	{"device", "HOLOD_DEVICE", OPT_UINT, OFF(device), 0, OPT_MAX_DEVICE, "0", "N",
	 "CUDA device the language model runs on (--backend cuda or auto)", true},
	{"precision", "HOLOD_PRECISION", OPT_PRECISION, OFF(precision), 0, 0, "default", "P",
	 "precision of the language model: default, bf16 or fp32 (default: bf16 on cuda, and on "
	 "the cpu for a bf16 checkpoint; fp32 on the cpu otherwise)",
	 true},
	{"weights", "HOLOD_WEIGHTS", OPT_WEIGHTS, OFF(weights), 0, 0, "default", "W",
	 "format of the language model's linear layers: default (as stored), bf16, q8 (int8, "
	 "about half of bf16's bytes) or q4 (4.5 bits, about 0.28), quantized at load, on the "
	 "cpu or cuda; or fp8, the cpu only (docs/quantization.md)",
	 true},
	{"ssm-state", "HOLOD_SSM_STATE", OPT_SSM_STATE, OFF(ssm_state), 0, 0, "fp32", "T",
	 "storage of each session's Mamba SSM state: fp32 or bf16 (half the state memory and "
	 "traffic, so about twice the sessions fit; every update still computes in fp32)",
	 true},
	{"takeover", "HOLOD_TAKEOVER", OPT_TAKEOVER, OFF(takeover), 0, 0, "pause", "pause|ignore|cancel",
	 "what input of a person on a task's display (a key, a button or "
	 "a pointer motion of a real device; holod's own never counts) does to the running task: "
	 "pause it at once (holoctl resume hands it back), ignore it, or cancel it; a task's "
	 "\"takeover\" overrides it",
	 true},
	{"history", "HOLOD_HISTORY", OPT_HISTORY, OFF(history), 0, 0, "rolling", "MODE",
	 "default history mode of instruction tasks: rolling (the last K screenshots, older "
	 "observations evicted into a snapshot: K screenshots prefilled a step), persistent (every "
	 "screenshot, one resident session) or window (the last K re-prefilled from the prefix)",
	 true},
	{"policy-format", "HOLOD_POLICY_FORMAT", OPT_POLICY_FORMAT, OFF(policy_format), 0, 0, "holo3",
	 POLICY_FORMAT_NAMES,
	 "default policy format of instruction tasks (docs/policy.md): holo3 (H Company's agent "
	 "loop) or holo-nano (the published holo-nano harness: its tools, system text and turns)",
	 true},
	{"published-dir", "HOLOD_PUBLISHED_DIR", OPT_PATH, OFF(published_dir), 0, 0, NULL, "DIR",
	 "where tools/policy_published.py put the published holo-nano texts (default "
	 "$XDG_DATA_HOME/holod/published); used when their SHA-256s match, else holod's own text",
	 true},
	{"window", "HOLOD_WINDOW", OPT_UINT, OFF(window), 1, IPC_MAX_HISTORY_WINDOW, "3", "K",
	 "default number of recent observations sent with their screenshot (rolling and window "
	 "modes, and when a persistent session is rebuilt)",
	 true},
	{"max-tiles", "HOLOD_MAX_TILES", OPT_UINT, OFF(max_tiles), 0, IPC_MAX_TILES, "0", "N",
	 "default image tile budget per observation (0: the checkpoint's)", true},
	{"context-tokens", "HOLOD_CONTEXT_TOKENS", OPT_UINT, OFF(context_tokens), 1024,
	 ENGINE_SESSION_MAX_TOKENS, "32768", "N",
	 "session size of an instruction task; a persistent or rolling session is rebuilt before "
	 "it is full",
	 true},
	{"state-limit", "HOLOD_STATE_LIMIT", OPT_UINT, OFF(state_limit_kib), 0, UINT32_MAX, "0", "KIB",
	 "KiB of model session state (recurrent state and KV caches of every task) the "
	 "model may hold; a task whose session would pass it waits for others to end (0: no limit "
	 "on the cpu, the free device memory on cuda)",
	 true},
	{"batch-prefill-chunk", "HOLOD_BATCH_PREFILL_CHUNK", OPT_UINT, OFF(batch_prefill_chunk), 1,
	 MODEL_WORKER_MAX_PREFILL_CHUNK, "256", "N",
	 "prefill tokens one batched forward of the model takes at most, so that a long prefill "
	 "delays the other tasks' decoding by one such forward",
	 true},
	{"batch-vision-slice", "HOLOD_BATCH_VISION_SLICE", OPT_UINT, OFF(batch_vision_slice), 1,
	 MODEL_WORKER_MAX_VISION_SLICE, "1", "N",
	 "vision encoder steps (on the cpu a ViT block or half the projector of one tile; on cuda a "
	 "tile) run between two batched forwards, so that a screenshot delays the other tasks' "
	 "decoding by one such slice",
	 true},
	{"step-tokens", "HOLOD_STEP_TOKENS", OPT_UINT, OFF(step_tokens), 16, 65536, "4096", "N",
	 "most tokens decoded for one step (a longer step is invalid)", true},
	{"step-retries", "HOLOD_STEP_RETRIES", OPT_UINT, OFF(step_retries), 0, 10, "2", "N",
	 "invalid steps retried (sampled again) before the task fails", true},
	{"thinking", "HOLOD_THINKING", OPT_ONOFF, OFF(thinking), 0, 0, "on", "on|off",
	 "default of instruction tasks: the model thinks (a free <think> block) before each step, "
	 "which is dropped from the history afterwards",
	 true},
	{"thinking-tokens", "HOLOD_THINKING_TOKENS", OPT_UINT, OFF(thinking_tokens), 1, 65536, "1024", "N",
	 "default most tokens of a step's think block (and at most half of --step-tokens, which "
	 "counts them); then the block is closed and the step decoded",
	 true},
	{"secrets", "HOLOD_SECRETS", OPT_PATH, OFF(secrets_file), 0, 0, NULL, "FILE",
	 "the secrets `write` types for {{secret:NAME}}: NAME=value lines, mode 0600 and the "
	 "user's own (default $XDG_CONFIG_HOME/holod/secrets; a missing default file is fine)",
	 true},
	{"secret-env", "HOLOD_SECRET_ENV", OPT_STRING, OFF(secret_env), 0, 0, NULL, "NAME[,NAME]",
	 "environment variables that are secrets of the same name (taken out of holod's "
	 "environment once read)",
	 true},
	{"jump-forward", "HOLOD_JUMP_FORWARD", OPT_ONOFF, OFF(jump_forward), 0, 0, "on", "on|off",
	 "default of instruction tasks: the tokens the step grammar forces after a sampled one "
	 "(JSON keys, the tool name's rest...) are appended in one forward instead of one forward "
	 "each (off: one forward per token, for comparison)",
	 true},
	{"stuck-warn", "HOLOD_STUCK_WARN", OPT_UINT, OFF(stuck_warn), 0, IPC_MAX_STUCK_STEPS, "3", "N",
	 "default of instruction tasks: after N steps in a row that left the screen unchanged "
	 "or repeated one action, the model's next tool output says so (0: never)",
	 true},
	{"stuck-stop", "HOLOD_STUCK_STOP", OPT_UINT, OFF(stuck_stop), 0, IPC_MAX_STUCK_STEPS, "6", "N",
	 "default of instruction tasks: after N such steps in a row the task ends with status "
	 "stuck and the evidence (0: never)",
	 true},
	{"temperature", "HOLOD_TEMPERATURE", OPT_TEMPERATURE, OFF(temperature), 0, 0, "format", "T",
	 "default sampling temperature of the model's steps, 0..2 (0: greedy; format: the policy "
	 "format's, 0.8 for holo3); always under the step grammar",
	 true},
	{"top-p", "HOLOD_TOP_P", OPT_TOP_P, OFF(top_p), 0, 0, "format", "P",
	 "default nucleus mass of the sampling, above 0 up to 1 (1: off; format: the policy "
	 "format's, 0.95 for holo3)",
	 true},
	{"seed", "HOLOD_SEED", OPT_SEED, OFF(seed), 0, 0, "random", "N",
	 "default seed of an instruction task's sampling, 0..4294967295 (random: one drawn per "
	 "task); the task's seed is recorded, and the same seed samples the same steps",
	 true},
	{"remote", "HOLOD_REMOTE", OPT_STRING, OFF(remote), 0, 0, NULL, "URL",
	 "take instruction tasks' steps from an OpenAI-compatible server (vLLM, SGLang, llama.cpp) "
	 "at URL, e.g. http://host:8000/v1, instead of the local model",
	 true},
	{"remote-model", "HOLOD_REMOTE_MODEL", OPT_STRING, OFF(remote_model), 0, 0, NULL, "NAME",
	 "model name sent to the --remote server (default: the first it lists)", true},
	{"remote-key-file", "HOLOD_REMOTE_KEY_FILE", OPT_PATH, OFF(remote_key_file), 0, 0, NULL, "FILE",
	 "bearer key of the --remote server: the file's first line (keep it mode 0600)", true},
	{"remote-connect-timeout", "HOLOD_REMOTE_CONNECT_TIMEOUT", OPT_UINT, OFF(remote_connect_timeout), 1,
	 600, "10", "S", "seconds to connect to the --remote server", true},
	{"remote-timeout", "HOLOD_REMOTE_TIMEOUT", OPT_UINT, OFF(remote_timeout), 1, 3600, "300", "S",
	 "seconds one request to the --remote server may take, its streamed answer included", true},
	{"remote-retries", "HOLOD_REMOTE_RETRIES", OPT_UINT, OFF(remote_retries), 0, 10, "3", "N",
	 "retries of a request the --remote server answers with HTTP 429 or 5xx (exponential "
	 "backoff, Retry-After honoured)",
	 true},
	{"remote-images", "HOLOD_REMOTE_IMAGES", OPT_STRING, OFF(remote_images), 0, 0, "png", "png|none",
	 "screenshots sent to the --remote server: png (data URLs), or none (the "
	 "text-only layout, for servers without vision)",
	 true},
	{"remote-server", "HOLOD_REMOTE_SERVER", OPT_STRING, OFF(remote_server), 0, 0, "auto",
	 "auto|vllm|openai",
	 "what the --remote server is: vllm gets the step schema as "
	 "structured_outputs and each screenshot's placeholder inside its text, openai (any other) "
	 "response_format and the parts in order; auto: vllm when its /models says owned_by vllm",
	 true},
	{"require-model", NULL, OPT_FLAG, OFF(require_model), 0, 0, NULL, NULL,
	 "exit non-zero when the configured model cannot be loaded (readiness waits for the load) "
	 "instead of serving scripts only",
	 false},
	{"debug-unconstrained", NULL, OPT_FLAG, OFF(debug_unconstrained), 0, 0, NULL, NULL,
	 "debug: decode steps without the step grammar (invalid steps become possible)", false},
	{"log-level", "HOLOD_LOG_LEVEL", OPT_LEVEL, OFF(log_level), 0, 0, "info", "LEVEL",
	 "error, warning, notice, info or debug", true},
	{"dump-config", NULL, OPT_FLAG, OFF(dump_config), 0, 0, NULL, NULL,
	 "print the effective configuration as a config file and exit", false},
	{"version", NULL, OPT_FLAG, OFF(version), 0, 0, NULL, NULL, "print the version and exit", false},
	{"help", NULL, OPT_FLAG, OFF(help), 0, 0, NULL, NULL, "show this help and exit", false},
};

/* WxH, or WxH@:N. *number is -1 without @:N. */
static int parse_size(const char *s, int *w, int *h, int *number)
{
	char *end;
	long n = -1;
	errno = 0;
	long a = strtol(s, &end, 10);
	if (errno || end == s || (*end != 'x' && *end != 'X'))
		return -EINVAL;
	const char *p = end + 1;
	long b = strtol(p, &end, 10);
	if (errno || end == p)
		return -EINVAL;
	if (*end == '@') {
		if (end[1] != ':' || end[2] < '0' || end[2] > '9')
			return -EINVAL;
		p = end + 2;
		n = strtol(p, &end, 10);
		if (errno || n > HOLOD_MAX_DISPLAY_NUMBER)
			return -EINVAL;
	}
	if (*end)
		return -EINVAL;
	if (a < 64 || b < 64 || a > 16384 || b > 16384)
		return -ERANGE;
	*w = (int)a;
	*h = (int)b;
	*number = (int)n;
	return 0;
}

/* One display name of a list: no spaces or control characters, at most
 * IPC_MAX_DISPLAY_NAME_BYTES bytes. */
static bool display_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > IPC_MAX_DISPLAY_NAME_BYTES)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] <= ' ' || name[i] == 0x7f)
			return false;
	return true;
}

/* Splits a comma-separated list of display names; -EINVAL names the bad entry. */
static int split_displays(const char *list, char ***ret, size_t *ret_n, const char *where, const char *option)
{
	char **v = NULL;
	size_t n = 0;
	const char *p = list;

	for (;;) {
		const char *comma = strchrnul(p, ',');
		size_t len = (size_t)(comma - p);
		if (!display_name_ok(p, len)) {
			fprintf(stderr,
				"holod: %s: --%s: '%.*s' is not a display name (like :1; at "
				"most %d bytes, no spaces)\n",
				where, option, (int)MIN(len, 80), p, IPC_MAX_DISPLAY_NAME_BYTES);
			goto fail;
		}
		if (n == HOLOD_MAX_DISPLAYS) {
			fprintf(stderr, "holod: %s: --%s: more than %d displays\n", where, option,
				HOLOD_MAX_DISPLAYS);
			goto fail;
		}
		for (size_t i = 0; i < n; i++)
			if (strlen(v[i]) == len && strncmp(v[i], p, len) == 0) {
				fprintf(stderr, "holod: %s: --%s: display %s is listed twice\n", where,
					option, v[i]);
				goto fail;
			}
		v = xrealloc(v, (n + 1) * sizeof(*v));
		v[n++] = xstrndup(p, len);
		if (!*comma)
			break;
		p = comma + 1;
	}
	*ret = v;
	*ret_n = n;
	return 0;
fail:
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	return -EINVAL;
}

static void free_displays(struct holod_config *cfg)
{
	for (size_t i = 0; i < cfg->n_displays; i++)
		free(cfg->displays[i]);
	free(cfg->displays);
	cfg->displays = NULL;
	cfg->n_displays = 0;
}

/* Validates and stores one value; `where` names its origin for the message. */
static int set_value(struct holod_config *cfg, const struct option_def *o, const char *value,
		     const char *where)
{
	char *base = (char *)cfg + o->offset;

	switch (o->type) {
	case OPT_PATH:
	case OPT_STRING:
		if (!value[0]) {
			fprintf(stderr, "holod: %s: --%s must not be empty\n", where, o->name);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_UINT: {
		char *end;
		errno = 0;
		unsigned long v = strtoul(value, &end, 10);
		if (errno || end == value || *end || value[0] == '-' || v < o->min || v > o->max) {
			fprintf(stderr, "holod: %s: --%s: '%s' is not an integer in %u..%u\n", where, o->name,
				value, o->min, o->max);
			return -EINVAL;
		}
		*(unsigned *)base = (unsigned)v;
		return 0;
	}
	case OPT_SIZE: {
		int w, h, number;
		if (parse_size(value, &w, &h, &number) < 0) {
			fprintf(stderr,
				"holod: %s: --%s: '%s' is not a size WxH with both sides in "
				"64..16384, optionally followed by @:N (N in 0..%d)\n",
				where, o->name, value, HOLOD_MAX_DISPLAY_NUMBER);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		cfg->virtual_width = w;
		cfg->virtual_height = h;
		cfg->virtual_number = number;
		return 0;
	}
	case OPT_DISPLAYS: {
		/* A second --display on the command line adds a display; any other source
		 * replaces what a lower one said. */
		bool append = cfg->display_cmdline && strcmp(where, "command line") == 0;
		char *list = append ? xasprintf("%s,%s", *(char **)base, value) : xstrdup(value);
		char **v;
		size_t n;
		if (split_displays(list, &v, &n, where, o->name) < 0) {
			free(list);
			return -EINVAL;
		}
		free_displays(cfg);
		cfg->displays = v;
		cfg->n_displays = n;
		free(*(char **)base);
		*(char **)base = list;
		if (strcmp(where, "command line") == 0)
			cfg->display_cmdline = true;
		return 0;
	}
	case OPT_LEVEL:
		if (log_level_from_string(value) < 0) {
			fprintf(stderr,
				"holod: %s: --%s: unknown level '%s' (error, warning, notice, "
				"info, debug)\n",
				where, o->name, value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_FLAG:
		*(bool *)base = true;
		return 0;
	case OPT_TEMPERATURE:
	case OPT_TOP_P: {
		bool t = o->type == OPT_TEMPERATURE;
		char *end;
		if (strcmp(value, "format") == 0) {
			*(double *)base = -1.0;
			return 0;
		}
		errno = 0;
		double v = strtod(value, &end);
		if (errno || end == value || *end ||
		    !(t ? v >= 0.0 && v <= IPC_MAX_TEMPERATURE : v > 0.0 && v <= 1.0)) {
			fprintf(stderr, "holod: %s: --%s: '%s' is not 'format' or a number %s\n", where,
				o->name, value, t ? "in 0..2" : "above 0 up to 1");
			return -EINVAL;
		}
		*(double *)base = v;
		return 0;
	}
	case OPT_SEED: {
		char *end;
		if (strcmp(value, "random") == 0) {
			*(long long *)base = -1;
			return 0;
		}
		errno = 0;
		unsigned long long v = strtoull(value, &end, 10);
		if (errno || end == value || *end || value[0] == '-' || v > IPC_MAX_SEED) {
			fprintf(stderr,
				"holod: %s: --%s: '%s' is not 'random' or an integer in "
				"0..%llu\n",
				where, o->name, value, (unsigned long long)IPC_MAX_SEED);
			return -EINVAL;
		}
		*(long long *)base = (long long)v;
		return 0;
	}
	case OPT_BACKEND:
		if (engine_backend_kind_parse(value, &cfg->engine_backend.kind) < 0) {
			fprintf(stderr, "holod: %s: --%s: unknown backend '%s' (auto, cpu, cuda)\n", where,
				o->name, value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_PRECISION:
		if (engine_precision_parse(value, &cfg->engine_backend.precision) < 0) {
			fprintf(stderr,
				"holod: %s: --%s: unknown precision '%s' (default, bf16, "
				"fp32)\n",
				where, o->name, value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_WEIGHTS:
		if (engine_weights_parse(value, &cfg->engine_backend.weights) < 0) {
			fprintf(stderr,
				"holod: %s: --%s: unknown weight format '%s' (default, bf16, "
				"q8, q4, fp8)\n",
				where, o->name, value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_SSM_STATE: {
		enum engine_precision t;
		if (engine_precision_parse(value, &t) < 0 || t == ENGINE_PRECISION_DEFAULT) {
			fprintf(stderr, "holod: %s: --%s: unknown SSM state type '%s' (fp32, bf16)\n", where,
				o->name, value);
			return -EINVAL;
		}
		cfg->engine_backend.ssm_state = t;
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	}
	case OPT_ONOFF:
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0) {
			fprintf(stderr, "holod: %s: --%s: expected on or off, not '%s'\n", where, o->name,
				value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_POLICY_FORMAT:
		if (!policy_format_find(value)) {
			fprintf(stderr, "holod: %s: --%s: unknown policy format '%s' (%s)\n", where, o->name,
				value, POLICY_FORMAT_NAMES);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_APPROVE:
		if (ipc_approve_from_string(value) < 0) {
			fprintf(stderr, "holod: %s: --%s: unknown mode '%s' (none, risky, all)\n", where,
				o->name, value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_TAKEOVER:
		if (ipc_takeover_from_string(value) < 0) {
			fprintf(stderr, "holod: %s: --%s: unknown mode '%s' (pause, ignore, cancel)\n", where,
				o->name, value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	case OPT_HISTORY:
		if (ipc_history_from_string(value) < 0) {
			fprintf(stderr, "holod: %s: --%s: unknown mode '%s' (rolling, persistent, window)\n",
				where, o->name, value);
			return -EINVAL;
		}
		free(*(char **)base);
		*(char **)base = xstrdup(value);
		return 0;
	}
	return -EINVAL;
}

static const struct option_def *find_option(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(options); i++)
		if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0)
			return &options[i];
	return NULL;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

/* ~ and $VAR (or ${VAR}) in a path of the config file, as a shell would expand them: the
 * file is read by holod, not by a shell, and `model = ~/.local/share/holod/models/X` should
 * mean what it says. A variable that is unset or empty is an error rather than an empty
 * string, which would silently point elsewhere. */
static int expand_path(const char *value, char **ret, const char *where, const char *option)
{
	size_t cap = strlen(value) + 1, n = 0;
	char *out = xmalloc(cap);
	const char *p = value;

#define PUT(src, len)                                                                                        \
	do {                                                                                                 \
		size_t _l = (len);                                                                           \
		if (n + _l + 1 > HOLOD_MAX_CONFIG_PATH)                                                      \
			goto too_long;                                                                       \
		if (n + _l + 1 > cap) {                                                                      \
			cap = n + _l + 1;                                                                    \
			out = xrealloc(out, cap);                                                            \
		}                                                                                            \
		memcpy(out + n, (src), _l);                                                                  \
		n += _l;                                                                                     \
	} while (0)

	if (p[0] == '~' && (p[1] == '/' || p[1] == '\0')) {
		const char *home = getenv("HOME");
		if (!home || !home[0]) {
			fprintf(stderr, "holod: %s: --%s: '~' needs $HOME, which is not set\n", where, option);
			goto fail;
		}
		PUT(home, strlen(home));
		p++;
	} else if (p[0] == '~') {
		fprintf(stderr, "holod: %s: --%s: '~user' is not expanded; write the path\n", where, option);
		goto fail;
	}
	while (*p) {
		if (*p != '$') {
			PUT(p, 1);
			p++;
			continue;
		}
		bool braced = p[1] == '{';
		const char *name = p + 1 + braced, *e = name;
		while ((*e >= 'A' && *e <= 'Z') || (*e >= 'a' && *e <= 'z') || *e == '_' ||
		       (e > name && *e >= '0' && *e <= '9'))
			e++;
		if (e == name || (braced && *e != '}')) {
			fprintf(stderr,
				"holod: %s: --%s: '$' must start a variable ($NAME or "
				"${NAME})\n",
				where, option);
			goto fail;
		}
		char var[128];
		if ((size_t)(e - name) >= sizeof(var)) {
			fprintf(stderr, "holod: %s: --%s: variable name longer than %zu bytes\n", where,
				option, sizeof(var) - 1);
			goto fail;
		}
		memcpy(var, name, (size_t)(e - name));
		var[e - name] = '\0';
		const char *v = getenv(var);
		if (!v || !v[0]) {
			fprintf(stderr, "holod: %s: --%s: $%s is not set\n", where, option, var);
			goto fail;
		}
		PUT(v, strlen(v));
		p = e + braced;
	}
#undef PUT
	out[n] = '\0';
	*ret = out;
	return 0;
too_long:
	fprintf(stderr, "holod: %s: --%s: the path is longer than %d bytes once expanded\n", where, option,
		HOLOD_MAX_CONFIG_PATH);
fail:
	free(out);
	return -EINVAL;
}

static int read_config_file(struct holod_config *cfg, const char *path, bool must_exist)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	int r = 0, lineno = 0;

	if (!f) {
		if (errno == ENOENT && !must_exist)
			return 0;
		fprintf(stderr, "holod: cannot read config file %s: %s\n", path, strerror(errno));
		return -EINVAL;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char where[PATH_MAX + 32];
		snprintf(where, sizeof(where), "%s:%d", path, lineno);
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "holod: %s: line longer than %zu bytes\n", where, sizeof(line) - 1);
			r = -EINVAL;
			break;
		}
		char *s = trim(line);
		if (!*s || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "holod: %s: expected 'key = value'\n", where);
			r = -EINVAL;
			break;
		}
		*eq = '\0';
		char *key = trim(s), *value = trim(eq + 1);
		const struct option_def *o = find_option(key, strlen(key));
		if (!o || !o->in_file) {
			fprintf(stderr, "holod: %s: unknown key '%s'\n", where, key);
			r = -EINVAL;
			break;
		}
		if (o->type == OPT_PATH) {
			char *expanded;
			if ((r = expand_path(value, &expanded, where, o->name)) < 0)
				break;
			r = set_value(cfg, o, expanded, where);
			free(expanded);
		} else {
			r = set_value(cfg, o, value, where);
		}
		if (r < 0)
			break;
	}
	fclose(f);
	return r;
}

/* Without --model: the one checkpoint under $XDG_DATA_HOME/holod/models/ (a directory with a
 * config.json), where README's "Getting the model" puts it. Several are not guessed between. */
static int find_default_model(struct holod_config *cfg)
{
	char *base = NULL;
	char *found = NULL;
	size_t n = 0;

	if (cfg->model_dir || path_xdg(PATH_DATA, "holod/models", &base) < 0)
		return 0;
	DIR *d = opendir(base);
	if (!d) {
		free(base);
		return 0;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *dir = path_join(base, e->d_name);
		char *config = path_join(dir, "config.json");
		if (access(config, R_OK) == 0) {
			n++;
			if (!found)
				found = dir;
			else
				free(dir);
		} else {
			free(dir);
		}
		free(config);
	}
	closedir(d);
	if (n > 1) {
		fprintf(stderr, "holod: %zu checkpoints in %s: choose one with --model DIR\n", n, base);
		free(found);
		free(base);
		return -EINVAL;
	}
	free(base);
	cfg->model_dir = found;
	return 0;
}

static int resolve_defaults(struct holod_config *cfg)
{
	int r;
	if (!cfg->socket_path) {
		/* ipc_socket_path() also reads $HOLOD_SOCKET; that was applied above already. */
		if ((r = ipc_socket_path(&cfg->socket_path)) < 0) {
			fprintf(stderr, "holod: no socket path: set $XDG_RUNTIME_DIR or --socket\n");
			return r;
		}
	}
	if (strlen(cfg->socket_path) > IPC_MAX_SOCKET_PATH) {
		fprintf(stderr, "holod: socket path longer than %d bytes: %s\n", IPC_MAX_SOCKET_PATH,
			cfg->socket_path);
		return -EINVAL;
	}
	if (cfg->context_tokens < cfg->step_tokens + OPT_MIN_PROMPT_ROOM) {
		fprintf(stderr,
			"holod: --context-tokens (%u) must exceed --step-tokens (%u) by at "
			"least %u tokens for the prompt\n",
			cfg->context_tokens, cfg->step_tokens, OPT_MIN_PROMPT_ROOM);
		return -EINVAL;
	}
	if (!cfg->virtual_size && cfg->n_virtual > 1) {
		fprintf(stderr,
			"holod: --displays %u starts virtual displays: give --virtual WxH "
			"too (or name existing displays with --display, repeated)\n",
			cfg->n_virtual);
		return -EINVAL;
	}
	if (cfg->virtual_size && cfg->virtual_number >= 0 &&
	    cfg->virtual_number + (int)cfg->n_virtual - 1 > HOLOD_MAX_DISPLAY_NUMBER) {
		fprintf(stderr, "holod: --virtual %s --displays %u: display numbers above %d\n",
			cfg->virtual_size, cfg->n_virtual, HOLOD_MAX_DISPLAY_NUMBER);
		return -EINVAL;
	}
	if (cfg->session && strcmp(cfg->session, "auto") != 0 && strcmp(cfg->session, "none") != 0 &&
	    !cfg->virtual_size) {
		fprintf(stderr, "holod: --session runs on the virtual displays holod starts: give "
				"--virtual WxH too\n");
		return -EINVAL;
	}
	/* The Xvfbs' names are known once they run: main.c sets the displays then. */
	if (cfg->virtual_size)
		free_displays(cfg);
	if ((r = find_default_model(cfg)) < 0)
		return r;
	/* A backend that cannot run the model is refused here, before anything starts, rather
	 * than replaced by the CPU. Without a model the option has nothing to check. */
	cfg->engine_backend.device = (int)cfg->device;
	if (cfg->model_dir) {
		char msg[256];
		if ((r = engine_backend_resolve(&cfg->engine_backend, msg, sizeof(msg))) < 0) {
			fprintf(stderr,
				"holod: --backend %s --precision %s --weights %s --ssm-state "
				"%s: %s\n",
				cfg->backend, cfg->precision, cfg->weights, cfg->ssm_state, msg);
			return r;
		}
	}
	/* no data directory: no published copy, holod's own holo-nano text */
	if (!cfg->published_dir)
		(void)path_xdg(PATH_DATA, "holod/published", &cfg->published_dir);
	if (!cfg->state_dir && (r = path_xdg(PATH_STATE, "holod", &cfg->state_dir)) < 0) {
		fprintf(stderr, "holod: no state directory: set $XDG_STATE_HOME, $HOME or "
				"--state-dir\n");
		return r;
	}
	return 0;
}

int options_parse(struct holod_config *cfg, int argc, char **argv)
{
	const char *cmdline_config = NULL;
	bool explicit_config = false;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	cfg->virtual_number = -1;
	for (size_t i = 0; i < ARRAY_SIZE(options); i++)
		if (options[i].def && (r = set_value(cfg, &options[i], options[i].def, "default")) < 0)
			return r;

	/* The config file's own path: command line, then environment, then XDG. */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			cmdline_config = argv[i + 1];
		else if (strncmp(argv[i], "--config=", 9) == 0)
			cmdline_config = argv[i] + 9;
	}
	if (cmdline_config) {
		cfg->config_path = xstrdup(cmdline_config);
		explicit_config = true;
	} else if (getenv("HOLOD_CONFIG") && getenv("HOLOD_CONFIG")[0]) {
		cfg->config_path = xstrdup(getenv("HOLOD_CONFIG"));
		explicit_config = true;
	} else if (path_xdg(PATH_CONFIG, "holod", &cfg->config_path) >= 0) {
		char *p = path_join(cfg->config_path, "holod.conf");
		free(cfg->config_path);
		cfg->config_path = p;
	}
	if (cfg->config_path && (r = read_config_file(cfg, cfg->config_path, explicit_config)) < 0)
		return r;

	for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
		const char *v = options[i].env ? getenv(options[i].env) : NULL;
		if (v && v[0] && options[i].offset != OFF(config_path)) {
			char where[64];
			snprintf(where, sizeof(where), "$%s", options[i].env);
			if ((r = set_value(cfg, &options[i], v, where)) < 0)
				return r;
		}
	}

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strncmp(arg, "--", 2) != 0) {
			fprintf(stderr, "holod: unexpected argument '%s' (see --help)\n", arg);
			return -EINVAL;
		}
		const char *name = arg + 2, *eq = strchr(name, '=');
		const struct option_def *o = find_option(name, eq ? (size_t)(eq - name) : strlen(name));
		if (!o) {
			fprintf(stderr, "holod: unknown option '%s' (see --help)\n", arg);
			return -EINVAL;
		}
		const char *value = NULL;
		if (o->type == OPT_FLAG) {
			if (eq) {
				fprintf(stderr, "holod: --%s takes no value\n", o->name);
				return -EINVAL;
			}
		} else if (eq) {
			value = eq + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			fprintf(stderr, "holod: --%s needs a value (%s)\n", o->name, o->metavar);
			return -EINVAL;
		}
		if ((r = set_value(cfg, o, value ? value : "", "command line")) < 0)
			return r;
	}
	if (cfg->help || cfg->version)
		return 0;
	return resolve_defaults(cfg);
}

void options_print_help(FILE *f, const char *argv0)
{
	fprintf(f,
		"Usage: %s [OPTIONS]\n\n"
		"holod drives an X11 desktop for scripted and model-driven tasks and serves\n"
		"its API (HTTP/1.1 + JSON, docs/api.md) on a Unix socket.\n\nOptions:\n",
		argv0);
	for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
		const struct option_def *o = &options[i];
		char left[64];
		snprintf(left, sizeof(left), "--%s%s%s", o->name, o->metavar ? " " : "",
			 o->metavar ? o->metavar : "");
		fprintf(f, "  %-24s %s", left, o->help);
		if (o->def)
			fprintf(f, " [%s]", o->def);
		if (o->env)
			fprintf(f, " (env $%s)", o->env);
		fputc('\n', f);
	}
	fprintf(f, "\nThe config file holds `key = value` lines with the option names above;\n"
		   "precedence: default < config file < environment < command line.\n");
}

/* The fewest significant digits that print v so that it reads back the same. */
static int shortest_digits(double v)
{
	char buf[40];
	int p;
	for (p = 1; p < 17; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return p;
}

void options_dump(FILE *f, const struct holod_config *cfg)
{
	fprintf(f, "# holod effective configuration (config file: %s)\n",
		cfg->config_path ? cfg->config_path : "none");
	for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
		const struct option_def *o = &options[i];
		const char *base = (const char *)cfg + o->offset;
		if (!o->in_file)
			continue;
		fprintf(f, "# %s\n", o->help);
		switch (o->type) {
		case OPT_UINT:
			fprintf(f, "%s = %u\n", o->name, *(const unsigned *)base);
			break;
		case OPT_TEMPERATURE:
		case OPT_TOP_P:
			if (*(const double *)base < 0)
				fprintf(f, "%s = format\n", o->name);
			else
				fprintf(f, "%s = %.*g\n", o->name, shortest_digits(*(const double *)base),
					*(const double *)base);
			break;
		case OPT_SEED:
			if (*(const long long *)base < 0)
				fprintf(f, "%s = random\n", o->name);
			else
				fprintf(f, "%s = %lld\n", o->name, *(const long long *)base);
			break;
		case OPT_FLAG:
			break;
		default: {
			const char *v = *(char *const *)base;
			if (v)
				fprintf(f, "%s = %s\n", o->name, v);
			else
				fprintf(f, "# %s = (unset)\n", o->name);
		}
		}
	}
}

void options_finish(struct holod_config *cfg)
{
	free_displays(cfg);
	for (size_t i = 0; i < ARRAY_SIZE(options); i++)
		if (options[i].type != OPT_UINT && options[i].type != OPT_FLAG &&
		    options[i].type != OPT_TEMPERATURE && options[i].type != OPT_TOP_P &&
		    options[i].type != OPT_SEED)
			free(*(char **)((char *)cfg + options[i].offset));
	memset(cfg, 0, sizeof(*cfg));
}
