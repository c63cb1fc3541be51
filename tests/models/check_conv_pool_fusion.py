#!/usr/bin/env python3
"""Conv -> pool and conv -> depthwise conv fusion with line-buffer tiling, end to end (docs/backend.md,
"Conv -> pool fusion", "Conv -> depthwise conv fusion"): runs a model functionally as npusim fuses it (the
default) and again with the same mapping (the first run's --mapping-out) but with `on_chip: false` imposed
on each fused conv, which makes the back end lower those pairs layer by layer, everything else unchanged.
Checks (--min-following: so many fused convs run bands down a line buffer of several bands; --min-project: so
many run the project conv after their depthwise reader in the same band loop, reading the depthwise rows on chip;
--min-pieces: so many of those emit a band's depthwise conv in pieces between the next band's conv tiles):

- the fused run has at least --min-fused conv layers with a reader (a pool, or a depthwise conv) fused
  into them, each reader in the report as placement "fused", fused_into its conv, naming its input on
  chip, both in the fusion group "conv_pool:CONV" (or "conv_dwconv:CONV"), one of them runs in at
  least --min-bands bands, and at least --min-resident of them keep their weights resident in the
  weight scratchpad across their bands;
- the outputs of both runs are identical bit for bit;
- the fused run takes fewer cycles, and its report counts each conv output among the tensors on chip and
  its bytes (written and read back) in the DRAM bytes saved;
- with --no-fusion no pool is fused (and, for fp32, the outputs agree with the fused run's within 1e-5
  of the largest magnitude: --no-fusion also unfolds the other fusions);
- re-imposing the fused run's --mapping-out reproduces it (the same fused layers, the same cycles).

`--expand-act hardswish` gives those expansions MobileNetV3's HardSwish instead (in int8 a table epilogue
whose VEC lut writes the line buffer row by row), `--expand-act silu` EfficientNet's SiLU on both convs. `--make-small DIR` first writes DIR/conv_pool.onnx, a small model with the three forms conv -> pool
fusion takes (a 7x7 stride-2 stem into a padded 3x3 stride-2 max pool, a 3x3 conv into a ceil_mode max
pool, a 1x1 conv into a 2x2 average pool), and checks that model. `--make-small-dwconv DIR` writes
DIR/conv_dwconv.onnx instead: two MobileNetV2 blocks (expand 1x1 + ReLU6 -> depthwise 3x3 + ReLU6 ->
project 1x1), the first stride 2 over an odd-sized map (its last window reads a padding row and column at
the bottom and right), the second stride 1 with its residual Add (its input has two readers, so no
residency keeps it on chip before the fusion).

Usage: check_conv_pool_fusion.py NPUSIM MODEL.onnx|--make-small DIR|--make-small-dwconv DIR CONFIG.yaml
                                 PRECISION [--min-fused N] [--min-bands N] [--set KEY=VALUE ...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from random_inputs import write_random_inputs


def make_small(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)

    def init(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [init("w1", (16, 3, 7, 7)), init("b1", (16,)), init("w2", (24, 16, 3, 3)), init("b2", (24,)),
             init("w3", (8, 24, 1, 1)), init("b3", (8,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[3, 3, 3, 3], name="stem"),
        helper.make_node("Relu", ["c1"], ["r1"], name="stem_relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         name="stem_pool"),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("MaxPool", ["c2"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                         name="pool2"),
        helper.make_node("Conv", ["p2", "w3", "b3"], ["c3"], name="conv3"),
        helper.make_node("AveragePool", ["c3"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="pool3"),
    ]
    g = helper.make_graph(nodes, "conv_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 62, 46])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 3])], inits)
    path = os.path.join(folder, "conv_pool.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def make_small_dwconv(folder, act="relu6"):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)

    def init(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits, nodes = [], []
    six = [numpy_helper.from_array(np.array(0.0, np.float32), "zero"), numpy_helper.from_array(np.array(6.0, np.float32), "six")]

    def activation(x, y, name, kind):
        if kind == "relu6":
            nodes.append(helper.make_node("Clip", [x, "zero", "six"], [y], name=f"{name}_relu6"))
        elif kind == "hardswish":
            nodes.append(helper.make_node("HardSwish", [x], [y], name=f"{name}_hardswish"))
        else:  # EfficientNet's SiLU: x * sigmoid(x)
            nodes.append(helper.make_node("Sigmoid", [x], [y + "_s"], name=f"{name}_sigmoid"))
            nodes.append(helper.make_node("Mul", [x, y + "_s"], [y], name=f"{name}_silu"))

    def block(x, k, cin, hidden, cout, stride, residual):
        inits.extend([init(f"we{k}", (hidden, cin, 1, 1)), init(f"be{k}", (hidden,), 0.1),
                      init(f"wd{k}", (hidden, 1, 3, 3)), init(f"bd{k}", (hidden,), 0.1),
                      init(f"wp{k}", (cout, hidden, 1, 1)), init(f"bp{k}", (cout,), 0.1)])
        nodes.append(helper.make_node("Conv", [x, f"we{k}", f"be{k}"], [f"e{k}"], name=f"expand{k}"))
        activation(f"e{k}", f"er{k}", f"expand{k}", act)
        nodes.append(helper.make_node("Conv", [f"er{k}", f"wd{k}", f"bd{k}"], [f"d{k}"], group=hidden,
                                      strides=[stride, stride], pads=[1, 1, 1, 1], name=f"dw{k}"))
        activation(f"d{k}", f"dr{k}", f"dw{k}", "silu" if act == "silu" else "relu6")
        nodes.append(helper.make_node("Conv", [f"dr{k}", f"wp{k}", f"bp{k}"], [f"p{k}"], name=f"project{k}"))
        if not residual:
            return f"p{k}"
        nodes.append(helper.make_node("Add", [x, f"p{k}"], [f"y{k}"], name=f"add{k}"))
        return f"y{k}"

    y1 = block("x", 1, 8, 48, 16, 2, False)
    y2 = block(y1, 2, 16, 64, 16, 1, True)
    nodes.append(helper.make_node("Identity", [y2], ["y"], name="out"))
    g = helper.make_graph(nodes, "conv_dwconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 41, 31])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 21, 16])], inits + six)
    path = os.path.join(folder, "conv_dwconv.onnx" if act == "relu6" else f"conv_dwconv_{act}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13 if act == "relu6" else 14)]), path)
    return path


def run(npusim, args):
    p = subprocess.run([npusim, "run"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL: npusim run {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
        sys.exit(1)


def fused_pools(report):
    """The report's line-buffer readers (pools, depthwise convs) fused into a conv: {reader name: conv name}."""
    ops = {l["name"]: l["op"] for l in report["layers"]}
    return {l["name"]: l["fused_into"] for l in report["layers"]
            if l.get("placement") == "fused" and l["op"] in ("MaxPool", "AveragePool", "Conv")
            and ops.get(l.get("fused_into")) == "Conv"}


def load_outputs(folder):
    return {f: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("--make-small-dwconv", metavar="DIR")
    ap.add_argument("--expand-act", choices=["relu6", "hardswish", "silu"], default="relu6",
                    help="--make-small-dwconv: the expansions' activation (MobileNetV2's ReLU6, MobileNetV3's HardSwish: "
                         "in int8 a table epilogue, VEC lut; EfficientNet's SiLU, the depthwise convs' too)")
    ap.add_argument("--min-side-slots", type=int, default=0,
                    help="at least this many fused convs place their depthwise reader's epilogue slots above the line "
                         "buffer (its sums and they overfill the accumulator)")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-fused", type=int, default=1)
    ap.add_argument("--min-bands", type=int, default=1,
                    help="at least one fused conv runs in this many bands or more (halo rows kept between them)")
    ap.add_argument("--min-following", type=int, default=0,
                    help="at least this many fused convs run bands that follow the band before in a line buffer "
                         "of more rows than one band reads (their halo rows stay where they lie)")
    ap.add_argument("--min-resident", type=int, default=0,
                    help="at least this many fused convs keep their weights resident across their bands")
    ap.add_argument("--min-project", type=int, default=0,
                    help="at least this many fused convs run the project conv after their depthwise reader in the same "
                         "band loop (an inverted-residual block: the depthwise output never touches DRAM)")
    ap.add_argument("--min-pieces", type=int, default=0,
                    help="at least this many fused convs with their project conv in the band loop emit each band's "
                         "depthwise conv in pieces between the next band's conv tiles (the vector unit's queue not "
                         "holding the array's next tiles behind a whole band), the search's choice")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration override for every run (a small scratchpad: several bands)")
    a = ap.parse_args()
    if a.make_small:
        os.makedirs(a.make_small, exist_ok=True)
        a.model = make_small(a.make_small)
    if a.make_small_dwconv:
        os.makedirs(a.make_small_dwconv, exist_ok=True)
        a.model = make_small_dwconv(a.make_small_dwconv, a.expand_act)
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        write_random_inputs(a.model, ind)
        common = [a.model, "--config", a.config, "--precision", a.precision, "-q"]
        for kv in a.set:
            common += ["--set", kv]
        fused_map = os.path.join(tmp, "fused.yaml")
        unfused_map = os.path.join(tmp, "unfused.yaml")
        reports = {}
        for what in ("fused", "unfused", "off"):
            out = os.path.join(tmp, what)
            report = os.path.join(tmp, what + ".json")
            extra = {"fused": ["--mapping-out", fused_map], "unfused": ["--mapping", unfused_map],
                     "off": ["--no-fusion"]}[what]
            run(a.npusim, common + ["--functional", "--inputs", ind, "--outputs", out, "--report", report] + extra)
            reports[what] = json.load(open(report))
            if what == "fused":
                convs = set(fused_pools(reports["fused"]).values())
                with open(fused_map) as f, open(unfused_map, "w") as g:
                    for line in f:
                        if any(f"{{name: {v}, " in line or f"{{name: {v}}}" in line for v in convs):
                            # on_chip: false instead of the conv's band loop (fusion_runs.on_chip_off)
                            line = re.sub(r"band_loop: \{[^}]*\}", "on_chip: false", line, count=1)
                        g.write(line)
        ok = True
        pools = fused_pools(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(pools)} reader(s) fused into their conv; {cycles['fused']} cycles against "
              f"{cycles['unfused']} layer by layer ({cycles['off']} with --no-fusion)")
        if len(pools) < a.min_fused:
            print(f"FAIL: {name}: {len(pools)} fused conv -> reader pairs, want >= {a.min_fused}")
            ok = False
        layers = {l["name"]: l for l in reports["fused"]["layers"]}
        saved = 0
        for pool, conv in pools.items():
            l = layers[pool]
            if not l.get("on_chip_input") or l.get("cycles", 0) != 0:
                print(f"FAIL: {name}: the fused reader {pool} does not name its input on chip with 0 cycles")
                ok = False
            saved += l.get("on_chip_bytes_saved", 0)
            group = f"{'conv_dwconv' if l['op'] == 'Conv' else 'conv_pool'}:{conv}"
            if l.get("fusion_group") != group or layers[conv].get("fusion_group") != group:
                print(f"FAIL: {name}: {pool} and {conv} are not in the fusion group {group}")
                ok = False
            if "fused with the" not in layers[conv]["mapping"]["description"]:
                print(f"FAIL: {name}: the conv {conv}'s mapping does not describe the fusion")
                ok = False
        bands = [int(m.group(1)) for conv in set(pools.values())
                 for m in [re.search(r"(?:pooled|output) rows per band, (\d+) bands", layers[conv]["mapping"]["description"])] if m]
        # A band that follows the one before in the buffer moves no halo rows: fewer moves than bands after
        # the first.
        following = [conv for conv in set(pools.values())
                     for m in [re.search(r"(\d+) bands\): .* \((\d+) of the bands moving them",
                                         layers[conv]["mapping"]["description"])]
                     if m and int(m.group(2)) < int(m.group(1)) - 1]
        side = [conv for conv in set(pools.values()) if "epilogue slots" in layers[conv]["mapping"]["description"]]
        if len(side) < a.min_side_slots:
            print(f"FAIL: {name}: {len(side)} fused convs place their reader's epilogue slots above the line buffer, "
                  f"want >= {a.min_side_slots}")
            return 1
        if len(following) < a.min_following:
            print(f"FAIL: {name}: {len(following)} fused convs run bands that follow the band before in their line "
                  f"buffer, want >= {a.min_following}")
            return 1
        if max(bands, default=0) < a.min_bands:
            print(f"FAIL: {name}: the fused convs run in {bands} bands, want one with >= {a.min_bands}")
            ok = False
        # The project convs run in their block's band loop: rows fused into the conv whose depthwise reader is
        # fused too, reading its output on chip, the conv's description naming them.
        projects = {r: conv for r, conv in pools.items()
                    if "GEMM 1x1" in layers[r]["mapping"]["description"]
                    and f"the project conv '{r}' in the same band loop" in layers[conv]["mapping"]["description"]}
        if len(projects) < a.min_project:
            print(f"FAIL: {name}: {len(projects)} fused convs run their project conv in the band loop, "
                  f"want >= {a.min_project}")
            ok = False
        # A band's depthwise conv in pieces between the next band's conv tiles, at least one VEC dwconv a band.
        pieces = []
        for conv in set(projects.values()):
            m = re.search(r"the depthwise conv in (\d+) VEC dwconvs for (\d+) bands, each band's emitted in pieces "
                          r"between the next band's conv tiles", layers[conv]["mapping"]["description"])
            if m and int(m.group(1)) >= int(m.group(2)):
                pieces.append(conv)
        if len(pieces) < a.min_pieces:
            print(f"FAIL: {name}: {len(pieces)} fused convs run a band's depthwise conv in pieces between the next "
                  f"band's conv tiles, want >= {a.min_pieces}")
            ok = False
        # With the project conv in the band loop the depthwise sums take one accumulator side: a band's rows x
        # output width x channels x 4 bytes (int32 or fp32 sums), not two such slots.
        for r, conv in projects.items():
            d = layers[conv]["mapping"]["description"]
            m = re.search(r"in bands of \d+ output rows \((\d+) output rows per band", d)
            s = re.search(r"the depthwise sums of a band \((\d+) bytes\) in one accumulator side", d)
            dw_out = [int(v) for v in layers[[x for x, c in pools.items() if c == conv and x != r][0]]["output_shape"]
                      .split("x")]
            want_sums = int(m.group(1)) * dw_out[3] * dw_out[1] * 4 if m else -1
            if not s or int(s.group(1)) != want_sums:
                print(f"FAIL: {name}: {conv}: the depthwise sums of a band not in one accumulator side of "
                      f"{want_sums} bytes: {d}")
                ok = False
        resident = [conv for conv in set(pools.values())
                    if "weights loaded once, resident" in layers[conv]["mapping"]["description"]]
        if len(resident) < a.min_resident:
            print(f"FAIL: {name}: {len(resident)} fused convs keep their weights resident across their bands, "
                  f"want >= {a.min_resident}")
            ok = False
        if fused_pools(reports["unfused"]) or fused_pools(reports["off"]):
            print(f"FAIL: {name}: on_chip: false or --no-fusion left a reader fused")
            ok = False
        if cycles["fused"] >= cycles["unfused"]:
            print(f"FAIL: {name}: the fusion did not save cycles")
            ok = False
        fu = {w: r["fusion"] for w, r in reports.items()}
        # A reader whose input residency keeps on chip layer by layer too (a project conv reading the depthwise
        # output in place) adds no tensor on chip, and only the bytes its fusion saves beyond that.
        unfused = {l["name"]: l for l in reports["unfused"]["layers"]}
        already = [r for r in pools if unfused[r].get("on_chip_input") == layers[r]["on_chip_input"]]
        more = len(pools) - len(already)
        saved_more = saved - sum(unfused[r].get("on_chip_bytes_saved", 0) for r in already)
        if fu["fused"]["tensors_on_chip"] != fu["unfused"]["tensors_on_chip"] + more or \
                fu["fused"]["dram_bytes_saved"] != fu["unfused"]["dram_bytes_saved"] + saved_more or saved <= 0:
            print(f"FAIL: {name}: fusion section {fu['fused']} against {fu['unfused']} layer by layer: want "
                  f"{more} more tensors on chip and {saved_more} more bytes saved")
            ok = False
        got, want, off = (load_outputs(os.path.join(tmp, w)) for w in ("fused", "unfused", "off"))
        for f in want:
            same = got[f].shape == want[f].shape and got[f].tobytes() == want[f].tobytes()
            print(f"  {f}: {'identical' if same else 'DIFFERENT'} bits")
            ok &= same
            if a.precision == "fp32":
                scale = max(float(np.max(np.abs(off[f]))), 1e-30)
                err = float(np.max(np.abs(got[f].astype(np.float64) - off[f]))) / scale
                print(f"  {f}: max error against --no-fusion {err:.2e} of the largest magnitude")
                if err > 1e-5:
                    print(f"FAIL: {name}: {f} differs from the --no-fusion output by {err:.2e}")
                    ok = False
        report = os.path.join(tmp, "again.json")
        run(a.npusim, common + ["--mapping", fused_map, "--report", report])
        again = json.load(open(report))
        if fused_pools(again) != pools or again["total_cycles"] != cycles["fused"]:
            print(f"FAIL: {name}: re-imposing the fused run's --mapping-out gave {len(fused_pools(again))} fused "
                  f"readers and {again['total_cycles']} cycles, not the fused run's")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
