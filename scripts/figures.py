#!/usr/bin/env python3
"""Regenerates the measured figures of README.md and docs/, or checks that they are current.

Every figure block in a Markdown file sits between two markers,

    <!-- figures:NAME -->
    ...what this script prints for NAME...
    <!-- /figures:NAME -->

and is written only by this script: the commands it runs, their output (excerpts) or the table it
builds from their reports, and the commit it was measured at. Cycle counts, accuracy figures and
report fields are deterministic, so a block that differs from what the script prints now is stale.

Usage: scripts/figures.py [--npusim BIN] [--models DIR] [--check | --write] [--fast] [NAME...]
  --npusim  the binary (default: build/npusim under the repository)
  --models  where the exported models live; missing ones are exported there with
            scripts/export_models.py (default: build/test_models, the folder the ctests use)
  --check   compare each block with what it would be now; print the stale ones and exit 1 (default)
  --write   rewrite the blocks in place, stating the current commit
  --fast    only the blocks marked fast (seconds each: the check of the README test command);
            the rest (the whole zoo, minutes) run in the slow label
  NAME      only these blocks (default: all, or all fast ones with --fast)
Exit status: 0 current (or written), 1 stale, 2 usage or setup error.

To add a figure: write a function returning the block's Markdown, register it in BLOCKS with the file
it lives in, put the two markers in that file, and run `scripts/figures.py --write NAME`.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A block's last line states where it comes from; the check ignores the commit on it, so that a block
# measured at an older commit whose figures still hold is current.
PROVENANCE = re.compile(r"^<sub>Measured at commit [0-9a-f]+ by `scripts/figures.py --write (\S+)`.</sub>$",
                        re.M)


class Setup:
    """What every block needs: the binary, the models folder and a scratch folder."""

    def __init__(self, npusim, models, tmp):
        self.npusim = npusim
        self.models = models
        self.tmp = tmp
        self.files = {}  # repository path -> file made by a block, copied there by --write only (not compared)

    def model(self, name):
        path = os.path.join(self.models, name + ".onnx")
        if not os.path.exists(path):
            os.makedirs(self.models, exist_ok=True)
            r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "export_models.py"),
                                self.models, name], capture_output=True, text=True)
            if r.returncode != 0:
                raise SetupError(f"could not export {name}: {r.stderr.strip()[-300:]}")
        return path

    def run(self, args, cwd=None):
        """Runs npusim; returns stdout. A failure is a setup error naming the command."""
        r = subprocess.run([self.npusim] + args, capture_output=True, text=True, cwd=cwd or self.tmp)
        if r.returncode != 0:
            raise SetupError(f"npusim {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-400:]}")
        return r.stdout

    def report(self, args):
        path = os.path.join(self.tmp, "figures_report.json")
        self.run(args + ["-q", "--report", path])
        with open(path) as f:
            return json.load(f)


class SetupError(Exception):
    pass


def shown(cmd, model_paths):
    """The command as a reader types it: ./build/npusim and models/NAME.onnx."""
    out = cmd
    for path in model_paths:
        out = out.replace(path, "models/" + os.path.basename(path))
    return out


def excerpt(text, keep):
    """The lines of `text` that match one of `keep`, in order, with '...' where lines were cut. An entry
    is a regex, or (regex, n): the matching line and the n lines after it."""
    lines = text.rstrip("\n").split("\n")
    wanted = set()
    for k in keep:
        pattern, after = (k, 0) if isinstance(k, str) else k
        for i, line in enumerate(lines):
            if re.search(pattern, line):
                wanted.update(range(i, min(len(lines), i + after + 1)))
    out = []
    for i in sorted(wanted):
        if out and i - 1 not in wanted:
            out.append("...")
        out.append(lines[i].rstrip())
    return "\n".join(out)


def console(commands_and_outputs):
    body = []
    for cmd, out in commands_and_outputs:
        body.append("$ " + cmd)
        if out:
            body.append(out)
    return "```console\n" + "\n".join(body) + "\n```"


def millions(cycles):
    return f"{cycles / 1e6:.2f} M"


# ---- the blocks -----------------------------------------------------------------------------------------


def tour(s):
    """README: five commands a newcomer types first, with excerpts of what they print."""
    mnv2 = s.model("mobilenet_v2")
    models = [mnv2]
    parts = []

    parts.append("**1. Run a model.** Latency, utilization, where the cycles go, energy and area "
                 "(torchvision's MobileNetV2 with random weights; nothing is downloaded), in the preset's "
                 "default precision, which needs no calibration:")
    out = s.run(["run", mnv2])
    parts.append(console([("/usr/bin/python3 scripts/export_models.py models mobilenet_v2", ""),
                          (shown(f"./build/npusim run {mnv2}", models),
                           excerpt(out, [r"^total cycles", r"^precision ", r"^array ", r"^breakdown", r"^dram ",
                                         r"^energy ",
                                         (r"^layers by cycles|^top \d+ of", 4)]))]))

    parts.append("**2. Compare two NPUs.** The same model on `edge` and `datacenter`, and what differs:")
    a, b = os.path.join(s.tmp, "edge.json"), os.path.join(s.tmp, "datacenter.json")
    s.run(["run", mnv2, "-q", "--report", a])
    s.run(["run", mnv2, "-q", "-c", "datacenter", "--report", b])
    out = s.run(["diff", a, b])
    parts.append(console([
        (shown(f"./build/npusim run {mnv2} -q --report edge.json", models), ""),
        (shown(f"./build/npusim run {mnv2} -q -c datacenter --report datacenter.json", models), ""),
        ("./build/npusim diff edge.json datacenter.json",
         excerpt(out, [r"^configuration:", r"systolic_array\.(rows|cols) ", r"^dram\.model|^  dram\.model",
                       (r"^results ", 3)]))]))

    parts.append("**3. Sweep a design space and plot it.** Array size x input SRAM on MobileNetV2 "
                 "(`configs/sweeps/tour.yaml`; docs/sweeps.md has more):")
    # The sweep file names its model relative to itself (../../models/): run it from a copy of that layout
    # whose models/ is the models folder, so nothing is written into the repository.
    sweep_root = os.path.join(s.tmp, "sweep_root")
    os.makedirs(os.path.join(sweep_root, "configs", "sweeps"))
    shutil.copy(os.path.join(ROOT, "configs", "sweeps", "tour.yaml"), os.path.join(sweep_root, "configs", "sweeps"))
    os.symlink(s.models, os.path.join(sweep_root, "models"))
    s.run(["sweep", "configs/sweeps/tour.yaml", "-j", "2", "-o", "out"], cwd=sweep_root)
    results = os.path.join(sweep_root, "out", "results.csv")
    with open(results) as f:
        header = f.readline().rstrip("\n").split(",")
        rows = [dict(zip(header, line.rstrip("\n").split(","))) for line in f]
    png = os.path.join(sweep_root, "out", "summary.png")
    plot = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "plot_sweep.py"), results, "-o", png],
                          capture_output=True, text=True)
    if plot.returncode != 0:
        raise SetupError(f"plot_sweep.py failed: {plot.stderr.strip()[-300:]}")
    s.files["docs/sweeps/tour.png"] = png
    parts.append(console([("./build/npusim sweep configs/sweeps/tour.yaml -j 2 -o out/tour", ""),
                          ("/usr/bin/python3 scripts/plot_sweep.py out/tour/results.csv -o out/tour/summary.png",
                           "")]))
    table = ["| array | input SRAM | total cycles | latency |", "|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['systolic_array.rows']}x{r['systolic_array.cols']} | {r['sram.input.size_kib']} KiB | "
                     f"{int(r['total_cycles']):,} | {float(r['latency_ms']):.2f} ms |")
    parts.append("\n".join(table))
    parts.append("![latency over array and SRAM size](docs/sweeps/tour.png)")

    parts.append("**4. int8, and what it costs in accuracy.** Calibrated on 32 synthetic inputs here; "
                 "`--calibration DIR` takes real ones:")
    out = s.run(["run", mnv2, "--precision", "int8", "--accuracy"])
    parts.append(console([(shown(f"./build/npusim run {mnv2} --precision int8 --accuracy", models),
                           excerpt(out, [r"^total cycles", r"^accuracy ", r"^first layer below",
                                         (r"^layers adding the most error", 3)]))]))

    parts.append("**5. One page to share.** The report as a self-contained HTML page (summary cards, sortable "
                 "layer table, timeline, roofline, energy, accuracy), from a run or from a saved report:")
    html = os.path.join(s.tmp, "mobilenet_v2.html")
    s.run(["run", mnv2, "-q", "--html", html])
    parts.append(console([(shown(f"./build/npusim run {mnv2} --html mobilenet_v2.html", models), ""),
                          ("./build/npusim report edge.json --html edge.html", "")]))
    return "\n\n".join(parts)


ZOO = ["resnet50", "mobilenet_v2", "efficientnet_b0", "bert_small"]


def zoo_int8(s):
    """docs/models.md: int8 against fp16 cycles on edge for the zoo."""
    table = ["| model | fp16 cycles | int8 cycles | int8 / fp16 |", "|---|---|---|---|"]
    for name in ZOO:
        path = s.model(name)
        fp16 = s.report(["run", path, "--precision", "fp16"])["total_cycles"]
        int8 = s.report(["run", path, "--precision", "int8"])["total_cycles"]
        table.append(f"| {name} | {millions(fp16)} | {millions(int8)} | {int8 / fp16:.2f} |")
    return ("On `edge`: `npusim run models/NAME.onnx --precision fp16|int8 -q --report r.json`, "
            "`total_cycles` (int8 calibrated on 32 synthetic inputs).\n\n" + "\n".join(table))


LIMIT_ZOO = ["resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "densenet121", "googlenet",
             "convnext_tiny", "regnet_y_400mf", "vit_b_16", "bert_small", "bert_base"]


def percent(x):
    return f"{100 * x:.1f} %"


def model_limit(s):
    """docs/models.md: each zoo model's cycles against its whole-model limit on edge (issue 36's yardstick)."""
    table = ["| model | fp16 cycles | fp16 efficiency | int8 cycles | int8 efficiency | limit fp16 / int8 (set by) |",
             "|---|---|---|---|---|---|"]
    for name in LIMIT_ZOO:
        path = s.model(name)
        fp16 = s.report(["run", path, "--precision", "fp16"])
        int8 = s.report(["run", path, "--precision", "int8"])
        table.append(f"| {name} | {millions(fp16['total_cycles'])} | {percent(fp16['model_efficiency'])} | "
                     f"{millions(int8['total_cycles'])} | {percent(int8['model_efficiency'])} | "
                     f"{millions(fp16['model_limit_cycles'])} ({fp16['model_limit']['bound_by']}) / "
                     f"{millions(int8['model_limit_cycles'])} ({int8['model_limit']['bound_by']}) |")
    return ("On `edge` at batch 1: `npusim run models/NAME.onnx --precision fp16|int8 -q --report r.json`, the "
            "report's `total_cycles`, `model_efficiency` and `model_limit` (docs/report.md, \"Model limit\"; int8 "
            "calibrated on 32 synthetic inputs). The report's vector term counts edge's `int8_dot_width` (four int8 "
            "products a lane and cycle in a depthwise conv), so a depthwise model's int8 efficiency here is lower "
            "than `../shared/checks/lib/model_limit.py`'s, which counts one product a lane.\n\n" + "\n".join(table))


BIG_PRESETS = [("tpu-v1", "int8"), ("datacenter", "bf16")]
BATCH_ZOO = ["resnet50", "mobilenet_v2", "vit_b_16_anybatch", "bert_base_anybatch"]


def whole_fold_share(r):
    """The share of the limit the matrix layers reach one at a time in whole folds (docs/report.md, "Whole folds")."""
    m = r["model_limit"]
    return min(1.0, r["model_limit_cycles"] / max(m["array_fold_cycles"], m["vector_cycles"], m["dram_cycles"]))


def model_limit_batch8(s):
    """docs/models.md: the big presets at batch 8 against their whole-model limit (issue 36's 60 % bar)."""
    table = ["| model | " + " | ".join(f"{p} {x}: cycles, efficiency (limit set by; whole-fold share)"
                                      for p, x in BIG_PRESETS) + " |",
             "|---|" + "---|" * len(BIG_PRESETS)]
    for name in BATCH_ZOO:
        path = s.model(name)
        cells = []
        for preset, precision in BIG_PRESETS:
            r = s.report(["run", path, "-c", preset, "--precision", precision, "--batch", "8"])
            cells.append(f"{millions(r['total_cycles'])}, {percent(r['model_efficiency'])} "
                         f"({r['model_limit']['bound_by']}; {percent(whole_fold_share(r))})")
        table.append(f"| {name} | " + " | ".join(cells) + " |")
    return ("`npusim run models/NAME.onnx -c PRESET --precision X --batch 8 -q --report r.json`, the report's "
            "`total_cycles`, `model_efficiency` and `model_limit` (int8 calibrated on 32 synthetic inputs); the "
            "whole-fold share is the share of the limit the matrix layers reach one at a time in whole folds of the "
            "array, one output pixel a row (docs/report.md, \"Whole folds\"). ViT-B/16 and BERT-base are the "
            "`_anybatch` exports, whose attention follows `--batch` (\"Exporting\" below).\n\n" + "\n".join(table))


# name -> (file, function, fast)
BLOCKS = {
    "tour": ("README.md", tour, True),
    "zoo-int8": ("docs/models.md", zoo_int8, False),
    "model-limit": ("docs/models.md", model_limit, False),
    "model-limit-batch8": ("docs/models.md", model_limit_batch8, False),
}

# ---- the driver ----------------------------------------------------------------------------------------


def commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def block_re(name):
    return re.compile(r"(<!-- figures:%s -->\n)(.*?)(<!-- /figures:%s -->)" % (re.escape(name), re.escape(name)),
                      re.S)


def normalised(text):
    return PROVENANCE.sub("<sub>provenance</sub>", text).strip()


def main():
    ap = argparse.ArgumentParser(add_help=True)
    ap.add_argument("--npusim", default=os.path.join(ROOT, "build", "npusim"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "test_models"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()

    unknown = [n for n in args.names if n not in BLOCKS]
    if unknown:
        print(f"figures.py: unknown block {unknown[0]} (blocks: {', '.join(BLOCKS)})", file=sys.stderr)
        return 2
    if not os.access(args.npusim, os.X_OK):
        print(f"figures.py: no npusim binary at {args.npusim} (use --npusim)", file=sys.stderr)
        return 2
    names = args.names or [n for n, (_, _, fast) in BLOCKS.items() if fast or not args.fast]

    stale = []
    tmp = tempfile.mkdtemp(prefix="npusim-figures-")
    try:
        setup = Setup(os.path.abspath(args.npusim), os.path.abspath(args.models), tmp)
        for name in names:
            rel, make, _ = BLOCKS[name]
            path = os.path.join(ROOT, rel)
            with open(path) as f:
                text = f.read()
            m = block_re(name).search(text)
            if not m:
                print(f"figures.py: {rel} has no block '{name}' (<!-- figures:{name} --> ... "
                      f"<!-- /figures:{name} -->)", file=sys.stderr)
                return 2
            try:
                body = make(setup).rstrip("\n")
            except SetupError as e:
                print(f"figures.py: {name}: {e}", file=sys.stderr)
                return 2
            body += f"\n\n<sub>Measured at commit {commit()} by `scripts/figures.py --write {name}`.</sub>\n"
            if args.write:
                text = text[:m.start(2)] + body + text[m.end(2):]
                with open(path, "w") as f:
                    f.write(text)
                for dest, made in setup.files.items():
                    shutil.copy(made, os.path.join(ROOT, dest))
                setup.files.clear()
                print(f"{name}: written to {rel}")
            elif normalised(m.group(2)) != normalised(body):
                stale.append((name, rel, m.group(2), body))
                print(f"{name}: STALE in {rel}")
            else:
                print(f"{name}: current ({rel})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, rel, old, new in stale:
        import difflib
        diff = difflib.unified_diff(old.splitlines(), new.splitlines(), f"{rel} ({name})", "now", lineterm="", n=1)
        print("\n".join(list(diff)[:60]))
    if stale:
        print(f"figures.py: {len(stale)} stale block(s); regenerate with scripts/figures.py --write "
              + " ".join(n for n, *_ in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
