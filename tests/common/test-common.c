#include "common.h"
#include "test.h"

#include <stdlib.h>
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
	CHECK_STR_EQ(time_format_rfc3339(1700000000123456ull, buf, sizeof(buf)),
		     "2023-11-14T22:13:20.123Z");
}

int main(void)
{
	test_log();
	test_alloc();
	test_paths();
	test_time();
	return test_exit();
}
