/* Fuzz target for steps: the grammar, the parser and the canonical serializer together.
 *
 * Input: a step text. Invariants (a violation aborts, so the fuzzer reports it like a crash):
 *   - no dead end: wherever the grammar stands (after the longest accepted prefix), the step is
 *     complete or some byte is accepted;
 *   - the grammar accepts only what the parser accepts (a whole grammar step always parses);
 *   - every step the parser accepts serializes, its canonical form is a whole grammar step, and
 *     parsing that form gives back the same canonical form.
 *
 * With libFuzzer: tools/fuzz/build.sh, then tools/fuzz/run.sh policy-step (docs/fuzzing.md).
 * New crashers go into tests/policy/corpus/ named ok-* (must parse) or bad-* (must not).
 *
 * Without HOLOD_LIBFUZZER this file builds a replay driver (a `unit` test): every file of the
 * corpus directory given as argv[1] is run and must have the outcome its name promises.
 * `--write-seeds DIR` writes the seed corpus (the generated valid steps of corpus.h and the
 * invalid texts below) into DIR.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "policy-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct policy_grammar *grammar;
static int last_outcome; /* 1: parsed, 0: rejected */

static void check(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "invariant violated: %s\n", what);
		abort();
	}
}

static bool whole_step(const char *s, size_t n)
{
	struct policy_matcher m;
	policy_matcher_init(&m, grammar);
	return policy_matcher_feed(&m, s, n) == 0 && policy_matcher_is_complete(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!grammar) {
		grammar = policy_grammar_create_holo3();
		check(grammar != NULL, "the grammar builds");
	}
	struct policy_matcher m;
	policy_matcher_init(&m, grammar);
	size_t k = 0;
	for (; k < size; k++) {
		struct policy_matcher t = m;
		bool ok = policy_grammar_step(&t, data[k]);
		check(ok == (policy_matcher_feed(&m, data + k, 1) == 0), "step and feed agree");
		if (!ok)
			break;
	}
	if (!policy_matcher_is_complete(&m)) {
		bool any = false;
		for (int b = 0; b < 256 && !any; b++) {
			struct policy_matcher t = m;
			any = policy_matcher_feed(&t, &(uint8_t){(uint8_t)b}, 1) == 0;
		}
		check(any, "no dead end");
	}
	bool grammar_ok = k == size && policy_matcher_is_complete(&m);

	struct policy_step st;
	char err[256];
	int r = policy_step_parse((const char *)data, size, &st, err, sizeof(err));
	last_outcome = r == 0;
	check(r == 0 || r == -EINVAL || r == -E2BIG, "parse errors are -EINVAL or -E2BIG");
	check(!grammar_ok || r == 0, "a grammar step parses");
	if (r < 0)
		return 0;
	char *canon = policy_step_to_json(&st);
	check(canon != NULL, "a parsed step serializes");
	check(whole_step(canon, strlen(canon)), "the canonical form is a grammar step");
	struct policy_step again;
	check(policy_step_parse(canon, strlen(canon), &again, err, sizeof(err)) == 0,
	      "the canonical form parses");
	char *canon2 = policy_step_to_json(&again);
	check(canon2 && strcmp(canon, canon2) == 0, "the canonical form is stable");
	free(canon2);
	free(canon);
	policy_step_finish(&again);
	policy_step_finish(&st);
	return 0;
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

#define PRE "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":"

/* Texts the parser must refuse (the grammar too). */
static const char *const seed_bads[] = {
	"",
	"{}",
	"[]",
	"{\"note\":null,\"thought\":\"t\"}",
	PRE "\"click\",\"x\":1,\"y\":2}}",
	PRE "\"click\",\"element\":\"e\",\"x\":1001,\"y\":2}}",
	PRE "\"wait\",\"duration\":1.5}}",
	PRE "\"wait\",\"duration\":31}}",
	PRE "\"hotkey\",\"keys\":[\"ctr\"]}}",
	PRE "\"hotkey\",\"keys\":[]}}",
	PRE "\"hotkey\",\"keys\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]}}",
	PRE "\"fly\"}}",
	PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":2,\"direction\":\"up\"}}",
	"{\"note\":\"\\u0000\",\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}",
	"{\"note\":\"\\udc00\",\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}",
	"{\"note\":\"\xc3\",\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}",
	"{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}x",
};

/* Texts the parser takes though the grammar does not (other layouts). */
static const char *const seed_layouts[] = {
	"{ \"note\" : null , \"thought\" : \"t\" , \"tool_call\" : { \"tool_name\" : \"wait\" , "
	"\"duration\" : 3 } }",
	"{\"tool_call\":{\"y\":2,\"x\":1,\"element\":\"e\",\"tool_name\":\"click\"},\"thought\":\"t\","
	"\"note\":\"n\"}",
	PRE "\"hotkey\",\"keys\":[\"\\/\"]}}",
	PRE "\"key_down\",\"key\":\"\\u0041\"}}",
};

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(text, 1, strlen(text), f) != strlen(text) || fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}

static int write_seeds(const char *dir)
{
	struct corpus c = {0};
	char name[64];
	int r = 0;
	corpus_build(&c);
	for (size_t i = 0; i < c.n && r == 0; i++) {
		snprintf(name, sizeof(name), "ok-gen-%03zu", i);
		r = write_file(dir, name, c.items[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(seed_layouts) && r == 0; i++) {
		snprintf(name, sizeof(name), "ok-layout-%02zu", i);
		r = write_file(dir, name, seed_layouts[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(seed_bads) && r == 0; i++) {
		snprintf(name, sizeof(name), "bad-%02zu", i);
		r = write_file(dir, name, seed_bads[i]);
	}
	corpus_free(&c);
	return r < 0 ? 1 : 0;
}

static bool replay_one(const uint8_t *data, size_t size)
{
	LLVMFuzzerTestOneInput(data, size);
	return last_outcome;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
		return write_seeds(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR | --write-seeds DIR\n", argv[0]);
		return 2;
	}
	int r = fuzz_replay(argv[1], replay_one, 20);
	policy_grammar_destroy(grammar);
	return r;
}
#endif
