// npusim run MODEL --batch N on models exported at batch 1 whose graphs hold that batch in a constant
// Reshape shape: the shape follows N where the batch is its first entry, and the run stops with one
// sentence (exit 2) where npusim cannot tell, instead of reporting batch 1's work under batch N.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

// Batch-1 models written with ONNX's helper into `dir`.
const char* const kModels = R"(
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
def save(name, nodes, inputs, outputs, inits):
    m = h.make_model(h.make_graph(nodes, name, inputs, outputs, inits),
                     opset_imports=[h.make_opsetid('', 17)])
    m.ir_version = 8
    onnx.save(m, d + '/' + name + '.onnx')
vi = h.make_tensor_value_info
i64 = lambda n, v: nh.from_array(np.array(v, dtype=np.int64), n)
f32 = lambda n, s: nh.from_array(np.full(s, 0.5, dtype=np.float32), n)
# A Conv's output flattened to the constant 1x8x36 (torchvision's ViT does this with 1x768x196).
save('flatten_batch1', [
    h.make_node('Conv', ['x', 'w'], ['c'], pads=[1, 1, 1, 1]),
    h.make_node('Reshape', ['c', 'shape'], ['r'], name='flatten'),
    h.make_node('MatMul', ['r', 'm'], ['y'])],
    [vi('x', T.FLOAT, [1, 4, 6, 6])], [vi('y', T.FLOAT, [1, 8, 16])],
    [f32('w', [8, 4, 3, 3]), i64('shape', [1, 8, 36]), f32('m', [36, 16])])
# A Reshape to the constant 8x6, which has no batch in front: nothing says where batch 4 would go.
save('drop_batch', [
    h.make_node('Reshape', ['x', 'shape'], ['r'], name='drop_batch'),
    h.make_node('MatMul', ['r', 'm'], ['y'])],
    [vi('x', T.FLOAT, [1, 8, 6])], [vi('y', T.FLOAT, [8, 5])],
    [i64('shape', [8, 6]), f32('m', [6, 5])])
# Everything flattened and one leading 1 put back: valid at any batch, but the output keeps the 1.
save('flatten_all', [
    h.make_node('Reshape', ['x', 'shape'], ['r'], name='flatten_all'),
    h.make_node('Unsqueeze', ['r', 'axes'], ['u']),
    h.make_node('MatMul', ['u', 'm'], ['y'])],
    [vi('x', T.FLOAT, [1, 8])], [vi('y', T.FLOAT, [1, 1, 5])],
    [i64('shape', [-1, 1]), i64('axes', [0]), f32('m', [1, 5])])
c = lambda out, v: h.make_node('Constant', [], [out], value=nh.from_array(np.array(v, dtype=np.int64)))
# The flatten PyTorch exports for x.view(1, -1) under opset 13: Concat(Unsqueeze(1), Unsqueeze(-1)).
save('computed_flatten', [
    h.make_node('Conv', ['x', 'w'], ['c'], pads=[1, 1, 1, 1]),
    c('one', 1), c('minus_one', -1), c('axes', [0]),
    h.make_node('Unsqueeze', ['one', 'axes'], ['u1']), h.make_node('Unsqueeze', ['minus_one', 'axes'], ['u2']),
    h.make_node('Concat', ['u1', 'u2'], ['shape'], axis=0),
    h.make_node('Reshape', ['c', 'shape'], ['r'], name='flatten'),
    h.make_node('MatMul', ['r', 'm'], ['y'])],
    [vi('x', T.FLOAT, [1, 4, 6, 6])], [vi('y', T.FLOAT, [1, 5])],
    [f32('w', [8, 4, 3, 3]), f32('m', [288, 5])])
# A class token expanded to the exported batch and put in front of the tokens (torchvision's ViT).
save('class_token', [
    h.make_node('Expand', ['token', 'size'], ['t']),
    h.make_node('Concat', ['t', 'x'], ['j'], axis=1, name='join'),
    h.make_node('MatMul', ['j', 'm'], ['y'])],
    [vi('x', T.FLOAT, [1, 3, 8])], [vi('y', T.FLOAT, [1, 4, 5])],
    [f32('token', [1, 1, 8]), i64('size', [1, 1, 8]), f32('m', [8, 5])])
# Sequence-first attention (PyTorch's nn.MultiheadAttention, as in BERT exports): the projection is cut
# at an offset computed from its Shape, then split into heads by a constant shape with the batch inside.
save('seq_first', [
    h.make_node('Transpose', ['x'], ['t'], perm=[1, 0, 2]),
    h.make_node('MatMul', ['t', 'w'], ['p']),
    h.make_node('Shape', ['p'], ['s']), c('last', [-1]), h.make_node('Gather', ['s', 'last'], ['g'], axis=0),
    c('two', [2]), h.make_node('Div', ['g', 'two'], ['half']), c('zero', [0]),
    h.make_node('Slice', ['p', 'zero', 'half', 'last'], ['q']),
    h.make_node('Reshape', ['q', 'heads'], ['r'], name='heads'),
    h.make_node('MatMul', ['r', 'm'], ['y'])],
    [vi('x', T.FLOAT, [1, 4, 6])], [vi('y', T.FLOAT, [4, 3, 5])],
    [f32('w', [6, 6]), i64('heads', [4, 3, 1]), f32('m', [1, 5])])
)";

class BatchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = temp_dir("batch_cli");
    const CommandResult r = run_command({"/usr/bin/python3", "-c", kModels, dir_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string dir_;
};
std::string BatchCli::dir_;

// The MACs the run reports for `model` at `batch`, with `extra` options.
int64_t macs(const std::string& dir, const std::string& model, const std::string& batch,
             std::vector<std::string> extra = {}) {
  const std::string report = dir + "/" + model + "_" + batch + ".json";
  std::vector<std::string> args = {"run",      "-q",  dir + "/" + model + ".onnx", "--batch", batch,
                                   "--report", report};
  args.insert(args.end(), extra.begin(), extra.end());
  const CommandResult r = npusim(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? std::stoll(json_eval(report, "r['macs']")) : -1;
}

TEST_F(BatchCli, AConstantReshapeWithTheExportedBatchInFrontFollowsTheBatch) {
  // Per image: the Conv 8 x 6x6 outputs x 4 channels x 3x3 = 10368 MACs, the MatMul 8x36 by 36x16 = 4608.
  EXPECT_EQ(macs(dir_, "flatten_batch1", "1"), 14976);
  EXPECT_EQ(macs(dir_, "flatten_batch1", "4"), 4 * 14976);
  // int8 calibrates through the reference interpreter, which runs the rewritten Reshape too.
  EXPECT_EQ(macs(dir_, "flatten_batch1", "4", {"--precision", "int8"}), 4 * 14976);
}

TEST_F(BatchCli, AReshapeShapeComputedFromConstantsFollowsTheBatch) {
  // Per image: the Conv 8 x 6x6 outputs x 4 channels x 3x3 = 10368 MACs, the MatMul 1x288 by 288x5 = 1440.
  EXPECT_EQ(macs(dir_, "computed_flatten", "1"), 11808);
  EXPECT_EQ(macs(dir_, "computed_flatten", "4"), 4 * 11808);
}

TEST_F(BatchCli, AConcatOfABatchFixedAtExportAndTheNewBatchStopsNamingTheNode) {
  const CommandResult r = npusim({"run", "-q", dir_ + "/class_token.onnx", "--batch", "4"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(
      r.err.find("--batch 4 makes node 'join' (Concat) join a 1x1x8 input to a 4x3x8 one: a shape fixed "
                 "at export (batch 1) does not follow --batch; export the model with a dynamic batch "
                 "dimension, or run it at its exported batch (--batch 1)"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("--input-value"), std::string::npos) << r.err;  // no run-time value is involved
  EXPECT_EQ(macs(dir_, "class_token", "1"), 4 * 8 * 5);
}

TEST_F(BatchCli, AReshapeAfterASliceSizedFromAShapeStopsWhenItsConstantShapeHoldsNoBatch) {
  // The Slice's end is Shape(p)[-1] / 2: ONNX's inference leaves its output unsized, so the Reshape after
  // it (4x2x3 at batch 2 into 4x3x1) would have kept its batch-1 shape silently.
  const CommandResult r = npusim({"run", "-q", dir_ + "/seq_first.onnx", "--batch", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("--batch 2 makes node 'heads' (Reshape) reshape a 4x2x3 input to the constant shape "
                       "4x3x1"),
            std::string::npos)
      << r.err;
  // Per image: the projection 4 x 6x6 = 144 MACs, the heads' MatMul 4x3 x 1x5 = 60.
  EXPECT_EQ(macs(dir_, "seq_first", "1"), 144 + 60);
}

TEST_F(BatchCli, AConstantReshapeThatCannotHoldTheBatchStopsNamingTheNode) {
  const CommandResult r = npusim({"run", "-q", dir_ + "/drop_batch.onnx", "--batch", "4"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("--batch 4 makes node 'drop_batch' (Reshape) reshape a 4x8x6 input to the constant "
                       "shape 8x6"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("export the model with a dynamic batch dimension, or run it at its exported batch "
                       "(--batch 1)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
  // At its exported batch the model runs.
  EXPECT_EQ(macs(dir_, "drop_batch", "1"), 8 * 6 * 5);
}

TEST_F(BatchCli, AnOutputThatLosesTheBatchStopsTheRunInsteadOfReportingBatchOne) {
  const CommandResult r = npusim({"run", "-q", dir_ + "/flatten_all.onnx", "--batch", "4"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("with --batch 4 output 'y' has shape 1x32x5, not batch 4 in front"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

}  // namespace
}  // namespace npusim::test
