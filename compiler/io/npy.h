#pragma once
// NumPy .npy files (format versions 1.0-3.0, C order, little-endian): calibration inputs
// (compiler/quant), the model inputs a user gives `npusim run --inputs DIR` and the outputs
// `--outputs DIR` writes. The one reader and writer.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace npusim::compiler {

// A .npy array as stored: its NumPy dtype descriptor ("<f4", "|i1", ...), shape and raw bytes.
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bytes per element of a supported descriptor: f2/f4/f8, i1/i2/i4/i8, u1/u2/u4/u8, b1; 0 otherwise.
int npy_item_size(const std::string& descr);

// Whether the file starts with the .npy magic (false when it cannot be read).
bool is_npy_file(const std::string& path);

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& display_name);
NpyArray read_npy(const std::string& path);
std::vector<uint8_t> format_npy(const NpyArray& a);
void write_npy(const std::string& path, const NpyArray& a);

}  // namespace npusim::compiler
