// The llm: decoder on the NPU, functionally: greedy generation over 8 decode steps with the KV cache
// carried from step to step picks the same tokens as the FP32 reference interpreter doing the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/passes/passes.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

constexpr int64_t kHidden = 64, kVocab = 50, kLayers = 2;
const std::string kBase = "llm:layers=2,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=50";

using Runner =
    std::function<std::map<std::string, Tensor>(const Graph&, const std::map<std::string, Tensor>&)>;

// The embedding table (the lookup is outside the model): token t's row.
Tensor embed(const std::vector<int64_t>& tokens) {
  const Tensor table = random_tensor({kVocab, kHidden}, 1.0f, 99);
  std::vector<float> rows;
  for (int64_t t : tokens)
    rows.insert(rows.end(), table.f.begin() + t * kHidden, table.f.begin() + (t + 1) * kHidden);
  return Tensor::from_floats({static_cast<int64_t>(tokens.size()), kHidden}, rows);
}

int64_t argmax(const Tensor& logits) {
  const std::vector<float> v = logits.to_float_vector();
  return std::max_element(v.begin(), v.end()) - v.begin();
}

// Prefill over `prompt`, then `steps` greedy decode steps, each over the cache the previous one wrote.
std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int steps, const Runner& run) {
  auto out = run(builtin_model(kBase + ",seq=" + std::to_string(prompt.size())), {{"llm.x", embed(prompt)}});
  std::vector<int64_t> tokens = {argmax(out.at("llm.logits"))};
  for (int s = 0; s < steps; ++s) {
    const int64_t past = static_cast<int64_t>(prompt.size()) + s;
    std::map<std::string, Tensor> in = {{"llm.x", embed({tokens.back()})}};
    for (int64_t l = 0; l < kLayers; ++l) {
      in["llm.past_k" + std::to_string(l)] = out.at("llm.present_k" + std::to_string(l));
      in["llm.past_v" + std::to_string(l)] = out.at("llm.present_v" + std::to_string(l));
    }
    out = run(builtin_model(kBase + ",past=" + std::to_string(past)), in);
    tokens.push_back(argmax(out.at("llm.logits")));
  }
  return tokens;
}

TEST(LlmFunctional, GreedyTokensOverEightDecodeStepsEqualTheReferenceInterpreters) {
  const std::vector<int64_t> prompt = {3, 14, 15, 9, 26};
  const std::vector<int64_t> reference = generate(
      prompt, 8, [](const Graph& g, const std::map<std::string, Tensor>& in) { return interpret(g, in); });
  double worst = 0;
  const std::vector<int64_t> npu =
      generate(prompt, 8, [&](const Graph& g, const std::map<std::string, Tensor>& in) {
        Graph lowered = g;
        lower(lowered);
        const CompileResult r = compile(lowered, isa::NpuConfig{}, {});
        auto got = run_program(r, isa::NpuConfig{}, in);
        worst = std::max(worst, max_rel_error(got, interpret(g, in)));
        return got;
      });
  EXPECT_EQ(npu, reference);
  EXPECT_LT(worst, 1e-3);
  // Not a constant stream: the cache and the positions change what comes out.
  EXPECT_GT(std::set<int64_t>(reference.begin(), reference.end()).size(), 1u);
}

}  // namespace
}  // namespace npusim::compiler::testing
