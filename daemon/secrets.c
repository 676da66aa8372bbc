/* Secrets (see secrets.h). */
#include "secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "keys.h"

struct secret {
	char *name;
	char *value;
	size_t len;
};

struct secrets {
	struct secret v[SECRETS_MAX];
	size_t n;
};

struct secrets *secrets_create(void)
{
	return xcalloc(1, sizeof(struct secrets));
}

static void wipe_free(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}

void secrets_destroy(struct secrets *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].name);
		wipe_free(s->v[i].value, s->v[i].len);
	}
	free(s);
}

void secrets_text_free(char *text)
{
	if (text)
		wipe_free(text, strlen(text));
}

static bool name_char(char c, bool first)
{
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (!first && c >= '0' && c <= '9');
}

/* The length of the name at `p` (0: none), up to the first character that cannot be in one. */
static size_t name_len(const char *p, size_t max)
{
	size_t n = 0;
	while (n < max && name_char(p[n], n == 0))
		n++;
	return n;
}

static const struct secret *find(const struct secrets *s, const char *name, size_t len)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (strlen(s->v[i].name) == len && memcmp(s->v[i].name, name, len) == 0)
			return &s->v[i];
	return NULL;
}

/* Adds NAME (len bytes at name) = value (vlen bytes); `where` says where it was read. */
static int add(struct secrets *s, const char *name, size_t len, const char *value, size_t vlen,
	       const char *where, char *err, size_t errlen)
{
	if (len == 0 || len > SECRETS_MAX_NAME_BYTES || name_len(name, len) != len) {
		snprintf(err, errlen,
			 "%s: '%.*s' is not a secret name (letters, digits and '_', "
			 "not starting with a digit, at most %d bytes)",
			 where, (int)MIN(len, (size_t)SECRETS_MAX_NAME_BYTES), name, SECRETS_MAX_NAME_BYTES);
		return -EINVAL;
	}
	if (find(s, name, len)) {
		snprintf(err, errlen, "%s: the secret %.*s is defined twice", where, (int)len, name);
		return -EINVAL;
	}
	if (s->n >= SECRETS_MAX) {
		snprintf(err, errlen, "%s: more than %d secrets", where, SECRETS_MAX);
		return -E2BIG;
	}
	if (vlen == 0 || vlen > SECRETS_MAX_VALUE_BYTES) {
		snprintf(err, errlen, "%s: the secret %.*s is %s (at most %d bytes)", where, (int)len, name,
			 vlen ? "too long" : "empty", SECRETS_MAX_VALUE_BYTES);
		return vlen ? -E2BIG : -EINVAL;
	}
	char *v = xstrndup(value, vlen);
	/* keys_text_validate's sentence may quote a character: not repeated here */
	if (strlen(v) != vlen || keys_text_validate(v, NULL, 0) < 0) {
		wipe_free(v, vlen);
		snprintf(err, errlen,
			 "%s: the secret %.*s cannot be typed (invalid UTF-8, a NUL or "
			 "a control character other than tab and newline)",
			 where, (int)len, name);
		return -EINVAL;
	}
	s->v[s->n++] = (struct secret){.name = xstrndup(name, len), .value = v, .len = vlen};
	return 0;
}

int secrets_load_file(struct secrets *s, const char *path, bool must_exist, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	ssize_t got = 0;
	int r = 0;

	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		if (r == -ENOENT && !must_exist)
			return 0;
		snprintf(err, errlen, "cannot open the secrets file %s: %s%s", path, strerror(-r),
			 r == -ELOOP ? " (a symbolic link: refused)" : "");
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot stat the secrets file %s: %s", path, strerror(-r));
		goto close;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "the secrets file %s is not a regular file: refused", path);
		r = -EPERM;
		goto close;
	}
	if (st.st_uid != getuid()) {
		snprintf(err, errlen,
			 "the secrets file %s belongs to uid %u, not to holod's user "
			 "(uid %u): refused",
			 path, (unsigned)st.st_uid, (unsigned)getuid());
		r = -EPERM;
		goto close;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen,
			 "the secrets file %s is mode %04o: other users may read or "
			 "change it, refused (chmod 600 %s)",
			 path, (unsigned)(st.st_mode & 07777), path);
		r = -EPERM;
		goto close;
	}
	if (st.st_size > SECRETS_MAX_FILE_BYTES) {
		snprintf(err, errlen, "the secrets file %s is %lld bytes, over %d", path,
			 (long long)st.st_size, SECRETS_MAX_FILE_BYTES);
		r = -E2BIG;
		goto close;
	}
	buf = xmalloc(SECRETS_MAX_FILE_BYTES + 1);
	for (;;) {
		ssize_t n = read(fd, buf + got, (size_t)SECRETS_MAX_FILE_BYTES + 1 - (size_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot read the secrets file %s: %s", path, strerror(-r));
			goto close;
		}
		if (n == 0)
			break;
		got += n;
		if (got > SECRETS_MAX_FILE_BYTES) {
			snprintf(err, errlen, "the secrets file %s is over %d bytes", path,
				 SECRETS_MAX_FILE_BYTES);
			r = -E2BIG;
			goto close;
		}
	}
	/* NAME=value per line, the value verbatim to the end of the line; # comments, blank
	 * lines */
	size_t line = 0;
	for (const char *p = buf, *end = buf + got; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		line++;
		if (e > p && *p != '#') {
			char where[PATH_MAX + 32];
			snprintf(where, sizeof(where), "%s:%zu", path, line);
			const char *eq = memchr(p, '=', (size_t)(e - p));
			if (!eq) {
				snprintf(err, errlen, "%s: expected NAME=value", where);
				r = -EINVAL;
				goto close;
			}
			if ((r = add(s, p, (size_t)(eq - p), eq + 1, (size_t)(e - eq - 1), where, err,
				     errlen)) < 0)
				goto close;
		}
		p = nl ? nl + 1 : end;
	}
close:
	if (buf)
		wipe_free(buf, SECRETS_MAX_FILE_BYTES + 1);
	close(fd);
	return r;
}

int secrets_load_env(struct secrets *s, const char *names, char *err, size_t errlen)
{
	for (const char *p = names; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		char *name = xstrndup(p, len);
		char where[SECRETS_MAX_NAME_BYTES + 64];
		snprintf(where, sizeof(where), "--secret-env %.*s", SECRETS_MAX_NAME_BYTES, name);
		const char *v = len ? getenv(name) : NULL;
		int r;
		if (len && !v) {
			snprintf(err, errlen, "%s: no such environment variable", where);
			r = -ENOENT;
		} else {
			r = add(s, name, len, v ? v : "", v ? strlen(v) : 0, where, err, errlen);
		}
		if (r >= 0)
			unsetenv(name);
		free(name);
		if (r < 0)
			return r;
		p = c ? c + 1 : p + len;
	}
	return 0;
}

size_t secrets_count(const struct secrets *s)
{
	return s ? s->n : 0;
}

const char *secrets_name(const struct secrets *s, size_t i)
{
	return s && i < s->n ? s->v[i].name : NULL;
}

char *secrets_names_text(const struct secrets *s)
{
	size_t len = 1;
	for (size_t i = 0; i < secrets_count(s); i++)
		len += strlen(s->v[i].name) + 2;
	char *t = xmalloc(len);
	t[0] = '\0';
	for (size_t i = 0; i < secrets_count(s); i++) {
		if (i)
			strcat(t, ", ");
		strcat(t, s->v[i].name);
	}
	return t;
}

size_t secrets_redact(const struct secrets *s, char **text)
{
	if (!text || !*text || !secrets_count(s))
		return 0;
	const char *in = *text;
	size_t n = 0, len = 0, cap = strlen(in) + 1;
	char *out = xmalloc(cap);
	for (const char *p = in; *p;) {
		const struct secret *best = NULL;
		for (size_t i = 0; i < s->n; i++)
			if (strncmp(p, s->v[i].value, s->v[i].len) == 0 && (!best || s->v[i].len > best->len))
				best = &s->v[i];
		const char *add = p;
		size_t alen = 1;
		char ph[SECRETS_MAX_NAME_BYTES + 16];
		if (best) {
			snprintf(ph, sizeof(ph), SECRETS_PLACEHOLDER_OPEN "%s" SECRETS_PLACEHOLDER_CLOSE,
				 best->name);
			add = ph;
			alen = strlen(ph);
			p += best->len;
			n++;
		} else {
			p++;
		}
		if (len + alen + 1 > cap) {
			cap = 2 * (len + alen + 1);
			out = xrealloc(out, cap);
		}
		memcpy(out + len, add, alen);
		len += alen;
	}
	out[len] = '\0';
	if (!n) {
		free(out);
		return 0;
	}
	wipe_free(*text, strlen(*text));
	*text = out;
	return n;
}

bool secrets_has_placeholder(const char *text)
{
	return text && strstr(text, SECRETS_PLACEHOLDER_OPEN);
}

int secrets_expand(const struct secrets *s, const char *text, char **ret, size_t *ret_n, char *err,
		   size_t errlen)
{
	const size_t olen = strlen(SECRETS_PLACEHOLDER_OPEN), clen = strlen(SECRETS_PLACEHOLDER_CLOSE);
	size_t cap = strlen(text) + 1, len = 0, n = 0;
	char *out = xmalloc(cap);
	const char *p = text, *o;

	while ((o = strstr(p, SECRETS_PLACEHOLDER_OPEN))) {
		const char *name = o + olen;
		size_t nl = name_len(name, SECRETS_MAX_NAME_BYTES + 1);
		if (nl == 0 || nl > SECRETS_MAX_NAME_BYTES ||
		    strncmp(name + nl, SECRETS_PLACEHOLDER_CLOSE, clen) != 0) {
			snprintf(err, errlen,
				 "a secret placeholder must be {{secret:NAME}} with NAME "
				 "letters, digits and '_' (at most %d bytes): '%.40s' is not",
				 SECRETS_MAX_NAME_BYTES, o);
			wipe_free(out, cap);
			return -EINVAL;
		}
		const struct secret *sec = find(s, name, nl);
		if (!sec) {
			char *known = secrets_names_text(s);
			snprintf(err, errlen, "unknown secret '%.*s' (%s%s)", (int)nl, name,
				 known[0] ? "holod has: " :
					    "holod has no secrets: see --secrets and "
					    "--secret-env",
				 known);
			free(known);
			wipe_free(out, cap);
			return -ENOKEY;
		}
		size_t need = len + (size_t)(o - p) + sec->len + strlen(o + olen + nl + clen) + 1;
		if (need > cap) {
			char *bigger = xmalloc(need);
			memcpy(bigger, out, len);
			wipe_free(out, cap);
			out = bigger;
			cap = need;
		}
		memcpy(out + len, p, (size_t)(o - p));
		len += (size_t)(o - p);
		memcpy(out + len, sec->value, sec->len);
		len += sec->len;
		n++;
		p = name + nl + clen;
	}
	size_t rest = strlen(p);
	if (len + rest + 1 > cap) {
		char *bigger = xmalloc(len + rest + 1);
		memcpy(bigger, out, len);
		wipe_free(out, cap);
		out = bigger;
	}
	memcpy(out + len, p, rest + 1);
	*ret = out;
	*ret_n = n;
	return 0;
}
