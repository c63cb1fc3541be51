// ONNX node tests (libonnx-testdata) compiled for the NPU and executed on the functional datapath.
//
//   compiled_node_tests DATA_DIR LIST_FILE           run every test named in LIST_FILE (the committed
//                                                    in-scope list); fail on any mismatch or error
//   compiled_node_tests DATA_DIR LIST_FILE --discover
//                                                    run every test of LIST_FILE and classify it:
//                                                    npu / host (passes, with or without host calls),
//                                                    FAIL with the reason
//
// Per test: import the model (dynamic dimensions bound to the shapes of test_data_set's inputs),
// lower() with the default pipeline, compile() for the edge preset (isa::NpuConfig{}, fp32), execute
// the program instruction by instruction in program order with arch/datapath's execute(), HOSTCALLs
// evaluated by the reference interpreter, and compare with the test's expected outputs.
//
// Tolerance (issue item 8: 1e-4 relative): float outputs |got - want| <= 1e-4 * max(|want|, 1e-2 *
// max|want| of the tensor) + 1e-6, i.e. 1e-4 relative per element, with elements far below the
// tensor's scale judged relative to 1% of that scale (tiled accumulation reorders sums); NaN matches
// NaN, infinities match exactly. Integer and bool outputs exactly. Shapes exactly.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/backend/compile.h"
#include "compiler/import/import.h"
#include "compiler/passes/lowered.h"
#include "isa/machine/config.h"
#include "tests/compiler/backend/functional.h"
#include "tests/compiler/node_test_data.h"

namespace {

using namespace npusim::compiler;

std::vector<std::string> list_dir(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0) out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    auto num = [](const std::string& s) {
      try {
        return std::stol(s.substr(s.find_last_of('_') + 1));
      } catch (...) {
        return -1L;
      }
    };
    const long na = num(a), nb = num(b);
    return na != nb ? na < nb : a < b;
  });
  return out;
}

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::string compare(const Tensor& got, const Tensor& want) {
  if (got.shape != want.shape)
    return "shape " + shape_to_string(got.shape) + " != expected " + shape_to_string(want.shape);
  if (want.floating()) {
    double scale = 0;
    for (float w : want.f) {
      if (std::isfinite(w)) scale = std::max(scale, static_cast<double>(std::fabs(w)));
    }
    for (int64_t k = 0; k < want.size(); ++k) {
      const double g = got.as_double(k), w = want.f[static_cast<size_t>(k)];
      if (std::isnan(w) && std::isnan(g)) continue;
      if (std::isinf(w) && g == w) continue;
      const double tol = 1e-4 * std::max(std::fabs(w), 1e-2 * scale) + 1e-6;
      if (!(std::fabs(g - w) <= tol)) {
        std::ostringstream os;
        os << "element " << k << ": " << g << " != expected " << w;
        return os.str();
      }
    }
    return "";
  }
  for (int64_t k = 0; k < want.size(); ++k) {
    if (got.floating() || got.as_int(k) != want.as_int(k)) {
      if (!got.floating() || got.as_double(k) != static_cast<double>(want.as_int(k))) {
        return "element " + std::to_string(k) + ": " + std::to_string(got.as_double(k)) + " != expected " +
               std::to_string(want.as_int(k));
      }
    }
  }
  return "";
}

struct Outcome {
  bool pass = false;
  size_t fallbacks = 0;
  std::string detail;  // failure reason, or the fallbacks ("Op: reason; ...")
};

Outcome run_test(const std::string& dir, const npusim::isa::NpuConfig& config) {
  Outcome o;
  const auto sets = list_dir(dir, "test_data_set_");
  if (sets.empty()) return {false, 0, "no test_data_set"};
  std::map<std::string, std::string> fallbacks;
  for (const auto& set : sets) {
    const std::string sd = dir + "/" + set;
    std::vector<Tensor> in, want;
    for (const auto& f : list_dir(sd, "input_")) in.push_back(read_tensor_file(sd + "/" + f));
    for (const auto& f : list_dir(sd, "output_")) want.push_back(read_tensor_file(sd + "/" + f));
    Graph g = import_onnx_file(dir + "/model.onnx");
    if (in.size() > g.inputs.size()) return {false, 0, "more input files than graph inputs"};
    bool bind = false;
    ImportOptions opts;
    for (size_t k = 0; k < in.size(); ++k) {
      opts.input_shapes[g.inputs[k]] = in[k].shape;
      bind |= !g.value(g.inputs[k]).fully_known();
    }
    if (bind) g = import_onnx_file(dir + "/model.onnx", opts);
    std::map<std::string, Tensor> inputs;
    for (size_t k = 0; k < in.size(); ++k)
      inputs[g.inputs[k]] = testing::as_declared(in[k], g.value(g.inputs[k]).dtype);
    const std::vector<std::string> outputs = g.outputs;
    if (want.size() != outputs.size()) return {false, 0, "output count differs from the graph's"};
    for (size_t k = 0; k < want.size(); ++k)
      want[k] = testing::as_declared(want[k], g.value(outputs[k]).dtype);
    lower(g);
    const CompileResult r = compile(g, config);
    for (const auto& f : r.fallbacks) fallbacks[f.op] = f.reason;
    const auto got = testing::run_program(r, config, inputs);
    for (size_t k = 0; k < want.size(); ++k) {
      auto it = got.find(outputs[k]);
      if (it == got.end()) return {false, 0, set + ": output '" + outputs[k] + "' not bound"};
      const std::string diff = compare(it->second, want[k]);
      if (!diff.empty()) return {false, 0, set + " output '" + outputs[k] + "' " + diff};
    }
  }
  o.pass = true;
  o.fallbacks = fallbacks.size();
  for (const auto& [op, why] : fallbacks) o.detail += (o.detail.empty() ? "" : "; ") + op + ": " + why;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && std::string(argv[3]) != "--discover")) {
    std::cerr << "usage: compiled_node_tests DATA_DIR LIST_FILE [--discover]\n";
    return 2;
  }
  const std::string data = argv[1];
  const bool discover = argc == 4;
  std::ifstream list(argv[2]);
  if (!list) {
    std::cerr << "cannot open " << argv[2] << "\n";
    return 2;
  }
  if (!exists(data)) {
    std::cerr << "node test data not found at " << data << " (install libonnx-testdata)\n";
    return 1;
  }
  const npusim::isa::NpuConfig config{};
  int pass = 0, fail = 0, on_npu = 0, with_host = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::string line;
  while (std::getline(list, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of(" \t"));
    const std::string dir = data + "/" + name;
    Outcome o;
    if (!exists(dir + "/model.onnx")) {
      o.detail = "test data missing";
    } else {
      try {
        o = run_test(dir, config);
      } catch (const std::exception& e) {
        o = {false, 0, std::string("error: ") + e.what()};
      }
    }
    if (o.pass) {
      ++pass;
      (o.fallbacks ? with_host : on_npu)++;
      if (discover)
        std::cout << name << "\t" << (o.fallbacks ? "host" : "npu") << "\t" << o.detail << std::endl;
    } else {
      ++fail;
      std::cout << (discover ? name + "\tFAIL\t" : "FAIL " + name + ": ") << o.detail << std::endl;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << pass << " passed (" << on_npu << " entirely on the NPU, " << with_host
            << " with host fallbacks), " << fail << " failed, " << secs << " s\n";
  return discover || fail == 0 ? 0 : 1;
}
