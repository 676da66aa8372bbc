/* Formatting helpers for human output. */
#include "cli.h"

#include "common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

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
		{"stuck", CLI_EXIT_TASK_STUCK},
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

unsigned cli_terminal_width(FILE *f)
{
	struct winsize ws;
	const char *columns = getenv("COLUMNS");
	long n;

	if (isatty(fileno(f)) && ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		n = ws.ws_col;
	else if (!columns || cli_parse_int(columns, 1, 100000, &n) < 0)
		n = 80;
	return n < CLI_WRAP_MIN_WIDTH ? CLI_WRAP_MIN_WIDTH : (unsigned)n;
}

unsigned cli_output_width(FILE *f)
{
	struct winsize ws;
	const char *columns = getenv("COLUMNS");
	long n;

	if (isatty(fileno(f)) && ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (columns && cli_parse_int(columns, 1, 100000, &n) == 0)
		return (unsigned)n;
	return 0;
}

/* Appends one character of `text` at *i to the line as shown: UTF-8 sequences as they are
 * (one column), tabs as a space, other control characters as \xNN. Returns the columns used. */
static unsigned put_char(const char *text, size_t *i, char *line, size_t *len)
{
	unsigned char c = (unsigned char)text[*i];

	if (c == '\t') {
		line[(*len)++] = ' ';
		(*i)++;
		return 1;
	}
	if (c < 0x20 || c == 0x7f) {
		*len += (size_t)sprintf(line + *len, "\\x%02x", c);
		(*i)++;
		return 4;
	}
	/* A lead byte and at most 3 continuation bytes: a column never takes more than 4 bytes. */
	int n = 0;
	do
		line[(*len)++] = text[(*i)++];
	while (c >= 0x80 && ++n < 4 && ((unsigned char)text[*i] & 0xc0) == 0x80);
	return 1;
}

void cli_print_wrapped(FILE *f, const char *label, const char *text, unsigned indent, unsigned width)
{
	/* A line holds at most `width` columns; a column is at most 4 bytes (\xNN, UTF-8). */
	size_t cap = (size_t)width * 4 + 8, len = 0;
	char *line = xmalloc(cap);
	unsigned col = 0, avail;
	size_t i = 0, brk_len = 0, brk_i = 0;
	bool first = true;

	fprintf(f, "%*s%s", (int)indent, "", label);
	avail = width > indent + (unsigned)strlen(label) + 8 ? width - indent - (unsigned)strlen(label) : 8;
	while (text[i]) {
		if (text[i] == '\n') {
			i++;
			goto flush;
		}
		if (text[i] == ' ' && col == 0) {
			i++; /* no line starts with the blank it was broken at */
			continue;
		}
		if (text[i] == ' ') {
			brk_len = len;
			brk_i = i;
		}
		size_t prev_len = len, prev_i = i;
		col += put_char(text, &i, line, &len);
		if (col <= avail)
			continue;
		if (brk_len > 0) {
			/* Break at the last blank; what followed it starts the next line. */
			len = brk_len;
			i = brk_i + 1;
		} else {
			/* One word longer than the line: cut it before the character that overflowed. */
			len = prev_len;
			i = prev_i;
		}
	flush:
		fprintf(f, "%.*s\n", (int)len, line);
		if (!text[i]) {
			free(line);
			return;
		}
		if (first) {
			first = false;
			indent += (unsigned)strlen(label);
			avail = width > indent + 8 ? width - indent : 8;
		}
		fprintf(f, "%*s", (int)indent, "");
		len = 0;
		col = 0;
		brk_len = 0;
	}
	fprintf(f, "%.*s\n", (int)len, line);
	free(line);
}
