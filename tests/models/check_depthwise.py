#!/usr/bin/env python3
"""MobileNetV2's depthwise convolutions run on the vector unit (VEC dwconv), and the model is faster for it.

Usage: check_depthwise.py NPUSIM MODEL.onnx CONFIG.yaml PRECISION

Runs the model twice: as the back end maps it, and with a mapping file that places every depthwise
conv (ONNX group == input channels) on the array (`placement: matrix`, the block-diagonal mapping the
back end used before the vector unit could run them). Checks that
- in the free run most depthwise convs run on the vector unit (mapping placement "vector", or fused into
  the conv before them through a line buffer; a "VEC dwconv" description), each with its useful MACs and
  no array MACs;
- no depthwise layer is slower on the unit the back end chose than on the array by more than the
  noise of a whole-model run (the choice simulates both);
- the whole model takes fewer cycles than with every depthwise conv on the array.
Prints one summary line; exits 1 on the first failed check.
"""
import json
import os
import subprocess
import sys
import tempfile

import onnx


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(npusim, model, config, precision, tmp, tag, mapping=None):
    report = os.path.join(tmp, f"{tag}.json")
    cmd = [npusim, "run", model, "--config", config, "--precision", precision, "-q", "--report", report]
    if mapping:
        cmd += ["--mapping", mapping]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    with open(report) as f:
        return json.load(f)


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    npusim, model_path, config, precision = argv[1:]
    model = onnx.load(model_path)
    channels = {}
    for init in model.graph.initializer:
        channels[init.name] = list(init.dims)
    depthwise = set()
    for n in model.graph.node:
        if n.op_type != "Conv":
            continue
        group = next((onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "group"), 1)
        w = channels.get(n.input[1])
        if group > 1 and w is not None and w[1] == 1 and w[0] == group:
            depthwise.add(n.name)
    if not depthwise:
        fail("the model has no depthwise convolution")
    with tempfile.TemporaryDirectory() as tmp:
        free = run(npusim, model_path, config, precision, tmp, "free")
        layers = {l["name"]: l for l in free["layers"]}
        names = [k for k in layers if k in depthwise]
        if len(names) != len(depthwise):
            fail(f"{len(depthwise) - len(names)} depthwise convs are not layers of the report")
        mapping = os.path.join(tmp, "array.yaml")
        with open(mapping, "w") as f:
            f.write("layers:\n")
            for k in names:
                f.write(f"  - {{name: {json.dumps(k)}, placement: matrix}}\n")
        array = run(npusim, model_path, config, precision, tmp, "array", mapping)
    on_array = {l["name"]: l for l in array["layers"]}
    vector = 0
    for k in names:
        l, mp = layers[k], layers[k]["mapping"]
        if on_array[k]["mapping"]["placement"] != "matrix":
            fail(f"layer {k}: placement matrix imposed, ran on the {on_array[k]['mapping']['placement']}")
        # On the vector unit: its own layer, or fused behind its producer conv in a line buffer (the report's
        # unit "fused", the description "VEC dwconv ... fused into the conv layer").
        if mp["placement"] == "vector" or (l.get("unit") == "fused" and "VEC dwconv" in mp["description"]):
            vector += 1
            if "VEC dwconv" not in mp["description"]:
                fail(f"layer {k}: on the vector unit without a dwconv mapping: {mp['description']}")
            if l["macs"] <= 0 or l.get("array_macs", -1) != 0:
                fail(f"layer {k}: macs {l['macs']}, array_macs {l.get('array_macs')}: want useful MACs, none on the array")
        elif mp["placement"] != "matrix":
            fail(f"layer {k}: placement {mp['placement']}")
        # The choice compares simulated slices; in the whole run a layer may shift by its neighbours' overlap.
        if l["cycles"] > 1.15 * on_array[k]["cycles"] + 2000:
            fail(f"layer {k}: {l['cycles']} cycles on the {mp['placement']}, {on_array[k]['cycles']} on the array")
    if 2 * vector <= len(names):
        fail(f"only {vector} of {len(names)} depthwise convs run on the vector unit")
    if free["total_cycles"] >= array["total_cycles"]:
        fail(f"{free['total_cycles']} cycles with the vector unit, {array['total_cycles']} with every depthwise conv "
             "on the array")
    print(f"{os.path.basename(model_path)} {precision} on {os.path.basename(config)}: {vector} of {len(names)} "
          f"depthwise convs on the vector unit; {array['total_cycles']} -> {free['total_cycles']} cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
