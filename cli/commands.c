/* The command table: one entry per command, each defined in its cmd-*.c file. */
#include "cli.h"

#include <string.h>

const struct cli_command *const cli_commands[] = {
	&cli_cmd_status, &cli_cmd_run,	      &cli_cmd_follow,	&cli_cmd_view,	 &cli_cmd_list,
	&cli_cmd_show,	 &cli_cmd_report,     &cli_cmd_export,	&cli_cmd_replay, &cli_cmd_prune,
	&cli_cmd_cancel, &cli_cmd_pause,      &cli_cmd_resume,	&cli_cmd_reply,	 &cli_cmd_approve,
	&cli_cmd_deny,	 &cli_cmd_screenshot, &cli_cmd_windows, &cli_cmd_do,	 &cli_cmd_mcp,
};

const size_t cli_commands_count = sizeof(cli_commands) / sizeof(cli_commands[0]);

const struct cli_command *cli_command_find(const char *name)
{
	for (size_t i = 0; i < cli_commands_count; i++)
		if (strcmp(cli_commands[i]->name, name) == 0)
			return cli_commands[i];
	return NULL;
}
