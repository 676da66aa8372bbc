/* Aligned text tables for holoctl's human output.
 *
 * Cells are copied when added. Control characters in cells are shown escaped (\n, \t, \xNN) so
 * one row stays one line, and cells wider than CLI_TABLE_MAX_CELL columns are cut with "...".
 * Widths count UTF-8 code points (one column each), which is right for the text holod returns.
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

#define CLI_TABLE_MAX_COLUMNS 16
#define CLI_TABLE_MAX_CELL 60 /* columns shown per cell before it is cut */

enum cli_align {
	CLI_ALIGN_LEFT,
	CLI_ALIGN_RIGHT,
};

struct cli_table;

/* headers: ncolumns strings (copied). NULL + EINVAL when ncolumns is 0 or above the limit. */
struct cli_table *cli_table_create(size_t ncolumns, const char *const *headers);
void cli_table_destroy(struct cli_table *t);
void cli_table_set_align(struct cli_table *t, size_t column, enum cli_align align);
/* Prints no header line (key/value lists); the headers still count for the widths. */
void cli_table_hide_header(struct cli_table *t);
/* cells: ncolumns strings; a NULL cell prints as "-". */
void cli_table_add_row(struct cli_table *t, const char *const *cells);
size_t cli_table_rows(const struct cli_table *t);
/* Columns separated by two spaces, header first; trailing blanks are never printed.
 * Returns 0 or -EIO when the stream reports an error. */
int cli_table_print(const struct cli_table *t, FILE *f);
/* The escaped, cut form of one cell as printed (caller frees); exposed for tests. */
char *cli_table_render_cell(const char *text);
