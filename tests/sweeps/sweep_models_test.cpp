// `npusim sweep` on real models (label sweeps): the trends that hold by construction, checked on
// torchvision's ResNet-18 and MobileNetV2 as the compiler maps them, and the batch axis.
// The models are exported once per build tree into BUILD/test_models (shared with tests/models and
// tests/quant_e2e) by scripts/export_models.py with /usr/bin/python3 + torch (random weights, nothing
// downloaded). Points run in int8 on the edge preset, like configs/sweeps/example.yaml, with one
// calibration sample: calibration sets scales, not the program, so it does not change any figure checked.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/e2e/run_command.h"
#include "tests/sweeps/results_table.h"

namespace npusim::test {
namespace {

namespace fs = std::filesystem;

const std::string kNpusim = NPUSIM_BIN;
const std::string kModels = std::string(NPUSIM_BINARY_DIR) + "/test_models";
const std::string kExport = std::string(NPUSIM_SOURCE_DIR) + "/scripts/export_models.py";
const std::string kInt8 = "run_args: [--precision, int8, --calibration-samples, '1']\n";

// BUILD/test_models/NAME.onnx, exported when missing (the export is atomic, so concurrent tests are safe).
std::string model(const std::string& name) {
  const std::string path = kModels + "/" + name + ".onnx";
  if (!fs::exists(path)) {
    const CommandResult r = run_command({"/usr/bin/python3", kExport, kModels, name});
    EXPECT_EQ(r.exit_code, 0) << "exporting " << name << ": " << r.err;
  }
  return path;
}

double num(const std::map<std::string, std::string>& row, const std::string& key) {
  EXPECT_FALSE(row.at(key).empty()) << key;
  return std::stod(row.at(key));
}

// Every row ok, or the test stops with the first error.
void expect_all_ok(const Table& t, size_t points) {
  ASSERT_EQ(t.rows.size(), points);
  for (const auto& row : t.rows)
    ASSERT_EQ(row.at("status"), "ok") << row.at("index") << ": " << row.at("error");
}

// ResNet-18 compiled for each array: the matrix unit's cycles (the per-layer compute cycles summed,
// results column matrix_cycles) fall strictly as the square array grows 8x8 -> 16x16 -> 32x32 -> 64x64.
// The MACs are the model's and do not depend on the array (ResNet-18 has no grouped convolution, whose
// block-diagonal mapping would count padding zeros).
TEST(SweepOnRealModels, MatrixCyclesFallAsTheArrayGrows) {
  const std::string resnet18 = model("resnet18");
  const std::string d = temp_dir("sweep-real-array");
  const std::string f = write_sweep(d, "base: edge\n" + kInt8 +
                                           "axes:\n"
                                           "  - model: [{name: resnet18, path: '" +
                                           resnet18 +
                                           "'}]\n"
                                           "  - systolic_array.rows: [8, 16, 32, 64]\n"
                                           "    systolic_array.cols: [8, 16, 32, 64]\n");
  const CommandResult r = sweep({f, "-j", "2", "-o", d + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Table t = read_csv(d + "/out/results.csv");
  expect_all_ok(t, 4);
  // ResNet-18 at 224x224: 1.81 G multiply-accumulates (conv + fc); the report counts them exactly.
  const double macs = num(t.rows[0], "macs");
  EXPECT_GT(macs, 1.80e9);
  EXPECT_LT(macs, 1.83e9);
  for (size_t i = 1; i < t.rows.size(); ++i) {
    const auto& a = t.rows[i - 1];
    const auto& b = t.rows[i];
    EXPECT_LT(num(b, "matrix_cycles"), num(a, "matrix_cycles"))
        << a.at("systolic_array.rows") << " -> " << b.at("systolic_array.rows");
    EXPECT_EQ(b.at("macs"), a.at("macs"));
    // The matrix unit cannot beat one MAC per PE per cycle.
    EXPECT_GE(num(b, "matrix_cycles") * num(b, "array_pes"), macs) << b.at("systolic_array.rows");
  }
}

// One program, ResNet-18 compiled once for 128 KiB scratchpads, run on five DRAM models x three SRAM
// sizes: the tiling is the program's, so
// - an ideal DRAM (unlimited bandwidth, here with no fixed latency either) is never slower than a real one;
// - a larger SRAM never moves more bytes between DRAM and the chip.
// `npusim run PROG.npu` refuses a program on scratchpads of another size than it was compiled for, so the
// sweep runs the program's assembly text without its `.machine` lines: the same instructions, bound to
// no machine (as tests/sweeps/programs/gemm_layer.s); its addresses fit the smallest SRAM, so every point.
TEST(SweepOnRealModels, SameProgramIdealDramAndLargerSramNeverWorse) {
  const std::string resnet18 = model("resnet18");
  const std::string d = temp_dir("sweep-real-program");
  const CommandResult c = run_command({kNpusim,
                                       "compile",
                                       resnet18,
                                       "--config",
                                       "edge",
                                       "--set",
                                       "sram.input.size_kib=128",
                                       "--set",
                                       "sram.weight.size_kib=128",
                                       "--set",
                                       "sram.accumulator.size_kib=128",
                                       "--precision",
                                       "int8",
                                       "--calibration-samples",
                                       "1",
                                       "-o",
                                       d + "/resnet18.npu",
                                       "--asm",
                                       d + "/resnet18.s",
                                       "-q"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string program = d + "/resnet18_any_machine.s";
  {
    std::istringstream in(read_file(d + "/resnet18.s"));
    std::string text, line;
    size_t machine_lines = 0;
    while (std::getline(in, line)) {
      if (line.rfind(".machine ", 0) == 0) {
        ++machine_lines;
        continue;
      }
      text += line + "\n";
    }
    ASSERT_GT(machine_lines, 0u) << "the compiled program's assembly names no machine";
    write_file(program, text);
  }
  const std::string f = write_sweep(d,
                                    "base: edge\n"
                                    "set: {dram.latency_ns: 0}\n"
                                    "axes:\n"
                                    "  - model: [{name: resnet18, path: '" +
                                        program +
                                        "'}]\n"
                                        "  - dram.model: [ideal, simple, ddr4_3200, lpddr4_4266, hbm2]\n"
                                        "  - sram.input.size_kib: [128, 512, 2048]\n"
                                        "    sram.weight.size_kib: [128, 512, 2048]\n"
                                        "    sram.accumulator.size_kib: [128, 512, 2048]\n");
  const CommandResult r = sweep({f, "-j", "2", "-o", d + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Table t = read_csv(d + "/out/results.csv");
  expect_all_ok(t, 15);
  std::map<std::pair<std::string, std::string>, const std::map<std::string, std::string>*> at;
  for (const auto& row : t.rows) at[{row.at("dram.model"), row.at("sram.input.size_kib")}] = &row;
  const std::vector<std::string> srams = {"128", "512", "2048"};
  for (const auto& s : srams)
    for (const char* m : {"simple", "ddr4_3200", "lpddr4_4266", "hbm2"})
      EXPECT_LE(num(*at[{"ideal", s}], "total_cycles"), num(*at[{m, s}], "total_cycles"))
          << "sram " << s << " KiB: ideal vs " << m;
  for (const char* m : {"ideal", "simple", "ddr4_3200", "lpddr4_4266", "hbm2"})
    for (size_t i = 1; i < srams.size(); ++i) {
      auto traffic = [&](const std::string& s) {
        return num(*at[{m, s}], "dram_bytes_read") + num(*at[{m, s}], "dram_bytes_written");
      };
      EXPECT_LE(traffic(srams[i]), traffic(srams[i - 1])) << m << ": " << srams[i - 1] << " -> " << srams[i];
    }
}

// A batch axis (`npusim run --batch N`) runs on both models. ResNet-18's MACs are exactly N times
// batch 1's (every layer's work scales with the batch); MobileNetV2 runs at every batch with the same
// layers and takes longer for a larger batch. (Its reported MACs are not compared: the depthwise layers
// run as block-diagonal dense blocks whose size the tiler picks per batch, and the report counts the
// zeros between the groups.)
TEST(SweepOnRealModels, BatchAxisScalesTheWork) {
  const std::string resnet18 = model("resnet18");
  const std::string mobilenet = model("mobilenet_v2");
  const std::string d = temp_dir("sweep-real-batch");
  const std::string f = write_sweep(d, "base: edge\n" + kInt8 +
                                           "axes:\n"
                                           "  - model: [{name: resnet18, path: '" +
                                           resnet18 + "'}, {name: mobilenet_v2, path: '" + mobilenet +
                                           "'}]\n"
                                           "  - batch: [1, 2, 4]\n");
  const CommandResult dry = sweep({f, "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("--batch 4"), std::string::npos) << dry.out;
  const CommandResult r = sweep({f, "-j", "2", "-o", d + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Table t = read_csv(d + "/out/results.csv");
  expect_all_ok(t, 6);
  std::map<std::pair<std::string, int>, const std::map<std::string, std::string>*> at;
  for (const auto& row : t.rows) at[{row.at("model"), std::stoi(row.at("batch"))}] = &row;
  const double macs1 = num(*at[{"resnet18", 1}], "macs");
  for (int b : {2, 4}) {
    EXPECT_EQ(num(*at[{"resnet18", b}], "macs"), b * macs1) << "resnet18 batch " << b;
    for (const char* m : {"resnet18", "mobilenet_v2"}) {
      const auto& one = *at[{m, 1}];
      const auto& n = *at[{m, b}];
      // The same nodes at every batch; how many of them are program layers may differ by a few fusions
      // (line-buffer fusions are taken when the simulation says they are faster, at each batch; MobileNetV2
      // has 17 candidate conv -> depthwise pairs, and a whole block in one band loop is one layer of three:
      // int8 at batch 1 runs blocks 8-10 layer by layer, at batch 2 in one band loop each, 41 layers and 34).
      EXPECT_NEAR(num(n, "layers"), num(one, "layers"), 0.2 * num(one, "layers")) << m << " batch " << b;
      EXPECT_EQ(num(n, "macs"), b * num(one, "macs")) << m << " batch " << b;
      EXPECT_GT(num(n, "total_cycles"), num(*at[{m, b / 2}], "total_cycles")) << m << " batch " << b;
    }
  }
}

}  // namespace
}  // namespace npusim::test
