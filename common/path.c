/* XDG base directories (https://specifications.freedesktop.org/basedir-spec/). */
#include "common.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *home_dir(void)
{
	const char *h = getenv("HOME");
	if (h && h[0] == '/')
		return h;
	struct passwd *pw = getpwuid(getuid());
	return pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
}

/* /tmp/runtime-<uid>, created 0700; refused unless it is a real directory we own that nobody
 * else can enter (another user may have created it first to catch our socket). */
static int runtime_fallback(char **ret)
{
	char *p = xasprintf("/tmp/runtime-%u", (unsigned)getuid());
	struct stat st;

	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		goto fail_errno;
	if (lstat(p, &st) < 0)
		goto fail_errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 0077)) {
		free(p);
		return -ENXIO;
	}
	*ret = p;
	return 0;
fail_errno:
	free(p);
	return -errno;
}

char *path_join(const char *a, const char *b)
{
	size_t la = strlen(a);
	while (la > 1 && a[la - 1] == '/')
		la--;
	while (*b == '/')
		b++;
	return xasprintf("%.*s/%s", (int)la, a, b);
}

int path_xdg(enum path_kind kind, const char *app, char **ret)
{
	static const struct {
		const char *env;
		const char *home_suffix;
	} table[] = {
		[PATH_RUNTIME] = {"XDG_RUNTIME_DIR", NULL},
		[PATH_STATE] = {"XDG_STATE_HOME", ".local/state"},
		[PATH_CONFIG] = {"XDG_CONFIG_HOME", ".config"},
		[PATH_DATA] = {"XDG_DATA_HOME", ".local/share"},
		[PATH_CACHE] = {"XDG_CACHE_HOME", ".cache"},
	};
	char *base = NULL;

	if ((unsigned)kind >= ARRAY_SIZE(table))
		return -EINVAL;

	const char *v = getenv(table[kind].env);
	if (v && v[0] == '/') {
		base = xstrdup(v);
	} else if (kind == PATH_RUNTIME) {
		base = xasprintf("/run/user/%u", (unsigned)getuid());
		struct stat st;
		if (stat(base, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
			free(base);
			/* No login session (a root shell, a container, a CI job): a private directory
			 * in /tmp, as Qt and tmux do, so the daemon still starts. */
			int r = runtime_fallback(&base);
			if (r < 0)
				return r;
		}
	} else {
		const char *h = home_dir();
		if (!h)
			return -ENXIO;
		base = path_join(h, table[kind].home_suffix);
	}

	if (app) {
		char *full = path_join(base, app);
		free(base);
		base = full;
	}
	*ret = base;
	return 0;
}

int path_mkdir_p(const char *path, unsigned mode)
{
	char *p = xstrdup(path);
	int r = 0;

	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char saved = *s;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST) {
			r = -errno;
			goto out;
		}
		*s = saved;
		if (saved == '\0')
			break;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		r = -errno;
	else if (!S_ISDIR(st.st_mode))
		r = -ENOTDIR;
out:
	free(p);
	return r;
}
