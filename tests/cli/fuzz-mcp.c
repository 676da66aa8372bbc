/* Fuzz target for what an MCP client sends `holoctl mcp`: one line of JSON-RPC, classified by
 * mcp_message_parse, then the checks a request meets before anything reaches holod: the
 * initialize version, a tools/call's plan (the tool, its arguments validated by ipc into a task
 * body) and a resources/read URI.
 *
 * Invariants (a violation aborts): a refused line gets an error response with JSON-RPC's code
 * (-32700, -32600, -32602) and a message; an accepted request has a method; a plan is refused
 * with -32602 or a tool error (-EINVAL, -E2BIG) that says why, and an accepted one that acts
 * on the screen carries a body ipc accepts; a resource URI is accepted only with ids in range.
 * Outcome: accepted when the line is a message and its tools/call or resources/read (if any)
 * passes its checks.
 *
 * Built with libFuzzer by tools/fuzz/build.sh (docs/fuzzing.md). Without HOLOD_LIBFUZZER this
 * file builds a replay driver (the `unit` test fuzz-mcp-corpus) over the corpus directory given
 * as argv[1] (ok-*: accepted, bad-*: rejected); `--write-seeds DIR` writes the seeds below.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ipc.h"
#include "mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int last_outcome; /* 1: accepted, 0: rejected */

static void check(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "invariant violated: %s\n", what);
		abort();
	}
}

static void check_error(json_t *e)
{
	json_t *err = json_object_get(e, "error");
	json_int_t code = json_integer_value(json_object_get(err, "code"));

	check(json_is_object(err), "an error response has an error");
	check(code == MCP_ERR_PARSE || code == MCP_ERR_INVALID_REQUEST || code == MCP_ERR_INVALID_PARAMS,
	      "the error code is JSON-RPC's");
	check(json_string_length(json_object_get(err, "message")) > 0, "the error says why");
	check(json_is_null(json_object_get(e, "id")) || json_is_string(json_object_get(e, "id")) ||
		      json_is_integer(json_object_get(e, "id")),
	      "the error's id is null or the request's");
	char *s = json_dumps(e, JSON_COMPACT);
	check(s && !strchr(s, '\n'), "the answer is one line");
	free(s);
}

static bool check_plan(json_t *params)
{
	struct mcp_plan p;
	char err[MCP_MAX_MESSAGE];
	int r = mcp_plan_tool_call(params, &p, err, sizeof(err));

	if (r < 0) {
		check(r == MCP_ERR_INVALID_PARAMS || r == -EINVAL || r == -E2BIG,
		      "a refused call is -32602 or a tool error");
		check(err[0] != '\0', "a refused call says why");
		mcp_plan_finish(&p);
		return false;
	}
	if (p.kind == MCP_PLAN_TASK || p.kind == MCP_PLAN_ACTION || p.kind == MCP_PLAN_LOCATE) {
		struct ipc_task_request *req = NULL;
		check(p.body != NULL, "a task plan has a body");
		check(ipc_task_request_parse(p.body, strlen(p.body), &req, err, sizeof(err)) == 0,
		      "the body is one holod accepts");
		ipc_task_request_destroy(req);
	}
	if (p.kind == MCP_PLAN_SCREENSHOT && p.display)
		check(strlen(p.display) <= IPC_MAX_DISPLAY_NAME_BYTES, "display within its limit");
	if (p.kind == MCP_PLAN_CANCEL)
		check(p.task_id >= 1, "a task id from 1");
	mcp_plan_finish(&p);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp_message m;
	json_t *error = NULL;
	int r;

	last_outcome = 0;
	r = mcp_message_parse((const char *)data, size, &m, &error);
	if (r < 0) {
		check(r == MCP_ERR_PARSE || r == MCP_ERR_INVALID_REQUEST || r == MCP_ERR_INVALID_PARAMS,
		      "a refused line is -32700, -32600 or -32602");
		if (error)
			check_error(error);
		else
			check(r == MCP_ERR_INVALID_PARAMS, "only a notification goes unanswered");
		json_decref(error);
		return 0;
	}
	check(error == NULL, "an accepted line has no error");
	check(m.kind == MCP_MSG_RESPONSE || m.method != NULL, "a request has a method");
	bool ok = true;
	if (m.kind == MCP_MSG_REQUEST && strcmp(m.method, "initialize") == 0) {
		const char *v = mcp_negotiate_version(
			json_string_value(json_object_get(m.params, "protocolVersion")));
		json_t *res = mcp_initialize_result(v);
		check(json_is_object(res), "initialize answers");
		json_decref(res);
	} else if (m.kind == MCP_MSG_REQUEST && strcmp(m.method, "tools/call") == 0) {
		ok = check_plan(m.params);
	} else if (m.kind == MCP_MSG_REQUEST && strcmp(m.method, "resources/read") == 0) {
		struct mcp_resource res;
		ok = mcp_resource_parse(json_string_value(json_object_get(m.params, "uri")), &res) == 0;
		if (ok)
			check(res.task_id >= 1 && res.step >= 0, "resource ids in range");
	}
	mcp_message_finish(&m);
	last_outcome = ok;
	return 0;
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

struct seed {
	const char *name;
	const char *text;
};

static const struct seed seeds[] = {
	{"ok-initialize",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	 "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}"},
	{"ok-initialize-unknown-version",
	 "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":7}}"},
	{"ok-initialized", "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"},
	{"ok-cancelled",
	 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3,"
	 "\"reason\":\"user\"}}"},
	{"ok-response", "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}"},
	{"ok-tools-list", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}"},
	{"ok-call-click",
	 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"click\","
	 "\"arguments\":{\"x\":10,\"y\":20,\"button\":\"right\",\"coords\":\"model\",\"dry_run\":true},"
	 "\"_meta\":{\"progressToken\":\"p1\"}}}"},
	{"ok-call-run-script",
	 "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"run_task\","
	 "\"arguments\":{\"script\":[{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"s\"]},"
	 "{\"tool_name\":\"answer\",\"content\":\"ok\"}],\"max_seconds\":30},\"task\":{\"ttl\":60000}}}"},
	{"ok-call-run-instruction",
	 "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"run_task\","
	 "\"arguments\":{\"instruction\":\"open the settings\",\"max_steps\":5,\"display\":\":1\"}}}"},
	{"ok-call-locate",
	 "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"locate\","
	 "\"arguments\":{\"target\":\"the Save button\"}}}"},
	{"ok-call-launch",
	 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"launch\","
	 "\"arguments\":{\"command\":[\"xterm\"],\"wait_window\":{\"class\":\"XTerm\"},\"timeout\":5}}}"},
	{"ok-call-screenshot",
	 "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"screenshot\","
	 "\"arguments\":{\"display\":\":0\"}}}"},
	{"ok-call-cancel",
	 "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"cancel_task\","
	 "\"arguments\":{\"task_id\":12}}}"},
	{"ok-read-screenshot",
	 "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"resources/read\",\"params\":{\"uri\":"
	 "\"holod://tasks/7/steps/0/screenshot/before\"}}"},
	{"ok-read-report", "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"resources/read\",\"params\":{\"uri\":"
			   "\"holod://tasks/7/report\"}}"},
	{"bad-not-json", "{\"jsonrpc\":\"2.0\",\"id\":1,"},
	{"bad-batch", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"},
	{"bad-version", "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}"},
	{"bad-id-object", "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}"},
	{"bad-id-float", "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}"},
	{"bad-method-number", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}"},
	{"bad-params-array", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[1]}"},
	{"bad-params-string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":\"x\"}"},
	{"bad-no-method", "{\"jsonrpc\":\"2.0\",\"id\":1}"},
	{"bad-duplicate-member", "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}"},
	{"bad-nul", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\\u0000ng\"}"},
	{"bad-deep", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":"
		     "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}"},
	{"bad-call-unknown-tool",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"fly\"}}"},
	{"bad-call-no-name", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}"},
	{"bad-call-tool-name",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"click\","
	 "\"arguments\":{\"tool_name\":\"write\",\"x\":1,\"y\":1}}}"},
	{"bad-call-key",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"hotkey\","
	 "\"arguments\":{\"keys\":[\"ctr\"]}}}"},
	{"bad-call-task-on-action",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"click\","
	 "\"arguments\":{\"x\":1,\"y\":1},\"task\":{}}}"},
	{"bad-call-display-long",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"screenshot\","
	 "\"arguments\":{\"display\":"
	 "\"0123456789012345678901234567890123456789012345678901234567890123456789\"}}}"},
	{"bad-call-run-empty",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_task\"}}"},
	{"bad-read-uri", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{\"uri\":"
			 "\"holod://tasks/0\"}}"},
	{"bad-read-uri-overflow",
	 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{\"uri\":"
	 "\"holod://tasks/99999999999999999999999/steps\"}}"},
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
