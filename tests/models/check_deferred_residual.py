#!/usr/bin/env python3
"""An SE residual done in the tile loop of the top-down Add that reads it (PP-OCRv4 det's neck, RSEFPN: docs/models.md
"PP-OCRv4 det: the neck (det2)", backend/fusion/deferred_residual.h). The model: a 1x1 conv makes x, an SE block
(pool, two 1x1 convs, HardSigmoid) makes s, y = x + x * s; the level below, computed after the Mul, is upsampled
(nearest 2x) and added to y, w = y + up(z), which a 3x3 conv reads. Runs the model functionally as npusim compiles
it, again with the same mapping but the Mul given a vector tile (the Mul and its Add then lowered in one tile loop,
writing y, as before this change), and again with the first run's own mapping (the round trip). Checks:

- the Mul and its residual Add emit nothing (fusion group "deferred_residual:<the top-down Add>"), and the top-down
  Add's mapping says it made y itself;
- with the Resize given a vector tile (no upsampled operand), the Mul and its Add are lowered just before the
  top-down Add, which reads y: the same outputs;
- the outputs of the runs are identical bit for bit; the deferred run moves fewer DRAM bytes and takes fewer cycles
  than the Mul's loop writing y; the round trip takes the same cycles.

Usage: check_deferred_residual.py NPUSIM DIR CONFIG.yaml PRECISION [--set KEY=VALUE ...]
"""
import os

import numpy as np

from fusion_runs import differing_outputs, dram_bytes
from mapping_runs import finish, parse_args, shared_failures, three_runs

C, H, W = 32, 24, 32


def make_model(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    inits, nodes = [], []

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v, dtype=np.float32), name))
        return name

    def conv(x, y, cin, cout, k, bias=True):
        ins = [x, const(y + "_w", rng.standard_normal([cout, cin, k, k]) * 0.3)]
        if bias:
            ins.append(const(y + "_b", rng.standard_normal([cout]) * 0.1))
        nodes.append(helper.make_node("Conv", ins, [y], y + "_conv", kernel_shape=[k, k], pads=[k // 2] * 4))

    conv("a", "x", 16, C, 1, bias=False)
    nodes.append(helper.make_node("GlobalAveragePool", ["x"], ["p"]))
    conv("p", "s1", C, 8, 1)
    nodes.append(helper.make_node("Relu", ["s1"], ["s1r"]))
    conv("s1r", "s2", 8, C, 1)
    nodes.append(helper.make_node("HardSigmoid", ["s2"], ["s"], alpha=0.2, beta=0.5))
    nodes.append(helper.make_node("Mul", ["x", "s"], ["m"], "se_mul"))
    nodes.append(helper.make_node("Add", ["x", "m"], ["y"], "se_add"))
    # The level below, computed after the Mul (det: the top-down sum of the coarser levels).
    conv("b", "z", 16, C, 1)
    const("scales", [1, 1, 2, 2])
    nodes.append(helper.make_node("Resize", ["z", "", "scales"], ["up"], "up_resize", mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes.append(helper.make_node("Add", ["y", "up"], ["w"], "topdown_add"))
    conv("w", "out", C, 24, 3)
    g = helper.make_graph(nodes, "neck_level",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 16, H, W]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 16, H // 2, W // 2])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 24, H, W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "neck_level.onnx")
    onnx.save(m, path)
    return path


def main():
    a = parse_args(__doc__)
    model = make_model(a.dir)

    def mul_apart(line):  # the Mul given a vector tile: it and its Add in one loop writing y, as before
        return line.replace("}", ", tile_elems: 256}", 1) if "name: se_mul," in line else line

    def resize_tiled(line):  # the Resize given a vector tile: no upsampled operand, the Mul lowered apart late
        return line.replace("}", ", tile_elems: 256}", 1) if "name: up_resize," in line else line

    reports, outputs = three_runs(a, model, mul_apart, {"fallback": resize_tiled})
    ok = True
    cycles = {w: r["total_cycles"] for w, r in reports.items()}
    dram = {w: dram_bytes(r) for w, r in reports.items()}
    layers = {l["name"]: l for l in reports["own"]["layers"]}
    top = layers["topdown_add"]
    print(f"neck_level {a.precision}: {cycles['own']} cycles, {dram['own']} DRAM bytes deferred; "
          f"{cycles['edited']} cycles, {dram['edited']} bytes with the Mul's loop writing y; "
          f"{cycles['round trip']} cycles on the round trip")
    print(f"  topdown_add: {top['mapping']['description']}")
    for name in ("se_mul", "se_add"):
        l = layers[name]
        if l.get("fusion_group") != "deferred_residual:topdown_add" or l.get("instructions", 0) != 0:
            print(f"FAIL: {name} is not done by the top-down Add: {l['mapping']['description']}")
            ok = False
    if "made in the same tile loop" not in top["mapping"]["description"]:
        print("FAIL: the top-down Add does not make its operand y itself")
        ok = False
    apart = {l["name"]: l for l in reports["edited"]["layers"]}
    if apart["se_mul"].get("instructions", 0) == 0:
        print("FAIL: with the Mul given a vector tile, it still emits nothing")
        ok = False
    if cycles["own"] >= cycles["edited"] or dram["own"] >= dram["edited"]:
        print("FAIL: the deferred residual saves no cycles or DRAM bytes")
        ok = False
    # The top-down Add without its upsampled operand: the waiting Mul and its Add lowered just before it.
    fallback = {l["name"]: l for l in reports["fallback"]["layers"]}
    if fallback["topdown_add"].get("instructions", 0) == 0 or "made in the same tile loop" in \
            fallback["topdown_add"]["mapping"]["description"]:
        print("FAIL: with the Resize tiled, the top-down Add still makes y")
        ok = False
    failures = shared_failures(reports, outputs, "Mul-apart")
    if differing_outputs(outputs["own"], outputs["fallback"]):
        failures.append("outputs differ from the run with the Mul and its Add lowered just before the top-down Add")
    finish(ok, failures)


if __name__ == "__main__":
    main()
