#!/usr/bin/env python3
"""Each layer of an npusim run on the NPU's roofline.

The roof: peak MAC/s = array rows x cols x frequency x the array's MACs per PE per cycle in the run's
precision (the report's `array.macs_per_pe_per_cycle` and the layers' `precision`: one roof per precision
the layers use, e.g. 0.25 for fp32 on the edge preset) and the DRAM bandwidth (the report's
dram.peak_bandwidth_gbps, or --bandwidth-gbps; an `ideal` DRAM has no bandwidth roof). A layer sits at
its arithmetic intensity (MACs per DRAM byte) and its achieved MAC/s (MACs / its cycles), coloured by
what its cycles were mostly spent on (the report's per-layer breakdown: compute, memory, scheduling,
host). A thin line rises from each layer to its own roof, the MAC/s its compiler-given bound allows
(MACs / layers[].bound_cycles, docs/report.md "Roofline"): its length is the layer's distance to its
roof (1 / efficiency). Per-layer DRAM bytes are the report's layers[].dram_bytes_read + dram_bytes_written
(a report from before they existed: pass the trace CSV of the same run). The whole model is drawn as a star.

Layers sit at their useful MACs (the report's `macs`); a layer on which the array also spent MAC
slots on padding (layers[].array_macs: e.g. a depthwise convolution mapped as block-diagonal dense
blocks) is drawn as a triangle. The five layers farthest from their roof (without bounds: the five
slowest) are named with their efficiency (short names: the ONNX path without repeated scopes and the
op type).

Example:  plot_roofline.py report.json -o roofline.png
"""
import argparse
import csv
import os

import npusim_report
from npusim_report import fail

COLOUR = {"compute": "#dd8452", "memory": "#4c72b0", "scheduling": "#8c8c8c", "host": "#c44e52"}


read_report = npusim_report.read_report


def layer_bytes_from_trace(path):
    """Bytes each layer moved between DRAM and the SRAMs: the DMA engines' slices (dma0, dma1, ...);
    the DRAM channel tracks carry the same bytes again and are not counted."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        fail(f"cannot open {path}: {e.strerror}")
    with f:
        header = f.readline().strip().split(",")
        if header[:9] != ["unit", "name", "opcode", "start_cycle", "end_cycle", "kind", "reason", "bytes", "layer"]:
            fail(f"{path} is not an npusim trace CSV (write one with `npusim run --trace-csv FILE.csv`)")
        f.seek(0)
        out = {}
        for r in csv.DictReader(f):
            unit = r["unit"]
            if unit.startswith("dma") and r["kind"] == "busy" and r["layer"]:
                out[r["layer"]] = out.get(r["layer"], 0) + int(r["bytes"] or 0)
        return out


def useful_macs(layer):
    """The layer's useful multiply-accumulates (the report's `macs`) and whether the array spent more
    MAC slots than that on padding (the report then adds `array_macs`)."""
    return float(layer.get("macs", 0)), "array_macs" in layer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="report JSON written by npusim run --report")
    ap.add_argument("--trace", help="trace CSV of the same run (npusim run --trace-csv): per-layer DRAM bytes")
    ap.add_argument("-o", "--output", required=True, help="image to write (.png or .svg)")
    ap.add_argument("--peak-gmacs", type=float, default=None, help="override the peak (GMAC/s)")
    ap.add_argument("--bandwidth-gbps", type=float, default=None, help="override the DRAM bandwidth (GB/s)")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    if os.path.splitext(args.output)[1].lower() not in (".png", ".svg"):
        fail(f"-o {args.output}: the image must end in .png or .svg")
    r = read_report(args.report)
    freq_hz = float(r.get("frequency_mhz", 0)) * 1e6
    if freq_hz <= 0:
        fail(f"{args.report} has no frequency_mhz")
    arr = r.get("array", {})
    # The run's precisions: each layer with MACs runs in its `precision` (a report without it: int8).
    rates = arr.get("macs_per_pe_per_cycle", {"int8": 1.0})
    precisions = sorted({l.get("precision", "int8") for l in r["layers"] if float(l.get("macs", 0)) > 0}) or ["int8"]
    peaks = {}
    for p in precisions:
        if args.peak_gmacs:
            peaks[p] = args.peak_gmacs * 1e9
        else:
            peaks[p] = float(arr.get("rows", 0)) * float(arr.get("cols", 0)) * freq_hz * float(rates.get(p, 0))
        if peaks[p] <= 0:
            fail(f"{args.report} has no array rows/cols or no {p} MAC rate; give --peak-gmacs")
    peak = max(peaks.values())
    bw = args.bandwidth_gbps if args.bandwidth_gbps is not None else float(r.get("dram", {}).get("peak_bandwidth_gbps", 0))
    bw_bytes = bw * 1e9

    per_layer = {}
    if all("dram_bytes_read" in l for l in r["layers"]) and r["layers"]:
        per_layer = {l["name"]: l["dram_bytes_read"] + l.get("dram_bytes_written", 0) for l in r["layers"]}
    elif args.trace:
        per_layer = layer_bytes_from_trace(args.trace)
    else:
        fail("the report has no per-layer DRAM bytes (written by an older npusim); pass --trace TRACE.csv from "
             "the same run (npusim run --trace-csv)")

    plt = npusim_report.pyplot()
    import numpy as np

    pts = []
    skipped = 0
    for l in r["layers"]:
        if l.get("placement") == "fused":
            continue  # a node fused into the layer before it: that layer's point stands for both
        macs, grouped = useful_macs(l)
        cycles, b = float(l.get("cycles", 0)), float(per_layer.get(l["name"], 0))
        if macs <= 0 or cycles <= 0 or b <= 0:
            skipped += 1  # no MACs (vector/host layers) or no DRAM traffic: no place on a roofline
            continue
        bd = l.get("breakdown", {})
        bound = max(COLOUR, key=lambda k: bd.get(k, 0))
        # The layer's own roof: the MAC/s its bound allows (None without a bound).
        own_roof = macs / (l["bound_cycles"] / freq_hz) if l.get("bound_cycles", 0) > 0 else None
        pts.append((macs / b, macs / (cycles / freq_hz), bound, npusim_report.display_name(l), grouped, own_roof, l.get("efficiency")))
    model_macs = float(r.get("macs", 0))

    fig, ax = plt.subplots(figsize=(8, 6))
    total_bytes = float(r.get("dram", {}).get("bytes_read", 0)) + float(r.get("dram", {}).get("bytes_written", 0))
    intensities = [p[0] for p in pts]
    if total_bytes > 0 and model_macs > 0:
        intensities.append(model_macs / total_bytes)
    lo = min(intensities) / 10 if intensities else 0.01
    hi = max(intensities) * 10 if intensities else 1000
    if bw_bytes > 0:
        ridge = peak / bw_bytes
        lo, hi = min(lo, ridge / 10), max(hi, ridge * 10)
    xs = np.logspace(np.log10(lo), np.log10(hi), 200)
    for i, (p, pk) in enumerate(sorted(peaks.items(), key=lambda kv: -kv[1])):
        roof = np.minimum(pk, xs * bw_bytes) if bw_bytes > 0 else np.full_like(xs, pk)
        label = f"{p} roof: {pk / 1e9:.4g} GMAC/s" + (
            f", {bw:.4g} GB/s (ridge {pk / bw_bytes:.3g} MAC/B)" if bw_bytes > 0 else ", no bandwidth roof (ideal DRAM)")
        ax.plot(xs, roof, color="black", linewidth=1.5, linestyle=("-", "--", ":", "-.")[i % 4], label=label)
    # Each layer's distance to its own roof (its bound: grouped convs, vector work and traffic included).
    with_roof = [p for p in pts if p[5]]
    if with_roof:
        ax.vlines([p[0] for p in with_roof], [min(p[1], p[5]) for p in with_roof], [max(p[1], p[5]) for p in with_roof],
                  color="#555555", linewidth=0.6, alpha=0.7, zorder=2, label="distance to the layer's own roof")
        ax.scatter([p[0] for p in with_roof], [p[5] for p in with_roof], marker="_", s=40, color="#555555", zorder=2)
    for bound, colour in COLOUR.items():
        for grouped, marker in ((False, "o"), (True, "^")):
            sel = [p for p in pts if p[2] == bound and p[4] == grouped]
            if sel:
                ax.scatter([p[0] for p in sel], [p[1] for p in sel], color=colour, s=28, marker=marker,
                           label=f"{bound}-bound " + ("grouped convs (useful MACs)" if grouped else "layers"),
                           edgecolor="black", linewidth=0.3, zorder=3)
    if total_bytes > 0 and model_macs > 0 and r.get("total_cycles", 0) > 0:
        ax.scatter([model_macs / total_bytes], [model_macs / (r["total_cycles"] / freq_hz)], marker="*", s=180,
                   color="gold", edgecolor="black", zorder=4, label="whole model")
    ax.set_xscale("log")
    ax.set_yscale("log")
    # The five layers farthest from their roof (without bounds: the slowest), named where their labels
    # do not overlap (npusim_report.place_labels; placed once the axes' scales and limits are final).
    key = (lambda p: p[6]) if all(p[6] is not None for p in pts) else (lambda p: p[1])
    labels = [(p[3] + (f" ({100 * p[6]:.0f}% of roof)" if p[6] is not None else ""), (p[0], p[1]))
              for p in sorted(pts, key=key)[:5]]
    ax.set_xlabel("arithmetic intensity (MACs per DRAM byte)")
    ax.set_ylabel("achieved MAC/s")
    legend = ax.legend(fontsize=8, loc="lower right")
    extra = f"; precision {r['precision']['plan']}" if "precision" in r else ""
    extra += f"; {skipped} layers without MACs or DRAM traffic not shown" if skipped else ""
    if "compiled_efficiency" in r:
        extra += f"; efficiency as compiled {100 * r['compiled_efficiency']:.0f}%"
    npusim_report.fit_title(
        fig, ax.set_title(args.title or f"{npusim_report.run_title(r, args.report)}: {len(pts)} layers{extra}",
                          fontsize=10))
    ax.grid(True, which="both", alpha=0.2)
    fig.tight_layout()
    npusim_report.place_labels(ax, labels, avoid=[legend], fontsize=7)
    try:
        fig.savefig(args.output, dpi=120)
    except OSError as e:
        fail(f"cannot write {args.output}: {e.strerror or e}")
    print(f"wrote {args.output}: {len(pts)} layers of {npusim_report.run_title(r, args.report)} under the {', '.join(sorted(peaks))} roof"
          f"{'s' if len(peaks) > 1 else ''}")


if __name__ == "__main__":
    main()
