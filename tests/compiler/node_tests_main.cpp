// Runs ONNX's node tests (libonnx-testdata) through import + the reference interpreter.
//
//   compiler_node_tests DATA_DIR LIST_FILE            run every test named in LIST_FILE; fail on any
//                                                     mismatch or error (the `nodetests` ctest)
//   compiler_node_tests DATA_DIR --discover           classify every test in DATA_DIR:
//                                                     pass / fail / out-of-scope with the reason
//
// Tolerance: float outputs |got - want| <= 1e-5 + 1e-4 * |want| (NaN matches NaN); integer and
// bool outputs exactly; shapes and element types exactly.
#include <dirent.h>
#include <sys/stat.h>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "tests/compiler/node_test_data.h"

namespace {

using namespace npusim::compiler;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

std::vector<std::string> list_dir(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0) out.push_back(n);
    }
    closedir(d);
  }
  // input_10 after input_9: sort by the trailing number when there is one.
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    auto num = [](const std::string& s) {
      size_t us = s.find_last_of('_');
      try {
        return std::stol(s.substr(us + 1));
      } catch (...) {
        return -1L;
      }
    };
    long na = num(a), nb = num(b);
    return na != nb ? na < nb : a < b;
  });
  return out;
}

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

struct Outcome {
  enum Kind { kPass, kFail, kOutOfScope } kind;
  std::string detail;
};

std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype != want.dtype)
    return "type " + std::string(to_string(got.dtype)) + " != expected " + std::string(to_string(want.dtype));
  if (got.shape != want.shape)
    return "shape " + shape_to_string(got.shape) + " != expected " + shape_to_string(want.shape);
  for (int64_t k = 0; k < want.size(); ++k) {
    if (want.floating()) {
      const double g = got.f[k], w = want.f[k];
      if (std::isnan(w) && std::isnan(g)) continue;
      if (std::isinf(w) && g == w) continue;
      if (!(std::fabs(g - w) <= kAtol + kRtol * std::fabs(w))) {
        std::ostringstream os;
        os << "element " << k << ": " << g << " != expected " << w;
        return os.str();
      }
    } else if (got.i[k] != want.i[k]) {
      return "element " + std::to_string(k) + ": " + std::to_string(got.i[k]) + " != expected " +
             std::to_string(want.i[k]);
    }
  }
  return "";
}

Outcome run_test(const std::string& dir) {
  Graph g;
  try {
    g = import_onnx_file(dir + "/model.onnx");
  } catch (const ModelError& e) {
    return {Outcome::kOutOfScope, std::string("import: ") + e.what()};
  }
  for (const auto& [name, v] : g.values)
    if (v.dtype != DataType::kUndefined && !interpretable(v.dtype))
      return {Outcome::kOutOfScope, "dtype: " + std::string(to_string(v.dtype))};
  std::set<std::string> missing;
  for (const auto& n : g.nodes)
    if (!n.domain.empty() || !interpreter_supports(n.op_type)) missing.insert(n.op_type);
  if (!missing.empty()) {
    std::string s;
    for (const auto& m : missing) s += (s.empty() ? "" : ",") + m;
    return {Outcome::kOutOfScope, "op: " + s};
  }
  auto sets = list_dir(dir, "test_data_set_");
  if (sets.empty()) return {Outcome::kOutOfScope, "data: no test_data_set"};
  for (const auto& set : sets) {
    const std::string sd = dir + "/" + set;
    auto in_files = list_dir(sd, "input_");
    auto out_files = list_dir(sd, "output_");
    std::map<std::string, Tensor> inputs;
    try {
      if (in_files.size() > g.inputs.size())
        return {Outcome::kOutOfScope, "data: more inputs than graph inputs"};
      for (size_t k = 0; k < in_files.size(); ++k) {
        Tensor t = testing::as_declared(read_tensor_file(sd + "/" + in_files[k]), g.value(g.inputs[k]).dtype);
        if (!interpretable(t.dtype))
          return {Outcome::kOutOfScope, "dtype: " + std::string(to_string(t.dtype))};
        inputs[g.inputs[k]] = std::move(t);
      }
    } catch (const ModelError& e) {
      return {Outcome::kOutOfScope, std::string("data: ") + e.what()};
    }
    std::vector<Tensor> want;
    try {
      for (const auto& f : out_files) {
        const size_t k = want.size();
        const DataType declared = k < g.outputs.size() ? g.value(g.outputs[k]).dtype : DataType::kUndefined;
        want.push_back(testing::as_declared(read_tensor_file(sd + "/" + f), declared));
        if (!interpretable(want.back().dtype))
          return {Outcome::kOutOfScope, "dtype: " + std::string(to_string(want.back().dtype))};
      }
    } catch (const ModelError& e) {
      return {Outcome::kOutOfScope, std::string("data: ") + e.what()};
    }
    if (want.size() != g.outputs.size())
      return {Outcome::kOutOfScope, "data: output count differs from the graph's"};
    std::map<std::string, Tensor> got;
    try {
      got = interpret(g, inputs);
    } catch (const std::exception& e) {
      return {Outcome::kFail, set + ": " + e.what()};
    }
    for (size_t k = 0; k < want.size(); ++k) {
      std::string diff = compare(got.at(g.outputs[k]), want[k]);
      if (!diff.empty()) return {Outcome::kFail, set + " output '" + g.outputs[k] + "' " + diff};
    }
  }
  return {Outcome::kPass, ""};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: compiler_node_tests DATA_DIR (LIST_FILE | --discover)\n";
    return 2;
  }
  const std::string data = argv[1], mode = argv[2];
  if (mode == "--discover") {
    int pass = 0, fail = 0, out = 0;
    for (const auto& t : list_dir(data, "test_")) {
      Outcome o = run_test(data + "/" + t);
      const char* k = o.kind == Outcome::kPass ? "pass" : o.kind == Outcome::kFail ? "FAIL" : "out";
      (o.kind == Outcome::kPass ? pass : o.kind == Outcome::kFail ? fail : out)++;
      std::cout << t << "\t" << k << "\t" << o.detail << std::endl;
    }
    std::cout << "discover: " << pass << " passed, " << fail << " failed, " << out << " out of scope\n";
    return 0;
  }
  std::ifstream list(mode);
  if (!list) {
    std::cerr << "cannot open " << mode << "\n";
    return 2;
  }
  if (!exists(data)) {
    std::cerr << "node test data not found at " << data << " (install libonnx-testdata)\n";
    return 1;
  }
  int pass = 0, fail = 0;
  std::string line;
  while (std::getline(list, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::string dir = data + "/" + line;
    Outcome o = exists(dir + "/model.onnx") ? run_test(dir) : Outcome{Outcome::kFail, "test data missing"};
    if (o.kind == Outcome::kPass) {
      ++pass;
    } else {
      ++fail;
      std::cout << "FAIL " << line << ": " << (o.kind == Outcome::kOutOfScope ? "now out of scope: " : "")
                << o.detail << "\n";
    }
  }
  std::cout << pass << " passed, " << fail << " failed\n";
  return fail == 0 ? 0 : 1;
}
