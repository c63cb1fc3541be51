#!/usr/bin/env python3
"""The input layout transpose's tile judged with its readers (docs/models.md, "ResNet-50 at batch 8 on
datacenter: the layout's tile by its readers (dc60)"): a vector layer's tile candidates are ranked by when
the layers reading its output could end (the first tile's STORE plus their roofline bound, or the layer's
span plus their share of its last tile), so a smaller tile that lets a long conv start on the first images
wins over the one whose own span is shortest.

Usage: check_layout_readers.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION BATCH MIN_EFFICIENCY
Checks: the first layer (the layout transpose) took its tile for its readers (its tile_limit says so), its
first tile is stored before the whole-SRAM tile's, and the model's efficiency is at least MIN_EFFICIENCY
(without the readers' term ResNet-18 at batch 8 on datacenter bf16 reached 61.1 %). Prints one line; exits 1
on the first failed check.
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    if len(sys.argv) != 7:
        fail(__doc__.strip().splitlines()[-5])
    npusim, model, config, precision, batch, least = sys.argv[1:]
    with tempfile.TemporaryDirectory() as d:
        report = os.path.join(d, "r.json")
        cmd = [npusim, "run", model, "-c", config, "--precision", precision, "--batch", batch, "-q",
               "--report", report]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            fail(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr[-300:]}")
        with open(report) as f:
            r = json.load(f)
    layout = r["layers"][0]
    if not layout["name"].startswith("layout_"):
        fail(f"the first layer is {layout['name']}, not the input's layout transpose")
    why = layout["mapping"].get("tile_limit", "")
    m = re.search(r"readers \((\d+) cycles at least\) start earlier: its first tile stored at (\d+) cycles "
                  r"against (\d+)", why)
    if not m:
        fail(f"{layout['name']}'s tile was not chosen for its readers: '{why}'")
    stored, whole = int(m.group(2)), int(m.group(3))
    if stored >= whole:
        fail(f"its first tile is stored at {stored} cycles, not before the whole-SRAM tile's {whole}")
    eff = r["model_efficiency"]
    if eff < float(least):
        fail(f"model efficiency {eff:.4f} below {least} ({r['total_cycles']} cycles)")
    print(f"ok: {layout['name']} tile {layout['mapping']['tile']['elems']}, first tile stored at {stored} "
          f"cycles (whole-SRAM tile: {whole}), model efficiency {eff:.4f} ({r['total_cycles']} cycles)")


if __name__ == "__main__":
    main()
