/* ipc: the protocol shared by holod and its clients (holoctl, tests).
 *
 * The one public header of the ipc module. It defines:
 *   - the API version and URL prefix, the default socket path;
 *   - named limits on everything a client sends (the daemon enforces them, clients may check early);
 *   - error codes carried in `{"error": {"code": ..., "message": ...}}` bodies;
 *   - task statuses;
 *   - the action vocabulary of agent.md 1.1 as a C struct, with JSON parse + validate + serialize.
 *
 * No JSON library type appears here: parsing takes bytes, serializing returns a malloc'd string.
 * Key names are validated with the keys module's pure key table (no display needed).
 *
 * Errors: functions return >= 0 or a negative errno; parse functions additionally write a message
 * naming the offending field into `errbuf`, e.g. "script[2].keys[1]: unknown key name 'ctr'".
 * Everything here is thread-safe (no global state).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- protocol ----------------------------------------------------------------------------- */

#define IPC_API_VERSION 1
#define IPC_API_PREFIX "/v1"

/* Environment variable that overrides the socket path (holod and holoctl both honour it). */
#define IPC_SOCKET_ENV "HOLOD_SOCKET"

/* The default socket path: $HOLOD_SOCKET if set and non-empty, else
 * $XDG_RUNTIME_DIR/holod/holod.sock (or /run/user/<uid>/holod/holod.sock).
 * Writes a malloc'd string to *ret. -ENXIO when no runtime directory can be found,
 * -ENAMETOOLONG when the path does not fit a sockaddr_un. */
int ipc_socket_path(char **ret);

/* ---- named limits ------------------------------------------------------------------------- */

#define IPC_MAX_SOCKET_PATH 107		 /* sizeof(sun_path) - 1 */
#define IPC_MAX_BODY_BYTES (1024 * 1024) /* request body; larger: 413 */
#define IPC_MAX_HEADER_BYTES (8 * 1024)	 /* sum of request header names+values; larger: 431 */
#define IPC_MAX_SCRIPT_ACTIONS 1000	 /* entries in "script"; more: 413 */
#define IPC_MAX_INSTRUCTION_BYTES (8 * 1024)
#define IPC_MAX_ELEMENT_BYTES 512	  /* the "element" description of pointer actions */
#define IPC_MAX_CONTENT_BYTES (64 * 1024) /* write.content and answer.content */
#define IPC_MAX_QUESTION_BYTES 4096	  /* ask_user.question */
#define IPC_MAX_REPLY_BYTES 4096	  /* POST /v1/tasks/ID/reply's "text" */
#define IPC_MAX_HOTKEY_KEYS 5		  /* hotkey.keys: 1..5 names (agent.md 1.1) */
#define IPC_MAX_KEY_NAME_BYTES 32
/* The widest ranges of the formats' schemas (holo-nano: repeat_count 1..20, scroll_size 1..100;
 * holo3's grammar keeps POLICY_HOLO3_MAX_*). */
#define IPC_MAX_HOTKEY_REPEAT 20
#define IPC_MAX_SCROLL_SIZE 100
#define IPC_DEFAULT_SCROLL_SIZE 5
#define IPC_MAX_WAIT_MS 30000		   /* wait.duration <= 30 s */
#define IPC_MODEL_COORD_MAX 1000	   /* model space is 0..1000 inclusive */
#define IPC_MAX_PIXEL_COORD 32767	   /* X11 coordinates are 16-bit */
#define IPC_MAX_TASK_STEPS 10000	   /* ceiling for "max_steps" */
#define IPC_MAX_TASK_SECONDS (24 * 3600)   /* ceiling for "max_seconds" */
#define IPC_MAX_SETTLE_MS 10000		   /* ceiling for "settle_ms" */
#define IPC_MAX_LIST_LIMIT 500		   /* GET /v1/tasks?limit= */
#define IPC_MAX_PRUNE_AGE_S (3650 * 86400) /* POST /v1/prune?older_than= (ten years) */
#define IPC_MAX_PRUNE_LISTED 1000	   /* tasks a prune's dry_run lists (newest first) */
#define IPC_DEFAULT_LIST_LIMIT 50
#define IPC_MAX_HISTORY_WINDOW 64     /* "window": observations kept with their image */
#define IPC_MAX_TILES 48	      /* "max_tiles": image tile budget per observation */
#define IPC_MAX_TEMPERATURE 2.0	      /* "temperature": 0 (greedy)..2 */
#define IPC_MAX_SEED 4294967295ull    /* "seed": 0..2^32-1 */
#define IPC_MAX_THINKING_TOKENS 65536 /* "thinking_tokens": a step's think block */
#define IPC_MAX_STUCK_STEPS 1000      /* "stuck_warn", "stuck_stop": 0 (off)..1000 */
#define IPC_MAX_DISPLAY_NAME_BYTES 64 /* "display": an X display name such as ":1" */
#define IPC_MAX_HOLD_KEYS 3	      /* hold_and_tap_key.hold_keys: 1..3 names */
#define IPC_MAX_TAP_KEYS 5	      /* hold_and_tap_key.tap_keys: 1..5 names */
#define IPC_MAX_PLAN_GOALS 20	      /* update_plan.goals: 1..20 */
#define IPC_MAX_GOAL_TITLE_BYTES 512  /* update_plan.goals[i].title */
/* Script-only actions (launch, wait_for, activate, grounded targets). */
#define IPC_MAX_LAUNCH_ARGS 64		 /* launch.command: program + arguments */
#define IPC_MAX_LAUNCH_ARG_BYTES 4096	 /* one of them */
#define IPC_MAX_MATCH_BYTES 512		 /* one title/class/instance regex */
#define IPC_MAX_TARGET_BYTES 512	 /* "target" of a grounded click */
#define IPC_MAX_WAIT_FOR_MS (600 * 1000) /* "timeout" of launch, wait_for, activate */
#define IPC_DEFAULT_WAIT_FOR_MS (10 * 1000)
#define IPC_MIN_STABLE_MS 50 /* wait_for.screen_stable.ms */
#define IPC_MAX_STABLE_MS 60000

/* ---- error codes (the "code" member of an error body) ------------------------------------- */

#define IPC_ERR_BAD_REQUEST "bad_request"		/* 400: malformed JSON, wrong field, ... */
#define IPC_ERR_FORBIDDEN "forbidden"			/* 403: peer uid is not holod's */
#define IPC_ERR_NOT_FOUND "not_found"			/* 404: unknown route or id */
#define IPC_ERR_METHOD_NOT_ALLOWED "method_not_allowed" /* 405 */
#define IPC_ERR_CONFLICT "conflict"			/* 409: e.g. cancelling a finished task */
#define IPC_ERR_PAYLOAD_TOO_LARGE "payload_too_large"	/* 413: body or list over its limit */
#define IPC_ERR_HEADERS_TOO_LARGE "headers_too_large"	/* 431 */
#define IPC_ERR_INTERNAL "internal"			/* 500 */
#define IPC_ERR_NO_MODEL "no_model"			/* 503: instruction task without a model */
#define IPC_ERR_NO_DISPLAY "no_display"			/* 503: the X display cannot be opened */
#define IPC_ERR_SHUTTING_DOWN "shutting_down"		/* 503 */
#define IPC_ERR_TOO_MANY "too_many_connections"		/* 503: connection or event stream limit */

/* ---- task status -------------------------------------------------------------------------- */

enum ipc_task_status {
	IPC_TASK_QUEUED,
	IPC_TASK_RUNNING,
	IPC_TASK_SUCCEEDED,
	IPC_TASK_FAILED,
	IPC_TASK_CANCELLED,
	IPC_TASK_INTERRUPTED, /* holod stopped or crashed while the task was queued or running */
	IPC_TASK_STUCK,	      /* an instruction task whose steps stopped changing anything
			       * (docs/policy.md, "Stuck steps") */
};

/* "queued", "running", ... ; NULL for an out-of-range value. */
const char *ipc_task_status_to_string(enum ipc_task_status s);
/* Returns the status or -EINVAL. */
int ipc_task_status_from_string(const char *s);
bool ipc_task_status_is_final(enum ipc_task_status s);

/* ---- actions (agent.md 1.1) ----------------------------------------------------------------- */

enum ipc_tool {
	IPC_TOOL_CLICK,
	IPC_TOOL_DOUBLE_CLICK,
	IPC_TOOL_TRIPLE_CLICK,
	IPC_TOOL_MOVE,
	IPC_TOOL_DRAG,
	IPC_TOOL_SCROLL,
	IPC_TOOL_WRITE,
	IPC_TOOL_HOTKEY,
	IPC_TOOL_KEY_DOWN,
	IPC_TOOL_KEY_UP,
	IPC_TOOL_WAIT,
	IPC_TOOL_ANSWER,
	IPC_TOOL_ASK_USER, /* a question to the user: the task waits for `holoctl reply`, whose
			    * text is the step's result (JSON "question", held in `content`) */
	/* Script-only tools: never in the model's vocabulary (policy stops at
	 * IPC_TOOL_MODEL_COUNT). */
	IPC_TOOL_LAUNCH,
	IPC_TOOL_WAIT_FOR,
	IPC_TOOL_ACTIVATE,
	/* The holo-nano harness's actions (docs/policy.md): in scripts, `holoctl do` and the
	 * holo-nano format's vocabulary, not in holo3's (policy stops at IPC_TOOL_MODEL_COUNT). */
	IPC_TOOL_HOLD_AND_TAP_KEY, /* hold_keys pressed in order, tap_keys tapped, hold released */
	IPC_TOOL_DRAG_TO,	   /* drag from the pointer's current position to x/y */
	IPC_TOOL_UPDATE_PLAN,	   /* the agent's plan: journaled, nothing done on the screen */
	IPC_TOOL_COUNT_,
};

/* The tools of the model's vocabulary (agent.md 1.1) are 0..IPC_TOOL_MODEL_COUNT-1. */
#define IPC_TOOL_MODEL_COUNT (IPC_TOOL_ASK_USER + 1)

/* "click", ..., NULL for an out-of-range value. */
const char *ipc_tool_to_string(enum ipc_tool t);
/* Returns the tool or -EINVAL. */
int ipc_tool_from_string(const char *s);
/* True for tools that take x/y (click, double_click, triple_click, move, drag, scroll,
 * drag_to). */
bool ipc_tool_has_point(enum ipc_tool t);

/* The policy format an instruction task's prompt and steps follow (docs/policy.md). */
enum ipc_policy_format {
	IPC_POLICY_FORMAT_DEFAULT,   /* the daemon's default (--policy-format) */
	IPC_POLICY_FORMAT_HOLO3,     /* "holo3" */
	IPC_POLICY_FORMAT_HOLO_NANO, /* "holo-nano" */
};

/* "holo3", "holo-nano"; NULL for IPC_POLICY_FORMAT_DEFAULT or an out-of-range value. */
const char *ipc_policy_format_to_string(enum ipc_policy_format f);
/* Returns the format or -EINVAL. */
int ipc_policy_format_from_string(const char *s);

/* ---- the action-tool table ------------------------------------------------------------------ */

/* One table (ipc/tools.c) says, for every tool: its JSON name, the members the action parser
 * accepts, how `holoctl do` reads it from a command line, and how each policy format shows it to
 * a model (the name the model writes, its arguments in the format's order with their ranges and
 * defaults, what it does). The parser, the policy formats (the prompt's tool text, the step
 * grammar, the JSON Schema), holoctl do and holoctl mcp (its action tools' names, descriptions
 * and input schemas) read it, so a new tool touches ipc/ and the executor only. */

/* The model's limits of the formats' step layouts, narrower than the parser's (docs/policy.md):
 * strings count the bytes between the quotes as written, escapes included. */
#define IPC_MODEL_MAX_CONTENT_BYTES 4096  /* write.content, answer.content */
#define IPC_MODEL_MAX_QUESTION_BYTES 1024 /* ask_user.question */
#define IPC_HOLO3_MAX_SCROLL_SIZE 50	  /* holo3's ranges */
#define IPC_HOLO3_MAX_REPEAT_COUNT 10
#define IPC_NANO_MAX_SCROLL_SIZE 100 /* holo-nano's published ranges and defaults */
#define IPC_NANO_DEFAULT_SCROLL_SIZE 10
#define IPC_NANO_MAX_REPEAT_COUNT 20

/* What one argument of a model's tool call holds. */
enum ipc_arg_type {
	IPC_ARG_STRING, /* at most `max` bytes as written */
	IPC_ARG_INT,	/* lo..hi; `def` when optional and absent */
	IPC_ARG_BOOL,	/* default false */
	IPC_ARG_BUTTON, /* ipc_button_to_string's spellings, default left */
	IPC_ARG_DIRECTION,
	IPC_ARG_KEYS, /* a list of 1..hi key names (hi 0: IPC_MAX_HOTKEY_KEYS) */
	IPC_ARG_KEY,
	IPC_ARG_GOALS, /* update_plan's 1..IPC_MAX_PLAN_GOALS {"title": ..., "status": ...} */
};

struct ipc_tool_arg {
	const char *name;
	enum ipc_arg_type type;
	bool required;
	int lo, hi;   /* INT; KEYS: hi */
	int def;      /* INT, optional: the default the format states */
	uint32_t max; /* STRING */
};

#define IPC_MAX_TOOL_ARGS 6

/* A tool's arguments in a format's canonical order (its grammar and serializer follow it). */
struct ipc_tool_layout {
	struct ipc_tool_arg args[IPC_MAX_TOOL_ARGS];
	size_t n_args;
};

/* A tool as a policy format shows it to the model. */
struct ipc_model_tool {
	const char *name; /* what the model writes as tool_name */
	enum ipc_tool tool;
	const char *help; /* what it does, for the model's prompt */
	struct ipc_tool_layout layout;
};

/* The i-th tool of a format's vocabulary in the order its prompt and schema list them (holo3:
 * the enum's order, IPC_TOOL_MODEL_COUNT tools; holo-nano: the published union's); NULL past
 * the end or for IPC_POLICY_FORMAT_DEFAULT. */
const struct ipc_model_tool *ipc_model_tool(enum ipc_policy_format f, size_t i);

/* How `holoctl do` reads a tool from its command line. */
struct ipc_tool_cli {
	const char *args; /* the usage of its arguments, e.g. "X Y up|down|left|right [NOTCHES]" */
	int min_args, max_args;
	/* The members its positional arguments fill, in order, space-separated; a last member
	 * ending in '*' takes every argument left. NULL: the tool reads them its own way
	 * (wait_for's condition). */
	const char *fill;
	const char *help; /* its lines in `holoctl do --help` ("Actions:") */
};

/* How a client that calls tools (holoctl mcp's tools/list and tools/call) offers the tool: its
 * JSON Schema, with the parser's names and ranges (pixel coordinates, IPC_MAX_* limits), not a
 * format's model ranges. The task's options (coords, dry_run, settle_ms, display,
 * require_focus) are the client's to add. */
struct ipc_tool_client {
	const char *title;	 /* "Click"; NULL: not offered (answer, ask_user, update_plan: the
				  * model's own) */
	const char *description; /* what it does, for the client's model */
	const char *properties;	 /* JSON text of the schema's "properties" object: each member a
				  * member of `fields` */
	const char *required;	 /* JSON text of the schema's "required" array, or NULL */
	bool read_only;		 /* changes nothing on the screen (wait_for) */
};

struct ipc_tool_info {
	const char *name;   /* tool_name in JSON, as ipc_tool_to_string() */
	const char *fields; /* the members the action parser accepts besides tool_name, space-separated */
	struct ipc_tool_cli cli;
	struct ipc_tool_client client;
};

/* The table's entry of a tool; NULL out of range. */
const struct ipc_tool_info *ipc_tool_info(enum ipc_tool t);
/* Whether `member` is one of the members `t` accepts (tool_name included). */
bool ipc_tool_has_field(enum ipc_tool t, const char *member);

/* The candidate closest to `word` by edit distance (insert, delete, replace or swap two
 * neighbours, case ignored) when it is likely what was meant: at most 2 edits and fewer than
 * half of word's length; else NULL. `name(i, data)` returns the candidates, NULL at the end. */
const char *ipc_did_you_mean(const char *word, const char *(*name)(size_t i, void *data), void *data);

/* How x/y (and x2/y2) are to be read. */
enum ipc_coords {
	IPC_COORDS_PIXELS, /* root-window pixels, 0..IPC_MAX_PIXEL_COORD */
	IPC_COORDS_MODEL,  /* 0..1000 over the primary monitor (agent.md 3 mapping) */
};

const char *ipc_coords_to_string(enum ipc_coords c);
int ipc_coords_from_string(const char *s);

enum ipc_button {
	IPC_BUTTON_LEFT,
	IPC_BUTTON_RIGHT,
	IPC_BUTTON_MIDDLE,
};

enum ipc_direction {
	IPC_DIRECTION_UP,
	IPC_DIRECTION_DOWN,
	IPC_DIRECTION_LEFT,
	IPC_DIRECTION_RIGHT,
};

/* An update_plan goal's status. */
enum ipc_goal_status {
	IPC_GOAL_TODO,
	IPC_GOAL_RUNNING,
	IPC_GOAL_DONE,
	IPC_GOAL_FAILED,
};

/* "todo", "running", "done", "failed"; NULL out of range. Returns the status or -EINVAL. */
const char *ipc_goal_status_to_string(enum ipc_goal_status s);
int ipc_goal_status_from_string(const char *s);

/* One goal of update_plan: {"title": "Open the settings", "status": "running"}. */
struct ipc_goal {
	char *title; /* 0..IPC_MAX_GOAL_TITLE_BYTES bytes */
	enum ipc_goal_status status;
};

/* The JSON spellings ("left", "right", "middle"; "up", "down", "left", "right"), NULL for an
 * out-of-range value (so a loop from 0 until NULL walks every value in enum order). */
const char *ipc_button_to_string(enum ipc_button b);
const char *ipc_direction_to_string(enum ipc_direction d);
/* The value of a spelling, or -EINVAL. */
int ipc_button_from_string(const char *s);
int ipc_direction_from_string(const char *s);

/* Which windows a launch, wait_for or activate step means: each member present is a PCRE2
 * regex (UTF-8, unanchored: "Save" matches "Save As") that must match the window's title
 * (_NET_WM_NAME, else WM_NAME), WM_CLASS class or WM_CLASS instance; at least one is present. */
struct ipc_window_match {
	char *title;
	char *class_name;
	char *instance;
};

/* The condition of a wait_for step (one per step). */
enum ipc_wait_kind {
	IPC_WAIT_WINDOW,	 /* a matching window is mapped */
	IPC_WAIT_WINDOW_GONE,	 /* no matching window is mapped */
	IPC_WAIT_FOCUS,		 /* a matching window has the keyboard focus */
	IPC_WAIT_SCREEN_STABLE,	 /* no pixel changed for stable_ms */
	IPC_WAIT_REGION_CHANGED, /* region differs from the step's before-screenshot */
};

/* "window", "window_gone", "focus", "screen_stable", "region_changed"; NULL out of range. */
const char *ipc_wait_kind_to_string(enum ipc_wait_kind k);

/* One tool call. Only the members that belong to `tool` are meaningful; the others are zero/NULL.
 * Strings are owned by the action (freed by ipc_action_finish). JSON form, flat as in agent.md:
 *   {"tool_name": "click", "element": "OK button", "x": 10, "y": 20, "button": "left"}
 * "element" is optional in scripts (a model always sends it). */
struct ipc_action {
	enum ipc_tool tool;
	char *element;			 /* pointer tools, may be NULL */
	int x, y;			 /* pointer tools */
	int x2, y2;			 /* drag */
	enum ipc_button button;		 /* click (default left) */
	enum ipc_direction direction;	 /* scroll */
	int scroll_size;		 /* scroll: 1..IPC_MAX_SCROLL_SIZE, default 5 */
	char *content;			 /* write, answer; ask_user's "question" */
	bool press_enter;		 /* write, default false */
	bool overwrite;			 /* write, default false (true: ctrl+a first) */
	char *keys[IPC_MAX_HOTKEY_KEYS]; /* hotkey: pressed together, released in reverse */
	size_t n_keys;
	int repeat_count; /* hotkey: 1..IPC_MAX_HOTKEY_REPEAT, default 1 */
	char *key;	  /* key_down, key_up */
	/* hold_and_tap_key: hold_keys pressed in order, each tap key pressed and released in
	 * order, then the hold keys released in reverse. */
	char *hold_keys[IPC_MAX_HOLD_KEYS];
	size_t n_hold_keys;
	char *tap_keys[IPC_MAX_TAP_KEYS];
	size_t n_tap_keys;
	struct ipc_goal *goals; /* update_plan: 1..IPC_MAX_PLAN_GOALS */
	size_t n_goals;
	uint32_t duration_ms; /* wait: JSON "duration" in seconds (may be fractional),
				 0 < duration <= 30 */
	/* Grounded pointer actions (click, double_click, move, drag): the model locates `target`
	 * (and, for drag, `target2`) on the screen instead of x/y (x2/y2), which are then 0. */
	char *target;
	char *target2;
	/* launch: "command", 1..IPC_MAX_LAUNCH_ARGS strings, program first (searched in PATH). */
	char **argv;
	size_t argc;
	/* wait_for (window, window_gone, focus), activate, launch ("wait_window", optional). */
	bool has_match;
	struct ipc_window_match match;
	enum ipc_wait_kind wait_kind; /* wait_for */
	uint32_t stable_ms;	      /* wait_for.screen_stable.ms */
	int rx, ry, rw, rh;	      /* wait_for.region_changed, root pixels */
	uint32_t timeout_ms;	      /* launch, wait_for, activate: JSON "timeout" in seconds */
};

/* A window match compiled for testing (PCRE2); immutable, may be shared between threads. */
struct ipc_window_matcher;
/* NULL + errno: EINVAL with "title: invalid regex at offset N: <why>" in errbuf for a pattern
 * PCRE2 refuses (ipc_action_parse already refused such a request), ENOMEM. */
struct ipc_window_matcher *ipc_window_matcher_create(const struct ipc_window_match *m, char *errbuf,
						     size_t errlen);
void ipc_window_matcher_destroy(struct ipc_window_matcher *mt);
/* True when every present regex matches its property (NULL properties count as ""). */
bool ipc_window_matcher_test(const struct ipc_window_matcher *mt, const char *title, const char *class_name,
			     const char *instance);
/* The match as a user reads it, e.g. `title ~ "Save", class ~ "Mousepad"`, into buf. */
const char *ipc_window_match_describe(const struct ipc_window_match *m, char *buf, size_t size);

/* True when the action has a "target" (or "target2"): it needs a model to run. */
bool ipc_action_is_grounded(const struct ipc_action *a);

/* Frees the strings of `a` and zeroes it. Accepts a zeroed action. */
void ipc_action_finish(struct ipc_action *a);

/* Parses one action object from JSON text. `coords` decides the range of x/y. On error returns
 * -EINVAL (or -E2BIG for an over-limit string) and writes a message starting with the field
 * path, e.g. "keys[1]: unknown key name 'ctr'". *ret is written only on success. */
int ipc_action_parse(const char *json, size_t len, enum ipc_coords coords, struct ipc_action *ret,
		     char *errbuf, size_t errlen);

/* The action as a compact JSON object (malloc'd, NUL-terminated), defaults written out.
 * Round-trips through ipc_action_parse. NULL + errno on failure. */
char *ipc_action_to_json(const struct ipc_action *a);

/* ---- requests ------------------------------------------------------------------------------- */

enum ipc_task_kind {
	IPC_TASK_KIND_INSTRUCTION,
	IPC_TASK_KIND_SCRIPT,
};

const char *ipc_task_kind_to_string(enum ipc_task_kind k);

/* What physical input on a task's display does while the task runs (issue 32): a key, a button
 * or a pointer motion from a device that is not XTest. */
enum ipc_takeover {
	IPC_TAKEOVER_DEFAULT, /* the daemon's --takeover */
	IPC_TAKEOVER_PAUSE,   /* the task pauses at once (holoctl resume hands it back) */
	IPC_TAKEOVER_IGNORE,  /* nothing */
	IPC_TAKEOVER_CANCEL,  /* the task is cancelled */
};

/* "pause", "ignore", "cancel"; NULL for IPC_TAKEOVER_DEFAULT or an out-of-range value. */
const char *ipc_takeover_to_string(enum ipc_takeover t);
/* The value, or -EINVAL. */
int ipc_takeover_from_string(const char *s);

/* How an instruction task keeps its conversation (agent.md 2). */
enum ipc_history {
	IPC_HISTORY_DEFAULT,	/* the daemon's default */
	IPC_HISTORY_PERSISTENT, /* append-only session, only new tokens are prefilled */
	IPC_HISTORY_WINDOW,	/* every step: prefix snapshot + the last `window` observations */
	IPC_HISTORY_ROLLING,	/* window's context from a snapshot of the prefix and the evicted
				 * observations: each step prefills one evicted turn + the window */
};

/* "persistent", "window", "rolling"; NULL for IPC_HISTORY_DEFAULT or an out-of-range value. */
const char *ipc_history_to_string(enum ipc_history h);
/* Returns the mode or -EINVAL. */
int ipc_history_from_string(const char *s);

/* Whether an instruction task's steps open a think block (docs/policy.md). */
enum ipc_thinking {
	IPC_THINKING_DEFAULT, /* the daemon's default */
	IPC_THINKING_ON,
	IPC_THINKING_OFF,
};

/* Which of a task's actions wait for the user's approval before they run (docs/api.md, "The
 * user in the loop"). */
enum ipc_approve {
	IPC_APPROVE_DEFAULT, /* the daemon's default (--approve) */
	IPC_APPROVE_NONE,    /* "none": nothing is held */
	IPC_APPROVE_RISKY,   /* "risky": what the approval rules name */
	IPC_APPROVE_ALL,     /* "all": every action that acts on the desktop */
};

/* "none", "risky", "all"; NULL for IPC_APPROVE_DEFAULT or an out-of-range value. */
const char *ipc_approve_to_string(enum ipc_approve a);
/* Returns the mode or -EINVAL. */
int ipc_approve_from_string(const char *s);

/* An on/off option a task may leave to the daemon's default. */
enum ipc_switch {
	IPC_SWITCH_DEFAULT,
	IPC_SWITCH_ON,
	IPC_SWITCH_OFF,
};

/* Budgets and options of a task; 0 means "use the daemon's default" for the integers. */
struct ipc_task_options {
	uint32_t max_steps;	  /* 1..IPC_MAX_TASK_STEPS */
	uint32_t max_seconds;	  /* 1..IPC_MAX_TASK_SECONDS */
	int32_t settle_ms;	  /* -1: daemon default; 0..IPC_MAX_SETTLE_MS */
	bool dry_run;		  /* journal the steps, inject nothing */
	enum ipc_approve approve; /* what waits for the user's approval */
	uint32_t ask_timeout;	  /* an ask_user step's wait for the reply, 1..IPC_MAX_TASK_SECONDS s */
	char *display;		  /* the display to run on (one holod drives); NULL: the first free */
	/* Instruction tasks only: */
	enum ipc_history history;
	enum ipc_policy_format policy_format;
	uint32_t window;    /* 1..IPC_MAX_HISTORY_WINDOW */
	uint32_t max_tiles; /* 1..IPC_MAX_TILES */
	/* Sampling, each set (has_*) or left to the daemon's default, then the format's. */
	bool has_temperature, has_top_p, has_seed;
	double temperature; /* 0..IPC_MAX_TEMPERATURE; 0: greedy */
	double top_p;	    /* (0, 1]; 1: off */
	uint32_t seed;	    /* 0..IPC_MAX_SEED */
	enum ipc_thinking thinking;
	uint32_t thinking_tokens; /* 1..IPC_MAX_THINKING_TOKENS */
	/* grammar-forced tokens appended in one forward (docs/policy.md, jump-forward) */
	enum ipc_switch jump_forward;
	/* Stuck steps (docs/policy.md): after this many steps in a row that left the screen as
	 * it was or repeated one action, the model is told (warn) / the task ends `stuck` (stop).
	 * -1: the daemon's default; 0: off; 1..IPC_MAX_STUCK_STEPS. */
	int32_t stuck_warn, stuck_stop;
	enum ipc_takeover takeover; /* both kinds */
	/* Scripts only: a write or hotkey while no window has the keyboard focus fails the step
	 * (false: it runs and its result says so, ending in "(" IPC_NO_FOCUS_WARNING ")"). */
	bool require_focus;
};

/* What the result of a write, hotkey or hold_and_tap_key that ran while no window had the
 * keyboard focus says, in parentheses after what was done (docs/api.md, "Keyboard focus"). */
#define IPC_NO_FOCUS_WARNING "no window had the keyboard focus: the keys went to the root window"

/* POST /v1/tasks body. Exactly one of "instruction" or "script":
 *   {"instruction": "open the settings", "history": "rolling"|"persistent"|"window", "window": K,
 *    "policy_format": "holo3"|"holo-nano",
 *    "max_tiles": N, "temperature": T, "top_p": P, "seed": S, "thinking": bool,
 *    "thinking_tokens": N, "jump_forward": bool, "stuck_warn": N, "stuck_stop": N,
 *    "max_steps": N, "max_seconds": N, "settle_ms": N, "dry_run": bool, "display": ":1",
 *    "approve": "none"|"risky"|"all", "ask_timeout": S}
 *   {"script": [action, ...], "coords": "pixels"|"model" (default "pixels"),
 *    "max_steps": N, "max_seconds": N, "settle_ms": N, "dry_run": bool, "replay_of": ID,
 *    "display": ":1", "check": {"threshold": T, "steps": [N, ...]},
 *    "require_focus": bool, "approve": "none"|"risky"|"all", "ask_timeout": S}
 * "check" (only with "replay_of"): before action i, the screen is compared with the "before"
 * screenshot of step steps[i] of the replayed task, and the task fails at the first action
 * whose screen has a fraction of differing pixels above T (0..1).
 * Unknown members are rejected. */
struct ipc_task_request {
	enum ipc_task_kind kind;
	char *instruction;	    /* kind == INSTRUCTION */
	enum ipc_coords coords;	    /* kind == SCRIPT */
	struct ipc_action *actions; /* kind == SCRIPT, n_actions entries, 1..IPC_MAX_SCRIPT_ACTIONS */
	size_t n_actions;
	int64_t replay_of;	/* kind == SCRIPT: the task it replays (holoctl replay); 0 */
	uint32_t *check_steps;	/* with replay_of: n_actions recorded step indices, or NULL */
	double check_threshold; /* 0..1: fraction of pixels that may differ */
	struct ipc_task_options options;
};

/* Parses and validates a task request. Errors: -EINVAL (bad JSON, type, value, unknown member;
 * the message names the field, e.g. "script[2].keys[1]: unknown key name 'ctr'"), -E2BIG (a list
 * or string over its named limit: the daemon answers 413). On success *ret is a new request. */
int ipc_task_request_parse(const char *json, size_t len, struct ipc_task_request **ret, char *errbuf,
			   size_t errlen);
/* The request as compact JSON (malloc'd); round-trips through ipc_task_request_parse. */
char *ipc_task_request_to_json(const struct ipc_task_request *req);
void ipc_task_request_destroy(struct ipc_task_request *req);

/* POST /v1/actions body: one action to run now, on the display queue, journaled as a one-step
 * script task:
 *   {"action": {action}, "coords": "pixels"|"model", "dry_run": bool, "settle_ms": N,
 *    "display": ":1", "require_focus": bool}
 * Parsed into a script request with n_actions == 1. Same errors as ipc_task_request_parse. */
int ipc_action_request_parse(const char *json, size_t len, struct ipc_task_request **ret, char *errbuf,
			     size_t errlen);
/* The body of POST /v1/tasks/ID/reply ({"text": "..."}, required, non-empty) and of
 * .../deny ({"reason": "..."}, optional, and so is the body): `member` holds a string of at most
 * IPC_MAX_REPLY_BYTES bytes without NUL (jansson checks the UTF-8); no other member. *ret: the
 * text (malloc'd), NULL when absent. -EINVAL / -E2BIG with the field named in errbuf. */
int ipc_answer_parse(const char *json, size_t len, const char *member, bool required, char **ret,
		     char *errbuf, size_t errlen);
/* Builds that body for one action (malloc'd JSON). */
char *ipc_action_request_to_json(const struct ipc_action *a, enum ipc_coords coords, bool dry_run);

/* The SHA-256 of `data` as 64 lowercase hex digits and a NUL in ret: the digest of a journaled
 * screenshot, sent in the X-Holod-SHA256 header of GET .../screenshot. */
void ipc_sha256_hex(const void *data, size_t size, char ret[65]);
