/* What /proc/self/smaps says of this process's mappings: the tests of huge pages and of the
 * weights' resident pages. Include after test.h (REQUIRE). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The VmFlags of the mapping holding p have "hg" (MADV_HUGEPAGE): 1, 0, or -1 (no smaps, or no
 * mapping holds p). */
static inline int test_vm_hugepage(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -1;
	char line[512];
	bool in = false;
	int r = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = lo <= (uintptr_t)p && (uintptr_t)p < hi;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			r = strstr(line, " hg") != NULL;
			break;
		}
	}
	fclose(f);
	return r;
}

/* Resident KiB of the mappings of `file` (a path's tail); -1 where none maps it. */
static inline long test_map_rss_kb(const char *file)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	REQUIRE(f);
	char line[1024], perms[8];
	bool in = false;
	long kb = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b, v;
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3) /* a mapping's first line */
			in = strstr(line, file) != NULL;
		else if (in && sscanf(line, "Rss: %lu kB", &v) == 1)
			kb = (kb < 0 ? 0 : kb) + (long)v;
	}
	fclose(f);
	return kb;
}
