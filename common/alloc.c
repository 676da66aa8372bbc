/* Checked allocation for small, program-sized objects: OOM there is not recoverable. */
#include "common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

size_t alloc_huge_bytes(size_t bytes)
{
	size_t whole;
	if (bytes < HUGE_PAGE_MIN_BYTES || !size_add_ok(bytes, HUGE_PAGE_BYTES - 1, &whole))
		return bytes;
	return whole & ~(HUGE_PAGE_BYTES - 1);
}

void *alloc_huge(size_t bytes)
{
	const size_t align = bytes >= HUGE_PAGE_MIN_BYTES ? HUGE_PAGE_BYTES : 64;
	/* from HUGE_PAGE_MIN_BYTES up, whole huge pages (common.h) */
	if (align == HUGE_PAGE_BYTES && bytes > SIZE_MAX - (HUGE_PAGE_BYTES - 1)) {
		errno = ENOMEM; /* no whole pages hold it */
		return NULL;
	}
	const size_t whole = alloc_huge_bytes(bytes);
	void *p = NULL;
	if (posix_memalign(&p, align, whole ? whole : 1) != 0) {
		errno = ENOMEM;
		return NULL;
	}
#ifdef MADV_HUGEPAGE
	/* the whole pages of the buffer; the kernel maps 2 MiB pages over the aligned 2 MiB
	 * ranges inside it (EINVAL where it has no THP: nothing to do) */
	long page = sysconf(_SC_PAGESIZE);
	if (align == HUGE_PAGE_BYTES && page > 0)
		(void)madvise(p, whole, MADV_HUGEPAGE);
#endif
	return p;
}

long long huge_bytes_in(const void *p, size_t bytes)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -1;
	const uintptr_t a = (uintptr_t)p, e = a + bytes;
	char line[512];
	bool in = false;
	long long total = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		long long kib;
		/* a mapping's first line: "lo-hi perms offset dev inode path" */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = lo < e && hi > a;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %lld kB", &kib) == 1)
			total += kib * 1024;
	}
	fclose(f);
	return total;
}
