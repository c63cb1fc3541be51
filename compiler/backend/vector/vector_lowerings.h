#pragma once
// The lowerings lower_vector dispatches to (internal to the back end). Each returns false with `why` set
// when it cannot lower the node (the caller then falls back to the host); none emits anything then.
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// ---- element-wise (elementwise.cpp) ----
// The VecOp (and immediates) of a unary node; false when it has none.
bool unary_op(const Node& n, const Context& c, Context::VecArgs& v);
// One VecOp streamed over contiguous tiles (input and output in the same layout).
bool lower_unary(Context& c, const Node& n, std::string* why);
// Add, Sub, Mul, Div, Max, Min, Pow, two-input Sum with broadcasting and a fused activation.
bool lower_binary(Context& c, const Node& n, std::string* why);
// BatchNormalization with constant parameters: its per-channel affine map (batchnorm_affine) and a fused
// activation in one pass (VEC mul, add, activation per tile; # int8: codes in and out, the conversions
// folded into the constants as quant::affine_arith states).
bool lower_batchnorm(Context& c, const Node& n, std::string* why);

// ---- data movement (data_movement.cpp) ----
bool lower_transpose(Context& c, const Node& n, std::string* why);
bool lower_concat(Context& c, const Node& n, std::string* why);
bool lower_slice(Context& c, const Node& n, std::string* why);
bool lower_split(Context& c, const Node& n, std::string* why);
// Constant-mode Pad of two adjacent outer dims of the layout (NHWC's H and W): a DMA copy whose LOAD halo
// writes the padding. False (nothing emitted) otherwise: lower_index_map's gather takes the rest.
bool lower_pad(Context& c, const Node& n, std::string* why);
// Which inputs of a data-movement op carry data that is copied (the others are parameters and must be
// constants); empty when the op is not a pure copy in this form.
std::vector<size_t> data_inputs(const Context& c, const Node& n);
// Any pure copy, as a DMA gather from an index map evaluated at compile time.
bool lower_index_map(Context& c, const Node& n, std::string* why);

// ---- pooling and reductions (pooling.cpp) ----
bool lower_pool(Context& c, const Node& n, std::string* why);
// A MaxPool's or AveragePool's window over an H x W input giving OH x OW: kernel, strides and the pads
// (from `pads`, or what auto_pad SAME_UPPER / SAME_LOWER implies). False, with `why`, for other forms.
struct PoolWindow {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
};
bool pool_window(const Node& n, int64_t H, int64_t W, int64_t OH, int64_t OW, PoolWindow* w,
                 std::string* why);
bool lower_reduce(Context& c, const Node& n, std::string* why);

}  // namespace npusim::compiler::backend
