#include "sim/report/html_assets.h"

namespace npusim::sim::html_assets {

const char* const kErrorCapture = R"js(
window.npusimErrors = [];
window.addEventListener('error', function (e) {
  window.npusimErrors.push(String(e.message || e));
  var p = document.getElementById('js-errors');
  if (!p) {
    p = document.createElement('pre');
    p.id = 'js-errors';
    (document.body || document.documentElement).appendChild(p);
  }
  p.textContent = window.npusimErrors.join('\n');
});
)js";

const char* const kCss = R"css(
:root { --compute: #dd8452; --memory: #4c72b0; --scheduling: #8c8c8c; --host: #c44e52; --ink: #1d232b;
  --muted: #5c6670; --line: #d9dee3; --band: #f5f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: var(--ink); background: #fff; }
header { padding: 18px 28px 10px; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .meta { color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
nav { position: sticky; top: 0; z-index: 2; background: #fff; padding: 6px 28px; border-bottom: 1px solid var(--line); }
nav a { margin-right: 16px; color: var(--memory); text-decoration: none; font-weight: 600; }
main { padding: 0 28px 40px; }
section { margin-top: 26px; }
h2 { font-size: 18px; margin: 0 0 10px; border-bottom: 2px solid var(--ink); display: inline-block; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.note { color: var(--muted); font-size: 12px; margin: 4px 0 8px; max-width: 1100px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr)); gap: 10px; max-width: 1400px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; background: var(--band); }
.card .k { color: var(--muted); font-size: 12px; }
.card.wide { grid-column: span 2; }
.card .v { font-size: 18px; font-weight: 600; overflow-wrap: anywhere; }
.card .s { color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
.opt { white-space: nowrap; }
.bar { display: flex; height: 12px; min-width: 90px; border-radius: 2px; overflow: hidden; background: #eee; }
.bar.big { height: 22px; max-width: 1100px; margin: 10px 0 4px; }
.c-compute { background: var(--compute); fill: var(--compute); }
.c-memory { background: var(--memory); fill: var(--memory); }
.c-scheduling { background: var(--scheduling); fill: var(--scheduling); }
.c-host { background: var(--host); fill: var(--host); }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
table { border-collapse: collapse; font-size: 12px; }
th, td { padding: 3px 4px; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; }
thead th { white-space: normal; vertical-align: bottom; min-width: 3em; }
td.cut { max-width: 110px; overflow: hidden; text-overflow: ellipsis; }
#layer-table { font-size: 11.5px; }
#layer-table .bar { min-width: 60px; }
td.str { white-space: pre; font-family: "DejaVu Sans Mono", monospace; }
td.str .sp { background: #f6d5d6; border-bottom: 2px solid var(--host); }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
thead th { position: sticky; top: 0; background: #eef1f4; z-index: 1; }
table.sortable thead th { cursor: pointer; user-select: none; }
table.sortable thead th[aria-sort="ascending"]::after { content: " \25B2"; }
table.sortable thead th[aria-sort="descending"]::after { content: " \25BC"; }
tbody tr:hover { background: #fff7d6; }
tbody tr:target { background: #ffe9a8; }
td.name { max-width: 140px; overflow: hidden; text-overflow: ellipsis; }
.scroll { max-height: 640px; overflow: auto; border: 1px solid var(--line); max-width: 100%; }
.filter { margin: 4px 0 8px; }
.filter input { font: inherit; padding: 3px 6px; width: 280px; }
.bad { color: var(--host); font-weight: 600; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; fill: var(--ink); }
svg .grid { stroke: #e4e7ea; stroke-width: 1; }
svg .axis { stroke: var(--ink); stroke-width: 1; }
svg .roof { fill: none; stroke: #111; stroke-width: 1.6; }
svg .own { stroke: #777; stroke-width: 0.7; }
svg .thr { stroke: var(--host); stroke-dasharray: 4 3; }
#js-errors { color: #a00; background: #fee; padding: 8px; }
)css";

const char* const kScript = R"js(
(function () {
  function cellKey(row, col, numeric) {
    var c = row.cells[col];
    var v = c.hasAttribute('data-v') ? c.getAttribute('data-v') : c.textContent;
    if (!numeric) return v.toLowerCase();
    return v === '' ? NaN : parseFloat(v);
  }
  // Sorts a table's body by column `col`: dir 1 ascending, -1 descending; empty cells always last, ties in
  // their original order.
  function sortTable(table, col, dir) {
    var th = table.tHead.rows[0].cells[col];
    var numeric = th.getAttribute('data-type') === 'num';
    var body = table.tBodies[0];
    var keyed = Array.prototype.map.call(body.rows, function (r) {
      return { row: r, key: cellKey(r, col, numeric), at: +r.getAttribute('data-i') };
    });
    keyed.sort(function (a, b) {
      var x = a.key, y = b.key;
      if (numeric) {
        var xn = isNaN(x), yn = isNaN(y);
        if (xn || yn) return xn === yn ? a.at - b.at : (xn ? 1 : -1);
      }
      if (x < y) return -dir;
      if (x > y) return dir;
      return a.at - b.at;
    });
    var frag = document.createDocumentFragment();
    keyed.forEach(function (k) { frag.appendChild(k.row); });
    body.appendChild(frag);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll('tbody tr'), function (r, i) { r.setAttribute('data-i', i); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener('click', function () {
        var now = th.getAttribute('aria-sort');
        var first = th.getAttribute('data-type') === 'num' ? -1 : 1;
        sortTable(table, col, now ? (now === 'ascending' ? -1 : 1) : first);
      });
    });
  });
  // The layer filter: rows whose name or op contains the text.
  Array.prototype.forEach.call(document.querySelectorAll('input[data-filter]'), function (input) {
    var table = document.getElementById(input.getAttribute('data-filter'));
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var text = rows.map(function (r) { return (r.getAttribute('data-text') || r.textContent).toLowerCase(); });
    var count = document.getElementById(input.getAttribute('data-filter') + '-count');
    input.addEventListener('input', function () {
      var q = input.value.toLowerCase(), shown = 0;
      rows.forEach(function (r, i) {
        var on = text[i].indexOf(q) >= 0;
        r.style.display = on ? '' : 'none';
        if (on) shown++;
      });
      if (count) count.textContent = shown + ' of ' + rows.length + ' rows';
    });
  });
  // #sort=KEY[-asc|-desc]: the layer table sorted on load (a link to a sorted view).
  var m = /(?:^#|&)sort=([a-z_]+)(?:-(asc|desc))?/.exec(location.hash);
  var layers = document.getElementById('layer-table');
  if (m && layers) {
    Array.prototype.forEach.call(layers.tHead.rows[0].cells, function (th, col) {
      if (th.getAttribute('data-key') !== m[1]) return;
      var dir = m[2] ? (m[2] === 'asc' ? 1 : -1) : (th.getAttribute('data-type') === 'num' ? -1 : 1);
      sortTable(layers, col, dir);
    });
  }
  document.body.setAttribute('data-ready', '1');
  // Milliseconds from the start of loading until the page was ready (what a reader waits for).
  if (window.performance) document.body.setAttribute('data-ready-ms', String(Math.round(performance.now())));
})();
)js";

}  // namespace npusim::sim::html_assets
