#!/usr/bin/env python3
"""End-to-end checks of the precision CLI, run on the npusim binary as a user would.

usage: quant_e2e.py NPUSIM SOURCE_DIR MODELS_DIR CASE

Cases:
  accuracy_section   MobileNetV2 int8 --accuracy: the report's accuracy section has the documented fields,
                     per-layer int8 entries, the synthetic-calibration flag, and the console summary.
  per_channel        MobileNetV2 int8: per-channel weights give a higher output SQNR than per-tensor.
  int8_faster        ResNet-18 on edge: int8 total cycles < fp16 total cycles; the int8 matrix layers use
                     the int8 rate (estimated compute halves) and move fewer bytes.
  outlier            a copy of tests/quant_e2e/data/mbv2_block.onnx with one output channel of b1_project
                     scaled x60: per-tensor int8 flags it in weight_outliers and first_bad_layer.
  errors             unknown precision / override key -> exit 2 naming it; int8-only presets run by default.
"""
import json
import os
import subprocess
import sys
import tempfile

NPUSIM, SRC, MODELS, CASE = sys.argv[1:5]
EDGE = os.path.join(SRC, "configs", "edge.yaml")
BLOCK = os.path.join(SRC, "tests", "quant_e2e", "data", "mbv2_block.onnx")
tmp = tempfile.mkdtemp(prefix="quant_e2e_")


def run(args, expect=0):
    p = subprocess.run([NPUSIM] + args, capture_output=True, text=True, timeout=1500)
    if p.returncode != expect:
        sys.exit(f"FAIL: npusim {' '.join(args)} exited {p.returncode} (expected {expect}):\n{p.stderr[-2000:]}")
    return p


def report(model, name, *extra):
    path = os.path.join(tmp, name + ".json")
    p = run(["run", model, "--config", EDGE, "--report", path] + list(extra))
    with open(path) as f:
        return json.load(f), p.stdout


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


mbv2 = os.path.join(MODELS, "mobilenet_v2.onnx")
if CASE == "accuracy_section":
    r, out = report(mbv2, "mb_int8", "--precision", "int8", "--accuracy", "--calibration-samples", "8")
    a = r["accuracy"]
    for k in ("output_sqnr_db", "output_cosine", "first_bad_layer", "layers", "calibration", "weight_outliers"):
        check(k in a, f"accuracy section lacks {k}")
    check(a["precision"] == "int8", "precision is not int8")
    check(all(k in l for l in a["layers"] for k in ("name", "precision", "sqnr_db", "cosine", "max_abs_error")),
          "a layer lacks a field")
    check(sum(l["precision"] == "int8" for l in a["layers"]) >= 52, "fewer int8 layers than MobileNetV2's 52 convs+fc")
    check(a["calibration"]["synthetic"] is True and any("SYNTHETIC" in w for w in a["warnings"]),
          "synthetic calibration is not flagged")
    check(0.9 <= a["output_cosine"] <= 1.0, f"int8 output cosine {a['output_cosine']}")
    check("output SQNR" in out and "CALIBRATION USED SYNTHETIC DATA" in out, "console summary missing")
    # The compiled program really is int8: the matrix layers' mappings say so.
    maps = [l.get("mapping", {}).get("description", "") for l in r["layers"]]
    check(sum(m.startswith("int8 CONV") for m in maps) >= 52, "the conv layers were not compiled as int8")
    print(f"ok: output SQNR {a['output_sqnr_db']:.2f} dB, cosine {a['output_cosine']:.4f}")
elif CASE == "per_channel":
    res = {}
    for w in ("per-channel", "per-tensor"):
        r, _ = report(mbv2, "mb_" + w, "--precision", "int8", "--accuracy", "--weights", w,
                      "--calibration-method", "minmax", "--calibration-samples", "8")
        res[w] = r["accuracy"]["output_sqnr_db"]
    check(res["per-channel"] > res["per-tensor"], f"per-channel {res['per-channel']} <= per-tensor {res['per-tensor']}")
    print(f"ok: per-channel {res['per-channel']:.2f} dB > per-tensor {res['per-tensor']:.2f} dB")
elif CASE == "int8_faster":
    m = os.path.join(MODELS, "resnet18.onnx")
    r8, _ = report(m, "r18_int8", "--precision", "int8", "--calibration-samples", "4")
    r16, _ = report(m, "r18_fp16", "--precision", "fp16")
    c8, c16 = r8["total_cycles"], r16["total_cycles"]
    check(c8 < c16, f"int8 {c8} cycles >= fp16 {c16}")
    def matrix(r):
        return {l["name"]: l["mapping"] for l in r["layers"] if l.get("mapping", {}).get("placement") == "matrix"}
    m8, m16 = matrix(r8), matrix(r16)
    common = [n for n in m8 if n in m16]
    check(len(common) >= 20, "matrix layers missing")
    comp8 = sum(m8[n]["estimated_compute_cycles"] for n in common)
    comp16 = sum(m16[n]["estimated_compute_cycles"] for n in common)
    # edge: int8 rate 1 MAC/PE/cycle, fp16 0.5: the array's compute estimate halves (within tiling changes).
    check(comp8 < 0.75 * comp16, f"int8 estimated compute {comp8} not well below fp16 {comp16}")
    w8 = r8["compile"]["memory"]["weight_bytes"]
    w16 = r16["compile"]["memory"]["weight_bytes"]
    check(w8 < 0.6 * w16, f"int8 weights {w8} B not about half of fp16 {w16} B")
    print(f"ok: int8 {c8} cycles < fp16 {c16} ({c8 / c16:.2f}); compute est {comp8} vs {comp16}; weights {w8} vs {w16} B")
elif CASE == "outlier":
    import numpy as np
    import onnx
    from onnx import numpy_helper
    model = onnx.load(BLOCK)
    for i, t in enumerate(model.graph.initializer):
        if t.name == "b1_project_w":
            w = numpy_helper.to_array(t).copy()
            w[5] *= 60.0
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(w, t.name))
    path = os.path.join(tmp, "outlier.onnx")
    onnx.save(model, path)
    r, out = report(path, "outlier", "--precision", "int8", "--weights", "per-tensor", "--accuracy",
                    "--calibration-method", "minmax", "--calibration-samples", "8")
    a = r["accuracy"]
    flagged = [o for o in a["weight_outliers"] if o["layer"] == "b1_project" and o["channel"] == 5]
    check(flagged, f"outlier channel not in the table: {a['weight_outliers']}")
    check(a["first_bad_layer"] is not None, "no first bad layer")
    names = [l["name"] for l in a["layers"]]
    check(names.index(a["first_bad_layer"]) <= names.index("b1_project") + 1,
          f"first bad layer {a['first_bad_layer']} is not at the outlier layer")
    r2, _ = report(BLOCK, "clean", "--precision", "int8", "--weights", "per-tensor", "--accuracy",
                   "--calibration-method", "minmax", "--calibration-samples", "8")
    check(not any(o["layer"] == "b1_project" for o in r2["accuracy"]["weight_outliers"]), "clean model flagged")
    print(f"ok: factor {flagged[0]['factor']:.1f}, first bad layer {a['first_bad_layer']}")
elif CASE == "errors":
    p = run(["run", BLOCK, "--precision", "int4"], expect=2)
    check("int4" in p.stderr, "unknown precision not named")
    p = run(["run", BLOCK, "--precision", "int8", "--precision-override", "no_such_layer=fp16"], expect=2)
    check("no_such_layer" in p.stderr, "unknown override key not named")
    p = run(["run", BLOCK, "--precision-override", "b1_dw=fp12"], expect=2)
    check("fp12" in p.stderr, "unknown override precision not named")
    yml = os.path.join(tmp, "prec.yaml")
    with open(yml, "w") as f:
        f.write("overrides:\n  - b1_dw: fp16\n  - Gemm: fp32\n")
    r, _ = report(BLOCK, "yaml", "--precision", "int8", "--precision-file", yml, "--accuracy", "--calibration-samples", "4")
    prec = {l["name"]: l["precision"] for l in r["accuracy"]["layers"]}
    check(prec.get("b1_dw") == "fp16" and prec.get("fc") == "fp32" and prec.get("b1_expand") == "int8",
          f"YAML overrides not applied: {prec}")
    for preset in ("tpu-v1", "gemmini"):
        path = os.path.join(tmp, preset + ".json")
        run(["run", BLOCK, "--config", preset, "--report", path, "--calibration-samples", "4", "-q"])
        check(json.load(open(path))["total_cycles"] > 0, f"{preset} did not run")
    print("ok: errors exit 2 naming the key; YAML overrides; tpu-v1/gemmini run int8 by default")
else:
    sys.exit(f"unknown case {CASE}")
