#include "compiler/backend/estimate/roofline.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "isa/timing/dma.h"
#include "isa/timing/dram.h"
#include "isa/timing/systolic.h"
#include "isa/timing/units.h"

namespace npusim::compiler::backend {

int64_t Roofline::bound_cycles() const {
  return static_cast<int64_t>(
      std::ceil(std::max({compute_cycles, vector_cycles, memory_cycles, stage_cycles})));
}

double array_peak_macs_per_cycle(const isa::NpuConfig& config, isa::DType precision) {
  const isa::SystolicArrayConfig& a = config.systolic_array;
  return static_cast<double>(a.rows * a.cols) * a.rate(precision);
}

double lane_peak_per_cycle(const isa::NpuConfig& config) {
  return static_cast<double>(std::max<int64_t>(1, config.vector.lanes));
}

double lane_peak_macs_per_cycle(const isa::NpuConfig& config, isa::DType precision) {
  return lane_peak_per_cycle(config) *
         static_cast<double>(isa::timing::dwconv_macs_per_lane(precision, config.vector));
}

double dram_peak_per_cycle(const isa::NpuConfig& config) {
  return isa::timing::dram_peak_bytes_per_cycle(config);
}

namespace {

// The roofs of a node that moves tensors of `elements` elements each (every distinct one once).
Roofline roofs(const std::vector<int64_t>& elements, int64_t macs, bool grouped, isa::DType precision,
               const isa::NpuConfig& config) {
  int64_t total = 0, largest = 0;
  for (const int64_t e : elements) {
    total += e;
    largest = std::max(largest, e);
  }
  const double lanes = lane_peak_per_cycle(config);
  Roofline r;
  if (macs > 0) {
    const double per_cycle =
        grouped ? lane_peak_macs_per_cycle(config, precision) : array_peak_macs_per_cycle(config, precision);
    // An array without MACs of the precision runs no matrix layer in it (the
    // layer falls back to the host).
    if (per_cycle > 0) r.compute_cycles = static_cast<double>(macs) / per_cycle;
  } else {
    r.vector_cycles = static_cast<double>(largest) / lanes;
  }
  const double peak = dram_peak_per_cycle(config);
  if (peak > 0) r.memory_cycles = static_cast<double>(total * isa::dtype_bytes(precision)) / peak;
  return r;
}

// Every distinct tensor n reads (weights included) or writes, once.
std::set<std::string> tensors_of(const Node& n) {
  std::set<std::string> tensors;
  for (const auto* names : {&n.inputs, &n.outputs}) {
    for (const std::string& s : *names)
      if (!s.empty()) tensors.insert(s);
  }
  return tensors;
}

}  // namespace

Roofline roofline(const Graph& g, const Node& n, int64_t macs, isa::DType precision,
                  const isa::NpuConfig& config) {
  std::vector<int64_t> elements;
  for (const std::string& s : tensors_of(n)) {
    if (g.has_value(s) && g.value(s).fully_known()) elements.push_back(num_elements(g.value(s).shape));
  }
  return roofs(elements, macs, n.attr_int("group", 1) > 1, precision, config);
}

std::optional<Roofline> standalone_roofline(const Graph& imported, const Graph& lowered, const Node& n,
                                            int64_t macs, isa::DType precision,
                                            const isa::NpuConfig& config) {
  std::vector<int64_t> elements;
  for (const std::string& s : tensors_of(n)) {
    const Value* v = nullptr;
    for (const Graph* g : {&imported, &lowered}) {
      if (!v && g->has_value(s) && g->value(s).fully_known()) v = &g->value(s);
    }
    if (!v) return std::nullopt;
    elements.push_back(num_elements(v->shape));
  }
  return roofs(elements, macs, n.attr_int("group", 1) > 1, precision, config);
}

std::vector<std::optional<Roofline>> compiled_rooflines(const isa::Program& program,
                                                        const isa::NpuConfig& config) {
  std::vector<std::optional<Roofline>> roofs(program.layers.size());
  const double lanes = lane_peak_per_cycle(config), dram = dram_peak_per_cycle(config);
  for (const isa::Instruction& ins : program.instructions) {
    const size_t layer = ins.layer();
    const isa::Opcode op = ins.opcode;
    const bool matrix = op == isa::Opcode::kMatmul || op == isa::Opcode::kConv;
    const bool dma = op == isa::Opcode::kLoad || op == isa::Opcode::kStore;
    if (layer >= roofs.size() || !(matrix || dma || op == isa::Opcode::kVec)) continue;
    Roofline& r = roofs[layer] ? *roofs[layer] : roofs[layer].emplace();
    if (matrix) {
      const isa::timing::GemmShape g = isa::timing::gemm_shape(ins);
      const double peak =
          array_peak_macs_per_cycle(config, static_cast<isa::DType>(ins.get(isa::Field::kDtype)));
      if (peak > 0) r.compute_cycles += static_cast<double>(g.m * g.k * g.n) / peak;
    } else if (dma) {
      if (dram > 0) r.memory_cycles += static_cast<double>(isa::timing::dma_rows(ins).bytes()) / dram;
    } else if (isa::timing::on_output_stage(ins, config)) {
      r.stage_cycles += static_cast<double>(isa::timing::vec_work_elements(ins)) /
                        static_cast<double>(std::max<int64_t>(1, config.systolic_array.cols));
    } else {
      r.vector_cycles += static_cast<double>(isa::timing::vec_lane_work(ins, config.vector)) / lanes;
    }
  }
  return roofs;
}

}  // namespace npusim::compiler::backend
