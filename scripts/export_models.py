#!/usr/bin/env python3
"""Export the reference models npusim is measured on to ONNX (opset 13), without downloading anything.

Usage: export_models.py OUTDIR NAME...

NAME is one of: resnet50, resnet18, resnet34, resnet101, alexnet, mobilenet_v2, mobilenet_v3_small, efficientnet_b0, densenet121, vit_b_16,
shufflenet_v2_x1_0, convnext_tiny, regnet_y_400mf, googlenet, bert_base, bert_small, bert_small_dyn, vit_b_16_anybatch, bert_base_anybatch, bert_small_anybatch,
resnet18_qdq, mobilenet_v2_qdq (or "all").
  resnet50, resnet18, resnet34, resnet101, alexnet, mobilenet_v2, mobilenet_v3_small, efficientnet_b0,
              densenet121, vit_b_16, shufflenet_v2_x1_0, convnext_tiny, regnet_y_400mf, googlenet  torchvision's
              architectures,
              input "input" 1x3x224x224
  resnet18_qdq, mobilenet_v2_qdq  the same architectures pre-quantized with torch's own tooling
              (torchvision.models.quantization, eager post-training static quantization with the qnnpack
              default qconfig: per-tensor int8 weights, uint8 activations; calibrated on 4 batches of 4
              random inputs) and exported in QDQ form (QuantizeLinear/DequantizeLinear around float ops)
  bert_base   BERT-base-shaped encoder: 12 post-LN layers, hidden 768, 12 heads, FFN 3072, GELU, on a
              1x128x768 embedding input "input" (torch.nn.TransformerEncoder; no token embedding lookup)
  bert_small  the same layer with 2 layers (a quick test model)
  vit_b_16_anybatch, bert_base_anybatch, bert_small_anybatch  the same models traced with a symbolic batch
              and declared at batch 1, so that `npusim run --batch N` follows the batch their attention folds
              into the heads (a trace at batch 1 writes it as a constant shape); ONNX's own shape inference
              does not size their attention (its data propagation stops at a Div), npusim's import does
  bert_small_dyn  bert_small with a dynamic sequence length: input "input" 1 x seq x 768, dim_param "seq"
              (bind it with --dynamic seq=... or --input-shape input=1x128x768; docs/dynamic.md)
Weights are random (weights=None) with a fixed seed, so the same command always writes the same model.
BatchNorm running statistics are re-estimated on random inputs before export: with random init and the
default statistics (mean 0, var 1) activations shrink layer after layer until they vanish, which makes
numerical comparisons meaningless. LayerNorm gains and biases get small random perturbations (a
trained model's are not all 1 and 0), and every encoder layer gets its own weights (TransformerEncoder
deep-copies one layer, and the exporter would otherwise store one set of weights behind Identity nodes,
a 28 MB "BERT-base"). Each model is written to OUTDIR/NAME.onnx atomically (NAME.onnx.PID.part, then a
rename), so concurrent exporters never see a half-written file; the exported path is printed.
"""
import os
import sys

import onnx
import torch
import torch.nn as nn

SEED = 0


def recalibrate_batchnorm(model, shape, batches=4):
    """Re-estimate every BatchNorm's running statistics on random inputs (cumulative average)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*shape))
    model.eval()


def perturb_layernorms(model, scale=0.1):
    """LayerNorm weight = 1 + N(0, scale²), bias = N(0, scale²), as after training."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.copy_(1.0 + scale * torch.randn_like(m.weight))
                m.bias.copy_(scale * torch.randn_like(m.bias))


def image_model(name):
    import torchvision.models as tvm
    ctor = {"resnet50": tvm.resnet50, "resnet18": tvm.resnet18, "resnet34": tvm.resnet34,
            "resnet101": tvm.resnet101, "alexnet": tvm.alexnet, "mobilenet_v2": tvm.mobilenet_v2,
            "vit_b_16": tvm.vit_b_16, "efficientnet_b0": tvm.efficientnet_b0,
            "mobilenet_v3_small": tvm.mobilenet_v3_small,
            "densenet121": tvm.densenet121, "shufflenet_v2_x1_0": tvm.shufflenet_v2_x1_0,
            "convnext_tiny": tvm.convnext_tiny, "regnet_y_400mf": tvm.regnet_y_400mf,
            "googlenet": tvm.googlenet}[name]
    # GoogLeNet without its training-only auxiliary classifiers (and without scipy's truncated-normal init)
    extra = {"googlenet": {"aux_logits": False, "init_weights": False}}.get(name, {})
    model = ctor(weights=None, **extra)
    recalibrate_batchnorm(model, (8, 3, 224, 224))
    perturb_layernorms(model)
    if name == "vit_b_16":
        # torchvision zero-initialises ViT's classifier head (and class token) for fine-tuning, which makes
        # every output exactly 0 and any numerical comparison vacuous; trained ones are not zero.
        with torch.no_grad():
            nn.init.normal_(model.heads.head.weight, std=0.02)
            nn.init.normal_(model.heads.head.bias, std=0.02)
            nn.init.normal_(model.class_token, std=0.02)
    return model, torch.randn(1, 3, 224, 224)


def quantized_image_model(name):
    """torchvision's quantizable architecture, BatchNorm re-estimated, fused, calibrated and converted."""
    import torch.ao.quantization as tq
    import torchvision.models.quantization as tvq
    torch.backends.quantized.engine = "qnnpack"  # Debian's torch has no fbgemm
    model = {"resnet18_qdq": tvq.resnet18, "mobilenet_v2_qdq": tvq.mobilenet_v2}[name](weights=None, quantize=False)
    recalibrate_batchnorm(model, (8, 3, 224, 224))
    model.fuse_model()
    model.qconfig = tq.get_default_qconfig("qnnpack")
    tq.prepare(model, inplace=True)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(4, 3, 224, 224))
    tq.convert(model, inplace=True)
    return model, torch.randn(1, 3, 224, 224)


class Encoder(nn.Module):
    """A BERT-base-shaped encoder on embeddings (no embedding lookup, which is a Gather on the host)."""

    def __init__(self, layers, hidden=768, heads=12, ffn=3072):
        super().__init__()
        # GELU passed as a function torch does not recognise keeps the encoder off its fused inference
        # fast path (aten::_transformer_encoder_layer_fwd), which ONNX cannot express.
        layer = nn.TransformerEncoderLayer(d_model=hidden, nhead=heads, dim_feedforward=ffn, dropout=0.0,
                                           activation=lambda x: nn.functional.gelu(x), batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        # The clones share their initial values; give each layer its own, as BERT's are.
        for l in self.encoder.layers:
            l.self_attn._reset_parameters()  # in_proj and biases; out_proj's weight is left alone
            l.self_attn.out_proj.reset_parameters()
            l.linear1.reset_parameters()
            l.linear2.reset_parameters()
        perturb_layernorms(self)

    def forward(self, x):
        return self.encoder(x)


def encoder_model(name):
    layers = {"bert_base": 12, "bert_small": 2, "bert_small_dyn": 2}[name]
    model = Encoder(layers).eval()
    return model, torch.randn(1, 128, 768)


MODELS = {"resnet50": image_model, "resnet18": image_model, "resnet34": image_model, "resnet101": image_model,
          "alexnet": image_model,
          "mobilenet_v2": image_model,
          "efficientnet_b0": image_model, "densenet121": image_model, "mobilenet_v3_small": image_model,
          "shufflenet_v2_x1_0": image_model, "convnext_tiny": image_model, "regnet_y_400mf": image_model,
          "googlenet": image_model,
          "vit_b_16": image_model, "bert_base": encoder_model, "bert_small": encoder_model,
          "bert_small_dyn": encoder_model,
          "vit_b_16_anybatch": image_model, "bert_base_anybatch": encoder_model,
          "bert_small_anybatch": encoder_model,
          "resnet18_qdq": quantized_image_model, "mobilenet_v2_qdq": quantized_image_model}


def export(name, outdir):
    torch.manual_seed(SEED)
    model, example = MODELS[name](name.removesuffix("_anybatch"))
    model.eval()
    path = os.path.join(outdir, name + ".onnx")
    part = f"{path}.{os.getpid()}.part"  # per process: two tests may export the same model at once
    # Tracing with autograd on (parameters require grad) also keeps nn.MultiheadAttention off its fused
    # inference path (aten::_native_multi_head_attention); the exported graph is the same arithmetic.
    # Models named *_dyn keep the sequence length (dimension 1) symbolic, as a deployed text model does.
    # *_anybatch: traced with a symbolic batch, then declared at batch 1. PyTorch's attention folds the batch
    # into the heads (view(seq, batch * heads, dim)), which a trace at batch 1 writes as a constant shape
    # nothing can rebatch; traced symbolically, that shape is computed from the input's, and
    # `npusim run --batch N` follows it.
    symbolic_batch = name.endswith("_anybatch")
    dynamic_axes = None
    if name.endswith("_dyn"):
        dynamic_axes = {"input": {1: "seq"}, "output": {1: "seq"}}
    elif symbolic_batch:
        dynamic_axes = {"input": {0: "batch"}, "output": {0: "batch"}}
    with torch.enable_grad():
        torch.onnx.export(model, (example,), part, opset_version=13, input_names=["input"],
                          output_names=["output"], do_constant_folding=True, dynamic_axes=dynamic_axes)
    if symbolic_batch:
        m = onnx.load(part)
        for v in list(m.graph.input) + list(m.graph.output):
            v.type.tensor_type.shape.dim[0].dim_value = 1  # replaces the dim_param "batch"
        onnx.save(m, part)
    os.replace(part, path)
    print(path, flush=True)


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    outdir, names = argv[1], argv[2:]
    if names == ["all"]:
        names = list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"export_models.py: unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}",
              file=sys.stderr)
        return 2
    os.makedirs(outdir, exist_ok=True)
    for n in names:
        export(n, outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
