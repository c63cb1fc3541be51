#include "arch/datapath/numerics.h"

#include <cmath>
#include <limits>

#include "arch/datapath/error.h"

namespace npusim::arch::datapath {

using isa::DType;

float load_float(const uint8_t* p, DType t) {
  switch (t) {
    case DType::kInt8:
      return static_cast<float>(static_cast<int8_t>(p[0]));
    case DType::kUint8:
      return static_cast<float>(p[0]);
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    case DType::kInt16:
    case DType::kInt64:
      return static_cast<float>(load_int(p, t));
    case DType::kFp16:
      return fp16_to_fp32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    case DType::kBf16:
      return bf16_to_fp32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    case DType::kFp32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
  return 0.0f;
}

int64_t load_int(const uint8_t* p, DType t) {
  switch (t) {
    case DType::kInt8:
      return static_cast<int8_t>(p[0]);
    case DType::kUint8:
      return p[0];
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      throw DatapathError("internal: load_int on a floating-point element type");
  }
}

void store_float(uint8_t* p, DType t, float v) {
  switch (t) {
    case DType::kInt8:
    case DType::kUint8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      store_int(p, t, float_to_int(v, t));
      return;
    case DType::kFp16: {
      const uint16_t h = fp32_to_fp16(v);
      p[0] = static_cast<uint8_t>(h);
      p[1] = static_cast<uint8_t>(h >> 8);
      return;
    }
    case DType::kBf16: {
      const uint16_t h = fp32_to_bf16(v);
      p[0] = static_cast<uint8_t>(h);
      p[1] = static_cast<uint8_t>(h >> 8);
      return;
    }
    case DType::kFp32:
      std::memcpy(p, &v, 4);
      return;
  }
}

void store_int(uint8_t* p, DType t, int64_t v) {
  switch (t) {
    case DType::kInt8:
      p[0] = static_cast<uint8_t>(saturate_int8(v));
      return;
    case DType::kUint8:
      p[0] = saturate_uint8(v);
      return;
    case DType::kInt32: {
      const int32_t s = saturate_int32(v);
      std::memcpy(p, &s, 4);
      return;
    }
    case DType::kInt16: {
      const int16_t s = saturate_int16(v);
      std::memcpy(p, &s, 2);
      return;
    }
    case DType::kInt64:
      std::memcpy(p, &v, 8);
      return;
    default:
      store_float(p, t, static_cast<float>(v));
      return;
  }
}

}  // namespace npusim::arch::datapath
