#!/usr/bin/env python3
"""Runs a real model functionally (`npusim run --functional --inputs --outputs`) and compares every output
with the FP32 reference interpreter on the same seeded inputs.

Usage: check_functional.py NPUSIM REFERENCE_RUN MODEL.onnx CONFIG.yaml [--max-rel-error X] [--seed N]

REFERENCE_RUN is tests/models' models_reference_run (compiler::interpret on the imported, unlowered
graph). One N(0,1) float32 input per model input is written as INPUT_DIR/NAME.npy. The error of an
output is max|npusim - reference| / max|reference| (default limit 1e-4, the Compiler issue's); the
cosine similarity is printed too. Exits 1 when an output is missing, has the wrong shape or is off.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx


def model_inputs(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    for i in m.graph.input:
        if i.name not in inits:
            yield i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("reference_run")
    ap.add_argument("model")
    ap.add_argument("config")
    ap.add_argument("--max-rel-error", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        ind, refd, npud = (os.path.join(tmp, d) for d in ("inputs", "reference", "npusim"))
        for d in (ind, refd, npud):
            os.makedirs(d)
        rng = np.random.default_rng(a.seed)
        for n, dims in model_inputs(a.model):
            if any(d <= 0 for d in dims):
                print(f"FAIL: {name}: input {n} has dynamic dimensions {dims}")
                return 1
            np.save(os.path.join(ind, n + ".npy"), rng.standard_normal(dims).astype(np.float32))
        runs = {
            "reference": [a.reference_run, a.model, ind, refd],
            "npusim": [a.npusim, "run", a.model, "--config", a.config, "--functional", "--precision", "fp32",
                       "--inputs", ind, "--outputs", npud, "-q"],
        }
        for what, cmd in runs.items():
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"FAIL: {name}: {what} run exited {p.returncode}: {p.stderr.strip()[-400:]}")
                return 1
        outputs = sorted(os.listdir(refd))
        if not outputs:
            print(f"FAIL: {name}: the reference wrote no outputs")
            return 1
        worst = 0.0
        for f in outputs:
            ref = np.load(os.path.join(refd, f)).astype(np.float64)
            path = os.path.join(npud, f)
            if not os.path.exists(path):
                print(f"FAIL: {name}: npusim wrote no {f}")
                return 1
            got = np.load(path).astype(np.float64)
            if got.shape != ref.shape:
                print(f"FAIL: {name}: {f} has shape {got.shape}, the reference {ref.shape}")
                return 1
            scale = np.max(np.abs(ref))
            if not np.isfinite(got).all() or scale == 0:
                print(f"FAIL: {name}: {f}: non-finite npusim output or an all-zero reference")
                return 1
            rel = float(np.max(np.abs(got - ref)) / scale)
            cos = float(np.dot(got.ravel(), ref.ravel()) / (np.linalg.norm(got) * np.linalg.norm(ref)))
            print(f"{name} {f[:-4]} {list(ref.shape)}: max rel error {rel:.3e}, cosine {cos:.8f}, "
                  f"max |reference| {scale:.4g}")
            worst = max(worst, rel)
        if worst > a.max_rel_error:
            print(f"FAIL: {name}: max rel error {worst:.3e} above {a.max_rel_error:g}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
