#!/usr/bin/env python3
"""Opens an HTML page in headless Chromium and says what a reader would see, one `key value` per line:

  ready 1              the page's script ran to its end (body[data-ready="1"])
  ready_ms N           milliseconds from the start of loading until then (body[data-ready-ms])
  js_errors N          errors the page recorded (<pre id="js-errors">) plus "Uncaught" console lines
  rows N               rows of the layer table (#layer-table tbody tr)
  columns a,b,...      the layer table's column keys (th[data-key])
  sorted_by_cycles B   with --sort: the rows' cycles are in descending order after `#sort=cycles`
  sections a,b,...     ids of the page's <section>s
  screenshot_stddev X  grey-level standard deviation of a 1280x1800 screenshot (0: blank)
  screenshot_ink X     fraction of its pixels that are not near-white

Usage: browser_check.py PAGE.html WORKDIR [--sort] [--no-screenshot]
"""
import html.parser
import os
import subprocess
import sys

from PIL import Image, ImageStat

CHROMIUM = os.environ.get("NPUSIM_CHROMIUM", "/usr/bin/chromium")


def chromium(workdir, *args):
    cmd = ["timeout", "180", CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--user-data-dir=" + os.path.join(workdir, "profile"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace")


class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ready = False
        self.ready_ms = "?"
        self.errors = 0
        self.sections = []
        self.keys = []  # the layer table's column keys
        self.rows = []  # per row: the data-v of each cell
        self.table = None  # the id of the table we are in
        self.in_errors = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body" and a.get("data-ready") == "1":
            self.ready = True
            self.ready_ms = a.get("data-ready-ms", "?")
        if a.get("id") == "js-errors":
            self.errors += 1
        if tag == "section" and "id" in a:
            self.sections.append(a["id"])
        if tag == "table":
            self.table = a.get("id")
        if self.table == "layer-table":
            if tag == "th":
                self.keys.append(a.get("data-key"))
            elif tag == "tr" and (a.get("id") or "").startswith("L"):
                self.rows.append([])
            elif tag == "td" and self.rows:
                self.rows[-1].append(a.get("data-v"))

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None


def main():
    page, workdir = os.path.abspath(sys.argv[1]), sys.argv[2]
    sort = "--sort" in sys.argv[3:]
    url = "file://" + page + ("#sort=cycles" if sort else "")
    r = chromium(workdir, "--enable-logging=stderr", "--v=0", "--dump-dom", url)
    if r.returncode != 0 or "<html" not in r.stdout:
        print(f"chromium failed ({r.returncode}): {r.stderr[-2000:]}", file=sys.stderr)
        sys.exit(1)
    dom = Dom()
    dom.feed(r.stdout)
    uncaught = sum(1 for line in r.stderr.splitlines() if "Uncaught" in line)
    print("ready", int(dom.ready))
    print("ready_ms", dom.ready_ms)
    print("js_errors", dom.errors + uncaught)
    print("rows", len(dom.rows))
    print("columns", ",".join(k or "" for k in dom.keys))
    if sort and "cycles" in dom.keys:
        col = dom.keys.index("cycles")
        cycles = [float(row[col]) for row in dom.rows]
        print("sorted_by_cycles", all(a >= b for a, b in zip(cycles, cycles[1:])) and len(set(cycles)) > 1)
    print("sections", ",".join(dom.sections))
    if "--no-screenshot" in sys.argv[3:]:
        return
    shot = os.path.join(workdir, "shot.png")
    r = chromium(workdir, "--hide-scrollbars", "--window-size=1280,1800", "--screenshot=" + shot, "file://" + page)
    if not os.path.exists(shot):
        print(f"chromium wrote no screenshot ({r.returncode}): {r.stderr[-2000:]}", file=sys.stderr)
        sys.exit(1)
    grey = Image.open(shot).convert("L")
    print("screenshot_stddev", round(ImageStat.Stat(grey).stddev[0], 2))
    hist = grey.histogram()
    print("screenshot_ink", round(1 - sum(hist[240:]) / sum(hist), 4))


if __name__ == "__main__":
    main()
