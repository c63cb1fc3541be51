#include "sim/model/tensor_io.h"

#include "arch/datapath/numerics.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "compiler/import/import.h"
#include "compiler/io/image.h"
#include "compiler/io/npy.h"
#include "isa/numerics.h"

namespace npusim::sim {

using compiler::npy_item_size;
using compiler::NpyArray;
using compiler::NpyError;
using compiler::read_npy;
using compiler::write_npy;
namespace {

namespace num = isa::numerics;

// One element of `t` as the datapath reads and writes it (arch/datapath/numerics.h).
float load(const uint8_t* p, isa::DType t) { return arch::datapath::load_float(p, t); }

void store(uint8_t* p, isa::DType t, float x) { arch::datapath::store_float(p, t, x); }

compiler::Shape dims_of(const isa::TensorBinding& b) { return compiler::Shape(b.dims.begin(), b.dims.end()); }

// The .npy payload as float values.
std::vector<float> npy_floats(const NpyArray& a, const std::string& path) {
  const int item = npy_item_size(a.descr);
  const std::string t = a.descr.substr(1);
  const size_t n = a.data.size() / item;
  std::vector<float> v(n);
  const uint8_t* p = a.data.data();
  for (size_t i = 0; i < n; ++i, p += item) {
    if (t == "f4") {
      std::memcpy(&v[i], p, 4);
    } else if (t == "f8") {
      double d;
      std::memcpy(&d, p, 8);
      v[i] = static_cast<float>(d);
    } else if (t == "f2") {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v[i] = num::fp16_to_fp32(h);
    } else if (t == "i1") {
      v[i] = static_cast<int8_t>(*p);
    } else if (t == "u1" || t == "b1") {
      v[i] = *p;
    } else if (t == "i2" || t == "u2" || t == "i4" || t == "u4" || t == "i8" || t == "u8") {
      int64_t x = 0;
      std::memcpy(&x, p, item);
      if (t[0] == 'i' && item < 8 && (x >> (8 * item - 1)) & 1) x -= int64_t{1} << (8 * item);
      v[i] = static_cast<float>(x);
    } else {
      throw TensorIoError(fmt::format("{}: unsupported .npy dtype '{}'", path, a.descr));
    }
  }
  return v;
}

}  // namespace

std::vector<uint8_t> to_device_bytes(const std::vector<float>& values, isa::DType dtype) {
  const int es = isa::dtype_bytes(dtype);
  std::vector<uint8_t> out(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) store(out.data() + i * es, dtype, values[i]);
  return out;
}

std::vector<float> from_device_bytes(const std::vector<uint8_t>& bytes, isa::DType dtype) {
  const int es = isa::dtype_bytes(dtype);
  std::vector<float> out(bytes.size() / es);
  for (size_t i = 0; i < out.size(); ++i) out[i] = load(bytes.data() + i * es, dtype);
  return out;
}

std::string tensor_file_stem(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    if (c == '/' || c == '\\' || c == ':') c = '_';
  }
  return s;
}

namespace {

// The image file for input `stem` in `dir`: stem.png/.jpg/.jpeg, else (`only_input`) the folder's
// one image; "" when there is none.
std::string image_for(const std::string& dir, const std::string& stem, bool only_input) {
  for (const char* ext : {".png", ".jpg", ".jpeg"})
    if (std::filesystem::exists(stem + ext)) return stem + ext;
  if (!only_input) return "";
  std::vector<std::string> images;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && compiler::sniff_image(e.path().string()) != compiler::ImageFormat::kNone)
      images.push_back(e.path().string());
  if (images.size() > 1)
    throw TensorIoError(fmt::format("{} holds {} images: name the model input's image {}.png (or .jpg)", dir,
                                    images.size(), stem));
  return images.empty() ? "" : images[0];
}

}  // namespace

std::map<std::string, std::vector<float>> read_inputs(const isa::Program& program, const std::string& dir,
                                                      const compiler::Preprocess* preprocess,
                                                      const compiler::Graph* graph) {
  std::map<std::string, std::vector<float>> values;
  int index = -1;  // the binding's position among the inputs (ONNX test data names files input_K.pb)
  int inputs = 0;
  for (const isa::TensorBinding& b : program.tensors) inputs += b.role == isa::TensorBinding::Role::kInput;
  for (const isa::TensorBinding& b : program.tensors) {
    if (b.role != isa::TensorBinding::Role::kInput) continue;
    ++index;
    std::string stem = (std::filesystem::path(dir) / tensor_file_stem(b.name)).string();
    std::vector<float> v;
    std::string path;
    const std::string onnx_test_stem = (std::filesystem::path(dir) / fmt::format("input_{}", index)).string();
    if (!std::filesystem::exists(stem + ".npy") && !std::filesystem::exists(stem + ".pb") &&
        std::filesystem::exists(onnx_test_stem + ".pb")) {
      stem = onnx_test_stem;
    }
    if (std::filesystem::exists(stem + ".npy")) {
      path = stem + ".npy";
      try {
        v = npy_floats(read_npy(path), path);
      } catch (const NpyError& e) {
        throw TensorIoError(e.what());
      }
    } else if (std::filesystem::exists(stem + ".pb")) {
      path = stem + ".pb";
      try {
        v = compiler::read_tensor_file(path).to_float_vector();
      } catch (const std::exception& e) {
        throw TensorIoError(fmt::format("{}: {}", path, e.what()));
      }
    } else if (std::string image = image_for(
                   dir, (std::filesystem::path(dir) / tensor_file_stem(b.name)).string(), inputs == 1);
               !image.empty()) {
      path = image;
      if (!preprocess) {
        throw TensorIoError(
            fmt::format("{}: an image needs --preprocess FILE.yaml to say how it becomes model "
                        "input '{}' (resize, scale, mean/std, layout)",
                        path, b.name));
      }
      try {
        if (graph && graph->has_value(b.name))
          compiler::check_image_dtype(*preprocess, graph->value(b.name).dtype,
                                      path + ": model input '" + b.name + "'");
        v = compiler::preprocess_image(compiler::read_image(path), *preprocess, dims_of(b), path)
                .to_float_vector();
      } catch (const std::runtime_error& e) {
        throw TensorIoError(e.what());
      }
    } else {
      throw TensorIoError(
          fmt::format("no input file for model input '{}': expected {}.npy, {}.pb, an image "
                      "{}.png/.jpg or (ONNX test data) {}.pb",
                      b.name, stem, stem, stem, onnx_test_stem));
    }
    const int64_t want = compiler::num_elements(dims_of(b));
    if (static_cast<int64_t>(v.size()) != want) {
      throw TensorIoError(fmt::format("{} holds {} elements but model input '{}' has shape {} ({} elements)",
                                      path, v.size(), b.name, compiler::shape_to_string(dims_of(b)), want));
    }
    values[b.name] = std::move(v);
  }
  return values;
}

std::map<std::string, std::vector<float>> random_inputs(const isa::Program& program, uint32_t seed) {
  std::map<std::string, std::vector<float>> values;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const isa::TensorBinding& b : program.tensors) {
    if (b.role != isa::TensorBinding::Role::kInput) continue;
    std::vector<float> v(compiler::num_elements(dims_of(b)));
    for (float& x : v) x = normal(rng);
    values[b.name] = std::move(v);
  }
  return values;
}

std::vector<std::string> write_outputs(const std::string& dir,
                                       const std::map<std::string, std::vector<float>>& values,
                                       const isa::Program& program) {
  std::vector<std::string> written;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw TensorIoError(fmt::format("cannot create output folder '{}': {}", dir, ec.message()));
  for (const isa::TensorBinding& b : program.tensors) {
    auto it = values.find(b.name);
    if (b.role != isa::TensorBinding::Role::kOutput || it == values.end()) continue;
    NpyArray a;
    a.descr = "<f4";
    a.shape.assign(b.dims.begin(), b.dims.end());
    a.data.resize(it->second.size() * 4);
    std::memcpy(a.data.data(), it->second.data(), a.data.size());
    const std::string path = (std::filesystem::path(dir) / (tensor_file_stem(b.name) + ".npy")).string();
    try {
      write_npy(path, a);
    } catch (const NpyError& e) {
      throw TensorIoError(e.what());
    }
    written.push_back(fmt::format("{} ({})", path, compiler::shape_to_string(dims_of(b))));
  }
  return written;
}

}  // namespace npusim::sim
