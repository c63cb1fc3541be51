#pragma once
// Data movement helpers shared by the back end's lowerings (internal): ping-pong SRAM slots, strided
// DRAM -> SRAM -> DRAM copies, layout permutations (strided DMA, plus VEC transpose when the
// innermost dimension changes), zero fills and DRAM scratch tensors.
#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/backend/core/context.h"
#include "isa/ceil_div.h"

namespace npusim::compiler::backend {

inline constexpr int64_t kMaxDim = 65535;  // the widest DMA size / VEC d field

// Logical dim -> physical position of a tensor.
std::vector<int> positions(const DramTensor& t);

// Ping-pong slots in one scratchpad, each `elems` elements of c.esize bytes (at most Context::tile_limit,
// and recorded in Context::slot_elems: backend/vector/vector_tiling.h). `ring` re-lays the two slots'
// bytes as three slots of a smaller tile when they hold three: a tile's LOAD then waits for the STORE of
// the tile three back instead of two.
struct Slots {
  static constexpr int kMaxSlots = 3;
  isa::Buffer buf;
  uint64_t addr[kMaxSlots] = {0, 0, 0};
  int64_t elems = 0;
  int count = 2;
  int next = 0;
  uint64_t take() {
    const uint64_t a = addr[next];
    next = (next + 1) % count;
    return a;
  }
  // Three slots of `tile_bytes` (each at a 64-byte boundary) in the bytes of the two when they fit and no
  // slot was taken yet; returns whether it did.
  bool ring(int64_t tile_bytes);
};
Slots make_slots(Context& c, isa::Buffer b, uint64_t base = 0, int64_t max_elems = INT64_MAX);

// One dimension of a strided copy (strides in elements).
struct CopyDim {
  int64_t extent, src_stride, dst_stride;
};
// Merges dims that are contiguous in both source and destination; drops extent-1 dims.
std::vector<CopyDim> merge_copy(std::vector<CopyDim> d);
// Calls fn(index vector) for every point of the box `ext` (row-major).
void odometer(const std::vector<int64_t>& ext, const std::function<void(const std::vector<int64_t>&)>& fn);

// Copies a box (dims outermost first) from src + src_off bytes to dst + dst_off bytes through SRAM with
// LOAD/STORE pairs. When the innermost dim is not contiguous on both sides, every element is its own
// DMA row (correct, slow: the report shows it).
// `on_tile(slot, d0, d1)`, when given, runs between each LOAD (in src's dtype) and its STORE (in dst's) on
// the d1 x d0 tile at `slot` of the input buffer (e.g. an int8 requantization, int8.h); the slot holds
// the tile as fp32.
void copy_box(Context& c, const DramTensor& src, uint64_t src_off, const DramTensor& dst, uint64_t dst_off,
              const std::vector<CopyDim>& dims,
              const std::function<void(uint64_t slot, int64_t d0, int64_t d1)>& on_tile = {});
// y (logical dim i) = x (logical dim perm[i]) whatever the two tensors' layouts; identity perm = a layout
// change. Strided DMA when the innermost dim stays, else strided LOAD, VEC transpose, strided STORE.
// Returns a one-line description of the mapping. `on_tile`: as copy_box's, on each (transposed) tile
// before its STORE (x and y may then differ in dtype: int8 codes converted on the way).
std::string permute_copy(Context& c, const DramTensor& x, const DramTensor& y,
                         const std::vector<int64_t>& perm,
                         const std::function<void(uint64_t slot, int64_t d0, int64_t d1)>& on_tile = {});
// Writes zeros over the whole tensor (STOREs of a zeroed SRAM slot; the zeros come from one small data
// segment loaded with a zero row stride).
void zero_fill(Context& c, const DramTensor& t);
// A copy whose source element is known at compile time for every output element: `map[o]` for the
// output's physical element o is (source index << 40 | physical element of that source), or -1 for
// `fill`. Consecutive elements with consecutive sources become one DMA row, equal rows with a constant
// source step one 2-D LOAD box; each slot-sized contiguous piece of the output is assembled in SRAM
// (fill rows come from a small data segment read with a zero stride) and written with one STORE. All
// sources share the output's storage dtype. Returns the number of DMA rows.
int64_t copy_index_map(Context& c, const DramTensor& y, const std::vector<const DramTensor*>& sources,
                       const std::vector<int64_t>& map, double fill);
inline constexpr int kMapShift = 40;
// A constant as a DRAM tensor (a data segment written in `layout` order, storage dtype `t`).
DramTensor constant_tensor(Context& c, const Tensor& value, const std::vector<int>& layout, isa::DType t);
// Copies tensor `from` into `to` (same shape, layout and storage type; either may be a view with strides
// of its own, backend/memory/concat_in_place.h) with strided DMA.
void copy_tensor(Context& c, const DramTensor& from, const DramTensor& to);
// A dense DRAM scratch tensor (never reused) like t: its shape, layout and storage type.
DramTensor dense_scratch(Context& c, const DramTensor& t);
// A fresh DRAM scratch tensor (never reused) of `logical` shape stored in `layout`, dtype c.act.
DramTensor scratch_tensor(Context& c, const Shape& logical, const std::vector<int>& layout);

}  // namespace npusim::compiler::backend
