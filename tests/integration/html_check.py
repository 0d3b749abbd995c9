#!/usr/bin/env python3
"""html_check.py WHYMISS PROGRAM... [--screenshots DIR]: `whymiss report --format html` opened in
headless Chromium (Debian chromium).

Records each PROGRAM (an exact-mode build), writes its JSON and HTML reports, and opens every HTML
report in one headless Chromium driven over the DevTools protocol (--remote-debugging-pipe, no
port). A report fails when, while it loads and draws, the page throws, logs a console or browser
error (a Content-Security-Policy violation is one), or requests anything but its own file. Then
the page must show what the JSON report holds: each finding's heading, code and fix (or "No
significant cache problem found."), each predicted fix and latent false-sharing case, the hottest
source line's text as read from disk, and a drawn
Chart.js chart in every chart element, the miss-kinds chart among them. A full-page screenshot of
each report is taken and checked to be a PNG of the page's size; with --screenshots DIR they are
kept there."""
import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time

# Charts every report draws today (html_views.cpp); a new view adds its id here.
EXPECTED_CHARTS = ["miss_kinds"]


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=600)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """Headless Chromium spoken to over the DevTools pipe: JSON messages, NUL-terminated, that
    Chromium reads on its fd 3 and writes on its fd 4."""

    def __init__(self, exe, tmp, log):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # Above 4, so that the child's dup2 onto 3 and 4 never meets them.
        child_r = fcntl.fcntl(to_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_w = fcntl.fcntl(from_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_r)
        os.close(from_w)

        def fds():
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={tmp}/chromium", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
                # Nothing can reach a network even if something tried (the test sees the request).
                "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
                "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     close_fds=False, preexec_fn=fds)
        os.close(child_r)
        os.close(child_w)
        self.buf = b""
        self.next_id = 0
        self.events = []  # (sessionId, method, params) not yet consumed

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_w)
        os.close(self.from_r)

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self.from_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (exit %s)" % self.proc.poll())
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def wait_event(self, session, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, (s, name, params) in enumerate(self.events):
                if s == session and name == method:
                    return params
            m = self._read_message(deadline)
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def take_events(self, session):
        mine = [(name, params) for s, name, params in self.events if s == session]
        self.events = [e for e in self.events if e[0] != session]
        return mine


PAGE_FACTS = r"""(() => {
  const facts = {drawn: document.documentElement.dataset.charts || null, canvases: []};
  facts.declared = Object.keys(JSON.parse(document.getElementById('whymiss-charts').textContent));
  for (const c of document.querySelectorAll('canvas[data-chart]')) {
    const chart = Chart.getChart(c);
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let painted = 0;
    for (let i = 3; i < px.length; i += 4) if (px[i]) painted++;
    facts.canvases.push({id: c.dataset.chart, chart: !!chart, type: chart ? chart.config.type : null,
                         datasets: chart ? chart.data.datasets.length : 0,
                         width: c.width, height: c.height, painted: painted});
  }
  facts.text = document.body.innerText;
  facts.hot_code = [...document.querySelectorAll('table.src tr.hot td.code')].map(td => td.textContent);
  return JSON.stringify(facts);
})()"""


def png_size(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def check_page(browser, html_path, report, shot_path):
    """Problems found in one report's page (empty when it passes)."""
    problems = []
    url = "file://" + os.path.abspath(html_path)
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(domain + ".enable", session=session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1280, "height": 860, "deviceScaleFactor": 1, "mobile": False}, session=session)
    browser.take_events(session)
    nav = browser.send("Page.navigate", {"url": url}, session=session)
    if nav.get("errorText"):
        problems.append(f"navigation failed: {nav['errorText']}")
    browser.wait_event(session, "Page.loadEventFired")
    facts = json.loads(browser.send("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True},
                                    session=session)["result"]["value"])
    metrics = browser.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
    width, height = int(metrics["width"]), int(min(metrics["height"], 16000))
    shot = base64.b64decode(browser.send(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True,
         "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}},
        session=session, timeout=60)["data"])
    with open(shot_path, "wb") as f:
        f.write(shot)
    # Everything the page did up to now: console, exceptions, browser log, network.
    for name, params in browser.take_events(session):
        if name == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            problems.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif name == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            problems.append("console error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                          for a in params["args"]))
        elif name == "Log.entryAdded" and params["entry"]["level"] == "error":
            problems.append("browser error: " + params["entry"]["text"])
        elif name == "Network.requestWillBeSent":
            req = params["request"]["url"]
            if req != url and not req.startswith("data:"):
                problems.append("network request: " + req)
    browser.send("Target.closeTarget", {"targetId": target})

    size = png_size(shot)
    if not size or size[0] < 600 or size[1] < 400:
        problems.append(f"screenshot is not a PNG of the page (size {size})")
    if facts["drawn"] != "drawn":
        problems.append("the page's script did not finish drawing the charts")
    on_page = {c["id"]: c for c in facts["canvases"]}
    for cid in sorted(set(EXPECTED_CHARTS) | set(facts["declared"])):
        c = on_page.get(cid)
        if not c:
            problems.append(f"no chart element for {cid}")
        elif not c["chart"] or c["datasets"] == 0 or not c["width"] or not c["height"] or not c["painted"]:
            problems.append(f"chart {cid} not drawn: {c}")
    text = facts["text"]
    if not report["findings"]:
        if "No significant cache problem found." not in text:
            problems.append("no findings, and the page does not say so")
    for i, f in enumerate(report["findings"], 1):
        heading = f"{i}. {f['kind'].upper().replace('_', ' ')} ({f['origin']}) at {f['level']}"
        for what in [heading, f["suggestion"]] + [ins["function"] for ins in f["instructions"]]:
            if what not in text:
                problems.append(f"finding {i}: {what!r} is not on the page")
        if "predicted_fix" in f:
            fx = f["predicted_fix"]
            want = f"Predicted: {fx['what']}: {fx['misses_before']:,} \u2192 {fx['misses_after']:,}"
            if want not in text:
                problems.append(f"finding {i}: its predicted fix {want!r} is not on the page")
    for l in report.get("latent_false_sharing", []):
        if ("Latent false sharing" not in text or l["object"]["address"] not in text
                or f"{l['predicted_misses']:,}" not in text):
            problems.append(f"latent false sharing at {l['object']['address']} "
                            f"({l['predicted_misses']:,} predicted misses) is not on the page")
    level1 = report["totals"]["levels"][0]["name"]
    hot = [s for s in report["source_lines"] if s["misses"][level1]]
    if hot:
        if "Hottest source lines" not in text:
            problems.append("no hottest source lines section")
        top = hot[0]
        try:
            with open(top["file"], errors="replace") as src:
                want = src.read().split("\n")[top["line"] - 1].rstrip("\r")
        except OSError:
            want = None
        if want is not None and want not in facts["hot_code"]:
            problems.append(f"hottest line {top['file']}:{top['line']} {want!r} is not annotated in the source")
    return problems


def main():
    args = sys.argv[1:]
    keep = None
    if "--screenshots" in args:
        i = args.index("--screenshots")
        keep = args[i + 1]
        del args[i:i + 2]
    whymiss, progs = args[0], args[1:]
    exe = find_chromium()
    if not exe:
        print("FAIL: no chromium (scripts/install-deps.sh installs Debian's)")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        reports = []
        for prog in progs:
            name = os.path.basename(prog)
            prof, js, page = (os.path.join(tmp, name + ext) for ext in (".data", ".json", ".html"))
            r = run(whymiss, "record", "-o", prof, "--", prog)
            if r.returncode != 0:
                print(f"FAIL: {name}: record exited {r.returncode}: {r.stderr.strip()}")
                return 1
            for fmt, out in (("json", js), ("html", page)):
                r = run(whymiss, "report", "-i", prof, "--format", fmt, "--output", out)
                if r.returncode != 0:
                    print(f"FAIL: {name}: report --format {fmt} exited {r.returncode}: {r.stderr.strip()}")
                    return 1
            reports.append((name, page, json.load(open(js))))
        log = open(os.path.join(tmp, "chromium.log"), "w")
        browser = Browser(exe, tmp, log)
        try:
            browser.send("Target.setDiscoverTargets", {"discover": False}, timeout=60)
            for name, page, report in reports:
                shot = os.path.join(keep or tmp, name + ".png")
                problems = check_page(browser, page, report, shot)
                for p in problems:
                    print(f"FAIL: {name}: {p}")
                failed += bool(problems)
                if not problems:
                    print(f"ok: {name}: {len(report['findings'])} findings and every chart on the page, "
                          f"no errors, no network; screenshot {os.path.getsize(shot)} bytes")
        finally:
            browser.close()
            log.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
