#pragma once
// A constant affine map and its activation before a pointwise conv, applied where the conv loads its
// input (internal to the back end). DenseNet's dense layers open with norm1 -> relu1 -> conv1 on the
// block's concatenation so far: the BatchNormalization cannot fold into the conv (the Relu lies between),
// so lowered alone it reads the whole concatenation and writes it back for the conv to read once more
// (DenseNet-121 on edge, fp16: 62 such layers, 42 MB of DRAM and 3.2 M cycles with the array idle). Here,
// as a vendor compiler's fused pre-op, the conv's every LOAD of the map's output x becomes a LOAD of the
// map's input y into the same tile, then the map's VECs on the tile in place: x is never written, the
// map's layer emits nothing, and its vector work runs beside the array's.
//
// Exact: the VECs are those the map's own lowering (vector/elementwise.cpp, lower_batchnorm) runs on the
// same values: float, a VEC mul and a VEC add with the per-channel constants in the precision
// (row-broadcast), then the activation's VEC; int8 under the integer scheme, the codes less their zero
// point into fp32 work rows of the accumulator, the mul and add with the folded constants
// (quant::affine_arith), then the clamp writing the output's codes into the tile (or the add itself, when
// the clamp only bounds the codes' range: the conversion saturates alike). A conv with padding, stride or
// groups, a conv that is not an int8 matrix layer under int8, and a map a mapping file places or tiles are
// left to the map's own lowering.
//
// Taken whenever it applies: the map's own lowering runs the same VECs and moves x through DRAM besides.
// The conv's tiling is searched and its candidates simulated with the VECs (every candidate's LOADs carry
// them), and its walk emits each tile's epilogue after the next tile's input load (maps_its_loads), so that
// the vector unit maps the next tile while the array multiplies this one.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The pointwise conv (1x1, stride 1, unpadded, one group, constant weights, on the array) that reads vector
// node i's one output as its input and is its only reader, else -1.
int64_t pointwise_reader(const Graph& g, size_t i);
// The conv that may apply BatchNormalization node i's map in its loads (the graph's side of
// plan_pre_affine: node i a constant affine map, optionally with its activation, whose one output only a
// pointwise Conv reads as its input), else -1. The memory plan keeps the map's input until that conv.
int64_t pre_affine_reader(const Graph& g, size_t i);
// Before layer i (a vector layer) is lowered: plans whether its reader applies its map (nothing emitted).
void plan_pre_affine(Context& c, size_t i);
// Layer i's work is the map its reader applies: fills its plan and returns true.
bool pre_affine_member(Context& c, size_t i, LayerPlan& plan);
// Before matrix layer i is lowered: when it is the reader of the planned map, reserves the constants' bytes
// at the top of the accumulator and loads them.
void begin_pre_affine(Context& c, size_t i);
// Context::load's hook: a LOAD of the map's output while its reader is lowered; emits the LOAD of the map's
// input and the map's VECs on the tile in place instead. False when it is no such LOAD.
bool load_pre_affine(Context& c, isa::Buffer buf, uint64_t sram, const Range& dram_range, uint64_t dram_addr,
                     isa::DType t, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                     const std::array<int64_t, 4>& pads);
// The walk's prefetch of input tiles (matrix_walk.cpp, Tiling::prefetch_input): while held, the map's VECs
// of each LOAD wait until emit_pre_affine_maps, so that the next tile's LOAD goes ahead of this tile's map
// in the in-order queues; release_pre_affine ends the hold and returns what was held.
bool carries_pre_affine(const Context& c);
void hold_pre_affine(Context& c);
std::vector<PreAffine::Box> release_pre_affine(Context& c);
void emit_pre_affine_maps(Context& c, const std::vector<PreAffine::Box>& boxes);
// Whether the layer being lowered applies a map in its loads (its walk then emits each tile's epilogue
// after the next tile's input: matrix_walk.cpp).
bool maps_its_loads(const Context& c);
// The map's layer when layer i was to apply it and its NPU lowering declined (it runs on the host and
// reads the map's output from DRAM): the caller lowers that layer first. -1 otherwise.
int64_t pre_affine_declined(Context& c, size_t i);

// The work rows a map done in a conv's loads runs its int8 passes through, in 4-byte elements of the
// accumulator (16 KiB; fp32 for pre_affine's map, int32 for pre_scale's products), at most an eighth of it.
constexpr int64_t kLoadWorkElems = 4096;

// The per-channel VECs of a map done in a LOAD box of an NHWC map of C channels (sizes s, strides st in
// elements, first element e0): calls apply(element offset in the tile, d0, d1, d2, first channel) once when
// every row of the box starts at the same channel (or holds whole pixels), else once per channel stretch of
// each row.
template <class Apply>
void channel_runs(int64_t C, int64_t e0, const std::array<int64_t, 4>& s, const std::array<int64_t, 3>& st,
                  Apply apply) {
  const int64_t n0 = e0 % C;
  const bool pixels = (s[1] == 1 || st[0] % C == 0) && (s[2] == 1 || st[1] % C == 0) &&
                      (s[3] == 1 || st[2] % C == 0);  // outer strides step whole pixels
  if (pixels && n0 + s[0] <= C) {
    apply(0, s[0], s[1], s[2] * s[3], n0);
  } else if (pixels && n0 == 0 && s[0] % C == 0) {
    apply(0, C, s[0] / C * s[1], s[2] * s[3], 0);
  } else {
    const int64_t rows = s[1] * s[2] * s[3];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t first = e0 + r % s[1] * st[0] + r / s[1] % s[2] * st[1] + r / (s[1] * s[2]) * st[2];
      for (int64_t k = 0; k < s[0];) {
        const int64_t ch = (first + k) % C, len = std::min(s[0] - k, C - ch);
        apply(r * s[0] + k, len, 1, 1, ch);
        k += len;
      }
    }
  }
}

// The plan of a map's layer done in its reader's loads, its description aside: fused into `reader`, `map`'s
// input the value it reads instead of its output, that output's write and read (`bytes` each) saved, the
// group `kind:reader`.
void reader_map_plan(LayerPlan& plan, const Node& map, const std::string& reader, int64_t bytes,
                     const char* kind);

// Whether a map done in its reader's loads may be planned for `map` and its `reader`: neither folded away
// (a Concat's or a view's), no mapping file tiling or placing the map, nor placing the reader off the array.
bool reader_map_free(const Context& c, const Node& map, const Node& reader);

// What every map done in its reader's loads (this one, pre_pool.h) does around its reader i: when the reader
// declines it, forget it and give back its `reservation` (returning the map's layer, or -1 when i carries
// no map); when the reader is lowered, give it back and mark x never written, the reader having loaded
// through the map (else a logic_error: the map's layer would have emitted nothing for a value some load
// still reads).
template <class Map>
int64_t reader_map_declined(Map& p, int64_t& reservation, size_t i) {
  if (!p.carried_by(static_cast<int64_t>(i))) return -1;
  const int64_t node = p.node;
  reservation -= p.reserved;
  p = Map{};
  return node;
}
template <class Map>
void finish_reader_map(Context& c, Map& p, int64_t& reservation, size_t i, const LayerPlan& plan,
                       const char* kind, const char* map) {
  if (!p.carried_by(static_cast<int64_t>(i))) return;
  reservation -= p.reserved;
  if (p.loads == 0 || plan.placement != Placement::kNpuMatrix)
    throw std::logic_error(
        fmt::format("{}: '{}' did not load its input through {}", kind, c.g.nodes[i].name, map));
  c.fusion.unwritten.insert(c.g.nodes[static_cast<size_t>(p.node)].outputs[0]);
  p = Map{};
}
// After layer i is lowered: the reservation ends; whether its code took the map.
void finish_pre_affine(Context& c, size_t i, const LayerPlan& plan);

}  // namespace npusim::compiler::backend
