#pragma once
// A report with every field traces::report_json writes set, to distinct values (fractions where the
// field is a double): energy and area, a precision on every layer, a fused node with its bound, an
// array_macs, run information with string, number and boolean parameters.
#include "traces/report.h"

namespace npusim::test {

inline traces::Report rich_report() {
  traces::Report r;
  r.total_cycles = 10000;
  r.frequency_mhz = 937.5;
  r.latency_ms = 0.010666666666666666;
  r.macs = 123456;
  r.array_utilization = 0.0482265625;
  r.dataflow = "ws";
  r.array_rows = 16;
  r.array_cols = 16;
  r.array_macs_per_pe_per_cycle = {{"int8", 1}, {"fp16", 0.5}, {"bf16", 0.5}, {"fp32", 0.25}};
  r.breakdown = {6000, 3000, 900, 100};
  r.dram = {"lpddr4_4266", 4096, 2048, 0.5734, 34.128, 96, 80, 16, 2};
  r.dma = {40, 96, 3, 12};
  r.sram = {5, 17};
  r.host = {1, 256, 128};
  r.units = {{"sequencer", 20, 100, 9000, {}}, {"matrix", 7, 6000, 3000, {}}};
  r.units[1].stalls = {0, 500, 7, 300, 11, 0};
  traces::LayerReport conv;
  conv.name = "/conv1/Conv";
  conv.op = "Conv";
  conv.precision = "int8";
  conv.start_cycle = 10;
  conv.end_cycle = 8010;
  conv.cycles = 8000;
  conv.compute_cycles = 5000;
  conv.vector_cycles = 300;
  conv.macs = 100000;
  conv.array_macs = 160000;
  conv.instructions = 30;
  conv.dram_bytes_read = 3000;
  conv.dram_bytes_written = 1500;
  conv.breakdown = {5000, 2500, 400, 100};
  conv.bound_cycles = 7000;
  conv.fused_bound_cycles = 250;
  conv.compiled_bound_cycles = 7100;  // the conv as compiled, its ReLU fused: less than 7000 + 250
  conv.limit_cycles = 98;             // 100000 MACs at 1024 per cycle, rounded up
  conv.energy.mj = {0.001, 0.0005, 0.25, 0.0001, 0.002, 0, 0.125};
  traces::LayerReport relu;
  relu.name = "/relu1/Relu";
  relu.op = "Relu";
  relu.placement = traces::LayerPlacement::kFused;
  relu.fused_into = conv.name;
  relu.precision = "int8";
  relu.start_cycle = relu.end_cycle = 8010;
  relu.bound_cycles = 250;
  traces::LayerReport fc;
  fc.name = "fc";
  fc.op = "Gemm";
  fc.precision = "fp16";
  fc.start_cycle = 8010;
  fc.end_cycle = 10000;
  fc.cycles = 1990;
  fc.compute_cycles = 1500;
  fc.macs = 23456;
  fc.instructions = 9;
  fc.dram_bytes_read = 1096;
  fc.dram_bytes_written = 548;
  fc.breakdown = {1000, 500, 490, 0};
  fc.bound_cycles = 1200;
  fc.energy.mj = {0.0003, 0.0001, 0.0625, 0, 0.001, 0.5, 0.03125};
  r.layers = {conv, relu, fc};
  traces::EnergyReport& e = r.energy.emplace();
  for (const traces::LayerReport& l : r.layers)
    for (size_t k = 0; k < traces::kNumEnergyComponents; ++k) e.by_component.mj[k] += l.energy.mj[k];
  e.total_mj = e.by_component.total();
  e.average_power_w = 91.40625;
  e.peak_power_w = 120.75;
  e.tops_per_w = 0.0026977;
  traces::AreaReport& a = r.area.emplace();
  a.by_unit_mm2 = {0.5, 0.25, 0.25, 0.125, 0.0625, 0.03125};
  a.total_mm2 = 1.21875;
  r.compiled_bound_cycles = 8100;
  r.model_limit_cycles = 2500;  // the DRAM term, rounded up: the model's limit
  r.model_limit = traces::Report::ModelLimit{120.5, 0, 2499.25};
  traces::RunInfo& run = r.run.emplace();
  run.command = "npusim run \"model x.onnx\"";
  run.version = "0.1.0 (abc)";
  run.model = "model x.onnx";
  run.model_sha256 = "00ff";
  run.config = "edge";
  run.sets = {"dram.model=lpddr4_4266", "sram.input.size_kib=64"};
  run.parameters = {{"frequency_mhz", "937.5"}, {"dram.model", "lpddr4_4266"}, {"energy.enabled", "true"}};
  r.sim = {0.125, 59, false};
  return r;
}

}  // namespace npusim::test
