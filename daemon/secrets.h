/* secrets: values holod types for the model and scripts without anyone seeing them (docs/api.md,
 * "Secrets").
 *
 * A `write` action's content may hold {{secret:NAME}}; the executor asks secrets_expand() for
 * the text to type just before typing it and wipes that text afterwards. Everything else (the
 * action as journaled, the model's history, the API, the event stream, the logs, errors) keeps
 * the placeholder. Values come from the vault file (NAME=value lines, 0600 and the user's own,
 * refused otherwise) and from environment variables named on holod's command line, which are
 * taken out of the environment once read so that launched programs do not inherit them.
 *
 * The set is built at start-up on the main thread and read-only afterwards: any thread may
 * call the const functions. Errors never quote a value. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define SECRETS_MAX 64		  /* names holod keeps */
#define SECRETS_MAX_NAME_BYTES 64 /* [A-Za-z_][A-Za-z0-9_]* */
#define SECRETS_MAX_VALUE_BYTES 4096
#define SECRETS_MAX_FILE_BYTES (256 * 1024)
#define SECRETS_PLACEHOLDER_OPEN "{{secret:"
#define SECRETS_PLACEHOLDER_CLOSE "}}"

struct secrets;

struct secrets *secrets_create(void);
/* Wipes every value, then frees. Accepts NULL. */
void secrets_destroy(struct secrets *s);

/* Reads the vault at `path`. A missing file is fine unless `must_exist`. Refused (-EPERM) when
 * it is not a regular file, not owned by this uid or readable or writable by others than its
 * owner (mode & 077); -EINVAL for a line that is not NAME=value, a bad name, a name defined
 * twice, an empty or untypable value; -E2BIG over the limits. err names the file, the line and
 * the name, never the value. */
int secrets_load_file(struct secrets *s, const char *path, bool must_exist, char *err, size_t errlen);
/* Adds each environment variable of the comma-separated `names` as a secret of the same name
 * and removes it from the environment. -ENOENT for one that is not set; as above otherwise. */
int secrets_load_env(struct secrets *s, const char *names, char *err, size_t errlen);

size_t secrets_count(const struct secrets *s);
/* The i-th name, in the order they were added; NULL past the end. */
const char *secrets_name(const struct secrets *s, size_t i);
/* The names as "A, B, C" (malloc'd; "" for none). */
char *secrets_names_text(const struct secrets *s);

/* Whether `text` holds a {{secret:...}} placeholder at all. */
bool secrets_has_placeholder(const char *text);
/* `text` with each {{secret:NAME}} replaced by NAME's value, in *ret (malloc'd: free it with
 * secrets_text_free); *ret_n: how many were replaced. -ENOKEY for an unknown NAME, -EINVAL for a
 * placeholder that does not close or whose name is not one, with err naming the name (s may
 * be NULL: no secrets). */
int secrets_expand(const struct secrets *s, const char *text, char **ret, size_t *ret_n, char *err,
		   size_t errlen);
/* Wipes and frees a text secrets_expand() returned. Accepts NULL. */
void secrets_text_free(char *text);
/* Replaces, in place, every value found in *text (a malloc'd string, may be NULL) by its
 * {{secret:NAME}} (the longest value first where two start at one byte): what the model wrote
 * after reading a value off the screen is journaled and kept as the placeholder. Returns how
 * many were replaced. */
size_t secrets_redact(const struct secrets *s, char **text);
