/* Checked allocation for small, program-sized objects: OOM there is not recoverable. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t size)
{
	fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", size);
	abort();
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (!p)
		oom(size);
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (!p)
		oom(nmemb * size);
	return p;
}

void *xrealloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);
	if (!p)
		oom(size);
	return p;
}

void *xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	size_t total;
	if (!size_mul_ok(nmemb, size, &total)) {
		fprintf(stderr, "fatal: allocation size overflow (%zu x %zu)\n", nmemb, size);
		abort();
	}
	return xrealloc(ptr, total);
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *xasprintf(const char *format, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, format);
	int r = vasprintf(&s, format, ap);
	va_end(ap);
	if (r < 0)
		oom(strlen(format));
	return s;
}

bool size_mul_ok(size_t a, size_t b, size_t *ret)
{
	size_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return false;
	*ret = r;
	return true;
}

bool size_add_ok(size_t a, size_t b, size_t *ret)
{
	size_t r;
	if (__builtin_add_overflow(a, b, &r))
		return false;
	*ret = r;
	return true;
}
