#!/usr/bin/env python3
"""A squeeze-and-excitation block's input written on chip by the conv on the array that produces it, end to end
(docs/backend.md, "Squeeze-and-excitation groups", "The block's input written where the group holds it"): runs
a model functionally as npusim maps it (the default) and again with the same mapping (the first run's
--mapping-out) but with `on_chip: false` on each such conv, so that the pool loads the input from DRAM as
before; everything else unchanged. Checks:

- the first run has at least --min-written GlobalAveragePool layers that read their input where the conv
  before wrote it: their mapping line says so and they read at least their input's bytes less from DRAM than
  in the second run (int8: the output stage's records are still loaded);
- the run with the convs' outputs stored has none, and the outputs of both runs are identical bit for bit;
- with --no-fusion no pool reads its input on chip;
- re-imposing the first run's --mapping-out reproduces it (the same pools, the same cycles).

`--make-small DIR` first writes DIR/se_block.onnx, a RegNetY block's body: a 1x1 conv + ReLU, a 3x3 grouped
conv of 8-channel groups + ReLU over 96 channels of 14 x 14 pixels, the SE block (global average pool, 1x1 conv
+ ReLU, 1x1 conv + Sigmoid, Mul) and the 1x1 conv after it (--depthwise: a ReLU and a depthwise 3x3 conv over
96 input channels instead, as in an MBConv block).

Usage: check_se_input_on_chip.py NPUSIM MODEL.onnx|--make-small DIR CONFIG.yaml PRECISION [--min-written N]
                                 [--set KEY=VALUE ...]
"""
import argparse
import os
import sys
import tempfile

import numpy as np

from fusion_runs import on_chip_off, run_variants, shared_failures
from random_inputs import write_random_inputs

WRITTEN = "read where the conv before wrote it"


def make_small(folder, depthwise=False):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    C, W, H, S, G = 48, 96, 14, 12, 8
    inits, nodes = [], []

    def const(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    if depthwise:  # an MBConv block's depthwise conv (EfficientNet) on the block's input, on the vector unit
        G, C = 1, W
        nodes.append(helper.make_node("Relu", ["x"], ["ar"]))
    else:
        nodes.append(helper.make_node("Conv", ["x", const("a_w", [W, C, 1, 1], 0.2), const("a_b", [W], 0.1)],
                                      ["a"], kernel_shape=[1, 1]))
        nodes.append(helper.make_node("Relu", ["a"], ["ar"]))
    nodes.append(helper.make_node("Conv", ["ar", const("b_w", [W, G, 3, 3], 0.2), const("b_b", [W], 0.1)], ["b"],
                                  group=W // G, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["b"], ["xse"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["xse"], ["pooled"]))
    nodes.append(helper.make_node("Conv", ["pooled", const("fc1_w", [S, W, 1, 1], 0.2), const("fc1_b", [S], 0.1)],
                                  ["fc1"], kernel_shape=[1, 1]))
    nodes.append(helper.make_node("Relu", ["fc1"], ["fc1r"]))
    nodes.append(helper.make_node("Conv", ["fc1r", const("fc2_w", [W, S, 1, 1], 0.2), const("fc2_b", [W], 0.1)],
                                  ["fc2"], kernel_shape=[1, 1]))
    nodes.append(helper.make_node("Sigmoid", ["fc2"], ["scale"]))
    nodes.append(helper.make_node("Mul", ["xse", "scale"], ["scaled"]))
    nodes.append(helper.make_node("Conv", ["scaled", const("c_w", [W, W, 1, 1], 0.1), const("c_b", [W], 0.1)],
                                  ["y"], kernel_shape=[1, 1]))
    g = helper.make_graph(nodes, "se_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, W, H, H])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "se_block.onnx")
    onnx.save(m, path)
    return path


def written_pools(report):
    """The report's global pools that read their input where the conv before wrote it: {pool: DRAM bytes read}."""
    return {l["name"]: l.get("dram_bytes_read", 0) for l in report["layers"]
            if l["op"] == "GlobalAveragePool" and WRITTEN in str(l.get("mapping", {}).get("description", ""))}


def producers(report):
    """The convs before the pools that read on chip (the last Conv layer before each, its activation fused)."""
    layers = report["layers"]
    pools = written_pools(report)
    convs = set()
    for k, l in enumerate(layers):
        if l["name"] in pools:
            convs.add(next(p["name"] for p in reversed(layers[:k]) if p["op"] == "Conv"))
    return convs


def input_bytes(layer, precision):
    """The bytes of a layer's input (its input_shape's elements in the precision's type)."""
    n = 1
    for d in layer["input_shape"].split("x"):
        n *= int(d)
    return n * {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}[precision]


def unfuse(fused):
    """Mapping lines that store each such conv's output (on_chip: false): its pool loads it from DRAM."""
    convs = producers(fused)

    def rewrite(name, line):
        if name not in convs:
            return line
        return on_chip_off(line)
    return rewrite


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("--depthwise", action="store_true",
                    help="--make-small with a depthwise 3x3 conv instead of the grouped one")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-written", type=int, default=1)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.make_small:
        os.makedirs(a.make_small, exist_ok=True)
        a.model = make_small(a.make_small, a.depthwise)
    name = os.path.basename(a.model)
    sets = [arg for kv in a.set for arg in ("--set", kv)]
    with tempfile.TemporaryDirectory() as tmp:
        write_random_inputs(a.model, os.path.join(tmp, "in"))
        reports, outputs = run_variants(a.npusim, [a.model, "--config", a.config, "--precision", a.precision, "-q"]
                                        + sets, tmp, os.path.join(tmp, "in"), unfuse)
        ok = True
        pools = written_pools(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(pools)} SE pool(s) reading their input where the conv before wrote "
              f"it; {cycles['fused']} cycles ({cycles['unfused']} with those convs' outputs stored, "
              f"{cycles['off']} with --no-fusion)")
        if len(pools) < a.min_written:
            print(f"FAIL: {len(pools)} pools read on chip, expected at least {a.min_written}")
            ok = False
        apart = {l["name"]: l for l in reports["unfused"]["layers"]}
        for pool, read in pools.items():
            x = input_bytes(apart[pool], a.precision)
            if read + x > apart[pool].get("dram_bytes_read", 0):
                print(f"FAIL: {pool}: reads {read} bytes from DRAM, {apart[pool].get('dram_bytes_read')} with its "
                      f"input stored, whose {x} bytes it should no longer read")
                ok = False
        for failure in shared_failures(reports, outputs, written_pools):
            print(f"FAIL: {failure}")
            ok = False
        if not ok:
            sys.exit(1)
        print("ok")


if __name__ == "__main__":
    main()
