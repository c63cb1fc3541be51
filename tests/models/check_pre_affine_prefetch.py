#!/usr/bin/env python3
"""A pointwise conv that applies a BatchNormalization + Relu in its loads (fusion/pre_affine.h) loads each
input tile ahead of the tile before's map (matrix_walk.h, Tiling::prefetch_input; docs/models.md,
"DenseNet-121 int8 and RegNetY (dn)").

The model: a Relu and a Concat (a dense block's concatenation, 352 channels of 28x28) -> BatchNormalization
-> Relu -> 1x1 conv to 128 channels, int8 on edge. The map's three vector passes over the input (30 k cycles)
are less work than the array's (36 k): with the map and the loads hidden behind the array, the conv takes
the array's busy time plus the pipeline's fill (the first tile's load and map, the weights) and drain (the
last epilogue). Checks, on the conv's own program and report:

- the map is done in the conv's loads (fused_into the conv);
- the second input tile's LOAD comes before the first tile's map VEC in program order, and the conv's input
  scratchpad holds three tiles;
- the conv's cycles are within 30 % of its array busy cycles (two input slots: a load, a map and a CONV end
  to end for every two tiles, 39 % over on this model).

Usage: check_pre_affine_prefetch.py NPUSIM CONFIG.yaml DIR
"""
import json
import os
import subprocess
import sys

import numpy as np


def make_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    C, N, H, W = 352, 128, 28, 28
    inits = []

    def const(name, v):
        inits.append(numpy_helper.from_array(v.astype(np.float32), name))
        return name

    nodes = [
        helper.make_node("Relu", ["x"], ["s0"]),
        helper.make_node("Concat", ["s0", "x"], ["s"], axis=1),
        helper.make_node("BatchNormalization",
                         ["s", const("g", rng.standard_normal(C) * 0.3 + 1), const("b", rng.standard_normal(C) * 0.2),
                          const("m", rng.standard_normal(C) * 0.2), const("v", np.abs(rng.standard_normal(C)) + 0.5)],
                         ["n"], epsilon=1e-5),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Conv", ["r", const("w", rng.standard_normal([N, C, 1, 1]) * 0.2)], ["y"],
                         kernel_shape=[1, 1]),
    ]
    g = helper.make_graph(nodes, "bn_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C // 2, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N, H, W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    npusim, config, folder = sys.argv[1:4]
    os.makedirs(folder, exist_ok=True)
    model = os.path.join(folder, "bn_conv.onnx")
    make_model(model)
    report, prog = os.path.join(folder, "r.json"), os.path.join(folder, "p.npu")
    common = [model, "--config", config, "--precision", "int8", "-q"]
    subprocess.run([npusim, "run", *common, "--report", report], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([npusim, "compile", *common, "-o", prog], check=True, stdout=subprocess.DEVNULL)
    asm = subprocess.run([npusim, "disasm", prog], check=True, capture_output=True, text=True).stdout
    with open(report) as f:
        layers = {l["name"]: l for l in json.load(f)["layers"]}
    failures = []
    conv = next(l for l in layers.values() if l["op"] == "Conv")
    bn = next(l for l in layers.values() if l["op"] == "BatchNormalization")
    if bn.get("fused_into") != conv["name"]:
        failures.append(f"the map is not done in the conv's loads: fused_into {bn.get('fused_into')!r}")
    mine = [line for line in asm.splitlines() if f"layer={conv['name']} " in line]
    loads = [i for i, line in enumerate(mine) if line.startswith("LOAD") and " buf=input " in line]
    maps = [i for i, line in enumerate(mine) if line.startswith("VEC") and " op=mul " in line]
    if len(loads) < 3 or not maps or loads[1] > maps[0]:
        failures.append(f"input LOADs at {loads[:3]} of the conv's instructions, its first map VEC at "
                        f"{maps[:1]}: the second tile's load should come first")
    sram = conv["mapping"]["sram_bytes"]["input"]
    tile = None
    for line in mine:
        if line.startswith("LOAD") and " buf=input " in line:
            f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            tile = int(f["size0"]) * int(f["size1"]) * int(f["size2"])
            break
    if tile is None or sram < 3 * tile:
        failures.append(f"input scratchpad {sram} bytes for tiles of {tile}: not three slots")
    ratio = conv["cycles"] / conv["compute_cycles"]
    if ratio > 1.30:
        failures.append(f"conv {conv['cycles']} cycles for {conv['compute_cycles']} of the array's: {ratio:.3f}x > 1.30x")
    print(f"conv {conv['cycles']} cycles, array {conv['compute_cycles']} ({ratio:.3f}x), input loads {loads[:3]}, "
          f"first map VEC {maps[:1]}, input scratchpad {sram} bytes, tile {tile}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
