// Imposed mappings inside the back end (see imposed.h).
#include "compiler/backend/mapping/imposed.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "isa/machine/spec_text.h"
#include "isa/numerics.h"

namespace npusim::compiler::backend {

namespace {

[[noreturn]] void fail(const LayerMapping& m, std::string_view key, const std::string& what) {
  throw MappingError(fmt::format("{}: layer '{}': {}", m.at(key), m.name, what));
}

// The first tiling key the entry sets ("loop_order" when only that).
std::string_view first_tiling_key(const LayerMapping& m) {
  for (const TileKey& k : tile_keys()) {
    if (k.scope != TileScope::kVector && m.*k.field) return k.key;
  }
  return "loop_order";
}

}  // namespace

void check_mapping_names(const Graph& g, const MappingOverrides& mapping) {
  std::vector<std::string> names;
  for (const Node& n : g.nodes) names.push_back(n.name);
  for (const auto& [name, m] : mapping.layers) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const std::string guess = isa::closest_name(name, names);
    fail(m, "",
         fmt::format("no layer of the compiled model has this name{} (names are the lowered graph's, as "
                     "--mapping-out writes them)",
                     guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess)));
  }
}

bool imposed_host(const LayerMapping& m, const Node& n, Placement natural) {
  const std::string_view name = placement_name(natural);
  const bool to_host = m.placement == Placement::kHost;
  if (m.has_vector_tiling() && (natural != Placement::kNpuVector || to_host)) {
    const std::string where =
        to_host                            ? "is placed on the host"
        : natural == Placement::kNpuMatrix ? "runs on the array (its tile is tile_m/tile_oh/... x tile_n)"
        : natural == Placement::kFree      ? "is free (an alias of its input, no instructions)"
                                           : "runs on the host";
    fail(m, "tile_elems",
         fmt::format("tile_elems applies to layers that stream SRAM tiles on the vector unit; this {} {}",
                     n.op_type, where));
  }
  if (m.has_tiling() && natural != Placement::kNpuMatrix) {
    const std::string_view key = first_tiling_key(m);
    fail(m, key,
         fmt::format(
             "{} applies to matrix layers; this {} runs on the {} unit{}, whose lowering has no such choice",
             key, n.op_type, name,
             natural == Placement::kHost || natural == Placement::kFree ? " (or none)" : ""));
  }
  if (!m.placement) return false;
  const std::string_view want = placement_name(*m.placement);
  if (*m.placement == natural) return false;
  // A depthwise conv may run on the vector unit (compiler/backend/matrix/depthwise.h), whose lowering honours
  // the placement; check_applied reports a layer it could not place there.
  if (*m.placement == Placement::kNpuVector && natural == Placement::kNpuMatrix && n.op_type == "Conv" &&
      n.attr_int("group", 1) > 1) {
    return false;  // its tiles, if any, are the vector mapping's (lower_depthwise_on_vector checks them)
  }
  if (*m.placement == Placement::kHost) {
    if (natural == Placement::kFree) {
      fail(
          m, "placement",
          fmt::format("placement host: this {} is free (an alias of its input, no instructions), so there is "
                      "nothing to run on the host",
                      n.op_type));
    }
    if (m.has_tiling()) {
      fail(m, first_tiling_key(m), "tiling keys cannot apply to a layer placed on the host");
    }
    return true;
  }
  fail(m, "placement",
       fmt::format("placement {}: this {} is a {} layer; only '{}'{} can apply", want, n.op_type, name, name,
                   natural == Placement::kHost || natural == Placement::kFree ? "" : " or 'host'"));
}

void check_applied(const LayerMapping& m, const LayerPlan& plan, bool forced_host) {
  if (m.band_loop && !plan.chosen.band_loop) {
    fail(m, "band_loop",
         fmt::format(
             "band_loop: this {} cannot run in a band loop with the layer after it here (it needs a Conv "
             "whose "
             "only reader is the next layer, a pool or depthwise conv, fusion on, no tiling keys, on_chip or "
             "other placement on either, and a line buffer of rows={}{} that fits the input scratchpad{})",
             plan.op, m.band_loop->rows,
             m.band_loop->buffer_rows ? fmt::format(" and buffer_rows={}", *m.band_loop->buffer_rows) : "",
             m.band_loop->project == true
                 ? "; project: true also needs the pointwise Conv after the depthwise "
                   "conv untiled and its only reader"
                 : ""));
  }
  // A placement beside it runs the LayerNorm as a layer of its own (pre_norm.h): the placement decides.
  if (m.in_loads && !m.placement && plan.fusion_group.rfind("pre_norm:", 0) != 0) {
    fail(m, "in_loads",
         fmt::format("in_loads: this {} is not one the GEMM after it can apply in its loads here (a "
                     "row-wise LayerNormalization with constant gamma and beta whose only reader is a MatMul "
                     "or Gemm with constant weights, fusion on, and the GEMM's tile_k the "
                     "whole row when in_loads is true)",
                     plan.op));
  }
  if (forced_host) return;
  if (m.placement && *m.placement != plan.placement) {
    fail(m, "placement",
         fmt::format("placement {}: the back end cannot map this layer there ({})",
                     placement_name(*m.placement), plan.mapping));
  }
  // A depthwise conv placed on the vector unit took its tiles there (depthwise.h).
  const bool vector_dwconv = plan.placement == Placement::kNpuVector && plan.op == "Conv";
  if (plan.placement == Placement::kNpuMatrix || vector_dwconv) return;
  if (m.has_tiling()) {
    fail(m, first_tiling_key(m),
         fmt::format("the tiling cannot apply: the back end runs this layer on the {} ({})",
                     placement_name(plan.placement), plan.mapping));
  }
}

void check_fusion(const LayerMapping& m, const std::vector<std::string>& fused) {
  if (!m.fused) return;
  std::vector<std::string> want = *m.fused, have = fused;
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  if (want == have) return;
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return "[" + s + "]";
  };
  fail(m, "fused",
       fmt::format(
           "fused {}: the compiler fused {} into this layer; fusion is decided by the passes (--no-fusion "
           "turns it off), so a mapping file can record it but not change it",
           list(*m.fused), list(fused)));
}

ImposedTiling::ImposedTiling(const Context& c, const MatrixJob& j, const MatrixMapper& mm) : j_(j) {
  if (!c.options.mapping) return;
  m_ = c.options.mapping->find(c.plan->name);
  // An entry that places the layer on the vector unit tiles that mapping (depthwise.h), not the array's.
  if (!m_ || !m_->has_tiling() || m_->placement == Placement::kNpuVector) {
    m_ = nullptr;
    return;
  }
  const LayerMapping& m = *m_;
  for (const TileKey& k : tile_keys()) {
    const std::optional<int64_t>& v = m.*k.field;
    if (!v) continue;
    if (k.scope == TileScope::kConv && j.gemm) {
      fail(k.key,
           fmt::format("{} applies to convolutions; a Gemm/MatMul layer's tile is tile_m x tile_k x tile_n",
                       k.key));
    }
    if (k.scope == TileScope::kGemm && !j.gemm) {
      fail(k.key, fmt::format("{} applies to Gemm/MatMul layers; a convolution's tile is tile_oh x tile_ow x "
                              "tile_c x tile_n",
                              k.key));
    }
    if (*v < 1) fail(k.key, fmt::format("{}={} must be at least 1", k.key, *v));
  }
  // The packed conv's tiles are searched only where the entry packs it (pixel_packing.h maps the layer so).
  if (m.pack_pixels.value_or(1) != j.pack) {
    fail("pack_pixels", fmt::format("pack_pixels={}: this conv ({}) is not mapped with {} output pixels a "
                                    "column here (a conv fused into a line buffer, or a precision's epilogue "
                                    "that cannot repeat its channels, is not packed)",
                                    *m.pack_pixels, j.what, *m.pack_pixels));
  }
  if (m.group_block) {
    if (j.groups == 1)
      fail("group_block", "group_block applies to grouped convolutions; this one has 1 group");
    // groups_inner's last block may hold fewer groups (Tiling::groups_inner).
    const bool ragged_ok = m.loop_order == LoopOrder::kGroupsInner && *m.group_block < j.groups;
    if (j.groups % *m.group_block != 0 && !ragged_ok) {
      fail("group_block",
           fmt::format("group_block={} does not divide the layer's {} groups", *m.group_block, j.groups));
    }
  }
  // Input and output channels: a block of several groups is never split; a dense tile stays within one
  // group; without an imposed block, any block up to all groups.
  const std::optional<int64_t> gb = j.groups == 1 ? std::optional<int64_t>(1) : m.group_block;
  auto channels = [&](std::string_view key, const std::optional<int64_t>& v, int64_t per_group,
                      const char* what) {
    if (!v) return;
    const int64_t whole = gb.value_or(j.groups) * per_group;
    if (gb && *gb > 1 && *v != whole) {
      fail(key, fmt::format("{}={} splits a block: with group_block={} the tile is the block's {} {}", key,
                            *v, *gb, whole, what));
    }
    if (*v > whole) {
      fail(key, fmt::format("{}={} is larger than the {}'s {} {}", key, *v,
                            gb && j.groups > 1 ? "block" : "layer", whole, what));
    }
  };
  if (m.loop_order == LoopOrder::kGroupsInner &&
      (j.gemm || j.groups < 2 || m.group_block.value_or(1) >= j.groups)) {
    fail("loop_order",
         "loop_order=groups_inner applies to grouped convolutions of several blocks (group_block less than "
         "the groups), whose blocks share one input tile of every group");
  }
  if (m.loop_order == LoopOrder::kInputResident && !j.gemm &&
      (!isa::numerics::is_integer(c.act) ||
       (j.kh * j.kw > 1 && c.config.lowering.conv_reduction == isa::ConvReduction::kPerPosition))) {
    fail("loop_order",
         "loop_order=input_resident applies to GEMMs and to integer (int8) convolutions whose CONVs read "
         "each K chunk in place, not to a float convolution or one walked a kernel position at a time "
         "(lowering.conv_reduction=per_position): use spatial_outer or channel_outer");
  }
  if (j.gemm) {
    if (m.tile_m && *m.tile_m > j.OH) {
      fail("tile_m", fmt::format("tile_m={} is larger than the layer's {} rows (M)", *m.tile_m, j.OH));
    }
    channels("tile_k", m.tile_k, j.cg, "reduction elements (K)");
    channels("tile_n", m.tile_n, j.mg, "columns (N)");
  } else {
    if (m.tile_oh && *m.tile_oh > j.OH) {
      fail("tile_oh", fmt::format("tile_oh={} is larger than the layer's {} output rows", *m.tile_oh, j.OH));
    }
    if (m.tile_ow && *m.tile_ow > j.OW) {
      fail("tile_ow",
           fmt::format("tile_ow={} is larger than the layer's {} output columns", *m.tile_ow, j.OW));
    }
    channels("tile_c", m.tile_c, j.cg, "input channels");
    channels("tile_n", m.tile_n, j.mg, "output channels");
    if (m.tile_images && (*m.tile_images < 1 || *m.tile_images > j.images)) {
      fail("tile_images", fmt::format("tile_images={} is not between 1 and the layer's {} images",
                                      *m.tile_images, j.images));
    }
    if (m.tile_images && *m.tile_images > 1) {
      if (mm.image_pitch() == 0) {
        fail("tile_images",
             "tile_images above 1 needs a convolution that loads its input from DRAM, its "
             "images evenly spaced, one CONV per reduction chunk");
      }
      if (m.tile_oh.value_or(j.OH) != j.OH || m.tile_ow.value_or(j.OW) != j.OW) {
        fail("tile_images",
             fmt::format("tile_images above 1 takes whole images: tile_oh={} and tile_ow={}", j.OH, j.OW));
      }
    }
  }
  // The smallest tile the imposed values allow: the instruction fields and the scratchpads.
  Tiling t;
  t.gb = m.group_block.value_or(1);
  t.toh = (j.gemm ? m.tile_m : m.tile_oh).value_or(1);
  t.tow = m.tile_ow.value_or(1);
  t.tc = (j.gemm ? m.tile_k : m.tile_c).value_or(t.gb > 1 ? t.gb * j.cg : 1);
  t.tn = m.tile_n.value_or(t.gb > 1 ? t.gb * j.mg : 1);
  t.input_resident = m.loop_order == LoopOrder::kInputResident;
  t.groups_inner = m.loop_order == LoopOrder::kGroupsInner;
  if (t.groups_inner) t.tc = t.gb * j.cg, t.tn = t.gb * j.mg;  // a block's whole channels
  if (t.toh * t.tow > mm.max_tile_pixels() || j.in_rows(t.toh) > 65535 || j.in_cols(t.tow) > 65535) {
    fail("",
         fmt::format("the tile ({}) has more pixels ({}) or input rows/columns (65535) than an instruction "
                     "addresses",
                     imposed_list(), mm.max_tile_pixels()));
  }
  mm.slot_bytes(t);
  // A tile whose two accumulator sides overflow is walked with one (Tiling::one_side), as the search does.
  if (t.acc_bytes > c.capacity(isa::Buffer::kAccumulator) && !t.groups_inner && mm.one_side_job()) {
    Tiling one = t;
    one.one_side = true;
    mm.slot_bytes(one);
    if (one.acc_bytes <= c.capacity(isa::Buffer::kAccumulator)) t = one;
  }
  if (c.shared_capacity() > 0 && t.in_bytes + t.w_bytes > c.shared_capacity()) {
    fail("",
         fmt::format(
             "the tile ({}) needs {:.1f} KiB of the scratchpad inputs and weights share "
             "(sram.input, sram.shared_scratchpad) with its slots (a ping-pong pair each, one for an operand "
             "loaded once; have {:.1f} KiB)",
             imposed_list(), static_cast<double>(t.in_bytes + t.w_bytes) / 1024,
             static_cast<double>(c.shared_capacity()) / 1024));
  }
  for (auto [buf, name, need] : {std::tuple{isa::Buffer::kInput, "sram.input", t.in_bytes},
                                 std::tuple{isa::Buffer::kWeight, "sram.weight", t.w_bytes},
                                 std::tuple{isa::Buffer::kAccumulator, "sram.accumulator", t.acc_bytes}}) {
    if (c.shared_capacity() > 0 && buf != isa::Buffer::kAccumulator) continue;
    if (need > c.capacity(buf)) {
      fail("", fmt::format(
                   "the tile ({}) needs {:.1f} KiB of {} with its slots (a ping-pong pair each, one for an "
                   "operand loaded once; have {:.1f} KiB)",
                   imposed_list(), static_cast<double>(need) / 1024, name,
                   static_cast<double>(c.capacity(buf)) / 1024));
    }
  }
}

void ImposedTiling::restrict_blocks(std::vector<int64_t>& gbs) const {
  if (m_ && m_->group_block) gbs = {*m_->group_block};
}

void ImposedTiling::restrict_images(std::vector<int64_t>& tis) const {
  if (m_ && m_->tile_images) tis = {*m_->tile_images};
}

void ImposedTiling::restrict(int64_t gb, std::vector<int64_t>& tcs, std::vector<int64_t>& tns,
                             std::vector<int64_t>& tohs, std::vector<int64_t>& tows) const {
  if (!m_) return;
  const LayerMapping& m = *m_;
  // The only candidate is the imposed value when the block can take it: a block of several groups is
  // whole (its list is that one size), a single group's tile at most the group.
  auto pick = [&](std::vector<int64_t>& v, const std::optional<int64_t>& imposed, int64_t extent,
                  bool whole) {
    if (!imposed) return;
    if (whole ? *imposed == extent : *imposed <= extent) {
      v = {*imposed};
    } else {
      v.clear();
    }
  };
  pick(tcs, j_.gemm ? m.tile_k : m.tile_c, gb * j_.cg, gb > 1);
  pick(tns, m.tile_n, gb * j_.mg, gb > 1);
  pick(tohs, j_.gemm ? m.tile_m : m.tile_oh, j_.OH, false);
  pick(tows, m.tile_ow, j_.OW, false);
}

bool ImposedTiling::allows(bool spatial_outer, bool input_resident, bool groups_inner) const {
  if (!m_ || !m_->loop_order) return true;
  return *m_->loop_order == (groups_inner     ? LoopOrder::kGroupsInner
                             : input_resident ? LoopOrder::kInputResident
                             : spatial_outer  ? LoopOrder::kSpatialOuter
                                              : LoopOrder::kChannelOuter);
}

void ImposedTiling::none_fits() const {
  if (!m_) return;
  fail("", fmt::format("no tiling with the imposed values ({}) fits the scratchpads", imposed_list()));
}

void ImposedTiling::fail(std::string_view key, const std::string& what) const {
  backend::fail(*m_, key, what);
}

std::string ImposedTiling::imposed_list() const {
  std::string s;
  for (const TileKey& k : tile_keys()) {
    const std::optional<int64_t>& v = m_->*k.field;
    if (v) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k.key, *v);
  }
  if (m_->loop_order)
    s += fmt::format("{}loop_order={}", s.empty() ? "" : " ", loop_order_name(*m_->loop_order));
  return s;
}

LayerMapping as_mapping(const MatrixJob& j, const Tiling& t) {
  LayerMapping m;
  m.placement = Placement::kNpuMatrix;
  if (j.groups > 1) m.group_block = t.gb;
  if (j.gemm) {
    m.tile_m = t.toh;
    m.tile_k = t.tc;
  } else {
    m.tile_oh = t.toh;
    m.tile_ow = t.tow;
    m.tile_c = t.tc;
    if (j.images > 1) m.tile_images = t.ti;
    if (j.pack > 1) m.pack_pixels = j.pack;
  }
  m.tile_n = t.tn;
  m.loop_order = t.groups_inner     ? LoopOrder::kGroupsInner
                 : t.input_resident ? LoopOrder::kInputResident
                 : t.spatial_outer  ? LoopOrder::kSpatialOuter
                                    : LoopOrder::kChannelOuter;
  return m;
}

}  // namespace npusim::compiler::backend
