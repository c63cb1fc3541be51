#include "compiler/backend/fusion/residency.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "compiler/backend/fusion/layer_fusion.h"
#include "compiler/backend/matrix/depthwise.h"
#include "compiler/passes/lowered.h"

namespace npusim::compiler::backend {

namespace {

// A Conv the walk can run as a GEMM over its input's pixels: 1x1, stride 1, no padding, one group,
// constant weights.
bool pointwise_conv(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || n.inputs.size() < 2 || n.attr_int("group", 1) != 1) return false;
  const Value& w = g.value(n.inputs[1]);
  if (!w.is_constant() || w.shape.size() != 4 || w.shape[2] != 1 || w.shape[3] != 1) return false;
  for (int64_t s : n.attr_ints("strides", {1, 1})) {
    if (s != 1) return false;
  }
  for (int64_t p : n.attr_ints("pads", {0, 0, 0, 0})) {
    if (p != 0) return false;
  }
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  return pad == "NOTSET" || pad == "VALID";
}

}  // namespace

std::string next_reads_on_chip(const Context& c, size_t i, bool* others) {
  const Node& p = c.g.nodes[i];
  if (i + 1 >= c.g.nodes.size() || !pointwise_conv(c.g, c.g.nodes[i + 1]))
    return "the next layer is not a pointwise Conv (1x1, stride 1, unpadded, one group, constant weights)";
  const Node& q = c.g.nodes[i + 1];
  const std::string& v = p.outputs[0];
  if (q.inputs[0] != v) return "the next layer does not read the output as its input";
  if (c.folding.folded(p) || c.folding.folded(q)) return "the output is written into a Concat's buffer";
  for (const std::string& o : c.g.outputs) {
    if (o == v) return "the output is a graph output";
  }
  const std::vector<int> readers = c.g.consumers(v);
  if (std::find(readers.begin(), readers.end(), static_cast<int>(i + 1)) == readers.end())
    return "the next layer does not read the output";
  if (readers.size() != 1 && others == nullptr) return "the output has other readers";
  if (others) *others = readers.size() != 1;
  for (size_t k = 1; k < q.inputs.size(); ++k) {
    if (q.inputs[k] == v) return "the next layer reads the output twice";
  }
  auto t = c.tensors.find(v);
  if (t == c.tensors.end() || t->second.strided() || t->second.shape.size() != 4 || t->second.layout != kNhwc)
    return "the output is not a dense NHWC feature map";
  return "";
}

OnChipValue nhwc_on_chip(const std::string& value, const DramTensor& y, uint64_t addr, uint32_t producer) {
  OnChipValue o;
  o.value = value;
  o.dram = y.range();
  o.addr = addr;
  o.bytes = num_elements(y.shape) * isa::dtype_bytes(y.dtype);
  o.dtype = y.dtype;
  // NHWC [N][H][W][C]: rows of W pixels.
  o.box = {y.phys[3], y.phys[2], y.phys[0] * y.phys[1], 1};
  o.strides = {y.phys[3], y.phys[2] * y.phys[3], 0};
  o.pending = true;
  o.producer = producer;
  return o;
}

void plan_on_chip(Context& c, size_t i) {
  c.fusion.keep_output.clear();
  c.fusion.keep_imposed = false;
  c.fusion.keep_in_dram = false;
  bool others = false;
  const Node& p = c.g.nodes[i];
  const LayerMapping* imposed = c.options.mapping ? c.options.mapping->find(p.name) : nullptr;
  const std::optional<bool> want = imposed ? imposed->on_chip : std::nullopt;
  if (want == false) return;
  // Why the output cannot stay on chip ("" = it can).
  const std::string why = [&]() -> std::string {
    if (!c.options.keep_on_chip) return "fusion is off (--no-fusion)";
    if (c.g.nhwc_io) return "a SCALE-Sim topology's rows run one at a time";
    if (c.shared_capacity() > 0) return "inputs and weights share one scratchpad";
    if (p.op_type != "Conv" || p.outputs.size() != 1) return "only a Conv leaves its output on chip";
    if (const std::string no = next_reads_on_chip(c, i, &others); !no.empty()) return no;
    // A value kept on chip for the next layer stops that layer's line-buffer fusion with the pool or
    // depthwise conv after it (layer_fusion.h), which saves more than one read of the value.
    if (others && conv_pool_pair(c.g, i + 1))
      return "the next layer may fuse with the pool or depthwise conv after it (a line buffer)";
    const auto t = c.tensors.find(p.outputs[0]);
    // Below the value node i reads on chip, if any (a chain: depthwise -> pointwise -> pointwise).
    const int64_t bytes = round64(num_elements(t->second.shape) * isa::dtype_bytes(t->second.dtype));
    if (4 * (c.fusion.input_reserved + bytes) > 3 * scratchpad_capacity(c.config, isa::Buffer::kInput)) {
      return fmt::format("its {} bytes (with any value already held) exceed 3/4 of the input scratchpad",
                         bytes);
    }
    return "";
  }();
  if (!why.empty()) {
    if (want)
      throw MappingError(
          fmt::format("{}: layer '{}': on_chip=true: {}", imposed->at("on_chip"), p.name, why));
    return;
  }
  const DramTensor& t = c.tensor(p.outputs[0]);
  c.fusion.keep_output = p.outputs[0];
  c.fusion.keep_imposed = want.has_value();
  c.fusion.keep_in_dram = others;
  c.fusion.input_reserved += round64(num_elements(t.shape) * isa::dtype_bytes(t.dtype));
}

namespace {

// The closed form's best estimate for the job as it stands: the array's tilings and, for a depthwise
// job, the vector unit's (1e300: none fits).
double best_estimate(Context& c, const MatrixJob& j, MatrixStrategy& s, const MatrixMapper& mm) {
  int64_t n = 0;
  const std::vector<Tiling> a = mm.search(&n, 1);
  double best = a.empty() ? 1e300 : a.front().est;
  if (DepthwiseMapper::applies(j) && !c.g.nhwc_io) {
    const std::vector<DepthwiseTiling> v = DepthwiseMapper(c, j, s).search(1);
    if (!v.empty()) best = std::min(best, v.front().est);
  }
  return best;
}

// The GEMM over every pixel that reads the input where the layer before left it, or false.
bool as_sram_gemm(const MatrixJob& j, const OnChipValue& v, MatrixJob* g) {
  if (!v.pending || j.a_range.begin != v.dram.begin || j.a_range.end != v.dram.end || !j.b_const ||
      j.groups != 1 || j.a_base(0) != v.dram.begin)
    return false;
  const bool pointwise = !j.gemm && j.kh == 1 && j.kw == 1 && j.sh == 1 && j.sw == 1 && j.pt == 0 &&
                         j.pl == 0 && j.OH == j.H && j.OW == j.W && j.step_h == 1 && j.step_w == 1 &&
                         j.src_w == 0 && j.y_pitch == 0 && j.y_row == 0;
  if ((!pointwise && !(j.gemm && j.images == 1)) || j.a_pitch != 0) return false;
  *g = j;
  if (pointwise) {
    g->H = g->OH = j.images * j.OH * j.OW;
    g->W = g->OW = 1;
    g->images = 1;
    g->gemm = true;
  }
  g->a_sram = static_cast<int64_t>(v.addr);
  return true;
}

// A pointwise conv over several images (`--batch N`) as one GEMM over all their pixels: NHWC images lie one
// after the other, so the batch folds into the GEMM's rows, and a weight tile the weight scratchpad cannot
// keep for the whole layer serves every image's pixels instead of being loaded again for each image's
// tiles (weights stream once per batch). Kept when the closed form does not find it slower, or when a
// mapping file's tiling of the layer is a GEMM tile (tile_m: what --mapping-out wrote for it).
void fold_batch_into_rows(Context& c, MatrixJob& j, MatrixStrategy& s, const MatrixMapper& mm) {
  if (j.images < 2 || j.gemm || j.a_sram >= 0 || j.y_sram >= 0 || !j.b_const || j.groups != 1 ||
      j.a_pitch != 0)
    return;
  // Subsampled (a stride-2 1x1 conv reading every other pixel, subsample_pointwise): one tall image of
  // images x OH rows when each image starts where its last row's step ends (an even input height), its tiles
  // free to span images. Always: the search over the tall image's tilings has the per-image ones (a tile
  // height dividing OH walks the same boxes), and a mapping file's tiling then applies to the same job.
  const int64_t ea = isa::dtype_bytes(s.ops.a);
  if ((j.step_h > 1 || j.step_w > 1) && j.kh == 1 && j.kw == 1 && j.pt == 0 && j.pl == 0 && j.sh == 1 &&
      j.sw == 1 && j.y_pitch == 0 && j.y_row == 0 &&
      j.a_base(1) - j.a_base(0) == static_cast<uint64_t>(j.OH * j.row_stride() * ea)) {
    j.H = j.OH = j.images * j.OH;
    j.images = 1;
    return;
  }
  const bool pointwise = j.kh == 1 && j.kw == 1 && j.sh == 1 && j.sw == 1 && j.pt == 0 && j.pl == 0 &&
                         j.OH == j.H && j.OW == j.W && j.step_h == 1 && j.step_w == 1 && j.src_w == 0 &&
                         j.y_pitch == 0 && j.y_row == 0;
  const uint64_t image_bytes = static_cast<uint64_t>(j.H * j.W * j.C * ea);
  if (!pointwise || j.a_base(1) - j.a_base(0) != image_bytes) return;
  const LayerMapping* own = c.options.mapping ? c.options.mapping->find(c.g.nodes[c.layer].name) : nullptr;
  const bool own_tiled = own != nullptr && own->has_tiling();
  const MatrixJob plain = j;
  const double without = own_tiled ? 0.0 : best_estimate(c, j, s, mm);
  j.H = j.OH = j.images * j.OH * j.OW;
  j.W = j.OW = 1;
  j.images = 1;
  j.gemm = true;
  if (own_tiled ? !own->tile_m.has_value() : best_estimate(c, j, s, mm) > without) j = plain;
}

}  // namespace

void place_on_chip(Context& c, MatrixJob& j, MatrixStrategy& s, const MatrixMapper& mm) {
  OnChipValue& v = c.fusion.on_chip;
  fold_batch_into_rows(c, j, s, mm);
  // The input, where the layer before left it, when reading it there is no slower by the closed form
  // (otherwise the first LOAD of it spills it: Context::load).
  if (MatrixJob g; as_sram_gemm(j, v, &g)) {
    // A mapping file's tiling of this layer (what --mapping-out wrote) says how it read the value: a
    // GEMM tile (tile_m) in place, a convolution's tile from DRAM (the value spilled first), whatever
    // the producer's entry says.
    const LayerMapping* own = c.options.mapping ? c.options.mapping->find(c.g.nodes[c.layer].name) : nullptr;
    const bool own_tiled = own != nullptr && own->has_tiling();
    const bool decided = own_tiled || v.imposed;
    const MatrixJob plain = j;
    const double without = decided ? 0.0 : best_estimate(c, j, s, mm);
    j = g;
    const bool in_place =
        own_tiled ? own->tile_m.has_value() : v.imposed || best_estimate(c, j, s, mm) <= without;
    if (in_place) {
      // A value its producer stored too (other readers) saves its read alone.
      if (!v.in_dram) c.fusion.kept_on_chip[v.value] = v.addr;
      v.pending = false;
      c.plan->on_chip_input = v.value;
      c.plan->on_chip_bytes_saved = (v.in_dram ? 1 : 2) * v.bytes;
    } else {
      j = plain;
    }
  }
  // The output, for the layer after, when the tiles that leave it on chip cost this layer no more than
  // the next one saves by not reading it (its bytes at the DRAM's sustained rate).
  if (c.fusion.keep_output.empty() || !s.ends_with_vec() || j.y_pitch != 0 || j.y_row != 0) return;
  // A value with other readers is stored as well, tile by tile from where the epilogue wrote it; the vector
  // unit's depthwise mapping has no such store.
  if (c.fusion.keep_in_dram && DepthwiseMapper::applies(j)) return;
  const DramTensor& y = c.tensor(c.fusion.keep_output);
  if (j.y_range.begin != y.addr || j.y_range.end != y.range().end) return;
  const int64_t cap = scratchpad_capacity(c.config, isa::Buffer::kInput);
  OnChipValue o =
      nhwc_on_chip(c.fusion.keep_output, y, static_cast<uint64_t>(cap - c.fusion.input_reserved), c.layer);
  c.fusion.keep_output.clear();
  const double without = c.fusion.keep_imposed ? 0.0 : best_estimate(c, j, s, mm);
  j.y_sram = static_cast<int64_t>(o.addr);
  j.y_store = o.in_dram = c.fusion.keep_in_dram;
  const double read =
      c.dram_bytes_per_cycle > 0 ? static_cast<double>(o.bytes) / c.dram_bytes_per_cycle : 0.0;
  if (!c.fusion.keep_imposed && best_estimate(c, j, s, mm) > without + read) {
    j.y_sram = -1;
    j.y_store = false;
    return;
  }
  o.imposed = c.fusion.keep_imposed;
  c.fusion.on_chip = o;
}

bool map_matrix_job(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm, Tiling* t,
                    int64_t* evaluated) {
  place_on_chip(c, j, s, mm);
  *t = mm.choose(evaluated);
  if (lower_depthwise_on_vector(c, j, s, mm, *evaluated ? t : nullptr)) return true;
  if (*evaluated > 0 || j.y_sram < 0) return false;
  // No tiling leaves the output on chip: it goes to DRAM.
  j.y_sram = -1;
  j.y_store = false;
  c.fusion.on_chip = {};
  *t = mm.choose(evaluated);
  return lower_depthwise_on_vector(c, j, s, mm, *evaluated ? t : nullptr);
}

void finish_on_chip(Context& c, size_t i, LayerPlan& plan) {
  c.fusion.keep_output.clear();
  // The value is input-scratchpad bytes of both layers: the producer writes it, the reader reads it.
  if (!plan.on_chip_input.empty()) {
    const bool in_dram = c.fusion.on_chip.in_dram && c.fusion.on_chip.value == plan.on_chip_input;
    plan.sram_input_bytes += in_dram ? plan.on_chip_bytes_saved : plan.on_chip_bytes_saved / 2;
  }
  if (c.fusion.on_chip.pending && c.fusion.on_chip.producer == i) {
    plan.sram_input_bytes += c.fusion.on_chip.bytes;
    return;  // the next layer reads it
  }
  c.spill_on_chip();
  c.fusion.on_chip = {};
  c.fusion.input_reserved =
      c.fusion.input_held;  // an SE block's input stays held (backend/fusion/se_fusion.h)
}

const std::map<std::string, uint64_t>& kept_on_chip(const Context& c) { return c.fusion.kept_on_chip; }

}  // namespace npusim::compiler::backend
