// Model-level tests of compiler/quant on real networks (torchvision MobileNetV2 / ResNet-50 with
// random weights and re-estimated BatchNorm statistics, exported by scripts/export_models.py at test
// time). Label `model`: tens of seconds each, not part of the fast unit run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "compiler/import/import.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "compiler/quant/emulate.h"

namespace npusim::compiler::quant {
namespace {

// The lowered graph of an exported model (exported once into the build tree).
Graph lowered_model(const std::string& name) {
  const std::string dir = std::string(NPUSIM_BINARY_DIR) + "/test_models";
  const std::string path = dir + "/" + name + ".onnx";
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(dir);
    const std::string cmd = "/usr/bin/python3 " + std::string(NPUSIM_SOURCE_DIR) +
                            "/scripts/export_models.py " + dir + " " + name + " > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(path))
      ADD_FAILURE() << "export failed: " << cmd;
  }
  Graph g = import_onnx_file(path);
  lower(g);
  return g;
}

AccuracyReport run(const Graph& g, Precision p, bool per_channel, CalibrationMethod m, int calib, int eval) {
  PlanRequest req;
  req.spec.model = p;
  req.quant.per_channel = per_channel;
  req.quant.calibration.method = m;
  // The weight scales alone: bias correction (the default) removes more of per-tensor weights' rounding
  // shift.
  req.quant.bias_correction = BiasCorrection::kNone;
  req.calibration_count = calib;
  PrecisionPlan plan = build_plan(g, req);
  AccuracyReport r = evaluate_accuracy(g, plan, synthetic_samples(g, eval, 1000));
  std::printf("%s per_channel=%d %s: output SQNR %.2f dB, cosine %.5f, first bad layer '%s'\n",
              std::string(to_string(p)).c_str(), per_channel, to_string(m).c_str(), r.output_sqnr_db,
              r.output_cosine, r.first_bad_layer.c_str());
  return r;
}

TEST(QuantModel, MobileNetV2PerChannelBeatsPerTensorOutputSqnr) {
  Graph g = lowered_model("mobilenet_v2");
  // Min-max ranges: the activation scales are the same in both runs, so the difference is the weights'.
  const auto pt = run(g, Precision::kInt8, false, CalibrationMethod::kMinMax, 8, 4);
  const auto pc = run(g, Precision::kInt8, true, CalibrationMethod::kMinMax, 8, 4);
  EXPECT_GT(pc.output_sqnr_db, pt.output_sqnr_db);
  // The depthwise layers are where per-tensor scales hurt: their channels' ranges differ most.
  double pt_dw = 0, pc_dw = 0;
  int n = 0;
  for (size_t k = 0; k < pc.layers.size(); ++k) {
    const Node* node = nullptr;
    for (const auto& x : g.nodes)
      if (x.name == pc.layers[k].name) node = &x;
    if (!node || node->op_type != "Conv" || node->attr_int("group", 1) == 1) continue;
    pt_dw += pt.layers[k].sqnr_db;
    pc_dw += pc.layers[k].sqnr_db;
    ++n;
  }
  ASSERT_GT(n, 10);
  std::printf("depthwise layers: mean SQNR per-tensor %.2f dB, per-channel %.2f dB\n", pt_dw / n, pc_dw / n);
  EXPECT_GT(pc_dw, pt_dw);
}

TEST(QuantModel, MobileNetV2Fp16AndBf16AreCloserThanInt8) {
  Graph g = lowered_model("mobilenet_v2");
  const auto i8 = run(g, Precision::kInt8, true, CalibrationMethod::kEntropy, 8, 1);
  const auto f16 = run(g, Precision::kFp16, true, CalibrationMethod::kEntropy, 0, 1);
  const auto b16 = run(g, Precision::kBf16, true, CalibrationMethod::kEntropy, 0, 1);
  EXPECT_GT(f16.output_sqnr_db, b16.output_sqnr_db);  // 11 vs 8 significand bits
  EXPECT_GT(b16.output_sqnr_db, 0.0);
  EXPECT_GT(f16.output_sqnr_db, i8.output_sqnr_db);
  EXPECT_GT(i8.output_cosine, 0.9);
}

}  // namespace
}  // namespace npusim::compiler::quant
