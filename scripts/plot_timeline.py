#!/usr/bin/env python3
"""Per-unit Gantt chart of an npusim trace CSV (`npusim run --trace-csv FILE.csv`).

One row per unit (sequencer, queues, DMA engines, DRAM channels, host), one bar per slice coloured by
the class of its opcode (DMA, matrix, vector, host, sync); stalls are drawn hatched, one hatch per
reason (memory, bank_conflict, scheduling, queue_full, host); dotted vertical lines mark where each
layer starts, labelled with the layer's display name when --report gives the run's report (the name the
summary, the layer CSV and the other plots show), else its short name (the ONNX path without repeated
scopes and op type; the trace carries full names).

Example:  plot_timeline.py trace.csv -o timeline.png [--report r.json] [--start 0 --end 50000] [--units matrix,vector]
"""
import argparse
import csv
import os
import re
import sys

import npusim_report
from npusim_report import short_name

HEADER = ["unit", "name", "opcode", "start_cycle", "end_cycle", "kind", "reason", "bytes", "layer"]

OPCODE_CLASS = {
    "LOAD": "dma", "STORE": "dma",
    "PRELOAD": "matrix", "MATMUL": "matrix", "CONV": "matrix",
    "VEC": "vector",
    "HOSTCALL": "host",
}
CLASS_COLOUR = {"dma": "#4c72b0", "matrix": "#dd8452", "vector": "#55a868", "host": "#c44e52", "sync": "#8c8c8c",
                "other": "#937860"}
REASON_HATCH = {"memory": "////", "bank_conflict": "xxxx", "scheduling": "....", "queue_full": "\\\\\\\\",
                "host": "oo", "none": ""}
REASON_EDGE = {"memory": "#4c72b0", "bank_conflict": "#8172b3", "scheduling": "#555555", "queue_full": "#937860",
               "host": "#c44e52", "none": "#555555"}
UNIT_ORDER = ["sequencer", "load", "matrix", "vector", "store", "host"]


def fail(msg):
    print(f"plot_timeline.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_trace(path):
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        fail(f"cannot open {path}: {e.strerror}")
    with f:
        first = f.readline()
        if first.strip().split(",")[:len(HEADER)] != HEADER:
            fail(f"{path} is not an npusim trace CSV: its first line should be '{','.join(HEADER)}' "
                 f"(write one with `npusim run --trace-csv FILE.csv`)")
        f.seek(0)
        rows = []
        for n, r in enumerate(csv.DictReader(f), start=2):
            try:
                r["start"] = int(r["start_cycle"])
                r["end"] = int(r["end_cycle"])
            except (TypeError, ValueError):
                fail(f"{path}:{n}: start_cycle/end_cycle are not integers")
            rows.append(r)
    return rows


def merge_close(spans, gap):
    """Spans (start, width), sorted and with those less than `gap` apart joined into one bar: at the
    figure's scale a run of slices narrower than a pixel is one solid bar (drawn one by one they alias
    or vanish)."""
    out = []
    for s, w in sorted(spans):
        if out and s - (out[-1][0] + out[-1][1]) < gap:
            ps, pw = out[-1]
            out[-1] = (ps, max(ps + pw, s + w) - ps)
        else:
            out.append((s, w))
    return out


def unit_key(name, first_seen):
    if name in UNIT_ORDER:
        return (0, UNIT_ORDER.index(name), 0)
    # DMA engines (dma0, dma1, ...), then DRAM channel tracks (dram_ch0.dma0, dram_ch0.dma1, ...: one per
    # channel per engine), each in numeric order.
    numbers = [int(n) for n in re.findall(r"\d+", name)]
    group = 1 if re.fullmatch(r"dma\d+", name) else 2 if name.startswith("dram_ch") else 3
    return (group, numbers, first_seen[name])


def layer_label(report_path):
    """A layer's label from its full name (the trace's `layer`): the report's display name when a report
    is given, else the short name."""
    shown = {}
    if report_path:
        shown = {l["name"]: npusim_report.display_name(l) for l in npusim_report.read_report(report_path)["layers"]
                 if isinstance(l, dict) and "name" in l}
    return lambda name: shown.get(name) or short_name(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="trace CSV written by npusim run --trace-csv")
    ap.add_argument("-o", "--output", required=True, help="image to write (.png or .svg)")
    ap.add_argument("--start", type=int, default=None, help="first cycle shown")
    ap.add_argument("--end", type=int, default=None, help="last cycle shown")
    ap.add_argument("--units", default=None, help="comma-separated units to show (default: all)")
    ap.add_argument("--report", default=None,
                    help="report JSON of the same run (npusim run --report): label layers by their display names")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    if os.path.splitext(args.output)[1].lower() not in (".png", ".svg"):
        fail(f"-o {args.output}: the image must end in .png or .svg")

    label = layer_label(args.report)
    rows = read_trace(args.trace)
    if not rows:
        fail(f"{args.trace} has a header but no events")
    if args.units:
        wanted = set(args.units.split(","))
        rows = [r for r in rows if r["unit"] in wanted]
        if not rows:
            fail(f"no events on units {args.units}")
    t0 = args.start if args.start is not None else min(r["start"] for r in rows)
    t1 = args.end if args.end is not None else max(r["end"] for r in rows)
    rows = [r for r in rows if r["end"] > t0 and r["start"] < t1]

    plt = npusim_report.pyplot()
    from matplotlib.patches import Patch

    first_seen = {}
    for r in rows:
        first_seen.setdefault(r["unit"], len(first_seen))
    units = sorted(first_seen, key=lambda u: unit_key(u, first_seen))
    y_of = {u: i for i, u in enumerate(units)}

    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.45 * len(units)))
    busy = {}   # (unit, class) -> [(start, width)]
    stall = {}  # (unit, reason) -> [(start, width)]
    for r in rows:
        s, e = max(r["start"], t0), min(r["end"], t1)
        if e <= s:
            continue
        if r["kind"] == "stall":
            stall.setdefault((r["unit"], r["reason"] or "none"), []).append((s, e - s))
        else:
            cls = OPCODE_CLASS.get(r["opcode"], "sync" if r["opcode"] in ("NOP", "BARRIER", "HALT") else "other")
            busy.setdefault((r["unit"], cls), []).append((s, e - s))
    # One pixel of the figure in cycles: slices closer than that are drawn as one bar.
    dpi = 120
    pixel = (t1 - t0) / (fig.get_figwidth() * dpi * 0.8)
    drawn = 0
    for key, spans in list(busy.items()) + list(stall.items()):
        merged = merge_close(spans, pixel)
        drawn += len(merged)
        (busy if key in busy else stall)[key] = merged
    # Stalls under the busy bars: where both are denser than a pixel, the work shows.
    for (u, reason), spans in stall.items():
        ax.broken_barh(spans, (y_of[u] - 0.3, 0.6), facecolors="white", edgecolor=REASON_EDGE.get(reason, "#555"),
                       hatch=REASON_HATCH.get(reason, "++"), linewidth=0.3)

    for (u, cls), spans in busy.items():
        ax.broken_barh(spans, (y_of[u] - 0.35, 0.7), facecolors=CLASS_COLOUR[cls], edgecolor="none")
    # Layer boundaries: where each layer's first busy slice starts (stalls tagged with a layer may begin
    # long before the layer does any work).
    layer_start = {}
    for r in rows:
        if r["layer"] and r["kind"] != "stall":
            layer_start[r["layer"]] = min(layer_start.get(r["layer"], r["start"]), r["start"])
    marks = sorted(layer_start.items(), key=lambda kv: kv[1])
    # A label only where it does not run into the previous one (about 3% of the width apart).
    spacing = (t1 - t0) * 0.03
    last = None
    for name, s in marks:
        ax.axvline(max(s, t0), color="black", linestyle=":", linewidth=0.6, alpha=0.7)
        if last is None or s - last >= spacing:
            ax.text(max(s, t0), 1.01, label(name), rotation=45, fontsize=7, va="bottom", ha="left",
                    transform=ax.get_xaxis_transform())
            last = s

    ax.set_yticks(range(len(units)))
    ax.set_yticklabels(units)
    ax.set_ylim(-0.6, len(units) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(t0, t1)
    ax.set_xlabel("cycle")
    npusim_report.plain_ticks(ax.xaxis, minor=False)
    handles = [Patch(facecolor=CLASS_COLOUR[c], label=c) for c in CLASS_COLOUR if any(k[1] == c for k in busy)]
    handles += [Patch(facecolor="white", edgecolor=REASON_EDGE.get(r, "#555"), hatch=REASON_HATCH.get(r, "++"),
                      label=f"stall: {r}") for r in sorted({k[1] for k in stall})]
    # The legend below the cycle axis, the title above the layer labels (both outside the axes).
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=min(8, max(1, len(handles))),
              fontsize=8, frameon=False)
    npusim_report.fit_title(fig, fig.suptitle(args.title or f"{os.path.basename(args.trace)}: cycles {t0}..{t1}",
                                              fontsize=11))
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=dpi)
    except OSError as e:
        fail(f"cannot write {args.output}: {e.strerror or e}")
    print(f"wrote {args.output}: {len(units)} units, {len(rows)} slices drawn as {drawn} bars (slices less than "
          f"a pixel apart joined), {len(marks)} layers")


if __name__ == "__main__":
    main()
