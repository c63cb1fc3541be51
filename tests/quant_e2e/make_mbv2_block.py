#!/usr/bin/env python3
"""Writes mbv2_block.onnx: MobileNetV2-like inverted residual blocks (1x1 expand + ReLU6, 3x3 depthwise
+ ReLU6, 1x1 project, residual add), a stride-2 depthwise block, then global pool and a classifier.
Small (1x16x12x12 input) so the int8 bit-exactness test runs in well under a second. Deterministic."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
nodes, inits = [], []


def const(name, shape, scale):
    inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
    return name


def conv(x, y, cin, cout, k, stride=1, group=1, act=None):
    w = const(y + "_w", (cout, cin // group, k, k), (2.0 / (cin // group * k * k)) ** 0.5)
    b = const(y + "_b", (cout,), 0.1)
    out = y if act is None else y + "_pre"
    nodes.append(helper.make_node("Conv", [x, w, b], [out], name=y, kernel_shape=[k, k], strides=[stride, stride],
                                  pads=[k // 2] * 4, group=group))
    if act == "relu6":
        lo = const(y + "_lo", (), 0.0)
        hi = y + "_hi"
        inits.append(numpy_helper.from_array(np.array(6.0, np.float32), hi))
        inits[-2] = numpy_helper.from_array(np.array(0.0, np.float32), lo)
        nodes.append(helper.make_node("Clip", [out, lo, hi], [y], name=y + "_clip"))
    elif act == "relu":
        nodes.append(helper.make_node("Relu", [out], [y], name=y + "_relu"))
    return y


x = "input"
e = conv(x, "b1_expand", 16, 48, 1, act="relu6")
d = conv(e, "b1_dw", 48, 48, 3, group=48, act="relu6")
p = conv(d, "b1_project", 48, 16, 1)
nodes.append(helper.make_node("Add", [p, x], ["b1_out"], name="b1_add"))
e2 = conv("b1_out", "b2_expand", 16, 64, 1, act="relu6")
d2 = conv(e2, "b2_dw", 64, 64, 3, stride=2, group=64, act="relu6")
p2 = conv(d2, "b2_project", 64, 24, 1)
h = conv(p2, "head", 24, 32, 1, act="relu")
nodes.append(helper.make_node("GlobalAveragePool", [h], ["pool"], name="pool"))
nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1))
fw = const("fc_w", (10, 32), 0.3)
fb = const("fc_b", (10,), 0.1)
nodes.append(helper.make_node("Gemm", ["flat", fw, fb], ["logits"], name="fc", transB=1))
graph = helper.make_graph(nodes, "mbv2_block", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 16, 12, 12])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1] if len(sys.argv) > 1 else "mbv2_block.onnx")
