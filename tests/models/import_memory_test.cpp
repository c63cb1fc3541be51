// Import fixes that real models needed (compiler/import/onnx_import.cpp): a model file is parsed from the
// stream and each initializer's protobuf copy is released once converted, so importing holds the
// weights about twice at the peak (the parsed model while the graph's tensors fill in), not three times
// (the file's bytes as well). ViT-B/16 (346 MB of weights) peaked at 1.03 GB before, 0.71 GB after.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/import/import.h"

namespace npusim::compiler {
namespace {

constexpr int64_t kN = 4096, kK = 4096;  // one [K x N] float32 weight: 64 MiB
constexpr double kWeightBytes = 4.0 * kN * kK;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("npusim_models_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// Writes the model from a child process, so the parent's peak RSS has never seen its bytes.
void write_model_in_child(const std::string& path, int64_t keep_bytes = -1) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string bytes = builtin_model_onnx("gemm:M=1,N=" + std::to_string(kN) + ",K=" + std::to_string(kK));
    if (keep_bytes >= 0) bytes.resize(static_cast<size_t>(keep_bytes));
    std::ofstream(path, std::ios::binary) << bytes;
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

double resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr || std::fscanf(f, "%ld %ld", &pages, &resident) != 2)
    ADD_FAILURE() << "no /proc/self/statm";
  if (f != nullptr) std::fclose(f);
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double peak_resident_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux reports KiB
}

TEST(ImportMemory, FileImportPeaksBelowTwoAndAHalfTimesTheWeights) {
#ifdef NPUSIM_SANITIZE
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine make resident-size figures meaningless";
#endif
  const std::string path = temp_path("gemm.onnx");
  write_model_in_child(path);
  const double before = resident_bytes();
  ASSERT_LT(peak_resident_bytes(), before + 0.5 * kWeightBytes) << "the test process already peaked higher";
  const Graph g = import_onnx_file(path);
  const double growth = peak_resident_bytes() - before;
  std::filesystem::remove(path);
  int64_t constant_elements = 0;
  for (const auto& [name, v] : g.values) {
    if (v.constant) constant_elements += v.constant->size();
  }
  EXPECT_EQ(constant_elements, kN * kK);
  // Parsed model (1x) + graph tensors (1x) + slack; the old path also held the file's bytes (3x).
  EXPECT_LT(growth, 2.5 * kWeightBytes) << "peak grew by " << growth / kWeightBytes << "x the weights";
}

TEST(ImportMemory, TruncatedFileIsAClearModelErrorOnTheStreamingPath) {
  const std::string path = temp_path("truncated.onnx");
  write_model_in_child(path, 100000);
  try {
    import_onnx_file(path);
    ADD_FAILURE() << "a truncated model imported";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(ImportMemory, MissingFileNamesThePath) {
  const std::string path = temp_path("does_not_exist.onnx");
  try {
    import_onnx_file(path);
    ADD_FAILURE() << "a missing model imported";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open '" + path + "'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim::compiler
