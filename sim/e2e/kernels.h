#pragma once
// The costed kernel library of end-to-end pipelines (docs/e2e.md "Kernels"): how many host CPU
// operations a pre- or post-processing kernel costs for its size, and what an element-wise kernel
// costs when inserted on the NPU's vector unit. Costs depend only on the operation type and its
// element (pixel) count, so any description of pre-processing can be costed by mapping each of its steps
// onto a Kernel and a count (sim/e2e/preprocess_stages.h does it for a model's --preprocess file).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isa/machine/config.h"

namespace npusim::sim::e2e {

enum class Kernel {
  kResize,        // bilinear (or nearest) resize to width x height; per output element
  kPad,           // fill a width x height canvas around the data so far (letterbox); per padded element
  kNormalize,     // (x - mean) * (1 / std); per element
  kConvertColor,  // channel reorder (BGR <-> RGB); per element
  kLayout,        // HWC <-> CHW transpose; per element
  kCast,          // dtype conversion (uint8 -> float, float -> int8); per element
  kArgmax,        // index of the largest of `elements` scores
  kTopk,          // the k largest of `elements` scores (a k-entry heap)
  kNms,           // non-maximum suppression over `boxes` candidates (sort + pairwise IoU, worst case)
  kCtcGreedy,     // CTC greedy decode: argmax over `classes` per timestep, then collapse
  kFixed,         // a user-given time (`time_us`): decode, tracking, anything not in the library
};

// "resize", "normalize", ... as written in pipeline files; kernel_from_name is its inverse.
std::string_view kernel_name(Kernel k);
std::optional<Kernel> kernel_from_name(std::string_view name);
std::vector<std::string> kernel_names();

// Host CPU operations per element (resize: per output element) of the element-wise kernels; the
// documented assumption behind each figure is in kernels.cpp and docs/e2e.md.
int64_t ops_per_element(Kernel k, bool nearest = false);

// The size a kernel works on.
struct KernelWork {
  int64_t elements = 0;                // elements (pixels x channels) or scores
  int64_t k = 0;                       // topk
  int64_t boxes = 0;                   // nms
  int64_t timesteps = 0, classes = 0;  // ctc_greedy
  bool nearest = false;                // resize
};

// Host CPU operations of one run of `k` over `work` (kFixed: 0, its cost is a time).
int64_t host_ops(Kernel k, const KernelWork& work);

// Whether `k` can be inserted on the NPU's vector unit (element-wise kernels only).
bool runs_on_npu(Kernel k);
// Vector-unit cycles of `k` over `elements` on the NPU: one pass of the matching vector op per
// element (normalize: a subtract and a multiply pass), timed by isa::timing::vec_cycles.
int64_t npu_cycles(Kernel k, int64_t elements, const isa::VectorConfig& vector);

}  // namespace npusim::sim::e2e
