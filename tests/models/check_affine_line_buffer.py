#!/usr/bin/env python3
"""A conv -> affine map -> depthwise conv in one line buffer, end to end (docs/backend.md, "Conv -> depthwise
conv fusion (line-buffer tiling)", "An affine map between them"): PP-OCRv4's LCNet blocks end each 1x1 conv's
HardSwish with a "learnable affine block" (a scalar Mul and Add) that the depthwise conv after it reads. The
conv applies the map (fusion/post_affine.h) to each tile it writes into the depthwise conv's line buffer. Runs
a model functionally as npusim fuses it (the default) and again with the same mapping (the first run's
--mapping-out) but with `on_chip: false` on each such conv, which lowers the pair layer by layer (the map then
in the conv's STOREs); everything else unchanged. Checks:

- the fused run has at least --min-fused depthwise convs fused into the conv before them across an affine
  map (the depthwise conv's group `conv_dwconv:CONV`, the map's `post_affine:CONV`, neither with instructions);
- the unfused run and the --no-fusion run have none; the outputs of the fused and the unfused runs are
  identical bit for bit, and the fused run moves fewer DRAM bytes;
- re-imposing the fused run's --mapping-out reproduces it (the same pairs, the same cycles).

`--make-small DIR` first writes DIR/lcnet_dw.onnx: two LCNet blocks, a 1x1 conv + HardSwish + the scalar
affine map, then a padded 3x3 depthwise conv + HardSwish, at stride 1 and then at stride 2 (maps too large
for residency to keep on chip on edge).

Usage: check_affine_line_buffer.py NPUSIM MODEL.onnx|- CONFIG.yaml PRECISION [--make-small DIR] [--min-fused N]
                                   [--set KEY=VALUE ...]
"""
import os
import sys
import tempfile

import numpy as np

from fusion_runs import dram_bytes, fused_run, fusion_args, on_chip_off, shared_failures


def make_small(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    C, E, F, H, W = 16, 48, 96, 56, 48
    inits, nodes = [], []

    def const(name, shape, scale, offset=0.0):
        v = (rng.standard_normal(shape) * scale + offset).astype(np.float32)
        inits.append(numpy_helper.from_array(v, name))
        return name

    def conv_hswish(x, y, cin, cout, k, group, stride):
        nodes.append(helper.make_node("Conv", [x, const(y + "_w", [cout, cin // group, k, k], 0.3),
                                               const(y + "_b", [cout], 0.1)], [y + "_c"], group=group,
                                      kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride]))
        nodes.append(helper.make_node("HardSigmoid", [y + "_c"], [y + "_hs"], alpha=1.0 / 6, beta=0.5))
        nodes.append(helper.make_node("Mul", [y + "_c", y + "_hs"], [y]))

    def affine(x, y):
        nodes.append(helper.make_node("Mul", [x, const(y + "_s", [1], 0.2, 1.0)], [y + "_m"]))
        nodes.append(helper.make_node("Add", [y + "_m", const(y + "_t", [1], 0.1)], [y]))

    conv_hswish("x", "a", C, E, 1, 1, 1)
    affine("a", "am")
    conv_hswish("am", "d", E, E, 3, E, 1)
    conv_hswish("d", "b", E, F, 1, 1, 1)
    affine("b", "bm")
    conv_hswish("bm", "y", F, F, 3, F, 2)
    g = helper.make_graph(nodes, "lcnet_dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, F, H // 2, W // 2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "lcnet_dw.onnx")
    onnx.save(m, path)
    return path


def affine_pairs(report):
    """The depthwise convs fused into the conv before them across an affine map: {depthwise conv: conv}."""
    layers = report["layers"]
    maps = {l.get("fused_into") for l in layers if l.get("fusion_group", "").startswith("post_affine:")}
    return {l["name"]: l["fused_into"] for l in layers
            if l["op"] == "Conv" and l.get("fusion_group", "").startswith("conv_dwconv:") and l.get("fused_into")
            and l["fused_into"] in maps}


def unfuse(fused):
    """Mapping lines of the pairs' convs with `on_chip: false`: each pair layer by layer."""
    convs = set(affine_pairs(fused).values())
    return lambda name, line: on_chip_off(line) if name in convs else line


def main():
    a = fusion_args(__doc__, "min-fused", lambda d: os.makedirs(d, exist_ok=True) or make_small(d))
    with tempfile.TemporaryDirectory() as tmp:
        reports, outputs = fused_run(a, tmp, unfuse)
        pairs = affine_pairs(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{os.path.basename(a.model)} {a.precision}: {len(pairs)} depthwise conv(s) fused across an affine map "
              f"({pairs}); {cycles['fused']} cycles, {dram_bytes(reports['fused'])} DRAM bytes ({cycles['unfused']} "
              f"cycles, {dram_bytes(reports['unfused'])} bytes layer by layer; {cycles['off']} with --no-fusion)")
        failures = shared_failures(reports, outputs, affine_pairs)
        if len(pairs) < a.min_fused:
            failures.append(f"{len(pairs)} pairs fused, expected at least {a.min_fused}")
        for l in reports["fused"]["layers"]:
            if l["name"] in pairs or (l.get("fused_into") in pairs.values() and l["op"] == "BatchNormalization"):
                if l.get("instructions", 0) != 0:
                    failures.append(f"{l['name']}: {l['instructions']} instructions of its own")
        if not dram_bytes(reports["fused"]) < dram_bytes(reports["unfused"]):
            failures.append("the fused run moves no fewer DRAM bytes than the pairs layer by layer")
        for f in failures:
            print("FAIL: " + f)
        if failures:
            sys.exit(1)
        print("ok")


if __name__ == "__main__":
    main()
