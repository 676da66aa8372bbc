"""A real MCP client (the official Python SDK, `mcp` on PyPI) against `holoctl mcp` (agent-mcp.sh).

Usage: mcp-client.py HOLOCTL SOCKET WIDTH HEIGHT CLIENT_PID

Over stdio, as MCP clients start servers: lists the tools, runs a script task with progress
notifications, one action, takes a screenshot (a PNG of the screen's size), lists the windows
(the recording client, CLIENT_PID, among them) and the pointer, locates a target
with holod's model, cancels a running task by cancelling its request (notifications/cancelled),
and runs one as an MCP task (2025-11-25: tasks/get, tasks/result, tasks/cancel); answers a
task's question with reply_task, and in a second session that takes elicitation requests, as
the form holoctl mcp sends; reads the task and its steps as resources. Prints FAIL lines and exits 1 on any failed check; prints the ids of
the tasks it ran ("task NAME ID") for the shell test's own checks against holod.
"""

import base64
import json
import struct
import sys

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HOLOCTL, SOCKET, WIDTH, HEIGHT = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
CLIENT_PID = int(sys.argv[5])  # the recording client's, which `windows` must list
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr)


async def session_checks(s):
    init = await s.initialize()
    check(init.server_info.name == "holod", f"server name {init.server_info.name}")
    check(init.capabilities.tasks is not None, "no tasks capability at 2025-11-25")

    tools = {t.name: t for t in (await s.list_tools()).tools}
    wanted = {"run_task", "screenshot", "locate", "click", "double_click", "move", "drag",
              "scroll", "write", "hotkey", "launch", "wait_for", "activate", "drag_to", "status",
              "cancel_task", "reply_task"}
    check(wanted <= tools.keys(), f"tools missing: {wanted - tools.keys()}")

    # A script task, blocking, with a progress notification per step.
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    res = await s.call_tool("run_task", {"script": [
        {"tool_name": "click", "x": 100, "y": 120},
        {"tool_name": "write", "content": "mcp"},
        {"tool_name": "answer", "content": "done"}]}, progress_callback=on_progress)
    task = (res.structured_content or {}).get("task", {})
    check(not res.is_error and task.get("status") == "succeeded" and task.get("result") == "done",
          f"run_task: {res}")
    script_id = task.get("id")
    print(f"task script {script_id}")
    messages = [m for _, _, m in progress]
    check(any(m and m.startswith("step 0 click 100,120") for m in messages),
          f"no progress for step 0: {messages}")
    check(any(m and m.startswith("step 2 answer") for m in messages),
          f"no progress for step 2: {messages}")
    values = [v for v, _, _ in progress]
    check(values == sorted(set(values)), f"progress does not increase: {values}")
    check(all(t == 3 for _, t, m in progress if m.startswith("step")), f"total: {progress}")

    # One action tool.
    res = await s.call_tool("click", {"x": 200, "y": 150})
    step = (res.structured_content or {}).get("step") or {}
    check(not res.is_error and step.get("pixels") == {"x": 200, "y": 150}, f"click: {res}")
    print(f"task click {(res.structured_content or {}).get('task', {}).get('id')}")

    # A refused argument is a tool error the model can read, naming it.
    res = await s.call_tool("hotkey", {"keys": ["ctr", "s"]})
    check(res.is_error and "unknown key name 'ctr'" in res.content[0].text, f"hotkey: {res}")

    # drag_to, which holoctl mcp offers from ipc's action-tool table alone (a dry run: the
    # step is journaled, nothing is injected)
    res = await s.call_tool("drag_to", {"x": 220, "y": 160, "dry_run": True})
    check(not res.is_error and (res.structured_content or {}).get("task", {}).get("status")
          == "succeeded", f"drag_to: {res}")

    # The screenshot: an image content, a PNG of the screen.
    res = await s.call_tool("screenshot", {})
    images = [c for c in res.content if c.type == "image"]
    check(not res.is_error and len(images) == 1 and images[0].mime_type == "image/png",
          f"screenshot: {res.content[:1]}")
    if images:
        png = base64.b64decode(images[0].data)
        check(png[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG")
        size = struct.unpack(">II", png[16:24])
        check(size == (WIDTH, HEIGHT), f"screenshot size {size}")

    # The windows and the pointer: the recording client (WM_CLASS holo-agent-client, full
    # screen) among them, the same lines as `holoctl windows`.
    res = await s.call_tool("windows", {})
    st = res.structured_content or {}
    mine = [w for w in st.get("windows", []) if w.get("class") == "holo-agent-client"]
    check(not res.is_error and len(mine) == 1 and mine[0]["width"] == WIDTH
          and mine[0]["height"] == HEIGHT and mine[0]["pid"] == CLIENT_PID,
          f"windows: {res.content[:1]} {st}")
    pointer = st.get("pointer") or {}
    check(0 <= pointer.get("x", -1) < WIDTH and 0 <= pointer.get("y", -1) < HEIGHT
          and f"pointer at {pointer.get('x')},{pointer.get('y')}" in res.content[0].text,
          f"windows: the pointer {pointer}")

    # Locate: holod's model grounds the target; a point on the screen, nothing clicked.
    res = await s.call_tool("locate", {"target": "the Save button"})
    sc = res.structured_content or {}
    check(not res.is_error and 0 <= sc.get("x", -1) < WIDTH and 0 <= sc.get("y", -1) < HEIGHT
          and 0 <= sc.get("model", {}).get("x", -1) <= 1000, f"locate: {res}")
    check("the Save button" in res.content[0].text, f"locate text: {res.content[0].text}")
    print(f"task locate {sc.get('task_id')}")

    # Cancel: a task that waits for a window that never comes; the request is cancelled once
    # the task runs, and the SDK sends notifications/cancelled.
    running = anyio.Event()
    seen = {}

    async def on_running(value, total, message):
        # "task N running" (or "queued", when the display was busy): the task exists.
        if message and message.startswith("task ") and message.split()[-1] in ("running",
                                                                              "queued"):
            seen["id"] = message.split()[1]
            running.set()

    async def blocked():
        await s.call_tool("run_task", {"script": [
            {"tool_name": "wait_for", "window": {"title": "^never$"}, "timeout": 600}]},
            progress_callback=on_running)
        seen["answered"] = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(blocked)
        with anyio.fail_after(60):
            await running.wait()
        tg.cancel_scope.cancel()
    check("answered" not in seen, "the cancelled call was answered")
    print(f"task cancelled {seen.get('id')}")
    # tasks/result waits for its end (the event stream, no polling).
    with anyio.fail_after(60):
        res = await s.send_request(types.GetTaskPayloadRequest(
            params=types.GetTaskPayloadRequestParams(task_id=seen.get("id", "0"))),
            types.CallToolResult)
    task = (res.structured_content or {}).get("task", {})
    check(res.is_error and task.get("status") == "cancelled", f"after cancelling: {res}")

    # The user in the loop: a script asks (ask_user) and waits; run_task's progress says so,
    # an action sent meanwhile is told its place in the queue, and reply_task answers.
    asked, queued, got = anyio.Event(), anyio.Event(), {}

    async def on_ask(value, total, message):
        if "waits for its user: Which invoice? (answer with the reply_task tool)" in message:
            got["id"] = message.split()[1]
            asked.set()

    async def on_queued(value, total, message):
        got.setdefault("queued", []).append(message)
        if message.endswith(" queued behind 1"):
            queued.set()

    async def ask():
        got["ask"] = await s.call_tool("run_task", {"script": [
            {"tool_name": "ask_user", "question": "Which invoice?"},
            {"tool_name": "answer", "content": "paid"}]}, progress_callback=on_ask)

    async def second():
        got["second"] = await s.call_tool("click", {"x": 300, "y": 200},
                                          progress_callback=on_queued)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        with anyio.fail_after(60):
            await asked.wait()
        tg.start_soon(second)
        with anyio.fail_after(60):
            await queued.wait()
        res = await s.call_tool("reply_task", {"task_id": int(got["id"]),
                                               "text": "the one from March"})
        check(not res.is_error, f"reply_task: {res}")
    task = (got["ask"].structured_content or {}).get("task", {})
    check(not got["ask"].is_error and task.get("result") == "paid", f"asked: {got['ask']}")
    check("step 0 ask_user" in got["ask"].content[0].text
          and "the one from March" in got["ask"].content[0].text,
          f"the answer as step 0's result: {got['ask'].content[0].text}")
    check(not got["second"].is_error, f"the queued click: {got['second']}")
    print(f"task asked {got['id']}")
    res = await s.call_tool("reply_task", {"task_id": int(got["id"]), "text": "again"})
    check(res.is_error and "not waiting for a reply" in res.content[0].text,
          f"a second reply: {res}")

    # An MCP task (2025-11-25): created at once, cancelled with tasks/cancel.
    # SDK 2.3.0 checks every tools/call answer as a CallToolResult (its tasks are the
    # 2026-07-28 extension's), so the task-augmented call goes through its dispatcher as is;
    # tasks/get, tasks/cancel and tasks/result below are the SDK's own requests.
    raw = await s._dispatcher.send_raw_request("tools/call", {
        "name": "run_task", "arguments": {"script": [{"tool_name": "wait", "duration": 30}]},
        "task": {"ttl": 60000}}, {})
    created = types.CreateTaskResult.model_validate(raw, by_name=False)
    tid = created.task.task_id
    check(created.task.status == "working", f"created: {created}")
    got = await s.send_request(types.GetTaskRequest(params=types.GetTaskRequestParams(
        task_id=tid)), types.GetTaskResult)
    check(got.task_id == tid and got.status == "working", f"tasks/get: {got}")
    cancelled = await s.send_request(types.CancelTaskRequest(
        params=types.CancelTaskRequestParams(task_id=tid)), types.CancelTaskResult)
    check(cancelled.status == "cancelled", f"tasks/cancel: {cancelled}")
    with anyio.fail_after(60):
        res = await s.send_request(types.GetTaskPayloadRequest(
            params=types.GetTaskPayloadRequestParams(task_id=tid)), types.CallToolResult)
    check(res.is_error and (res.structured_content or {}).get("task", {}).get("status")
          == "cancelled", f"tasks/result after tasks/cancel: {res}")
    print(f"task mcp-task {tid}")

    # The task and its steps as resources.
    listed = await s.list_resources()
    uris = [str(r.uri) for r in listed.resources]
    check(f"holod://tasks/{tid}" in uris, f"resources/list: {uris[:6]}")
    got_id = json.loads((await s.read_resource(f"holod://tasks/{tid}")).contents[0].text)["id"]
    check(str(got_id) == tid, "resource holod://tasks/ID")
    steps = json.loads((await s.read_resource(f"holod://tasks/{script_id}/steps")).contents[0].text)
    check(len(steps["steps"]) == 3 and steps["steps"][0]["tool_call"]["tool_name"] == "click",
          f"steps resource: {str(steps)[:300]}")
    shot = (await s.read_resource(f"holod://tasks/{script_id}/steps/0/screenshot/before")).contents[0]
    check(base64.b64decode(shot.blob)[:4] == b"\x89PNG", "a step's screenshot resource")
    page = (await s.read_resource(f"holod://tasks/{script_id}/report")).contents[0]
    check(page.mime_type == "text/html" and "<html" in page.text, "the report resource")


asked_by_holod = []


async def on_elicit(context, params):
    asked_by_holod.append((params.message, params.requested_schema))
    if "approve" in params.requested_schema.get("properties", {}):
        # A held step: the click at (320,250) is let through, the one at (330,260) denied.
        if "click at 330,260" in params.message:
            return types.ElicitResult(action="accept", content={"approve": False,
                                                                 "reason": "not that one"})
        return types.ElicitResult(action="accept", content={"approve": True})
    return types.ElicitResult(action="accept", content={"answer": "the one from March"})


async def elicitation_checks(s):
    """A client that takes elicitation requests gets a task's question as a form."""
    await s.initialize()
    res = await s.call_tool("run_task", {"script": [
        {"tool_name": "ask_user", "question": "Which invoice?"},
        {"tool_name": "answer", "content": "paid"}]})
    task = (res.structured_content or {}).get("task", {})
    check(not res.is_error and task.get("result") == "paid", f"elicited task: {res}")
    check("the one from March" in res.content[0].text, f"the answer: {res.content[0].text}")
    check([m for m, _ in asked_by_holod] == ["Which invoice?"], f"asked: {asked_by_holod}")
    schema = asked_by_holod[0][1] if asked_by_holod else {}
    check(schema.get("properties", {}).get("answer", {}).get("type") == "string"
          and schema.get("required") == ["answer"], f"the form: {schema}")
    print(f"task elicited {task.get('id')}")

    # Approval gates: a held step is a form with a boolean; approved, it acts, denied, it
    # fails with the reason.
    res = await s.call_tool("run_task", {"script": [{"tool_name": "click", "x": 320, "y": 250}],
                                         "approve": "all"})
    task = (res.structured_content or {}).get("task", {})
    check(not res.is_error and task.get("status") == "succeeded", f"approved: {res}")
    check(any("waits for approval to click at 320,250" in m for m, _ in asked_by_holod),
          f"the approval form: {[m for m, _ in asked_by_holod]}")
    print(f"task approved {task.get('id')}")
    res = await s.call_tool("run_task", {"script": [{"tool_name": "click", "x": 330, "y": 260}],
                                         "approve": "all"})
    task = (res.structured_content or {}).get("task", {})
    check(res.is_error and task.get("status") == "failed"
          and "denied by the user: not that one" in (task.get("error") or ""), f"denied: {res}")
    print(f"task denied {task.get('id')}")


async def main():
    params = StdioServerParameters(command=HOLOCTL, args=["--socket", SOCKET, "mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await session_checks(s)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as s:
            await elicitation_checks(s)


anyio.run(main)
sys.exit(1 if failures else 0)
