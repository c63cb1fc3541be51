#pragma once
// What the back end gives back (compile.h): the program, one LayerPlan per node, the memory plan, the
// host fallbacks and where every tensor lives; and the errors it throws. Its own header so that the
// lowerings fill these types without including the driver.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compiler/backend/estimate/model_limit.h"
#include "compiler/backend/mapping/mapping.h"
#include "compiler/ir/graph.h"
#include "isa/program.h"

namespace npusim::compiler {

// A layer the back end cannot map (e.g. a tile that does not fit the SRAM even at its smallest).
class CompileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An imposed mapping (CompileOptions::mapping) that cannot apply: the message names where the value came
// from, the layer and the violated constraint. A user error, unlike the CompileError it refines.
class MappingError : public CompileError {
 public:
  using CompileError::CompileError;
};

// What the mapper chose for one node.
struct LayerPlan {
  std::string name;
  std::string op;
  Placement placement = Placement::kHost;
  std::string mapping;  // one line: e.g. "conv 3x3 s1 as CONV, 9 groups per block" or the vector lowering
  // An int8 layer's arithmetic (int8.h): "integer" (int32 sums, requantized), "integer+float-epilogue"
  // (the activation in fp32 after the sums), "lut" (a table on the codes), "codes" (moves or selects codes),
  // "float" (dequantize, fp32, quantize); "" for other layers.
  std::string int8_scheme;
  // Matrix layers: the tile (output rows/cols or M, reduction chunk, output channels/N) and loop order.
  int64_t tile_m = 0, tile_k = 0, tile_n = 0;
  int64_t tile_oh = 0, tile_ow = 0;  // conv: output rows x cols per tile (tile_m = tile_oh * tile_ow)
  int64_t group_block = 0;           // grouped conv: groups mapped together as one block-diagonal CONV
  int64_t tile_elems = 0;  // vector layers that stream SRAM tiles: elements per tile (vector_tiling.h)
  std::string loop_order;  // e.g. "n-outer (weights resident)"
  // Why the tile is not larger, e.g. "sram.accumulator 94% full" or "whole layer" (matrix layers), "a
  // smaller tile pipelines better: ..." (vector layers).
  std::string tile_limit;
  int64_t sram_input_bytes = 0, sram_weight_bytes = 0, sram_acc_bytes = 0;  // all slots of the layer
  int64_t est_cycles = 0;    // the layer after its predecessor on an idle machine (simulated when timed)
  int64_t model_cycles = 0;  // the closed-form cost model's figure (ranks the search's candidates)
  int64_t est_compute_cycles = 0, est_dma_cycles = 0;  // the closed form's compute and DMA parts
  int64_t macs = 0;
  int64_t instructions = 0;
  int64_t candidates = 0;  // tilings the search evaluated
  // The same choices as imposable values (what --mapping-out writes): placement and, for matrix layers,
  // the tiling; imposing them reproduces this layer.
  LayerMapping chosen;
  // The layer's roofline bound in cycles (backend/estimate/roofline.h): none for host layers, 0 for free
  // ones.
  std::optional<int64_t> bound_cycles;
  // The roofline bound of the layer's instructions (backend/estimate/roofline.h compiled_rooflines): the
  // roof its efficiency is measured against; none for a layer without NPU instructions. Set by
  // bound_as_imported.
  std::optional<int64_t> compiled_bound_cycles;
  // On-chip residency (backend/fusion/residency.h): the value this layer read where the layer before left it
  // in the input scratchpad ("" = none), and the DRAM bytes that saved (its write and its read).
  std::string on_chip_input;
  int64_t on_chip_bytes_saved = 0;
  // The on-chip input also has a DRAM copy (a squeeze-and-excitation block's input, which its Mul reads
  // where the pool left it): a read saved, not a tensor kept off DRAM.
  bool on_chip_input_in_dram = false;
  // Layers fused into one group (backend/fusion/se_fusion.h): the group's name, "" = none. A squeeze-and-
  // excitation block's pool, the layers on its pooled vector and its Mul are "se:" + the pool's name.
  std::string fusion_group;
  // A node whose work another layer's code does (a fused attention block, backend/fusion/attention_fusion.h):
  // that layer's name ("" = none). The layer emits no instructions; its plan keeps its own MACs and bound.
  std::string fused_into;
};

// A node that runs on the host CPU.
struct Fallback {
  std::string node;
  std::string op;
  std::string reason;
  int64_t est_cycles = 0;  // isa::timing::host_cycles of its HOSTCALL
};

// Where one tensor of a host op lives in DRAM, for executing the node functionally.
struct HostTensor {
  std::string name;  // graph value name
  uint64_t dram_addr = 0;
  Shape shape;                           // logical (ONNX) shape
  std::vector<int> layout;               // memory order of the logical dims, empty = ONNX order
  isa::DType dtype = isa::DType::kFp32;  // storage type in DRAM
  // The value's ONNX element type: integer and bool values are stored as int32 and must be read back
  // as integers (exactly) when the node is evaluated.
  DataType value_dtype = DataType::kFloat32;
  // Elements between consecutive indices of each dim in memory order; empty = dense. A value written in
  // place into its slice of a Concat's buffer (CompileOptions::fold_concats) has that buffer's rows.
  std::vector<int64_t> strides;
  // CompileResult::on_chip only: a GEMM chain's value in column blocks [N / block][rows][block] of its last
  // dim N (backend/fusion/residency.h); 0 = as layout and strides say.
  int64_t block = 0;
};
struct HostCallInfo {
  uint32_t host_op = 0;            // index into Program::host_ops
  Node node;                       // the ONNX node to evaluate (constant inputs are in `constants`)
  std::vector<HostTensor> inputs;  // runtime inputs in node.inputs order (constants are omitted here)
  std::vector<HostTensor> outputs;
  std::vector<std::pair<std::string, Tensor>> constants;  // constant inputs of the node by name
  int64_t opset = 17;  // the model's default-domain opset: the node's semantics (Scan-8 reads sequence_lens)
};

struct MemoryPlan {
  uint64_t activation_bytes = 0;  // peak DRAM for activations with lifetime-based reuse
  uint64_t activation_bytes_no_reuse = 0;
  uint64_t weight_bytes = 0;   // data segments (weights, biases, constants) as laid out
  uint64_t scratch_bytes = 0;  // DRAM scratch for multi-pass lowerings
  uint64_t activation_base = 0, weight_base = 0;
};

struct InsertedTranspose {
  std::string node, input, output;
  Shape shape;
  std::vector<int> from_layout, to_layout;
  std::string reason;
};

// A node of the model as imported whose work a program layer does (compiler/passes/absorbed.h).
struct AbsorbedLayer {
  std::string name;
  std::string op;
  std::string into;                     // the program layer (LayerPlan::name)
  std::optional<int64_t> bound_cycles;  // its own roofline bound, as if it ran alone
  // The values it reads that never touch DRAM (intermediates of the fused chain), and the DRAM bytes a
  // layer-by-layer program would have moved for them: each written once and read by each of its readers,
  // in the layer's precision.
  std::vector<std::string> on_chip_inputs;
  int64_t dram_bytes_saved = 0;
};

struct CompileResult {
  isa::Program program;
  std::vector<LayerPlan> layers;        // one per node, graph order
  std::vector<AbsorbedLayer> absorbed;  // set by bound_as_imported (backend/estimate/bounds.h)
  // The roof of the program as compiled (set by bound_as_imported): all its instructions' work, each
  // unit at its peak and the three overlapping (the highest of the summed array, lanes and DRAM terms of
  // compiled_rooflines). Total cycles are never fewer.
  std::optional<int64_t> compiled_bound_cycles;
  // The whole model's physical limit (backend/estimate/model_limit.h), set by bound_as_imported: none when
  // no layer's precision is known.
  std::optional<backend::ModelLimit> model_limit;
  MemoryPlan memory;
  std::vector<Fallback> fallbacks;
  std::vector<HostCallInfo> host_calls;
  std::vector<InsertedTranspose> transposes;
  // Where every runtime value lives (address, layout, storage dtype: int8/uint8 codes under an int8
  // plan), for tests that read intermediate tensors from a functional run.
  std::vector<HostTensor> values;
  // The values that never touch DRAM (backend/fusion/residency.h), as `values` but with dram_addr their byte
  // address in the input scratchpad, where they lie dense once their producer's layer is done.
  std::vector<HostTensor> on_chip;
  double compile_seconds = 0;
};

}  // namespace npusim::compiler
