#!/usr/bin/env python3
"""Writes qdq_resblock.onnx: a small residual CNN quantized with torch's own tooling and exported in QDQ
form (QuantizeLinear / DequantizeLinear around float ops), for the pre-quantized-model tests.

Usage: make_qdq_resblock.py OUTDIR

Net (input 1x3x16x16): conv-bn-relu, a ResNet basic block (conv-bn-relu, conv-bn, quantized residual
add, relu), max pool, conv-bn-relu with stride 2, global average pool, linear. Eager-mode
post-training static quantization (torch.ao.quantization, the qnnpack default qconfig: per-tensor int8
weights, histogram observers for uint8 activations), BatchNorm statistics re-estimated on random
inputs first (random init would make activations vanish), calibrated on 16 seeded random inputs,
exported with torch.onnx.export (opset 13). Also writes input.npy (one seeded input). Deterministic.
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
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        self.conv2, self.bn2, self.relu2 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        self.conv3, self.bn3 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.add = nn.quantized.FloatFunctional()
        self.relu3 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv4, self.bn4, self.relu4 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(self.quant(x))))
        y = self.relu2(self.bn2(self.conv2(x)))
        y = self.bn3(self.conv3(y))
        x = self.relu3(self.add.add(y, x))
        x = self.relu4(self.bn4(self.conv4(self.pool(x))))
        return self.dequant(self.fc(torch.flatten(self.gap(x), 1)))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.backends.quantized.engine = "qnnpack"
    m = Net()
    for b in m.modules():
        if isinstance(b, nn.BatchNorm2d):
            b.momentum = None
    m.train()
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(8, 3, 16, 16))
    m.eval()
    tq.fuse_modules(m, [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"], ["conv3", "bn3"],
                        ["conv4", "bn4", "relu4"]], inplace=True)
    m.qconfig = tq.get_default_qconfig("qnnpack")
    tq.prepare(m, inplace=True)
    with torch.no_grad():
        for _ in range(16):
            m(torch.randn(1, 3, 16, 16))
    tq.convert(m, inplace=True)
    x = torch.randn(1, 3, 16, 16)
    torch.onnx.export(m, x, os.path.join(out, "qdq_resblock.onnx"), opset_version=13,
                      input_names=["input"], output_names=["output"])
    np.save(os.path.join(out, "qdq_resblock_input.npy"), x.numpy().astype(np.float32))


if __name__ == "__main__":
    main()
