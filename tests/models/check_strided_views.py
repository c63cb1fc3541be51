#!/usr/bin/env python3
"""Slices and Transposes folded into their readers' loads, end to end (docs/backend.md, "Strided views"):
runs a model functionally as npusim compiles it (the default: attention's QKV Slices and head-split
Transposes are strided views of the projection's output, the Transpose merging the heads back is written
in place by the value MatMul) and again with every such layer imposed
`placement: vector` by a mapping file (the first run's --mapping-out, so every other layer keeps its
mapping), which makes them copy as before. Checks:

- the folded run has at least --min-folded Slice/Transpose layers that are free views (0 cycles, no
  instructions, the mapping naming the readers or the producer they fold into and the value they view),
  none in the other;
- the outputs of both runs are identical bit for bit (a view holds the bytes the copy would write);
- the folded run takes fewer cycles;
- with --no-fusion no layer is a view;
- re-imposing the folded run's --mapping-out reproduces it (the same views, the same cycles).

With --batch N (an `_anybatch` export), torch's batch_first attention at batch N: the Transposes around the
QKV projection and the Reshapes that merge the batch with the heads (`view(seq, batch * heads, dh)`) are
views too, with split dims (docs/backend.md, "Split dims").

Usage: check_strided_views.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION [--min-folded N] [--batch N]
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

VIEWS = ("folded into its readers' loads", "folded into its producer's stores")


def run(npusim, args):
    p = subprocess.run([npusim, "run"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL: npusim run {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
        sys.exit(1)


def views(report):
    """The Slice / Transpose layers read in place as strided views."""
    return [l for l in report["layers"] if l["op"] in ("Slice", "Transpose")
            and l.get("mapping", {}).get("description", "").startswith(VIEWS)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for positional in ("npusim", "model", "config", "precision"):
        ap.add_argument(positional)
    ap.add_argument("--min-folded", type=int, default=1)
    ap.add_argument("--batch", type=int, default=0)
    a = ap.parse_args()
    name = os.path.basename(a.model)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        common = [a.model, "--config", a.config, "--precision", a.precision, "-q"]
        if a.batch:
            common += ["--batch", str(a.batch)]
            ind = None  # random inputs at the batch: npusim's own (--seed)
        else:
            write_random_inputs(a.model, ind)
        folded_map = os.path.join(tmp, "folded.yaml")
        copied_map = os.path.join(tmp, "copied.yaml")
        reports = {}
        for what in ("folded", "copied"):
            out = os.path.join(tmp, what)
            report = os.path.join(tmp, what + ".json")
            mapping = ["--mapping-out", folded_map] if what == "folded" else ["--mapping", copied_map]
            inputs = ["--inputs", ind] if ind else ["--seed", "3"]
            run(a.npusim, common + ["--functional"] + inputs + ["--outputs", out, "--report", report] + mapping)
            reports[what] = json.load(open(report))
            if what == "folded":
                names = {l["name"] for l in views(reports["folded"])}
                with open(folded_map) as f, open(copied_map, "w") as g:
                    for line in f:
                        m = re.search(r"name: ([^,}]+)", line)
                        if m and m.group(1).strip() in names:
                            line = re.sub(r"placement: \w+", "placement: vector", line)
                        g.write(line)
        folded, copied = views(reports["folded"]), views(reports["copied"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(folded)} Slice/Transpose layer(s) read in place; {cycles['folded']} "
              f"cycles against {cycles['copied']} with them copying")
        if len(folded) < a.min_folded or copied:
            print(f"FAIL: {name}: {len(folded)} views (want >= {a.min_folded}), {len(copied)} in the copying run")
            ok = False
        for l in folded:
            if l["cycles"] != 0 or l["instructions"] != 0 or l["mapping"]["placement"] != "free" or \
                    not re.search(r"a strided view of '|writes its output in place into '", l["mapping"]["description"]):
                print(f"FAIL: {name}: view {l['name']}: {l['cycles']} cycles, {l['instructions']} instructions, "
                      f"placement {l['mapping']['placement']}, '{l['mapping']['description']}'")
                ok = False
        if cycles["folded"] >= cycles["copied"]:
            print(f"FAIL: {name}: the views did not save cycles")
            ok = False
        for f in sorted(os.listdir(os.path.join(tmp, "copied"))):
            got = np.load(os.path.join(tmp, "folded", f))
            want = np.load(os.path.join(tmp, "copied", f))
            same = got.shape == want.shape and got.tobytes() == want.tobytes()
            print(f"  {f}: {'identical' if same else 'DIFFERENT'} bits")
            ok &= same
        report = os.path.join(tmp, "off.json")
        run(a.npusim, common + ["--no-fusion", "--report", report])
        if views(json.load(open(report))):
            print(f"FAIL: {name}: --no-fusion left a view")
            ok = False
        report = os.path.join(tmp, "again.json")
        run(a.npusim, common + ["--mapping", folded_map, "--report", report])
        again = json.load(open(report))
        if {l["name"] for l in views(again)} != {l["name"] for l in folded} or again["total_cycles"] != cycles["folded"]:
            print(f"FAIL: {name}: re-imposing the folded run's --mapping-out gave {len(views(again))} views and "
                  f"{again['total_cycles']} cycles, not the folded run's")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
