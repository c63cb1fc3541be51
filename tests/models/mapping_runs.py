"""Three functional runs of one model for a fusion check: as npusim compiles it (its mapping written), with that
mapping edited line by line (a layer forced back to the way it ran before the change), and with the mapping as
written (the round trip, which must give the same program)."""
import argparse
import sys
import json
import os
import tempfile

from check_conv_pool_fusion import load_outputs, run
from random_inputs import write_random_inputs


def parse_args(doc, extra=None):
    """NPUSIM DIR CONFIG.yaml PRECISION [--set KEY=VALUE ...], with `extra(parser)` adding options."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("dir")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--set", action="append", default=[])
    if extra:
        extra(ap)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    return a


def three_runs(a, model, edit_line, more=None):
    """Reports and outputs of the runs "own", "edited" (each line of own's mapping through `edit_line`) and
    "round trip", and of one more run per entry of `more` (its name: its own line edit)."""
    reports, outputs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        write_random_inputs(model, ind)
        common = [model, "--config", a.config, "--precision", a.precision, "-q", "--functional", "--inputs", ind]
        for kv in a.set:
            common += ["--set", kv]
        edits = {"edited": edit_line, **(more or {})}
        maps = {w: os.path.join(tmp, w + ".yaml") for w in ("own", *edits)}
        runs = [("own", ["--mapping-out", maps["own"]])] + [(w, ["--mapping", maps[w]]) for w in edits]
        for what, extra in runs + [("round trip", ["--mapping", maps["own"]])]:
            report = os.path.join(tmp, what.replace(" ", "_") + ".json")
            out = os.path.join(tmp, what.replace(" ", "_"))
            run(a.npusim, common + ["--outputs", out, "--report", report] + extra)
            with open(report) as f:
                reports[what] = json.load(f)
            outputs[what] = load_outputs(out)
            if what == "own":
                with open(maps["own"]) as f:
                    lines = f.readlines()
                for w, edit in edits.items():
                    with open(maps[w], "w") as h:
                        h.writelines(edit(line) for line in lines)
    return reports, outputs


def shared_failures(reports, outputs, edited_what):
    """What the three runs must share: the outputs bit for bit, the round trip's cycles the own run's."""
    from fusion_runs import differing_outputs
    failures = []
    for what in ("edited", "round trip"):
        diff = differing_outputs(outputs["own"], outputs[what])
        if diff:
            failures.append(f"outputs differ from the {edited_what if what == 'edited' else what} run: {diff}")
    if reports["round trip"]["total_cycles"] != reports["own"]["total_cycles"]:
        failures.append("the mapping round trip changes the cycles")
    return failures


def finish(ok, failures):
    """Prints the failures and exits 1 if any (or not ok), else prints ok."""
    for f in failures:
        print(f"FAIL: {f}")
    if failures or not ok:
        sys.exit(1)
    print("ok")
