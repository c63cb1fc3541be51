#!/usr/bin/env python3
"""A GEMM chain's column block chosen by simulating the producer's tiles (compiler/backend/fusion/residency.cpp,
chain_block): a transformer's FFN at batch 8 on tpu-v1, whose hidden layer stays on chip for the second
MatMul. Runs the model with --mapping-out and checks:

- every first FFN MatMul (`linear1`) leaves its output on chip for the second (`linear2` reads it in place)
  and takes a tile of whole folds of the array's columns (the stored tiling's 384-channel tile before);
- re-imposing the mapping file reproduces the cycles.

Usage: check_chain_block.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION --batch N --cols C
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(npusim, args, report):
    subprocess.run([npusim, "run"] + args + ["-q", "--report", report], check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    for name in ("npusim", "model", "config", "precision"):
        ap.add_argument(name)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--cols", type=int, default=256)
    a = ap.parse_args()
    base = [a.model, "--config", a.config, "--precision", a.precision, "--batch", str(a.batch)]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        mapping = os.path.join(tmp, "m.yaml")
        r = run(a.npusim, base + ["--mapping-out", mapping], os.path.join(tmp, "a.json"))
        layers = {l["name"]: l for l in r["layers"]}
        firsts = [n for n in layers if n.endswith("linear1/MatMul")]
        if not firsts:
            failures.append("no linear1 MatMul in the model")
        for n in firsts:
            second = layers.get(n.replace("linear1", "linear2"))
            if second is None or not second.get("on_chip_input"):
                failures.append(f"{n}: the next MatMul does not read its output in place")
            tile = layers[n].get("mapping", {}).get("tile", {})
            tn = tile.get("n")
            if not tn or tn % a.cols != 0:
                failures.append(f"{n}: output-channel tile {tn}, not whole folds of {a.cols} columns")
        again = run(a.npusim, base + ["--mapping", mapping], os.path.join(tmp, "b.json"))
        if again["total_cycles"] != r["total_cycles"]:
            failures.append(f"mapping round trip: {r['total_cycles']} -> {again['total_cycles']} cycles")
        print(f"{os.path.basename(a.model)} {a.precision} batch {a.batch}: {len(firsts)} FFN chain(s), "
              f"{r['total_cycles']} cycles")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
