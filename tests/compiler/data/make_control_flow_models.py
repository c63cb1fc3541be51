# Generates the control-flow test models of tests/compiler (run with Debian's /usr/bin/python3; onnx 1.12):
#   nested_if_sr.onnx   Silero-shaped: If(sr == 16000) whose then branch holds an If on the input's batch
#                       (Shape -> Gather -> Equal); x [N, 4] float, sr int64 scalar.
#                       sr == 16000, N == 1: y = x * 2 + 3;  sr == 16000, N != 1: y = x * 2;  else y = x - 1.
#   split_mean_op18.onnx  newer than the linked libonnx (IR 10, opset 18): Split(num_outputs=2) of x [2, 4] on
#                       axis 1, then ReduceMean(axes input [1], keepdims 0) of each half: a [2], b [2].
#   topk_runtime_k.onnx  TopK(x [3, 4], k) along axis 1 with k a runtime int64 [1] input, then Relu: y's size is
#                       known only at run time.
#   cascade_if.onnx     a data-dependent If: score = Sigmoid(x . w1 + b1) [1,1]; if score > 0.5 (ReduceMax then
#                       Greater) y = Relu(x @ W2) [1, 3], else y = zeros [1, 3].
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

def c(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name))

def nested_if():
    # inner: batch == 1 ? t * 1 + 3 : t (t = x * 2 from the enclosing branch)
    inner_then = helper.make_graph([c("three", np.float32(3)), helper.make_node("Add", ["t", "three"], ["a"])],
                                   "inner_then", [], [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4])])
    inner_else = helper.make_graph([helper.make_node("Identity", ["t"], ["b"])], "inner_else", [],
                                   [helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4])])
    then_g = helper.make_graph([
        c("two", np.float32(2)), helper.make_node("Mul", ["x", "two"], ["t"]),
        helper.make_node("Shape", ["x"], ["shp"]), c("zero", np.int64(0)),
        helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0), c("one", np.int64(1)),
        helper.make_node("Equal", ["n", "one"], ["is1"]),
        helper.make_node("If", ["is1"], ["inner"], then_branch=inner_then, else_branch=inner_else),
    ], "then", [], [helper.make_tensor_value_info("inner", TensorProto.FLOAT, ["N", 4])])
    else_g = helper.make_graph([c("one_f", np.float32(1)), helper.make_node("Sub", ["x", "one_f"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, ["N", 4])])
    g = helper.make_graph([
        c("k16", np.int64(16000)), helper.make_node("Equal", ["sr", "k16"], ["is16"]),
        helper.make_node("If", ["is16"], ["y"], then_branch=then_g, else_branch=else_g),
    ], "nested_if_sr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
                        helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])

def cascade():
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((8, 1)).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "w2"], ["m"]), helper.make_node("Relu", ["m"], ["r"])],
                               "second_stage", [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 3])])
    else_g = helper.make_graph([c("z", np.zeros((1, 3), np.float32))], "skip", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3])])
    g = helper.make_graph([
        helper.make_node("MatMul", ["x", "w1"], ["s"]), helper.make_node("Sigmoid", ["s"], ["score"]),
        helper.make_node("ReduceMax", ["score"], ["top"], keepdims=0), c("half", np.float32(0.5)),
        helper.make_node("Greater", ["top", "half"], ["fire"]),
        helper.make_node("If", ["fire"], ["y"], then_branch=then_g, else_branch=else_g),
    ], "cascade_if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("score", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

def topk_runtime_k():
    # the size of TopK's values comes from the runtime input k: known only at run time
    g = helper.make_graph([
        helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1),
        helper.make_node("Relu", ["values"], ["y"]),
    ], "topk_runtime_k", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                          helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, "n"])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

def split_mean_op18():
    g = helper.make_graph([
        helper.make_node("Split", ["x"], ["l", "r"], axis=1, num_outputs=2), c("ax", np.array([1], np.int64)),
        helper.make_node("ReduceMean", ["l", "ax"], ["a"], keepdims=0),
        helper.make_node("ReduceMean", ["r", "ax"], ["b"], keepdims=0),
    ], "split_mean_op18", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    return m

if __name__ == "__main__":
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for name, m in [("nested_if_sr", nested_if()), ("cascade_if", cascade()), ("topk_runtime_k", topk_runtime_k())]:
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(here, name + ".onnx"))
    onnx.save(split_mean_op18(), os.path.join(here, "split_mean_op18.onnx"))  # libonnx 1.12's checker rejects it
