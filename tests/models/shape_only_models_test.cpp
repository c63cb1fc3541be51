// Timing-only compiles of real models (label models; needs the exports of tests/models). `npusim run`
// without --functional or --accuracy imports an ONNX file's weights by shape only (compiler::ImportOptions::
// weight_values) and must compile the very program the weights' values give, data segments' places and
// sizes included, so that every cycle count is the same. NPUSIM_SHAPE_ONLY_MODEL names the exported model.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "compiler/import/import.h"
#include "sim/config/config_loader.h"
#include "sim/model/model.h"
#include "tests/compiler/backend/shape_only.h"

namespace npusim::compiler::testing {
namespace {

std::string model_path() {
  const char* m = std::getenv("NPUSIM_SHAPE_ONLY_MODEL");
  return std::string(NPUSIM_MODELS_DIR) + "/" + (m != nullptr ? m : "mobilenet_v2.onnx");
}

// NPUSIM_SHAPE_ONLY_DIMS "NAME=N": a dynamic dimension bound (--dynamic NAME=N).
std::map<std::string, int64_t> dim_params() {
  std::map<std::string, int64_t> dims;
  const char* d = std::getenv("NPUSIM_SHAPE_ONLY_DIMS");
  const std::string spec = d != nullptr ? d : "";
  const size_t eq = spec.find('=');
  if (eq != std::string::npos) dims[spec.substr(0, eq)] = std::stoll(spec.substr(eq + 1));
  return dims;
}

TEST(ShapeOnlyModels, OnnxWeightsOf64KiBOrMoreAreImportedByShapeOnly) {
  ImportOptions o;
  o.weight_values = false;
  o.dim_params = dim_params();
  const Graph g = import_onnx_file(model_path(), o);
  int elided = 0, kept = 0;
  for (const auto& [name, v] : g.values) {
    if (!v.is_constant()) continue;
    const Tensor& t = *v.constant;
    const bool weight = t.floating() && t.size() * element_size(t.dtype) >= 64 * 1024;
    EXPECT_EQ(t.has_values(), !weight) << name;
    (weight ? elided : kept) += 1;
  }
  EXPECT_GT(elided, 0);
  EXPECT_GT(kept, 0);
}

TEST(ShapeOnlyModels, TimingOnlyCompileIsTheProgramOfTheWeightsValuesWithoutTheBytes) {
  const isa::NpuConfig config = sim::load_config("edge");
  for (quant::Precision p : {quant::Precision::kFp32, quant::Precision::kFp16}) {
    sim::ModelOptions o;
    o.timer = sim::simulation_timer(config);
    o.plan.spec.model = p;
    o.dim_params = dim_params();
    const sim::CompiledModel with = sim::compile_model(model_path(), config, o, nullptr);
    o.weight_values = false;
    const sim::CompiledModel without = sim::compile_model(model_path(), config, o, nullptr);
    expect_same_program_without_bytes(with.result, without.result,
                                      model_path() + " " + std::string(quant::to_string(p)));
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
