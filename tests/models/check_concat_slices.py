#!/usr/bin/env python3
"""Layers that write straight into their Concat slice (PP-OCRv4 det's neck, docs/models.md "PP-OCRv4 det: the
neck (det)"): a nearest Resize (its upsampling's STOREs take the slice's pitch; in int8 its codes requantized
to the Concat's in its tile loop), an element-wise Add of two full maps, and a squeeze-and-excitation block's
residual Add done in its Mul's tile loop (fp16 and fp32), all inputs of one Concat read by a 3x3 conv. Runs the model functionally as npusim compiles it (the Concat folded) and again
with the same mapping but the Concat imposed `placement: vector` (it copies every input, the layers write dense
maps). Checks:

- the folded run's Concat is free and each of its producers writes in place with no dense DRAM scratch (no
  "copied between a Concat's slice" in its mapping; DRAM bytes written = its output's bytes);
- the outputs of the two runs are identical bit for bit, and the folded run takes fewer cycles;
- with --scaled-residual, the SE residual Add is done by its Mul (fusion group "scaled_residual:");
- the top-down path's x + up(z) (backend/fusion/upsample_add.h): the Resize emits nothing and the Add reads z
  itself; a third run with the Resize given a vector tile (its own lowering, the Add apart) has the same
  outputs bit for bit and takes more cycles.

Usage: check_concat_slices.py NPUSIM DIR CONFIG.yaml PRECISION [--scaled-residual] [--set KEY=VALUE ...]
"""
import argparse
import json
import os
import re
import sys
import tempfile

import numpy as np

from check_conv_pool_fusion import load_outputs, run
from fusion_runs import differing_outputs
from random_inputs import write_random_inputs

C, H, W = 24, 20, 24  # each Concat input 24 channels (det's neck): 48-byte rows of a 96-channel pitch in fp16


def make_model(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    inits, nodes = [], []

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v, dtype=np.float32), name))
        return name

    def conv(x, y, cin, cout, k):
        nodes.append(helper.make_node(
            "Conv", [x, const(y + "_w", rng.standard_normal([cout, cin, k, k]) * 0.2),
                     const(y + "_b", rng.standard_normal([cout]) * 0.1)], [y], kernel_shape=[k, k], pads=[k // 2] * 4))

    conv("x", "a", C, C, 3)
    conv("z0", "z", C, C, 1)
    const("scales", [1, 1, 2, 2])
    # The top-down path's x + up(z) (det's p2o.Add.252): the Add reads z itself, the Resize emits nothing.
    nodes.append(helper.make_node("Resize", ["z", "", "scales"], ["up3"], "up3_resize", mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes.append(helper.make_node("Add", ["a", "up3"], ["fpn"], "fpn_add"))
    conv("fpn", "c", C, C, 1)
    # The top-down path's upsampled map (det's p2o.Resize.3-5).
    nodes.append(helper.make_node("Resize", ["z", "", "scales"], ["up"], "up_resize", mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    # An Add of two full maps that no conv's epilogue takes (a has other readers; a Resize makes the other).
    nodes.append(helper.make_node("Resize", ["z", "", "scales"], ["up2"], mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes.append(helper.make_node("Add", ["a", "up2"], ["sum"], "sum_add"))
    # x + x * s (det's p2o.Mul.170 and p2o.Add.276).
    nodes.append(helper.make_node("GlobalAveragePool", ["a"], ["p"]))
    conv("p", "s1", C, 8, 1)
    nodes.append(helper.make_node("Relu", ["s1"], ["s1r"]))
    conv("s1r", "s2", 8, C, 1)
    nodes.append(helper.make_node("HardSigmoid", ["s2"], ["s"], alpha=0.2, beta=0.5))
    nodes.append(helper.make_node("Mul", ["a", "s"], ["m"], "se_mul"))
    nodes.append(helper.make_node("Add", ["a", "m"], ["se"], "se_add"))
    nodes.append(helper.make_node("Concat", ["up", "sum", "se", "c"], ["cat"], axis=1))
    conv("cat", "y", 4 * C, C, 3)
    g = helper.make_graph(nodes, "neck_concat",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W]),
                           helper.make_tensor_value_info("z0", TensorProto.FLOAT, [1, C, H // 2, W // 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, H, W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "neck_concat.onnx")
    onnx.save(m, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("dir")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--scaled-residual", action="store_true")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    model = make_model(a.dir)
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        write_random_inputs(model, ind)
        common = [model, "--config", a.config, "--precision", a.precision, "-q", "--functional", "--inputs", ind]
        for kv in a.set:
            common += ["--set", kv]
        folded_map, unfolded_map = os.path.join(tmp, "folded.yaml"), os.path.join(tmp, "unfolded.yaml")
        apart_map = os.path.join(tmp, "apart.yaml")
        reports, outputs = {}, {}
        for what, extra in (("folded", ["--mapping-out", folded_map]), ("unfolded", ["--mapping", unfolded_map]),
                            ("apart", ["--mapping", apart_map])):
            report = os.path.join(tmp, what + ".json")
            out = os.path.join(tmp, what)
            run(a.npusim, common + ["--outputs", out, "--report", report] + extra)
            with open(report) as f:
                reports[what] = json.load(f)
            outputs[what] = load_outputs(out)
            if what == "folded":
                with open(folded_map) as f, open(unfolded_map, "w") as g, open(apart_map, "w") as h:
                    for line in f:
                        # The Resize given a vector tile: its own lowering, the Add's apart.
                        h.write(line.replace("}", ", tile_elems: 256}", 1) if "name: up3_resize," in line else line)
                        if "Concat" in line and "placement:" in line:
                            line = re.sub(r"placement: \w+", "placement: vector", line)
                        g.write(line)
        ok = True
        concat = next(l for l in reports["folded"]["layers"] if l["op"] == "Concat")
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"neck_concat {a.precision}: {cycles['folded']} cycles folded, {cycles['unfolded']} with the Concat "
              f"copying; Concat: {concat['mapping']['description']}")
        if concat["mapping"]["placement"] != "free":
            print("FAIL: the Concat is not folded")
            ok = False
        es = {"fp32": 4, "fp16": 2, "int8": 1}[a.precision]
        layers = {l["name"]: l for l in reports["folded"]["layers"]}
        # The layers that write the Concat's inputs: the SE residual Add's output written by its Mul when fused.
        # In int8 the Resize's codes are requantized to the Concat's in its own tile loop.
        writers = ["sum_add", "se_mul" if layers["se_add"].get("fused_into") else "se_add", "up_resize"]
        for name in writers:
            l = layers[name]
            desc = l["mapping"]["description"]
            print(f"  {l['name']}: {l['dram_bytes_written']} bytes written; {desc}")
            in_place = "in place" in desc or "then the Add" in desc  # a fused Add's note is its own layer's
            if "copied between a Concat's slice" in desc or not in_place:
                print(f"FAIL: {l['name']} does not write its slice in place")
                ok = False
            if a.precision == "int8" and name == "up_resize" and "requantized to the Concat's codes" not in desc:
                print(f"FAIL: {name} does not requantize its codes to the Concat's")
                ok = False
            if l["dram_bytes_written"] != C * H * W * es:
                print(f"FAIL: {l['name']} writes {l['dram_bytes_written']} bytes, its slice is {C * H * W * es}")
                ok = False
        if a.scaled_residual:
            se = [l for l in reports["folded"]["layers"] if l.get("fusion_group", "").startswith("scaled_residual")
                  and l["op"] == "Add"]
            if not se:
                print("FAIL: the SE residual Add is not done in its Mul's tile loop")
                ok = False
        up, fpn = layers["up3_resize"], layers["fpn_add"]
        print(f"  x + up(z): {cycles['folded']} cycles against {cycles['apart']} with the Resize apart; {fpn['mapping']['description']}")
        if up.get("instructions", 0) != 0 or "read by the Add 'fpn_add'" not in up["mapping"]["description"] or \
                "never written" not in fpn["mapping"]["description"]:
            print(f"FAIL: the Add does not read the Resize's input: {up['mapping']['description']}")
            ok = False
        apart = {l["name"]: l for l in reports["apart"]["layers"]}
        if apart["up3_resize"].get("instructions", 0) == 0:
            print("FAIL: with the Resize given a vector tile, it still emits nothing")
            ok = False
        if differing_outputs(outputs["folded"], outputs["apart"]):
            print("FAIL: outputs differ from the Resize and its Add apart")
            ok = False
        if cycles["folded"] >= cycles["apart"]:
            print("FAIL: reading the upsampled operand from the Resize's input saves no cycles")
            ok = False
        diff = differing_outputs(outputs["folded"], outputs["unfolded"])
        if diff:
            print(f"FAIL: outputs differ from the Concat copying: {diff}")
            ok = False
        if cycles["folded"] >= cycles["unfolded"]:
            print("FAIL: writing the slices in place saves no cycles")
            ok = False
        if not ok:
            sys.exit(1)
        print("ok")


if __name__ == "__main__":
    main()
