#include "isa/machine/config.h"

namespace npusim::isa {

void SequencerConfig::visit(Visitor& v) {
  v.integer({"queue_depth", "instructions",
             "depth of each unit's instruction queue (load, matrix, vector, store, host)"},
            queue_depth, 1, 4096);
  v.integer({"dispatch_cycles",
             "cycles",
             "cycles the sequencer spends fetching, decoding and dispatching one instruction",
             true,
             {0, 256}},
            dispatch_cycles, 0, 1024);
}

void SystolicArrayConfig::visit(Visitor& v) {
  v.integer({"rows", "PEs", "rows of the MAC array (the reduction dimension K in weight-stationary)"}, rows,
            1, 4096);
  v.integer({"cols", "PEs", "columns of the MAC array (output channels N in weight-stationary)"}, cols, 1,
            4096);
  v.choice({"dataflow", "", "what stays in the PEs: ws = weights, os = outputs, is = inputs"}, dataflow,
           kDataflowNames);
  v.boolean(
      {"double_buffered", "", "preload the next tile's stationary operand while the current tile computes"},
      double_buffered);
  v.boolean(
      {"pipelined_folds", "",
       "a fold's first row enters the array the cycle after the previous fold's last row (the stationary "
       "operand selected by a tag that travels with the data), so one MATMUL/CONV pays the skew fill and "
       "drain once, not per fold; needs double_buffered and dataflow ws or is"},
      pipelined_folds);
  v.choice({"model", "",
            "timing model: tile = one event per instruction, pe = step every PE every cycle (small arrays)"},
           model, kArrayModelNames);
  v.real({"fp16_rate", "x int8", "fp16 MAC rate as a fraction of the int8 rate (0 = fp16 unsupported)"},
         fp16_rate, 0, 1);
  v.real({"bf16_rate", "x int8", "bf16 MAC rate as a fraction of the int8 rate (0 = bf16 unsupported)"},
         bf16_rate, 0, 1);
  v.real({"fp32_rate", "x int8", "fp32 MAC rate as a fraction of the int8 rate (0 = fp32 unsupported)"},
         fp32_rate, 0, 1);
  v.real({"int16_rate", "x int8",
          "int16-activation x int8-weight MAC rate (int64 accumulation) as a fraction of the int8 rate (0 = "
          "int16 "
          "activations unsupported)"},
         int16_rate, 0, 1);
  v.boolean(
      {"fp16_accumulate_fp32", "", "fp16/bf16 products accumulate in fp32 (false: in the input precision)"},
      fp16_accumulate_fp32);
  v.integer({"min_block_cycles", "cycles",
             "ws: a CONV streams each output row's pixels, a MATMUL its rows, in blocks of at most `rows` "
             "(one COMPUTE instruction of Gemmini's per DIM pixels of a row), each block occupying the array "
             "at least this many cycles; 1 = one continuous stream"},
            min_block_cycles, 1, 4096);
  v.boolean(
      {"chained_instructions", "",
       "a MATMUL/CONV that follows another on the array enters right behind its last row, as a fold "
       "follows the previous fold (pipelined_folds): a run of back-to-back instructions pays one preload "
       "and one skew fill and drain, not one per instruction (Gemmini: PRELOAD and COMPUTE commands "
       "share one pipeline through the mesh); needs pipelined_folds and model tile"},
      chained_instructions);
  v.boolean(
      {"preload_in_stream", "",
       "ws, pipelined folds: the next fold's stationary operand enters the array as R cycles of the "
       "stream behind the last block of pixels of the fold before, overlapping only that block (Gemmini: "
       "a PRELOAD command follows the fold's last COMPUTE through the mesh's one pipeline); false: it "
       "shifts into the shadow registers under the whole fold before"},
      preload_in_stream);
  v.boolean(
      {"output_stage", "",
       "an output stage on the accumulator's read path beside the vector lanes (NVDLA's SDP, Gemmini's "
       "accumulator mvout): a VEC output whose sums are in the accumulator runs there, one accumulator row "
       "of cols "
       "elements a cycle, beside the vector lanes, which take the next instruction meanwhile; false: the "
       "vector lanes run it"},
      output_stage);
}

double SystolicArrayConfig::rate(DType t) const {
  switch (t) {
    case DType::kFp16:
      return fp16_rate;
    case DType::kBf16:
      return bf16_rate;
    case DType::kFp32:
      return fp32_rate;
    case DType::kInt16:
      return int16_rate;
    case DType::kInt32:
    case DType::kInt64:
      return 0.0;  // accumulator types: the array has no such multipliers
    default:
      return 1.0;
  }
}

void ScratchpadConfig::visit(Visitor& v) {
  v.integer({"size_kib", "KiB", "capacity"}, size_kib, 1, int64_t{1} << 22);
  v.integer({"banks", "banks", "number of independently addressed banks (addresses interleave across them)"},
            banks, 1, 1024);
  v.integer({"bank_width_bytes", "bytes", "bytes one bank reads or writes per port per cycle"},
            bank_width_bytes, 1, 4096);
  v.integer({"ports", "ports", "accesses one bank serves per cycle"}, ports, 1, 16);
  v.integer({"read_latency_cycles", "cycles", "cycles from a read request to its data"}, read_latency_cycles,
            0, 1024);
  v.integer({"write_latency_cycles", "cycles", "cycles a write occupies before it is visible"},
            write_latency_cycles, 0, 1024);
}

void SramConfig::visit(Visitor& v) {
  v.group("input", "activations (input feature maps, the streamed operand)", [&] { input.visit(v); });
  v.group("weight", "weights (the stationary operand in weight-stationary)", [&] { weight.visit(v); });
  v.group("accumulator", "partial sums and outputs (int32 or fp32)", [&] { accumulator.visit(v); });
  v.boolean({"shared_scratchpad", "",
             "inputs and weights share one scratchpad: sram.input describes it (size_kib = the shared "
             "capacity) and sram.weight must be left unset"},
            shared_scratchpad);
}

void LoweringConfig::visit(Visitor& v) {
  v.choice({"conv_reduction", "",
            "a convolution's reduction: im2col = one CONV over kernel_h*kernel_w*in_channels; per_position "
            "= a 1x1 CONV per kernel position over the shifted input window, reducing over the input "
            "channels and accumulating (Gemmini's software)"},
           conv_reduction, kConvReductionNames);
  v.choice({"mapping_policy", "",
            "who picks matrix layers' tiles: search = npusim's cost-model search; gemmini = the rules of "
            "Gemmini's tiled_matmul_auto / tiled_conv_auto (needs rows = cols and int8)"},
           mapping_policy, kMappingPolicyNames);
  v.choice({"default_precision", "",
            "the precision a model compiles in when --precision is auto (the default): auto = the array's "
            "fastest type that needs no calibration (its fastest floating-point type, the most precise of "
            "equally fast ones: fp32, fp16, bf16; int8 where it has none); a product's toolchain may "
            "default to another (fp16 needs no calibration, int8 does)"},
           default_precision, kDefaultPrecisionNames);
}

void DmaConfig::visit(Visitor& v) {
  v.integer({"engines", "engines", "independent DMA engines shared by loads and stores"}, engines, 1, 64);
  v.integer({"queue_depth", "descriptors", "descriptors each engine can hold"}, queue_depth, 1, 4096);
  v.integer({"burst_bytes", "bytes", "bytes per DRAM burst request"}, burst_bytes, 8, 4096);
  v.integer({"max_outstanding", "bursts", "bursts an engine may have in flight"}, max_outstanding, 1, 4096);
  v.integer({"alignment_bytes", "bytes",
             "DRAM alignment rule: a transfer row not starting on this boundary costs an extra burst"},
            alignment_bytes, 1, 4096);
  v.integer({"setup_cycles", "cycles", "cycles to fetch and decode one descriptor", true, {0, 10000}},
            setup_cycles, 0, 100000);
}

void DramConfig::visit(Visitor& v) {
  v.choice({"model", "",
            "ideal = fixed latency, unlimited bandwidth; simple = latency + bandwidth; "
            "ddr4_3200, lpddr4_4266, hbm2 = banked timing presets"},
           model, kDramModelNames);
  v.integer({"channels", "channels",
             "independent channels, addresses interleaved every 256 bytes (banked presets: bandwidth scales "
             "with them; simple: they share bandwidth_gbps; not for ideal)"},
            channels, 1, 128);
  v.real({"latency_ns",
          "ns",
          "access latency (ideal and simple models; a banked preset's follows from its timing)",
          true,
          {0, 10000}},
         latency_ns, 0, 1e6);
  v.real({"bandwidth_gbps",
          "GB/s",
          "total bandwidth of the simple model (a banked preset's is per channel x channels)",
          true,
          {0.01, 10000}},
         bandwidth_gbps, 0.001, 1e5);
  v.integer(
      {"capacity_mib", "MiB",
       "DRAM size, 0 = unlimited; a model whose weights, activations and scratch do not fit is refused, "
       "and a serving scenario whose models do not all fit reloads weights over the host link on a "
       "switch (it bounds what fits; no timing of one run depends on it)",
       false},
      capacity_mib, 0, 1 << 24);
}

std::string_view DramConfig::unused_reason(std::string_view key) const {
  const bool ideal = model == DramModel::kIdeal, simple = model == DramModel::kSimple;
  if (key == "channels" && ideal) return "the ideal model has unlimited bandwidth and no channels";
  if (key == "bandwidth_gbps" && ideal) return "the ideal model has unlimited bandwidth";
  if (key == "bandwidth_gbps" && !ideal && !simple)
    return "a banked preset's bandwidth is its per-channel rate times dram.channels; set dram.channels, or "
           "choose dram.model: simple";
  if (key == "latency_ns" && !ideal && !simple)
    return "a banked preset's latency follows from its timing of activate, CAS and burst; choose dram.model: "
           "simple or ideal for a fixed latency";
  return "";
}

std::string_view SystolicArrayConfig::unused_reason(std::string_view key) const {
  if (key == "min_block_cycles" && min_block_cycles > 1) {
    if (dataflow != Dataflow::kWs)
      return "only a weight-stationary array streams output pixels, in blocks of at most `rows`";
    if (model == ArrayModel::kPe) return "the PE-level model streams every pixel back to back";
    return "";
  }
  if (key == "preload_in_stream" && preload_in_stream) {
    if (!folds_pipelined() || dataflow != Dataflow::kWs)
      return "the next fold's operand follows the stream of a weight-stationary array with pipelined folds "
             "(pipelined_folds, double_buffered, dataflow ws)";
    if (model == ArrayModel::kPe) return "the PE-level model shifts each operand in under the whole fold";
    return "";
  }
  if (key == "chained_instructions" && chained_instructions) {
    if (!folds_pipelined())
      return "instructions chain as pipelined folds do: it needs pipelined_folds, double_buffered and "
             "dataflow ws or is";
    if (model == ArrayModel::kPe) return "the PE-level model times each instruction from an empty array";
    return "";
  }
  if (key != "pipelined_folds" || !pipelined_folds) return "";
  if (dataflow == Dataflow::kOs)
    return "an output-stationary array keeps each fold's sums in its PEs until they drain: folds pipeline in "
           "ws and is only";
  if (!double_buffered)
    return "pipelined folds load the next fold's operand into the shadow registers of double_buffered";
  return "";
}

std::string_view NpuConfig::unused_reason(std::string_view path) const {
  constexpr std::string_view kDram = "dram.", kArray = "systolic_array.", kDramEnergy = "energy.dram.",
                             kMac = "energy.mac_pj.";
  if (path.substr(0, kDramEnergy.size()) == kDramEnergy) {
    const std::string_view model = kDramModelNames[static_cast<size_t>(dram.model)];
    const std::string_view rest = path.substr(kDramEnergy.size());
    return rest.substr(0, model.size()) == model && rest.size() > model.size() && rest[model.size()] == '.'
               ? ""
               : "each DRAM model's energy is declared under energy.dram.<model>; only the chosen model's "
                 "keys "
                 "are used";
  }
  if (path.substr(0, kMac.size()) == kMac) {
    for (size_t i = 1; i < kMacPrecisions.size(); ++i)
      if (path.substr(kMac.size()) == kDTypeNames[static_cast<size_t>(kMacPrecisions[i])] &&
          systolic_array.rate(kMacPrecisions[i]) <= 0)
        return "the array does not support this precision (its systolic_array rate is 0)";
    return "";
  }
  if (path.substr(0, kDram.size()) == kDram) return dram.unused_reason(path.substr(kDram.size()));
  if (path.substr(0, kArray.size()) == kArray)
    return systolic_array.unused_reason(path.substr(kArray.size()));
  return "";
}

std::vector<std::string_view> NpuConfig::governing_keys(std::string_view path) {
  if (path.substr(0, 5) == "dram." || path.substr(0, 12) == "energy.dram.") return {"dram.model"};
  if (path == "energy.mac_pj.fp16") return {"systolic_array.fp16_rate"};
  if (path == "energy.mac_pj.bf16") return {"systolic_array.bf16_rate"};
  if (path == "energy.mac_pj.fp32") return {"systolic_array.fp32_rate"};
  if (path == "energy.mac_pj.int16") return {"systolic_array.int16_rate"};
  if (path == "systolic_array.pipelined_folds")
    return {"systolic_array.dataflow", "systolic_array.double_buffered"};
  if (path == "systolic_array.min_block_cycles") return {"systolic_array.dataflow", "systolic_array.model"};
  if (path == "systolic_array.preload_in_stream")
    return {"systolic_array.pipelined_folds", "systolic_array.double_buffered", "systolic_array.dataflow",
            "systolic_array.model"};
  if (path == "systolic_array.chained_instructions")
    return {"systolic_array.pipelined_folds", "systolic_array.double_buffered", "systolic_array.dataflow",
            "systolic_array.model"};
  return {};
}

std::array<VecOpTiming, kNumVecOps> VectorConfig::default_ops() {
  std::array<VecOpTiming, kNumVecOps> t{};
  t.fill({4, 1});
  auto set = [&](VecOp op, int64_t lat, int64_t ii) { t[static_cast<int>(op)] = {lat, ii}; };
  set(VecOp::kDiv, 12, 4);
  set(VecOp::kPow, 16, 4);
  set(VecOp::kSigmoid, 8, 1);
  set(VecOp::kTanh, 8, 1);
  set(VecOp::kGelu, 8, 1);
  set(VecOp::kErf, 8, 1);
  set(VecOp::kExp, 8, 1);
  set(VecOp::kSqrt, 12, 2);
  set(VecOp::kRsqrt, 12, 2);
  set(VecOp::kRecip, 12, 2);
  set(VecOp::kRequantize, 6, 1);
  set(VecOp::kOutput, 6, 1);
  set(VecOp::kTranspose, 4, 2);
  return t;
}

void VectorConfig::visit(Visitor& v) {
  v.integer({"lanes", "lanes", "elements the vector unit processes per cycle"}, lanes, 1, 65536);
  v.integer(
      {"int8_dot_width", "MACs",
       "int8 products a lane sums per cycle in a depthwise conv on 8-bit codes (a dot product, as Arm's "
       "SDOT: 4); 1 = one MAC per lane per cycle, as for float types"},
      int8_dot_width, 1, 64);
  v.group("ops",
          "per-operation timing: latency_cycles (pipeline depth) and ii_cycles (cycles per element per lane)",
          [&] {
            for (int i = 0; i < kNumVecOps; ++i) {
              v.group(kVecOpNames[i], "", [&] {
                v.integer({"latency_cycles", "cycles", "pipeline latency", true, {0, 1000}},
                          ops[i].latency_cycles, 0, 100000);
                v.integer({"ii_cycles", "cycles", "initiation interval per element per lane", true, {1, 64}},
                          ops[i].ii_cycles, 1, 100000);
              });
            }
          });
}

void HostConfig::visit(Visitor& v) {
  v.real({"link_bandwidth_gbps", "GB/s",
          "host link bandwidth (each direction); also host-side copies of pipelines"},
         link_bandwidth_gbps, 0.001, 1e4);
  v.real({"link_latency_us", "us", "host link latency per transfer", true, {0, 10000}}, link_latency_us, 0,
         1e6);
  v.real(
      {"cpu_gops", "Gop/s", "host CPU throughput on fallback ops and pipeline kernels", true, {0.01, 10000}},
      cpu_gops, 0.001, 1e6);
  v.real(
      {"call_overhead_us", "us", "fixed cost of one host call (driver, synchronisation)", true, {0, 10000}},
      call_overhead_us, 0, 1e6);
}

void TechnologyConfig::visit(Visitor& v) {
  v.real({"node_nm", "nm",
          "process node of the design: energy.* and area.* figures, given at their reference_nm, scale to it "
          "(energy by node / reference, area by its square)"},
         node_nm, 3, 500);
}

double EnergyConfig::mac(DType t) const {
  for (size_t i = 0; i < kMacPrecisions.size(); ++i)
    if (kMacPrecisions[i] == t) return mac_pj[i];
  return mac_pj[0];  // uint8 runs on the int8 datapath
}

void EnergyConfig::visit(Visitor& v) {
  v.real(
      {"reference_nm", "nm", "process node at which the on-chip energies below are given (Horowitz: 45 nm)"},
      reference_nm, 3, 500);
  v.group(
      "mac_pj", "energy of one multiply-accumulate in the array, by input precision (accumulation included)",
      [&] {
        for (size_t i = 0; i < kMacPrecisions.size(); ++i)
          v.real({kDTypeNames[static_cast<size_t>(kMacPrecisions[i])], "pJ", "one MAC"}, mac_pj[i], 0, 1e4);
      });
  v.real(
      {"sram_read_pj_per_bit", "pJ/bit",
       "SRAM read energy per bit from an 8 KiB bank; an access of bank_width_bytes to a bank of B KiB costs "
       "8 * bank_width_bytes * this * sqrt(B / 8)"},
      sram_read_pj_per_bit, 0, 1e3);
  v.real(
      {"sram_write_pj_per_bit", "pJ/bit", "SRAM write energy per bit into an 8 KiB bank, scaled like reads"},
      sram_write_pj_per_bit, 0, 1e3);
  v.group(
      "dram",
      "off-chip energy of each DRAM model (not scaled by the technology node); only the chosen "
      "dram.model's keys apply",
      [&] {
        for (size_t m = 0; m < dram.size(); ++m) {
          v.group(kDramModelNames[m], "", [&] {
            v.real({"pj_per_bit", "pJ/bit", "energy per bit read or written (column access and I/O)"},
                   dram[m].pj_per_bit, 0, 1e4);
            if (m >= static_cast<size_t>(DramModel::kDdr4_3200))
              v.real({"activate_pj", "pJ", "energy of one row activate and its precharge (one per row miss)"},
                     dram[m].activate_pj, 0, 1e6);
          });
        }
      });
  v.real(
      {"vector_pj_per_element", "pJ",
       "vector-unit energy per element and initiation interval (an op of ii_cycles 4 costs 4x per element)"},
      vector_pj_per_element, 0, 1e4);
  v.real({"dma_pj_per_byte", "pJ/byte",
          "DMA engines and on-chip interconnect, per byte moved between DRAM and SRAM"},
         dma_pj_per_byte, 0, 1e4);
  v.real(
      {"host_link_pj_per_byte", "pJ/byte", "host link, per byte to or from the host (off-chip, not scaled)"},
      host_link_pj_per_byte, 0, 1e5);
  v.real({"static_mw_per_mm2", "mW/mm2",
          "static (leakage) power per mm2 of the area estimate, at technology.node_nm"},
         static_mw_per_mm2, 0, 1e4);
}

void AreaConfig::visit(Visitor& v) {
  v.real({"reference_nm", "nm", "process node at which the areas below are given"}, reference_nm, 3, 500);
  v.real({"pe_um2", "um2",
          "one PE of the array (multiplier, accumulator, operand registers) with every precision "
          "it supports"},
         pe_um2, 0, 1e7);
  v.real({"sram_mm2_per_mib", "mm2/MiB", "SRAM macro area per MiB (cells and periphery), each scratchpad"},
         sram_mm2_per_mib, 0, 1e4);
  v.real({"vector_lane_um2", "um2", "one vector-unit lane"}, vector_lane_um2, 0, 1e8);
  v.real({"dma_engine_mm2", "mm2", "one DMA engine with its descriptor queues"}, dma_engine_mm2, 0, 1e4);
}

void NpuConfig::visit(Visitor& v) {
  v.real({"frequency_mhz", "MHz", "NPU clock frequency"}, frequency_mhz, 1, 100000);
  v.integer(
      {"cores", "cores",
       "NPU cores, each with its own sequencer, array, SRAM, vector unit, DMA engines and queues as "
       "described below; they share the DRAM (its bandwidth) and the host link. A program runs on one "
       "core (its figures do not depend on this key); npusim run --split and a scenario's core use more",
       false},
      cores, 1, 64);
  v.group("sequencer", "instruction fetch, decode and dispatch", [&] { sequencer.visit(v); });
  v.group("systolic_array", "the matrix unit", [&] { systolic_array.visit(v); });
  v.group("sram", "on-chip scratchpads", [&] { sram.visit(v); });
  v.group("lowering", "how the compiler lowers matrix layers (the product's software)",
          [&] { lowering.visit(v); });
  v.group("dma", "DRAM <-> SRAM transfer engines", [&] { dma.visit(v); });
  v.group("dram", "off-chip memory", [&] { dram.visit(v); });
  v.group("vector", "the vector unit", [&] { vector.visit(v); });
  v.group("host", "host CPU and link, for fallback ops", [&] { host.visit(v); });
  v.group("technology", "the process node", [&] { technology.visit(v); });
  v.group("energy", "energy per action and static power (docs/energy.md)", [&] { energy.visit(v); });
  v.group("area", "area per unit (docs/energy.md)", [&] { area.visit(v); });
}

}  // namespace npusim::isa
