#!/usr/bin/env python3
"""npusim's int8 post-training quantization side by side with PyTorch's own, on the same models and inputs.

Usage: ptq_compare.py NPUSIM OUTDIR [--models M,...] [--variant="ARGS"]... [--calibration N] [--evaluation N]

For each model (default: resnet18, mobilenet_v2, mobilenet_v3_small, efficientnet_b0 -- torchvision's
architectures with random weights and re-estimated BatchNorm, exactly as scripts/export_models.py writes
them, same seed):
  1. exports OUTDIR/MODEL.onnx (export_models.export) and writes N seeded N(0,1) calibration inputs
     (OUTDIR/calibration/NNN.npy, numpy seed 1) and other evaluation inputs (OUTDIR/evaluation, seed 2),
     1x3x224x224 float32, shared by all models;
  2. PyTorch: FX graph mode PTQ (prepare_fx / convert_fx) with the default QConfigMapping of each of
     Debian's torch engines -- onednn (per-channel symmetric weights, histogram observers) and qnnpack
     (per-tensor weights, histogram observers) -- calibrated on the calibration inputs, run on the
     evaluation inputs with that engine's kernels;
  3. npusim: `npusim run OUTDIR/MODEL.onnx -q --precision int8 --accuracy --calibration OUTDIR/calibration
     --calibration-samples 0 --accuracy-inputs OUTDIR/evaluation --report ...` with its default settings
     on its default configuration, and once more per --variant with those options added (e.g.
     --variant="--calibration-method mse" --variant=--bias-correction; the "=" keeps argparse from
     reading the value as an option).
Output SQNR = 10 log10(sum ref^2 / sum (out - ref)^2) over all evaluation inputs against each framework's
own fp32 model (npusim's accuracy.output_sqnr_db). Prints a Markdown table (docs/quantization.md) and
writes it with the raw figures to OUTDIR/ptq_compare.json. The issue-17 criterion is printed too:
npusim's default >= the better torch engine + 1 dB on every model.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models  # noqa: E402  (the one definition of the models and their seed)

DEFAULT_MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0"]
ENGINES = ["onednn", "qnnpack"]


def sqnr_db(ref, out):
    ref = np.concatenate([r.ravel() for r in ref]).astype(np.float64)
    out = np.concatenate([o.ravel() for o in out]).astype(np.float64)
    noise = np.sum((out - ref) ** 2)
    return 300.0 if noise == 0 else 10 * math.log10(np.sum(ref ** 2) / noise)


def write_inputs(folder, count, seed):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    arrays = []
    for k in range(count):
        a = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        path = os.path.join(folder, f"{k:03d}.npy")
        if not os.path.exists(path):
            np.save(path, a)
        arrays.append(np.load(path))
    for extra in sorted(os.listdir(folder))[count:]:
        os.remove(os.path.join(folder, extra))
    return arrays


def float_model(name):
    torch.manual_seed(export_models.SEED)
    model, _ = export_models.MODELS[name](name)
    return model.eval()


def torch_ptq(name, engine, calibration, evaluation):
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.backends.quantized.engine = engine
    model = float_model(name)
    with torch.no_grad():
        ref = [model(torch.from_numpy(x)).numpy() for x in evaluation]
        prepared = prepare_fx(model, get_default_qconfig_mapping(engine), (torch.from_numpy(evaluation[0]),))
        for x in calibration:
            prepared(torch.from_numpy(x))
        quantized = convert_fx(prepared)
        out = [quantized(torch.from_numpy(x)).numpy() for x in evaluation]
    return sqnr_db(ref, out)


def npusim_ptq(npusim, model_path, calib_dir, eval_dir, report, extra):
    args = [npusim, "run", model_path, "-q", "--precision", "int8", "--accuracy", "--calibration", calib_dir,
            "--calibration-samples", "0", "--accuracy-inputs", eval_dir, "--report", report] + extra
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ptq_compare.py: {' '.join(args)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    with open(report) as f:
        return json.load(f)["accuracy"]["output_sqnr_db"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("npusim")
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--variant", action="append", default=[],
                    help="npusim options for one more column, e.g. \"--calibration-method mse\"")
    ap.add_argument("--calibration", type=int, default=32)
    ap.add_argument("--evaluation", type=int, default=4)
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in export_models.MODELS]
    if unknown:
        sys.exit(f"ptq_compare.py: unknown model(s) {', '.join(unknown)}")
    variants = [v.split() for v in a.variant]
    os.makedirs(a.outdir, exist_ok=True)
    calib_dir, eval_dir = os.path.join(a.outdir, "calibration"), os.path.join(a.outdir, "evaluation")
    calibration = write_inputs(calib_dir, a.calibration, 1)
    evaluation = write_inputs(eval_dir, a.evaluation, 2)
    rows = []
    for name in models:
        path = os.path.join(a.outdir, name + ".onnx")
        if not os.path.exists(path):
            export_models.export(name, a.outdir)
        row = {"model": name}
        for engine in ENGINES:
            row["torch_" + engine] = torch_ptq(name, engine, calibration, evaluation)
        report = os.path.join(a.outdir, name + "_report.json")
        row["npusim_default"] = npusim_ptq(a.npusim, path, calib_dir, eval_dir, report, [])
        for v in variants:
            row["npusim " + " ".join(v)] = npusim_ptq(a.npusim, path, calib_dir, eval_dir, report, v)
        row["margin_db"] = row["npusim_default"] - max(row["torch_" + e] for e in ENGINES)
        rows.append(row)
        print(json.dumps(row), flush=True)
    cols = (["torch_" + e for e in ENGINES] + ["npusim_default"] + ["npusim " + " ".join(v) for v in variants] +
            ["margin_db"])
    lines = ["| model | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r in rows:
        lines.append(f"| {r['model']} | " + " | ".join(f"{r[c]:+.2f}" if c == "margin_db" else f"{r[c]:.2f}"
                                                      for c in cols) + " |")
    table = "\n".join(lines)
    print(table)
    met = all(r["margin_db"] >= 1.0 for r in rows)
    print(f"issue 17: npusim default >= better torch engine + 1 dB on every model: {'met' if met else 'NOT met'}")
    with open(os.path.join(a.outdir, "ptq_compare.json"), "w") as f:
        json.dump({"rows": rows, "table": table, "met": met}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
