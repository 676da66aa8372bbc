/* Formatting helpers for human output. */
#include "cli.h"

#include <string.h>

void cli_format_duration_us(long long us, char *buf, size_t size)
{
	if (us < 0)
		snprintf(buf, size, "-");
	else if (us < 1000)
		snprintf(buf, size, "%lld us", us);
	else if (us < 1000000)
		snprintf(buf, size, "%lld ms", (us + 500) / 1000);
	else if (us < 600000000LL)
		snprintf(buf, size, "%.2f s", (double)us / 1e6);
	else
		snprintf(buf, size, "%lld min %lld s", us / 60000000LL, (us / 1000000LL) % 60);
}

int cli_exit_for_task_status(const char *status)
{
	static const struct {
		const char *status;
		int code;
	} map[] = {
	        {"succeeded", CLI_EXIT_OK},
	        {"failed", CLI_EXIT_TASK_FAILED},
	        {"cancelled", CLI_EXIT_TASK_CANCELLED},
	        {"interrupted", CLI_EXIT_TASK_INTERRUPTED},
	};

	if (status)
		for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
			if (strcmp(map[i].status, status) == 0)
				return map[i].code;
	return CLI_EXIT_TASK_UNKNOWN;
}

void cli_print_raw(struct cli_context *ctx, const char *body, size_t size)
{
	fwrite(body, 1, size, ctx->out);
	if (size == 0 || body[size - 1] != '\n')
		fputc('\n', ctx->out);
}

