#!/usr/bin/python3
"""Checks that two npusim binaries compile and simulate the zoo identically (a refactoring's proof).

Usage: check_identical.py OLD_NPUSIM NEW_NPUSIM [MODELS_DIR] [--quick] [--jobs N] [--keep DIR]
                          [--functional-max-mb MB] [--only SUBSTRING]

For every case -- the built-in demo, gemm: and conv: micro-models and a small llm: on edge, the
micro-models on datacenter and (int8, their arrays have no float MACs) gemmini and tpu-v1, and every
MODELS_DIR/*.onnx (default /work/tmp/models) on edge -- in fp32, fp16 and int8, both binaries run, each in a directory of its own with the same
relative file names:

  npusim run MODEL --precision P -q --report report.json --mapping-out mapping.yaml
  npusim compile MODEL --precision P -q -o prog.npu
  npusim run MODEL --precision P -q --functional --outputs out/   (built-ins and models <= MB MiB)

and the outputs are compared: the reports as JSON with the fields that say when, how long, with which
build or with which command line a run happened left out (keys named *seconds*, *wall*, command,
version, timestamp); the program files and --functional outputs byte for byte; the mapping files and the
console output as text with the binaries' paths replaced. A command that fails must fail the same way in
both (exit code, messages). One line per case: `same` or `DIFF` with the first difference; the exit
status is 1 when any case differs, 2 on a usage error.

--quick runs only the built-in models (about a minute); --only keeps cases whose name contains SUBSTRING.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BUILTINS = [
    "demo",
    "gemm:M=64,N=96,K=80",
    "gemm:M=1,N=300,K=257",
    "conv:H=14,W=14,C=32,K=64,R=3,S=3,pad=1",
    "conv:H=28,W=28,C=16,K=24,R=3,S=3,stride=2,pad=1",
    "conv:H=7,W=7,C=64,K=64,R=1,S=1",
    "llm:layers=1,hidden=64,heads=4,kv_heads=2,ffn=128,vocab=100",
]
PRECISIONS = ["fp32", "fp16", "int8"]
# The micro-models also run on presets whose scratchpads or arrays differ from edge's: gemmini shares the
# input and weight scratchpad, tpu-v1 has a large int8-only array (both int8 only), datacenter is large.
EXTRA_CONFIGS = [("gemmini", ["int8"]), ("tpu-v1", ["int8"]), ("datacenter", PRECISIONS)]
# Report keys that depend on when, how fast, with which build or with which command line a run happened.
VOLATILE_KEY = re.compile(r"seconds|wall|^command$|^version$|timestamp|^date$|^arguments$")
TIMEOUT_S = 1800
# Arguments an exported model needs (its dynamic dimensions bound; scripts/export_models.py).
MODEL_ARGS = {"bert_small_dyn.onnx": ["--input-shape", "input=1x128x768"]}


def strip_volatile(x):
    if isinstance(x, dict):
        return {k: strip_volatile(v) for k, v in x.items() if not VOLATILE_KEY.search(k)}
    if isinstance(x, list):
        return [strip_volatile(v) for v in x]
    return x


def first_json_difference(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'old' if k in a else 'new'}"
            d = first_json_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        if list(a) != list(b):
            return f"{path}: keys in another order"
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} elements"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_json_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}"


def first_text_difference(a, b):
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}: {x[:90]!r} vs {y[:90]!r}"
    if len(la) != len(lb):
        return f"{len(la)} vs {len(lb)} lines"
    return None


def run(binary, args, cwd):
    try:
        p = subprocess.run([binary] + args, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                           env=dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1"))
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", "", ""


def normalize(text, binary):
    # Wall-clock figures in console lines ("compile 0.123 s", "in 0.456 s") vary from run to run.
    text = text.replace(os.path.abspath(binary), "NPUSIM").replace(binary, "NPUSIM")
    return re.sub(r"\d+\.\d+ s\b", "T s", text)


def compare_files(old_dir, new_dir, old_bin, new_bin):
    """The first difference between the files the two runs wrote (None when they are identical)."""
    names = sorted({os.path.relpath(os.path.join(d, f), root)
                    for root in (old_dir, new_dir) for d, _, fs in os.walk(root) for f in fs})
    for name in names:
        a, b = os.path.join(old_dir, name), os.path.join(new_dir, name)
        if not os.path.exists(a) or not os.path.exists(b):
            return f"{name}: written by {'old' if os.path.exists(a) else 'new'} only"
        if name.endswith(".json"):
            with open(a) as fa, open(b) as fb:
                try:
                    ja, jb = json.load(fa), json.load(fb)
                except json.JSONDecodeError as e:
                    return f"{name}: not JSON ({e})"
            d = first_json_difference(strip_volatile(ja), strip_volatile(jb))
        elif name.endswith(".yaml"):
            with open(a) as fa, open(b) as fb:
                d = first_text_difference(normalize(fa.read(), old_bin), normalize(fb.read(), new_bin))
        else:
            with open(a, "rb") as fa, open(b, "rb") as fb:
                ba, bb = fa.read(), fb.read()
            d = None
            if ba != bb:
                at = next((i for i, (x, y) in enumerate(zip(ba, bb)) if x != y), min(len(ba), len(bb)))
                d = f"{len(ba)} vs {len(bb)} bytes, first difference at byte {at}"
        if d:
            return f"{name}: {d}"
    return None


def check_case(case, old_bin, new_bin, work):
    name, args, expected = case
    dirs = []
    results = []
    for tag, binary in (("old", old_bin), ("new", new_bin)):
        d = os.path.join(work, re.sub(r"[^A-Za-z0-9_.=-]+", "_", name), tag)
        os.makedirs(d, exist_ok=True)
        if "--outputs" in args:
            os.makedirs(os.path.join(d, "out"), exist_ok=True)
        dirs.append(d)
        results.append(run(binary, args, d))
    (rc_a, out_a, err_a), (rc_b, out_b, err_b) = results
    if rc_a != rc_b:
        return name, f"exit {rc_a} vs {rc_b}: {(err_a or err_b).strip()[:160]}"
    for what, a, b in (("stdout", out_a, out_b), ("stderr", err_a, err_b)):
        d = first_text_difference(normalize(a, old_bin), normalize(b, new_bin))
        if d:
            return name, f"{what} {d}"
    if rc_a == 0:
        # A run that wrote nothing proves nothing: each command's files must be there.
        for d, tag in zip(dirs, ("old", "new")):
            for f in expected:
                path = os.path.join(d, f)
                if not os.path.exists(path) or (os.path.isdir(path) and not os.listdir(path)):
                    return name, f"{tag} wrote no {f}"
    d = compare_files(dirs[0], dirs[1], old_bin, new_bin)
    if d:
        return name, d
    return name, None if rc_a == 0 else f"(both exit {rc_a}: {err_a.strip()[:100]})"


def cases(models_dir, quick, functional_max_mb):
    models = [(m, "edge", PRECISIONS, True) for m in BUILTINS]
    models += [(m, cfg, ps, True) for cfg, ps in EXTRA_CONFIGS for m in BUILTINS if not m.startswith("llm:")]
    if not quick and models_dir and os.path.isdir(models_dir):
        for f in sorted(os.listdir(models_dir)):
            if f.endswith(".onnx"):
                path = os.path.join(models_dir, f)
                models.append((path, "edge", PRECISIONS, os.path.getsize(path) <= functional_max_mb * 2**20))
    out = []
    for model, cfg, precisions, functional in models:
        label = os.path.basename(model)
        for p in precisions:
            base = [model, "--config", cfg, "--precision", p, "-q"] + MODEL_ARGS.get(label, [])
            tag = f"{label} {cfg} {p}"
            out.append((f"{tag} run", ["run"] + base + ["--report", "report.json", "--mapping-out", "mapping.yaml"],
                        ["report.json", "mapping.yaml"]))
            out.append((f"{tag} compile", ["compile"] + base + ["-o", "prog.npu"], ["prog.npu"]))
            if functional:
                out.append((f"{tag} functional", ["run"] + base + ["--functional", "--outputs", "out"], ["out"]))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("models_dir", nargs="?", default="/work/tmp/models")
    ap.add_argument("--quick", action="store_true", help="built-in models only")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--keep", help="write the outputs under this directory and keep them")
    ap.add_argument("--functional-max-mb", type=float, default=16)
    ap.add_argument("--only", default="")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    for b in (a.old, a.new):
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            print(f"check_identical: '{b}' is not an executable", file=sys.stderr)
            return 2
    if a.models_dir and not os.path.isdir(a.models_dir) and not a.quick:
        print(f"check_identical: models folder '{a.models_dir}' does not exist", file=sys.stderr)
        return 2
    old, new = os.path.abspath(a.old), os.path.abspath(a.new)
    todo = [c for c in cases(a.models_dir, a.quick, a.functional_max_mb) if a.only in c[0]]
    work = a.keep or tempfile.mkdtemp(prefix="check_identical.")
    differ = 0
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            for name, diff in pool.map(lambda c: check_case(c, old, new, work), todo):
                same = diff is None or diff.startswith("(both")
                differ += not same
                print(f"{'same' if same else 'DIFF'}  {name}{'' if diff is None else '  ' + diff}", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{len(todo) - differ} of {len(todo)} cases identical" + (f", {differ} differ" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
