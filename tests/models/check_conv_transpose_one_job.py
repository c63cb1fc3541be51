#!/usr/bin/env python3
"""A ConvTranspose whose stride equals its kernel, run as one CONV of all its kernel rows' channels (PP-OCRv4 det's
head, docs/models.md "PP-OCRv4 det: the neck (det2)", compiler/backend/matrix/matrix.cpp,
lower_conv_transpose_blocks): the input read once instead of once per kernel row, each output tile transposed to
kernel-row order before its STOREs (MatrixJob::y_rows). The model: a 3x3 conv, then a 2x2 stride-2 ConvTranspose to
`--out` channels with a bias, then a Sigmoid. Runs it functionally as npusim compiles it, again with the same
mapping but the ConvTranspose's tile_n set to kw * out (one job per kernel row, as before this change), and again
with the first run's own mapping (the round trip). Checks:

- the ConvTranspose runs as one job (its mapping says so) and reads its input once (the input's bytes fewer than a job
  per kernel row read); int8 only with one output channel (--out 1: its per-channel output parameters need no
  reordering); --out 24 makes the one job 96 channels wide, more than edge's 32 columns;
- the outputs of the runs are identical bit for bit; one job takes fewer cycles than a job per kernel row; the
  round trip takes the same cycles.

Usage: check_conv_transpose_one_job.py NPUSIM DIR CONFIG.yaml PRECISION [--out M] [--set KEY=VALUE ...]
"""
import os
import re

import numpy as np

from mapping_runs import finish, parse_args, shared_failures, three_runs

C, H, W = 24, 40, 48


def make_model(folder, out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal([C, 16, 3, 3]).astype(np.float32) * 0.2, "cw"),
             numpy_helper.from_array(rng.standard_normal([C, out, 2, 2]).astype(np.float32) * 0.3, "tw"),
             numpy_helper.from_array(rng.standard_normal([out]).astype(np.float32) * 0.1, "tb")]
    nodes = [helper.make_node("Conv", ["x", "cw"], ["h"], "head_conv", kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("ConvTranspose", ["hr", "tw", "tb"], ["t"], "up_convt", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Sigmoid", ["t"], ["y"])]
    g = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, out, 2 * H, 2 * W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(folder, "head.onnx")
    onnx.save(m, path)
    return path


def main():
    a = parse_args(__doc__, lambda ap: ap.add_argument("--out", type=int, default=1))
    model = make_model(a.dir, a.out)

    def per_row(line):  # a job per kernel row: tile_n of one kernel row's kw * out channels
        return re.sub(r"tile_n: \d+", f"tile_n: {2 * a.out}", line) if "name: up_convt," in line else line

    reports, outputs = three_runs(a, model, per_row)
    ok = True
    cycles = {w: r["total_cycles"] for w, r in reports.items()}
    layers = {w: {l["name"]: l for l in r["layers"]} for w, r in reports.items()}
    one, rows = layers["own"]["up_convt"], layers["edited"]["up_convt"]
    es = {"fp32": 4, "fp16": 2, "int8": 1}[a.precision]
    print(f"head {a.precision}, {a.out} output channel(s): {cycles['own']} cycles in one job, {cycles['edited']} "
          f"with a job per kernel row, {cycles['round trip']} on the round trip; ConvTranspose reads "
          f"{one['dram_bytes_read']} bytes (one job) against {rows['dram_bytes_read']}")
    print(f"  up_convt: {one['mapping']['description']}")
    if "one CONV of all kernel rows' channels" not in one["mapping"]["description"]:
        print("FAIL: the ConvTranspose does not run as one job")
        ok = False
    if "one CONV of all kernel rows' channels" in rows["mapping"]["description"]:
        print("FAIL: with tile_n of one kernel row, the ConvTranspose still runs as one job")
        ok = False
    # The input read once where a job per kernel row (two rows) reads it twice; constants (tables, biases) alike.
    if one["dram_bytes_read"] > rows["dram_bytes_read"] - C * H * W * es + 1024:
        print(f"FAIL: one job reads {one['dram_bytes_read']} bytes, a job per kernel row {rows['dram_bytes_read']}: "
              f"not its {C * H * W * es} bytes of input fewer")
        ok = False
    if cycles["own"] >= cycles["edited"]:
        print("FAIL: one job is not faster than a job per kernel row")
        ok = False
    finish(ok, shared_failures(reports, outputs, "job-per-row"))


if __name__ == "__main__":
    main()
