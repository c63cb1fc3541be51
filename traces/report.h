#pragma once
// The run report: a plain struct the simulator fills, written as JSON (docs/report.md documents
// every field) or as a human-readable summary. Deterministic: no pointers, no wall time except
// sim.wall_seconds and phases.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/energy.h"
#include "traces/event.h"

namespace npusim::traces {

class ReportVisitor;  // traces/report_visitor.h: the fields below are declared through it

// Where cycles went; compute + memory + scheduling + host = the span it describes.
struct Breakdown {
  uint64_t compute = 0;
  uint64_t memory = 0;
  uint64_t scheduling = 0;
  uint64_t host = 0;
  uint64_t total() const { return compute + memory + scheduling + host; }
  void visit(ReportVisitor& v);
};

struct UnitReport {
  std::string name;
  uint64_t instructions = 0;  // instructions (or transfers, for DMA engines) it executed
  uint64_t busy = 0;
  uint64_t idle = 0;
  std::array<uint64_t, kNumReasons> stalls{};  // indexed by Reason; kNone unused
  uint64_t stalled() const {
    uint64_t s = 0;
    for (uint64_t x : stalls) s += x;
    return s;
  }
};

// Where a report layer's work ran: on the NPU, all of it as host calls, or nowhere of its own (a node of the
// model fused into the layer `fused_into`: no instructions, 0 cycles). The report's layers[].placement
// spells it "npu", "host", "fused".
enum class LayerPlacement { kNpu, kHost, kFused };
inline constexpr std::array<std::string_view, 3> kLayerPlacementNames = {"npu", "host", "fused"};
std::string_view layer_placement_name(LayerPlacement p);
std::optional<LayerPlacement> parse_layer_placement(std::string_view text);

// What the compiler chose for a layer (docs/report.md, "What the compiler adds"): set from the compiler's
// plan by sim/model; none for a program run without it.
struct LayerMapping {
  std::string placement;    // matrix, vector, free (a view) or host
  std::string description;  // one line: how the layer was lowered
  int64_t tile_m = 0, tile_k = 0, tile_n = 0, tile_oh = 0, tile_ow = 0, tile_elems = 0;
  std::string loop_order;
  int64_t sram_input_bytes = 0, sram_weight_bytes = 0, sram_accumulator_bytes = 0;  // all its slots
  int64_t estimated_cycles = 0, estimated_compute_cycles = 0, estimated_dma_cycles = 0;
  int64_t candidates = 0;  // tilings the search evaluated
  std::string tile_limit;
  // An int8 layer's arithmetic: integer, integer+lut-epilogue, integer+float-epilogue, lut, codes or float
  // ("" otherwise;
  // docs/quantization.md).
  std::string int8_scheme;
  int64_t sram_bytes() const { return sram_input_bytes + sram_weight_bytes + sram_accumulator_bytes; }
  // The mapping in a few characters (docs/report.md, "Layer tables"): a conv's output tile rows x cols,
  // its output channels and reduction chunk ("4x160 n16 k27"), a GEMM's "m40 n128 k64", then the loop
  // order's letter (S spatial-outer, C channel-outer, H heads outer); a vector layer's elements per tile
  // ("e8192"); "view" for a free layer, "host" for a fallback.
  std::string short_text() const;
  void visit(ReportVisitor& v);
};

struct LayerReport {
  std::string name;
  std::string op;
  LayerPlacement placement = LayerPlacement::kNpu;
  std::string fused_into;
  uint64_t start_cycle = 0;
  uint64_t end_cycle = 0;
  uint64_t cycles = 0;          // end_cycle - start_cycle
  uint64_t compute_cycles = 0;  // matrix-unit cycles of the layer, fill and drain included
  uint64_t vector_cycles = 0;   // vector-unit busy cycles of the layer
  uint64_t macs = 0;  // useful MACs (the program's record of the layer), else those the array executed
  // The MAC slots the array spent on the layer when they differ from `macs` (padding: a depthwise conv
  // run as block-diagonal blocks; 0 on the vector unit).
  std::optional<uint64_t> array_macs;
  uint64_t instructions = 0;
  uint64_t dram_bytes_read = 0;     // bytes the layer's LOADs read
  uint64_t dram_bytes_written = 0;  // bytes the layer's STOREs wrote
  uint64_t misaligned_bursts = 0;   // extra DMA bursts its misaligned rows paid (dma.misaligned_bursts)
  // Cycles its instructions waited on SRAM bank conflicts (they add up to sram.bank_conflict_cycles).
  uint64_t bank_conflict_cycles = 0;
  // The number format the layer runs in ("int8", "fp16", ...): set by the compiler's precision plan;
  // empty when unknown.
  std::string precision;
  // What the layer tables show of its node (sim/model/layer_shapes.h; empty without the compiler's view):
  // its runtime inputs' and outputs' shapes ("1x24x112x112", several joined by ", "), and for a
  // convolution or pool its kernel ("3x3") and strides ("2x2"), and a convolution's groups.
  std::string input_shape, output_shape, kernel, stride;
  std::optional<uint64_t> groups;
  Breakdown breakdown;  // adds up to cycles
  // The layer's roofline bound (docs/report.md): set by the compiler's view of a model; none for host
  // layers and for programs run without it.
  std::optional<uint64_t> bound_cycles;
  // The bounds of the nodes fused into this layer (placement "fused", fused_into = this layer's name):
  // work a layer-by-layer program would pay for that this layer's code does not (fusion_saved_cycles).
  uint64_t fused_bound_cycles = 0;
  // The roofline bound of the layer's own compiled work: its instructions' MAC slots at the array's peak
  // in their precision, their vector work over the lanes, the bytes their LOADs and STOREs move at DRAM
  // peak, the highest of the three (compiler/backend/estimate/roofline.h compiled_rooflines). No unit
  // beats its peak, so it never exceeds the layer's cycles: the roof its efficiency is measured against.
  // Set by the compiler's view of a model; none for host and fused layers.
  std::optional<uint64_t> compiled_bound_cycles;
  // The node's share of the whole model's limit (Report::model_limit): its MACs at the peak of the unit
  // that bounds them (the array's, or the vector lanes' for a depthwise conv). None for nodes without
  // matrix work and for programs run without the compiler's view.
  std::optional<uint64_t> limit_cycles;
  bool fused() const { return placement == LayerPlacement::kFused; }
  // What the layer did, in actions that cost energy (not written: its energy is).
  Activity activity;
  // Its energy (traces::add_energy), static share included.
  EnergyBreakdown energy;
  // What the compiler adds (sim/model): its mapping; the value it read where the layer before left it in
  // SRAM and the DRAM bytes that saved; the fusion group it belongs to ("" = none).
  std::optional<LayerMapping> mapping;
  std::string on_chip_input;
  int64_t on_chip_bytes_saved = 0;
  std::string fusion_group;
  // A node of the model fused into another layer by the compiler (placement fused, no mapping of its
  // own): the values it reads that never touch DRAM, and the DRAM bytes a layer-by-layer program would
  // have moved for them.
  std::vector<std::string> on_chip_inputs;
  int64_t dram_bytes_saved = 0;
  bool absorbed() const { return fused() && !mapping; }
};

struct DramReport {
  std::string model;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  double avg_bandwidth_gbps = 0;   // (read + written) / latency
  double peak_bandwidth_gbps = 0;  // 0 = unlimited (ideal)
  uint64_t requests = 0;
  uint64_t row_hits = 0;
  uint64_t row_misses = 0;
  uint64_t refreshes = 0;
  void visit(ReportVisitor& v);
};

struct DmaReport {
  uint64_t transfers = 0;
  uint64_t bursts = 0;
  uint64_t misaligned_bursts = 0;
  uint64_t misalignment_extra_cycles = 0;  // DRAM data-bus cycles the misaligned bursts occupied
  void visit(ReportVisitor& v);
};

struct SramReport {
  uint64_t bank_conflicts = 0;        // instructions that hit a bank conflict
  uint64_t bank_conflict_cycles = 0;  // cycles added by them
  void visit(ReportVisitor& v);
};

struct HostReport {
  uint64_t calls = 0;
  uint64_t bytes_to_host = 0;
  uint64_t bytes_from_host = 0;
  void visit(ReportVisitor& v);
};

struct SimInfo {
  double wall_seconds = 0;
  uint64_t instructions = 0;
  bool functional = false;
  void visit(ReportVisitor& v);
};

// The host's wall time of each phase of the command that made the report, in seconds (0: the phase did
// not run); the simulation's own is sim.wall_seconds. What a user waits for, phase by phase.
struct PhaseTimes {
  double import_seconds = 0;       // reading the model and inferring its shapes
  double calibration_seconds = 0;  // the precision plan: calibration, equalization, the recipe search
  double compile_seconds = 0;      // the passes and the back end: mapping search, memory plan, code
  double accuracy_seconds = 0;     // --accuracy and --advise-sqnr: the reference and quantized runs
  void visit(ReportVisitor& v);
};

// The summary's line of the host's time by phase ("host time  import 0.012 s, calibration 16.1 s, ..."):
// the phases that ran, in the order they ran; `simulate_seconds` last (0: no simulation).
std::string phases_line(const PhaseTimes& p, double simulate_seconds);

// What a run was: enough to say later which model, configuration and npusim produced a report.
struct RunInfo {
  std::string command;            // the command line, arguments quoted where needed
  std::string version;            // npusim's version (git describe at build time)
  std::string model;              // the MODEL argument (a file, or a built-in spec such as "demo")
  std::string model_sha256;       // of the model (or program) file's bytes; empty for a built-in spec
  std::string config;             // --config as given ("" = the built-in edge preset)
  std::vector<std::string> sets;  // --set overrides, in order
  // Who chose a compiled model's precision: --precision, the configuration's default, the array's widest
  // floating-point type ("" for a program run).
  std::string precision_source;
  // What a compiled model's mapping search minimised (--objective: cycles, energy, edp; "" for a program
  // run).
  std::string objective;
  // Every configuration parameter as resolved (dotted key, canonical value text), declaration order.
  std::vector<std::pair<std::string, std::string>> parameters;
  void visit(ReportVisitor& v);
};

// A top-level section that a stage outside the simulator adds to the report (`e2e`, `multicore`,
// `generation`, `profiles`, `requests`, the compiler's `fusion`, `compile`, `accuracy`): its data, which
// declares its fields through visit() as the report's own do. visit() visits the section as one field of
// the report (traces/report_visitor.h).
class ReportSection {
 public:
  virtual ~ReportSection() = default;
  virtual void visit(ReportVisitor& v) = 0;
};

// A section of type T, whose T::visit(ReportVisitor&) declares its members, under `key`.
template <class T>
class TypedSection final : public ReportSection {
 public:
  TypedSection(std::string key, T value) : key_(std::move(key)), value_(std::move(value)) {}
  void visit(ReportVisitor& v) override;  // report_visitor.h
  const T& value() const { return value_; }

 private:
  std::string key_;
  T value_;
};

// A section that is JSON text from a library that cannot see traces/: the compiler's `compile` and
// `accuracy` (compiler/ depends on isa/ only).
class JsonSection final : public ReportSection {
 public:
  JsonSection(std::string key, std::string json) : key_(std::move(key)), json_(std::move(json)) {}
  void visit(ReportVisitor& v) override;

 private:
  std::string key_;
  std::string json_;
};

using ReportSections = std::vector<std::shared_ptr<ReportSection>>;

template <class T>
std::shared_ptr<ReportSection> make_section(std::string key, T value) {
  return std::make_shared<TypedSection<T>>(std::move(key), std::move(value));
}

struct Report {
  uint64_t total_cycles = 0;
  double frequency_mhz = 0;
  double latency_ms = 0;
  uint64_t macs = 0;
  double array_utilization = 0;  // macs / (rows * cols * total_cycles)
  std::string dataflow;
  int64_t array_rows = 0;
  int64_t array_cols = 0;
  // MACs per PE per cycle by precision name ("int8", "fp16", ...): the array's peak for each.
  std::vector<std::pair<std::string, double>> array_macs_per_pe_per_cycle;
  uint64_t vector_lanes = 0;  // the vector unit's lanes: its peak elements (or depthwise MACs) per cycle
  // int8 products a lane sums per cycle in a depthwise conv on codes (vector.int8_dot_width)
  uint64_t vector_int8_dot_width = 1;
  Breakdown breakdown;  // adds up to total_cycles
  DramReport dram;
  DmaReport dma;
  SramReport sram;
  HostReport host;
  std::vector<UnitReport> units;
  std::vector<LayerReport> layers;
  SimInfo sim;
  // Energy and area (traces::add_energy; docs/energy.md): none for a report that never had them.
  std::optional<EnergyReport> energy;
  std::optional<AreaReport> area;
  std::optional<RunInfo> run;        // set by the command line (docs/report.md "run")
  std::optional<PhaseTimes> phases;  // set by the command line for a compiled model
  // The roof of the program as compiled (docs/report.md "Roofline"): all its instructions' work with each
  // unit at its peak and the three overlapping (the highest of the layers' summed array, lanes and DRAM
  // terms); never above total_cycles. Set by the compiler's view of a model.
  std::optional<uint64_t> compiled_bound_cycles;
  // The whole model's physical limit (docs/report.md "Model limit"): the highest of its three terms, each
  // unit at its peak and all overlapping. Set by the compiler's view of a model.
  std::optional<uint64_t> model_limit_cycles;
  struct ModelLimit {
    double array_cycles = 0;   // the matrix work at the array's peak
    double vector_cycles = 0;  // depthwise and grouped work at the vector lanes' peak
    double dram_cycles = 0;    // every weight, and the model's inputs and outputs, once at DRAM peak
    // Not a term: the array's matrix layers each alone in whole folds of the array, one output pixel a row
    // (how narrow the layers are for this array, compiler/backend/estimate/model_limit.h); 0 when not
    // computed.
    double array_fold_cycles = 0;
    void visit(ReportVisitor& v);
  };
  std::optional<ModelLimit> model_limit;  // the three terms
  // What fusion kept out of DRAM (the layers' fused nodes): set by the compiler's view of a model.
  struct Fusion {
    uint64_t nodes = 0;            // nodes fused into program layers
    uint64_t tensors = 0;          // values that never touch DRAM
    uint64_t bytes_saved = 0;      // DRAM bytes a layer-by-layer program would have moved for them
    void visit(ReportVisitor& v);  // the report's `fusion` section
  };
  std::optional<Fusion> fusion;
  // The sections stages outside the simulator add, in the order added: written after `ops`.
  ReportSections sections;

  // Every field in JSON order (traces/report_fields.cpp): the writer, the reader, diff, sweeps and the
  // docs check walk it.
  void visit(ReportVisitor& v);
};

// The roofline (docs/report.md). A layer's efficiency is compiled_bound_cycles / cycles (its own compiled
// work against the roof of the units it runs on, at most 1): none without a compiled bound or cycles.
std::optional<double> efficiency(const LayerReport& l);
// What fusion saved the layer: the bounds of the model's nodes fused into it (fused_bound_cycles), which
// cost it nothing of their own; none without a compiled bound.
std::optional<uint64_t> fusion_saved_cycles(const LayerReport& l);
// The model's nodes' bound: the sum of the layers' bounds, each node as if it ran alone (fused nodes
// included); none when no layer has one.
std::optional<uint64_t> model_bound_cycles(const Report& r);
// model_bound_cycles / total_cycles: how far the run beats a layer-by-layer program at its nodes' roofs
// (above 1 where fusion keeps tensors on chip). Not an efficiency.
std::optional<double> unfused_bound_ratio(const Report& r);
// compiled_bound_cycles / total_cycles, at most 1.
std::optional<double> compiled_efficiency(const Report& r);
// model_limit_cycles / total_cycles: the report's model_efficiency, at most 1.
std::optional<double> model_limit_efficiency(const Report& r);
// model_limit_cycles / max(model_limit.array_fold_cycles, vector_cycles, dram_cycles), at most 1: the share
// of the limit a schedule reaches that maps the matrix layers one at a time, one output pixel a row, in whole
// folds (packing pixels or layers into a fold does better); none without a model limit or its fold figure.
std::optional<double> whole_fold_share(const Report& r);
// The summary and the HTML report name the whole-fold share below this share of the limit (above it the
// layers' shapes are not what holds the model back).
inline constexpr double kWholeFoldShareShown = 0.95;
// The term that sets the limit: "array", "vector" or "dram".
std::string_view limit_bound_by(const Report::ModelLimit& m);

// The unit a layer's work ran on, the layer tables' one vocabulary: "host" (a CPU fallback), "fused" (a
// node another layer does the work of), else "array" when the matrix unit worked on it (compute_cycles:
// its MACs ran there, whatever its vector epilogue or fused depthwise conv did), "vector" when only the
// vector unit did, "dma" for a layer that only moves data, "none" for one that does nothing (a view).
std::string_view layer_unit(const LayerReport& l);
// Useful MACs against the peak of the unit the layer ran on over its cycles: macs / (rows x cols x the
// array's rate in its precision x cycles) on the array, macs / (vector_lanes x cycles) on the vector
// unit (x vector_int8_dot_width for an int8 layer). None on other units, without MACs, cycles or a known
// peak.
std::optional<double> mac_utilization(const Report& r, const LayerReport& l);
// "3x3 s2x2 g96": a convolution's or pool's kernel, strides and groups ("" for other layers).
std::string window_text(const LayerReport& l);

// A fraction as a percentage in prose: one decimal, and below 1% enough decimals for two significant
// digits, so a small non-zero share (a 256x256 array's utilization) never reads "0.0%". The summary and
// the HTML page say figures with it.
std::string percent(double fraction);

// The layers' short display names (isa::display_names), in order: the summary, the layer CSV and the
// report's layers[].display_name use them; layers[].name stays the full name.
std::vector<std::string> display_names(const Report& r);

// The precision plan the layers ran in and the peak it allows (docs/report.md, "Precision").
struct PrecisionFigures {
  std::string plan;  // "fp32" (every layer), or "mixed: 40 int8, 3 fp16" (most layers first)
  std::vector<std::pair<std::string, uint64_t>> layers;  // layers per precision, most first
  // The array's peak MACs per cycle under the plan: rows * cols * the rate of the plan's precision; for a
  // mixed plan the rate at which the layers' MACs would all run at their precisions' peaks
  // (sum of MACs / sum of MACs_p / peak_p).
  double peak_macs_per_cycle = 0;
  double utilization = 0;  // macs / (peak_macs_per_cycle * total_cycles)
};
// None when no layer's precision is known (a program run without the compiler's view).
std::optional<PrecisionFigures> precision_figures(const Report& r);
// run.precision_source as the summary and the HTML page say it: "chosen by --precision int8", or the
// configuration's default as it is ("edge's default precision (...)").
std::string precision_source_text(const std::string& source);

void write_report_json(const Report& r, std::ostream& out);
std::string report_json(const Report& r);
// A human-readable report: total cycles, latency, utilization, breakdown, DRAM, per unit, time by op
// type, the `top_layers` slowest layers (kAllLayers: every layer).
inline constexpr size_t kAllLayers = static_cast<size_t>(-1);
std::string summary_text(const Report& r, size_t top_layers = 10);

}  // namespace npusim::traces
