#pragma once
// The one edit distance: "did you mean" suggestions for config keys, assembly mnemonics and names, and
// the OCR character error rate (compiler/quant/task_metrics.h) all count edits with it.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace npusim {

// Edits that turn sequence a into b: insertions, deletions and substitutions cost 1 (Levenshtein); with
// `transpositions`, swapping two adjacent elements costs 1 too (optimal string alignment: "rwos" is one
// edit from "rows"). `eq` compares elements (e.g. case-insensitively). O(|a| |b|) time and memory.
template <class Seq, class Eq = std::equal_to<>>
int64_t edit_distance_between(const Seq& a, const Seq& b, bool transpositions = false, Eq eq = {}) {
  const size_t n = a.size(), m = b.size();
  std::vector<int64_t> d((n + 1) * (m + 1));
  auto at = [&](size_t i, size_t j) -> int64_t& { return d[i * (m + 1) + j]; };
  for (size_t i = 0; i <= n; ++i) at(i, 0) = static_cast<int64_t>(i);
  for (size_t j = 0; j <= m; ++j) at(0, j) = static_cast<int64_t>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int64_t cost = eq(a[i - 1], b[j - 1]) ? 0 : 1;
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost});
      if (transpositions && i > 1 && j > 1 && eq(a[i - 1], b[j - 2]) && eq(a[i - 2], b[j - 1]))
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
    }
  }
  return at(n, m);
}

}  // namespace npusim
