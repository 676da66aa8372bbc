/* Aligned text tables for holoctl's human output.
 *
 * Cells are copied when added. Control characters in cells are shown escaped (\n, \t, \xNN) so
 * one row stays one line. A table given a width (cli_table_set_width: the terminal's, or
 * $COLUMNS) cuts the cells of its flexible columns (free text: results, errors, instructions)
 * with "..." so that its lines fit, the widest flexible column first; other columns and a table
 * without a width (--wide, or output that is neither a terminal nor sized by $COLUMNS) print
 * whole. Widths count UTF-8 code points (one column each), which is right for the text holod
 * returns.
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

#define CLI_TABLE_MAX_COLUMNS 16
#define CLI_TABLE_MIN_CUT 12 /* a flexible column is never cut narrower (nor below its header) */

enum cli_align {
	CLI_ALIGN_LEFT,
	CLI_ALIGN_RIGHT,
};

struct cli_table;

/* headers: ncolumns strings (copied). NULL + EINVAL when ncolumns is 0 or above the limit. */
struct cli_table *cli_table_create(size_t ncolumns, const char *const *headers);
void cli_table_destroy(struct cli_table *t);
void cli_table_set_align(struct cli_table *t, size_t column, enum cli_align align);
/* Lines of at most `width` columns (0: no limit, the default), cutting flexible columns only. */
void cli_table_set_width(struct cli_table *t, unsigned width);
/* Marks a column as free text that may be cut to fit the width. */
void cli_table_set_flexible(struct cli_table *t, size_t column);
/* Prints no header line (key/value lists); the headers still count for the widths. */
void cli_table_hide_header(struct cli_table *t);
/* cells: ncolumns strings; a NULL cell prints as "-". */
void cli_table_add_row(struct cli_table *t, const char *const *cells);
size_t cli_table_rows(const struct cli_table *t);
/* Columns separated by two spaces, header first; trailing blanks are never printed.
 * Returns 0 or -EIO when the stream reports an error. */
int cli_table_print(const struct cli_table *t, FILE *f);
/* The escaped form of one cell as printed, whole (caller frees): one line for any text. */
char *cli_table_render_cell(const char *text);
/* The first columns of a rendered cell: whole when it has at most `cols`, else its first
 * cols - 3 followed by "..." (caller frees). */
char *cli_table_cut_cell(const char *rendered, size_t cols);
