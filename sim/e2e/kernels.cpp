#include "sim/e2e/kernels.h"

#include <array>

#include "isa/isa.h"
#include "isa/timing/units.h"

namespace npusim::sim::e2e {
namespace {

struct KernelInfo {
  Kernel kernel;
  std::string_view name;
};
constexpr std::array<KernelInfo, 11> kKernels = {{
    {Kernel::kResize, "resize"},
    {Kernel::kPad, "pad"},
    {Kernel::kNormalize, "normalize"},
    {Kernel::kConvertColor, "convert_color"},
    {Kernel::kLayout, "layout"},
    {Kernel::kCast, "cast"},
    {Kernel::kArgmax, "argmax"},
    {Kernel::kTopk, "topk"},
    {Kernel::kNms, "nms"},
    {Kernel::kCtcGreedy, "ctc_greedy"},
    {Kernel::kFixed, "fixed"},
}};

// ceil(log2(n)) for n >= 1 (0 for n <= 1).
int64_t ceil_log2(int64_t n) {
  int64_t bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

// Operations of one IoU test between two boxes and the suppression decision: 4 min/max for the
// intersection corners, 2 subtractions and a multiply for its area, 2 adds and a subtract for the union,
// a divide and a compare (areas are precomputed once per box).
constexpr int64_t kIouOps = 12;

}  // namespace

std::string_view kernel_name(Kernel k) {
  for (const KernelInfo& i : kKernels)
    if (i.kernel == k) return i.name;
  return "?";
}

std::optional<Kernel> kernel_from_name(std::string_view name) {
  for (const KernelInfo& i : kKernels)
    if (i.name == name) return i.kernel;
  return std::nullopt;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> v;
  for (const KernelInfo& i : kKernels) v.emplace_back(i.name);
  return v;
}

int64_t ops_per_element(Kernel k, bool nearest) {
  switch (k) {
    // Bilinear: 4 taps weighted (4 multiplies, 3 adds), the source index and weights (2), the store (1).
    // Nearest: the source index and the copy.
    case Kernel::kResize:
      return nearest ? 2 : 10;
    case Kernel::kPad:
      return 1;  // one store of the padding value per padded element
    case Kernel::kNormalize:
      return 2;  // a subtract and a multiply by the precomputed 1/std
    case Kernel::kConvertColor:
      return 1;  // one move per element
    case Kernel::kLayout:
      return 1;  // one move per element
    case Kernel::kCast:
      return 1;  // one conversion per element
    case Kernel::kArgmax:
      return 1;  // one compare per score
    default:
      return 0;
  }
}

int64_t host_ops(Kernel k, const KernelWork& w) {
  switch (k) {
    case Kernel::kTopk:
      // Every score is compared with the heap's minimum; a replacement sifts down log2(k) levels (worst
      // case).
      return w.elements * (1 + ceil_log2(w.k));
    case Kernel::kNms:
      // Sort by score (n log n compares and moves), then every pair's IoU: the worst case, nothing
      // suppressed.
      return 2 * w.boxes * ceil_log2(w.boxes) + w.boxes * (w.boxes - 1) / 2 * kIouOps;
    case Kernel::kCtcGreedy:
      // Argmax over the classes of every timestep, then drop repeats and blanks (2 ops per timestep).
      return w.timesteps * w.classes + 2 * w.timesteps;
    case Kernel::kFixed:
      return 0;
    default:
      return w.elements * ops_per_element(k, w.nearest);
  }
}

bool runs_on_npu(Kernel k) {
  return k == Kernel::kNormalize || k == Kernel::kConvertColor || k == Kernel::kLayout || k == Kernel::kCast;
}

int64_t npu_cycles(Kernel k, int64_t elements, const isa::VectorConfig& vector) {
  auto pass = [&](isa::VecOp op) {
    isa::Instruction ins;
    ins.opcode = isa::Opcode::kVec;
    ins.set(isa::Field::kVop, static_cast<int64_t>(op));
    ins.set(isa::Field::kD0, elements);
    return isa::timing::vec_cycles(ins, vector);
  };
  switch (k) {
    case Kernel::kNormalize:
      return pass(isa::VecOp::kSub) + pass(isa::VecOp::kMul);
    case Kernel::kLayout:
      return pass(isa::VecOp::kTranspose);
    case Kernel::kConvertColor:
    case Kernel::kCast:
      return pass(isa::VecOp::kCopy);
    default:
      return 0;
  }
}

}  // namespace npusim::sim::e2e
