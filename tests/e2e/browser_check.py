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

With --probe, what a reader sees in a 1400x1800 window (a script added to a copy of the page measures it):
  model_lines N            lines the summary's model card takes for its value
  layer_counts a,b,...     the distinct counts of layers the page's text states ("124 layers", "of 124 layers")
  op_layers_sum N          the sum of the op table's layers column
  op_rows_without_layers N rows of the op table whose layers column is 0
  mismatch_cells JSON      the OCR mismatch table's string cells as rendered (innerText), row by row
  roofline_x_ticks lo,hi   the roofline's first and last x-axis labels
  roofline_x_data lo,hi    the smallest and largest x drawn (points, the model's star, the roofs' ridges)
  layer_table_overflow N   pixels of the layer table past its box (> 0: cut off)
  e2e_card S,N             the section holding the "latency end to end" card and its index among the cards
  card_split_options N a,b  the command-line options (--precision) in the summary cards' text that a line
                           break cuts in two, and which

Usage: browser_check.py PAGE.html WORKDIR [--sort] [--no-screenshot] [--probe]
"""
import html
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


PROBE = r"""<script>(function () {
  var out = [];
  function put(k, v) { out.push(k + ' ' + v); }
  var v = document.querySelector('#summary .card .v');
  if (v) put('model_lines', Math.round(v.getBoundingClientRect().height / parseFloat(getComputedStyle(v).lineHeight)));
  var counts = {}, re = /(\d[\d,]*) layers\b/g, m, text = document.body.innerText;
  while ((m = re.exec(text))) counts[m[1].replace(/,/g, '')] = 1;
  put('layer_counts', Object.keys(counts).join(','));
  var ops = document.getElementById('op-table'), sum = 0, zero = 0;
  if (ops) Array.prototype.forEach.call(ops.tBodies[0].rows, function (r) {
    var n = parseFloat(r.cells[1].getAttribute('data-v'));
    sum += n;
    if (n === 0) zero++;
  });
  put('op_layers_sum', sum);
  put('op_rows_without_layers', zero);
  var mm = document.getElementById('mismatch-table');
  if (mm) put('mismatch_cells', JSON.stringify(Array.prototype.map.call(mm.tBodies[0].rows, function (r) {
    return [r.cells[0].innerText, r.cells[1].innerText];
  })));
  var ticks = Array.prototype.map.call(document.querySelectorAll('#roofline text.xtick'), function (t) {
    return parseFloat(t.textContent);
  });
  if (ticks.length) put('roofline_x_ticks', Math.min.apply(null, ticks) + ',' + Math.max.apply(null, ticks));
  var xs = Array.prototype.map.call(document.querySelectorAll('#roofline .pt'), function (p) {
    return parseFloat(p.getAttribute('data-x'));
  });
  var rre = /ridge ([\d.e+-]+) MAC\/B/g, svg = document.querySelector('#roofline svg');
  while (svg && (m = rre.exec(svg.textContent))) xs.push(parseFloat(m[1]));
  if (xs.length) put('roofline_x_data', Math.min.apply(null, xs) + ',' + Math.max.apply(null, xs));
  var lt = document.getElementById('layer-table');
  if (lt) put('layer_table_overflow', lt.getBoundingClientRect().right - lt.parentNode.getBoundingClientRect().right);
  var cards = Array.prototype.slice.call(document.querySelectorAll('.card'));
  cards.forEach(function (c, i) {
    if (c.querySelector('.k').textContent === 'latency end to end') put('e2e_card', c.closest('section').id + ',' + i);
  });
  var split = [];
  Array.prototype.forEach.call(document.querySelectorAll('.card'), function (c) {
    var walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT), n, opt = /(^|[^\w-])(--[a-z][\w-]*)/g;
    while ((n = walk.nextNode())) {
      opt.lastIndex = 0;
      while ((m = opt.exec(n.data))) {
        var r = document.createRange(), tops = {};
        r.setStart(n, m.index + m[1].length);
        r.setEnd(n, m.index + m[0].length);
        Array.prototype.forEach.call(r.getClientRects(), function (q) { tops[Math.round(q.top)] = 1; });
        if (Object.keys(tops).length > 1) split.push(m[2]);
      }
    }
  });
  put('card_split_options', split.length + (split.length ? ' ' + split.join(',') : ''));
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = out.join('\n');
  document.body.appendChild(pre);
})();</script>"""


def probe(page, workdir):
    """The --probe keys: a copy of the page with PROBE added, opened in a 1400x1800 window."""
    copy = os.path.join(workdir, "probe.html")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    at = text.rfind("</body>")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(text[:at] + PROBE + text[at:])
    r = chromium(workdir, "--window-size=1400,1800", "--dump-dom", "file://" + copy)
    start = r.stdout.find('<pre id="probe">')
    if start < 0:
        print(f"the probe did not run ({r.returncode}): {r.stderr[-2000:]}", file=sys.stderr)
        sys.exit(1)
    body = r.stdout[start + len('<pre id="probe">'):r.stdout.find("</pre>", start)]
    print(html.unescape(body))


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
    if "--probe" in sys.argv[3:]:
        probe(page, workdir)
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
