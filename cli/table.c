/* Aligned text tables; contracts in table.h. */
#include "table.h"

#include "common.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct cli_table {
	size_t ncolumns;
	char **headers;
	enum cli_align align[CLI_TABLE_MAX_COLUMNS];
	bool flexible[CLI_TABLE_MAX_COLUMNS];
	unsigned width; /* 0: no limit */
	bool hide_header;
	char **cells; /* rows * ncolumns, rendered */
	size_t rows, alloc_rows;
};

/* Columns a rendered cell or a header takes: one per character (both are valid UTF-8). */
static size_t cell_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			w++;
	return w;
}

char *cli_table_render_cell(const char *text)
{
	/* At most 4 output bytes per input byte (\xNN). */
	size_t o = 0, len = strlen(text);
	char *out = xmalloc(len * 4 + 1);
	const unsigned char *p = (const unsigned char *)text;

	while (*p) {
		size_t n = 1, left = strnlen((const char *)p, UTF8_MAX_SEQ);
		uint32_t cp;
		if (*p == '\n' || *p == '\t' || *p == '\r') {
			out[o++] = '\\';
			out[o++] = *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
		} else if (*p < 0x20 || *p == 0x7F || (*p >= 0x80 && !(n = utf8_decode(p, left, &cp)))) {
			n = 1; /* invalid UTF-8 (overlong, surrogate, truncated): byte by byte */
			o += (size_t)sprintf(out + o, "\\x%02X", *p);
		} else {
			memcpy(out + o, p, n);
			o += n;
		}
		p += n;
	}
	out[o] = '\0';
	return out;
}

char *cli_table_cut_cell(const char *rendered, size_t cols)
{
	size_t cut = 0, n = 0;

	if (cell_width(rendered) <= cols)
		return xstrdup(rendered);
	/* The byte offset after cols - 3 characters (a rendered cell is valid UTF-8). */
	for (const char *s = rendered; *s; s++) {
		if (((unsigned char)*s & 0xC0) != 0x80) {
			if (n == (cols > 3 ? cols - 3 : 0))
				break;
			n++;
		}
		cut = (size_t)(s - rendered) + 1;
	}
	char *out = xmalloc(cut + 4);
	memcpy(out, rendered, cut);
	memcpy(out + cut, "...", 4);
	return out;
}

struct cli_table *cli_table_create(size_t ncolumns, const char *const *headers)
{
	if (ncolumns == 0 || ncolumns > CLI_TABLE_MAX_COLUMNS) {
		errno = EINVAL;
		return NULL;
	}
	struct cli_table *t = xcalloc(1, sizeof(*t));
	t->ncolumns = ncolumns;
	t->headers = xcalloc(ncolumns, sizeof(char *));
	for (size_t i = 0; i < ncolumns; i++)
		t->headers[i] = xstrdup(headers[i]);
	return t;
}

void cli_table_destroy(struct cli_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->headers && i < t->ncolumns; i++)
		free(t->headers[i]);
	for (size_t i = 0; i < t->rows * t->ncolumns; i++)
		free(t->cells[i]);
	free(t->headers);
	free(t->cells);
	free(t);
}

void cli_table_set_align(struct cli_table *t, size_t column, enum cli_align align)
{
	if (column < t->ncolumns)
		t->align[column] = align;
}

void cli_table_set_width(struct cli_table *t, unsigned width)
{
	t->width = width;
}

void cli_table_set_flexible(struct cli_table *t, size_t column)
{
	if (column < t->ncolumns)
		t->flexible[column] = true;
}

void cli_table_add_row(struct cli_table *t, const char *const *cells)
{
	if (t->rows == t->alloc_rows) {
		t->alloc_rows = t->alloc_rows ? t->alloc_rows * 2 : 16;
		t->cells = xreallocarray(t->cells, t->alloc_rows * t->ncolumns, sizeof(char *));
	}
	for (size_t i = 0; i < t->ncolumns; i++)
		t->cells[t->rows * t->ncolumns + i] = cli_table_render_cell(cells[i] ? cells[i] : "-");
	t->rows++;
}

void cli_table_hide_header(struct cli_table *t)
{
	t->hide_header = true;
}

size_t cli_table_rows(const struct cli_table *t)
{
	return t->rows;
}

static void print_row(const struct cli_table *t, char *const *row, const size_t *width, FILE *f)
{
	size_t last = t->ncolumns;

	/* Trailing empty cells print nothing, not even their separator. */
	while (last > 1 && row[last - 1][0] == '\0')
		last--;
	for (size_t c = 0; c < last; c++) {
		char *cell = cli_table_cut_cell(row[c], width[c]);
		size_t pad = width[c] - cell_width(cell);
		if (c > 0)
			fputs("  ", f);
		if (t->align[c] == CLI_ALIGN_RIGHT)
			fprintf(f, "%*s%s", (int)pad, "", cell);
		else if (c + 1 == last)
			fputs(cell, f);
		else
			fprintf(f, "%s%*s", cell, (int)pad, "");
		free(cell);
	}
	fputc('\n', f);
}

/* Narrows the flexible columns, the widest first, until a line fits t->width or none can be
 * narrowed further (below CLI_TABLE_MIN_CUT or its header). */
static void fit(const struct cli_table *t, size_t *width)
{
	size_t total = 2 * (t->ncolumns - 1), min[CLI_TABLE_MAX_COLUMNS];

	for (size_t c = 0; c < t->ncolumns; c++) {
		total += width[c];
		min[c] = MAX((size_t)CLI_TABLE_MIN_CUT, cell_width(t->headers[c]));
	}
	while (total > t->width) {
		size_t widest = t->ncolumns;
		for (size_t c = 0; c < t->ncolumns; c++)
			if (t->flexible[c] && width[c] > min[c] &&
			    (widest == t->ncolumns || width[c] > width[widest]))
				widest = c;
		if (widest == t->ncolumns)
			return;
		/* Down to the next widest flexible column's width, or what fits, at once. */
		size_t next = min[widest];
		for (size_t c = 0; c < t->ncolumns; c++)
			if (c != widest && t->flexible[c])
				next = MAX(next, width[c]);
		size_t cut = MIN(width[widest] - next, total - t->width);
		if (cut == 0)
			cut = 1;
		width[widest] -= cut;
		total -= cut;
	}
}

int cli_table_print(const struct cli_table *t, FILE *f)
{
	size_t width[CLI_TABLE_MAX_COLUMNS] = {0};

	for (size_t c = 0; c < t->ncolumns; c++) {
		width[c] = cell_width(t->headers[c]);
		for (size_t r = 0; r < t->rows; r++)
			width[c] = MAX(width[c], cell_width(t->cells[r * t->ncolumns + c]));
	}
	if (t->width > 0)
		fit(t, width);
	if (!t->hide_header)
		print_row(t, t->headers, width, f);
	for (size_t r = 0; r < t->rows; r++)
		print_row(t, t->cells + r * t->ncolumns, width, f);
	return ferror(f) ? -EIO : 0;
}
