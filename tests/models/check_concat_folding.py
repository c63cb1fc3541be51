#!/usr/bin/env python3
"""Concats folded into their producers' stores, end to end (docs/backend.md): runs a model functionally
with folding (the default) and again with every Concat imposed `placement: vector` by a mapping file
(the first run's --mapping-out, so every other layer keeps its mapping), and compares the outputs:
int8 bit for bit, float within --max-rel-error of the output's scale. The folded run must fold at least
--min-folded Concats and take fewer cycles.

Usage: check_concat_folding.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION [--min-folded N] [--max-rel-error X]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from random_inputs import write_random_inputs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("model")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-folded", type=int, default=1)
    ap.add_argument("--max-rel-error", type=float, default=1e-5)
    a = ap.parse_args()
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        write_random_inputs(a.model, ind)
        folded_map = os.path.join(tmp, "folded.yaml")
        unfolded_map = os.path.join(tmp, "unfolded.yaml")
        runs = {}
        for what, mapping in (("folded", ["--mapping-out", folded_map]), ("unfolded", ["--mapping", unfolded_map])):
            out = os.path.join(tmp, what)
            report = os.path.join(tmp, what + ".json")
            cmd = [a.npusim, "run", a.model, "--config", a.config, "--precision", a.precision, "--functional",
                   "--inputs", ind, "--outputs", out, "--report", report, "-q"] + mapping
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"FAIL: {name}: the {what} run exited {p.returncode}: {p.stderr.strip()[-400:]}")
                return 1
            runs[what] = (out, json.load(open(report)))
            if what == "folded":
                lines = open(folded_map).read().splitlines()
                with open(unfolded_map, "w") as f:
                    for line in lines:
                        if "Concat" in line and "placement:" in line:
                            line = re.sub(r"placement: \w+", "placement: vector", line)
                        f.write(line + "\n")
        folded = [l for l in runs["folded"][1]["layers"] if l["op"] == "Concat" and l["mapping"]["placement"] == "free"]
        still = [l for l in runs["unfolded"][1]["layers"] if l["op"] == "Concat" and l["mapping"]["placement"] == "free"]
        cycles = {w: r[1]["total_cycles"] for w, r in runs.items()}
        print(f"{name} {a.precision}: {len(folded)} Concat(s) folded; {cycles['folded']} cycles against "
              f"{cycles['unfolded']} unfolded")
        ok = True
        if len(folded) < a.min_folded or still:
            print(f"FAIL: {name}: {len(folded)} folded (want >= {a.min_folded}), {len(still)} folded in the unfolded run")
            ok = False
        if cycles["folded"] >= cycles["unfolded"]:
            print(f"FAIL: {name}: folding did not save cycles")
            ok = False
        for f in sorted(os.listdir(runs["unfolded"][0])):
            got = np.load(os.path.join(runs["folded"][0], f))
            want = np.load(os.path.join(runs["unfolded"][0], f))
            if a.precision == "int8":
                same = got.shape == want.shape and got.tobytes() == want.tobytes()
                print(f"  {f}: {'identical' if same else 'DIFFERENT'} bits")
                ok &= same
            else:
                rel = float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))
                print(f"  {f}: max relative difference {rel:.3g}")
                ok &= rel <= a.max_rel_error
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
