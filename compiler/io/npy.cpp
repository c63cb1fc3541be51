#include "compiler/io/npy.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

namespace npusim::compiler {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The value of `key` in the header dict, as its raw text (up to the next top-level comma or brace).
std::string dict_value(const std::string& header, const std::string& key, const std::string& name) {
  const std::string quoted[] = {"'" + key + "'", "\"" + key + "\""};
  size_t pos = std::string::npos;
  for (const auto& q : quoted) {
    pos = header.find(q);
    if (pos != std::string::npos) {
      pos += q.size();
      break;
    }
  }
  if (pos == std::string::npos) throw NpyError(fmt::format("{}: .npy header has no '{}'", name, key));
  pos = header.find(':', pos);
  if (pos == std::string::npos) throw NpyError(fmt::format("{}: malformed .npy header", name));
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  if (pos < header.size() && header[pos] == '(') {
    const size_t end = header.find(')', pos);
    if (end == std::string::npos) throw NpyError(fmt::format("{}: malformed shape in .npy header", name));
    return header.substr(pos, end - pos + 1);
  }
  size_t end = pos;
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  std::string v = header.substr(pos, end - pos);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

std::string unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

}  // namespace

int npy_item_size(const std::string& descr) {
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '=')) return 0;
  const std::string t = descr.substr(1);
  if (t == "f2" || t == "i2" || t == "u2") return 2;
  if (t == "f4" || t == "i4" || t == "u4") return 4;
  if (t == "f8" || t == "i8" || t == "u8") return 8;
  if (t == "i1" || t == "u1" || t == "b1") return 1;
  return 0;
}

bool is_npy_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[sizeof kMagic - 1] = {};
  return in.read(head, sizeof head) && std::memcmp(head, kMagic, sizeof head) == 0;
}

NpyArray parse_npy(const std::vector<uint8_t>& b, const std::string& name) {
  if (b.size() < 10 || std::string(b.begin(), b.begin() + 6) != std::string(kMagic, 6)) {
    throw NpyError(fmt::format("{}: not a .npy file (bad magic)", name));
  }
  const int major = b[6];
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = b[8] | (b[9] << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw NpyError(fmt::format("{}: truncated .npy header", name));
    header_len = static_cast<size_t>(b[8]) | (static_cast<size_t>(b[9]) << 8) |
                 (static_cast<size_t>(b[10]) << 16) | (static_cast<size_t>(b[11]) << 24);
    offset = 12;
  } else {
    throw NpyError(fmt::format("{}: unsupported .npy format version {}", name, major));
  }
  if (header_len > b.size() - offset) throw NpyError(fmt::format("{}: truncated .npy header", name));
  const std::string header(b.begin() + offset, b.begin() + offset + header_len);
  NpyArray a;
  a.descr = unquote(dict_value(header, "descr", name));
  if (npy_item_size(a.descr) == 0 || a.descr[0] == '>') {
    throw NpyError(fmt::format("{}: unsupported .npy dtype '{}' (want little-endian float, int or bool)",
                               name, a.descr));
  }
  if (dict_value(header, "fortran_order", name) != "False") {
    throw NpyError(
        fmt::format("{}: Fortran-ordered .npy arrays are not supported (save with C order)", name));
  }
  const std::string shape = dict_value(header, "shape", name);
  int64_t count = 1;
  std::string num;
  for (char c : shape.substr(1)) {
    if (c >= '0' && c <= '9') {
      num += c;
    } else if (c == ',' || c == ')') {
      if (!num.empty()) {
        if (num.size() > 12) throw NpyError(fmt::format("{}: .npy dimension too large", name));
        const int64_t d = std::stoll(num);
        a.shape.push_back(d);
        if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) {
          throw NpyError(fmt::format("{}: .npy shape too large", name));
        }
        count *= d;
        num.clear();
      }
    } else if (c != ' ') {
      throw NpyError(fmt::format("{}: malformed shape {} in .npy header", name, shape));
    }
  }
  const size_t data_begin = offset + header_len;
  const uint64_t need = static_cast<uint64_t>(count) * npy_item_size(a.descr);
  if (b.size() - data_begin != need) {
    throw NpyError(fmt::format("{}: .npy data is {} bytes, its header ({} {}) says {}", name,
                               b.size() - data_begin, a.descr, shape, need));
  }
  a.data.assign(b.begin() + data_begin, b.end());
  return a;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NpyError(fmt::format("cannot open '{}'", path));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_npy(bytes, path);
}

std::vector<uint8_t> format_npy(const NpyArray& a) {
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i)
    shape += fmt::format("{}{}", a.shape[i], i + 1 < a.shape.size() || a.shape.size() == 1 ? "," : "");
  shape += ")";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", a.descr, shape);
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

void write_npy(const std::string& path, const NpyArray& a) {
  const std::vector<uint8_t> bytes = format_npy(a);
  std::ofstream out(path, std::ios::binary);
  if (!out || !out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size()) || !out.flush()) {
    throw NpyError(fmt::format("cannot write '{}'", path));
  }
}

}  // namespace npusim::compiler
