#pragma once
// Per-layer precision in the back end (internal): INT8 code generation for matrix nodes and the
// conversions between the formats of a mixed-precision plan (compiler/quant/precision.h is the
// contract). Without CompileOptions::plan nothing here runs and compile() is unchanged.
//
// Storage: a runtime value lives in DRAM in its producer's format — int8/uint8 codes (its QParams'
// dtype) when an int8 node writes it, fp32/fp16/bf16 otherwise; graph inputs and outputs are fp32 (the
// model's I/O). A node reading a value in another format reads a converted copy in DRAM scratch,
// made on the vector unit: dequantize = VEC sub zero point (-> fp32) then mul scale; quantize = VEC
// div scale (-> int32, round half to even, saturated) then add zero point (-> int8/uint8, saturated),
// which is ONNX QuantizeLinear exactly; float <-> float = VEC copy. A node whose output format differs
// from its output's storage writes a scratch copy that is converted the same way.
//
// INT8 matrix nodes (constant weights, or a runtime int8 B loaded like an activation): int8 weights as data
// segments, uint8/int8 activations with LOAD's halo pad = the input's zero point, int32 accumulation on the
// array, then on the vector unit:
// + bias_folded (int32), a fused residual (codes - zero point, per-channel rescale, saturating add),
// REQUANTIZE with the per-channel (multiplier, shift) pairs and the output zero point, the Relu/Clip
// clamp as VEC clip; other fused activations, under the integer scheme, REQUANTIZE to the pre-activation's
// codes and one VEC lut (quant::LayerQuant::lut_epilogue), else the float epilogue (fp32 * acc_scale,
// activation, quantize). int8 vector nodes (pooling, adds that were not fused, ...) compute in fp32 between a
// dequantize and a quantize, as the contract states.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/quant/precision.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

// DRAM storage dtype of every runtime value under c.options.plan (alias groups of free ops share it).
// `root_of` maps a value to its alias root as compile() computes it.
std::map<std::string, isa::DType> planned_storage(const Graph& g, const quant::PrecisionPlan& plan,
                                                  const std::map<std::string, std::string>& root_of);

// Brackets the lowering of one node under a plan: the constructor converts inputs into the node's
// format (swapping c.tensors entries for scratch copies) and sets c.act / c.esize to the node's
// compute dtype; finish() converts outputs written to scratch into their storage and restores the
// context. A no-op without a plan.
//
// An int8 element-wise node (binary: Add, Sub, Mul, Div, Max, Min; unary: Relu, Clip, Sigmoid,
// HardSwish, ...) converts inside its own tile loop instead: the scope leaves its code-stored inputs
// and outputs as they are and lists them in Context::codes; lower_binary / lower_unary load codes,
// dequantize the tile in SRAM, compute, quantize and store codes (one pass over the tensors, as an
// NPU's quantized add does). If the node then falls
// back to the host, materialize() makes the DRAM conversions after all.
class PlanScope {
 public:
  PlanScope(Context& c, const Node& n, Placement placement);
  ~PlanScope();
  PlanScope(const PlanScope&) = delete;
  PlanScope& operator=(const PlanScope&) = delete;
  // True when the node is an int8 matrix node that lower_matrix_int8 must lower.
  bool int8_matrix() const { return int8_matrix_; }
  // Emits the conversions deferred to the node's tile loop (before a host fallback of that node).
  void materialize();
  void finish();

 private:
  void convert_io(bool defer_codes);
  Context& c_;
  const Node& n_;
  bool active_ = false, int8_matrix_ = false, finished_ = false, deferred_ = false, on_codes_ = false;
  isa::DType saved_act_ = isa::DType::kFp32;
  int64_t saved_esize_ = 4;
  std::map<std::string, DramTensor> saved_;                      // swapped entries of c.tensors
  std::vector<std::pair<DramTensor, std::string>> pending_out_;  // scratch output -> value name
};

// Whether int8 matrix node n (effective precision int8, in plan.layers) runs on the integer path: Conv,
// Gemm or MatMul with constant weights, or a MatMul of two runtime operands (attention) whose codes are
// both symmetric (zero point 0: the accumulator needs no runtime column sums). Anything else computes
// in the plan's float format between conversions.
bool int8_matrix_mappable(const quant::PrecisionPlan& plan, const Node& n);

// Lowers an int8 matrix node (int8_matrix_mappable). False when its form is not mapped.
bool lower_matrix_int8(Context& c, const Node& n);

// The epilogue of an int8 matrix node with neither a residual nor a float or table epilogue: one output-stage
// VEC (isa::VecOp::kOutput) reading int32 triples [N][3] (bias_folded, multiplier, shift), bias,
// requantization and clamp in one pass. The one place that builds both, for lower_matrix_int8 and the
// fused attention (backend/fusion/attention_fusion.h).
bool has_output_stage(const quant::LayerQuant& L);
std::vector<int32_t> output_stage_triples(const quant::LayerQuant& L);
// The same for per-channel `bias_folded` and `requant` of a job's own (e.g. a ConvTranspose kernel row's).
std::vector<int32_t> output_stage_triples(const std::vector<int32_t>& bias_folded,
                                          const std::vector<isa::numerics::QuantizedMultiplier>& requant);
// The VEC with its op, dtypes, broadcast and immediates (clamp bounds, output zero point) set; the caller
// sets its operands (src2: the triples) and its box. Under L.lut_epilogue it writes the pre-activation's
// codes (L.requant_target), which the table lookup then reads.
Context::VecArgs output_stage_vec(const quant::LayerQuant& L, const quant::QParams& y);

// Int32 words as the bytes of a data segment.
std::vector<uint8_t> int32_bytes(const std::vector<int32_t>& v);
// Constants of a conversion or an epilogue, as one small data segment: int32 words and fp32 words.
struct ConstWords {
  std::vector<int32_t> w;
  int add_i(int32_t v) {
    w.push_back(v);
    return static_cast<int>(w.size() - 1);
  }
  int add_f(float f);
};

// The conversion constants of convert_tensor and of the in-tile conversions: 16 bytes, [0] zero point
// of the codes read (int32; read as int8/uint8 its low byte is the code), [1] their scale (fp32),
// [2] scale of the codes written (fp32), [3] their zero point (int32). Returns the data segment.
uint64_t conversion_constants(Context& c, const quant::QParams* from, const quant::QParams* to);
// The same, loaded into the accumulator buffer at `acc_slot` (16 bytes).
void load_conversion_constants(Context& c, uint64_t acc_slot, const quant::QParams* from,
                               const quant::QParams* to);
// In SRAM, on a d1 x d0 tile at `slot` of `buf` whose conversion constants are at `kslot` of the
// accumulator buffer: codes (int8/uint8) -> fp32 = VEC sub zero point (-> fp32), mul scale; and
// fp32 -> codes = VEC div scale (-> int32, nearest even, saturating), add zero point (-> codes,
// saturating), i.e. ONNX DequantizeLinear / QuantizeLinear. The slot must hold the fp32 tile.
void dequantize_tile(Context& c, isa::Buffer buf, uint64_t slot, int64_t d0, int64_t d1, isa::DType codes,
                     uint64_t kslot, isa::DType out = isa::DType::kFp32);  // `out`: the mul's float result
void quantize_tile(Context& c, isa::Buffer buf, uint64_t slot, int64_t d0, int64_t d1, isa::DType codes,
                   uint64_t kslot);
// quantize_tile with the codes written to `dst` of `dst_buf` (the int32 step stays at `slot`).
void quantize_tile_into(Context& c, isa::Buffer buf, uint64_t slot, isa::Buffer dst_buf, uint64_t dst,
                        int64_t d0, int64_t d1, isa::DType codes, uint64_t kslot);
// dequantize_tile with the fp32 tile written to `dst` of `dst_buf` (the same two VEC steps): an int8
// vector layer whose fp32 work runs in the accumulator buffer reads the codes once from the input
// buffer, whose port then carries 1 byte per element instead of every step's 4-byte operands.
void dequantize_tile_into(Context& c, isa::Buffer buf, uint64_t slot, isa::Buffer dst_buf, uint64_t dst,
                          int64_t d0, int64_t d1, isa::DType codes, uint64_t kslot,
                          isa::DType out = isa::DType::kFp32);
// dequantize_tile's first half: codes at `slot` of `buf` -> fp32 (code - zero point, exact) at `dst` of
// `dst_buf`; for a consumer that folds the scale into its own constants (the BatchNormalization layer,
// quant::affine_arith). `out` int32: the centred codes of the integer scheme (quant::integer_mul).
void subtract_zero_point(Context& c, isa::Buffer buf, uint64_t slot, isa::Buffer dst_buf, uint64_t dst,
                         int64_t d0, int64_t d1, isa::DType codes, uint64_t kslot,
                         isa::DType out = isa::DType::kFp32);

// The integer scheme's Mul (quant::integer_mul) of a tile by one code per channel whose zero point is 0 (a
// squeeze-and-excitation block's Sigmoid / HardSigmoid scale) in two VEC passes instead of three: as
//   (a - a.zero_point) * b = a * b - a.zero_point * b
// the codes are multiplied as they are (VEC mul, both operands' codes -> int32, exact), and the output stage
// (isa::VecOp::kOutput) adds the per-channel bias -a.zero_point * b, requantizes with the Mul's one (M,
// shift) and writes y's codes: the same int32 value and the same requantize as centring, multiplying and
// requantizing, so the codes are identical bit for bit. The per-channel triples (bias, M, shift) are computed
// once per loaded vector of codes, after them in its weight slot: its codes to int32, times -a.zero_point,
// beside rows of M and shift loaded from a data segment, one VEC transpose to [C][3].
class ChannelScaleMul {
 public:
  // Whether the Mul of codes `a` (dtype a_dt) by a row-broadcast operand of codes `b` (b_dt) may run so:
  // both operands 8-bit codes of one dtype (one VEC reads both) and b's zero point 0.
  static bool applies(isa::DType a_dt, const quant::QParams& a, isa::DType b_dt, const quant::QParams& b);
  // m: the Mul's multiplier; rows of at most `max_d0` channels; the operand's codes and their triples in
  // scratchpad `buf` (the Mul's weight scratchpad; the accumulator where a conv applies the scale in its
  // loads: fusion/pre_scale.h).
  ChannelScaleMul(Context& c, const isa::numerics::QuantizedMultiplier& m, const quant::QParams& a,
                  const quant::QParams& y, isa::DType a_dt, isa::DType y_dt, int64_t max_d0,
                  isa::Buffer buf = isa::Buffer::kWeight);
  // Bytes the triples' work takes after a row of d0 codes in the scratchpad (rounded to 64 bytes).
  static int64_t bytes_after(int64_t d0);
  // After d0 codes of the operand were loaded at `codes` of the scratchpad: their triples, after them.
  void prepare(uint64_t codes, int64_t d0);
  // The d1 x d0 tile of codes at a_slot of a_buf times the prepared codes from channel `ch` on: the int32
  // products at `sums` of the accumulator buffer, then y's codes at `dst` of dst_buf.
  void apply(isa::Buffer a_buf, uint64_t a_slot, uint64_t sums, isa::Buffer dst_buf, uint64_t dst, int64_t d0,
             int64_t d1, int64_t ch = 0) const;

 private:
  Context& c_;
  isa::DType a_dt_, y_dt_;
  int32_t y_zp_ = 0;
  int64_t max_d0_ = 0;
  isa::Buffer buf_ = isa::Buffer::kWeight;
  int64_t d0_ = 0;        // the prepared codes' count
  uint64_t segment_ = 0;  // int32: [max_d0] of M, [max_d0] of shift, -a.zero_point
  uint64_t codes_ = 0;    // the prepared operand's codes (the triples after them)
};

// The integer scheme of an int8 element-wise function of one input (quant::Int8Vector::kInteger,
// quant::is_code_function) whose input and output PlanScope left as int8/uint8 codes: one VEC lut per
// tile with the node's table (quant::activation_lut), bit for bit the float rule's codes.
bool lut_applies(const Context& c, const Node& n);
// Loads the table into the accumulator buffer at kLutSlot, switches the context to the input's codes (c.act,
// c.esize: PlanScope restores them) and returns the VEC lut to apply to each tile (the caller sets its box
// and its src1/dst).
inline constexpr uint64_t kLutSlot = 0;
Context::VecArgs begin_lut(Context& c, const Node& n);
// A table of codes (isa::kLutEntries entries, each one code of the table's output dtype) as a data segment.
uint64_t lut_segment(Context& c, const std::vector<int32_t>& table);

// Converts a whole tensor between storage formats (same shape and layout): codes use `src_q` /
// `dst_q` (ignored for float dtypes).
void convert_tensor(Context& c, const DramTensor& src, const quant::QParams* src_q, const DramTensor& dst,
                    const quant::QParams* dst_q);

}  // namespace npusim::compiler::backend
