/* holoctl: global options, the command dispatch, and help. */
#include "cli.h"

#include "common.h"
#include "holod-config.h"
#include "http.h"
#include "ipc.h"

#include <ctype.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void cli_print_usage(FILE *f)
{
	fprintf(f, "Usage: holoctl [--socket PATH] [--json] COMMAND [options] [args]\n"
		   "\n"
		   "Talks to holod, the desktop-automation daemon, over its Unix socket.\n"
		   "\n"
		   "Commands:\n");
	for (size_t i = 0; i < cli_commands_count; i++)
		fprintf(f, "  %-11s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
	fprintf(f, "\n"
		   "Options (also accepted after the command):\n"
		   "  --socket PATH  holod's socket (default: $" IPC_SOCKET_ENV ", else\n"
		   "                 $XDG_RUNTIME_DIR/holod/holod.sock)\n"
		   "  --json         print holod's JSON answers as received, for scripts\n"
		   "  -h, --help     this help; `holoctl COMMAND --help` for a command\n"
		   "  -V, --version  holoctl's version\n"
		   "\n"
		   "Exit status:\n"
		   "  0  success (run --follow: the task succeeded)\n"
		   "  1  holod could not be reached or answered with an error\n"
		   "  2  bad arguments or a bad script: nothing was sent\n"
		   "  3  run --follow: the task failed\n"
		   "  4  run --follow: the task was cancelled\n"
		   "  5  run --follow: the task was interrupted (holod stopped during it)\n"
		   "  6  run --follow: the event stream ended without a final status\n"
		   "  7  run --follow: the task ended stuck (its steps changed nothing)\n"
		   "130  run --follow: a second Ctrl-C stopped following; the task runs on\n");
}

void cli_print_command_help(const struct cli_command *cmd, FILE *f)
{
	/* The summary reads as a sentence here: capitalised, with a full stop. */
	fprintf(f, "Usage: holoctl %s %s\n\n%c%s.\n\n%s", cmd->name, cmd->args,
		toupper((unsigned char)cmd->summary[0]), cmd->summary + 1, cmd->help);
	if (cmd->help_more)
		cmd->help_more(f);
	fprintf(f, "\nEvery command also takes --socket PATH, --json and --help; see `holoctl "
		   "--help`\n"
		   "for the exit statuses.\n");
}

enum {
	OPT_JSON = 0x100,
	OPT_SOCKET,
};

static const struct option global_options[] = {
	{"socket", required_argument, NULL, OPT_SOCKET},
	{"json", no_argument, NULL, OPT_JSON},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{0},
};

int holoctl_main(int argc, char **argv, FILE *in, FILE *out, FILE *err)
{
	struct cli_context ctx = {.in = in, .out = out, .err = err};
	const struct cli_command *cmd;
	int c, r;

	cli_getopt_reset();
	/* "+": stop at the command name; the command parses the rest. */
	while ((c = getopt_long(argc, argv, "+:hV", global_options, NULL)) != -1) {
		switch (c) {
		case OPT_SOCKET:
			ctx.socket_path = optarg;
			break;
		case OPT_JSON:
			ctx.json = true;
			break;
		case 'h':
			cli_print_usage(out);
			return CLI_EXIT_OK;
		case 'V':
			fprintf(out, "holoctl %s (API v%d)\n", HOLOD_VERSION, IPC_API_VERSION);
			return CLI_EXIT_OK;
		case ':':
			return cli_usage_error(&ctx, NULL, "option '%s' needs a value", argv[optind - 1]);
		default:
			return cli_usage_error(&ctx, NULL, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc) {
		cli_print_usage(err);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[optind], "help") == 0) {
		if (optind + 1 < argc && (cmd = cli_command_find(argv[optind + 1]))) {
			cli_print_command_help(cmd, out);
			return CLI_EXIT_OK;
		}
		cli_print_usage(out);
		return CLI_EXIT_OK;
	}
	cmd = cli_command_find(argv[optind]);
	if (!cmd)
		return cli_usage_error(&ctx, NULL, "unknown command '%s'", argv[optind]);

	r = cmd->run(&ctx, argc - optind, argv + optind);
	fflush(out);
	cli_http_destroy(ctx.http);
	free(ctx.socket_owned);
	return r;
}
