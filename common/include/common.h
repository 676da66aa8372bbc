/* common: logging, checked allocation, XDG paths, monotonic time, UTF-8.
 *
 * The one public header of the common module. Everything here is safe to call from any thread:
 * the log sink serialises whole lines with a mutex, and nothing else holds state.
 */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- logging ---------------------------------------------------------------------------- */

enum log_level {
	LOG_LEVEL_ERROR = 3,
	LOG_LEVEL_WARNING = 4,
	LOG_LEVEL_NOTICE = 5,
	LOG_LEVEL_INFO = 6,
	LOG_LEVEL_DEBUG = 7,
};

/* Messages above this level are dropped. Default LOG_LEVEL_INFO, or $HOLOD_LOG_LEVEL
 * ("error", "warning", "notice", "info", "debug") read by log_setup_from_env(). */
void log_set_max_level(enum log_level level);
enum log_level log_get_max_level(void);
/* Parses a level name; returns the level or -EINVAL. */
int log_level_from_string(const char *name);
void log_setup_from_env(void);
/* Prefix every line with this program name (not copied: pass a string literal or argv[0]). */
void log_set_program_name(const char *name);

/* Writes one line to stderr as "<program>: <message>" (plus "[file:line] " at debug level).
 * When err != 0, ": <strerror(|err|)>" is appended. Returns -|err| so callers can write
 * `return log_error_errno(r, "...")`; returns 0 when err == 0. */
int log_internal(enum log_level level, int err, const char *file, int line, const char *func,
		 const char *format, ...) __attribute__((format(printf, 6, 7)));

#define log_full_errno(level, err, ...)                                                                      \
	log_internal((level), (err), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_full(level, ...) ((void)log_full_errno((level), 0, __VA_ARGS__))

#define log_debug(...) log_full(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_LEVEL_ERROR, __VA_ARGS__)

#define log_debug_errno(err, ...) log_full_errno(LOG_LEVEL_DEBUG, (err), __VA_ARGS__)
#define log_info_errno(err, ...) log_full_errno(LOG_LEVEL_INFO, (err), __VA_ARGS__)
#define log_notice_errno(err, ...) log_full_errno(LOG_LEVEL_NOTICE, (err), __VA_ARGS__)
#define log_warning_errno(err, ...) log_full_errno(LOG_LEVEL_WARNING, (err), __VA_ARGS__)
#define log_error_errno(err, ...) log_full_errno(LOG_LEVEL_ERROR, (err), __VA_ARGS__)

/* ---- checked allocation ------------------------------------------------------------------ */

/* Small allocations: abort with a message on OOM (programmer-visible, never returns NULL).
 * Use plain malloc and handle NULL for sizes that come from a client, an image or a model file. */
void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *ptr, size_t size);
void *xreallocarray(void *ptr, size_t nmemb, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Large buffers the CPU streams front to back at the memory's read bandwidth (weights, the
 * bench's read pass): from HUGE_PAGE_MIN_BYTES up, whole 2 MiB pages (the size rounded up to
 * HUGE_PAGE_BYTES, aligned to it) marked madvise(MADV_HUGEPAGE), so that where transparent huge
 * pages are "madvise" only (the default of many distributions) the kernel backs all of them with
 * 2 MiB pages: a 4 KiB-page stream takes a TLB miss every 4 KiB and the hardware prefetchers
 * stop at each page boundary (a 1 MiB q8 matrix in 4 KiB pages read at ~60% of the rate of the
 * same matrix in a 2 MiB page, AMD EPYC, docs/benchmarks.md). The rounding costs under 2 MiB a
 * buffer: nothing for Holotron-12B's matrices (tens of MiB), up to 4x for a 512 KiB one; smaller
 * buffers are 64-byte aligned in 4 KiB pages. Harmless where THP is off or "always". Pages the
 * allocator touched before the madvise (memory it reuses, or all of it under MALLOC_PERTURB_,
 * which meson test sets) stay 4 KiB until the kernel's khugepaged collapses them. NULL and errno
 * ENOMEM on failure; free with free(). */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)
#define HUGE_PAGE_MIN_BYTES ((size_t)512 << 10)
void *alloc_huge(size_t bytes);
/* The bytes alloc_huge(bytes) allocates (and, THP granting, holds resident once touched): bytes
 * rounded up to whole huge pages from HUGE_PAGE_MIN_BYTES, for the accounts of resident memory. */
size_t alloc_huge_bytes(size_t bytes);
/* Bytes of the anonymous huge pages (AnonHugePages in /proc/self/smaps) in the mappings that
 * overlap [p, p + bytes) (NULL, SIZE_MAX: the whole process); -1 where smaps cannot be read. */
long long huge_bytes_in(const void *p, size_t bytes);

/* Overflow-checked size arithmetic: returns true and writes *ret on success, false on overflow. */
bool size_mul_ok(size_t a, size_t b, size_t *ret);
bool size_add_ok(size_t a, size_t b, size_t *ret);

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLAMP(x, lo, hi) ((x) < (lo) ? (lo) : (x) > (hi) ? (hi) : (x))

/* ---- XDG paths --------------------------------------------------------------------------- */

enum path_kind {
	PATH_RUNTIME, /* $XDG_RUNTIME_DIR, else /run/user/<uid> if it exists, else /tmp/runtime-<uid> (0700, ours) */
	PATH_STATE,  /* $XDG_STATE_HOME, else ~/.local/state */
	PATH_CONFIG, /* $XDG_CONFIG_HOME, else ~/.config */
	PATH_DATA,   /* $XDG_DATA_HOME, else ~/.local/share */
	PATH_CACHE,  /* $XDG_CACHE_HOME, else ~/.cache */
};

/* Returns "<base>/<app>" (app may be NULL for the base alone) in *ret (caller frees).
 * Relative XDG values are ignored, as the XDG spec demands. -ENXIO when no base can be found. */
int path_xdg(enum path_kind kind, const char *app, char **ret);
/* mkdir -p with the given mode for every component it creates. */
int path_mkdir_p(const char *path, unsigned mode);
/* Joins two components with exactly one '/'. */
char *path_join(const char *a, const char *b);

/* ---- time -------------------------------------------------------------------------------- */

uint64_t time_mono_ns(void);
uint64_t time_mono_us(void);
/* Wall clock in microseconds since the epoch. */
uint64_t time_real_us(void);
/* Sleeps for the whole interval, resuming after signals. */
void time_sleep_us(uint64_t usec);
/* Formats a wall-clock time (us since epoch) as RFC 3339 UTC with milliseconds into buf. */
char *time_format_rfc3339(uint64_t real_us, char *buf, size_t size);

/* ---- hexadecimal ----------------------------------------------------------------------- */

/* The value (0 to 15) of one hexadecimal digit, either case; -1 for any other byte. */
static inline int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* ---- UTF-8 ------------------------------------------------------------------------------- */

/* Well-formed UTF-8 as Unicode defines it (Table 3-7): overlong forms, surrogates
 * (U+D800..U+DFFF), code points above U+10FFFF and truncated sequences are invalid everywhere
 * in holod. The functions take any bytes (no NUL needed; U+0000 is a valid one-byte sequence). */

/* The longest sequence. */
#define UTF8_MAX_SEQ 4
/* U+FFFD REPLACEMENT CHARACTER, what invalid bytes become where text must be valid. */
#define UTF8_REPLACEMENT "\xEF\xBF\xBD"

/* Length (1 to 4) of the well-formed sequence that s[0..len) starts with, its code point in
 * *ret_cp; 0 when it starts with none (len == 0 included; *ret_cp untouched). */
size_t utf8_decode(const void *s, size_t len, uint32_t *ret_cp);
/* Whether all of s[0..len) is well-formed UTF-8. */
bool utf8_valid(const void *s, size_t len);
/* Writes cp's sequence to out and returns its length (1 to 4); 0 for a surrogate or a value
 * above U+10FFFF, which have none. */
size_t utf8_encode(uint32_t cp, char out[UTF8_MAX_SEQ]);
/* How many bytes at the start of s[0..len) form a maximal invalid subpart (Unicode's
 * "substitution of maximal subparts", as WHATWG and Rust's from_utf8_lossy: each such part
 * becomes one U+FFFD), >= 1; 0 when s starts a well-formed sequence, or when s[0..len) is a
 * proper prefix of one that more bytes could complete. */
size_t utf8_invalid_prefix(const void *s, size_t len);
