#pragma once
// A squeeze-and-excitation block's pool in its depthwise conv's epilogue (internal to the back end). An SE
// block's input X is the output of the depthwise conv before it (EfficientNet's MBConv, after SiLU); where
// X is too large for the SE group to hold it in the input scratchpad (se_fusion.h), the pool loads it back
// from DRAM right after the depthwise conv stored it. Here the depthwise conv on the vector unit
// (matrix/depthwise.h) pools each output tile where its epilogue left it for the STORE: tiles of whole
// output rows whose heights are multiples of the pool's band, one VEC avg_pool per band (per channel chunk),
// the band means in the weight scratchpad, then one avg_pool over them per channel chunk and one STORE of
// the pooled vector. The bands, their order and the instructions are those the pool's own lowering
// (vector/pooling.cpp, the NHWC global pool) takes, channel by channel, so the results are bit for bit the
// same; the pool emits nothing and X's read is saved.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "compiler/backend/core/context.h"
#include "compiler/backend/matrix/matrix_walk.h"

namespace npusim::compiler::backend {

// The pool a depthwise conv may run in its epilogue.
struct SePoolBands {
  size_t pool = 0;          // the GlobalAveragePool's layer
  int64_t rows = 0;         // float: its bands, rows of X each (they divide X's height) ...
  int64_t bands = 0;        // ... and how many
  int64_t channels = 0;     // X's channels
  Range y;                  // the pooled vector's DRAM tensor
  isa::DType dtype{};       // X's element type (float: the pooled vector's too)
  int64_t x_bytes = 0;      // X's bytes (the read saved)
  double saved_cycles = 0;  // the pool's own time, as X's read at DRAM rate (what choosing it saves)
  // int8 codes, the pool's integer scheme (quant::integer_global_average_pool): the exact int32 sums of the
  // codes, whatever tiles add them, then one output stage (bias -H*W*x.zero_point, the multiplier, y's
  // zero point) into y's codes (y_dtype).
  bool integer = false;
  int32_t stage[3] = {0, 0, 0};
  int64_t y_zero_point = 0;
  isa::DType y_dtype{};
};

// For depthwise job j lowered as the current layer with output element type y: the SE pool that reads its
// output when the conv can pool it in its epilogue (fusion on, float types, one image, X stored dense
// NHWC, X not held by the SE group, the pool's bands of whole rows of every channel), else none.
std::optional<SePoolBands> se_pool_for_depthwise(const Context& c, const MatrixJob& j, isa::DType y);
// For the depthwise conv `producer` (a line buffer's reader) writing its output X at x_range in int8
// codes of type y: the SE pool that reads X when the conv's bands can pool it in their epilogue with the
// pool's integer scheme (exact int32 sums: any bands' sums are the pool's), else none.
std::optional<SePoolBands> se_pool_codes_for_depthwise(const Context& c, size_t producer,
                                                       const Range& x_range, isa::DType y);
// The depthwise conv `producer` emitted the pool p in its epilogue.
void se_pool_taken(Context& c, const SePoolBands& p, size_t producer);
// The cycles the pool the current depthwise conv took in its epilogue saves (SePoolBands::saved_cycles),
// 0 when it took none.
double se_pool_credit(const Context& c);
// Layer i's work is a pool its depthwise producer did (and the pool's own lowering would take the same
// bands): fills its plan and returns true.
bool se_pool_member(Context& c, size_t i, LayerPlan& plan);

}  // namespace npusim::compiler::backend
