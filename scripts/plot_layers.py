#!/usr/bin/env python3
"""Per-layer stacked bars of an npusim report (`npusim run --report FILE.json`).

Each layer's cycles split into compute, memory, scheduling and host time (the report's per-layer
breakdown, which adds up to the layer's cycles); layers in program order; the N slowest are labelled
with their short names (the ONNX path without repeated scopes and the op type).
With --energy, each layer's energy instead, split by component (mac, sram, dram, vector, dma, host
link, static: layers[].energy.by_component_mj, which adds up to the layer's total_mj); the N most
energy-hungry layers are labelled.

Example:  plot_layers.py report.json -o layers.png [--top 8] [--sort cycles] [--energy]
"""
import argparse
import os

import npusim_report
from npusim_report import fail

PARTS = [("compute", "#dd8452"), ("memory", "#4c72b0"), ("scheduling", "#8c8c8c"), ("host", "#c44e52")]
ENERGY_PARTS = [("mac", "#dd8452"), ("sram", "#55a868"), ("dram", "#4c72b0"), ("vector", "#8172b3"),
                ("dma", "#937860"), ("host_link", "#c44e52"), ("static", "#8c8c8c")]


def read_report(path):
    r = npusim_report.read_report(path)
    for i, l in enumerate(r["layers"]):
        if not isinstance(l, dict) or "breakdown" not in l or "name" not in l:
            fail(f"{path}: layers[{i}] has no name or breakdown")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="report JSON written by npusim run --report")
    ap.add_argument("-o", "--output", required=True, help="image to write (.png or .svg)")
    ap.add_argument("--top", type=int, default=5, help="label the N slowest layers (default 5)")
    ap.add_argument("--sort", choices=["order", "cycles"], default="order",
                    help="bars in program order (default) or slowest first")
    ap.add_argument("--title", default=None)
    ap.add_argument("--energy", action="store_true",
                    help="plot each layer's energy by component (mJ) instead of its cycles")
    args = ap.parse_args()
    if os.path.splitext(args.output)[1].lower() not in (".png", ".svg"):
        fail(f"-o {args.output}: the image must end in .png or .svg")
    r = read_report(args.report)
    layers = [l for l in r["layers"] if l.get("placement") != "fused"]  # fused nodes: no cycles or code of their own
    if not layers:
        fail(f"{args.report} has no layers")
    if args.energy and not all(isinstance(l.get("energy"), dict) for l in layers):
        fail(f"{args.report} has no per-layer energy (a report from before npusim modelled energy)")
    parts = ENERGY_PARTS if args.energy else PARTS

    def value(l, part):
        return float((l["energy"]["by_component_mj"] if args.energy else l["breakdown"]).get(part, 0))

    plt = npusim_report.pyplot()
    import numpy as np

    if args.sort == "cycles":
        layers = sorted(layers, key=lambda l: -(l["energy"]["total_mj"] if args.energy else l.get("cycles", 0)))
    n = len(layers)
    x = np.arange(n)
    fig, ax = plt.subplots(figsize=(max(8, min(24, 0.25 * n + 4)), 5))
    bottom = np.zeros(n)
    for part, colour in parts:
        v = np.array([value(l, part) for l in layers])
        ax.bar(x, v, bottom=bottom, color=colour, label=part, width=0.8)
        bottom += v
    slowest = sorted(range(n), key=lambda i: -bottom[i])[:max(0, args.top)]
    # Short names, written upwards from the top of the bar, inside the axes (the y range leaves room),
    # each where it overlaps no other (npusim_report.place_labels, once the layout is final).
    labels = [(f"{npusim_report.display_name(layers[i])} ({layers[i].get('op', '')})", (x[i], bottom[i]))
              for i in slowest]
    ax.set_xlabel("layer (program order)" if args.sort == "order" else "layer (slowest first)")
    ax.set_ylabel("energy (mJ)" if args.energy else "cycles")
    if n <= 40:
        ax.set_xticks(x)
        ax.set_xticklabels([npusim_report.display_name(l) for l in layers], rotation=90, fontsize=7)
    ax.set_ylim(0, bottom.max() * 1.6 if bottom.max() > 0 else 1)
    legend = ax.legend(loc="upper right", fontsize=8)
    total = r.get("total_cycles", 0)
    spent = (f"{r['energy']['total_mj']:.4g} mJ, {r['energy']['average_power_w']:.3g} W average" if args.energy
             else f"{total} cycles")
    npusim_report.fit_title(fig, ax.set_title(args.title or f"{npusim_report.run_title(r, args.report)}: {n} layers, "
                                                f"{spent} ({r.get('latency_ms', 0):.4g} ms); top {len(slowest)} labelled"))
    fig.tight_layout()
    # Upwards from the bar's top, or shifted up or sideways by a label's height when that one is taken.
    npusim_report.place_labels(ax, labels, offsets=[(0, 4), (0, 40), (0, 80), (-8, 4), (8, 4), (-8, 40), (8, 40)],
                               avoid=[legend], rotation=90, fontsize=7, ha="center", va="bottom")
    try:
        fig.savefig(args.output, dpi=120)
    except OSError as e:
        fail(f"cannot write {args.output}: {e.strerror or e}")
    print(f"wrote {args.output}: {n} layers of {npusim_report.run_title(r, args.report)}")


if __name__ == "__main__":
    main()
