#!/usr/bin/env python3
"""Tests of `cudal1 report` on the fixtures under tests/fixtures/report, and of its training view
on a store of rewards made here.

    report_browser_test.py cli|browser --cudal1 BIN --data DIR --out DIR

cli:     exit codes and messages of the command, the files it writes.
browser: opens the reports in headless Chromium through the DevTools protocol over a pipe
         (--remote-debugging-pipe; standard library only) and checks that the charts were drawn
         (canvases carry ink), code is highlighted, tables sort, no script error or console error
         happened, and text from the result files stayed text. Saves screenshots under --out and
         prints their paths. Exits 77 (skipped) when no Chromium is installed.
"""

import argparse
import base64
import fcntl
import json
import os
import queue
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)
    print("ok:", message, flush=True)


def report(options, directory, html, *extra):
    command = [options.cudal1, "report"] + ([directory] if directory else []) + ["--html", html] + list(extra)
    print("$ " + " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    sys.stdout.write(result.stderr)
    return result


def bench_dir(options):
    return os.path.join(options.data, "bench")


def suite_args(options):
    return ["--suite", os.path.join(options.data, "suite")]


# ---------------------------------------------------------------------------------------------
def run_cli(options):
    os.makedirs(options.out, exist_ok=True)
    html = os.path.join(options.out, "cli-bench.html")
    result = report(options, bench_dir(options), html, *suite_args(options), "--js-dir", "/nonexistent-js")
    check(result.returncode == 0, "a report without the JavaScript libraries is still written (exit 0)")
    check("missing Chart.js (libjs-chart.js)" in result.stderr, "stderr names the missing Chart.js package")
    page = open(html, encoding="utf-8").read()
    check("Charts are not drawn" in page and "libjs-highlight.js" in page, "the page says what is missing")

    result = report(options, bench_dir(options), html, "--js-dir", "/nonexistent-js", "--require-assets")
    check(result.returncode == 2 and "--require-assets" in result.stderr,
          "--require-assets without the libraries: exit 2 naming the option")
    result = report(options, bench_dir(options), html, "--chart-js", "/nonexistent/chart.js")
    check(result.returncode == 2 and "/nonexistent/chart.js" in result.stderr,
          "--chart-js FILE that does not exist: exit 2 naming the file")

    missing = os.path.join(options.out, "no-such-dir")
    result = report(options, missing, html)
    check(result.returncode == 2 and "no-such-dir" in result.stderr and "does not exist" in result.stderr,
          "a missing directory: exit 2 naming it")
    result = report(options, os.path.join(options.data, "suite"), html)
    check(result.returncode == 2 and "neither a cudal1 bench output directory" in result.stderr,
          "a directory of another kind: exit 2 saying what was expected")
    with tempfile.TemporaryDirectory(prefix="cudal1-report-") as tmp:
        broken = os.path.join(tmp, "bench")
        shutil.copytree(bench_dir(options), broken)
        with open(os.path.join(broken, "results.jsonl"), "a") as handle:
            handle.write('{"level": 1, "task_name": "x", "status": 3}\n')
        result = report(options, broken, html)
        check(result.returncode == 2 and "results.jsonl line 9: field 'status' must be a string" in result.stderr,
              "a bad results.jsonl line: exit 2 naming the file, line and field")
    result = report(options, bench_dir(options), "/nonexistent-dir/report.html")
    check(result.returncode == 2 and "/nonexistent-dir/report.html" in result.stderr,
          "an unwritable --html path: exit 2 naming it")
    result = subprocess.run([options.cudal1, "report", bench_dir(options)], capture_output=True, text=True)
    check(result.returncode == 2 and "--html" in result.stderr, "--html is required (exit 2)")


HOSTILE_TASK = "level2/</script><img src=x onerror=document.body.setAttribute('data-pwned','task')>"


def training_store(options, directory):
    """A store holding rewards a reward server could have given: 12 steps of 3 tasks, four
    completions each, some verified (their candidates and verdicts recorded), some rejected. The
    schema comes from cudal1 itself (a batch generation of one task records it)."""
    db = os.path.join(directory, "training.db")
    suite = os.path.join(options.data, "..", "suite")
    made = subprocess.run([options.cudal1, "generate", "--suite", suite, "--limit", "1", "--llm", "batch",
                           "--model", "m", "--device", "cpu", "-q", "--db", db,
                           "--out", os.path.join(directory, "generate")], capture_output=True, text=True, timeout=300)
    check(made.returncode == 0, "a store made for the training view (%s)" % made.stderr.strip()[-300:])
    rng = random.Random(14)
    connection = sqlite3.connect(db)
    with connection:
        run_id = connection.execute("SELECT id FROM runs").fetchone()[0]
        for step in range(12):
            for task in ("level1/1_ScaleRelu", "level1/2_LinearTanh", HOSTILE_TASK):
                for sample in range(4):
                    status = rng.choice(["ok", "ok", "incorrect", "rejected" if step > 6 else "compile_error"])
                    speedup = round(0.7 + 0.08 * step * rng.random(), 3) if status == "ok" else None
                    candidate = None
                    if speedup:
                        code = "class ModelNew: %d %d %s" % (step, sample, task)
                        candidate = connection.execute(
                            "INSERT INTO candidates (run_id, prompt_id, kind, source, source_sha256, analysis, parents) "
                            "VALUES (?, NULL, 'generated', ?, ?, '', '[]')",
                            (run_id, code, "%064x" % rng.getrandbits(256))).lastrowid
                        connection.execute(
                            "INSERT INTO verdicts (candidate_id, status, speedup, reward, verdict, evaluated_at) "
                            "VALUES (?, 'ok', ?, ?, ?, '2026-01-01T00:00:00Z')",
                            (candidate, speedup, speedup, json.dumps({"status": "ok", "speedup": speedup, "flags": []})))
                    raw = speedup or 0.0
                    connection.execute(
                        "INSERT INTO rewards (task_key, candidate_id, request_id, step, group_id, status, raw_reward, "
                        "reward, advantage, created_at) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, NULL, '2026-01-01T00:00:00Z')",
                        (task, candidate, "request-%d" % step, step, status, raw, max(-1.5, min(1.5, raw - 0.6))))
    connection.close()
    return db


# ---------------------------------------------------------------------------------------------
class Browser:
    """Headless Chromium driven through the DevTools protocol on file descriptors 3 and 4."""

    def __init__(self, executable, workdir):
        to_browser_read, to_browser_write = os.pipe()
        from_browser_read, from_browser_write = os.pipe()
        # Move the child's ends above 3 and 4 so that the dup2 calls below cannot overwrite them.
        child_read = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD, 10)
        child_write = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD, 10)
        os.close(to_browser_read)
        os.close(from_browser_write)

        def wire_pipes():
            os.dup2(child_read, 3)
            os.dup2(child_write, 4)

        self.log_path = os.path.join(workdir, "chromium.log")
        self.log = open(self.log_path, "w")
        self.profile = tempfile.mkdtemp(prefix="cudal1-chromium-")
        self.process = subprocess.Popen(
            [executable, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
             "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check",
             "--hide-scrollbars", "--mute-audio", "--disable-extensions", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, pass_fds=(3, 4),
            preexec_fn=wire_pipes)
        os.close(child_read)
        os.close(child_write)
        self.writer = os.fdopen(to_browser_write, "wb", buffering=0)
        self.reader = os.fdopen(from_browser_read, "rb", buffering=0)
        self.next_id = 0
        self.responses = {}
        self.events = queue.Queue()
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buffer = b""
        while True:
            chunk = self.reader.read(65536)
            if not chunk:
                with self.lock:
                    self.responses[None] = "closed"
                    self.lock.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                data = json.loads(message)
                if "id" in data:
                    with self.lock:
                        self.responses[data["id"]] = data
                        self.lock.notify_all()
                else:
                    self.events.put(data)

    def call(self, method, session=None, timeout=30, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.writer.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.next_id not in self.responses:
                if None in self.responses:
                    raise Failure("Chromium closed the DevTools pipe (see %s)" % self.log_path)
                if not self.lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise Failure("no answer from Chromium to %s within %d s" % (method, timeout))
            response = self.responses.pop(self.next_id)
        if "error" in response:
            raise Failure("%s failed: %s" % (method, response["error"]))
        return response.get("result", {})

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Failure:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab: opens a file, gathers console errors and exceptions, evaluates expressions."""

    def __init__(self, browser):
        self.browser = browser
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.errors = []
        for domain in ("Runtime", "Log", "Page"):
            self.call(domain + ".enable")
        # The width of the screenshots from the start, so that charts are laid out once.
        self.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)

    def call(self, method, **params):
        return self.browser.call(method, session=self.session, **params)

    def drain_events(self):
        loaded = False
        while True:
            try:
                event = self.browser.events.get_nowait()
            except queue.Empty:
                return loaded
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Page.loadEventFired":
                loaded = True
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                self.errors.append("exception: %s %s" % (details.get("text"),
                                                          details.get("exception", {}).get("description", "")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                self.errors.append("console.%s: %s" % (params["type"], " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", []))))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                self.errors.append("log (%s): %s %s" % (entry.get("source"), entry.get("text"), entry.get("url", "")))

    def open(self, path):
        self.call("Page.navigate", url="file://" + os.path.abspath(path))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.drain_events():
                return
            time.sleep(0.05)
        raise Failure("%s did not finish loading within 30 s" % path)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise Failure("evaluating %r threw: %s" % (expression[:80], result["exceptionDetails"]))
        self.drain_events()
        return result["result"].get("value")

    def wait_for(self, expression, what, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.1)
        raise Failure("timed out waiting until " + what)

    def screenshot(self, path, width=1280):
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        height = max(600, min(height, 12000))  # Chromium's texture limit, and a file still viewable
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        time.sleep(0.3)  # let the charts' resize observers redraw at the new size
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))
        return path


PAGE_STATE = """(() => {
  const status = document.getElementById('report-status');
  const errors = document.getElementById('report-errors');
  return {
    ready: status.dataset.ready === 'yes',
    expected: Number(status.dataset.chartsExpected),
    drawn: Number(status.dataset.chartsDrawn),
    highlighted: Number(status.dataset.highlighted),
    pageErrors: errors.textContent,
    pageErrorCount: Number(errors.dataset.count),
    canvases: Array.from(document.querySelectorAll('canvas')).map(c => ({
      id: c.id, rendered: c.dataset.rendered, ink: Number(c.dataset.ink || 0), width: c.width, height: c.height})),
    pwned: document.body.hasAttribute('data-pwned') || document.documentElement.hasAttribute('data-pwned'),
    title: document.title,
    scripts: document.scripts.length,
  };
})()"""


def common_checks(page, state, expected_charts, label):
    check(page.errors == [], "%s: no script error, console error or blocked load in the browser %s" % (label, page.errors))
    check(state["pageErrorCount"] == 0, "%s: the page's own error record is empty %r" % (label, state["pageErrors"]))
    check(state["expected"] == expected_charts and state["drawn"] == expected_charts,
          "%s: %d of %d charts drawn" % (label, state["drawn"], expected_charts))
    for canvas in state["canvases"]:
        # Axes, labels and points: an empty canvas has no ink at all.
        check(canvas["rendered"] == "yes" and canvas["ink"] > 3000 and canvas["width"] > 100,
              "%s: canvas %s is drawn (%d inked pixels of %dx%d)" % (label, canvas["id"], canvas["ink"],
                                                                      canvas["width"], canvas["height"]))
    check(not state["pwned"], "%s: no script from a result file ran" % label)
    check(state["scripts"] == 5, "%s: the page has exactly its own 5 script elements" % label)


def sorted_column(page, table, column):
    return page.evaluate("""Array.from(document.querySelectorAll('#%s tbody tr')).map(r => {
        const v = r.cells[%d].dataset.value; return v === undefined || v === '' ? null : Number(v); })""" % (table, column))


def check_bench_page(page, options):
    page.wait_for(PAGE_STATE + ".ready && " + PAGE_STATE + ".drawn === 3", "the bench report drew its charts")
    state = page.evaluate(PAGE_STATE)
    common_checks(page, state, 3, "bench")
    check(state["title"] == "cudal1 bench: bench", "bench: the title is the directory's name")
    rows = page.evaluate("document.querySelectorAll('table.summary')[0].tBodies[0].rows.length")
    check(rows == 4, "bench: the summary table has the overall row and one per level (%d rows)" % rows)
    fused = page.evaluate("document.getElementById('task-l2-7_FusedAdd').querySelector('pre.code').textContent")
    check('</script><script>document.body.setAttribute("data-pwned", "solution")</script>' in fused
          and "<!-- <script>" in fused, "bench: a </script> and <!-- in candidate code are shown as text")
    error = page.evaluate("document.getElementById('task-l1-2_GeluTanh').querySelector('pre.error-text').textContent")
    check("<img src=x onerror=" in error, "bench: HTML in an error message is shown as text")
    check(page.evaluate("document.getElementById('task-l3-2_Conv3d').textContent.includes("
                        "'/data/kernelbench/level3/2_Conv3d.py is not on this machine')"),
          "bench: a task file that is not on this machine is 'not available'")
    # Sorting by speedup (column 4): ascending with empty cells last, then descending.
    page.evaluate("document.querySelector('#task-table thead th:nth-child(5)').click()")
    values = sorted_column(page, "task-table", 4)
    numbers = [v for v in values if v is not None]
    check(numbers == sorted(numbers) and values[len(numbers):] == [None] * (len(values) - len(numbers)),
          "bench: clicking Speedup sorts ascending, empty cells last %s" % values)
    page.evaluate("document.querySelector('#task-table thead th:nth-child(5)').click()")
    values = sorted_column(page, "task-table", 4)
    check([v for v in values if v is not None] == sorted(numbers, reverse=True),
          "bench: clicking again sorts descending")
    # The nearer roof: the memory one of 1_ScaleRelu (687 MB in 0.277 ms against a measured
    # 4000 GB/s), the compute one of 8_MatmulBias (100 GFLOP in 2.22 ms at a measured 50 TFLOP/s).
    roof = page.evaluate("""(() => { const t = document.getElementById('task-table');
        const i = Array.from(t.tHead.rows[0].cells).findIndex(c => c.textContent === 'Of roof');
        return i < 0 ? null : Object.fromEntries(Array.from(t.tBodies[0].rows).map(
            r => [r.cells[1].textContent, r.cells[i].textContent])); })()""")
    check(roof is not None and roof.get("1_ScaleRelu") == "62.0 %" and roof.get("8_MatmulBias") == "90.1 %"
          and all(v == "\u2013" for k, v in roof.items() if k not in ("1_ScaleRelu", "8_MatmulBias")),
          "bench: the Of roof column shows the nearer roof for the tasks that have one: %s" % roof)
    # Code is highlighted when its task is opened.
    page.evaluate("document.getElementById('task-l1-1_ScaleRelu').open = true")
    page.wait_for("!!document.querySelector('#task-l1-1_ScaleRelu pre.code code[data-highlighted] .hljs-keyword')",
                  "the opened task's code is highlighted")
    print("ok: bench: opening a task highlights its code", flush=True)
    page.evaluate("document.getElementById('task-l1-1_ScaleRelu').querySelector('details.diff').open = true")
    diff = page.evaluate("document.querySelector('#task-l1-1_ScaleRelu table.diff').textContent")
    check("+        return torch.relu(torch.addcmul" in diff and "-        y = x * self.scale" in diff,
          "bench: the diff against the reference shows removed and added lines")


def check_optimize_page(page, options):
    page.wait_for(PAGE_STATE + ".ready && " + PAGE_STATE + ".drawn === 1", "the optimize report drew its chart")
    state = page.evaluate(PAGE_STATE)
    common_checks(page, state, 1, "optimize")
    check(state["highlighted"] >= 1 and page.evaluate(
        "!!document.querySelector('#best pre.code code[data-highlighted] .hljs-keyword')"),
        "optimize: the best candidate's code is highlighted on load")
    analysis = page.evaluate("document.querySelector('#best pre.prose').textContent")
    check("one fused multiply-add (addcmul)" in analysis, "optimize: the best candidate's analysis is shown")
    other = page.evaluate("document.querySelector('#candidate-3 pre.prose').textContent")
    check("</script><script>document.body.setAttribute('data-pwned','analysis')</script>" in other,
          "optimize: a </script> in an analysis is shown as text")
    check(page.evaluate("document.querySelector('#candidate-3').open") is False,
          "optimize: other candidates' analyses are collapsed")
    rows = page.evaluate("document.querySelectorAll('#candidate-table tbody tr').length")
    check(rows == 6, "optimize: the candidate table has 6 rows")
    roof = page.evaluate("""(() => { const t = document.getElementById('candidate-table');
        const i = Array.from(t.tHead.rows[0].cells).findIndex(c => c.textContent === 'Of roof');
        const row = Array.from(t.tBodies[0].rows).find(r => r.cells[0].textContent === '6');
        return i < 0 || !row ? null : row.cells[i].textContent; })()""")
    check(roof == "31.9 %", "optimize: candidate 6's share of the roof is shown: %r" % roof)
    check("32% of the measured 4.00 TB/s" in page.evaluate("document.querySelector('#candidate-6').textContent"),
          "optimize: candidate 6's details give its profile")


def check_degraded_page(page):
    page.wait_for("document.getElementById('report-status').dataset.ready === 'yes'", "the degraded report ran")
    state = page.evaluate(PAGE_STATE)
    check(page.errors == [] and state["pageErrorCount"] == 0,
          "degraded: no errors without the libraries %s %r" % (page.errors, state["pageErrors"]))
    check(state["drawn"] == 0 and state["canvases"] == [], "degraded: no chart, and no empty canvas left")
    notices = page.evaluate("Array.from(document.querySelectorAll('.notice')).map(n => n.textContent).join(' ')")
    check("libjs-chart.js" in notices and "libjs-highlight.js" in notices, "degraded: the page names the missing packages")
    check(page.evaluate("document.querySelectorAll('.chart-missing').length") == 3,
          "degraded: each chart's place says it was not drawn")


def check_training_page(page, options):
    page.wait_for(PAGE_STATE + ".ready && " + PAGE_STATE + ".drawn === 4", "the training report drew its charts")
    state = page.evaluate(PAGE_STATE)
    common_checks(page, state, 4, "training")
    rows = page.evaluate("document.querySelectorAll('#task-table tbody tr').length")
    check(rows == 3, "training: the task table has a row per task (%d)" % rows)
    names = page.evaluate("Array.from(document.querySelectorAll('#task-table tbody td:first-child')).map(c => c.textContent)")
    check(HOSTILE_TASK in names, "training: a task key with markup is shown as text")
    steps = page.evaluate("document.querySelectorAll('#step-table tbody tr').length")
    check(steps == 12, "training: the step table has the 12 steps")
    page.evaluate("document.querySelector('#task-table thead th:nth-child(5)').click()")
    values = sorted_column(page, "task-table", 4)
    numbers = [v for v in values if v is not None]
    check(numbers == sorted(numbers) and values[len(numbers):] == [None] * (len(values) - len(numbers)),
          "training: clicking Best speedup sorts the tasks, empty cells last %s" % values)


def find_chromium():
    for name in (os.environ.get("CUDAL1_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run_browser(options):
    chromium = find_chromium()
    if not chromium:
        print("SKIP: no Chromium (apt-get install chromium, or set CUDAL1_CHROMIUM)")
        return SKIP
    os.makedirs(options.out, exist_ok=True)
    pages = {
        "bench": (bench_dir(options), suite_args(options)),
        "optimize": (os.path.join(options.data, "optimize"), []),
        "degraded": (bench_dir(options), suite_args(options) + ["--js-dir", "/nonexistent-js"]),
    }
    with tempfile.TemporaryDirectory(prefix="cudal1-report-") as tmp:
        pages["training"] = (None, ["--db", training_store(options, tmp)])
        for name, (directory, extra) in pages.items():
            html = os.path.join(options.out, name + ".html")
            extra = extra + (["--require-assets"] if name != "degraded" else [])
            result = report(options, directory, html, *extra)
            check(result.returncode == 0, "%s: cudal1 report exits 0" % name)
    browser = Browser(chromium, options.out)
    try:
        checks = {"bench": check_bench_page, "optimize": check_optimize_page,
                  "degraded": lambda page, _options: check_degraded_page(page), "training": check_training_page}
        for name, run_checks in checks.items():
            page = Page(browser)
            page.open(os.path.join(options.out, name + ".html"))
            run_checks(page, options)
            shot = page.screenshot(os.path.join(options.out, name + ".png"))
            check(os.path.getsize(shot) > 20000, "%s: screenshot saved" % name)
            print("screenshot: " + os.path.abspath(shot), flush=True)
    finally:
        browser.close()
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["cli", "browser"])
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    try:
        return run_cli(options) or 0 if options.mode == "cli" else run_browser(options)
    except Failure as failure:
        print("FAIL:", failure, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
