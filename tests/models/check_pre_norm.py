#!/usr/bin/env python3
"""A LayerNorm applied in the loads of the GEMM after it, end to end (docs/backend.md, "A LayerNorm in the loads
of the GEMM after it"): runs a model functionally as npusim lowers it (the default) and again with `placement:
vector` imposed on each LayerNorm the first run took into its GEMM's loads (the same mapping otherwise: the
first run's --mapping-out), which makes the back end lower them layer by layer. Checks:

- the default run has at least --min-fused LayerNorms in the report as placement "fused", fused_into their
  GEMM, in the fusion group "pre_norm:GEMM", with no cycles of their own;
- the outputs of both runs are identical bit for bit (--no-fusion changes other fusions' rounding too);
- with --no-fusion or the imposed placements nothing is taken;
- re-imposing the default run's --mapping-out reproduces it (the same LayerNorms taken, the same cycles).

`--make-small DIR` first writes DIR/convnext_blocks.onnx: two torchvision ConvNeXt blocks (CNBlock) over a
40x40 map of 32 channels, and checks that model; pass `--set sram.input.size_kib=64` (after the precision) so
that the LayerNorms' rows are more than the residency planner keeps on chip.

Usage: check_pre_norm.py NPUSIM MODEL.onnx|--make-small DIR CONFIG.yaml PRECISION [--min-fused N] [--set K=V]
"""
import argparse
import os
import sys
import tempfile

from fusion_runs import differing_outputs, run_variants
from random_inputs import write_random_inputs


def make_small(folder):
    import torch
    from torchvision.models.convnext import CNBlock
    torch.manual_seed(7)
    blocks = torch.nn.Sequential(CNBlock(32, 0.5, 0.0), CNBlock(32, 0.5, 0.0)).eval()
    path = os.path.join(folder, "convnext_blocks.onnx")
    torch.onnx.export(blocks, torch.randn(1, 32, 40, 40), path, input_names=["x"], output_names=["y"],
                      opset_version=17)
    return path


def taken(report):
    """{LayerNorm name: the GEMM whose loads apply it}."""
    return {l["name"]: l["fused_into"] for l in report["layers"]
            if l.get("fusion_group", "").startswith("pre_norm:") and l.get("fused_into")}


def unfuse(fused):
    """Mapping lines of the default run's LayerNorms placed on the vector unit: their own lowering."""
    norms = set(taken(fused))
    return lambda name, line: line.replace("}", ", placement: vector}", 1) if name in norms else line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("npusim")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--make-small", metavar="DIR")
    ap.add_argument("config")
    ap.add_argument("precision")
    ap.add_argument("--min-fused", type=int, default=1)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.make_small:
        os.makedirs(a.make_small, exist_ok=True)
        a.model = make_small(a.make_small)
    name = os.path.basename(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        ind = os.path.join(tmp, "in")
        write_random_inputs(a.model, ind)
        common = [a.model, "--config", a.config, "--precision", a.precision, "-q"]
        for s in a.set:
            common += ["--set", s]
        reports, outputs = run_variants(a.npusim, common, tmp, ind, unfuse, functional=("fused", "unfused"))
        ok = True
        fused = taken(reports["fused"])
        cycles = {w: r["total_cycles"] for w, r in reports.items()}
        print(f"{name} {a.precision}: {len(fused)} LayerNorm(s) in their GEMM's loads; {cycles['fused']} cycles "
              f"against {cycles['unfused']} layer by layer ({cycles['off']} with --no-fusion)")
        if len(fused) < a.min_fused:
            print(f"FAIL: {name}: {len(fused)} LayerNorms taken, want >= {a.min_fused}")
            ok = False
        layers = {l["name"]: l for l in reports["fused"]["layers"]}
        for ln, gemm in fused.items():
            l = layers[ln]
            if l.get("cycles", 0) != 0 or l["placement"] != "fused" or not l.get("on_chip_input"):
                print(f"FAIL: {name}: {ln} is not a fused row with 0 cycles naming its input")
                ok = False
        if taken(reports["unfused"]) or taken(reports["off"]):
            print(f"FAIL: {name}: placement: vector or --no-fusion left a LayerNorm in its GEMM's loads")
            ok = False
        diff = differing_outputs(outputs["fused"], outputs["unfused"])
        for f in sorted(outputs["unfused"]):
            print(f"  {f}: {'DIFFERENT' if f in diff else 'identical'} bits")
        ok &= not diff
        again = reports["again"]
        if taken(again) != fused or again["total_cycles"] != cycles["fused"]:
            print(f"FAIL: {name}: re-imposing the default run's --mapping-out gave {len(taken(again))} LayerNorms "
                  f"taken and {again['total_cycles']} cycles, not the default run's")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
