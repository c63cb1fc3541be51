#!/usr/bin/env python3
"""Compiles and simulates one real model with `npusim run` and checks its report from first principles.

Usage: check_run.py NPUSIM MODEL.onnx CONFIG.yaml [--expect-host OP,OP] [--strict-grouped-macs]
                    [--unfolded-batchnorms] [-- extra npusim args]

Checks:
- the run succeeds; total_cycles > 0; breakdown {compute, memory, scheduling, host} sums to total_cycles;
- every layer: cycles = end_cycle - start_cycle, its breakdown sums to its cycles, and the compiler's
  mapping is attached (placement, description, estimated cycles); matrix layers carry a tile (m, k, n
  > 0), a loop order, SRAM bytes > 0 and the number of candidates searched;
- the MACs: every Conv/Gemm/MatMul of the ONNX file is a matrix layer of the report, with the MACs
  counted here from ONNX's own shape inference (N*OH*OW*K*C/group*R*S, batch*M*N*K). Dense layers
  must match exactly. A grouped conv runs as block-diagonal dense blocks (compiler/backend/matrix/matrix.cpp),
  so the array also multiplies the zeros between groups and the report counts those MACs: it must be
  at least the useful count, and at most group times it (--strict-grouped-macs demands equality, as
  docs/report.md's "useful multiply-accumulates" says). array_utilization = macs/(rows*cols*total);
- host fallbacks: exactly the ops listed with --expect-host (default: none) run on the host (a layer
  whose mapping placement is "host"), each has host cycles in its breakdown, appears in the report's
  compile section with its estimated cost, and its MACs are left out of the array's count.
- with --rowwise: every ONNX Softmax node is one vector layer of the report under the node's name, and
  every LayerNorm the exporter spelled out (two ReduceMeans ... Add) is one vector LayerNormalization
  layer named as one of the model's nodes (compiler/backend/vector/rowwise.h); no layer is a piece of either
  (a name the model does not have, e.g. ".../Softmax_ReduceMax" or ".../Add_1_ReduceMean").
- every node of the ONNX file that runs (not evaluated at compile time: shape arithmetic, constants; not a
  quantization point) is in the report: a layer of its own, a node fused into the program layer listed
  just before it (placement "fused", 0 cycles, fused_into = that layer; a map its reader applies in its loads,
  fusion group "pre_affine:", or a pool done on its reader's tiles, "pre_pool:": the program layer just after it), or decomposed into layers named
  after it; the layers' bound_cycles add up to the model's, and a layer's efficiency counts the bounds of
  the nodes fused into it.
- --unfolded-batchnorms: every BatchNormalization of the ONNX file that does not follow a Conv (DenseNet's
  pre-activation BN -> ReLU -> Conv) is one layer of the report under its own name, and no report layer is
  an element-wise Mul or Add (or an activation) the ONNX file has no node of that name for: the BN's affine
  map and its activation are one pass over the tensor, not a decomposition into anonymous layers.
Prints one summary line; exits 1 on the first failed check.
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import shape_inference

MATRIX_OPS = ("Conv", "Gemm", "MatMul")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def shapes_of(model):
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def node_macs(node, shapes):
    """Multiply-accumulates of one matrix node, from its operand and result shapes."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Conv":
        out, w = shapes[node.output[0]], shapes[node.input[1]]
        # w: K x C/group x R x S -> each output element takes C/group*R*S MACs.
        return int(np.prod(out)) * int(np.prod(w[1:]))
    if node.op_type == "Gemm":
        a, b = shapes[node.input[0]], shapes[node.input[1]]
        m, k = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
        n = b[0] if attrs.get("transB", 0) else b[1]
        return m * n * k
    a, b, out = shapes[node.input[0]], shapes[node.input[1]], shapes[node.output[0]]
    k = a[-1]
    return int(np.prod(out)) * k  # MatMul: every output element is a K-long dot product


def check_rowwise(model, layers):
    """Softmax and LayerNorm as one layer each, named as the model's nodes (see the module doc)."""
    node_names = {n.name for n in model.graph.node}
    by_name = {l["name"]: l for l in layers}
    softmax = [n.name for n in model.graph.node if n.op_type == "Softmax"]
    # torch spells LayerNorm as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add: two
    # ReduceMeans per LayerNorm (the models checked here have no other ReduceMean).
    layernorms = sum(1 for n in model.graph.node if n.op_type == "ReduceMean") // 2
    if not softmax and not layernorms:
        fail("--rowwise: the model has no Softmax or LayerNorm")
    for s in softmax:
        l = by_name.get(s)
        if l is None or l["op"] != "Softmax" or l["mapping"]["placement"] != "vector":
            fail(f"Softmax node {s} is not one vector layer of the report: {l and (l['op'], l['mapping'])}")
    ln = [l for l in layers if l["op"] == "LayerNormalization"]
    if len(ln) != layernorms or any(l["mapping"]["placement"] != "vector" or l["name"] not in node_names for l in ln):
        fail(f"{layernorms} LayerNorms in the model, report layers: {[(l['name'], l['mapping']) for l in ln]}")
    pieces = [l["name"] for l in layers if l["name"] not in node_names and l["cycles"] > 0]
    if pieces:
        fail(f"{len(pieces)} layer(s) named after no node of the model: {pieces[:5]}")


def compile_time_nodes(model):
    """Nodes whose outputs the compiler knows before the run: constants and shape arithmetic."""
    known = {i.name for i in model.graph.initializer}
    out = set()
    for n in model.graph.node:
        if n.op_type in ("Shape", "Size", "Constant") or all(not i or i in known for i in n.input):
            known.update(n.output)
            out.add(n.name)
    return out


def check_every_node_listed(model, r):
    layers = r["layers"]
    names = {l["name"] for l in layers}
    program = None
    pre_readers = {l["fused_into"] for l in layers if l.get("fusion_group", "").startswith(("pre_affine:", "pre_pool:"))}
    for i, l in enumerate(layers):
        if l["placement"] != "fused":
            program = l
            continue
        before = program is None or l.get("fused_into") != program["name"]
        if before and (l.get("fusion_group", "").startswith(("pre_affine:", "pre_pool:", "pre_transpose:"))
                       or l.get("fused_into") in pre_readers):
            # A map its reader applies in its loads (and the activation fused into it) comes before that
            # reader: the next program layer.
            reader = next((x for x in layers[i + 1:] if x["placement"] != "fused"), None)
            if l["cycles"] != 0 or l["instructions"] != 0 or reader is None or l["fused_into"] != reader["name"]:
                fail(f"fused node {l['name']}: not a 0-cycle entry right before its reader {l.get('fused_into')}")
            if l.get("precision") != reader.get("precision"):
                fail(f"fused node {l['name']} runs in {l.get('precision')}, its reader in {reader.get('precision')}")
            continue
        if l["cycles"] != 0 or l["instructions"] != 0 or program is None or l["fused_into"] != program["name"]:
            fail(f"fused node {l['name']}: not a 0-cycle entry right after its layer {l.get('fused_into')}")
        if l.get("precision") != program.get("precision"):
            fail(f"fused node {l['name']} runs in {l.get('precision')}, its layer in {program.get('precision')}")
    skip = compile_time_nodes(model)
    missing = [n.name for n in model.graph.node
               if n.name not in skip and n.op_type not in ("QuantizeLinear", "DequantizeLinear")
               and n.name not in names
               and not any(x.startswith(n.name + "_") and x[len(n.name) + 1:][:1].isalpha() for x in names)]
    if missing:
        fail(f"{len(missing)} node(s) of the model are not in the report: {missing[:5]}")
    bounds = [l["bound_cycles"] for l in layers if "bound_cycles" in l]
    if bounds and sum(bounds) != r["bound_cycles"]:
        fail(f"the layers' bounds add up to {sum(bounds)}, the model's is {r['bound_cycles']}")
    # A layer's efficiency is its own compiled work's bound over its cycles (docs/report.md): a fraction.
    # What fusion saved is its own field, never part of the efficiency.
    for l in layers:
        if "efficiency" not in l:
            continue
        if abs(l["efficiency"] - l["compiled_bound_cycles"] / l["cycles"]) > 1e-9:
            fail(f"layer {l['name']}: efficiency {l['efficiency']} is not its compiled bound over its cycles")
        if l["efficiency"] > 1 + 1e-12:
            fail(f"layer {l['name']}: efficiency {l['efficiency']:.4f} is above 1 (its compiled bound "
                 f"{l['compiled_bound_cycles']}, {l['cycles']} cycles)")
        fused = sum(f.get("bound_cycles", 0) for f in layers if f.get("fused_into") == l["name"])
        if l["fusion_saved_cycles"] != fused:
            fail(f"layer {l['name']}: fusion_saved_cycles {l['fusion_saved_cycles']}, its fused nodes' bounds {fused}")
    if "compiled_efficiency" in r and r["compiled_efficiency"] > 1 + 1e-12:
        fail(f"compiled_efficiency {r['compiled_efficiency']} is above 1")


def dims(shape):
    return "x".join(str(d) for d in shape)


def check_layer_tables(model, shapes, expected_macs, r):
    """The layer tables' columns from the ONNX file: a Conv's shapes, kernel, strides and groups, and the
    useful-MAC utilization from the ONNX MACs, its unit's peak and its cycles."""
    by_name = {l["name"]: l for l in r["layers"]}
    known = {i.name for i in model.graph.initializer}
    checked = 0
    for n in model.graph.node:
        l = by_name.get(n.name)
        if n.op_type != "Conv" or l is None or l["placement"] != "npu":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        w = shapes[n.input[1]]
        want = {"input_shape": dims(shapes[n.input[0]]), "output_shape": dims(shapes[n.output[0]]),
                "kernel": dims(attrs.get("kernel_shape", w[2:])), "stride": dims(attrs.get("strides", [1] * (len(w) - 2))),
                "groups": attrs.get("group", 1)}
        if n.input[0] in known:
            continue
        got = {k: l.get(k) for k in want}
        if got != want:
            fail(f"layer {n.name}: {got}, from the ONNX file {want}")
        unit = l["unit"]
        if unit not in ("array", "vector"):
            fail(f"conv layer {n.name} runs on {unit}")
        peak = (r["array"]["rows"] * r["array"]["cols"] * r["array"]["macs_per_pe_per_cycle"][l["precision"]]
                if unit == "array" else r["vector"]["lanes"])
        util = expected_macs[n.name] / (peak * l["cycles"])
        if l["groups"] == 1 and abs(l["mac_utilization"] - util) > 1e-9:
            fail(f"layer {n.name}: mac_utilization {l['mac_utilization']}, {util} from the ONNX MACs")
        if not 0 < l["mac_utilization"] <= 1 + 1e-12:
            fail(f"layer {n.name}: mac_utilization {l['mac_utilization']} is not a fraction")
        if not l["mapping"].get("short"):
            fail(f"layer {n.name}: no mapping in short")
        checked += 1
    if not checked and any(n.op_type == "Conv" for n in model.graph.node):
        fail("no Conv layer of the model was checked against its node")


def main(argv):
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    strict_grouped = "--strict-grouped-macs" in argv
    rowwise = "--rowwise" in argv
    unfolded_bn = "--unfolded-batchnorms" in argv
    argv = [a for a in argv if a not in ("--strict-grouped-macs", "--rowwise", "--unfolded-batchnorms")]
    expect_host = []
    if "--expect-host" in argv:
        i = argv.index("--expect-host")
        expect_host = sorted(o for o in argv[i + 1].split(",") if o)
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    npusim, model_path, config = argv[1:]
    name = os.path.basename(model_path)
    model = onnx.load(model_path)
    shapes = shapes_of(model)
    matrix_nodes = {n.name: n for n in model.graph.node if n.op_type in MATRIX_OPS}
    expected_macs = {k: node_macs(n, shapes) for k, n in matrix_nodes.items()}

    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "r.json")
        cmd = [npusim, "run", model_path, "--config", config, "--report", report_path, "-q"] + extra
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"{name} on {os.path.basename(config)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
        with open(report_path) as f:
            r = json.load(f)

    total = r["total_cycles"]
    if total <= 0:
        fail("total_cycles is not positive")
    b = r["breakdown"]
    if sum(b[k] for k in ("compute", "memory", "scheduling", "host")) != total:
        fail(f"breakdown {b} does not sum to total_cycles {total}")
    layers = r["layers"]
    if not layers:
        fail("no layers")

    check_every_node_listed(model, r)
    check_layer_tables(model, shapes, expected_macs, r)
    seen_matrix = {}
    host_layers = []
    host_nodes = set()
    fused_matrix = set()
    for l in layers:
        if l["placement"] == "fused":
            if l["op"] in MATRIX_OPS and l.get("fused_into"):
                fused_matrix.add(l["name"])  # a value MatMul run by its fused attention layer
            continue  # checked by check_every_node_listed
        lb = l["breakdown"]
        if l["cycles"] != l["end_cycle"] - l["start_cycle"]:
            fail(f"layer {l['name']}: cycles {l['cycles']} != end - start")
        if sum(lb[k] for k in ("compute", "memory", "scheduling", "host")) != l["cycles"]:
            fail(f"layer {l['name']}: breakdown {lb} does not sum to its cycles {l['cycles']}")
        mp = l.get("mapping")
        if mp is None:
            fail(f"layer {l['name']} ({l['op']}): no mapping from the compiler")
        for key in ("placement", "description", "estimated_cycles", "tile", "loop_order", "sram_bytes"):
            if key not in mp:
                fail(f"layer {l['name']}: mapping has no '{key}'")
        if l["placement"] == "host" or mp["placement"] == "host":
            # A fallback: the layer's HOSTCALL (plus any conversions around it) and its host time.
            host_layers.append(l["op"])
            host_nodes.add(l["name"])
            if lb["host"] <= 0:
                fail(f"layer {l['name']} falls back to the host but has no host cycles")
            continue
        if mp["placement"] == "matrix":
            t = mp["tile"]
            if min(t["m"], t["k"], t["n"]) <= 0 or not mp["loop_order"] or mp["candidates"] <= 0:
                fail(f"layer {l['name']}: matrix mapping without a searched tile: {mp}")
            if not mp.get("tile_limit"):
                fail(f"layer {l['name']}: a matrix mapping without the reason its tile is not larger")
            if mp["sram_bytes"]["input"] <= 0 or mp["sram_bytes"]["weight"] <= 0:
                fail(f"layer {l['name']}: matrix mapping uses no SRAM: {mp['sram_bytes']}")
            if l["compute_cycles"] <= 0:
                fail(f"layer {l['name']}: a matrix layer with no matrix-unit cycles")
        if l["op"] in MATRIX_OPS:
            seen_matrix[l["name"]] = l

    missing = sorted(set(matrix_nodes) - set(seen_matrix) - host_nodes - fused_matrix)
    if missing:
        fail(f"{len(missing)} matrix node(s) of the model are not matrix layers of the report: {missing[:5]}")
    grouped_extra = 0
    for k, l in seen_matrix.items():
        if k not in expected_macs:
            continue
        want, got = expected_macs[k], l["macs"]
        node = matrix_nodes[k]
        group = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "group"), 1)
        if group == 1 or strict_grouped:
            if got != want:
                fail(f"layer {k}: {got} MACs, {want} from the ONNX shapes")
        elif not want <= got <= group * want:
            fail(f"layer {k} (group {group}): {got} MACs, outside [{want}, {group * want}] from the ONNX shapes")
        grouped_extra += got - want
    if sum(l["macs"] for l in layers) != r["macs"]:
        fail(f"report macs {r['macs']} is not the sum of its layers' MACs")
    want_macs = sum(v for k, v in expected_macs.items() if k not in host_nodes)  # the array's share
    if r["macs"] != want_macs + grouped_extra:
        fail(f"report macs {r['macs']}, {want_macs} useful from the ONNX shapes (+{grouped_extra} grouped)")
    util = r["macs"] / (r["array"]["rows"] * r["array"]["cols"] * total)
    if abs(util - r["array_utilization"]) > 1e-9 * max(1.0, util):
        fail(f"array_utilization {r['array_utilization']} != macs / (rows*cols*total) = {util}")

    fallbacks = r["compile"]["fallbacks"]
    if sorted(f["op"] for f in fallbacks) != sorted(host_layers):
        fail(f"host layers {host_layers} are not the compile section's fallbacks {fallbacks}")
    if sorted(set(host_layers)) != expect_host:
        fail(f"host fallbacks {sorted(host_layers)}, expected ops {expect_host}: "
             + "; ".join(f"{f['node']} ({f['op']}): {f['reason']}" for f in fallbacks))
    for f in fallbacks:
        if f["estimated_cycles"] <= 0:
            fail(f"fallback {f['node']} has no estimated cost")

    if rowwise:
        check_rowwise(model, layers)

    if unfolded_bn:
        producer = {o: n for n in model.graph.node for o in n.output}
        nodes = {n.name: n for n in model.graph.node}
        want_bn = sorted(n.name for n in model.graph.node if n.op_type == "BatchNormalization"
                         and getattr(producer.get(n.input[0]), "op_type", "") != "Conv")
        got_bn = sorted(l["name"] for l in layers if l["op"] == "BatchNormalization")
        if not want_bn or got_bn != want_bn:
            fail(f"BatchNormalization layers {got_bn[:3]}... ({len(got_bn)}) are not the model's unfolded BNs "
                 f"{want_bn[:3]}... ({len(want_bn)})")
        stray = [l["name"] for l in layers if l["op"] in ("Mul", "Add", "Relu", "Clip") and l["name"] not in nodes]
        if stray:
            fail(f"{len(stray)} element-wise layer(s) named after no node of the model: {stray[:5]}")
    print(f"{name} on {os.path.basename(config)}: {total} cycles ({r['latency_ms']:.3f} ms), "
          f"{len(layers)} layers, {len(seen_matrix)} matrix layers, {want_macs} useful MACs (report {r['macs']}), "
          f"utilization "
          f"{100 * r['array_utilization']:.1f}%, compute/memory/scheduling/host "
          f"{b['compute']}/{b['memory']}/{b['scheduling']}/{b['host']}, host fallbacks {dict(collections.Counter(host_layers))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
