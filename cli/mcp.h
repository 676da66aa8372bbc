/* holoctl mcp: a Model Context Protocol server on stdin/stdout that drives holod through its
 * socket (docs/api.md, "MCP server"; README, "Using holod from an MCP client").
 *
 * DESIGN: the transport is MCP's stdio one: one JSON-RPC 2.0 message per line in each direction,
 * logs on stderr. The main thread reads and classifies lines (mcp-proto.c, pure: no socket, no
 * thread, the fuzz target's code); requests that talk to holod run on a thread of their own
 * (cmd-mcp.c), at most MCP_MAX_INFLIGHT at once, each with its own HTTP connection, so a
 * notifications/cancelled for a running task arrives while the task runs and cancels it in holod.
 * The action tools (their names, titles, descriptions and inputSchema) are ipc's action-tool
 * table's (ipc.h, struct ipc_tool_client), with the task's options added; mcp-proto.c spells only
 * its own tools (run_task, screenshot, locate, windows, status, cancel_task, reply_task).
 * Everything that acts on the screen (run_task, every action tool, locate) is a holod task
 * followed through its event stream: cancellable, with progress. Nothing listens on a network:
 * holod's peer-uid check applies to every request as to any holoctl command.
 *
 * Every size that comes from the client is checked against a limit below or one of ipc.h's;
 * malformed JSON-RPC gets the specification's error codes. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Named limits on what the client sends. */
#define MCP_MAX_LINE_BYTES                                                                                   \
	(2u * 1024u * 1024u)	 /* one message: a task body (IPC_MAX_BODY_BYTES)                            \
				    and the envelope around it */
#define MCP_MAX_ID_BYTES 256	 /* a string request id */
#define MCP_MAX_METHOD_BYTES 128 /* a method name */
#define MCP_MAX_TOKEN_BYTES 256	 /* a string progressToken */
#define MCP_MAX_URI_BYTES 512	 /* a resource URI */
#define MCP_MAX_CURSOR_BYTES 20	 /* a pagination cursor (an offset) */
#define MCP_MAX_TASK_ID_BYTES 20 /* a taskId (holod's task id) */
#define MCP_MAX_REASON_BYTES 200 /* of a cancellation's reason, logged */
#define MCP_MAX_INFLIGHT 16	 /* requests handled at once */
#define MCP_MAX_DEPTH 64	 /* nesting of the message's JSON */
#define MCP_MAX_MESSAGE 1024	 /* one error message we write */

/* How many tasks resources/list names per page (newest first). */
#define MCP_RESOURCE_PAGE 20
/* The most a report resource (`holoctl report`'s page, screenshots embedded) may weigh. */
#define MCP_MAX_REPORT_BYTES (48u * 1024u * 1024u)

/* JSON-RPC 2.0's error codes and MCP's. */
enum {
	MCP_ERR_PARSE = -32700,
	MCP_ERR_INVALID_REQUEST = -32600,
	MCP_ERR_METHOD_NOT_FOUND = -32601,
	MCP_ERR_INVALID_PARAMS = -32602,
	MCP_ERR_INTERNAL = -32603,
	MCP_ERR_RESOURCE_NOT_FOUND = -32002,
};

/* The protocol revisions this server speaks, oldest first; the last is offered when the client
 * asks for one it does not know. */
extern const char *const mcp_protocol_versions[];
extern const size_t mcp_protocol_versions_count;
/* The revision to answer a client's initialize with. */
const char *mcp_negotiate_version(const char *requested);

enum mcp_kind {
	MCP_MSG_REQUEST,
	MCP_MSG_NOTIFICATION,
	MCP_MSG_RESPONSE, /* the client answering a request of ours: this server sends none */
};

struct mcp_message {
	enum mcp_kind kind;
	json_t *root;	    /* owned */
	json_t *id;	    /* borrowed from root; requests and responses */
	const char *method; /* borrowed; requests and notifications */
	json_t *params;	    /* borrowed: an object, or NULL when absent */
};

/* Classifies one line (without its newline). Returns 0 and fills *ret (release it with
 * mcp_message_finish), or fails with MCP_ERR_PARSE / MCP_ERR_INVALID_REQUEST and *ret_error set
 * to the error response to send (its id that of the request when one could be read, else null). */
int mcp_message_parse(const char *line, size_t len, struct mcp_message *ret, json_t **ret_error);
void mcp_message_finish(struct mcp_message *m);

/* {"jsonrpc":"2.0","id":id,"error":{"code","message"}}; id NULL gives null. */
json_t *mcp_error_response(json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* {"jsonrpc":"2.0","id":id,"result":result}, stealing result. */
json_t *mcp_result_response(json_t *id, json_t *result);

/* The answer to initialize: version, capabilities (tools, resources; tasks from 2025-11-25),
 * serverInfo and instructions. */
json_t *mcp_initialize_result(const char *version);
/* {"tools": [...]}: every tool with its title, description and inputSchema; from 2025-11-25
 * (version; NULL before initialize) run_task's execution.taskSupport. */
json_t *mcp_tools_list(const char *version);
/* {"resourceTemplates": [...]}. */
json_t *mcp_resource_templates(void);

/* What a tools/call asks of holod, checked without a daemon. */
enum mcp_plan_kind {
	MCP_PLAN_TASK,	     /* POST body, then follow the task to its end: run_task */
	MCP_PLAN_ACTION,     /* the same for a one-action script; the answer is the step's */
	MCP_PLAN_LOCATE,     /* a dry-run move to a target; the answer is the point located */
	MCP_PLAN_SCREENSHOT, /* GET /v1/screenshot */
	MCP_PLAN_WINDOWS,    /* GET /v1/windows */
	MCP_PLAN_STATUS,     /* GET /v1/status */
	MCP_PLAN_CANCEL,     /* POST /v1/tasks/ID/cancel */
	MCP_PLAN_REPLY,	     /* POST /v1/tasks/ID/reply with body: a task's user answers */
};

struct mcp_plan {
	enum mcp_plan_kind kind;
	const char *tool;  /* the tool's name (static) */
	char *body;	   /* TASK, ACTION, LOCATE: the POST /v1/tasks body, validated by ipc;
			      REPLY: the reply's body */
	char *display;	   /* SCREENSHOT: the display asked for, or NULL */
	long long task_id; /* CANCEL, REPLY */
	bool wants_task;   /* run_task: the client asked for an MCP task (2025-11-25) */
};

/* Plans tools/call's params. Returns 0, or MCP_ERR_INVALID_PARAMS for a call that names no
 * known tool or whose envelope is malformed (a protocol error), or -EINVAL / -E2BIG for
 * arguments the tool refuses (a tool error the model can correct): err says what is wrong,
 * naming the argument. */
int mcp_plan_tool_call(json_t *params, struct mcp_plan *ret, char *err, size_t errlen);
void mcp_plan_finish(struct mcp_plan *p);

/* Resource URIs: holod://tasks/ID (the task), holod://tasks/ID/steps, holod://tasks/ID/report
 * (`holoctl report`'s page) and holod://tasks/ID/steps/N/screenshot/before|after (a PNG). */
enum mcp_resource_kind {
	MCP_RES_TASK,
	MCP_RES_STEPS,
	MCP_RES_REPORT,
	MCP_RES_SCREENSHOT,
};
struct mcp_resource {
	enum mcp_resource_kind kind;
	long long task_id;
	long long step; /* MCP_RES_SCREENSHOT */
	bool before;	/* MCP_RES_SCREENSHOT: "before", else "after" */
};
/* 0, or -EINVAL when uri is not one of those forms (the answer is MCP_ERR_RESOURCE_NOT_FOUND). */
int mcp_resource_parse(const char *uri, struct mcp_resource *ret);

/* The standard base64 of data (malloc'd, NUL-terminated). */
char *mcp_base64(const unsigned char *data, size_t size);
