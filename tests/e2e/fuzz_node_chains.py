#!/usr/bin/env python3
"""Fuzz: random valid graphs made of ONNX's node-test models never stop npusim with an internal message.

usage: fuzz_node_chains.py NPUSIM NODE_DIR IN_SCOPE.txt WORKDIR [--graphs N] [--seed S]

Each graph chains two node-test models of the in-scope list (tests/compiler/node_tests_in_scope.txt) from
libonnx-testdata: the first model's first output feeds an input of the second of the same type and
static shape (same opset and IR version; onnx.compose.merge_models, then ONNX's checker). Each graph runs
`npusim run GRAPH -q` (timing) and `npusim run GRAPH -q --functional` (random inputs). What must hold:
- the timing run exits 0 or 2 (a model npusim cannot take is the user's to change: one sentence, exit 2);
- the functional run exits 0, 2, or 1 with a sentence about the data (random labels out of range, say);
- no run dies on a signal, and no message is an internal one (a C++ library's what(), an assertion).
Prints each violation and exits 1 if there is one.
"""
import argparse
import os
import random
import re
import subprocess
import sys

import onnx
import onnx.compose
from onnx import TensorProto

INTERNAL = re.compile(r"std::|vector::|basic_string|_M_|logic_error|bad_alloc|assert|internal|backend:")


def signature(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return None if any(d is None for d in dims) else (t.elem_type, tuple(dims))


def load(node_dir, names):
    models = {}
    for name in names:
        path = os.path.join(node_dir, name, "model.onnx")
        if not os.path.exists(path):
            continue
        m = onnx.load(path)
        init = {i.name for i in m.graph.initializer}
        ins = [(i.name, signature(i)) for i in m.graph.input if i.name not in init]
        outs = [(o.name, signature(o)) for o in m.graph.output]
        if all(s is not None for _, s in ins + outs):
            models[name] = (m, ins, outs, tuple((o.domain, o.version) for o in m.opset_import))
    return models


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("npusim")
    ap.add_argument("node_dir")
    ap.add_argument("in_scope")
    ap.add_argument("workdir")
    ap.add_argument("--graphs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    names = [l.strip() for l in open(a.in_scope) if l.strip() and not l.startswith("#")]
    models = load(a.node_dir, names)
    os.makedirs(a.workdir, exist_ok=True)
    rng = random.Random(a.seed)
    keys = sorted(models)
    made, problems = 0, []
    for _ in range(a.graphs * 50):
        if made == a.graphs:
            break
        first = rng.choice(keys)
        m1, _, outs1, opset = models[first]
        feeds = [(b, i) for b in keys for i in models[b][1]
                 if models[b][3] == opset and models[b][0].ir_version == m1.ir_version and i[1] == outs1[0][1]
                 and i[1][0] == TensorProto.FLOAT]
        if not feeds:
            continue
        second, (inp, _) = rng.choice(feeds)
        try:
            g = onnx.compose.merge_models(m1, models[second][0], io_map=[(outs1[0][0], inp)], prefix1="a_",
                                          prefix2="b_")
            onnx.checker.check_model(g)
        except Exception:
            continue
        made += 1
        path = os.path.join(a.workdir, f"{made}_{first}__{second}.onnx")
        onnx.save(g, path)
        for extra in ([], ["--functional"]):
            try:
                r = subprocess.run([a.npusim, "run", path, "-q"] + extra, capture_output=True, text=True,
                                   timeout=300)
            except subprocess.TimeoutExpired:
                problems.append(f"{first} -> {second} {' '.join(extra)}: timed out")
                continue
            what = f"{first} -> {second} {' '.join(extra)}: exit {r.returncode}: {r.stderr.strip()[:300]}"
            allowed = (0, 2) if not extra else (0, 1, 2)
            if r.returncode not in allowed or (r.returncode != 0 and INTERNAL.search(r.stderr)):
                problems.append(what)
    for p in problems:
        print("FAIL:", p)
    print(f"{made} chained graphs, {len(problems)} problems")
    if made < a.graphs:
        print(f"FAIL: only {made} of {a.graphs} graphs could be made")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
