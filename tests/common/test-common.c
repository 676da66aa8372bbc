#include "common.h"
#include "test.h"
#include "test-smaps.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

static void test_log(void)
{
	CHECK_INT_EQ(log_error_errno(EIO, "expected test message"), -EIO);
	CHECK_INT_EQ(log_error_errno(-ENOENT, "expected test message"), -ENOENT);
	CHECK_INT_EQ(log_debug_errno(0, "nothing"), 0);
	CHECK_INT_EQ(log_level_from_string("debug"), LOG_LEVEL_DEBUG);
	CHECK_INT_EQ(log_level_from_string("WARNING"), LOG_LEVEL_WARNING);
	CHECK_INT_EQ(log_level_from_string("loud"), -EINVAL);
	errno = 42;
	log_debug("does not clobber errno");
	CHECK_INT_EQ(errno, 42);
}

static void test_alloc(void)
{
	size_t r = 0;
	CHECK(size_mul_ok(1u << 20, 1u << 10, &r) && r == (1u << 30));
	CHECK(!size_mul_ok(SIZE_MAX / 2 + 1, 2, &r));
	CHECK(!size_add_ok(SIZE_MAX, 1, &r));
	char *s = xasprintf("%s-%d", "a", 7);
	CHECK_STR_EQ(s, "a-7");
	free(s);
	s = xstrndup("hello", 3);
	CHECK_STR_EQ(s, "hel");
	free(s);
}

/* alloc_huge: buffers from HUGE_PAGE_MIN_BYTES up 2 MiB-aligned and marked for huge pages to
 * the end of their last 2 MiB page (a tail in 4 KiB pages reads slower), small ones 64-aligned */
static void test_alloc_huge(void)
{
	const size_t big = 3 * HUGE_PAGE_BYTES + 4099;
	char *p = alloc_huge(big);
	REQUIRE(p);
	CHECK((uintptr_t)p % HUGE_PAGE_BYTES == 0);
	memset(p, 1, big);
	CHECK(p[big - 1] == 1);
	/* the kernel has THP (the madvise mode is what the default of most distributions needs) */
	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0) {
		CHECK_INT_EQ(test_vm_hugepage(p), 1);
		CHECK_INT_EQ(test_vm_hugepage(p + 2 * HUGE_PAGE_BYTES), 1);
		/* the tail's whole 2 MiB page is the buffer's, marked */
		CHECK_INT_EQ(test_vm_hugepage(p + 4 * HUGE_PAGE_BYTES - 1), 1);
		long long h = huge_bytes_in(p, big);
		CHECK(h >= 0 && h <= (long long)(4 * HUGE_PAGE_BYTES));
		/* whether the kernel found free 2 MiB pages is its business: said, not held */
		printf("alloc_huge: %lld of %zu bytes in huge pages\n", h, big);
	}
	free(p);
	/* a buffer of less than one huge page but past HUGE_PAGE_MIN_BYTES: one whole huge page */
	char *m = alloc_huge(HUGE_PAGE_MIN_BYTES + 100);
	REQUIRE(m);
	CHECK((uintptr_t)m % HUGE_PAGE_BYTES == 0);
	memset(m, 3, HUGE_PAGE_MIN_BYTES + 100);
	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0) {
		CHECK_INT_EQ(test_vm_hugepage(m), 1);
		CHECK_INT_EQ(test_vm_hugepage(m + HUGE_PAGE_BYTES - 1), 1);
	}
	free(m);
	CHECK(alloc_huge(SIZE_MAX - 10) == NULL && errno == ENOMEM);
	/* the accounts' figure: what those calls allocated */
	CHECK_INT_EQ(alloc_huge_bytes(100), 100);
	CHECK_INT_EQ(alloc_huge_bytes(HUGE_PAGE_MIN_BYTES - 1), HUGE_PAGE_MIN_BYTES - 1);
	CHECK_INT_EQ(alloc_huge_bytes(HUGE_PAGE_MIN_BYTES + 100), HUGE_PAGE_BYTES);
	CHECK_INT_EQ(alloc_huge_bytes(2 * HUGE_PAGE_BYTES), 2 * HUGE_PAGE_BYTES);
	CHECK_INT_EQ(alloc_huge_bytes(3 * HUGE_PAGE_BYTES + 4099), 4 * HUGE_PAGE_BYTES);
	char *s = alloc_huge(100);
	REQUIRE(s);
	CHECK((uintptr_t)s % 64 == 0);
	memset(s, 2, 100);
	free(s);
}

static void test_paths(void)
{
	char tmpl[] = "/tmp/holod-test-XXXXXX";
	REQUIRE(mkdtemp(tmpl));
	char *p = NULL;
	struct stat st;

	setenv("XDG_STATE_HOME", tmpl, 1);
	CHECK_INT_EQ(path_xdg(PATH_STATE, "holod", &p), 0);
	char *want = xasprintf("%s/holod", tmpl);
	CHECK_STR_EQ(p, want);
	free(want);
	free(p);

	/* Relative values are ignored (XDG spec): falls back to $HOME. */
	setenv("XDG_CONFIG_HOME", "relative/dir", 1);
	setenv("HOME", "/home/someone", 1);
	CHECK_INT_EQ(path_xdg(PATH_CONFIG, NULL, &p), 0);
	CHECK_STR_EQ(p, "/home/someone/.config");
	free(p);

	setenv("XDG_RUNTIME_DIR", tmpl, 1);
	CHECK_INT_EQ(path_xdg(PATH_RUNTIME, "holod", &p), 0);
	want = xasprintf("%s/holod", tmpl);
	CHECK_STR_EQ(p, want);
	free(want);
	free(p);

	/* Without XDG_RUNTIME_DIR: /run/user/<uid> or a private directory of ours. */
	unsetenv("XDG_RUNTIME_DIR");
	CHECK_INT_EQ(path_xdg(PATH_RUNTIME, NULL, &p), 0);
	CHECK(p && stat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
	      (st.st_mode & 0077) == 0);
	free(p);

	char *deep = xasprintf("%s/a/b/c", tmpl);
	CHECK_INT_EQ(path_mkdir_p(deep, 0700), 0);
	CHECK(stat(deep, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
	CHECK_INT_EQ(path_mkdir_p(deep, 0700), 0); /* idempotent */
	char *file = xasprintf("%s/file", tmpl);
	FILE *f = fopen(file, "w");
	REQUIRE(f);
	fclose(f);
	CHECK_INT_EQ(path_mkdir_p(file, 0700), -ENOTDIR);

	p = path_join("/a//", "/b");
	CHECK_STR_EQ(p, "/a/b");
	free(p);

	char *cmd = xasprintf("rm -rf '%s'", tmpl);
	CHECK(system(cmd) == 0);
	free(cmd);
	free(deep);
	free(file);
}

static void test_time(void)
{
	uint64_t a = time_mono_us();
	time_sleep_us(2000);
	uint64_t b = time_mono_us();
	CHECK(b - a >= 2000);
	char buf[64];
	CHECK_STR_EQ(time_format_rfc3339(1700000000123456ull, buf, sizeof(buf)), "2023-11-14T22:13:20.123Z");
}

/* utf8_decode() on one input: the length it takes (0: rejected) and the code point. */
static void check_decode(const char *s, size_t len, size_t want_n, uint32_t want_cp)
{
	uint32_t cp = 0xDEAD;
	size_t n = utf8_decode(s, len, &cp);

	CHECK_INT_EQ((long long)n, (long long)want_n);
	if (want_n)
		CHECK_INT_EQ((long long)cp, (long long)want_cp);
	else
		CHECK_INT_EQ((long long)cp, 0xDEAD);
	CHECK(utf8_valid(s, len) == (want_n == len));
}

static void test_hex(void)
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		CHECK(hex_digit(digits[i]) == i);
		if (i >= 10)
			CHECK(hex_digit(digits[i] - 'a' + 'A') == i);
	}
	for (int c = -128; c < 256; c++) {
		bool is_hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
		if (!is_hex)
			CHECK(hex_digit(c) == -1);
	}
	CHECK(hex_digit((char)0xC3) == -1); /* a byte of UTF-8, whatever char's sign */
}

static void test_utf8(void)
{
	/* The shortest and longest code point of each length. */
	check_decode("A", 1, 1, 'A');
	check_decode("\0", 1, 1, 0);
	check_decode("\x7F", 1, 1, 0x7F);
	check_decode("\xC2\x80", 2, 2, 0x80);
	check_decode("\xDF\xBF", 2, 2, 0x7FF);
	check_decode("\xE0\xA0\x80", 3, 3, 0x800);
	check_decode("\xED\x9F\xBF", 3, 3, 0xD7FF);
	check_decode("\xEE\x80\x80", 3, 3, 0xE000);
	check_decode("\xEF\xBF\xBF", 3, 3, 0xFFFF);
	check_decode("\xF0\x90\x80\x80", 4, 4, 0x10000);
	check_decode("\xF4\x8F\xBF\xBF", 4, 4, 0x10FFFF);
	/* Overlong forms. */
	check_decode("\xC0\xAF", 2, 0, 0);
	check_decode("\xC1\xBF", 2, 0, 0);
	check_decode("\xE0\x80\xAF", 3, 0, 0);
	check_decode("\xE0\x9F\xBF", 3, 0, 0);
	check_decode("\xF0\x80\x80\xAF", 4, 0, 0);
	check_decode("\xF0\x8F\xBF\xBF", 4, 0, 0);
	/* Surrogates, and beyond U+10FFFF. */
	check_decode("\xED\xA0\x80", 3, 0, 0);
	check_decode("\xED\xBF\xBF", 3, 0, 0);
	check_decode("\xF4\x90\x80\x80", 4, 0, 0);
	check_decode("\xF5\x80\x80\x80", 4, 0, 0);
	check_decode("\xFF", 1, 0, 0);
	/* Truncated sequences, a lone continuation byte, a continuation that is not one. */
	check_decode("\xC3", 1, 0, 0);
	check_decode("\xE2\x82", 2, 0, 0);
	check_decode("\xF0\x9F\x98", 3, 0, 0);
	check_decode("\x80", 1, 0, 0);
	check_decode("\xE2\x28\xA1", 3, 0, 0);
	check_decode("", 0, 0, 0);
	/* Only the first sequence is decoded; validation covers the whole input. */
	check_decode("\xC3\xB6\xFF", 3, 2, 0xF6);
	CHECK(utf8_valid("a\xC3\xB6\xE2\x9C\x93\xF0\x9F\x98\x80z", 11));
	CHECK(utf8_valid("", 0));

	/* Every scalar value encodes to the sequence that decodes back to it; none else encodes. */
	size_t bad = 0;
	for (uint32_t cp = 0; cp <= 0x110000; cp++) {
		char buf[UTF8_MAX_SEQ];
		uint32_t back = 0;
		size_t n = utf8_encode(cp, buf);
		bool scalar = cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);

		if (scalar ? n == 0 || utf8_decode(buf, n, &back) != n || back != cp ||
				     n != (size_t)(cp < 0x80	? 1 :
						   cp < 0x800	? 2 :
						   cp < 0x10000 ? 3 :
								  4) :
			     n != 0)
			bad++;
	}
	CHECK_INT_EQ((long long)bad, 0);

	/* Maximal invalid subparts (Unicode 3.9, table 3-8's example), and proper prefixes. */
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\x80\x80", 2), 1);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xC0\xAF", 2), 1);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xE0\x80", 2), 1);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xED\xA0\x80", 3), 1);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xF4\x90", 2), 1);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xE1\x80\x41", 3), 2);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xF1\x80\x80\x41", 4), 3);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xF1\x80\x80", 3), 0);
	CHECK_INT_EQ((long long)utf8_invalid_prefix("\xE2", 1), 0);
}

int main(void)
{
	test_log();
	test_alloc();
	test_alloc_huge();
	test_paths();
	test_time();
	test_utf8();
	test_hex();
	return test_exit();
}
