#!/usr/bin/env python3
"""Runs one model with `npusim run` and checks the report's model limit against one computed here from the
ONNX file alone (docs/report.md, "Model limit"):

  array  = MACs of the dense Conv / ConvTranspose / MatMul / Gemm nodes over rows*cols*rate(precision)
  vector = MACs of grouped convs over the vector lanes -- or, where the array does more of one per cycle
           (min(rows, C/group*kh*kw) * min(cols, K/group) * rate), at that rate on the array
  DRAM   = (every initializer of >= 64 elements once + the model's inputs and outputs once) bytes over DRAM
           bytes per cycle
  folds  = not a term: the array term's nodes each alone in whole folds of the array (weight-stationary:
           ceil(K/rows) * ceil(N/cols) folds of M rows per GEMM; output-stationary: ceil(M/rows) *
           ceil(N/cols) of K; input-stationary: ceil(K/rows) * ceil(M/cols) of N), over rate

The rates come from the configuration file (systolic_array rows, cols, <precision>_rate, vector.lanes,
and in int8 vector.int8_dot_width);
the DRAM peak and the frequency from the report (the DRAM model's peak is the simulator's). With --batch N
the MACs and the inputs and outputs count N times, the weights once.

Usage: check_model_limit.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION [BATCH [MIN_EFFICIENCY]]
Checks: each term within 1e-6 (relative) of this one, model_limit_cycles = ceil(the highest term),
model_efficiency = model_limit_cycles / total_cycles, and the layers' limit_cycles add up to the array and
vector terms (each rounded up); with MIN_EFFICIENCY, model_efficiency at least that (a fraction). Prints one
line; exits 1 on the first failed check.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import yaml
from onnx import shape_inference


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    npusim, model, config, prec = sys.argv[1:5]
    batch = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    min_efficiency = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    with tempfile.TemporaryDirectory() as d:
        report = os.path.join(d, "r.json")
        cmd = [npusim, "run", model, "--config", config, "--precision", prec, "--batch", str(batch), "-q",
               "--report", report]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-400:]}")
        rep = json.load(open(report))
    cfg = yaml.safe_load(open(config))
    array = cfg.get("systolic_array", {})
    rows, cols = rep["array"]["rows"], rep["array"]["cols"]
    dataflow = rep["array"]["dataflow"]
    rate = rep["array"]["macs_per_pe_per_cycle"][prec]
    lanes = cfg.get("vector", {}).get("lanes", 32)
    if prec == "int8":  # a lane sums int8_dot_width int8 products per cycle in a depthwise conv
        lanes *= cfg.get("vector", {}).get("int8_dot_width", 4)
    if array.get("rows", rows) != rows or array.get("cols", cols) != cols:
        fail("the report's array is not the configuration's")

    m = onnx.load(model)
    for i in m.graph.input:  # the batch as npusim binds it: the first dimension of every runtime input
        d0 = i.type.tensor_type.shape.dim[0] if i.type.tensor_type.shape.dim else None
        if d0 is not None and (d0.dim_param or batch > 1):
            d0.ClearField("dim_param")
            d0.dim_value = batch
    if batch > 1:  # what the export inferred at its own batch: inferred again
        del m.graph.value_info[:]
        for o in m.graph.output:
            if o.type.tensor_type.shape.dim:
                o.type.tensor_type.shape.dim[0].dim_param = "batch"
    m = shape_inference.infer_shapes(m, data_prop=True)
    shape = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims = [x.dim_value for x in v.type.tensor_type.shape.dim]
        if dims and all(x > 0 for x in dims):
            shape[v.name] = dims
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    shape.update(inits)
    n_el = lambda s: int(np.prod(s)) if s else 1
    bpe = {"int8": 1, "fp16": 2, "bf16": 2, "fp32": 4}[prec]
    array_c = vector_c = fold_c = 0.0

    def folds(instances, m_, k_, n_):  # one GEMM shape `instances` times in whole folds of the array
        up = lambda a, b: -(-a // b)
        passes = {"ws": up(k_, rows) * up(n_, cols) * m_, "os": up(m_, rows) * up(n_, cols) * k_,
                  "is": up(k_, rows) * up(m_, cols) * n_}[dataflow]
        return instances * passes / rate

    per_node = {}
    for n in m.graph.node:
        if n.op_type not in ("Conv", "ConvTranspose", "MatMul", "Gemm"):
            continue
        if any(x and x not in shape for x in list(n.input[:2]) + list(n.output)):
            fail(f"{n.name}: a shape ONNX's inference left unknown")
        per_cycle, on_lanes = rows * cols * rate, False
        group = next((a.i for a in n.attribute if a.name == "group"), 1)
        if n.op_type == "Conv":
            w = shape[n.input[1]]
            macs = n_el(shape[n.output[0]]) * n_el(w[1:])
            folded = folds(group, n_el(shape[n.output[0]]) // w[0], n_el(w[1:]), w[0] // group)
            if group > 1:
                on_array = min(rows, n_el(w[1:])) * min(cols, w[0] // group) * rate
                on_lanes = on_array <= lanes
                per_cycle = lanes if on_lanes else on_array
        elif n.op_type == "ConvTranspose":
            x = shape[n.input[0]]
            macs = n_el(x) * n_el(shape[n.input[1]][1:])
            folded = folds(group, n_el(x) // x[1], x[1] // group, n_el(shape[n.input[1]][1:]))
        elif n.op_type == "MatMul":
            y, k = shape[n.output[0]], shape[n.input[0]][-1]
            macs = n_el(y) * k
            batch, m_rows = n_el(y[:-2]), (y[-2] if len(y) >= 2 else 1)
            folded = (folds(1, batch * m_rows, k, y[-1]) if n.input[1] in inits
                      else folds(batch, m_rows, k, y[-1]))
        else:
            ta = next((a.i for a in n.attribute if a.name == "transA"), 0)
            y, k = shape[n.output[0]], shape[n.input[0]][0 if ta else -1]
            macs = n_el(y) * k
            folded = folds(1, y[0], k, y[1])
        c = macs / per_cycle
        if not on_lanes:
            fold_c += max(folded, c)
        per_node[n.name] = c
        if on_lanes:
            vector_c += c
        else:
            array_c += c
    weight_bytes = sum(n_el(d) for d in inits.values() if n_el(d) >= 64) * bpe
    io_bytes = sum(n_el(shape[v.name]) for v in list(m.graph.input) + list(m.graph.output)
                   if v.name not in inits) * bpe
    bw = rep["dram"]["peak_bandwidth_gbps"] * 1e9 / (rep["frequency_mhz"] * 1e6)
    dram_c = (weight_bytes + io_bytes) / bw if bw > 0 else 0.0

    got = rep.get("model_limit")
    if got is None or "model_limit_cycles" not in rep:
        fail("the report has no model limit")
    for key, want in (("array_cycles", array_c), ("vector_cycles", vector_c), ("dram_cycles", dram_c),
                      ("array_fold_cycles", fold_c)):
        # The report writes each term with one decimal.
        if abs(got[key] - want) > max(0.06, 1e-6 * want):
            fail(f"model_limit.{key} {got[key]} != {want:.2f} computed from the ONNX file")
    want_limit = math.ceil(max(array_c, vector_c, dram_c))
    if abs(rep["model_limit_cycles"] - want_limit) > max(1, 1e-6 * want_limit):
        fail(f"model_limit_cycles {rep['model_limit_cycles']} != {want_limit}")
    eff = rep["model_limit_cycles"] / rep["total_cycles"]
    if abs(rep["model_efficiency"] - eff) > 1e-9:
        fail(f"model_efficiency {rep['model_efficiency']} != {eff}")
    layers = {l["name"]: l for l in rep["layers"]}
    for name, c in per_node.items():
        have = layers.get(name, {}).get("limit_cycles")
        if have != math.ceil(c - 1e-6) and have != math.ceil(c):
            fail(f"layer {name}: limit_cycles {have} != ceil({c:.3f})")
    if eff < min_efficiency:
        fail(f"model_efficiency {100 * eff:.2f}% < {100 * min_efficiency:.1f}% ({rep['total_cycles']} cycles "
             f"against a limit of {rep['model_limit_cycles']})")
    print(f"{os.path.basename(model)} {prec} batch {batch}: model limit {rep['model_limit_cycles']} cycles "
          f"(array {array_c:.0f}, vector {vector_c:.0f}, DRAM {dram_c:.0f}; array in whole folds {fold_c:.0f}), "
          f"efficiency {100 * eff:.1f}%")


if __name__ == "__main__":
    main()
