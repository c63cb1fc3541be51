#!/usr/bin/env python3
"""Vector layers' rows on chip, end to end (docs/backend.md, "On-chip residency", "Vector layers' rows" and
"LayerNorm rows"): a transformer's residual Add leaves its output in the input scratchpad for the LayerNorm
after it, which reads its rows there; a post-norm LayerNorm leaves its rows there for the GEMM after it and
stores them for its other readers. Runs a model functionally as npusim maps it (the default) and again with
the same mapping but `on_chip: false` on those Adds and LayerNorms (their outputs stored, their readers
loading them). Checks:

- the first run has at least --min-read LayerNorms reading their input on chip (`on_chip_input`, the mapping
  saying "its input read in place"), each reading less from DRAM than in the second run;
- the second run has none, nor the --no-fusion run, and the outputs of the first two runs are identical bit
  for bit;
- re-imposing the first run's --mapping-out reproduces it (the same readers, the same cycles).

Usage: check_vector_residency.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION [--batch N] [--min-read N]
"""
import os
import tempfile

from fusion_runs import fused_run, fusion_args, on_chip_off, shared_failures


def readers(report):
    """{LayerNorm reading its input where the element-wise layer before it left it: that input}."""
    return {l["name"]: l.get("on_chip_input") for l in report["layers"]
            if l["op"] == "LayerNormalization" and "its input read in place" in l.get("mapping", {}).get("description", "")}


def producers(report):
    """The layers whose outputs those readers read on chip, and the LayerNorms storing rows they left on chip."""
    layers = report["layers"]
    out = set()
    for k, l in enumerate(layers):
        if l["name"] in readers(report):
            out.add(next(p["name"] for p in reversed(layers[:k]) if p.get("placement") not in ("fused", "none")))
        if "stored for its other readers" in l.get("mapping", {}).get("description", ""):
            out.add(l["name"])
    return out


def main():
    a = fusion_args(__doc__, "min-read", None)

    def unfuse(fused):
        names = producers(fused)
        return lambda name, line: on_chip_off(line) if name in names else line

    with tempfile.TemporaryDirectory() as tmp:
        reports, outputs = fused_run(a, tmp, unfuse)
        got = readers(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{os.path.basename(a.model)} {a.precision} batch {a.batch}: {len(got)} LayerNorm(s) reading their "
              f"input on chip; {cycles['fused']} cycles ({cycles['unfused']} with the outputs stored, "
              f"{cycles['off']} with --no-fusion)")
        failures = shared_failures(reports, outputs, lambda r: sorted(readers(r)))
        apart = {l["name"]: l for l in reports["unfused"]["layers"]}
        fused = {l["name"]: l for l in reports["fused"]["layers"]}
        for name in got:
            if fused[name].get("dram_bytes_read", 0) >= apart[name].get("dram_bytes_read", 0):
                failures.append(f"{name} reads {fused[name].get('dram_bytes_read', 0)} DRAM bytes, "
                                f"{apart[name].get('dram_bytes_read', 0)} with its input stored")
        if len(got) < a.min_read:
            failures.append(f"{len(got)} LayerNorms read their input on chip, expected at least {a.min_read}")
        for f in failures:
            print("FAIL:", f)
        return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
