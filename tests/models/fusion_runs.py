"""The four runs the fusion checks share (check_post_affine.py, check_project_tail.py, check_se_pool_fusion.py):
a model run as npusim fuses it ("fused", writing its mapping), with that mapping rewritten so that the fused
layers run apart ("unfused"), with --no-fusion ("off"), and with the fused run's mapping imposed again
("again"). Each check says how to undo its fusion in a mapping line and what to assert of the four reports."""
import json
import os
import re

import numpy as np

from check_conv_pool_fusion import load_outputs, run

RUNS = ("fused", "unfused", "off", "again")
_NAME = re.compile(r"\s*- \{name: ([^,}]+)")


def run_variants(npusim, common, tmp, inputs, unfuse, functional=("fused", "unfused")):
    """Runs npusim `common` (model, config, precision, options) the four ways in folder `tmp`, the runs named in
    `functional` with --functional on the files of `inputs`. `unfuse(fused_report)` returns a function
    (layer name, mapping line) -> the line that runs that layer apart, applied to every line of the fused
    run's --mapping-out to make the unfused run's --mapping. Returns ({run: report}, {run: {file: array}})."""
    fused_map = os.path.join(tmp, "fused.yaml")
    unfused_map = os.path.join(tmp, "unfused.yaml")
    reports, outputs = {}, {}
    for what in RUNS:
        out = os.path.join(tmp, what)
        report = os.path.join(tmp, what + ".json")
        extra = {"fused": ["--mapping-out", fused_map], "unfused": ["--mapping", unfused_map],
                 "off": ["--no-fusion"], "again": ["--mapping", fused_map]}[what]
        func = ["--functional", "--inputs", inputs, "--outputs", out] if what in functional else []
        run(npusim, common + func + ["--report", report] + extra)
        with open(report) as f:
            reports[what] = json.load(f)
        if func:
            outputs[what] = load_outputs(out)
        if what == "fused":
            rewrite = unfuse(reports["fused"])
            with open(fused_map) as f, open(unfused_map, "w") as g:
                for line in f:
                    m = _NAME.match(line)
                    g.write(rewrite(m.group(1), line) if m else line)
    return reports, outputs


def differing_outputs(got, want):
    """The output files of two functional runs that are not the same bits (missing ones included)."""
    return sorted(k for k in set(got) | set(want)
                  if k not in got or k not in want or got[k].shape != want[k].shape
                  or got[k].tobytes() != want[k].tobytes())


def dram_bytes(report):
    """The DRAM bytes the report's layers read and wrote."""
    return sum(l.get("dram_bytes_read", 0) + l.get("dram_bytes_written", 0) for l in report["layers"])


def shared_failures(reports, outputs, fused_of):
    """What every fusion check asserts of the four runs, as messages (none: it holds): `fused_of(report)` (the
    report's fused layers, any comparable value) empty in the unfused and --no-fusion runs, the fused and unfused
    runs' outputs the same bits, and the fused run's mapping re-imposed giving its cycles and fused layers."""
    failures = [f"{what}: fused: {fused_of(reports[what])}" for what in ("unfused", "off") if fused_of(reports[what])]
    diff = differing_outputs(outputs["fused"], outputs["unfused"])
    if diff:
        failures.append(f"outputs differ from the unfused run's: {diff}")
    again, fused = reports["again"], reports["fused"]
    if again["total_cycles"] != fused["total_cycles"] or fused_of(again) != fused_of(fused):
        failures.append(f"re-imposed mapping: {again['total_cycles']} cycles against {fused['total_cycles']}, "
                        f"fused {fused_of(again)}")
    return failures


def on_chip_off(line):
    """A mapping line with `on_chip: false` (its layer's output stored, not left on chip); a conv's band loop
    (`band_loop: {...}`, its line buffer with the layer after it) gives way to it."""
    if "on_chip: true" in line:
        return line.replace("on_chip: true", "on_chip: false")
    if "band_loop: {" in line:
        return re.sub(r"band_loop: \{[^}]*\}", "on_chip: false", line, count=1)
    return line.replace("}", ", on_chip: false}", 1)


def batched_inputs(model, folder, batch):
    """Writes FOLDER/NAME.npy for the model's inputs, `batch` images each, each the first one's values shifted."""
    from random_inputs import write_random_inputs
    write_random_inputs(model, folder)
    for f in os.listdir(folder):
        path = os.path.join(folder, f)
        x = np.load(path)
        np.save(path, np.concatenate([np.roll(x, k) for k in range(batch)]))


def fused_run(a, tmp, unfuse):
    """run_variants for a check's arguments (npusim, model, config, precision, batch), its random inputs batched."""
    batched_inputs(a.model, os.path.join(tmp, "in"), a.batch)
    sets = [arg for kv in getattr(a, "set", []) for arg in ("--set", kv)]
    return run_variants(
        a.npusim, [a.model, "--config", a.config, "--precision", a.precision, "--batch", str(a.batch), "-q"] + sets,
        tmp, os.path.join(tmp, "in"), unfuse)


def fusion_args(doc, least, make_small):
    """The arguments the fusion checks share: NPUSIM MODEL.onnx|- CONFIG.yaml PRECISION [--batch N]
    [--make-small DIR] [--<least> N] [--set KEY=VALUE ...]; with --make-small, `make_small(DIR)` writes the model
    and gives its path."""
    import argparse
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("npusim", "model", "config", "precision"):
        ap.add_argument(name)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("--" + least, type=int, default=1)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.make_small:
        a.model = make_small(a.make_small)
    return a
