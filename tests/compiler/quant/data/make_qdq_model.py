#!/usr/bin/env python3
"""Builds the tiny pre-quantized test model with torch's own quantization tooling and exports it to ONNX.

Usage: make_qdq_model.py OUTDIR

Eager-mode post-training static quantization (torch.ao.quantization, x86 default qconfig with the qnnpack engine (Debian's torch has no fbgemm): per-tensor int8 weights,
histogram observers for activations), calibrated on 16 seeded random inputs, then exported with
torch.onnx.export (opset 13). torch writes quantized ops as QuantizeLinear / DequantizeLinear around
float Conv / Gemm nodes (QDQ form) with the weights as int8 initializers. Also writes the test input
(input.npy) and torch's own quantized output (torch_out_codes.npy, int64 codes of the quint8 output,
with its scale and zero point in torch_out_qparams.npy) so the test can compare with torch's int8 kernels.
Deterministic: fixed seeds, so the committed files can be regenerated.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.ao.quantization as tq


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(8, 16, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(16, 10)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.conv2(x))
        x = self.conv3(x)
        x = self.fc(self.flat(self.pool(x)))
        return self.dequant(x)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.backends.quantized.engine = "qnnpack"
    m = Net().eval()
    m.qconfig = tq.get_default_qconfig("qnnpack")
    tq.fuse_modules(m, [["conv1", "relu1"], ["conv2", "relu2"]], inplace=True)
    tq.prepare(m, inplace=True)
    with torch.no_grad():
        for _ in range(16):
            m(torch.randn(1, 3, 16, 16))
    tq.convert(m, inplace=True)
    x = torch.randn(1, 3, 16, 16)
    torch.onnx.export(m, x, os.path.join(out, "qdq_tiny.onnx"), opset_version=13,
                      input_names=["input"], output_names=["output"])
    np.save(os.path.join(out, "input.npy"), x.numpy().astype(np.float32))
    # torch's quantized result before the final dequantize: run all but the DeQuantStub.
    with torch.no_grad():
        q = m.fc(m.flat(m.pool(m.conv3(m.conv2(m.conv1(m.quant(x)))))))
    np.save(os.path.join(out, "torch_out_codes.npy"), q.int_repr().numpy().astype(np.int64))
    np.save(os.path.join(out, "torch_out_qparams.npy"), np.array([q.q_scale(), q.q_zero_point()], dtype=np.float64))


if __name__ == "__main__":
    main()
