/* holoctl screenshot: the current screen (GET /v1/screenshot) or a journaled step's screenshot
 * (GET /v1/tasks/{id}/steps/{n}/screenshot) saved as a PNG file. */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	OPT_TASK = CLI_OPT_FIRST_COMMAND_OPTION,
	OPT_STEP,
	OPT_WHICH,
	OPT_DISPLAY,
};

static const struct option screenshot_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"output", required_argument, NULL, 'o'},
	{"task", required_argument, NULL, OPT_TASK},
	{"step", required_argument, NULL, OPT_STEP},
	{"which", required_argument, NULL, OPT_WHICH},
	{"display", required_argument, NULL, OPT_DISPLAY},
	{0},
};

int cli_png_size(const uint8_t *data, size_t size, uint32_t *ret_width, uint32_t *ret_height)
{
	static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

	/* signature, IHDR length (4), "IHDR", width (4), height (4) */
	if (size < 24 || memcmp(data, signature, 8) != 0 || memcmp(data + 12, "IHDR", 4) != 0)
		return -EBADMSG;
	*ret_width = (uint32_t)data[16] << 24 | (uint32_t)data[17] << 16 | (uint32_t)data[18] << 8 | data[19];
	*ret_height =
		(uint32_t)data[20] << 24 | (uint32_t)data[21] << 16 | (uint32_t)data[22] << 8 | data[23];
	return 0;
}

static int write_all(int fd, const char *data, size_t size)
{
	while (size > 0) {
		ssize_t n = write(fd, data, size);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		data += n;
		size -= (size_t)n;
	}
	return 0;
}

int cli_write_file_atomic(const char *path, const char *data, size_t size)
{
	char *tmp = xasprintf("%s.XXXXXX", path);
	int fd, r;

	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		goto cleanup_tmp;
	}
	r = write_all(fd, data, size);
	if (r == 0 && fchmod(fd, 0644) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
cleanup_tmp:
	free(tmp);
	return r;
}

static int screenshot_run(struct cli_context *ctx, int argc, char **argv)
{
	const char *output = NULL, *which = NULL, *display = NULL;
	long task = 0, step = -1;
	char *path, *png = NULL, *journaled = NULL, sha[65];
	size_t size = 0;
	uint32_t width, height;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS "o:", screenshot_options, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case OPT_TASK:
			r = cli_parse_task_id(ctx, &cli_cmd_screenshot, optarg, &task);
			if (r != 0)
				return r;
			break;
		case OPT_STEP:
			if (cli_parse_int(optarg, 0, IPC_MAX_TASK_STEPS, &step) < 0)
				return cli_usage_error(ctx, &cli_cmd_screenshot,
						       "--step must be a step index from 0 to %d, not '%s'",
						       IPC_MAX_TASK_STEPS, optarg);
			break;
		case OPT_WHICH:
			if (strcmp(optarg, "before") != 0 && strcmp(optarg, "after") != 0)
				return cli_usage_error(ctx, &cli_cmd_screenshot,
						       "--which must be before or after, not '%s'", optarg);
			which = optarg;
			break;
		case OPT_DISPLAY:
			/* Sent in the query string as it is: only the characters of display
			 * names. */
			if (!optarg[0] || strlen(optarg) > IPC_MAX_DISPLAY_NAME_BYTES ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					   "0123456789:._-") != strlen(optarg))
				return cli_usage_error(ctx, &cli_cmd_screenshot,
						       "--display takes a display name such as :1, not "
						       "'%s'",
						       optarg);
			display = optarg;
			break;
		default:
			r = cli_common_option(ctx, &cli_cmd_screenshot, c, argv);
			if (r >= 0)
				return r;
			break;
		}
	}
	if (optind < argc)
		return cli_usage_error(ctx, &cli_cmd_screenshot,
				       "unexpected argument '%s' (the file goes after -o)", argv[optind]);
	if (!output)
		return cli_usage_error(ctx, &cli_cmd_screenshot, "where to? give -o FILE (- for stdout)");
	if ((task > 0) != (step >= 0))
		return cli_usage_error(ctx, &cli_cmd_screenshot, "--task and --step go together");
	if (display && task > 0)
		return cli_usage_error(ctx, &cli_cmd_screenshot,
				       "--display applies to the current screen, not a step's");
	if (which && task == 0)
		return cli_usage_error(ctx, &cli_cmd_screenshot, "--which applies to a step's screenshot");
	if (strcmp(output, "-") == 0 && ctx->json)
		return cli_usage_error(ctx, &cli_cmd_screenshot,
				       "--json describes a file; it cannot go with -o -");

	if (task > 0)
		path = xasprintf(IPC_API_PREFIX "/tasks/%ld/steps/%ld/screenshot%s%s", task, step,
				 which ? "?which=" : "", which ? which : "");
	else
		path = xasprintf(IPC_API_PREFIX "/screenshot%s%s", display ? "?display=" : "",
				 display ? display : "");
	r = cli_api_raw(ctx, "GET", path, NULL, &png, &size, &journaled);
	free(path);
	if (r != 0)
		return r;
	if (cli_png_size((const uint8_t *)png, size, &width, &height) < 0) {
		r = cli_error(ctx, "holod's answer is not a PNG image (%zu bytes)", size);
		goto cleanup;
	}
	/* A step's screenshot carries the hash the journal recorded when it was written: a file
	 * changed in the state directory since then is reported, not passed on. */
	ipc_sha256_hex(png, size, sha);
	if (journaled && strcmp(journaled, sha) != 0) {
		r = cli_error(ctx,
			      "the screenshot holod sent (sha256 %s) does not match the journal's "
			      "(%s): the file in holod's state directory was changed",
			      sha, journaled);
		goto cleanup;
	}
	if (strcmp(output, "-") == 0) {
		fflush(ctx->out);
		if (fwrite(png, 1, size, ctx->out) != size || fflush(ctx->out) != 0)
			r = cli_error(ctx, "cannot write the PNG to stdout");
		goto cleanup;
	}
	r = cli_write_file_atomic(output, png, size);
	if (r < 0) {
		r = cli_error(ctx, "cannot write %s: %s", output, strerror(-r));
		goto cleanup;
	}
	if (ctx->json) {
		json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:s, s:b}", "path", output, "bytes",
				      (json_int_t)size, "width", (json_int_t)width, "height",
				      (json_int_t)height, "sha256", sha, "verified", journaled != NULL);
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		if (text)
			fprintf(ctx->out, "%s\n", text);
		free(text);
		json_decref(o);
	} else {
		fprintf(ctx->out, "wrote %s (%ux%u, %zu bytes%s)\n", output, width, height, size,
			journaled ? ", sha256 matches the journal" : "");
	}
	r = 0;

cleanup:
	free(journaled);
	free(png);
	return r;
}

const struct cli_command cli_cmd_screenshot = {
	.name = "screenshot",
	.args = "-o FILE [--display NAME | --task ID --step N [--which before|after]]",
	.summary = "save the current screen, or a step's screenshot, as PNG",
	.help = "Options:\n"
		"  -o, --output FILE     where to write the PNG (- for stdout); written "
		"atomically\n"
		"  --task ID --step N    the screenshot journaled with step N of task ID\n"
		"  --which before|after  which of the step's two screenshots (default: holod's)\n"
		"  --display NAME        the screen of this display of holod's (default: its "
		"first)\n"
		"A step's screenshot is checked against the sha256 the journal recorded for it.\n"
		"With --json: {\"path\", \"bytes\", \"width\", \"height\", \"sha256\", "
		"\"verified\"}.\n",
	.run = screenshot_run,
};
