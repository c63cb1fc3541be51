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
// INT8 matrix nodes (constant weights, or a runtime int8 B loaded like an activation): int8 weights as data segments, uint8/int8 activations with
// LOAD's halo pad = the input's zero point, int32 accumulation on the array, then on the vector unit:
// + bias_folded (int32), a fused residual (codes - zero point, per-channel rescale, saturating add),
// REQUANTIZE with the per-channel (multiplier, shift) pairs and the output zero point, the Relu/Clip
// clamp as VEC clip; other fused activations take the float epilogue (fp32 * acc_scale, activation,
// quantize). int8 vector nodes (pooling, adds that were not fused, ...) compute in fp32 between a
// dequantize and a quantize, as the contract states.
#include <map>
#include <string>
#include <vector>

#include "compiler/backend/context.h"
#include "compiler/quant/precision.h"

namespace npusim::compiler::backend {

// DRAM storage dtype of every runtime value under c.options.plan (alias groups of free ops share it).
// `root_of` maps a value to its alias root as compile() computes it.
std::map<std::string, isa::DType> planned_storage(const Graph& g, const quant::PrecisionPlan& plan,
                                                  const std::map<std::string, std::string>& root_of);

// Brackets the lowering of one node under a plan: the constructor converts inputs into the node's
// format (swapping c.tensors entries for scratch copies) and sets c.act / c.esize to the node's
// compute dtype; finish() converts outputs written to scratch into their storage and restores the
// context. A no-op without a plan.
class PlanScope {
 public:
  PlanScope(Context& c, const Node& n, const std::string& placement);
  ~PlanScope();
  PlanScope(const PlanScope&) = delete;
  PlanScope& operator=(const PlanScope&) = delete;
  // True when the node is an int8 matrix node that lower_matrix_int8 must lower.
  bool int8_matrix() const { return int8_matrix_; }
  void finish();

 private:
  Context& c_;
  bool active_ = false, int8_matrix_ = false, finished_ = false;
  isa::DType saved_act_ = isa::DType::kFp32;
  int64_t saved_esize_ = 4;
  std::map<std::string, DramTensor> saved_;                     // swapped entries of c.tensors
  std::vector<std::pair<DramTensor, std::string>> pending_out_;  // scratch output -> value name
};

// Whether int8 matrix node n (effective precision int8, in plan.layers) runs on the integer path: Conv,
// Gemm or MatMul with constant weights, or a MatMul of two runtime operands (attention) whose codes are
// both symmetric (zero point 0: the accumulator needs no runtime column sums). Anything else computes
// in the plan's float format between conversions.
bool int8_matrix_mappable(const quant::PrecisionPlan& plan, const Node& n);

// Lowers an int8 matrix node (int8_matrix_mappable). False when its form is not mapped.
bool lower_matrix_int8(Context& c, const Node& n);

// Converts a whole tensor between storage formats (same shape and layout): codes use `src_q` /
// `dst_q` (ignored for float dtypes).
void convert_tensor(Context& c, const DramTensor& src, const quant::QParams* src_q, const DramTensor& dst,
                    const quant::QParams* dst_q);

}  // namespace npusim::compiler::backend
