/* holoctl internals shared by its command files (not a module header: only cli/ and
 * tests/cli/ include it, so jansson's json_t may appear here).
 *
 * Layout, after tmux: holoctl.c parses the global options and dispatches through the command table
 * (commands.c); each command group lives in its own cmd-*.c file; api.c is the one place that talks
 * HTTP and turns the daemon's answers and errors into output and exit statuses; the pieces a test
 * can check without a daemon (argument -> action JSON, script reading, tables, formatting) have
 * their own functions declared here. Everything runs on the main thread.
 */
#pragma once

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses (listed in `holoctl --help`). */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_ERROR = 1,	       /* holod unreachable, or it answered with an error */
	CLI_EXIT_USAGE = 2,	       /* bad arguments or a bad script file: nothing was sent */
	CLI_EXIT_TASK_FAILED = 3,      /* run --follow: the task failed (a step, a budget) */
	CLI_EXIT_TASK_CANCELLED = 4,   /* ... cancelled (holoctl cancel, the kill switch) */
	CLI_EXIT_TASK_INTERRUPTED = 5, /* ... interrupted (holod stopped or crashed mid-task) */
	CLI_EXIT_TASK_UNKNOWN = 6,     /* ... the stream ended without a final status */
	CLI_EXIT_TASK_STUCK = 7,       /* ... stuck: its steps stopped changing anything */
	CLI_EXIT_DETACHED = 130,       /* ... a second Ctrl-C stopped following; the task runs on */
};

/* Named limits on local input. */
#define CLI_MAX_SCRIPT_BYTES (4u * 1024u * 1024u) /* a script file or stdin */
#define CLI_MAX_ERROR_LEN 512			  /* one error message */

struct cli_http;

struct cli_context {
	const char *socket_path; /* --socket, else the default from ipc.h, resolved on first use */
	char *socket_owned;	 /* the resolved default (freed by holoctl_main) */
	bool json;		 /* --json: print the daemon's JSON as received */
	FILE *in, *out, *err;	 /* in: the script of `run --script -` */
	struct cli_http *http;	 /* created on the first request */
	/* A signal handler's counter: a stream stops (-EINTR) once it differs from
	 * interrupt_seen. NULL: none. */
	volatile sig_atomic_t *interrupt;
	sig_atomic_t interrupt_seen;
};

struct cli_command {
	const char *name;
	const char *args;	    /* usage after the name, e.g. "[options] ID" */
	const char *summary;	    /* one line for the command list */
	const char *help;	    /* the rest of `holoctl NAME --help` */
	void (*help_more)(FILE *f); /* optional: more help generated after `help` (do's actions) */
	/* argv[0] is the command name. Returns an exit status (CLI_EXIT_*). */
	int (*run)(struct cli_context *ctx, int argc, char **argv);
};

extern const struct cli_command cli_cmd_status;
extern const struct cli_command cli_cmd_run;
extern const struct cli_command cli_cmd_follow;
extern const struct cli_command cli_cmd_pause;
extern const struct cli_command cli_cmd_resume;
extern const struct cli_command cli_cmd_list;
extern const struct cli_command cli_cmd_show;
extern const struct cli_command cli_cmd_cancel;
extern const struct cli_command cli_cmd_screenshot;
extern const struct cli_command cli_cmd_do;
extern const struct cli_command cli_cmd_report;
extern const struct cli_command cli_cmd_export;
extern const struct cli_command cli_cmd_prune;
extern const struct cli_command cli_cmd_replay;
extern const struct cli_command cli_cmd_mcp;
extern const struct cli_command cli_cmd_reply;
extern const struct cli_command cli_cmd_approve;
extern const struct cli_command cli_cmd_deny;
extern const struct cli_command cli_cmd_view;
extern const struct cli_command cli_cmd_windows;

/* cmd-answer.c: what task `id` waits for (the "waiting" object of docs/api.md), as lines for a
 * person: the question and how to reply, or the held action and how to approve or deny it. */
void cli_print_waiting(struct cli_context *ctx, long long id, json_t *waiting);

/* cmd-status.c: `holoctl status`'s summary of a GET /v1/status object, a few lines. */
void cli_print_status_summary(FILE *out, json_t *status);

/* cmd-windows.c: the answer of GET /v1/windows as lines for a person (a table fit to `width`
 * columns, 0: whole, then the pointer), for `holoctl windows` and holoctl mcp's tool. */
void cli_print_windows(FILE *out, json_t *answer, unsigned width);

/* commands.c: the table, in the order `holoctl --help` lists it. */
extern const struct cli_command *const cli_commands[];
extern const size_t cli_commands_count;
const struct cli_command *cli_command_find(const char *name);

/* holoctl.c: the whole program minus process setup, so tests can drive it in-process.
 * Returns the exit status. */
int holoctl_main(int argc, char **argv, FILE *in, FILE *out, FILE *err);
void cli_print_usage(FILE *f);
void cli_print_command_help(const struct cli_command *cmd, FILE *f);

/* ---- option parsing (options.c) ------------------------------------------------------------ */

/* Parses a decimal integer in [min, max] (the whole string). -EINVAL or -ERANGE otherwise. */
int cli_parse_int(const char *s, long min, long max, long *ret);
/* An age "N" + s, m, h, d or w, in seconds, at most IPC_MAX_PRUNE_AGE_S; -EINVAL/-ERANGE. */
int cli_parse_age(const char *s, long *ret_seconds);
/* Prints "holoctl NAME: <message>" and a hint to run --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(struct cli_context *ctx, const struct cli_command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prints "holoctl: <message>"; returns CLI_EXIT_ERROR. */
int cli_error(struct cli_context *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- talking to holod (api.c) --------------------------------------------------------------- */

/* Sends a request with an optional JSON body and parses a JSON answer into *ret (may be NULL
 * when the caller does not need it). Prints the error (the cause and the fix, or the daemon's own
 * message for an HTTP error status) and returns CLI_EXIT_ERROR on failure; 0 on success. With
 * --json, the daemon's answer (or error body) is also printed to stdout as received, so commands
 * print their human output only when !ctx->json. */
int cli_api_json(struct cli_context *ctx, const char *method, const char *path, const char *body,
		 json_t **ret);
/* The same, returning the raw body (PNGs); prints nothing on success. *ret_body is malloc'd;
 * *ret_sha256 (when ret_sha256 is not NULL) is the X-Holod-SHA256 header or NULL, malloc'd. */
int cli_api_raw(struct cli_context *ctx, const char *method, const char *path, const char *body,
		char **ret_body, size_t *ret_size, char **ret_sha256);
/* Streams GET path line by line to fn; handles errors as above. fn returns >= 0 to go on, or
 * -ECANCELED to stop after printing its own error (then CLI_EXIT_ERROR is returned silently).
 * -ECONNRESET (after printing the error) when holod closed the connection before the stream's
 * end: it went away, so what became of the task is unknown. -EINTR (nothing printed) when
 * *ctx->interrupt moved away from ctx->interrupt_seen. */
int cli_api_stream(struct cli_context *ctx, const char *path,
		   int (*fn)(const char *line, size_t len, void *userdata), void *userdata);
/* Formats a daemon error body ({"error":{"code","message"}}) for the user: "MESSAGE (CODE)",
 * or a generic line with the HTTP status when the body is not that shape. */
void cli_format_api_error(long status, const char *body, size_t size, char *buf, size_t buflen);

/* ---- building requests without a daemon ---------------------------------------------------- */

/* `holoctl do [options] TOOL ARGS...` (argv[0] is "do") -> the POST /v1/actions body, validated
 * with ipc_action_request_parse. Returns 0 with *ret_body set (malloc'd JSON), 0 with *ret_body
 * NULL after printing --help, or CLI_EXIT_USAGE after printing the problem to ctx->err. Also
 * applies the shared options (--json, --socket) to ctx. */
int cli_do_build_request(struct cli_context *ctx, int argc, char **argv, char **ret_body);

/* What `holoctl run` was asked to do, parsed from its arguments without a daemon. */
struct cli_run_args {
	char *body;  /* the POST /v1/tasks body, validated (malloc'd) */
	bool follow; /* --follow */
	bool help;   /* --help was printed: nothing to do */
};

/* `holoctl run [options] (--script FILE | INSTRUCTION)` (argv[0] is "run"). Reads the script
 * (from ctx->in for "-"), merges the options into it, validates with ipc_task_request_parse.
 * Returns 0 and fills *ret, or CLI_EXIT_USAGE after printing the problem to ctx->err. */
int cli_run_parse(struct cli_context *ctx, int argc, char **argv, struct cli_run_args *ret);
void cli_run_args_finish(struct cli_run_args *a);

/* Reads a script from `path` ("-" for stdin) into a task request body: a bare JSON array
 * becomes {"script": [...]}, an object {"actions": [...], options...} becomes {"script": [...],
 * options...}. The actions are validated locally. On error writes "FILE: line L: message" or
 * similar into err and returns a negative errno. */
int cli_script_read(const char *path, FILE *stdin_file, json_t **ret, char *err, size_t errlen);
/* The same on a string already in memory (name is used in messages). */
int cli_script_parse(const char *name, const char *text, size_t len, json_t **ret, char *err, size_t errlen);

/* The script that replays the recorded `steps` (a steps array of the API) from index `from`:
 * each executed action (status ok or dry_run; invalid model steps are skipped) with its
 * recorded pixel coordinates, as a POST /v1/tasks body {"script", "coords": "pixels",
 * "replay_of", "dry_run"}, and with check_threshold >= 0 "check": {"threshold", "steps": the
 * recorded index of each action} (holod compares each screen with the recorded one). NULL +
 * *ret_n 0 when there is nothing to replay. */
json_t *cli_replay_script(json_t *steps, long long task_id, long from, bool dry_run, double check_threshold,
			  size_t *ret_n);

/* ---- formatting (format.c) ------------------------------------------------------------------ */

/* "1.25 s", "830 ms", "12 us" for a duration in microseconds; "-" when negative. */
void cli_format_duration_us(long long us, char *buf, size_t size);
/* Narrowest width text is wrapped to. */
#define CLI_WRAP_MIN_WIDTH 40
/* Columns of the terminal `f` is (TIOCGWINSZ), else $COLUMNS, else 80; at least
 * CLI_WRAP_MIN_WIDTH. */
unsigned cli_terminal_width(FILE *f);
/* The width tables are fit to: the terminal's when `f` is one (TIOCGWINSZ), else $COLUMNS when
 * set, else 0 (no limit: a pipe or a file gets the whole text). */
unsigned cli_output_width(FILE *f);
/* Prints `label` then `text` after `indent` blanks, word-wrapped to `width` columns, continuation
 * lines aligned under the text's start. Newlines in text start a new line; tabs print as a blank
 * and other control characters as \xNN, so what a model wrote cannot move the cursor. */
void cli_print_wrapped(FILE *f, const char *label, const char *text, unsigned indent, unsigned width);
/* The exit status `run --follow` returns for a final task status string. */
int cli_exit_for_task_status(const char *status);

/* ---- options every command accepts (options.c) ---------------------------------------------- */

enum {
	CLI_OPT_JSON = 0x100,
	CLI_OPT_SOCKET,
	CLI_OPT_FIRST_COMMAND_OPTION, /* commands number their own long-only options from here */
};

#define CLI_COMMON_LONG_OPTIONS                                                                              \
	{"json", no_argument, NULL, CLI_OPT_JSON}, {"socket", required_argument, NULL, CLI_OPT_SOCKET},      \
	{                                                                                                    \
		"help", no_argument, NULL, 'h'                                                               \
	}

/* Short options every command accepts; prefix a command's own getopt string with it. */
#define CLI_COMMON_SHORT_OPTIONS ":h"

/* Handles getopt_long's answer `c` for the shared options and getopt errors. Returns -1 when
 * parsing should continue, or an exit status to return now (0 after --help, CLI_EXIT_USAGE for an
 * unknown option or a missing argument, named in the message). Call it from the default case. */
int cli_common_option(struct cli_context *ctx, const struct cli_command *cmd, int c, char **argv);
/* Resets getopt so that a command can parse its argv (holoctl may run several in one process). */
void cli_getopt_reset(void);

/* ---- steps and tasks in human output (steps.c) ----------------------------------------------- */

/* "640,400" or "10,20->300,40" for a {"x","y"[,"x2","y2"]} object; "-" for null. */
void cli_format_point(json_t *point, char *buf, size_t size);
/* The arguments of a tool call other than its coordinates: "\"hello\" +enter", "ctrl+s",
 * "down 3", "2 s", the button of a non-left click, else the element; "" when there are none. */
void cli_format_tool_args(json_t *tool_call, char *buf, size_t size);
/* The aligned table of `holoctl show` for a JSON array of steps; with the model's phases
 * (preprocess, vision, prefill, decode) when a step came from the model. Its arguments and
 * results are cut to fit `width` columns (0: whole). */
int cli_print_steps_table(struct cli_context *ctx, json_t *steps, unsigned width);
/* For each step from the model: "step N", its decode counts, then its thought and note wrapped
 * to `width`. */
void cli_print_step_texts(struct cli_context *ctx, json_t *steps, unsigned width);
/* A step's decode counts from its `agent` object: "84 decoded, 40 forced (jump-forward), 44
 * forwards", or "84 decoded" where the forced tokens and forwards are not journaled (a remote
 * server's step); false when it has none. */
bool cli_format_step_tokens(json_t *agent, char *buf, size_t size);
/* Follows task `id` to its end as `run --follow` does (its progress events, one line per step,
 * then the outcome); `shown`: the status already printed (NULL: none), not printed again;
 * returns the exit status for its final status. */
int cli_follow_task(struct cli_context *ctx, long long id, const char *shown);
/* One line per step, as `run --follow` prints them live. */
void cli_print_step_line(struct cli_context *ctx, json_t *step);
/* The short answer of `holoctl do`. */
int cli_print_action_answer(struct cli_context *ctx, json_t *answer);
/* Writes a raw answer (--json) followed by a newline when it lacks one. */
void cli_print_raw(struct cli_context *ctx, const char *body, size_t size);
/* Parses a task ID (a positive integer); prints a usage error and returns CLI_EXIT_USAGE
 * otherwise. */
int cli_parse_task_id(struct cli_context *ctx, const struct cli_command *cmd, const char *s, long *ret);
/* Writes through a temporary file in the same directory and renames it over `path` (mode
 * 0644), so a reader never sees half a file. -errno. */
int cli_write_file_atomic(const char *path, const char *data, size_t size);
/* Width and height from a PNG's IHDR; -EBADMSG when data is not a PNG. */
int cli_png_size(const uint8_t *data, size_t size, uint32_t *ret_width, uint32_t *ret_height);
