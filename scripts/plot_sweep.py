#!/usr/bin/env python3
"""Plots of `npusim sweep` results (DIR/results.csv).

  --kind heatmap   a metric over two swept axes (one panel per model)
  --kind line      a metric along one swept axis, one line per model
  --kind pareto    the Pareto front of a metric (latency) against a cost (default: the design's area,
                   area_mm2, where the CSV has it; array PEs x SRAM KiB otherwise)
  --kind energy    the Pareto front of latency against energy per inference (--cost energy_mj):
                   the designs no other beats on both
  --kind summary   all of them side by side (default; those the sweep can fill): a heatmap over the
                   first two independent axes besides the model, a line panel per swept axis, the
                   Pareto front

The swept columns are those between `id` and `status` in the CSV; zipped columns (e.g. rows and cols
swept together) count as one axis. Without --x, the line plot draws one panel per swept axis, so every
axis shows its own effect. When more axes vary than a panel shows, each cell or line point takes the
best (minimum) value over the others, and the panel's title says so. Failed points are left out and
counted in the title. The figure's title is the sweep's `name:` (from DIR/plan.json beside the CSV;
the folder's name when there is none). A metric whose values span a factor of 10 or more is drawn on
a log scale (--log yes/no to force it); each heatmap panel has its own colour scale.

Example:  plot_sweep.py out/results.csv -o sweep.png --kind heatmap --x systolic_array.rows \\
              --y sram.input.size_kib --metric latency_ms
"""
import argparse
import csv
import json
import math
import os
import re
import sys

import npusim_report


def fail(msg):
    print(f"plot_sweep.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def read_results(path):
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        fail(f"cannot open {path}: {e.strerror}")
    with f:
        try:
            rows = list(csv.reader(f))
        except (csv.Error, UnicodeDecodeError):
            rows = []
    if not rows or rows[0][:2] != ["index", "id"] or "status" not in rows[0] or "report" not in rows[0]:
        fail(f"{path} is not an npusim sweep results CSV (its header starts with 'index,id,' and has status and "
             f"report columns; `npusim sweep` writes DIR/results.csv)")
    header = rows[0]
    axes = header[2:header.index("status")]
    data = [dict(zip(header, r)) for r in rows[1:] if len(r) == len(header)]
    return header, axes, data


def sweep_name(results):
    """The sweep's `name:` as `npusim sweep` recorded it in plan.json beside results.csv, or the folder's name."""
    folder = os.path.dirname(os.path.abspath(results))
    try:
        with open(os.path.join(folder, "plan.json"), encoding="utf-8") as f:
            name = json.load(f).get("name")
    except (OSError, ValueError, AttributeError):
        name = None
    return name if isinstance(name, str) and name else os.path.basename(folder)


def default_cost(header, data):
    """The Pareto plot's cost: the design's area where the sweep recorded it, else array PEs x SRAM KiB."""
    if "area_mm2" in header and any(num(d["area_mm2"]) is not None for d in data):
        return "area_mm2"
    return "array_pes*sram_kib"


def sort_key(v):
    n = num(v)
    return (0, n, "") if n is not None else (1, 0.0, v)


ZIPPED = {}  # first column of a zipped group -> the other columns that advance with it


def independent_axes(axes, data, exclude=()):
    """Varying axes, with zipped columns (a one-to-one mapping between their values) folded into the first."""
    out = []
    for a in axes:
        if a in exclude or len({d[a] for d in data}) < 2:
            continue
        zipped = False
        for b in out:
            pairs = {(d[a], d[b]) for d in data}
            if len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs}):
                zipped = True
                ZIPPED.setdefault(b, []).append(a)
                break
        if not zipped:
            out.append(a)
    return out


def axis_label(a):
    """The column's name, and how many zipped columns take the same values with it."""
    n = len(ZIPPED.get(a, []))
    return a if not n else f"{a} (+{n} zipped)"


def use_log(mode, values):
    """--log auto: a log scale when the metric's positive values span a factor of 10 or more."""
    vals = [v for v in values if v is not None]
    if mode == "no" or not vals or min(vals) <= 0:
        return False
    return mode == "yes" or max(vals) / min(vals) >= 10


def cost_of(expr, d):
    names = sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", expr)), key=len, reverse=True)
    env, text = {}, expr
    for i, n in enumerate(names):
        if n not in d:
            fail(f"--cost {expr}: no column '{n}'")
        v = num(d[n])
        if v is None:
            return None
        env[f"v{i}"] = v
        text = re.sub(r"(?<![A-Za-z0-9_.])" + re.escape(n) + r"(?![A-Za-z0-9_.])", f"v{i}", text)
    try:
        return float(eval(text, {"__builtins__": {}, "math": math}, env))
    except Exception as e:  # a malformed expression is the user's to fix
        fail(f"--cost {expr}: {e}")


def best(values):
    vals = [v for v in values if v is not None]
    return min(vals) if vals else None


def heatmap(ax, fig, data, x, y, metric, model_col, model, others, log):
    import numpy as np
    sel = [d for d in data if model_col is None or d[model_col] == model]
    xs = sorted({d[x] for d in sel}, key=sort_key)
    ys = sorted({d[y] for d in sel}, key=sort_key)
    grid = np.full((len(ys), len(xs)), np.nan)
    for i, yv in enumerate(ys):
        for j, xv in enumerate(xs):
            v = best(num(d[metric]) for d in sel if d[x] == xv and d[y] == yv)
            if v is not None:
                grid[i, j] = v
    from matplotlib.colors import LogNorm
    finite = grid[np.isfinite(grid)]
    log = log and finite.size and finite.min() > 0
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis_r",
                   norm=LogNorm(vmin=finite.min(), vmax=finite.max()) if log else None)
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels(xs, rotation=45, fontsize=8)
    ax.set_yticks(range(len(ys)))
    ax.set_yticklabels(ys, fontsize=8)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    if not finite.size:
        mid = 0
    elif log:
        mid = math.sqrt(finite.min() * finite.max())
    else:
        mid = (finite.min() + finite.max()) / 2
    for i in range(len(ys)):
        for j in range(len(xs)):
            if np.isfinite(grid[i, j]):
                ax.text(j, i, npusim_report.human(grid[i, j]), ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] > mid else "black")
    cb = fig.colorbar(im, ax=ax, label=metric + (" (log scale)" if log else ""))
    npusim_report.plain_ticks(cb.ax.yaxis, minor=log)
    t = f"{metric}" + (f" ({model})" if model_col else "")
    if others:
        t += f"\nbest over {', '.join(others)}"
    ax.set_title(t, fontsize=9)


def line(ax, data, x, metric, model_col, models, others, log):
    numeric = all(num(d[x]) is not None for d in data)
    # Names (presets, configuration files) in the sweep's order, at the same place for every model.
    order = []
    for d in sorted(data, key=lambda d: num(d["index"]) or 0):
        if d[x] not in order:
            order.append(d[x])
    for m in models:
        sel = [d for d in data if model_col is None or d[model_col] == m]
        xs = sorted({d[x] for d in sel}, key=sort_key) if numeric else [v for v in order if any(d[x] == v for d in sel)]
        ys = [best(num(d[metric]) for d in sel if d[x] == xv) for xv in xs]
        pos = [num(v) for v in xs] if numeric else [order.index(v) for v in xs]
        ax.plot(pos, ys, marker="o", label=m if model_col else metric)
    if not numeric:
        ax.set_xticks(list(range(len(order))))
        ax.set_xticklabels(order, rotation=45, fontsize=8)
    if numeric:
        vals = sorted({num(d[x]) for d in data})
        if vals[0] > 0 and vals[-1] / vals[0] >= 16:
            ax.set_xscale("log", base=2)
        npusim_report.plain_ticks(ax.xaxis, minor=False)
    if log:
        ax.set_yscale("log")
    npusim_report.plain_ticks(ax.yaxis, minor=log)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(metric)
    ax.grid(True, which="both", alpha=0.3)
    if model_col:
        ax.legend(fontsize=8)
    ax.set_title(f"{metric} along {x}" + (f"\nbest over {', '.join(others)}" if others else ""), fontsize=9)


def pareto(ax, data, metric, cost_expr, model_col, models, log):
    any_front = False
    for m in models:
        sel = [d for d in data if model_col is None or d[model_col] == m]
        pts = [(cost_of(cost_expr, d), num(d[metric])) for d in sel]
        pts = sorted((c, v) for c, v in pts if c is not None and v is not None)
        if not pts:
            continue
        sc = ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.35)
        front, low = [], math.inf
        for c, v in pts:  # cheapest first: a point is on the front if it beats every cheaper one
            if v < low:
                front.append((c, v))
                low = v
        any_front = True
        ax.plot([p[0] for p in front], [p[1] for p in front], marker="o", color=sc.get_facecolor()[0][:3],
                label=f"{m} front" if model_col else "Pareto front")
    if not any_front:
        ax.text(0.5, 0.5, "no points with both a cost and a metric", ha="center", transform=ax.transAxes)
    ax.set_xscale("log")
    npusim_report.plain_ticks(ax.xaxis, minor=False)
    if log:
        ax.set_yscale("log")
    npusim_report.plain_ticks(ax.yaxis, minor=log)
    ax.set_xlabel(f"cost: {cost_expr}")
    ax.set_ylabel(metric)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Pareto front: {metric} vs {'energy' if cost_expr == 'energy_mj' else 'cost'}", fontsize=9)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="results.csv written by npusim sweep")
    ap.add_argument("-o", "--output", required=True, help="image to write (.png or .svg)")
    ap.add_argument("--kind", choices=["summary", "heatmap", "line", "pareto", "energy"], default="summary")
    ap.add_argument("--metric", default="latency_ms", help="column to plot (default latency_ms)")
    ap.add_argument("--x", help="axis column for the heatmap's x or the line plot (default: first varying axis)")
    ap.add_argument("--y", help="axis column for the heatmap's y (default: second varying axis)")
    ap.add_argument("--model-column", default="model", help="column that names the model (default model)")
    ap.add_argument("--cost", default=None,
                    help="cost expression over columns for the Pareto plot (default area_mm2 where the CSV has "
                         "it, else array_pes*sram_kib)")
    ap.add_argument("--log", choices=["auto", "yes", "no"], default="auto",
                    help="log scale for the metric (colour of a heatmap, y of the line and Pareto plots); "
                         "auto (default): when its values span a factor of 10 or more")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    if args.kind == "energy":  # latency against energy: a Pareto front whose cost is the energy column
        args.kind, args.cost = "pareto", "energy_mj"
    if os.path.splitext(args.output)[1].lower() not in (".png", ".svg"):
        fail(f"-o {args.output}: the image must end in .png or .svg")

    header, axes, rows = read_results(args.results)
    if args.metric not in header:
        fail(f"no column '{args.metric}' in {args.results} (columns: {', '.join(header)})")
    data = [d for d in rows if d["status"] == "ok" and num(d[args.metric]) is not None]
    failed = len(rows) - len(data)
    if not data:
        fail(f"{args.results} has no successful points with a {args.metric} to plot")
    model_col = args.model_column if args.model_column in axes else None
    models = sorted({d[model_col] for d in data}) if model_col else [None]
    free = independent_axes(axes, data, exclude=(model_col,) if model_col else ())
    for a in (args.x, args.y):
        if a and a not in axes:
            fail(f"'{a}' is not a swept column of {args.results} (swept: {', '.join(axes)})")
    x = args.x or (free[0] if free else None)
    y = args.y or next((a for a in free if a != x), None)
    line_axes = [args.x] if args.x else free  # without --x, a line panel per swept axis
    if args.cost is None:
        args.cost = default_cost(header, data)

    plt = npusim_report.pyplot()

    log = use_log(args.log, [num(d[args.metric]) for d in data])
    kinds = ["heatmap", "line", "pareto"] if args.kind == "summary" else [args.kind]
    if args.kind == "summary":  # the panels this sweep can fill: a heatmap needs two axes, a line one
        kinds = [k for k in kinds if not (k == "heatmap" and not (x and y)) and not (k == "line" and not x)]
    panels = []
    for k in kinds:
        if k == "heatmap":
            panels += [("heatmap", m) for m in models]
        elif k == "line":
            panels += [("line", a) for a in line_axes] or [("line", None)]
        else:
            panels.append((k, None))
    cols = min(3, len(panels))  # rows of at most three panels
    rows_n = (len(panels) + cols - 1) // cols
    fig, axs = plt.subplots(rows_n, cols, figsize=(5.5 * cols, 4.6 * rows_n), squeeze=False)
    for ax in axs.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (k, m) in zip(axs.flat, panels):  # m: the heatmap's model, the line panel's axis
        if k == "heatmap":
            if not (x and y):
                fail("a heatmap needs two swept axes that vary independently; this sweep has "
                     f"{len(free)} ({', '.join(free) or 'none'})")
            heatmap(ax, fig, data, x, y, args.metric, model_col, m, [a for a in free if a not in (x, y)], log)
        elif k == "line":
            if not m:
                fail("a line plot needs a swept axis with more than one value")
            line(ax, data, m, args.metric, model_col, models, [a for a in free if a != m], log)
        else:
            pareto(ax, data, args.metric, args.cost, model_col, models, log)
    title = args.title or f"{sweep_name(args.results)}: {len(data)} points"
    if failed:
        title += f" ({failed} failed or without {args.metric}, not shown)"
    npusim_report.fit_title(fig, fig.suptitle(title, fontsize=10))
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=120)
    except OSError as e:
        fail(f"cannot write {args.output}: {e.strerror or e}")
    print(f"wrote {args.output}: {', '.join(k if k != 'line' or not m else f'line ({m})' for k, m in panels)} "
          f"over {len(data)} points")


if __name__ == "__main__":
    main()
