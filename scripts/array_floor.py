#!/usr/bin/python3
"""Per-layer floor of a CNN or transformer on a weight-stationary array, from the ONNX file alone.

For each Conv / MatMul / Gemm (batch BATCH), with activations kept on chip from layer to layer and every
weight read from DRAM once:
  array  A = min over pixel packings p (several output pixels a column, as compiler/backend/matrix/
         pixel_packing.h maps a narrow dense conv: kernel kh x ((p-1)*sw + kw), p*N channels, M/p rows) of
         whole folds ceil(K/R) * ceil(N/C) times max(M, R) cycles each: a fold streams its M rows through
         every cell (int8: one row a cycle), and the next fold's weights take R cycles to shift in, hidden
         under a stream of at least R rows (isa/timing/systolic.h, pipelined folds; fill and drain paid once);
  vector V = the epilogue's passes over the output at LANES elements a cycle: one output-stage pass, plus
         RESIDUAL_PASSES for a conv that adds a residual (int8: one output stage taking the residual's codes
         to the sums' grid, the add; docs/models.md, "Batch 8 on tpu-v1: fewer epilogue passes" and "... (tpu8)");
  DRAM   D = the layer's weight bytes (int8: one a weight) over the DRAM's bytes a cycle; the first layer
         also reads the model's input, the last writes its output.
The layer floor is max(A, V, D): a layer's weights cannot stream ahead of it by more than the weight
scratchpad (WEIGHT_KIB, tpu-v1's 256 KiB FIFO), so the layers' DRAM terms do not overlap each other's
compute. Prints each layer and the sums: sum of max(A, V, D) (layer after layer) and max(sum A, sum V,
sum D) (everything overlapped: the whole-model limit's form, with whole folds), then the array and DRAM layer
after layer with WEIGHT_KIB (a list) of weights allowed to stream ahead of the layer that uses them.
Usage: array_floor.py MODEL.onnx  (env: BATCH 8, R 256, C 256, BW 48.57 bytes a cycle, LANES 256,
RESIDUAL_PASSES 2, PACK 1 to allow packing, WEIGHT_KIB, VERBOSE)"""
import math, os, sys
import onnx
from onnx import shape_inference

B = int(os.environ.get("BATCH", 8)); R = int(os.environ.get("R", 256)); C = int(os.environ.get("C", 256))
BW = float(os.environ.get("BW", 34e9 / 700e6)); LANES = int(os.environ.get("LANES", 256))
RES = int(os.environ.get("RESIDUAL_PASSES", 2)); PACK = os.environ.get("PACK", "1") == "1"
m = shape_inference.infer_shapes(onnx.load(sys.argv[1]))
shape = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
         for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)}
inits = {t.name: list(t.dims) for t in m.graph.initializer}
shape.update(inits)
consumers = {}
for n in m.graph.node:
    for x in n.input: consumers.setdefault(x, []).append(n)
prod = lambda s: math.prod(s) if s else 1
rows = []; first = True
for n in m.graph.node:
    if n.op_type not in ("Conv", "MatMul", "Gemm"): continue
    att = {a.name: a for a in n.attribute}
    wb = prod(inits[n.input[1]]) if n.input[1] in inits else 0
    if n.op_type == "Conv":
        w = inits[n.input[1]]; N, Cg, kh, kw = w; g = att["group"].i if "group" in att else 1
        o = shape[n.output[0]]; OH, OW = o[2], o[3]; M = B * OH * OW
        sw = att["strides"].ints[1] if "strides" in att else 1
        K = Cg * kh * kw
        best = math.ceil(K / R) * math.ceil(N / C) * max(M, R) * (g if g > 1 else 1); bp = 1
        if PACK and g == 1:
            for p in (2, 4, 8, 16):
                if OW % p or p * N > C: continue
                kp = kh * ((p - 1) * sw + kw) * Cg
                a = math.ceil(kp / R) * math.ceil(p * N / C) * max(M // p, R)
                if a < best: best, bp = a, p
        out = M * N
    else:
        a_shape = shape[n.input[0]]; K = a_shape[-1]
        N = inits[n.input[1]][-1] if n.op_type == "MatMul" else inits[n.input[1]][0]
        M = prod(a_shape[:-1]) * (B if n.op_type == "Gemm" or a_shape[0] == 1 else 1)
        if n.input[1] not in inits: continue
        best = math.ceil(K / R) * math.ceil(N / C) * max(M, R); bp = 1; out = M * N
    # A residual added in the conv's epilogue: npusim fuses an Add into the later of its two producers.
    order = {x.name: k for k, x in enumerate(m.graph.node)}
    res = False
    for c in consumers.get(n.output[0], []):
        if c.op_type == "Add":
            other = [x for x in c.input if x != n.output[0]]
            prods = [x for x in m.graph.node if other and other[0] in x.output]
            res = not prods or order[prods[0].name] < order[n.name]
    V = out * (1 + (RES if res else 0)) / LANES
    D = wb / BW
    if first:
        D += sum(prod(shape[i.name]) for i in m.graph.input if i.name not in inits) * B / BW; first = False
    rows.append((n.name, best, V, D, bp, res))
D_out = sum(prod(shape[o.name]) for o in m.graph.output) * B / BW
rows[-1] = rows[-1][:3] + (rows[-1][3] + D_out,) + rows[-1][4:]
if os.environ.get("VERBOSE"):
    for name, a, v, d, p, res in rows:
        print(f"{name[-40:]:40s} A {a/1e3:8.1f} k  V {v/1e3:8.1f} k  D {d/1e3:8.1f} k  p={p}{' res' if res else ''}")
sa = sum(r[1] for r in rows); sv = sum(r[2] for r in rows); sd = sum(r[3] for r in rows)
serial = sum(max(r[1], r[2], r[3]) for r in rows); serial_ad = sum(max(r[1], r[3]) for r in rows)
print(f"array {sa/1e6:.3f} M, vector {sv/1e6:.3f} M, DRAM {sd/1e6:.3f} M; overlapped max {max(sa,sv,sd)/1e6:.3f} M; "
      f"layer by layer max(A, D) {serial_ad/1e6:.3f} M, max(A, V, D) {serial/1e6:.3f} M")
# Weights staged ahead: the layers in order, each taking A once its weights are on chip; the DRAM streams every
# layer's weights in order at its peak, at most S bytes ahead of the layers that consume them (a layer whose
# own weights exceed S streams them while it runs).
for s_kib in [int(x) for x in os.environ.get("WEIGHT_KIB", "256,1024,4096,8192,12288,16384").split(",")]:
    S = s_kib * 1024; cums, ends = [], []; cum = dram = t = 0.0
    for l, (_, a, v, d, p, res) in enumerate(rows):
        cum += d * BW; cums.append(cum)
        j = next(k for k, c in enumerate(cums) if c >= cum - S)
        free = 0.0 if cum <= S else (ends[j] if j < l else (ends[l - 1] if l else 0.0))
        dram = max(dram, free) + d
        t = max(t + a, dram); ends.append(t)
    print(f"  weights up to {s_kib} KiB ahead of their layer: {t/1e6:.3f} M (array and DRAM only)")
