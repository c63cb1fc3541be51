#pragma once
// Imposed mappings (compiler/backend/mapping/mapping.h) inside the back end: the checks that each imposed
// value applies to its layer, and the hook through which the matrix tiling search honours them (internal to
// the back end). Every check throws MappingError "WHERE: layer 'NAME': CONSTRAINT".
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/backend/matrix/matrix_walk.h"
#include "compiler/backend/result.h"

namespace npusim::compiler::backend {

// Every entry names a node of the lowered graph `g`.
void check_mapping_names(const Graph& g, const MappingOverrides& mapping);

// Before lowering node `n`, whose back-end placement is `natural`:
// the imposed placement must be the natural one or "host" (not for free layers), and tiling keys need a
// matrix layer. Returns whether the entry moves the layer onto the host.
bool imposed_host(const LayerMapping& m, const Node& n, Placement natural);

// After lowering: what the entry imposes was applied (a layer that fell back to the host has no tiling,
// and was not placed where the entry asked).
void check_applied(const LayerMapping& m, const LayerPlan& plan, bool forced_host);

// After fusion is known (backend/estimate/bounds.h): an entry's `fused` list is the layer's fusion group
// `fused`, in any order.
void check_fusion(const LayerMapping& m, const std::vector<std::string>& fused);

// What an entry imposes on one matrix layer's tiling search (MatrixMapper::search): the candidates of
// each imposed dimension are that value alone; open dimensions are searched as usual.
class ImposedTiling {
 public:
  // Checks the imposed values against the job (keys of the layer's kind, within the tensor and the
  // instruction fields, a tile that fits the scratchpads when open dimensions are at their smallest).
  // Imposes nothing when the layer has no entry or its entry no tiling keys.
  ImposedTiling(const Context& c, const MatrixJob& j, const MatrixMapper& mm);

  void restrict_blocks(std::vector<int64_t>& gbs) const;
  // The candidate images per tile (Tiling::ti).
  void restrict_images(std::vector<int64_t>& tis) const;
  // The candidate lists for group block gb; an imposed value a block of gb groups cannot take empties
  // its list.
  void restrict(int64_t gb, std::vector<int64_t>& tcs, std::vector<int64_t>& tns, std::vector<int64_t>& tohs,
                std::vector<int64_t>& tows) const;
  // Whether the loop order (MatrixMapper's orders: Tiling::spatial_outer, input_resident, groups_inner)
  // is the imposed one, or none is imposed.
  bool allows(bool spatial_outer, bool input_resident, bool groups_inner = false) const;
  // When no candidate fitted: throws MappingError if values were imposed (else returns).
  void none_fits() const;

 private:
  [[noreturn]] void fail(std::string_view key, const std::string& what) const;
  std::string imposed_list() const;

  const MatrixJob& j_;
  const LayerMapping* m_ = nullptr;
};

// Tiling t of job j as the values that impose it.
LayerMapping as_mapping(const MatrixJob& j, const Tiling& t);

}  // namespace npusim::compiler::backend
