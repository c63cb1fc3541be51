#pragma once
// Mapping overrides: for some layers (lowered ONNX node names) the placement and matrix tiling a user
// imposes (`npusim --mapping FILE.yaml`, read by sim/mapping/mapping_file.h), and for every layer the
// mapping the back end chose (LayerPlan::chosen, what `--mapping-out` writes). A value an entry leaves
// out is searched as usual, so a file naming every value of every layer reproduces a compile exactly.
//
// The back end checks each imposed value against its layer and throws MappingError naming where it came
// from (LayerMapping::where, "m.yaml:7:5"), the layer and the violated constraint: a name no layer has,
// a tile of zero, larger than the tensor or overflowing a scratchpad, a key the layer's lowering has no
// choice for (tiles on a vector layer, tile_oh on a Gemm), a matrix layer forced onto the vector unit.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ops/op_table.h"

namespace npusim::compiler {

// Which loop of a matrix layer's tile walk is outermost (compiler/backend/matrix/matrix_walk.h).
enum class LoopOrder {
  kSpatialOuter,   // output tiles outer: the input tile stays in SRAM across output-channel tiles
  kChannelOuter,   // output-channel tiles outer: the weight tile stays
  kInputResident,  // GEMMs: output tiles outer, each [m][K] input tile loaded once with its whole
                   // reduction and resident while the K chunks and output-channel tiles pass
  kGroupsInner,    // grouped convs: output tiles outer, each input tile of every group loaded once and
                   // read by every block's CONV, their sums in one accumulator tile of every channel
};

// A conv run in one band loop with the windowed layer after it (compiler/backend/fusion/layer_fusion.h: a
// pool, or a depthwise conv and maybe the project conv after it), as the back end's trial chose it.
// --mapping-out writes it on every conv so fused; imposed, the loop is taken as given (no trial against the
// layers apart), and a conv that cannot run it is an error. A value left out is searched (simulated).
struct BandLoop {
  int64_t rows = 0;                    // the reader's output rows per band
  std::optional<int64_t> buffer_rows;  // the line buffer's rows
  std::optional<bool> resident;        // the conv's weights resident in the weight scratchpad across bands
  std::optional<bool> pieces;          // a band's depthwise conv in pieces between the next band's conv tiles
  std::optional<bool> project;         // the project conv after the depthwise conv in the same loop
};

// One layer's entry: every value optional.
struct LayerMapping {
  std::string name;
  std::optional<Placement> placement;
  std::optional<int64_t> group_block;               // grouped conv: groups per block-diagonal CONV
  std::optional<int64_t> tile_oh, tile_ow, tile_c;  // conv: output rows, output cols, input channels
  std::optional<int64_t> tile_images;               // conv over a batch: whole images per tile
  std::optional<int64_t> pack_pixels;               // conv: output pixels side by side on the columns
  std::optional<int64_t> tile_m, tile_k;            // Gemm/MatMul: rows, reduction
  std::optional<int64_t> tile_n;                    // output channels (conv) or columns (Gemm/MatMul)
  std::optional<int64_t> tile_elems;                // vector layers that stream tiles: elements per SRAM tile
  std::optional<LoopOrder> loop_order;
  // Whether the layer's output stays in the input scratchpad for the pointwise conv after it
  // (compiler/backend/fusion/residency.h) instead of going to DRAM. Left out: the back end decides.
  std::optional<bool> on_chip;
  // On the first of sibling layers that read one input (compiler/backend/fusion/siblings.h): whether they
  // run as one GEMM (true) or each as its own layer (false, as an entry without the key).
  std::optional<bool> merge_siblings;
  // On a conv: its band loop with the layer after it (BandLoop). Left out: the back end's trial decides;
  // a conv the file tiles (or gives on_chip) runs layer by layer.
  std::optional<BandLoop> band_loop;
  // On a LayerNormalization its GEMM may apply in its loads (compiler/backend/fusion/pre_norm.h): true, it
  // does; false, the LayerNorm is lowered apart right before that GEMM (the trial's other side). Imposed, the
  // trial is not rerun. Left out: the back end's trial decides.
  std::optional<bool> in_loads;
  // The model's nodes fused into this layer (its fusion group, compiler/passes/absorbed.h). The passes
  // decide fusion; an entry records it, and imposing one that differs from what they decided (say,
  // under --no-fusion) is an error, not a silent change.
  std::optional<std::vector<std::string>> fused;
  // Where each key's value came from ("m.yaml:7:5"), for messages; "" is the entry itself.
  std::map<std::string, std::string> where;

  // The position of `key` (the entry's when the key has none).
  std::string at(std::string_view key) const;
  bool has_tiling() const;         // any key of the matrix tiling (the matrix tile keys, loop_order)
  bool has_vector_tiling() const;  // tile_elems (compiler/backend/vector/vector_tiling.h)
};

// Which layers a tile key applies to: matrix layers (convolutions, GEMMs or both) or vector layers.
enum class TileScope { kConv, kGemm, kBoth, kVector };

// A tile key of LayerMapping: one declaration that the file reader and writer, the back end's checks
// and the documentation walk.
struct TileKey {
  std::string_view key;
  std::optional<int64_t> LayerMapping::*field;
  TileScope scope;
  std::string_view meaning;
};
const std::vector<TileKey>& tile_keys();

// File spellings: "spatial_outer", "channel_outer", "input_resident", "groups_inner" (placements:
// compiler/ops/op_table.h).
std::string_view loop_order_name(LoopOrder o);
std::optional<LoopOrder> parse_loop_order(std::string_view text);

// The imposed mappings of one compile, by layer name.
struct MappingOverrides {
  std::map<std::string, LayerMapping> layers;
  const LayerMapping* find(const std::string& name) const {
    auto it = layers.find(name);
    return it == layers.end() ? nullptr : &it->second;
  }
};

}  // namespace npusim::compiler
