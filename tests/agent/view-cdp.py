#!/usr/bin/env python3
"""The live view in headless Chromium (agent-view.sh): drives the page over the DevTools
protocol on --remote-debugging-pipe, Python's standard library only.

usage: view-cdp.py approve CHROMIUM URL OUT_DIR SCREEN_W SCREEN_H
       view-cdp.py reply CHROMIUM URL OUT_DIR

approve: the task behind URL runs with "approve": "all" (its steps wait for approval). On the page,
through holoctl view's proxy: the screen appears at the display's size, the held step shows
with its thought; Pause, then Approve: step 0 runs and the task holds (paused); Resume: step 1
is held, Deny with a reason: it is journaled denied; Cancel: the task ends cancelled. Every
wait is for the page's own state (what the event stream or an answer wrote into it), with a
deadline. Writes OUT_DIR/view.png (the page, held for approval) and prints one line per check.
reply: the task behind URL asks "Which invoice?" at its step 0; the page shows the question,
and the answer written in its field and sent becomes the step's result; the task succeeds.
"""
import base64
import json
import os
import subprocess
import sys

WAIT_S = 90  # one step of the tiny model, under ASan on a loaded 2-core machine


class Browser:
    def __init__(self, chromium, profile, url):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        args = [chromium, "--headless", "--remote-debugging-pipe", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--user-data-dir=" + profile,
                "--window-size=1280,900", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        # the protocol's pipe: the browser reads fd 3 and writes fd 4
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$@" 3<&%d 4>&%d' % (to_r, from_w), "sh"] + args,
            pass_fds=(to_r, from_w), stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(profile, "chromium.err"), "wb"))
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        # attached before the page loads, so that nothing is evaluated in a document that
        # navigation then replaces
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=self.session)
        self.call("Page.navigate", {"url": url}, self.session)
        self.wait_event("Page.loadEventFired")

    def read(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.from_r, 1 << 16)
            if not chunk:
                raise SystemExit("chromium closed the pipe (see chromium.err)")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        while True:
            answer = self.read()
            if answer.get("id") != self.next_id:
                if "method" in answer:
                    self.events.append(answer["method"])
                continue
            if "error" in answer:
                raise SystemExit("%s: %s" % (method, answer["error"]))
            return answer["result"]

    def wait_event(self, method):
        while method not in self.events:
            answer = self.read()
            if "method" in answer:
                self.events.append(answer["method"])
        self.events.remove(method)

    def js(self, expr):
        """Evaluates expr in the page (a promise is awaited); its value, or the exception."""
        r = self.call("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                           "returnByValue": True}, self.session)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise SystemExit("page: %s" % (d.get("exception", {}).get("description") or d))
        return r["result"].get("value")

    def wait(self, what, cond):
        """Waits until the JS expression cond is truthy in the page; returns its value."""
        return self.js("""new Promise((ok, bad) => {
            const t0 = Date.now();
            (function look() {
                let v = null;
                try { v = (%s); } catch (e) { v = null; }
                if (v) return ok(v);
                if (Date.now() - t0 > %d)
                    return bad(new Error(%s + ": not seen within %d s; the page says: " +
                                         document.body.innerText.slice(0, 3000)));
                setTimeout(look, 50);
            })();
        })""" % (cond, WAIT_S * 1000, json.dumps(what), WAIT_S))

    def close(self):
        try:
            self.call("Browser.close")
        except SystemExit:
            pass
        self.proc.wait(timeout=30)


def check(ok, what):
    if not ok:
        raise SystemExit("FAIL: " + what)
    print("ok: " + what, flush=True)


STATUS = 'document.getElementById("status").textContent'


def shown(i):
    return 'document.getElementById("%s").offsetParent !== null' % i


def reply(b):
    b.wait("the question", '%s === "waiting_for_user" && %s && '
           'document.getElementById("waitingtext").textContent === "Which invoice?"'
           % (STATUS, shown("reply")))
    check(True, "the page shows the question")
    b.js('document.getElementById("replytext").value = "the one from March";'
         'document.getElementById("reply").click()')
    text = b.wait("the reply as step 0's result",
                  'document.querySelector(\'#steps li[data-index="0"]\') && '
                  'document.querySelector(\'#steps li[data-index="0"]\').textContent')
    check("the one from March" in text, "step 0's result is the reply: %r" % text)
    b.wait("the end", '%s === "succeeded"' % STATUS)
    check(True, "the task succeeded")


def main():
    mode, chromium, url, out = sys.argv[1:5]
    profile = os.path.join(out, "chromium-" + mode)
    os.makedirs(profile, exist_ok=True)
    b = Browser(chromium, profile, url)
    try:
        if mode == "reply":
            reply(b)
        else:
            approve(b, out, int(sys.argv[5]), int(sys.argv[6]))
    finally:
        b.close()


def approve(b, out, w, h):
    status = STATUS
    got = b.wait("the screen and the held step",
                 '%s === "waiting_for_approval" && %s && '
                 'document.getElementById("screen").naturalWidth > 0 && '
                 '[document.getElementById("screen").naturalWidth, '
                 'document.getElementById("screen").naturalHeight, '
                 'document.getElementById("waitingtext").textContent]' % (status, shown("approve")))
    check(got[0] == w and got[1] == h, "the screen shows at %dx%d (%dx%d)" % (w, h, got[0], got[1]))
    # the test client's red block, 50x50 (wherever a window manager put its window), in the
    # frame as the page received it
    red = b.js("""(() => {
        const img = document.getElementById("screen"), c = document.createElement("canvas");
        c.width = img.naturalWidth; c.height = img.naturalHeight;
        const g = c.getContext("2d");
        g.drawImage(img, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (d[i] === 255 && d[i + 1] === 0 && d[i + 2] === 0) n++;
        return n;
    })()""")
    check(red >= 2500, "the screen shows the red block: %d red pixels" % red)
    task = b.js('fetch("../" + location.pathname.split("/").slice(-2)[0]).then(r => r.json())')
    held = task["waiting"]
    check(task["status"] == "waiting_for_approval" and
          got[2].startswith("step 0 would " + held["action"]["tool_name"]) and
          (held["thought"] or "") in got[2],
          "the held step shows its action and thought: %r" % got[2])
    png = base64.b64decode(b.call("Page.captureScreenshot", {"format": "png"}, b.session)["data"])
    with open(os.path.join(out, "view.png"), "wb") as f:
        f.write(png)
    check(png[:8] == b"\x89PNG\r\n\x1a\n", "the page's screenshot is in view.png")

    b.js('document.getElementById("pause").click()')
    b.wait("pause answered", 'document.getElementById("message").textContent === "pause: done"')
    b.js('document.getElementById("approve").click()')
    b.wait("paused after step 0",
           '%s === "paused" && document.querySelector(\'#steps li[data-index="0"]\')' % status)
    text = b.js('document.querySelector(\'#steps li[data-index="0"]\').textContent')
    check("approved" in text, "step 0 shows it was approved: %r" % text)
    check(b.js('document.getElementById("marker").style.display') == "block",
          "step 0's point is marked on the screen")

    b.js('document.getElementById("resume").click()')
    b.wait("step 1 held", '%s === "waiting_for_approval" && %s && '
           'document.getElementById("waitingtext").textContent.startsWith("step 1 ")'
           % (status, shown("deny")))
    b.js('document.getElementById("denyreason").value = "not now";'
         'document.getElementById("deny").click()')
    text = b.wait("step 1 denied",
                  'document.querySelector(\'#steps li[data-index="1"]\') && '
                  'document.querySelector(\'#steps li[data-index="1"]\').textContent')
    check("denied by the user: not now" in text, "step 1 shows the denial: %r" % text)

    b.js('document.getElementById("cancel").click()')
    b.wait("the end", '%s === "cancelled" && document.getElementById("phase").textContent === "ended"'
           % status)
    check(True, "cancelled from the page")


main()
