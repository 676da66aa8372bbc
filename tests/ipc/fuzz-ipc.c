/* Fuzz target for the JSON that clients send: task requests (POST /v1/tasks), action requests
 * (POST /v1/actions) and single actions (a script's entries), parsed by ipc/.
 *
 * Input: the first byte selects the parser, the rest is the JSON text:
 *   'T' ipc_task_request_parse, 'A' ipc_action_request_parse,
 *   'p' / 'm' ipc_action_parse with pixel / model coordinates.
 * Invariants (a violation aborts, so the fuzzer reports it like a crash): a rejection returns
 * -EINVAL or -E2BIG with a message; an accepted input serializes, its JSON parses again to the
 * same JSON (the canonical form is a fixed point), and parsed values are inside their limits.
 *
 * Built with libFuzzer by tools/fuzz/build.sh (docs/fuzzing.md). Without HOLOD_LIBFUZZER this
 * file builds a replay driver (the `unit` test fuzz-ipc-corpus): every file of the corpus
 * directory given as argv[1] must have the outcome its name promises (ok-*: accepted, bad-*:
 * rejected). `--write-seeds DIR` writes the seed corpus (the tables below) into DIR.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int last_outcome; /* 1: accepted, 0: rejected */

static void check(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "invariant violated: %s\n", what);
		abort();
	}
}

static void check_rejection(int r, const char *err)
{
	check(r == -EINVAL || r == -E2BIG, "a rejection is EINVAL or E2BIG");
	check(err[0] != '\0', "a rejection says why");
}

static void check_action(const struct ipc_action *a, enum ipc_coords coords)
{
	int max = coords == IPC_COORDS_MODEL ? 1000 : IPC_MAX_PIXEL_COORD;

	if (ipc_tool_has_point(a->tool))
		check(a->x >= 0 && a->x <= max && a->y >= 0 && a->y <= max, "point inside its range");
	check(a->n_keys <= IPC_MAX_HOTKEY_KEYS, "hotkey keys within the limit");
	check(!a->content || strlen(a->content) <= IPC_MAX_CONTENT_BYTES, "content within the limit");
	check(!a->element || strlen(a->element) <= IPC_MAX_ELEMENT_BYTES, "element within the limit");
	check(a->duration_ms <= IPC_MAX_WAIT_MS, "wait within the limit");
	check(a->argc <= IPC_MAX_LAUNCH_ARGS && (a->tool != IPC_TOOL_LAUNCH || a->argc >= 1),
	      "launch command within the limit");
	check(a->timeout_ms <= IPC_MAX_WAIT_FOR_MS, "timeout within the limit");
	check(!a->target || strlen(a->target) <= IPC_MAX_TARGET_BYTES, "target within the limit");
	check(a->tool != IPC_TOOL_ACTIVATE || a->has_match, "activate has a window match");
	check(!a->has_match || a->match.title || a->match.class_name || a->match.instance,
	      "a window match has a member");
	if (a->has_match) {
		char e[256];
		struct ipc_window_matcher *mt = ipc_window_matcher_create(&a->match, e, sizeof(e));
		check(mt != NULL, "an accepted window match compiles");
		ipc_window_matcher_destroy(mt);
	}
}

/* Serializes, parses the JSON back and serializes again: both texts must be equal. */
static void check_request(const struct ipc_task_request *req)
{
	struct ipc_task_request *again = NULL;
	char err[512] = "", *json, *json2;

	check(req->kind != IPC_TASK_KIND_SCRIPT ||
		      (req->n_actions >= 1 && req->n_actions <= IPC_MAX_SCRIPT_ACTIONS),
	      "script length within the limit");
	check(req->kind != IPC_TASK_KIND_INSTRUCTION ||
		      (req->instruction && strlen(req->instruction) <= IPC_MAX_INSTRUCTION_BYTES),
	      "instruction within the limit");
	for (size_t i = 0; i < req->n_actions; i++)
		check_action(&req->actions[i], req->coords);
	json = ipc_task_request_to_json(req);
	check(json != NULL, "an accepted request serializes");
	check(ipc_task_request_parse(json, strlen(json), &again, err, sizeof(err)) == 0,
	      "a serialized request parses again");
	json2 = ipc_task_request_to_json(again);
	check(json2 && strcmp(json, json2) == 0, "the serialized form is a fixed point");
	free(json2);
	free(json);
	ipc_task_request_destroy(again);
}

static void check_single(const struct ipc_action *a, enum ipc_coords coords)
{
	struct ipc_action again = {0};
	char err[512] = "", *json, *json2;

	check_action(a, coords);
	json = ipc_action_to_json(a);
	check(json != NULL, "an accepted action serializes");
	check(ipc_action_parse(json, strlen(json), coords, &again, err, sizeof(err)) == 0,
	      "a serialized action parses again");
	json2 = ipc_action_to_json(&again);
	check(json2 && strcmp(json, json2) == 0, "the serialized form is a fixed point");
	free(json2);
	free(json);
	ipc_action_finish(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *json = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;
	char err[512] = "";
	int r;

	last_outcome = 0;
	if (size == 0)
		return 0;
	switch (data[0]) {
	case 'T':
	case 'A': {
		struct ipc_task_request *req = NULL;

		r = data[0] == 'T' ? ipc_task_request_parse(json, len, &req, err, sizeof(err)) :
				     ipc_action_request_parse(json, len, &req, err, sizeof(err));
		if (r < 0) {
			check(req == NULL, "nothing is returned on a rejection");
			check_rejection(r, err);
			return 0;
		}
		check(data[0] == 'T' || (req->kind == IPC_TASK_KIND_SCRIPT && req->n_actions == 1),
		      "an action request is a one-step script");
		check_request(req);
		ipc_task_request_destroy(req);
		break;
	}
	case 'p':
	case 'm': {
		enum ipc_coords coords = data[0] == 'm' ? IPC_COORDS_MODEL : IPC_COORDS_PIXELS;
		struct ipc_action a = {0};

		r = ipc_action_parse(json, len, coords, &a, err, sizeof(err));
		if (r < 0) {
			check_rejection(r, err);
			return 0;
		}
		check_single(&a, coords);
		ipc_action_finish(&a);
		break;
	}
	default:
		return 0;
	}
	last_outcome = 1;
	return 0;
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

struct seed {
	const char *name;
	const char *text; /* the selector byte, then the JSON */
};

static const struct seed seeds[] = {
	{"ok-task-instruction", "T{\"instruction\":\"open the settings\"}"},
	{"ok-task-instruction-window",
	 "T{\"instruction\":\"i\",\"history\":\"window\",\"window\":4,\"max_tiles\":6,"
	 "\"max_steps\":20,\"max_seconds\":60,\"settle_ms\":0,\"dry_run\":true}"},
	{"ok-task-script",
	 "T{\"script\":[{\"tool_name\":\"click\",\"x\":10,\"y\":20},"
	 "{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"s\"],\"repeat_count\":2},"
	 "{\"tool_name\":\"write\",\"content\":\"h\\u00e9llo\",\"press_enter\":true,\"overwrite\":true},"
	 "{\"tool_name\":\"wait\",\"duration\":0.25}],\"dry_run\":true}"},
	{"ok-task-script-model",
	 "T{\"script\":[{\"tool_name\":\"drag\",\"x\":0,\"y\":0,\"x2\":1000,\"y2\":1000},"
	 "{\"tool_name\":\"scroll\",\"x\":5,\"y\":5,\"direction\":\"down\",\"scroll_size\":50},"
	 "{\"tool_name\":\"key_down\",\"key\":\"shift\"},{\"tool_name\":\"key_up\",\"key\":\"shift\"}],"
	 "\"coords\":\"model\"}"},
	{"ok-action-request",
	 "A{\"action\":{\"tool_name\":\"double_click\",\"element\":\"OK\",\"x\":1,\"y\":2},"
	 "\"coords\":\"pixels\",\"dry_run\":true,\"settle_ms\":100}"},
	{"ok-action-click-right", "p{\"tool_name\":\"click\",\"x\":3,\"y\":4,\"button\":\"right\"}"},
	{"ok-action-answer", "p{\"tool_name\":\"answer\",\"content\":\"done\"}"},
	{"ok-action-triple", "m{\"tool_name\":\"triple_click\",\"x\":1000,\"y\":0}"},
	{"ok-action-move", "p{\"tool_name\":\"move\",\"x\":32767,\"y\":32767}"},
	{"ok-task-desktop",
	 "T{\"script\":[{\"tool_name\":\"launch\",\"command\":[\"mousepad\",\"a b\"],"
	 "\"wait_window\":{\"class\":\"^Mousepad$\"},\"timeout\":2.5},"
	 "{\"tool_name\":\"wait_for\",\"window_gone\":{\"title\":\"Save (As)?\"}},"
	 "{\"tool_name\":\"wait_for\",\"screen_stable\":{\"ms\":300},\"timeout\":0.001},"
	 "{\"tool_name\":\"wait_for\",\"region_changed\":{\"x\":0,\"y\":0,\"width\":9,\"height\":9}},"
	 "{\"tool_name\":\"activate\",\"window\":{\"instance\":\"x\",\"title\":\"\\\\d+\"}},"
	 "{\"tool_name\":\"click\",\"target\":\"the Save button\"},"
	 "{\"tool_name\":\"drag\",\"target\":\"a\",\"target2\":\"b\"}],"
	 "\"require_focus\":true}"},
	{"ok-action-focus", "A{\"action\":{\"tool_name\":\"wait_for\",\"focus\":{\"class\":\"XTerm\"}}}"},
	{"bad-action-regex", "p{\"tool_name\":\"activate\",\"window\":{\"title\":\"(a\"}}"},
	{"bad-action-two-conditions",
	 "p{\"tool_name\":\"wait_for\",\"focus\":{\"title\":\"a\"},\"window\":{\"title\":\"a\"}}"},
	{"bad-action-target-and-x", "p{\"tool_name\":\"move\",\"target\":\"a\",\"x\":1,\"y\":1}"},
	{"bad-action-launch-empty", "p{\"tool_name\":\"launch\",\"command\":[]}"},
	{"bad-task-both", "T{\"instruction\":\"i\",\"script\":[{\"tool_name\":\"wait\",\"duration\":1}]}"},
	{"bad-task-neither", "T{\"dry_run\":true}"},
	{"bad-task-unknown-member", "T{\"instruction\":\"i\",\"colour\":1}"},
	{"bad-task-script-empty", "T{\"script\":[]}"},
	{"bad-task-window-on-script",
	 "T{\"script\":[{\"tool_name\":\"wait\",\"duration\":1}],\"history\":\"window\"}"},
	{"bad-task-max-steps", "T{\"instruction\":\"i\",\"max_steps\":10001}"},
	{"bad-task-not-json", "T{\"instruction\":"},
	{"bad-task-nul", "T{\"instruction\":\"a\\u0000b\"}"},
	{"bad-action-request-two", "A{\"action\":{\"tool_name\":\"wait\",\"duration\":1},\"script\":[]}"},
	{"bad-action-key-name", "p{\"tool_name\":\"hotkey\",\"keys\":[\"ctr\"]}"},
	{"bad-action-too-many-keys",
	 "p{\"tool_name\":\"hotkey\",\"keys\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]}"},
	{"bad-action-model-range", "m{\"tool_name\":\"click\",\"x\":1001,\"y\":0}"},
	{"bad-action-pixel-negative", "p{\"tool_name\":\"click\",\"x\":-1,\"y\":0}"},
	{"bad-action-wait-long", "p{\"tool_name\":\"wait\",\"duration\":30.001}"},
	{"bad-action-scroll-size",
	 "p{\"tool_name\":\"scroll\",\"x\":1,\"y\":1,\"direction\":\"up\",\"scroll_size\":51}"},
	{"bad-action-tool", "p{\"tool_name\":\"fly\"}"},
	{"bad-action-float-coord", "p{\"tool_name\":\"click\",\"x\":1.5,\"y\":0}"},
	{"bad-action-not-object", "p[1,2]"},
	{"bad-empty", ""},
};

static int write_seeds(const char *dir)
{
	for (size_t i = 0; i < ARRAY_SIZE(seeds); i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name);
		f = fopen(path, "wb");
		if (!f || fwrite(seeds[i].text, 1, strlen(seeds[i].text), f) != strlen(seeds[i].text) ||
		    fclose(f) != 0) {
			perror(path);
			return 1;
		}
	}
	return 0;
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
	return fuzz_replay(argv[1], replay_one, 20);
}
#endif
