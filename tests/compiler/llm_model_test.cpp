// The llm: micro-model's KV cache means what it says: a decode step over the cache a prefill wrote
// computes what a prefill over one more token computes at its last position (reference interpreter).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"

namespace npusim::compiler {
namespace {

constexpr int64_t kHidden = 32;
const std::string kBase = "llm:layers=2,hidden=32,heads=4,kv_heads=2,ffn=48,vocab=20";

Tensor rows(const std::vector<float>& all, int64_t from, int64_t to) {
  return Tensor::from_floats({to - from, kHidden},
                             std::vector<float>(all.begin() + from * kHidden, all.begin() + to * kHidden));
}

void expect_close(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  const std::vector<float> x = a.to_float_vector(), y = b.to_float_vector();
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(x[i], y[i], 1e-4 * (1 + std::fabs(y[i]))) << what << " [" << i << "]";
}

TEST(LlmModel, DecodeStepOverTheCachedPrefillEqualsTheLongerPrefillsLastPosition) {
  std::vector<float> x(5 * kHidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  const auto full = interpret(builtin_model(kBase + ",seq=5"), {{"llm.x", rows(x, 0, 5)}});
  const auto prefix = interpret(builtin_model(kBase + ",seq=4"), {{"llm.x", rows(x, 0, 4)}});
  std::map<std::string, Tensor> step = {{"llm.x", rows(x, 4, 5)}};
  for (int l = 0; l < 2; ++l) {
    for (const char* kv : {"k", "v"}) {
      step["llm.past_" + std::string(kv) + std::to_string(l)] =
          prefix.at("llm.present_" + std::string(kv) + std::to_string(l));
    }
  }
  const auto decoded = interpret(builtin_model(kBase + ",past=4"), step);
  expect_close(decoded.at("llm.logits"), full.at("llm.logits"), "logits");
  for (int l = 0; l < 2; ++l) {
    expect_close(decoded.at("llm.present_k" + std::to_string(l)),
                 full.at("llm.present_k" + std::to_string(l)), "K");
    expect_close(decoded.at("llm.present_v" + std::to_string(l)),
                 full.at("llm.present_v" + std::to_string(l)), "V");
  }
  // The cache after the step holds all five positions.
  EXPECT_EQ(full.at("llm.present_k0").shape, (Shape{2, 5, 8}));
}

TEST(LlmModel, SpecErrorsNameTheParameter) {
  EXPECT_THROW(parse_llm_spec("llm:layers=1,hidden=32,heads=4,kv_heads=3,ffn=8,vocab=8"), ModelError);
  EXPECT_THROW(parse_llm_spec("llm:layers=1,hidden=32,heads=4,ffn=8,vocab=8"), ModelError);
  EXPECT_THROW(parse_llm_spec("llm:layers=1,hidden=12,heads=4,kv_heads=2,ffn=8,vocab=8"),
               ModelError);  // head_dim 3
  const LlmSpec s = parse_llm_spec("llm:layers=16,hidden=2048,heads=32,kv_heads=8,ffn=8192,vocab=32000");
  // Llama-3.2-1B's shape without tied embeddings: 16 x (Q 2048^2 + K,V 2 x 2048x512 + O 2048^2 + FFN 3 x
  // 2048x8192 + 2 norms) + final norm + head 2048x32000.
  EXPECT_EQ(s.parameters(),
            16 * (2048LL * 2048 + 2 * 2048LL * 512 + 2048LL * 2048 + 3 * 2048LL * 8192 + 2 * 2048) + 2048 +
                2048LL * 32000);
}

}  // namespace
}  // namespace npusim::compiler
