#!/usr/bin/env python3
"""A block output held on chip for the stage's strided 1x1 downsample conv, end to end (docs/backend.md,
"On-chip residency", "Held inputs"): a ResNet stage's first block reads the block output X before it twice,
with its first 1x1 conv (the next layer, in place) and, three layers on, with its stride-2 1x1 downsample conv.
X stays in the unified buffer until that conv, which reads it in place as a strided CONV, so X is never
stored. Runs a model functionally as npusim maps it (the default) and again with the same mapping but with
`on_chip: false` on X's producer (X stored, both readers loading it; the reader's tiling searched again). Checks:

- the first run has at least --min-held strided 1x1 convs reading their input on chip (`on_chip_input`), each
  reading at least 75 % of that input's bytes less from DRAM than in the second run, and X's producer writes
  nothing to DRAM;
- the second run has none, nor the --no-fusion run, and the outputs of the first two runs are identical bit
  for bit;
- re-imposing the first run's --mapping-out reproduces it (the same readers, the same cycles).

`--make-small DIR` first writes DIR/held.onnx (MODEL is then "-"): a stem 1x1 conv (32 -> 160 channels of
16 x 16 pixels) writing X, then a bottleneck of stride 2: 1x1 conv 160 -> 64, 3x3 stride-2 conv, 1x1 conv
64 -> 192 plus the 1x1 stride-2 downsample conv 160 -> 192 of X, Add, ReLU.

Usage: check_held_input.py NPUSIM MODEL.onnx|- CONFIG.yaml PRECISION [--batch N] [--make-small DIR]
                           [--min-held N]
"""
import os
import sys
import tempfile

import numpy as np

from check_padded_input import input_bytes
from fusion_runs import fused_run, fusion_args, on_chip_off, shared_failures


def make_small(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    C0, C, M, CO, H = 32, 160, 64, 192, 16
    inits, nodes = [], []

    def const(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(name, x, y, w, scale, **kw):
        nodes.append(helper.make_node("Conv", [x, const(name + "_w", w, scale), const(name + "_b", [w[0]], 0.1)],
                                      [y], name=name, kernel_shape=w[2:], **kw))

    conv("stem", "x", "s", [C, C0, 1, 1], 0.2)
    nodes.append(helper.make_node("Relu", ["s"], ["X"], name="stem_relu"))
    conv("conv1", "X", "a", [M, C, 1, 1], 0.1)
    nodes.append(helper.make_node("Relu", ["a"], ["ar"], name="relu1"))
    conv("conv2", "ar", "b", [M, M, 3, 3], 0.1, pads=[1, 1, 1, 1], strides=[2, 2])
    nodes.append(helper.make_node("Relu", ["b"], ["br"], name="relu2"))
    conv("conv3", "br", "c", [CO, M, 1, 1], 0.1)
    conv("downsample", "X", "d", [CO, C, 1, 1], 0.1, strides=[2, 2])
    nodes.append(helper.make_node("Add", ["c", "d"], ["e"], name="add"))
    nodes.append(helper.make_node("Relu", ["e"], ["y"], name="relu3"))
    g = helper.make_graph(nodes, "held", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C0, H, H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CO, H // 2, H // 2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "held.onnx")
    onnx.save(m, path)
    return path


def strided_pointwise(layer):
    return layer["op"] == "Conv" and str(layer.get("kernel", "")) in ("1x1", "[1, 1]") and \
        str(layer.get("stride", "")) not in ("1x1", "[1, 1]", "")


def held_readers(report):
    """Strided 1x1 convs that read their input on chip: {name: (value, DRAM bytes read)}."""
    return {l["name"]: (l["on_chip_input"], l.get("dram_bytes_read", 0)) for l in report["layers"]
            if strided_pointwise(l) and l.get("on_chip_input")}


def producers(report):
    """The layers that leave a held reader's input on chip: the last Conv before the layer after which the
    reader's value is first read in place (the held value's producer precedes its first in-place reader)."""
    layers = report["layers"]
    values = {v for v, _ in held_readers(report).values()}
    out = set()
    for k, l in enumerate(layers):
        if l.get("on_chip_input") in values and not strided_pointwise(l):
            out.add(next(p["name"] for p in reversed(layers[:k]) if p["op"] == "Conv"))
    return out


def main():
    a = fusion_args(__doc__, "min-held", make_small)

    def unfuse(fused):
        convs = producers(fused)
        readers = held_readers(fused)

        def rewrite(name, line):
            if name in readers:  # its tiling is of the held input's CONV (whole images): searched again
                return line[:line.index("{")] + "{name: " + name + ", placement: matrix}\n"
            if name not in convs:
                return line
            return on_chip_off(line)
        return rewrite

    with tempfile.TemporaryDirectory() as tmp:
        reports, outputs = fused_run(a, tmp, unfuse)
        readers = held_readers(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{os.path.basename(a.model)} {a.precision} batch {a.batch}: {len(readers)} strided 1x1 conv(s) "
              f"reading a held input on chip ({', '.join(sorted(readers))}); {cycles['fused']} cycles "
              f"({cycles['unfused']} with the producers' outputs stored, {cycles['off']} with --no-fusion)")
        failures = shared_failures(reports, outputs, lambda r: sorted(held_readers(r)))
        apart = {l["name"]: l for l in reports["unfused"]["layers"]}
        fused = {l["name"]: l for l in reports["fused"]["layers"]}
        for name, (value, read) in readers.items():
            # The stride-2 reader loads a quarter of the input's pixels from DRAM when the input is stored.
            if read + 0.75 * input_bytes(apart[name], a.precision) / 4 > apart[name].get("dram_bytes_read", 0):
                failures.append(f"{name} reads {read} DRAM bytes, {apart[name].get('dram_bytes_read', 0)} stored")
        for p in producers(reports["fused"]):
            if fused[p].get("dram_bytes_written", 0) > 0:
                failures.append(f"{p} writes {fused[p]['dram_bytes_written']} DRAM bytes of a held value")
        if len(readers) < a.min_held:
            failures.append(f"{len(readers)} strided convs read a held input on chip, expected at least {a.min_held}")
        for f in failures:
            print("FAIL:", f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
