#include "compiler/import/onnx_wire.h"

#include <cstdint>

namespace npusim::compiler::detail {
namespace {

// Field numbers of onnx.proto (ModelProto.graph, GraphProto.initializer, TensorProto.raw_data).
constexpr uint64_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

bool read_varint(const char*& p, const char* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const auto b = static_cast<uint8_t>(*p++);
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80u) == 0) return true;
  }
  return false;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// One field of a message: its number and wire type, where it starts (its tag), and for a
// length-delimited field its payload.
struct Field {
  uint64_t number = 0;
  int wire = 0;
  const char* begin = nullptr;
  const char* payload = nullptr;
  const char* end = nullptr;
};

// Calls f(field) for each field of the message in [p, end); false when the bytes are not wire data or
// f returns false. Groups (wire types 3 and 4, unused by onnx.proto) count as malformed.
template <class F>
bool for_each_field(const char* p, const char* end, F&& f) {
  while (p < end) {
    Field fd;
    fd.begin = p;
    uint64_t tag = 0;
    if (!read_varint(p, end, tag)) return false;
    fd.number = tag >> 3;
    fd.wire = static_cast<int>(tag & 7);
    uint64_t n = 0;
    switch (fd.wire) {
      case kVarint:
        if (!read_varint(p, end, n)) return false;
        break;
      case kFixed64:
        if (end - p < 8) return false;
        p += 8;
        break;
      case kFixed32:
        if (end - p < 4) return false;
        p += 4;
        break;
      case kLengthDelimited:
        if (!read_varint(p, end, n) || n > static_cast<uint64_t>(end - p)) return false;
        fd.payload = p;
        p += n;
        break;
      default:
        return false;
    }
    fd.end = p;
    if (fd.number == 0 || !f(fd)) return false;
  }
  return true;
}

void put_length_delimited(std::string& out, uint64_t number, const std::string& payload) {
  put_varint(out, number << 3 | kLengthDelimited);
  put_varint(out, payload.size());
  out += payload;
}

bool lift_tensor(const char* p, const char* end, size_t min_bytes, std::string& out, std::string_view& raw) {
  int raw_fields = 0;
  return for_each_field(p, end, [&](const Field& f) {
    if (f.number == kTensorRawData && f.wire == kLengthDelimited) {
      if (++raw_fields > 1) return false;  // repeated raw_data (the last would win): leave it to protobuf
      const auto n = static_cast<size_t>(f.end - f.payload);
      if (n >= min_bytes) {
        raw = std::string_view(f.payload, n);
        // One byte stands in for the bytes: ONNX's checker counts a data field only when it is
        // non-empty, and nothing before the conversion reads a tensor this large (shape inference's
        // data propagation reads shapes, indices and scales).
        put_varint(out, kTensorRawData << 3 | kLengthDelimited);
        put_varint(out, 1);
        out += '\0';
        return true;
      }
    }
    out.append(f.begin, f.end);
    return true;
  });
}

bool lift_graph(const char* p, const char* end, size_t min_bytes, std::string& out, LiftedModel& m) {
  return for_each_field(p, end, [&](const Field& f) {
    if (f.number != kGraphInitializer || f.wire != kLengthDelimited) {
      out.append(f.begin, f.end);
      return true;
    }
    std::string tensor;
    std::string_view raw;
    if (!lift_tensor(f.payload, f.end, min_bytes, tensor, raw)) return false;
    put_length_delimited(out, kGraphInitializer, tensor);
    m.raw.push_back(raw);
    return true;
  });
}

}  // namespace

std::optional<LiftedModel> lift_raw_data(std::string_view file, size_t min_bytes) {
  LiftedModel m;
  m.proto.reserve(1 << 16);
  const bool ok = for_each_field(file.data(), file.data() + file.size(), [&](const Field& f) {
    if (f.number != kModelGraph || f.wire != kLengthDelimited) {
      m.proto.append(f.begin, f.end);
      return true;
    }
    std::string graph;
    if (!lift_graph(f.payload, f.end, min_bytes, graph, m)) return false;
    put_length_delimited(m.proto, kModelGraph, graph);
    return true;
  });
  if (!ok) return std::nullopt;
  return m;
}

}  // namespace npusim::compiler::detail
