#!/usr/bin/python3
"""Exports the tiny models the pass tests read: the exact op sequences torch.onnx.export emits at
opset 13 for LayerNorm, GELU, Hardswish and SiLU (which recognize_patterns must find), plus a small
CNN for the whole pipeline. Run with /usr/bin/python3 (torch 1.13); writes next to this script.
Weights are seeded so the files are reproducible."""
import os
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def export(model, example, name, **kw):
    model.eval()
    torch.onnx.export(model, example, os.path.join(HERE, name), opset_version=13,
                      input_names=["x"], output_names=["y"], do_constant_folding=False, **kw)


class LinearLnGelu(torch.nn.Module):
    """nn.Linear on a 3-D input (MatMul + Add), LayerNorm, GELU: a transformer MLP in miniature."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.act(self.ln(self.fc(x)))


class ConvHswishSilu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.hs = torch.nn.Hardswish()
        self.conv2 = torch.nn.Conv2d(8, 8, 1)
        self.si = torch.nn.SiLU()

    def forward(self, x):
        return self.si(self.conv2(self.hs(self.conv(x))))


class SmallCnn(torch.nn.Module):
    """conv-bn-relu6, a residual block, global pool, flatten (x.view: Shape/Gather/Concat/Reshape) and fc."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.b2 = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)
        for bn in (self.b1, self.b2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        a = torch.nn.functional.relu6(self.b1(self.c1(x)))
        b = torch.relu(self.b2(self.c2(a)) + a)
        p = torch.nn.functional.adaptive_avg_pool2d(b, 1)
        return torch.softmax(self.fc(p.view(p.size(0), -1)), dim=-1)


if __name__ == "__main__":
    torch.manual_seed(0)
    export(LinearLnGelu(), torch.randn(2, 4, 16), "linear_ln_gelu_op13.onnx")
    export(ConvHswishSilu(), torch.randn(1, 3, 6, 6), "conv_hswish_silu_op13.onnx")
    cnn = SmallCnn()
    export(cnn, torch.randn(1, 3, 8, 8), "small_cnn_op13.onnx")
    # The same network with its BatchNormalization nodes kept (torch folds them in plain eval export).
    export(cnn, torch.randn(1, 3, 8, 8), "small_cnn_bn_op13.onnx", training=torch.onnx.TrainingMode.PRESERVE)
