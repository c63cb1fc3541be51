#!/usr/bin/env python3
"""Attention's score -> softmax -> value fused into one layer, end to end (docs/backend.md, "Fused
attention"): runs a model functionally as npusim fuses it (the default) and again with the same mapping
(the first run's --mapping-out) but with a tiling key (loop_order) imposed on each fused block's value
MatMul, which makes the back end lower those blocks layer by layer, everything else unchanged. Checks:

- the fused run has at least --min-blocks fused attention layers, each with its Softmax and value MatMul
  in the report as placement "fused", fused_into the block's layer, naming their input on chip;
- the outputs of both runs are identical bit for bit (the fusion rounds where the layers did);
- the fused run takes fewer cycles and its report counts the block's intermediates among the tensors on
  chip;
- with --no-fusion no layer is a fused attention block;
- re-imposing the fused run's --mapping-out reproduces it (the same blocks, the same cycles);
- with --want-pipelined, every fused block is software-pipelined (its loop order says so: the next block's
  scores MATMUL before this block's value MATMUL, which the simulated candidates choose on an array that
  chains instructions).

Usage: check_attention_fusion.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION [--min-blocks N] [--batch N]
                                 [--want-pipelined]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from random_inputs import write_random_inputs


def run(npusim, args):
    p = subprocess.run([npusim, "run"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL: npusim run {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
        sys.exit(1)


def blocks(report):
    """The fused attention layers' names, and the report rows fused into them."""
    hosts = {l["name"] for l in report["layers"]
             if l.get("mapping", {}).get("description", "").startswith("fused attention")}
    fused = [l for l in report["layers"] if l.get("placement") == "fused" and l.get("fused_into") in hosts]
    return hosts, fused


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for positional in ("npusim", "model", "config", "precision"):
        ap.add_argument(positional)
    ap.add_argument("--min-blocks", type=int, default=1)
    ap.add_argument("--batch", type=int, default=0, help="npusim run --batch N (0: the model's own)")
    ap.add_argument("--want-pipelined", action="store_true")
    a = ap.parse_args()
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        common = [a.model, "--config", a.config, "--precision", a.precision, "-q"]
        if a.batch:
            common += ["--batch", str(a.batch)]
            ind = None  # random inputs at the batch: npusim's own (--seed)
        else:
            write_random_inputs(a.model, ind)
        fused_map = os.path.join(tmp, "fused.yaml")
        unfused_map = os.path.join(tmp, "unfused.yaml")
        reports = {}
        for what in ("fused", "unfused"):
            out = os.path.join(tmp, what)
            report = os.path.join(tmp, what + ".json")
            mapping = ["--mapping-out", fused_map] if what == "fused" else ["--mapping", unfused_map]
            inputs = ["--inputs", ind] if ind else ["--seed", "3"]
            run(a.npusim, common + ["--functional"] + inputs + ["--outputs", out, "--report", report] + mapping)
            reports[what] = json.load(open(report))
            if what == "fused":
                hosts, fused = blocks(reports["fused"])
                values = {l["name"] for l in fused if l["op"] == "MatMul"}
                with open(fused_map) as f, open(unfused_map, "w") as g:
                    for line in f:
                        if any(f"{{name: {v}, " in line for v in values):
                            line = line.replace("}", ", loop_order: spatial_outer}", 1)
                        g.write(line)
        ok = True
        hosts, fused = blocks(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(hosts)} fused attention layer(s); {cycles['fused']} cycles against "
              f"{cycles['unfused']} layer by layer")
        if len(hosts) < a.min_blocks:
            print(f"FAIL: {name}: {len(hosts)} fused attention layers, want >= {a.min_blocks}")
            ok = False
        for h in hosts:
            rows = sorted((l["op"], bool(l.get("on_chip_input"))) for l in fused if l["fused_into"] == h)
            if rows != [("MatMul", True), ("Softmax", True)]:
                print(f"FAIL: {name}: the rows fused into {h} are {rows}, want the Softmax and the value MatMul, "
                      "each naming its input on chip")
                ok = False
        if a.want_pipelined:
            for l in reports["fused"]["layers"]:
                if l["name"] in hosts and "software-pipelined" not in l["mapping"].get("loop_order", ""):
                    print(f"FAIL: {name}: the fused block {l['name']} is not software-pipelined "
                          f"({l['mapping'].get('loop_order')})")
                    ok = False
        if blocks(reports["unfused"])[0]:
            print(f"FAIL: {name}: a tiling key on the value MatMul did not turn the fusion off")
            ok = False
        if cycles["fused"] >= cycles["unfused"]:
            print(f"FAIL: {name}: the fused attention did not save cycles")
            ok = False
        on_chip = {w: r["fusion"]["tensors_on_chip"] for w, r in reports.items()}
        if on_chip["fused"] != on_chip["unfused"] + 2 * len(hosts):
            print(f"FAIL: {name}: fusion.tensors_on_chip {on_chip['fused']}, want {on_chip['unfused']} + 2 per block")
            ok = False
        for f in sorted(os.listdir(os.path.join(tmp, "unfused"))):
            got = np.load(os.path.join(tmp, "fused", f))
            want = np.load(os.path.join(tmp, "unfused", f))
            same = got.shape == want.shape and got.tobytes() == want.tobytes()
            print(f"  {f}: {'identical' if same else 'DIFFERENT'} bits")
            ok &= same
        report = os.path.join(tmp, "off.json")
        run(a.npusim, common + ["--no-fusion", "--report", report])
        if blocks(json.load(open(report)))[0]:
            print(f"FAIL: {name}: --no-fusion left a fused attention layer")
            ok = False
        report = os.path.join(tmp, "again.json")
        run(a.npusim, common + ["--mapping", fused_map, "--report", report])
        again = json.load(open(report))
        if blocks(again)[0] != hosts or again["total_cycles"] != cycles["fused"]:
            print(f"FAIL: {name}: re-imposing the fused run's --mapping-out gave {len(blocks(again)[0])} fused "
                  f"layers and {again['total_cycles']} cycles, not the fused run's")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
