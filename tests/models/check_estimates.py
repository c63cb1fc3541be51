#!/usr/bin/env python3
"""The compiler's per-layer estimate against the simulated cycles of the same layer in the whole run.

Usage: check_estimates.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION [--within F] [--worst F]

Runs `npusim run MODEL --config CONFIG --precision PRECISION --report R.json` and, over the layers the
compiler mapped onto the array or the vector unit that took at least 1000 cycles, compares
layers[].mapping.estimated_cycles with layers[].cycles: at least F (default 0.95) of them must lie
within 10%, and none beyond --worst (default 0.25) relative error. Prints the figures and the worst
layers; exits 1 when the bound is not met (docs/backend.md, "Estimates").
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("npusim")
    ap.add_argument("model")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--within", type=float, default=0.95)
    ap.add_argument("--worst", type=float, default=0.25)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        p = subprocess.run([a.npusim, "run", a.model, "--config", a.config, "--precision", a.precision, "-q",
                            "--report", report], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"npusim run failed ({p.returncode}): {p.stderr.strip()}")
            return 1
        layers = json.load(open(report))["layers"]
    mapped = [l for l in layers if l.get("mapping", {}).get("placement") in ("matrix", "vector") and l["cycles"] >= 1000]
    if not mapped:
        print("no mapped layer of 1000 cycles or more")
        return 1
    errors = sorted(((l["mapping"]["estimated_cycles"] - l["cycles"]) / l["cycles"], l["name"], l["cycles"],
                     l["mapping"]["estimated_cycles"]) for l in mapped)
    within = sum(abs(e[0]) <= 0.10 for e in errors) / len(errors)
    worst = max(errors, key=lambda e: abs(e[0]))
    print(f"{os.path.basename(a.model)} {os.path.basename(a.config)} {a.precision}: {100 * within:.1f}% of "
          f"{len(errors)} layers within 10%, worst {100 * worst[0]:+.1f}% ({worst[1]}: simulated {worst[2]}, "
          f"estimated {worst[3]})")
    ok = within >= a.within and abs(worst[0]) <= a.worst
    if not ok:
        for e in sorted(errors, key=lambda e: -abs(e[0]))[:10]:
            print(f"  {100 * e[0]:+7.1f}%  {e[1]}  simulated {e[2]}  estimated {e[3]}")
        print(f"FAIL: want >= {100 * a.within:.0f}% within 10% and none beyond {100 * a.worst:.0f}%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
