#pragma once
// Shared state of one compile() run and the instruction helpers every lowering uses (internal to the
// back end). Values live in DRAM in their physical layout (Value::layout); `phys` is the logical shape
// permuted into memory order, outermost first.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/backend/core/emitter.h"
#include "compiler/backend/fusion/fusion_state.h"
#include "compiler/backend/memory/concat_in_place.h"
#include "compiler/backend/memory/strided_views.h"
#include "compiler/backend/options.h"
#include "compiler/backend/result.h"
#include "compiler/ir/graph.h"
#include "isa/ceil_div.h"
#include "isa/isa.h"
#include "isa/machine/config.h"
#include "isa/timing/dma.h"

namespace npusim::compiler::backend {

// A scratchpad slot's bytes rounded up to the 64-byte alignment the lowerings allocate SRAM slots at.
inline int64_t round64(int64_t bytes) { return ceil_div(bytes, 64) * 64; }

// A runtime tensor in DRAM.
struct DramTensor {
  uint64_t addr = 0;
  uint64_t bytes = 0;
  Shape shape;                           // logical
  std::vector<int> layout;               // memory order of logical dims; empty = ONNX order
  Shape phys;                            // dims in memory order
  isa::DType dtype = isa::DType::kFp32;  // storage type: the precision, or int32 for integer/bool values
  // A view: elements between consecutive indices of each physical dim, when they are not the dense
  // row-major ones (empty). A value its producer writes straight into its slice of a Concat's buffer
  // (backend/memory/concat_in_place.h) has the rows of that buffer: its pixel stride is the Concat's
  // channels. Only the lowerings ConcatFolding::takes_views names read or write views; compile() hands the
  // others a dense copy (ViewScope).
  std::vector<int64_t> view_strides;
  bool strided() const { return !view_strides.empty(); }
  // A view dim that is several dims merged at strides that are not evenly spaced (torchvision's
  // view(seq, batch * heads, dh) of a Q sliced out of [seq, batch, 3 * D]: backend/memory/strided_views.h):
  // physical dim -> its (extent, stride) levels, outermost first; its view_strides entry is the innermost
  // level's. Only the lowerings StridedViews::reads_view names for split views see one.
  std::map<size_t, std::vector<std::array<int64_t, 2>>> view_split;
  // The same elements as a view without split dims: each split dim replaced by its levels.
  DramTensor expanded() const;
  // Elements between consecutive indices of each physical dim (the view's, or the dense ones).
  std::vector<int64_t> strides() const;
  // The DRAM bytes it spans: its elements when dense, from its first to its last element when a view
  // (what dependency tracking must cover).
  uint64_t span_bytes() const;
  Range range() const { return Range{kDram, addr, addr + span_bytes()}; }
  // Whether a 4-D tensor lies in memory as NHWC: its layout is, or its dims of extent > 1 are in NHWC's
  // order (an ONNX-order [N, 1, H, W] tensor -- a one-channel image or graph output -- is NHWC in memory).
  bool nhwc_in_memory() const;
};

// Byte offsets of a ping-pong (or single) set of slots in one scratchpad.
struct SramAlloc {
  isa::Buffer buf = isa::Buffer::kInput;
  uint64_t next = 0;
  uint64_t base = 0;  // where the layer's slots begin (Context::slots)
  uint64_t used() const { return next - base; }
  // Reserves `bytes` (rounded up to 64) and returns the offset.
  uint64_t take(uint64_t bytes) {
    const uint64_t at = next;
    next += (bytes + 63) / 64 * 64;
    return at;
  }
};

class Context {
 public:
  Context(const Graph& g, const isa::NpuConfig& config, const CompileOptions& options, CompileResult& result);

  const Graph& g;
  const isa::NpuConfig& config;
  CompileOptions options;
  CompileResult& result;
  isa::Program& program;
  Emitter em;
  isa::DType act;               // activation and operand dtype (the precision)
  int64_t esize;                // bytes per activation element
  double dram_bytes_per_cycle;  // isa::timing::sustained_dram_bytes_per_cycle (0 = unlimited)
  // The same by transfer size, for the mappers' per-box figures (MatrixMapper::dma_cost).
  isa::timing::DramStreamRates dram_rates;
  uint32_t layer = 0;
  // Vector layers' SRAM tiles (backend/vector/vector_tiling.h): make_slots hands out at most `tile_limit`
  // elements per slot (0 = as many as the scratchpad holds) and records in `slot_elems` the largest slot
  // it handed out since the layer began (0 = the lowering streams no tiles).
  // `slot_ring` lets the element-wise stream lay its two slots' bytes out as three (Slots::ring) and
  // `rang` says whether it did since the layer began.
  int64_t tile_limit = 0;
  int64_t slot_elems = 0;
  bool slot_ring = false;
  bool rang = false;
  std::map<std::string, DramTensor> tensors;  // runtime values by name
  ConcatFolding folding;                      // values written in place into a Concat's buffer
  StridedViews views;                         // Slices / Transposes read in place (strided_views.h)
  // # int8: runtime values the current node reads or writes as int8/uint8 codes itself (PlanScope
  // deferred their conversion to fp32 into the node's tile loop): name -> their QParams (plan-owned).
  std::map<std::string, const quant::QParams*> codes;
  // The QParams of value `v` when the current node converts its codes itself, else nullptr.
  const quant::QParams* codes_of(const std::string& v) const {
    auto it = codes.find(v);
    return it == codes.end() ? nullptr : it->second;
  }

  // Fusion groups' state (fusion/fusion_state.h): only fusion/ and the scratchpad accounting here read it.
  FusionState fusion;
  // Emits the STORE that writes fusion.on_chip's value and a value held for a residual reader
  // (fusion.residual) to their DRAM tensors, when they are still only in SRAM (a reader that does not read
  // them in place needs them there). Context::load calls spill() for the one its box overlaps.
  void spill_on_chip();
  void spill(OnChipValue& v);

  // Bytes of scratchpad `b` a lowering that allocates it on its own may use, from sram_base(b). With
  // sram.shared_scratchpad the input and weight buffers are one scratchpad: such lowerings get half each
  // (weights in the upper half); the matrix walk splits the whole of it per tiling (shared_capacity).
  int64_t capacity(isa::Buffer b) const;
  uint64_t sram_base(isa::Buffer b) const;
  // An allocator for a layer's slots of scratchpad b, `need` bytes in all: consecutive layers take
  // opposite ends of every scratchpad (odd program layers the top), so a layer's first loads write
  // bytes the layer before no longer reads and start while its last tiles finish. A shared scratchpad,
  // a SCALE-Sim topology (rows run one at a time) and a need beyond the capacity start at the bottom.
  SramAlloc slots(isa::Buffer b, int64_t need) const;
  // Bytes inputs and weights may take together when they share one scratchpad (0: separate ones).
  int64_t shared_capacity() const {
    return config.sram.shared_scratchpad ? config.sram.input.size_bytes() : 0;
  }
  uint64_t align(uint64_t x) const {
    const uint64_t a = static_cast<uint64_t>(std::max<int64_t>(1, config.dma.alignment_bytes));
    return (x + a - 1) / a * a;
  }
  // Places bytes in DRAM as a data segment (aligned); returns the address.
  uint64_t add_data(std::vector<uint8_t> bytes);
  // Float values converted to `t` (fp32/fp16/bf16) as a data segment.
  uint64_t add_floats(const std::vector<float>& v, isa::DType t);
  // A constant's values converted to `t` as a data segment; a shape-only constant (a timing-only
  // compile) places a segment of its size without bytes (add_elided_data).
  uint64_t add_constant(const Tensor& v, isa::DType t);
  // The DRAM address a data segment of `bytes` would get, reserved without building it (trials only).
  uint64_t reserve_data(uint64_t bytes);
  // Places `bytes` of a shape-only constant's data (Tensor::shape_only): a segment that records its size
  // only (isa::DataSegment::elided_bytes), at the address add_data would give it; in a trial, reserve_data.
  uint64_t add_elided_data(uint64_t bytes);
  // DRAM scratch (not reused) of `bytes`.
  uint64_t add_scratch(uint64_t bytes);

  const DramTensor& tensor(const std::string& name) const;

  // ---- instruction helpers: fill the fields, compute the accessed ranges, emit ----
  // LOAD a box (sizes innermost first, strides in elements) from DRAM into buf at sram. `dram_range`
  // is the DRAM tensor the box belongs to (dependency tracking is per tensor).
  int load(isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr, isa::DType t,
           std::array<int64_t, 4> sizes, std::array<int64_t, 3> strides,
           std::array<int64_t, 4> pads = {0, 0, 0, 0}, int64_t pad_value = 0);
  int store(isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr, isa::DType t,
            std::array<int64_t, 4> sizes, std::array<int64_t, 3> strides);
  struct VecArgs {
    isa::VecOp op = isa::VecOp::kCopy;
    isa::DType in = isa::DType::kFp32, out = isa::DType::kFp32;
    isa::Buffer src1_buf = isa::Buffer::kInput;
    uint64_t src1 = 0;
    isa::Buffer src2_buf = isa::Buffer::kInput;
    uint64_t src2 = 0;
    isa::Buffer dst_buf = isa::Buffer::kInput;
    uint64_t dst = 0;
    int64_t d0 = 1, d1 = 1, d2 = 1;
    isa::Bcast bcast = isa::Bcast::kNone;
    int64_t imm0 = 0, imm1 = 0, imm2 = 0;
    int64_t win_h = 0, win_w = 0, str_h = 0, str_w = 0;
  };
  int vec(const VecArgs& a);
  int matmul(uint64_t a_addr, int64_t a_stride, uint64_t b_addr, uint64_t c_addr, int64_t m, int64_t k,
             int64_t n, bool accumulate);
  int conv(uint64_t a_addr, uint64_t b_addr, uint64_t c_addr, int64_t in_h, int64_t in_w, int64_t in_c,
           int64_t out_h, int64_t out_w, int64_t n, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
           int64_t dh, int64_t dw, bool accumulate, int64_t a_stride = 0, int64_t c_stride = 0);

  // Layer-plan bookkeeping.
  LayerPlan* plan = nullptr;
  // Another node's code lowered from inside the current layer's lowering (a map its reader declined, lowered
  // apart; a trial of the layers apart): under that node's plan and layer tag, without the current layer's
  // int8 codes; when the scope ends, the plan, the tag, the codes and what a vector lowering changes of the
  // context (act, esize, tile_limit, slot_elems, as LoweringUndo puts them back) are the current layer's
  // again.
  class OtherLayer {
   public:
    OtherLayer(Context& c, LayerPlan* other, uint32_t layer)
        : c_(c),
          plan_(c.plan),
          layer_(c.layer),
          act_(c.act),
          esize_(c.esize),
          tile_limit_(c.tile_limit),
          slot_elems_(c.slot_elems) {
      codes_.swap(c.codes);
      c.plan = other, c.layer = layer;
    }
    ~OtherLayer() {
      c_.codes.clear();
      codes_.swap(c_.codes);
      c_.plan = plan_, c_.layer = layer_;
      c_.act = act_, c_.esize = esize_, c_.tile_limit = tile_limit_, c_.slot_elems = slot_elems_;
    }
    OtherLayer(const OtherLayer&) = delete;
    OtherLayer& operator=(const OtherLayer&) = delete;

   private:
    Context& c_;
    LayerPlan* plan_;
    uint32_t layer_;
    isa::DType act_;
    int64_t esize_, tile_limit_, slot_elems_;
    std::map<std::string, const quant::QParams*> codes_;
  };

  // ---- timing emitted code (CompileOptions::timer) ----
  bool can_time() const { return static_cast<bool>(options.timer); }
  // First instruction of the earliest layer timed with the current one as its context (the
  // kContextLayers layers that emitted code before it), -1 = none.
  int64_t context_first = -1;
  // Cycles of each layer from the one at context_first to the current one, whose code starts at
  // instruction `first` and runs to the end of the program, simulated on an idle machine.
  std::vector<int64_t> time_code(int64_t first) const;
  // The current layer's figure of time_code.
  int64_t time_layer(int64_t first) const;
  // When time_code's slice ends (its last instruction done), in cycles from its start: what the current
  // layer's code adds to the program, its context's code being the same for every candidate.
  int64_t time_end(int64_t first) const;
  // What the mapping search minimises (CompileOptions::objective) for the current layer's code from
  // instruction `first`, which time_code found to take `cycles`: the cycles themselves, or its simulated
  // energy (mJ) or energy x cycles. Lower is better; under kCycles it is `cycles` and nothing is simulated.
  double objective_score(int64_t first, int64_t cycles) const;
  // Code whose time is known: the layer's instructions [first, last) took `cycles` (time_code's
  // figures: the mapper's winning trial, emitted again unchanged), so they need not be simulated again.
  struct Timed {
    int64_t first = -1, last = -1;
    std::vector<int64_t> cycles;
  } timed;
  // Trial emission: the mapper emits a candidate mapping, times it and undoes it. While a trial is
  // open, data segments only reserve their DRAM addresses (the bytes are not built).
  struct Trial {
    Emitter::Checkpoint em;
    size_t data_segments = 0;
    uint64_t data_end = 0, scratch_end = 0;
    LayerPlan plan;
    OnChipValue on_chip, residual;
    // The pre-pool scratch half the next window takes (PrePool::next): a trial's windows flip it, and
    // the code kept must start on the same half whichever trials ran before it (a mapping file imposes
    // one candidate, the search tries many: the same program either way).
    int pre_pool_next = 0;
    int pre_transpose_next = 0;
  };
  // Choices the mapper made by simulation, by a key of everything they depend on (MatrixMapper::choose).
  std::map<std::string, size_t> decided;
  // The cost model's DMA figures of a box of data (MatrixMapper::dma_cost): {cycles, dram} by its sizes,
  // strides and element type. They depend on the configuration alone, so layers share them (ResNet-50's
  // search asks for the same boxes from layer to layer).
  struct BoxKeyHash {
    size_t operator()(const std::array<int64_t, 6>& k) const {
      uint64_t h = 1469598103934665603ull;
      for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<std::array<int64_t, 6>, std::array<double, 2>, BoxKeyHash> dma_box_costs;
  // Index maps of data-movement nodes (lower_index_map), one per output, by a key of everything they
  // depend on (index_map_key): the element each output element copies, or -1.
  std::map<std::string, std::vector<std::vector<int64_t>>> index_maps;
  Trial begin_trial();
  void end_trial(const Trial& t);
  // An undo point outside a trial (end_trial restores it): the code emitted after it may run trials of
  // its own (a layer lowered whole, its choices simulated, only to be timed and undone; layer_fusion.h).
  Trial mark();
  // Keeps what was emitted since the undo point `t` (mark()) and closes it.
  void keep(const Trial& t) { em.commit(t.em); }
  bool in_trial() const { return in_trial_; }

  // Next free DRAM byte of the data segments / of the scratch region (set by the driver).
  uint64_t data_base_ = 0, data_end_ = 0;
  uint64_t scratch_base_ = 0, scratch_end_ = 0;

 private:
  bool in_trial_ = false;
};

// Bytes of scratchpad `b` a lowering that allocates it on its own may use (Context::capacity).
int64_t scratchpad_capacity(const isa::NpuConfig& config, isa::Buffer b);

// fp32 bit pattern of v as an immediate.
int64_t f32_imm(float v);
// bf16 bits of v as a LOAD pad value (signed 16-bit field).
int64_t bf16_pad(float v);
// Physical shape of a logical shape under `layout`.
Shape physical(const Shape& logical, const std::vector<int>& layout);

// ---- lowerings (each returns false when it cannot lower the node; the caller falls back to host) ----
// Matrix nodes: Conv, Gemm, MatMul. Throws CompileError when even the smallest tile does not fit.
bool lower_matrix(Context& c, const Node& n);
// Why lower_matrix declines node n, in the user's words, for the forms a user can see in the model (runtime
// weights, a 3-D convolution, a window wider than the CONV fields); "" otherwise.
std::string matrix_decline_reason(const Context& c, const Node& n);
// Vector and data-movement nodes.
bool lower_vector(Context& c, const Node& n, std::string* why);

}  // namespace npusim::compiler::backend
