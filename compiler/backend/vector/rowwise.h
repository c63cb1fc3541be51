#pragma once
// Row-wise vector kernels (internal to the back end): a Softmax over its trailing axes, a
// LayerNormalization and an RMSNormalization (npu domain) as one layer each, as a vendor compiler runs them.
// Each tile of whole rows is loaded once, every step runs on the vector unit in SRAM with per-row broadcasts,
// and the result is stored once; decomposed into primitives (compiler/passes/decompose.cpp) each step would
// load its operands from DRAM and store its result back.
//
// Per tile of `rows` rows of D elements, in the layer's compute format (the precision; fp32 for int8):
//   Softmax:   reduce_max -> m; x -= m (bcast col); exp; reduce_sum -> s; s = recip(s); x *= s (col)
//   LayerNorm: reduce_mean -> m; x -= m (col); t = x * x; reduce_mean(t) -> v; v += eps (scalar);
//              v = rsqrt(v); x *= v (col); x *= gamma (bcast row); x += beta (row)
//   RMSNorm:   t = x * x; reduce_mean(t) -> v; v += eps (scalar); v = rsqrt(v); x *= v (col);
//              x *= gamma (bcast row)
// (the element-wise steps move the tile between its input-buffer slot and a scratch tile in the weight
// buffer, so that no step reads and writes one scratchpad port; the last writes the slot again)
// Each intermediate is rounded to the compute format as the decomposed nodes' were, but the division
// over the row becomes a reciprocal per row and a multiply (a divide's initiation interval is 4 cycles
// per element, a multiply's 1), as vendor kernels do: results may differ from the decomposed nodes' in
// the last bit. int8 codes are converted once after the LOAD and once before the STORE
// (Context::codes), with no int8 rounding of the intermediates. Written as codes, the output's scale
// s_y is folded in: the per-row factor (1/sum, rsqrt) is divided by s_y (a VEC over the rows, not over
// every element) and beta stored as beta / s_y (one fp32 division), so the last step writes int32
// (round half to even, saturated) and a VEC add of the zero point makes the codes: quantize's
// element-wise VEC div (4 cycles per element and lane) is gone. compiler/quant/emulate.cpp models
// exactly this sequence for --accuracy and the int8 test hooks.
#include <optional>
#include <string>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// An SRAM operand of a VEC: buffer and byte address.
struct At {
  isa::Buffer buf;
  uint64_t addr;
};

// The softmax steps of `rows` rows of D elements in the compute format (c.act) at `slot` up to the
// per-row factor: reduce_max into m, x - m (bcast col) into `scratch`, exp back into `slot`, reduce_sum
// into m, m = recip(m). The caller multiplies the slot by m (bcast col), or folds an output scale into
// m first. Shared by lower_rowwise and the fused attention (backend/fusion/attention_fusion.h), so that both
// round where the Softmax layer does.
void softmax_to_factor(Context& c, At slot, At scratch, At m, int64_t D, int64_t rows);

// A Softmax layer's work on one tile of `rows` rows of D elements at `slot`, as lower_rowwise runs it,
// the result left in `slot`. `x_codes`: the slot holds int8/uint8 codes of that dtype, dequantized with
// the constants at k (load_conversion_constants(c, k.addr, &qx, nullptr)); `y_codes`: the result is
// written as codes of that dtype with the constants at k + 16 (load_conversion_constants(c, k.addr + 16,
// nullptr, &qy)), the output scale folded into the per-row factor. Otherwise the slot holds, and gets,
// the compute format c.act. `scratch` holds a tile of the compute format; `m` one value per row.
void softmax_rows(Context& c, At slot, At scratch, At m, At k, int64_t D, int64_t rows,
                  std::optional<isa::DType> x_codes, std::optional<isa::DType> y_codes);

// A LayerNorm's (or an RMSNorm's) steps on `rows` rows of D elements, as lower_rowwise runs them on each
// tile, so that a GEMM applying a LayerNorm in its loads (backend/fusion/pre_norm.h) rounds where the layer
// does. The tile's values lie at `in` (codes of x_codes, else the compute format a); the element-wise steps
// alternate between `slot` and `scratch` (places of rows x D in the compute format; `slot` may be `in` when
// the values are already in it), and the last writes `out` (codes of y_codes, else the compute format,
// the output scale folded into the per-row factor). The per-row statistics go to m and v (rows values
// each), the conversion constants lie at k (x's at k, y's at k + 16: load_conversion_constants), epsilon at
// k + 32, gamma and beta as rows of D in the compute format (beta divided by y's scale for codes).
struct NormRows {
  int64_t D = 0;
  bool rms = false, gamma = false, beta = false;
  isa::DType a = isa::DType::kFp32;
  At m{}, v{}, k{}, gamma_at{}, beta_at{};
  std::optional<isa::DType> x_codes, y_codes;
};
void norm_rows(Context& c, const NormRows& r, At in, At slot, At scratch, At out, int64_t rows);

// Softmax or LayerNormalization (default domain), npu.RMSNormalization: the nodes lower_rowwise takes.
bool is_rowwise(const Node& n);

// The longest row (elements) lower_rowwise takes on this machine: one fp32 row fits an input slot and,
// with scale, bias and a scratch row, the weight scratchpad (compiler::rowwise_row_limit, compile.h).
int64_t longest_row(const isa::NpuConfig& config);

// Lowers a node in compiler::rowwise_form; false (with the reason) when its rows do not fit the
// scratchpads or its input or output is not in ONNX order.
bool lower_rowwise(Context& c, const Node& n, std::string* why);

}  // namespace npusim::compiler::backend
