#!/usr/bin/env python3
"""A block's layer scale and residual in its project GEMM's epilogue, end to end (docs/backend.md, "A block's
layer scale and residual in the project GEMM's epilogue"): runs a model functionally as npusim fuses it (the
default) and again with `placement: vector` imposed on each fused Mul and Add (the same mapping otherwise: the
first run's --mapping-out), which makes the back end lower them layer by layer. Checks:

- the fused run has at least --min-fused MatMuls whose Mul (layer scale) and Add (residual) are in the report
  as placement "fused", fused_into the MatMul, in the fusion group "project_tail:MATMUL", the MatMul's
  description naming them;
- the outputs of both runs are identical bit for bit;
- the fused run takes fewer cycles and moves fewer DRAM bytes;
- with --no-fusion nothing is fused;
- re-imposing the fused run's --mapping-out reproduces it (the same fused layers, the same cycles).

`--make-small DIR` first writes DIR/convnext_blocks.onnx: two torchvision ConvNeXt blocks (CNBlock: 7x7
depthwise conv, permute, LayerNorm, Linear 4x, GELU, Linear, layer scale, permute, residual) over a 13x11 map of
32 channels, the layer scales random (torchvision's 1e-6 would hide the branch), and checks that model.

Usage: check_project_tail.py NPUSIM MODEL.onnx|--make-small DIR CONFIG.yaml PRECISION [--min-fused N]
"""
import argparse
import os
import sys
import tempfile

from fusion_runs import differing_outputs, dram_bytes, run_variants
from random_inputs import write_random_inputs


def make_small(folder):
    import torch
    from torchvision.models.convnext import CNBlock
    torch.manual_seed(5)
    blocks = torch.nn.Sequential(CNBlock(32, 1e-6, 0.0), CNBlock(32, 1e-6, 0.0)).eval()
    with torch.no_grad():
        for b in blocks:
            b.layer_scale.copy_(torch.rand_like(b.layer_scale) + 0.25)
    path = os.path.join(folder, "convnext_blocks.onnx")
    torch.onnx.export(blocks, torch.randn(1, 32, 13, 11), path, input_names=["x"], output_names=["y"],
                      opset_version=17)
    return path


def tails(report):
    """{Mul or Add name: the MatMul whose epilogue runs it}."""
    return {l["name"]: l["fused_into"] for l in report["layers"]
            if l.get("fusion_group", "").startswith("project_tail:") and l.get("fused_into")}


def unfuse(fused):
    """Mapping lines that run the fused run's layer scales and residuals apart: placement: vector."""
    members = set(tails(fused))
    return lambda name, line: line.replace("}", ", placement: vector}", 1) if name in members else line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-fused", type=int, default=1)
    a = ap.parse_args()
    if a.make_small:
        os.makedirs(a.make_small, exist_ok=True)
        a.model = make_small(a.make_small)
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        write_random_inputs(a.model, ind)
        common = [a.model, "--config", a.config, "--precision", a.precision, "-q"]
        reports, outputs = run_variants(a.npusim, common, tmp, ind, unfuse, functional=("fused", "unfused", "off"))
        ok = True
        fused = tails(reports["fused"])
        matmuls = set(fused.values())
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        dram = {w: dram_bytes(r) for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(matmuls)} MatMul(s) run their layer scale and residual; {cycles['fused']} "
              f"cycles, {dram['fused']} DRAM bytes against {cycles['unfused']}, {dram['unfused']} layer by layer "
              f"({cycles['off']} with --no-fusion)")
        if len(matmuls) < a.min_fused or len(fused) != 2 * len(matmuls):
            print(f"FAIL: {name}: {len(matmuls)} MatMuls with {len(fused)} fused layers, want >= {a.min_fused} "
                  f"with a Mul and an Add each")
            ok = False
        layers = {l["name"]: l for l in reports["fused"]["layers"]}
        for member, mm in fused.items():
            l = layers[member]
            if l.get("cycles", 0) != 0 or l["placement"] != "fused" or not l.get("on_chip_input"):
                print(f"FAIL: {name}: {member} is not a fused row with 0 cycles naming its input on chip")
                ok = False
            if f"'{member}'" not in layers[mm]["mapping"]["description"]:
                print(f"FAIL: {name}: {mm}'s description does not name {member}")
                ok = False
        if tails(reports["unfused"]) or tails(reports["off"]):
            print(f"FAIL: {name}: placement: vector or --no-fusion left a layer scale or residual fused")
            ok = False
        if cycles["fused"] >= cycles["unfused"] or dram["fused"] >= dram["unfused"]:
            print(f"FAIL: {name}: the fusion saved no cycles or no DRAM bytes")
            ok = False
        diff = differing_outputs(outputs["fused"], outputs["unfused"])
        for f in sorted(outputs["unfused"]):
            print(f"  {f}: {'DIFFERENT' if f in diff else 'identical'} bits")
        ok &= not diff
        again = reports["again"]
        if tails(again) != fused or again["total_cycles"] != cycles["fused"]:
            print(f"FAIL: {name}: re-imposing the fused run's --mapping-out gave {len(tails(again))} fused layers "
                  f"and {again['total_cycles']} cycles, not the fused run's")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
