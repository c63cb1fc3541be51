#pragma once
// Internal to the interpreter: the kernel interface and shared helpers.
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/interp/interpreter.h"
#include "isa/strides.h"

namespace npusim::compiler::interp {

struct KernelContext {
  const Node& node;
  int64_t opset;
  std::vector<const Tensor*> in;  // nullptr for an omitted optional input
  std::vector<Tensor> out;        // sized to node.outputs; kernels fill the ones that are requested

  const Tensor& input(size_t k) const;   // throws naming the node when absent
  const Tensor& finput(size_t k) const;  // same, and requires a floating tensor
  // Element 0 of input k as a double / int (fails on an absent or empty input).
  double scalar(size_t k) const;
  int64_t iscalar(size_t k) const;
  bool has(size_t k) const { return k < in.size() && in[k] != nullptr; }
  bool wants(size_t k) const { return k < node.outputs.size() && !node.outputs[k].empty(); }
  [[noreturn]] void fail(const std::string& what) const;
};

using Kernel = void (*)(KernelContext&);
using KernelTable = std::unordered_map<std::string, Kernel>;

void register_elementwise(KernelTable& t);
void register_nn(KernelTable& t);
void register_tensor(KernelTable& t);
void register_reduce(KernelTable& t);
void register_control_flow(KernelTable& t);  // If, Loop, Scan
void register_recurrent(KernelTable& t);     // LSTM, GRU, RNN
void register_index(KernelTable& t);         // scatters, GatherND, TopK, Unique, losses, Det, windows, ...
void register_spatial(KernelTable& t);       // NonMaxSuppression, RoiAlign, MaxUnpool, GridSample
void register_signal(KernelTable& t);        // DFT, STFT, MelWeightMatrix

// Values a subgraph reads from its enclosing graphs, by the names the subgraph uses.
using Scope = std::unordered_map<std::string, const Tensor*>;
// Runs a subgraph on its formal inputs (by name) with `scope` visible; its outputs in order.
std::vector<Tensor> run_subgraph(const Graph& sub, std::map<std::string, Tensor> inputs, const Scope& scope);
const KernelTable& kernel_table();

// The value range of an integer type (int64's for the others), for saturating conversions.
inline void integer_range(DataType t, int64_t& lo, int64_t& hi) {
  switch (t) {
    case DataType::kInt8:
      lo = -128;
      hi = 127;
      break;
    case DataType::kUInt8:
      lo = 0;
      hi = 255;
      break;
    case DataType::kInt16:
      lo = -32768;
      hi = 32767;
      break;
    case DataType::kUInt16:
      lo = 0;
      hi = 65535;
      break;
    case DataType::kInt32:
      lo = std::numeric_limits<int32_t>::min();
      hi = std::numeric_limits<int32_t>::max();
      break;
    default:
      lo = std::numeric_limits<int64_t>::min();
      hi = std::numeric_limits<int64_t>::max();
      break;
  }
}

// Numpy broadcast of two shapes; throws InterpretError via ctx on mismatch.
Shape broadcast_shapes(const KernelContext& ctx, const Shape& a, const Shape& b);
// Normalise a possibly negative axis against `rank`; fails the node if out of range.
int64_t norm_axis(const KernelContext& ctx, int64_t axis, int64_t rank);

// Calls f(out_index, in_offsets) for every element of `oshape`, where in_offsets[k] is the offset of
// the broadcast element in input k. Inner loop has no virtual dispatch; f is inlined.
template <size_t N, class F>
void broadcast_loop(const Shape& oshape, const std::array<const Shape*, N>& ishapes, F&& f) {
  const size_t r = oshape.size();
  std::array<std::vector<int64_t>, N> st;
  for (size_t k = 0; k < N; ++k) {
    st[k].assign(r, 0);
    const Shape& is = *ishapes[k];
    int64_t stride = 1;
    for (size_t d = 0; d < is.size(); ++d) {
      size_t id = is.size() - 1 - d, od = r - 1 - d;
      st[k][od] = is[id] == 1 ? 0 : stride;
      stride *= is[id];
    }
  }
  const int64_t total = num_elements(oshape);
  if (total == 0) return;
  const int64_t inner = r ? oshape[r - 1] : 1;
  std::array<int64_t, N> inner_st{}, base{};
  for (size_t k = 0; k < N; ++k) inner_st[k] = r ? st[k][r - 1] : 0;
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < total; o += inner) {
    std::array<int64_t, N> p = base;
    for (int64_t j = 0; j < inner; ++j) {
      f(o + j, p);
      for (size_t k = 0; k < N; ++k) p[k] += inner_st[k];
    }
    for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) base[k] += st[k][d];
      if (idx[d] < oshape[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= st[k][d] * oshape[d];
      idx[d] = 0;
    }
  }
}

// C[m x n] (+)= A[m x k] * B[k x n], all row-major with leading dimensions lda/ldb/ldc. Blocked for
// cache, inner loop over n contiguous (vectorisable).
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate);

}  // namespace npusim::compiler::interp
