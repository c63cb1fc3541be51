#!/usr/bin/env python3
"""Writes two tiny ONNX models into DIR for the report-documentation test (reports_test.cpp): dw.onnx, a
depthwise conv (layers[].array_macs) and the pointwise conv that reads its output on chip
(layers[].on_chip_input), and dyn.onnx, a MatMul over a symbolic sequence length (the
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
g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["d"], group=8, pads=[1, 1, 1, 1], name="dw"),
                       helper.make_node("Conv", ["d", "pw"], ["y"], name="pw")], "dw",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], [w, b, pw])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + "/dw.onnx")
# A MatMul over a symbolic sequence length: --dynamic profiles and --requests.
m = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "m")
g = helper.make_graph([helper.make_node("MatMul", ["x", "m"], ["y"], name="mm")], "dyn",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 16])], [m])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + "/dyn.onnx")
