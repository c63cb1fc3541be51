#!/usr/bin/env python3
"""The output stage on the accumulator's read path (`systolic_array.output_stage`, docs/isa.md `VEC output`),
end to end: runs a model with the stage and without it (`--set systolic_array.output_stage=false`) and checks

- the stage takes the VEC outputs off the vector lanes: the report's vector unit is busy fewer cycles, by at
  least --min-saved of the lanes' cycles;
- the model takes no more cycles with the stage than without it;
- `--functional` outputs are bit for bit the same with and without it (the stage's arithmetic is VEC
  output's; the mapping search, which simulates its candidates, may choose other tiles, and the fused
  blocks' sums do not depend on the tile).

Usage: check_output_stage.py NPUSIM MODEL.onnx|--make-small-dwconv DIR CONFIG.yaml PRECISION [--min-saved N]
`--make-small-dwconv DIR` writes check_conv_pool_fusion.py's two MobileNetV2 blocks into DIR and checks them.
Prints one summary line; exits 1 on the first failed check.
"""
import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def npusim(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small-dwconv", metavar="DIR")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-saved", type=int, default=1)
    a = ap.parse_args()
    if a.make_small_dwconv:
        from check_conv_pool_fusion import make_small_dwconv
        os.makedirs(a.make_small_dwconv, exist_ok=True)
        a.model = make_small_dwconv(a.make_small_dwconv)
    if not a.model:
        fail("give MODEL.onnx or --make-small-dwconv DIR")
    with tempfile.TemporaryDirectory() as tmp:
        reports, outs = {}, {}
        for tag, value in (("on", "true"), ("off", "false")):
            base = [a.model, "--config", a.config, "--precision", a.precision, "-q", "--set",
                    f"systolic_array.output_stage={value}"]
            reports[tag] = os.path.join(tmp, f"{tag}.json")
            npusim([a.npusim, "run"] + base + ["--report", reports[tag]])
            outs[tag] = os.path.join(tmp, f"out_{tag}")
            npusim([a.npusim, "run"] + base + ["--functional", "--outputs", outs[tag]])
        r = {t: json.load(open(p)) for t, p in reports.items()}
        busy = {t: r[t]["units"]["vector"]["busy"] for t in r}
        saved = busy["off"] - busy["on"]
        if saved < a.min_saved:
            fail(f"the vector lanes were busy {busy['on']} cycles with the output stage, {busy['off']} without: "
                 f"{saved} saved, expected at least {a.min_saved}")
        if r["on"]["total_cycles"] > r["off"]["total_cycles"]:
            fail(f"{r['on']['total_cycles']} cycles with the output stage, {r['off']['total_cycles']} without")
        files = sorted(os.listdir(outs["off"]))
        if not files or sorted(os.listdir(outs["on"])) != files:
            fail(f"output files differ: {sorted(os.listdir(outs['on']))} against {files}")
        for f in files:
            if not filecmp.cmp(os.path.join(outs["on"], f), os.path.join(outs["off"], f), shallow=False):
                fail(f"--functional output {f} differs with the output stage")
        print(f"output stage: vector lanes busy {busy['off']} -> {busy['on']} cycles, model "
              f"{r['off']['total_cycles']} -> {r['on']['total_cycles']} cycles, {len(files)} outputs bit for bit")


if __name__ == "__main__":
    main()
