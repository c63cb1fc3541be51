// The npusim side of the golden check (scripts/golden_check.py) until the compiled program's functional
// outputs are wired: runs the FP32 reference interpreter on INPUT_DIR/NAME.npy and writes
// OUTPUT_DIR/NAME.npy (float32) for every graph output.
//
// Usage: golden_reference_run MODEL.onnx INPUT_DIR OUTPUT_DIR
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/quant/calibration.h"

namespace {

void write_npy(const std::string& path, const npusim::compiler::Tensor& t) {
  std::string shape = "(";
  for (size_t k = 0; k < t.shape.size(); ++k)
    shape += std::to_string(t.shape[k]) + (t.shape.size() == 1 ? "," : k + 1 < t.shape.size() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream o(path, std::ios::binary);
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  o.write(reinterpret_cast<const char*>(magic), 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char lb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  o.write(lb, 2);
  o << header;
  o.write(reinterpret_cast<const char*>(t.f.data()), static_cast<std::streamsize>(t.f.size() * 4));
  if (!o) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.onnx INPUT_DIR OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    using namespace npusim::compiler;
    Graph g = import_onnx_file(argv[1]);
    std::map<std::string, Tensor> inputs;
    for (const auto& in : g.inputs)
      inputs[in] = quant::read_npy_tensor(std::string(argv[2]) + "/" + in + ".npy");
    auto out = interpret(g, inputs);
    for (const auto& [name, t] : out) write_npy(std::string(argv[3]) + "/" + name + ".npy", t);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "golden_reference_run: %s\n", e.what());
    return 1;
  }
  return 0;
}
