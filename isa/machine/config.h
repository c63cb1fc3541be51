#pragma once
// The NPU's parameters: one struct per unit, defaults in class, declared once through visit().
// These are what the compiler targets and what the hardware models are built from; the defaults are
// the `edge` preset (configs/edge.yaml restates them with sources).
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "isa/isa.h"
#include "isa/machine/visitor.h"

namespace npusim::isa {

enum class Dataflow : uint8_t { kWs = 0, kOs = 1, kIs = 2 };
inline constexpr std::array<std::string_view, 3> kDataflowNames = {"ws", "os", "is"};

enum class ArrayModel : uint8_t { kTile = 0, kPe = 1 };
inline constexpr std::array<std::string_view, 2> kArrayModelNames = {"tile", "pe"};

// How a convolution's reduction is formed: im2col = one CONV reduces over R*S*C (the array sees the
// kernel positions and the channels as one K); per_position = a 1x1 CONV per kernel position over the
// shifted input window, reducing over the input channels only and accumulating (Gemmini's software).
enum class ConvReduction : uint8_t { kIm2col = 0, kPerPosition = 1 };
inline constexpr std::array<std::string_view, 2> kConvReductionNames = {"im2col", "per_position"};

// Who picks matrix layers' tiles: npusim's cost-model search, or a product's own compiler rules.
enum class MappingPolicy : uint8_t { kSearch = 0, kGemmini = 1 };
inline constexpr std::array<std::string_view, 2> kMappingPolicyNames = {"search", "gemmini"};

// The precision a model compiles in when the command line does not choose one (--precision auto): the
// array's widest floating-point type, or the one a product's toolchain defaults to.
enum class DefaultPrecision : uint8_t { kAuto = 0, kFp32 = 1, kFp16 = 2, kBf16 = 3, kInt8 = 4 };
inline constexpr std::array<std::string_view, 5> kDefaultPrecisionNames = {"auto", "fp32", "fp16", "bf16",
                                                                           "int8"};

enum class DramModel : uint8_t { kIdeal = 0, kSimple = 1, kDdr4_3200 = 2, kLpddr4_4266 = 3, kHbm2 = 4 };
inline constexpr std::array<std::string_view, 5> kDramModelNames = {"ideal", "simple", "ddr4_3200",
                                                                    "lpddr4_4266", "hbm2"};

// Fetch/decode and the per-unit instruction queues.
struct SequencerConfig {
  int64_t queue_depth = 8;
  int64_t dispatch_cycles = 1;
  void visit(Visitor& v);
};

// The MAC array.
struct SystolicArrayConfig {
  int64_t rows = 32;
  int64_t cols = 32;
  Dataflow dataflow = Dataflow::kWs;
  bool double_buffered = true;
  bool pipelined_folds = true;
  ArrayModel model = ArrayModel::kTile;
  double fp16_rate = 0.5;
  double bf16_rate = 0.5;
  double fp32_rate = 0.25;
  double int16_rate = 0.5;  // int16 activations x int8 weights, int64 accumulation
  bool fp16_accumulate_fp32 = true;
  int64_t min_block_cycles = 1;       // ws: cycles a block of at most `rows` streamed pixels takes at least
  bool chained_instructions = false;  // a MATMUL/CONV enters right behind the previous one's last row
  bool preload_in_stream = false;     // ws: the next fold's operand overlaps only the last block before
  // VEC output on accumulator sums runs on the accumulator's read path beside the vector lanes
  // (isa/timing/units.h on_output_stage, output_stage_cycles).
  bool output_stage = true;
  void visit(Visitor& v);
  // MAC rate of `t` relative to int8 (0 when the array does not support it).
  double rate(DType t) const;
  // Whether one instruction's folds stream back to back (pipelined_folds takes effect: it needs the
  // shadow registers of double_buffered and a stationary operand, ws or is).
  bool folds_pipelined() const { return pipelined_folds && double_buffered && dataflow != Dataflow::kOs; }
  // Whether consecutive MATMUL/CONV instructions pipeline like one instruction's folds
  // (chained_instructions takes effect: it needs pipelined folds and the tile model).
  bool instructions_chained() const {
    return chained_instructions && folds_pipelined() && model == ArrayModel::kTile;
  }
  // Why `key` has no effect on this array ("" when it has).
  std::string_view unused_reason(std::string_view key) const;
};

// One on-chip scratchpad made of banks.
struct ScratchpadConfig {
  int64_t size_kib = 256;
  int64_t banks = 8;
  int64_t bank_width_bytes = 16;
  int64_t ports = 1;
  int64_t read_latency_cycles = 2;
  int64_t write_latency_cycles = 1;
  void visit(Visitor& v);
  int64_t size_bytes() const { return size_kib * 1024; }
};

// The input, weight and accumulator scratchpads. With shared_scratchpad, inputs and weights live in
// one scratchpad described by `input` (its size_kib is the shared capacity): the weight buffer is the
// same bytes, and buffer(kWeight) returns `input`.
struct SramConfig {
  ScratchpadConfig input{256, 8, 16, 1, 2, 1};
  ScratchpadConfig weight{128, 8, 16, 1, 2, 1};
  ScratchpadConfig accumulator{128, 8, 32, 1, 2, 1};
  bool shared_scratchpad = false;
  void visit(Visitor& v);
  const ScratchpadConfig& buffer(Buffer b) const {  // inline: the simulator asks per transfer
    if (b == Buffer::kWeight) return shared_scratchpad ? input : weight;
    return b == Buffer::kAccumulator ? accumulator : input;
  }
  // The buffer whose bytes `b` addresses (kInput for kWeight when shared).
  Buffer storage(Buffer b) const { return shared_scratchpad && b == Buffer::kWeight ? Buffer::kInput : b; }
};

// How the compiler lowers matrix layers onto the array: choices a product's hardware and software make.
struct LoweringConfig {
  ConvReduction conv_reduction = ConvReduction::kIm2col;
  MappingPolicy mapping_policy = MappingPolicy::kSearch;
  DefaultPrecision default_precision = DefaultPrecision::kAuto;
  void visit(Visitor& v);
};

// DMA engines between DRAM and the scratchpads.
struct DmaConfig {
  int64_t engines = 2;
  int64_t queue_depth = 8;
  int64_t burst_bytes = 64;
  int64_t max_outstanding = 16;
  int64_t alignment_bytes = 64;
  int64_t setup_cycles = 16;
  void visit(Visitor& v);
};

// Off-chip memory. Which keys a model uses: ideal latency_ns; simple latency_ns, bandwidth_gbps and
// channels; the banked presets channels (their latency and per-channel bandwidth are the preset's).
struct DramConfig {
  DramModel model = DramModel::kLpddr4_4266;
  int64_t channels = 2;
  double latency_ns = 100.0;
  double bandwidth_gbps = 17.0;
  int64_t capacity_mib = 0;  // 0 = unlimited (docs/scenarios.md, "Memory")
  void visit(Visitor& v);
  // Why the parameter `key` of this group does not apply to the chosen model ("" when it does).
  std::string_view unused_reason(std::string_view key) const;
};

// Latency and throughput of one vector-unit operation.
struct VecOpTiming {
  int64_t latency_cycles = 4;
  int64_t ii_cycles = 1;  // cycles between successive elements on one lane
};

// The vector unit: lanes and a per-op timing table (index = VecOp).
struct VectorConfig {
  int64_t lanes = 32;
  // int8 x int8 products one lane adds into its int32 sum per cycle in a depthwise convolution (VEC dwconv
  // on 8-bit codes): a dot product of int8_dot_width taps, as Arm's SDOT and Hexagon HVX's vrmpy do 4 in a
  // 32-bit lane. 1: one multiply-accumulate a cycle, as for the float types.
  int64_t int8_dot_width = 4;
  std::array<VecOpTiming, kNumVecOps> ops = default_ops();
  void visit(Visitor& v);
  static std::array<VecOpTiming, kNumVecOps> default_ops();
};

// The host CPU and the link to it, for ops that fall back.
struct HostConfig {
  double link_bandwidth_gbps = 4.0;
  double link_latency_us = 2.0;
  double cpu_gops = 20.0;
  double call_overhead_us = 10.0;
  void visit(Visitor& v);
};

// Off-chip energy of one DRAM model: per bit moved (column access and I/O) and per row activate
// (activate + precharge; banked models only, which count row misses).
struct DramEnergyConfig {
  double pj_per_bit = 5.0;
  double activate_pj = 0.0;
};

// The process the design is built in. Per-action energies and areas are given at their own reference
// nodes (energy.reference_nm, area.reference_nm) and scaled to this one (docs/energy.md).
struct TechnologyConfig {
  double node_nm = 28.0;
  void visit(Visitor& v);
  // Dynamic energy scales with switched capacitance, proportional to the feature size (the supply
  // voltage has stayed near 0.9-1.0 V since 45 nm): E(node) = E(ref) * node / ref.
  double energy_scale(double reference_nm) const { return node_nm / reference_nm; }
  // Area scales with the square of the feature size.
  double area_scale(double reference_nm) const { return (node_nm / reference_nm) * (node_nm / reference_nm); }
};

// Energy per action (docs/energy.md): counts the simulator already makes times these, plus static power
// over time. On-chip figures are at reference_nm; DRAM and host-link figures are off-chip and not scaled.
struct EnergyConfig {
  double reference_nm = 45.0;
  // Energy of one MAC (multiply and accumulate) by input precision: int8, fp16, bf16, fp32, int16 (x int8).
  std::array<double, 5> mac_pj = {0.3, 2.0, 2.0, 4.6, 0.6};
  // SRAM energy per bit of an access to an 8 KiB bank; it scales with sqrt(bank capacity / 8 KiB).
  double sram_read_pj_per_bit = 0.156;
  double sram_write_pj_per_bit = 0.172;
  // Index = DramModel.
  std::array<DramEnergyConfig, 5> dram = {DramEnergyConfig{5.0, 0.0}, DramEnergyConfig{5.0, 0.0},
                                          DramEnergyConfig{15.0, 2000.0}, DramEnergyConfig{4.0, 1000.0},
                                          DramEnergyConfig{3.0, 909.0}};
  double vector_pj_per_element = 1.0;
  double dma_pj_per_byte = 1.5;
  double host_link_pj_per_byte = 40.0;
  double static_mw_per_mm2 = 5.0;
  void visit(Visitor& v);
  // The precision whose MAC energy mac_pj[i] is (kMacPrecisions[i]).
  double mac(DType t) const;
};
inline constexpr std::array<DType, 5> kMacPrecisions = {DType::kInt8, DType::kFp16, DType::kBf16,
                                                        DType::kFp32, DType::kInt16};

// Silicon area (docs/energy.md), at reference_nm, scaled to technology.node_nm by area_scale().
struct AreaConfig {
  double reference_nm = 45.0;
  double pe_um2 = 2500.0;
  double sram_mm2_per_mib = 5.8;
  double vector_lane_um2 = 12000.0;
  double dma_engine_mm2 = 0.05;
  void visit(Visitor& v);
};

// The whole NPU.
struct NpuConfig {
  double frequency_mhz = 1000.0;
  // Cores, each with everything below but the DRAM and the host link, which they share (arch/core/uncore.h).
  // A program runs on one core; `npusim run --cores` places a model on several (docs/multicore.md).
  int64_t cores = 1;
  SequencerConfig sequencer;
  SystolicArrayConfig systolic_array;
  SramConfig sram;
  LoweringConfig lowering;
  DmaConfig dma;
  DramConfig dram;
  VectorConfig vector;
  HostConfig host;
  TechnologyConfig technology;
  EnergyConfig energy;
  AreaConfig area;
  void visit(Visitor& v);
  // Why the parameter at dotted `path` has no effect on this machine ("" when it has): a DRAM key the
  // chosen DRAM model does not use, pipelined_folds on an array that cannot pipeline. The loader
  // rejects such a key when it is given in the same or a later layer than the keys that decide it
  // (governing_keys).
  std::string_view unused_reason(std::string_view path) const;
  // The keys whose values decide unused_reason(path): dram.model for DRAM keys (and DRAM energy keys),
  // the precision's rate for a MAC energy.
  static std::vector<std::string_view> governing_keys(std::string_view path);
};

}  // namespace npusim::isa
