#pragma once
// A block's layer scale and residual in its project GEMM's epilogue (internal to the back end). A ConvNeXt
// block ends `MatMul (+ bias) -> Transpose -> Mul (layer scale, one constant per channel) -> Add (the
// block's input)`: the Transpose (channels-last back to NCHW) is free, its output the MatMul's bytes, but
// layer by layer the Mul and the Add are each a pass over the block's output through DRAM (ConvNeXt-Tiny
// on edge, fp16: 0.57 M + 0.86 M of 18.5 M cycles). Fused, the MatMul's float epilogue narrows each output
// tile to the activation type as it would store it, then runs the Mul's VEC (the scale, in the activation
// type, broadcast along the tile's rows) and the Add's VEC (the residual tile, loaded) on it, and stores
// the tile as the Add's output: the same VECs on the same values as the two layers', so --functional
// outputs are bit for bit those of the layers lowered one by one. The Mul's and the Add's outputs are never
// written except the last; the block's input is read once, by the epilogue.
//
// Under an int8 plan the same for the int8 epilogue's codes: each tile's codes dequantized, multiplied by the
// scale and quantized to the Mul's codes, those dequantized and added to the residual's (dequantized), the
// sum quantized to the Add's codes: the Mul's and the Add's conversions and VECs in the tile loop, as their
// layers run them (the Add's integer scheme too, quant::integer_add; not the Mul's, quant::integer_mul). Not
// with the MatMul's own residual or activation, not where a mapping file places the Mul or the Add, and not
// with
// --no-fusion.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/quant/emulate.h"
#include "compiler/quant/precision.h"

namespace npusim::compiler::backend {

// The graph's side: whether node i is a MatMul read only through a free Transpose by a Mul with a
// per-channel constant, itself read only by an Add with another full-shape operand; returns the Add's
// node index, or -1. The memory plan starts the Add's output at the MatMul (its epilogue writes it while
// the MatMul still reads its input).
int64_t project_tail_of(const Graph& g, size_t i);

// Before matrix node i is lowered: names its tail in c.fusion.project_tail when it may take it (the tensors
// lie as the epilogue needs them), else clears it.
void plan_project_tail(Context& c, size_t i);

// What the float MatMul lowering needs of the tail planned for node n.
struct TailOperands {
  std::vector<float> scale;  // the layer scale, one value per output channel (the MatMul's N)
  const DramTensor* residual = nullptr;
  const DramTensor* out = nullptr;  // the Add's output, which the epilogue stores
  std::string mul, add;             // the Mul's and the Add's names (the mapping description)
  // Under an int8 plan: the codes' parameters of the MatMul's output (the Mul's input), the Mul's output, the
  // residual and the Add's output (all null without a plan).
  const quant::QParams *q_in = nullptr, *q_mul = nullptr, *q_res = nullptr, *q_add = nullptr;
  // The Add's integer scheme (quant::integer_add), if its layer takes it: the Mul's codes rescaled by
  // `mul_rescale`, the residual's by `res_rescale`.
  std::optional<quant::IntegerAdd> iadd;
  isa::numerics::QuantizedMultiplier mul_rescale, res_rescale;
};
// The tail planned for node n, if any (the lowering then sets ProjectTail::fused through take_project_tail
// once it maps the job with it).
std::optional<TailOperands> project_tail_operands(const Context& c, const Node& n);
void take_project_tail(Context& c);
// Whether the tail pays, by simulation: `with` emits the MatMul's job with its tail, `without` the job alone,
// after which the Mul and the Add are lowered by their own lowerings; each emitted, timed and undone. The
// MatMul's tiling search sees the tail's epilogue (its tiles may be smaller), and the epilogue's VECs wait
// for the array's tiles where layer by layer they ran after it: on the int8 path (five conversion VECs more
// than the float path's two) it can be slower.
bool project_tail_pays(Context& c, const std::function<void()>& with, const std::function<void()>& without);

// Whether node i is the Mul or the Add of the tail fused last: then fills its plan.
bool project_tail_member(const Context& c, size_t i, LayerPlan& plan);
// After node i is lowered: forgets a tail that did not form with it.
void finish_project_tail(Context& c, size_t i);

}  // namespace npusim::compiler::backend
