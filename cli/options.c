/* Small helpers for parsing arguments and reporting errors the same way in every command. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>

int cli_parse_int(const char *s, long min, long max, long *ret)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0' || end == s)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int cli_usage_error(struct cli_context *ctx, const struct cli_command *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(ctx->err, "holoctl%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
	va_start(ap, fmt);
	vfprintf(ctx->err, fmt, ap);
	va_end(ap);
	fprintf(ctx->err, "\n(see `holoctl%s%s --help`)\n", cmd ? " " : "", cmd ? cmd->name : "");
	return CLI_EXIT_USAGE;
}

int cli_error(struct cli_context *ctx, const char *fmt, ...)
{
	va_list ap;

	fputs("holoctl: ", ctx->err);
	va_start(ap, fmt);
	vfprintf(ctx->err, fmt, ap);
	va_end(ap);
	fputc('\n', ctx->err);
	return CLI_EXIT_ERROR;
}

void cli_getopt_reset(void)
{
	/* 0, not 1: glibc then also forgets its internal state of the previous argv. */
	optind = 0;
	opterr = 0;
}

int cli_common_option(struct cli_context *ctx, const struct cli_command *cmd, int c, char **argv)
{
	const char *bad = optind > 0 ? argv[optind - 1] : "?";

	switch (c) {
	case CLI_OPT_JSON:
		ctx->json = true;
		return -1;
	case CLI_OPT_SOCKET:
		ctx->socket_path = optarg;
		return -1;
	case 'h':
		cli_print_command_help(cmd, ctx->out);
		return CLI_EXIT_OK;
	case ':':
		return cli_usage_error(ctx, cmd, "option '%s' needs a value", bad);
	case '?':
		if (optopt && optopt < 0x100)
			return cli_usage_error(ctx, cmd, "unknown option '-%c'", optopt);
		return cli_usage_error(ctx, cmd, "unknown option '%s'", bad);
	default:
		return cli_usage_error(ctx, cmd, "unexpected option '%s'", bad);
	}
}

int cli_parse_task_id(struct cli_context *ctx, const struct cli_command *cmd, const char *s, long *ret)
{
	long v;
	if (cli_parse_int(s, 1, LONG_MAX, &v) < 0)
		return cli_usage_error(ctx, cmd, "'%s' is not a task ID (a number, see `holoctl list`)", s);
	*ret = v;
	return 0;
}
