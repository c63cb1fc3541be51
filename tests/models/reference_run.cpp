// The reference side of the real-model functional tests (check_functional.py): runs the FP32 reference
// interpreter on the model as imported — before any pass, so fusion, folding, layout and decomposition
// are all under test — on INPUT_DIR/NAME.npy and writes OUTPUT_DIR/NAME.npy (float32) per graph output.
//
// Usage: models_reference_run MODEL.onnx INPUT_DIR OUTPUT_DIR [NAME=V ...]  (NAME=V binds a dynamic
// dimension as --dynamic NAME=V does)
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include "compiler/import/import.h"
#include "compiler/interp/interpreter.h"
#include "compiler/quant/calibration.h"

namespace {

// NPY version 1.0: magic, header length (little endian), a Python dict literal padded to 64 bytes.
void write_npy(const std::string& path, const npusim::compiler::Tensor& t) {
  std::string shape = "(";
  for (size_t k = 0; k < t.shape.size(); ++k) shape += std::to_string(t.shape[k]) + ",";
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream o(path, std::ios::binary);
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  o.write(reinterpret_cast<const char*>(magic), sizeof magic);
  const auto len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  o.write(len_bytes, 2);
  o << header;
  const std::vector<float> values = t.to_float_vector();
  o.write(reinterpret_cast<const char*>(values.data()),
          static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!o.flush()) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.onnx INPUT_DIR OUTPUT_DIR [NAME=V ...]\n", argv[0]);
    return 2;
  }
  try {
    namespace c = npusim::compiler;
    c::ImportOptions options;
    for (int k = 4; k < argc; ++k) {
      const std::string bind = argv[k];
      const size_t eq = bind.find('=');
      if (eq == std::string::npos) throw std::runtime_error("'" + bind + "' is not NAME=V");
      options.dim_params[bind.substr(0, eq)] = std::stoll(bind.substr(eq + 1));
    }
    const c::Graph g = c::import_onnx_file(argv[1], options);
    std::map<std::string, c::Tensor> inputs;
    for (const std::string& in : g.inputs)
      inputs[in] = c::quant::read_npy_tensor(std::string(argv[2]) + "/" + in + ".npy");
    for (const auto& [name, t] : c::interpret(g, std::move(inputs))) {
      write_npy(std::string(argv[3]) + "/" + name + ".npy", t);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "models_reference_run: %s\n", e.what());
    return 1;
  }
  return 0;
}
