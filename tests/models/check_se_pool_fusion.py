#!/usr/bin/env python3
"""A squeeze-and-excitation pool in its depthwise conv's epilogue, end to end (docs/backend.md,
"Squeeze-and-excitation groups", "The pool in the depthwise conv's epilogue"): runs a model functionally as
npusim fuses it (the default) and again with the same mapping (the first run's --mapping-out) but with each
such depthwise conv's tile_ow halved, a tile whose rows are not whole (a depthwise conv read through a line
buffer: `on_chip: false` on the conv before it, the pair lowered layer by layer), so that the pool runs as its
own layer; everything else unchanged. Checks:

- the fused run has at least --min-fused GlobalAveragePool layers whose work their depthwise producer did:
  fused_into that conv, fusion group "se_pool:" + the conv, their input named on chip (its read saved),
  no instructions of their own, and their mapping line naming the conv;
- the unfused run has none, and the outputs of both runs are identical bit for bit;
- with --no-fusion no pool is fused;
- re-imposing the fused run's --mapping-out reproduces it (the same fused pools, the same cycles).

`--make-small DIR` first writes DIR/se_block.onnx, one MBConv block without its expansion: a 3x3 depthwise
conv + SiLU over 64 channels of 14x14 pixels, the SE block (global average pool, 1x1 conv + SiLU, 1x1 conv +
Sigmoid, Mul) and the 1x1 project conv; run with a 32 KiB input scratchpad, the depthwise output (25 KiB in
fp16) does not fit three quarters of it, so the SE group cannot hold it and the pool would read it back from
DRAM. `--expand` puts a 1x1 expansion conv + SiLU before the depthwise conv, which then reads it through a
line buffer (int8: the bands pool the codes with the pool's integer scheme).

Usage: check_se_pool_fusion.py NPUSIM MODEL.onnx|--make-small DIR CONFIG.yaml PRECISION [--min-fused N]
                               [--set KEY=VALUE ...]
"""
import argparse
import json
import os
import re
import sys
import tempfile

import numpy as np

from fusion_runs import differing_outputs, on_chip_off, run_variants
from random_inputs import write_random_inputs


def make_small(folder, expand):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    C, H, W, S, M, E = 64, 14, 14, 16, 24, 16
    inits, nodes = [], []

    def const(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def silu(x, y):
        nodes.append(helper.make_node("Sigmoid", [x], [y + "_sig"]))
        nodes.append(helper.make_node("Mul", [x, y + "_sig"], [y]))

    x = "x"
    if expand:  # a 1x1 expansion + SiLU: the depthwise conv then reads it through a line buffer
        nodes.append(helper.make_node("Conv", ["x", const("ex_w", [C, E, 1, 1], 0.2), const("ex_b", [C], 0.1)],
                                      ["ex"], kernel_shape=[1, 1]))
        silu("ex", "exa")
        x = "exa"
    nodes.append(helper.make_node("Conv", [x, const("dw_w", [C, 1, 3, 3], 0.3), const("dw_b", [C], 0.1)],
                                  ["dw"], group=C, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    silu("dw", "xse")
    nodes.append(helper.make_node("GlobalAveragePool", ["xse"], ["pooled"]))
    nodes.append(helper.make_node("Conv", ["pooled", const("fc1_w", [S, C, 1, 1], 0.2), const("fc1_b", [S], 0.1)],
                                  ["fc1"], kernel_shape=[1, 1]))
    silu("fc1", "fc1a")
    nodes.append(helper.make_node("Conv", ["fc1a", const("fc2_w", [C, S, 1, 1], 0.2), const("fc2_b", [C], 0.1)],
                                  ["fc2"], kernel_shape=[1, 1]))
    nodes.append(helper.make_node("Sigmoid", ["fc2"], ["scale"]))
    nodes.append(helper.make_node("Mul", ["xse", "scale"], ["scaled"]))
    nodes.append(helper.make_node("Conv", ["scaled", const("pj_w", [M, C, 1, 1], 0.1), const("pj_b", [M], 0.1)],
                                  ["y"], kernel_shape=[1, 1]))
    g = helper.make_graph(nodes, "se_block",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, E if expand else C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, M, H, W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "se_block.onnx")
    onnx.save(m, path)
    return path


def fused_pools(report):
    """The report's global pools done in their depthwise producer's epilogue: {pool name: conv name}."""
    return {l["name"]: l.get("fused_into") for l in report["layers"]
            if l["op"] == "GlobalAveragePool" and l.get("fusion_group", "").startswith("se_pool:")}


def unfuse(fused):
    """Mapping lines that run the fused run's pools apart: each pooling conv's tiles half as wide (whole rows),
    and a depthwise conv read through a line buffer lowered layer by layer with the conv before it (on_chip:
    false), where the depthwise conv pools nothing (int8 pools in the bands only)."""
    convs = set(fused_pools(fused).values())
    pairs = {l["fusion_group"].split(":", 1)[1] for l in fused["layers"]
             if l["name"] in convs and l.get("fusion_group", "").startswith("conv_dwconv:")}

    def rewrite(name, line):
        if name in convs:
            line = re.sub(r"tile_ow: (\d+)", lambda t: f"tile_ow: {max(1, int(t.group(1)) // 2)}", line)
        if name in pairs:
            line = on_chip_off(line)
        return line
    return rewrite


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-fused", type=int, default=1)
    ap.add_argument("--expand", action="store_true",
                    help="--make-small: a 1x1 expansion conv before the depthwise conv (a line buffer pair)")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.make_small:
        os.makedirs(a.make_small, exist_ok=True)
        a.model = make_small(a.make_small, a.expand)
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        write_random_inputs(a.model, ind)
        common = [a.model, "--config", a.config, "--precision", a.precision, "-q"]
        for kv in a.set:
            common += ["--set", kv]
        reports, outputs = run_variants(a.npusim, common, tmp, ind, unfuse, functional=("fused", "unfused", "off"))
        ok = True
        pools = fused_pools(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(pools)} SE pool(s) in their depthwise conv's epilogue; {cycles['fused']} "
              f"cycles ({cycles['unfused']} with the pools apart, {cycles['off']} with --no-fusion)")
        if len(pools) < a.min_fused:
            print(f"FAIL: {len(pools)} pools fused, expected at least {a.min_fused}")
            ok = False
        layers = {l["name"]: l for l in reports["fused"]["layers"]}
        for pool, conv in pools.items():
            l, c = layers[pool], layers.get(conv)
            if c is None or c["op"] != "Conv" or l["fusion_group"] != "se_pool:" + conv:
                print(f"FAIL: {pool}: fused into {conv!r}, group {l['fusion_group']!r}")
                ok = False
            elif l.get("instructions", 0) != 0 or not l.get("on_chip_input"):
                print(f"FAIL: {pool}: {l.get('instructions')} instructions, on-chip input {l.get('on_chip_input')!r}")
                ok = False
            elif conv not in json.dumps(l["mapping"]):
                print(f"FAIL: {pool}: its mapping line does not name the conv: {l['mapping']}")
                ok = False
        for what in ("unfused", "off"):
            if fused_pools(reports[what]):
                print(f"FAIL: {what}: pools fused: {sorted(fused_pools(reports[what]))}")
                ok = False
        diff = differing_outputs(outputs["fused"], outputs["unfused"])
        if diff:
            print(f"FAIL: outputs differ from the pools apart: {diff}")
            ok = False
        if cycles["again"] != cycles["fused"] or fused_pools(reports["again"]) != pools:
            print(f"FAIL: re-imposed mapping: {cycles['again']} cycles against {cycles['fused']}, pools "
                  f"{sorted(fused_pools(reports['again']))}")
            ok = False
        if not ok:
            sys.exit(1)
        print("ok")


if __name__ == "__main__":
    main()
