#!/usr/bin/env python3
"""A BatchNormalization and its activation before a pointwise conv, applied in the conv's loads, end to end
(docs/models.md, "Edge at batch 1: GoogLeNet and DenseNet"; fusion group "pre_affine:"): DenseNet's
norm1 -> relu1 -> conv1 on the block's concatenation so far; and a max pool of stride 1 before a pointwise
conv done on the conv's tiles ("pre_pool:"): GoogLeNet's branch-4 pool -> 1x1 conv; and a
squeeze-and-excitation block's channel scale applied in its project conv's loads ("pre_scale:"): an MBConv
block's Mul(X, s) -> 1x1 conv where the SE group cannot hold X (EfficientNet-B0's blocks 1-3 and 5.1-5.2). Runs a model functionally as npusim fuses it
(the default) and again with the same mapping (the first run's --mapping-out) but with each such map given
a vector tile (`tile_elems`), which leaves it to its own lowering; everything else unchanged. Checks:

- the fused run has at least --min-fused maps whose work their reader did: fused_into that conv, the fusion
  group naming it, no instructions of their own, their mapping naming it;
- the unfused run and the --no-fusion run have none; the outputs of the fused and the unfused runs are
  identical bit for bit, and the fused run moves fewer DRAM bytes and takes fewer cycles;
- re-imposing the fused run's --mapping-out reproduces it (the same fused maps, the same cycles).

`--make-small DIR` first writes DIR/dense_block.onnx: a stem conv, a dense block of three layers (each
BatchNormalization + Relu -> 1x1 conv -> BatchNormalization + Relu -> padded 3x3 conv, its output
concatenated to the block's input: each map reads a Concat's view, whose pixels lie the whole block's channels
apart), a transition (BatchNormalization + Relu -> 1x1 conv -> 2x2 average pool) and a 3x3 max pool of
stride 1 (padded) read by a 1x1 conv.

`--make-small-patch DIR` writes DIR/patch_stem.onnx instead: a graph input (2x3x62x61, NCHW) read by a 3x3
conv of stride 3 (padded, a patchify stem) whose layout change to NHWC is done in the conv's loads
("pre_transpose:", fusion/pre_transpose.h).

`--make-small-se DIR` writes DIR/mbconv_se.onnx instead: one EfficientNet MBConv block (1x1 expansion + SiLU,
3x3 depthwise conv + SiLU, SE with SiLU and Sigmoid, 1x1 projection, the residual Add) over a 48x48 map whose
96-channel X (442 KB in fp16) is larger than three quarters of edge's input scratchpad.

Usage: check_pre_affine.py NPUSIM MODEL.onnx|--make-small DIR|--make-small-se DIR|--make-small-patch DIR CONFIG.yaml PRECISION [--min-fused N]
                           [--set KEY=VALUE ...]
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

from fusion_runs import dram_bytes, run_variants, shared_failures
from random_inputs import write_random_inputs


def make_small(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    C0, G, B, H, W = 24, 8, 16, 18, 20  # stem channels, growth, bottleneck, map
    inits, nodes = [], []

    def const(name, shape, scale, offset=0.0):
        v = (rng.standard_normal(shape) * scale + offset).astype(np.float32)
        inits.append(numpy_helper.from_array(v, name))
        return name

    def bn_relu(x, y, ch):
        var = np.abs(rng.standard_normal(ch)).astype(np.float32) + 0.5
        inits.append(numpy_helper.from_array(var, y + "_var"))
        nodes.append(helper.make_node("BatchNormalization",
                                      [x, const(y + "_g", [ch], 0.3, 1.0), const(y + "_b", [ch], 0.2),
                                       const(y + "_mean", [ch], 0.2), y + "_var"], [y + "_n"], epsilon=1e-5))
        nodes.append(helper.make_node("Relu", [y + "_n"], [y]))

    def conv(x, y, cin, cout, k):
        nodes.append(helper.make_node("Conv", [x, const(y + "_w", [cout, cin, k, k], 0.3)], [y],
                                      kernel_shape=[k, k], pads=[k // 2] * 4))

    conv("x", "stem", 3, C0, 3)
    feats, ch = ["stem"], C0
    for i in range(3):
        cat = feats[0] if len(feats) == 1 else f"cat{i}"
        if len(feats) > 1:
            nodes.append(helper.make_node("Concat", feats, [cat], axis=1))
        bn_relu(cat, f"l{i}_r1", ch)
        conv(f"l{i}_r1", f"l{i}_c1", ch, B, 1)
        bn_relu(f"l{i}_c1", f"l{i}_r2", B)
        conv(f"l{i}_r2", f"l{i}_c2", B, G, 3)
        feats.append(f"l{i}_c2")
        ch += G
    nodes.append(helper.make_node("Concat", feats, ["cat3"], axis=1))
    bn_relu("cat3", "t_r", ch)
    conv("t_r", "t_c", ch, ch // 2, 1)
    nodes.append(helper.make_node("AveragePool", ["t_c"], ["t_p"], kernel_shape=[2, 2], strides=[2, 2]))
    # An inception block's fourth branch: a 3x3 max pool (stride 1, padded) read only by a 1x1 conv.
    nodes.append(helper.make_node("MaxPool", ["t_p"], ["b4_p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    conv("b4_p", "y", ch // 2, 16, 1)
    g = helper.make_graph(nodes, "dense_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, H // 2, W // 2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "dense_block.onnx")
    onnx.save(m, path)
    return path


def make_small_se(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    C, E, S, H = 24, 96, 8, 48  # block channels, expansion, squeeze, map
    inits, nodes = [], []

    def const(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(x, y, cin, cout, k, group=1, act=True):
        out = y + "_c" if act else y
        nodes.append(helper.make_node("Conv", [x, const(y + "_w", [cout, cin // group, k, k], 0.3),
                                               const(y + "_b", [cout], 0.1)], [out],
                                      kernel_shape=[k, k], pads=[k // 2] * 4, group=group))
        if act:  # SiLU, as torchvision exports it
            nodes.append(helper.make_node("Sigmoid", [out], [y + "_s"]))
            nodes.append(helper.make_node("Mul", [out, y + "_s"], [y]))

    conv("x", "e", C, E, 1)
    conv("e", "d", E, E, 3, group=E)
    nodes.append(helper.make_node("GlobalAveragePool", ["d"], ["p"]))
    conv("p", "f1", E, S, 1)
    conv("f1", "f2_c", S, E, 1, act=False)
    nodes.append(helper.make_node("Sigmoid", ["f2_c"], ["f2"]))
    nodes.append(helper.make_node("Mul", ["d", "f2"], ["m"]))
    conv("m", "pr", E, C, 1, act=False)
    nodes.append(helper.make_node("Add", ["pr", "x"], ["y"]))
    g = helper.make_graph(nodes, "mbconv_se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, H, H])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "mbconv_se.onnx")
    onnx.save(m, path)
    return path


def make_small_patch(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(13)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), n)
             for n, s in (("w", [16, 3, 3, 3]), ("b", [16]), ("w2", [24, 16, 3, 3]))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "patch_stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 62, 61])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 24, 21, 21])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "patch_stem.onnx")
    onnx.save(m, path)
    return path


GROUPS = {"pre_affine": "BatchNormalization", "pre_pool": "MaxPool", "pre_scale": "Mul", "pre_transpose": "Transpose"}


def fused_maps(report):
    """The report's maps and pools done by their reader: {layer name: reader name}."""
    return {l["name"]: l.get("fused_into") for l in report["layers"]
            if l.get("fusion_group", "").split(":")[0] in GROUPS}


def unfuse(fused):
    """Mapping lines of the fused run's maps given a vector tile (tile_elems): each map's own lowering."""
    maps = set(fused_maps(fused))
    return lambda name, line: line.replace("}", ", tile_elems: 1024}", 1) if name in maps else line


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("--make-small-se", metavar="DIR")
    ap.add_argument("--make-small-patch", metavar="DIR")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-fused", type=int, default=1)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.make_small:
        os.makedirs(a.make_small, exist_ok=True)
        a.model = make_small(a.make_small)
    if a.make_small_se:
        os.makedirs(a.make_small_se, exist_ok=True)
        a.model = make_small_se(a.make_small_se)
    if a.make_small_patch:
        os.makedirs(a.make_small_patch, exist_ok=True)
        a.model = make_small_patch(a.make_small_patch)
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        common = [a.model, "--config", a.config, "--precision", a.precision, "-q"]
        for kv in a.set:
            common += ["--set", kv]
        ind = os.path.join(tmp, "in")
        write_random_inputs(a.model, ind)
        reports, outputs = run_variants(a.npusim, common, tmp, ind, unfuse)
        ok = True
        maps = fused_maps(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(maps)} map(s) done in their reader's loads ({sorted(maps)}); "
              f"{cycles['fused']} cycles, {dram_bytes(reports['fused'])} DRAM bytes ({cycles['unfused']} cycles, "
              f"{dram_bytes(reports['unfused'])} bytes with the maps apart; {cycles['off']} with --no-fusion)")
        if len(maps) < a.min_fused:
            print(f"FAIL: {len(maps)} maps fused, expected at least {a.min_fused}")
            ok = False
        layers = {l["name"]: l for l in reports["fused"]["layers"]}
        for bn, conv in maps.items():
            l, c = layers[bn], layers.get(conv)
            group = l["fusion_group"].split(":")[0]
            if c is None or c["op"] != "Conv" or GROUPS.get(group) != l["op"] or l["fusion_group"] != group + ":" + conv:
                print(f"FAIL: {bn}: fused into {conv!r}, group {l['fusion_group']!r}")
                ok = False
            elif l.get("instructions", 0) != 0 or conv not in json.dumps(l["mapping"]):
                print(f"FAIL: {bn}: {l.get('instructions')} instructions, mapping {l['mapping']}")
                ok = False
        for failure in shared_failures(reports, outputs, fused_maps):
            print(f"FAIL: {failure}")
            ok = False
        if not (dram_bytes(reports["fused"]) < dram_bytes(reports["unfused"]) and cycles["fused"] < cycles["unfused"]):
            print("FAIL: the fused run is not cheaper than the maps apart")
            ok = False
        if not ok:
            sys.exit(1)
        print("ok")


if __name__ == "__main__":
    main()
