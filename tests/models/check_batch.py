#!/usr/bin/env python3
"""`npusim run --batch N` on a model exported at batch 1 computes each image as the batch-1 model does.

Usage: check_batch.py NPUSIM MODEL.onnx CONFIG.yaml N [--precision P]

Runs the model functionally once at batch N on N seeded N(0,1) images, then once per image at its exported
batch 1, and requires every output of the batch run to equal, image by image and bit for bit, the batch-1
run's. A model whose exported shapes cannot follow the batch fails the first run (exit 2, one sentence);
one whose shapes follow it wrongly (images mixed by a misplaced batch) fails the comparison.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("model")
    ap.add_argument("config")
    ap.add_argument("batch", type=int)
    ap.add_argument("--precision", default="fp32")
    a = ap.parse_args()
    m = onnx.load(a.model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inputs = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input
              if i.name not in inits}
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        def run(tag, arrays, batch):
            d = os.path.join(tmp, tag)
            os.makedirs(d + "/in")
            for name, x in arrays.items():
                np.save(os.path.join(d, "in", name + ".npy"), x)
            cmd = [a.npusim, "run", a.model, "--config", a.config, "--precision", a.precision, "--functional",
                   "--inputs", d + "/in", "--outputs", d + "/out", "-q", "--batch", str(batch)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
            return {o.name: np.load(os.path.join(d, "out", o.name + ".npy")) for o in m.graph.output}
        whole = {n: rng.standard_normal([a.batch] + s[1:]).astype(np.float32) for n, s in inputs.items()}
        batched = run("batch", whole, a.batch)
        for k in range(a.batch):
            single = run(f"image{k}", {n: x[k:k + 1] for n, x in whole.items()}, 1)
            for name, y in single.items():
                got = batched[name][k:k + 1]
                if got.shape != y.shape or not np.array_equal(got, y):
                    sys.exit(f"FAIL: output '{name}' of image {k} at --batch {a.batch} differs from its batch-1 "
                             f"run (shape {got.shape} vs {y.shape}, max |diff| "
                             f"{np.abs(got - y).max() if got.shape == y.shape else 'n/a'})")
    print(f"{os.path.basename(a.model)} at --batch {a.batch}: every image equals its batch-1 run")


if __name__ == "__main__":
    main()
