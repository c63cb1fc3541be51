#!/usr/bin/env python3
"""Golden check: npusim's FP32 outputs against onnxruntime on the same inputs.

Usage:
  golden_check.py MODEL.onnx --runner CMD... [--node-modules DIR] [--seed N] [--max-rel-error X] [--min-cosine C]

The script writes one seeded N(0,1) float32 input per model input (INPUT_DIR/NAME.npy), runs
onnxruntime-node through scripts/ort_run.js and the npusim side through the runner command, then compares
every output: max relative error = max|npusim - ort| / max|ort|, and cosine similarity. The runner is
any command that reads INPUT_DIR/NAME.npy and writes OUTPUT_DIR/NAME.npy; {model}, {inputs} and
{outputs} in it are replaced, e.g. the compiled program on the functional datapath:
  --runner npusim run {model} --functional --precision fp32 --inputs {inputs} --outputs {outputs}
or tests/golden's `golden_reference_run` (the FP32 reference interpreter).

onnxruntime-node is installed with `npm install --ignore-scripts onnxruntime-node` into --node-modules'
parent (tests/golden does that into the build tree at test time).
Exit status: 0 when every output is within the limits, 1 when one is not, 2 on a usage or setup error.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))


def model_inputs(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
        out.append((i.name, dims))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--runner", nargs=argparse.REMAINDER, required=True, help="command (rest of the line)")
    ap.add_argument("--node-modules", default=os.environ.get("NODE_PATH", ""), help="folder holding onnxruntime-node")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-rel-error", type=float, default=1e-4)
    ap.add_argument("--min-cosine", type=float, default=0.99999)
    a = ap.parse_args()
    if not os.path.isfile(a.model):
        print(f"golden_check: no model {a.model}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        ind, ortd, ourd = (os.path.join(tmp, d) for d in ("inputs", "ort", "npusim"))
        for d in (ind, ortd, ourd):
            os.makedirs(d)
        rng = np.random.default_rng(a.seed)
        for name, dims in model_inputs(a.model):
            np.save(os.path.join(ind, name + ".npy"), rng.standard_normal(dims).astype(np.float32))
        env = dict(os.environ)
        if a.node_modules:
            env["NODE_PATH"] = a.node_modules
        r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), a.model, ind, ortd], env=env)
        if r.returncode != 0:
            print("golden_check: onnxruntime failed", file=sys.stderr)
            return 2
        cmd = [c.replace("{model}", a.model).replace("{inputs}", ind).replace("{outputs}", ourd) for c in a.runner]
        r = subprocess.run(cmd)
        if r.returncode != 0:
            print(f"golden_check: runner failed: {shlex.join(cmd)}", file=sys.stderr)
            return 1
        ok = True
        for f in sorted(os.listdir(ortd)):
            ref = np.load(os.path.join(ortd, f)).astype(np.float64)
            p = os.path.join(ourd, f)
            if not os.path.exists(p):
                print(f"{f[:-4]}: npusim wrote no output")
                ok = False
                continue
            got = np.load(p).astype(np.float64)
            if got.shape != ref.shape:
                print(f"{f[:-4]}: shape {got.shape} != onnxruntime's {ref.shape}")
                ok = False
                continue
            scale = max(np.abs(ref).max(), 1e-30)
            rel = np.abs(got - ref).max() / scale
            cos = float(np.dot(got.ravel(), ref.ravel()) / max(np.linalg.norm(got) * np.linalg.norm(ref), 1e-300))
            good = rel <= a.max_rel_error and cos >= a.min_cosine
            ok &= good
            print(f"{os.path.basename(a.model)} {f[:-4]}: max relative error {rel:.3e}, cosine {cos:.8f} "
                  f"{'ok' if good else 'FAIL'} (limits {a.max_rel_error:g}, {a.min_cosine})")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
