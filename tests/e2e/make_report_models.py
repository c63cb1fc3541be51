#!/usr/bin/env python3
"""Writes two tiny ONNX models into DIR for the report-documentation test (reports_test.cpp): dw.onnx, a
depthwise conv (layers[].array_macs), the pointwise conv that reads its output on chip
(layers[].on_chip_input) and a squeeze-and-excitation block on that one's output (layers[].fusion_group),
and dyn.onnx, a MatMul over a symbolic sequence length (the
profiles and requests sections). usage: make_report_models.py DIR"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
out = sys.argv[1]
rng = np.random.default_rng(0)
# A depthwise conv (groups = channels): the array runs it as block-diagonal blocks, or the vector unit does;
# its output stays on chip for the pointwise conv after it.
w = numpy_helper.from_array(rng.standard_normal((8, 1, 3, 3)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b")
pw = numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), "pw")
# Then a squeeze-and-excitation block on the pointwise conv's output: its pool holds it in SRAM for its Mul
# (layers[].fusion_group).
r = numpy_helper.from_array(rng.standard_normal((4, 8, 1, 1)).astype(np.float32), "r")
e = numpy_helper.from_array(rng.standard_normal((8, 4, 1, 1)).astype(np.float32), "e")
g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["d"], group=8, pads=[1, 1, 1, 1], name="dw"),
                       helper.make_node("Conv", ["d", "pw"], ["y"], name="pw"),
                       helper.make_node("GlobalAveragePool", ["y"], ["p"], name="se_pool"),
                       helper.make_node("Conv", ["p", "r"], ["rc"], name="se_reduce"),
                       helper.make_node("Relu", ["rc"], ["ra"], name="se_relu"),
                       helper.make_node("Conv", ["ra", "e"], ["ec"], name="se_expand"),
                       helper.make_node("Sigmoid", ["ec"], ["s"], name="se_sigmoid"),
                       helper.make_node("Mul", ["y", "s"], ["z"], name="se_scale")], "dw",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                      [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 8, 8])], [w, b, pw, r, e])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + "/dw.onnx")
# A MatMul over a symbolic sequence length: --dynamic profiles and --requests.
m = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "m")
g = helper.make_graph([helper.make_node("MatMul", ["x", "m"], ["y"], name="mm")], "dyn",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 16])], [m])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + "/dyn.onnx")
