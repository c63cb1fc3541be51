#!/usr/bin/env python3
"""A conv with a kernel or padding reading its input where the conv before left it, padded, end to end
(docs/backend.md, "On-chip residency", "Padded inputs"): runs a model functionally as npusim maps it (the
default) and again with the same mapping (the first run's --mapping-out) but with `on_chip: false` on each
such producer, so that its reader loads the input from DRAM as before; everything else unchanged. Checks:

- the first run has at least --min-padded Conv layers with a kernel larger than 1x1 that read their input on
  chip (`on_chip_input`), each at least 75 % of that input's bytes less from DRAM than in the second run (the
  rest: the halo value's pixel a padded row, MatrixJob::y_fill);
- the run with the producers' outputs stored has none, nor the --no-fusion run, and the outputs of the first
  two runs are identical bit for bit;
- re-imposing the first run's --mapping-out reproduces it (the same readers, the same cycles).

`--make-small DIR` first writes DIR/padded.onnx (MODEL is then "-"): a 1x1 conv + ReLU, a 3x3 conv (padding 1)
+ ReLU and a 3x3 stride-2 conv (padding 1) over 32 -> 160 channels of 20 x 20 pixels, as ResNet's bottlenecks
chain them.

Usage: check_padded_input.py NPUSIM MODEL.onnx|- CONFIG.yaml PRECISION [--batch N] [--make-small DIR]
                             [--min-padded N]
"""
import os
import sys
import tempfile

import numpy as np

from fusion_runs import fused_run, fusion_args, on_chip_off, shared_failures


def make_small(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    C, M, H = 32, 160, 20  # 160 channels: no pixel packing on 256 columns (a packable conv keeps packing)
    inits, nodes = [], []

    def const(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    nodes.append(helper.make_node("Conv", ["x", const("a_w", [M, C, 1, 1], 0.2), const("a_b", [M], 0.1)], ["a"],
                                  kernel_shape=[1, 1]))
    nodes.append(helper.make_node("Relu", ["a"], ["ar"]))
    nodes.append(helper.make_node("Conv", ["ar", const("b_w", [M, M, 3, 3], 0.1), const("b_b", [M], 0.1)], ["b"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["b"], ["br"]))
    nodes.append(helper.make_node("Conv", ["br", const("c_w", [M, M, 3, 3], 0.1), const("c_b", [M], 0.1)], ["y"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]))
    g = helper.make_graph(nodes, "padded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, M, H // 2, H // 2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "padded.onnx")
    onnx.save(m, path)
    return path


def input_bytes(layer, precision):
    n = 1
    for d in layer["input_shape"].split(",")[0].split("x"):
        n *= int(d)
    return n * {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}[precision]


def padded_readers(report):
    """Convs with a kernel or padding (not read as a GEMM) that read their input on chip: {name: DRAM bytes read}."""
    return {l["name"]: l.get("dram_bytes_read", 0) for l in report["layers"]
            if l["op"] == "Conv" and l.get("on_chip_input") and str(l.get("kernel", "")) not in ("1x1", "[1, 1]")}


def producers(report):
    """The convs before the padded readers (the last Conv layer before each, its activation fused)."""
    layers = report["layers"]
    readers = padded_readers(report)
    return {next(p["name"] for p in reversed(layers[:k]) if p["op"] == "Conv")
            for k, l in enumerate(layers) if l["name"] in readers}


def main():
    a = fusion_args(__doc__, "min-padded", make_small)

    def unfuse(fused):
        convs = producers(fused)

        def rewrite(name, line):
            if name not in convs:
                return line
            return on_chip_off(line)
        return rewrite

    with tempfile.TemporaryDirectory() as tmp:
        reports, outputs = fused_run(a, tmp, unfuse)
        readers = padded_readers(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{os.path.basename(a.model)} {a.precision} batch {a.batch}: {len(readers)} conv(s) reading a padded "
              f"input on chip ({', '.join(sorted(readers))}); {cycles['fused']} cycles ({cycles['unfused']} with "
              f"their producers' outputs stored, {cycles['off']} with --no-fusion)")
        failures = shared_failures(reports, outputs, lambda r: sorted(padded_readers(r)))
        apart = {l["name"]: l for l in reports["unfused"]["layers"]}
        # Each reads its input's bytes less from DRAM but for the halo's fill (a pixel a padded row: 9 of 49
        # pixels of a 7 x 7 map).
        for name, read in readers.items():
            if read + 0.75 * input_bytes(apart[name], a.precision) > apart[name].get("dram_bytes_read", 0):
                failures.append(f"{name} reads {read} DRAM bytes, {apart[name].get('dram_bytes_read', 0)} stored")
        if len(readers) < a.min_padded:
            failures.append(f"{len(readers)} convs read a padded input on chip, expected at least {a.min_padded}")
        for f in failures:
            print("FAIL:", f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
