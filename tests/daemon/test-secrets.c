/* Secrets (daemon/secrets.c): the vault's refusals (mode, symlink, lines, names, values) with
 * messages that never quote a value, the environment's secrets taken out of it, the expansion
 * of {{secret:NAME}} and its errors, and the system prompt's rule naming them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "policy.h"
#include "secrets.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char dir[] = "/tmp/holod-secrets.XXXXXX";

static char *vault(const char *text, unsigned mode)
{
	char *p = path_join(dir, "secrets");
	FILE *f = fopen(p, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
	REQUIRE(chmod(p, mode) == 0);
	return p;
}

/* Loads `text` as a vault of `mode`; the error must hold `want` and never "VALUE". */
static int load(const char *text, unsigned mode, const char *want)
{
	struct secrets *s = secrets_create();
	char err[512] = "";
	char *p = vault(text, mode);
	int r = secrets_load_file(s, p, true, err, sizeof(err));
	if (want && !strstr(err, want)) {
		fprintf(stderr, "error '%s' lacks '%s'\n", err, want);
		test_failures++;
	}
	CHECK(!strstr(err, "VALUE"));
	secrets_destroy(s);
	free(p);
	return r;
}

static void test_vault(void)
{
	CHECK_INT_EQ(load("A=VALUE1\n", 0644,
			  "is mode 0644: other users may read or change it, "
			  "refused (chmod 600 "),
		     -EPERM);
	CHECK_INT_EQ(load("A=VALUE1\n", 0640, "is mode 0640"), -EPERM);
	CHECK_INT_EQ(load("A=VALUE1\n", 0600, NULL), 0);
	CHECK_INT_EQ(load("A=VALUE1\n", 0400, NULL), 0);
	CHECK_INT_EQ(load("# comment\n\nA=VALUE1\nnot a line\n", 0600,
			  "secrets:4: expected "
			  "NAME=value"),
		     -EINVAL);
	CHECK_INT_EQ(load("1A=VALUE1\n", 0600, "secrets:1: '1A' is not a secret name"), -EINVAL);
	CHECK_INT_EQ(load("A B=VALUE1\n", 0600, "'A B' is not a secret name"), -EINVAL);
	CHECK_INT_EQ(load("A=VALUE1\nA=VALUE2\n", 0600, "secrets:2: the secret A is defined twice"), -EINVAL);
	CHECK_INT_EQ(load("A=\n", 0600, "secrets:1: the secret A is empty"), -EINVAL);
	CHECK_INT_EQ(load("A=VALUE\001\n", 0600, "secrets:1: the secret A cannot be typed"), -EINVAL);
	char big[SECRETS_MAX_VALUE_BYTES + 16];
	memset(big, 'x', sizeof(big));
	memcpy(big, "A=", 2);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT_EQ(load(big, 0600, "the secret A is too long"), -E2BIG);

	/* a symbolic link to a good vault, a missing file */
	struct secrets *s = secrets_create();
	char err[512];
	char *p = vault("A=VALUE1\n", 0600), *link = path_join(dir, "link");
	REQUIRE(symlink(p, link) == 0);
	CHECK(secrets_load_file(s, link, true, err, sizeof(err)) < 0);
	CHECK(strstr(err, "a symbolic link: refused") != NULL);
	char *missing = path_join(dir, "missing");
	CHECK_INT_EQ(secrets_load_file(s, missing, false, err, sizeof(err)), 0);
	CHECK_INT_EQ(secrets_load_file(s, missing, true, err, sizeof(err)), -ENOENT);
	CHECK_INT_EQ(secrets_count(s), 0);
	unlink(link);
	unlink(p);
	free(link);
	free(p);
	free(missing);
	secrets_destroy(s);
}

static void test_env_and_expand(void)
{
	struct secrets *s = secrets_create();
	char err[512], *out = NULL;
	size_t n = 0;
	char *p = vault("# two\nPASS=p4ss word\nUSER=alice\n", 0600);

	REQUIRE(secrets_load_file(s, p, true, err, sizeof(err)) == 0);
	setenv("HOLO_TEST_TOKEN", "t0ken", 1);
	CHECK_INT_EQ(secrets_load_env(s, "HOLO_TEST_TOKEN", err, sizeof(err)), 0);
	CHECK(getenv("HOLO_TEST_TOKEN") == NULL);
	CHECK_INT_EQ(secrets_load_env(s, "HOLO_TEST_UNSET", err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "--secret-env HOLO_TEST_UNSET: no such environment variable") != NULL);
	CHECK_INT_EQ(secrets_count(s), 3);
	char *names = secrets_names_text(s);
	CHECK_STR_EQ(names, "PASS, USER, HOLO_TEST_TOKEN");
	free(names);

	CHECK(!secrets_has_placeholder("plain {{text}}"));
	CHECK(secrets_has_placeholder("a {{secret:X}}"));
	REQUIRE(secrets_expand(s, "{{secret:USER}}:{{secret:PASS}} {{secret:HOLO_TEST_TOKEN}}!", &out, &n,
			       err, sizeof(err)) == 0);
	CHECK_STR_EQ(out, "alice:p4ss word t0ken!");
	CHECK_INT_EQ(n, 3);
	secrets_text_free(out);
	REQUIRE(secrets_expand(s, "none here", &out, &n, err, sizeof(err)) == 0);
	CHECK_STR_EQ(out, "none here");
	CHECK_INT_EQ(n, 0);
	secrets_text_free(out);
	CHECK_INT_EQ(secrets_expand(s, "x{{secret:NOPE}}", &out, &n, err, sizeof(err)), -ENOKEY);
	CHECK_STR_EQ(err, "unknown secret 'NOPE' (holod has: PASS, USER, HOLO_TEST_TOKEN)");
	CHECK_INT_EQ(secrets_expand(s, "{{secret:PASS}", &out, &n, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "must be {{secret:NAME}}") != NULL);
	CHECK_INT_EQ(secrets_expand(s, "{{secret:}}", &out, &n, err, sizeof(err)), -EINVAL);
	CHECK_INT_EQ(secrets_expand(NULL, "{{secret:PASS}}", &out, &n, err, sizeof(err)), -ENOKEY);
	CHECK(strstr(err, "holod has no secrets") != NULL);

	/* the model's own copies of values: replaced in place, the longest first */
	char *text = xstrdup("user alice, pw p4ss word; alice again");
	CHECK_INT_EQ(secrets_redact(s, &text), 3);
	CHECK_STR_EQ(text, "user {{secret:USER}}, pw {{secret:PASS}}; {{secret:USER}} again");
	CHECK_INT_EQ(secrets_redact(s, &text), 0);
	free(text);
	text = NULL;
	CHECK_INT_EQ(secrets_redact(s, &text), 0);

	/* the system prompt's rule: the names and the placeholder, never a value */
	char rule[POLICY_MAX_SECRETS_RULE];
	struct policy_env env = {.secret_names = "PASS, USER"};
	policy_secrets_rule(&env, rule, sizeof(rule));
	CHECK(strstr(rule, "Secrets you can type without seeing them: PASS, USER. To type one, "
			   "write {{secret:NAME}} in a write action's content (e.g. {{secret:PASS}})"));
	env.secret_names = NULL;
	policy_secrets_rule(&env, rule, sizeof(rule));
	CHECK_STR_EQ(rule, "- Never invent passwords, keys or other secrets: when one is needed "
			   "and not given, answer that it is missing.\n");
	unlink(p);
	free(p);
	secrets_destroy(s);
}

int main(void)
{
	REQUIRE(mkdtemp(dir));
	test_vault();
	test_env_and_expand();
	rmdir(dir);
	return test_exit();
}
