// The vocabulary of mapping overrides (see mapping.h).
#include "compiler/backend/mapping/mapping.h"

namespace npusim::compiler {

const std::vector<TileKey>& tile_keys() {
  static const std::vector<TileKey> keys = {
      {"group_block", &LayerMapping::group_block, TileScope::kConv,
       "grouped conv: groups mapped together as one block-diagonal CONV (divides the groups; a block of "
       "more than one group is not split, so tile_c and tile_n are then the whole block's)"},
      {"tile_oh", &LayerMapping::tile_oh, TileScope::kConv, "conv: output rows per tile"},
      {"tile_ow", &LayerMapping::tile_ow, TileScope::kConv, "conv: output columns per tile"},
      {"tile_images", &LayerMapping::tile_images, TileScope::kConv,
       "conv over a batch (--batch): whole images per tile, stacked with their halos into one tall tile that "
       "one CONV per chunk streams through the array (above 1, tile_oh and tile_ow are the image's)"},
      {"pack_pixels", &LayerMapping::pack_pixels, TileScope::kConv,
       "conv: output pixels of a row side by side on the array's columns, the kernel at as many shifted "
       "positions (a narrow conv fills more columns; above 1, tile_ow counts packed columns of that many "
       "pixels and tile_n their channels, pack_pixels x the layer's)"},
      {"tile_c", &LayerMapping::tile_c, TileScope::kConv,
       "conv: input channels per reduction chunk (the report's tile_k is kernel_h x kernel_w x tile_c)"},
      {"tile_m", &LayerMapping::tile_m, TileScope::kGemm, "Gemm/MatMul: rows (M) per tile"},
      {"tile_k", &LayerMapping::tile_k, TileScope::kGemm, "Gemm/MatMul: reduction (K) chunk"},
      {"tile_n", &LayerMapping::tile_n, TileScope::kBoth, "output channels (conv) or columns (N) per tile"},
      {"tile_elems", &LayerMapping::tile_elems, TileScope::kVector,
       "vector layers that stream SRAM tiles (element-wise, pooling, data movement): elements per tile, the "
       "largest of the layer's ping-pong slots"},
  };
  return keys;
}

std::string LayerMapping::at(std::string_view key) const {
  auto it = where.find(std::string(key));
  if (it != where.end()) return it->second;
  it = where.find("");
  return it == where.end() ? std::string("mapping") : it->second;
}

bool LayerMapping::has_tiling() const {
  if (loop_order) return true;
  for (const TileKey& k : tile_keys()) {
    if (k.scope != TileScope::kVector && this->*k.field) return true;
  }
  return false;
}

bool LayerMapping::has_vector_tiling() const { return tile_elems.has_value(); }

std::string_view loop_order_name(LoopOrder o) {
  switch (o) {
    case LoopOrder::kSpatialOuter:
      return "spatial_outer";
    case LoopOrder::kChannelOuter:
      return "channel_outer";
    case LoopOrder::kInputResident:
      return "input_resident";
    case LoopOrder::kGroupsInner:
      return "groups_inner";
  }
  return "spatial_outer";
}

std::optional<LoopOrder> parse_loop_order(std::string_view text) {
  for (LoopOrder o : {LoopOrder::kSpatialOuter, LoopOrder::kChannelOuter, LoopOrder::kInputResident,
                      LoopOrder::kGroupsInner}) {
    if (loop_order_name(o) == text) return o;
  }
  return std::nullopt;
}

}  // namespace npusim::compiler
