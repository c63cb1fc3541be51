#!/usr/bin/env python3
"""Element-wise layers done by the layer before them, end to end (docs/backend.md, "Vector layers"): an affine
map after a conv's activation applied in the conv's epilogue ("An affine map in its producer's epilogue",
fusion group "post_affine:"), and the Add of a squeeze-and-excitation block with a residual, x + x * s, in its
Mul's tile loop ("x + x * s in one tile loop", "scaled_residual:"). Runs a model functionally as npusim fuses
it (the default) and again with the same mapping (the first run's --mapping-out) but with each such layer
given a vector tile (`tile_elems`), which leaves it to its own lowering; everything else unchanged. Checks:

- the fused run has at least --min-fused layers whose work their producer did: fused_into that layer, the
  fusion group naming it, no instructions of their own, their mapping naming it;
- the unfused run and the --no-fusion run have none; the outputs of the fused and the unfused runs are
  identical bit for bit, and the fused run moves fewer DRAM bytes and takes fewer cycles;
- re-imposing the fused run's --mapping-out reproduces it (the same fused maps, the same cycles).

`--make-small DIR` first writes DIR/lcnet_blocks.onnx, two blocks of PP-OCRv4's LCNet backbone: a 1x1 conv +
HardSwish followed by a "learnable affine block" (a scalar Mul and Add: one table in int8), a padded 3x3
depthwise conv + HardSwish followed by a per-channel Mul and Add (float only: int8 leaves per-channel maps
to their own lowering), a squeeze-and-excitation block with a residual (global average pool, 1x1 conv + Relu,
1x1 conv + HardSigmoid, Mul, Add of the block's input: PP-OCRv4's RSEFPN neck; float only), and a padded 3x3
conv (an unpadded one would absorb the map before it).

Usage: check_post_affine.py NPUSIM MODEL.onnx|--make-small DIR CONFIG.yaml PRECISION [--min-fused N]
                            [--set KEY=VALUE ...]
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

from fusion_runs import differing_outputs, dram_bytes, run_variants
from random_inputs import write_random_inputs


def make_small(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    C, E, H, W, M = 16, 32, 20, 24, 24
    inits, nodes = [], []

    def const(name, shape, scale, offset=0.0):
        v = (rng.standard_normal(shape) * scale + offset).astype(np.float32)
        inits.append(numpy_helper.from_array(v, name))
        return name

    def conv_hswish_affine(x, y, cin, cout, k, group, per_channel):
        nodes.append(helper.make_node("Conv", [x, const(y + "_w", [cout, cin // group, k, k], 0.3),
                                               const(y + "_b", [cout], 0.1)], [y + "_c"], group=group,
                                      kernel_shape=[k, k], pads=[k // 2] * 4))
        nodes.append(helper.make_node("HardSigmoid", [y + "_c"], [y + "_hs"], alpha=1.0 / 6, beta=0.5))
        nodes.append(helper.make_node("Mul", [y + "_c", y + "_hs"], [y + "_h"]))
        shape = [1, cout, 1, 1] if per_channel else [1]
        nodes.append(helper.make_node("Mul", [y + "_h", const(y + "_s", shape, 0.2, 1.0)], [y + "_m"]))
        nodes.append(helper.make_node("Add", [y + "_m", const(y + "_t", shape, 0.1)], [y]))

    conv_hswish_affine("x", "a", C, E, 1, 1, False)
    conv_hswish_affine("a", "d", E, E, 3, E, True)
    nodes.append(helper.make_node("GlobalAveragePool", ["d"], ["se_p"]))
    nodes.append(helper.make_node("Conv", ["se_p", const("se1_w", [8, E, 1, 1], 0.2), const("se1_b", [8], 0.1)],
                                  ["se_1"], kernel_shape=[1, 1]))
    nodes.append(helper.make_node("Relu", ["se_1"], ["se_r"]))
    nodes.append(helper.make_node("Conv", ["se_r", const("se2_w", [E, 8, 1, 1], 0.2), const("se2_b", [E], 0.1)],
                                  ["se_2"], kernel_shape=[1, 1]))
    nodes.append(helper.make_node("HardSigmoid", ["se_2"], ["se_s"], alpha=0.2, beta=0.5))
    nodes.append(helper.make_node("Mul", ["d", "se_s"], ["se_m"]))
    nodes.append(helper.make_node("Add", ["d", "se_m"], ["e"]))
    # Padded: an affine map read only by an unpadded conv folds into its weights (fold-batchnorm).
    nodes.append(helper.make_node("Conv", ["e", const("p_w", [M, E, 3, 3], 0.1), const("p_b", [M], 0.1)], ["y"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    g = helper.make_graph(nodes, "lcnet_blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, M, H, W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "lcnet_blocks.onnx")
    onnx.save(m, path)
    return path


def fused_maps(report):
    """The report's layers done by their producer: {layer name: producer name}."""
    return {l["name"]: l.get("fused_into") for l in report["layers"]
            if l.get("fusion_group", "").split(":")[0] in ("post_affine", "scaled_residual")}


def unfuse(fused):
    """Mapping lines of the fused run's maps given a vector tile (tile_elems): each map's own lowering."""
    maps = set(fused_maps(fused))
    return lambda name, line: line.replace("}", ", tile_elems: 4096}", 1) if name in maps else line


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-fused", type=int, default=1)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.make_small:
        os.makedirs(a.make_small, exist_ok=True)
        a.model = make_small(a.make_small)
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
        print(f"{name} {a.precision}: {len(maps)} layer(s) done by their producer ({sorted(maps)}); {cycles['fused']} "
              f"cycles, {dram_bytes(reports['fused'])} DRAM bytes ({cycles['unfused']} cycles, "
              f"{dram_bytes(reports['unfused'])} bytes with the maps apart; {cycles['off']} with --no-fusion)")
        if len(maps) < a.min_fused:
            print(f"FAIL: {len(maps)} maps fused, expected at least {a.min_fused}")
            ok = False
        layers = {l["name"]: l for l in reports["fused"]["layers"]}
        for bn, conv in maps.items():
            l, c = layers[bn], layers.get(conv)
            kind = "post_affine:" if l["op"] == "BatchNormalization" else "scaled_residual:"
            if c is None or c["op"] not in ("Conv", "ConvTranspose", "Mul") or l["fusion_group"] != kind + conv:
                print(f"FAIL: {bn}: fused into {conv!r}, group {l['fusion_group']!r}")
                ok = False
            elif l.get("instructions", 0) != 0 or conv not in json.dumps(l["mapping"]):
                print(f"FAIL: {bn}: {l.get('instructions')} instructions, mapping {l['mapping']}")
                ok = False
        for what in ("unfused", "off"):
            if fused_maps(reports[what]):
                print(f"FAIL: {what}: maps fused: {sorted(fused_maps(reports[what]))}")
                ok = False
        diff = differing_outputs(outputs["fused"], outputs["unfused"])
        if diff:
            print(f"FAIL: outputs differ from the maps apart: {diff}")
            ok = False
        if not (dram_bytes(reports["fused"]) < dram_bytes(reports["unfused"]) and cycles["fused"] < cycles["unfused"]):
            print("FAIL: the fused run is not cheaper than the maps apart")
            ok = False
        if cycles["again"] != cycles["fused"] or fused_maps(reports["again"]) != maps:
            print(f"FAIL: re-imposed mapping: {cycles['again']} cycles against {cycles['fused']}, maps "
                  f"{sorted(fused_maps(reports['again']))}")
            ok = False
        if not ok:
            sys.exit(1)
        print("ok")


if __name__ == "__main__":
    main()
