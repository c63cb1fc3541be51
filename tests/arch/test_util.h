#pragma once
// Helpers shared by the arch tests: reading programs from tests/programs, small configs, and a
// strict JSON parser (enough to prove a trace or report parses and to look values up).
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/assembly.h"
#include "isa/machine/config.h"
#include "isa/program.h"

namespace npusim::testing {

inline isa::Program load_program(const std::string& name) {
  const std::string path = std::string(NPUSIM_SOURCE_DIR) + "/tests/programs/" + name;
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return isa::assemble(ss.str(), name);
}

// A value of a strictly parsed JSON document.
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
  const Json& operator[](const std::string& k) const {
    auto it = obj.find(k);
    if (it == obj.end()) throw std::runtime_error("no key " + k);
    return it->second;
  }
  bool has(const std::string& k) const { return obj.count(k) != 0; }
};

// Strict RFC 8259 parser: throws on any deviation (trailing commas, NaN, garbage after the value).
class JsonParser {
 public:
  static Json parse(const std::string& text) {
    JsonParser p(text);
    p.ws();
    Json v = p.value();
    p.ws();
    if (p.i_ != text.size()) p.fail("trailing characters");
    return v;
  }

 private:
  explicit JsonParser(const std::string& t) : t_(t) {}
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("JSON error at byte " + std::to_string(i_) + ": " + why);
  }
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) ++i_;
  }
  char peek() { return i_ < t_.size() ? t_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  Json value() {
    Json v;
    const char c = peek();
    if (c == '{') {
      v.type = Json::Type::kObject;
      ++i_;
      ws();
      if (peek() == '}') return ++i_, v;
      for (;;) {
        ws();
        std::string k = string();
        ws();
        expect(':');
        ws();
        v.obj[k] = value();
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = Json::Type::kArray;
      ++i_;
      ws();
      if (peek() == ']') return ++i_, v;
      for (;;) {
        ws();
        v.arr.push_back(value());
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = Json::Type::kString;
      v.str = string();
      return v;
    }
    if (t_.compare(i_, 4, "true") == 0) return i_ += 4, v.type = Json::Type::kBool, v.b = true, v;
    if (t_.compare(i_, 5, "false") == 0) return i_ += 5, v.type = Json::Type::kBool, v;
    if (t_.compare(i_, 4, "null") == 0) return i_ += 4, v;
    return number();
  }
  std::string string() {
    expect('"');
    std::string s;
    for (;;) {
      if (i_ >= t_.size()) fail("unterminated string");
      const char c = t_[i_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        s += c;
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"':
          s += '"';
          break;
        case '\\':
          s += '\\';
          break;
        case '/':
          s += '/';
          break;
        case 'b':
          s += '\b';
          break;
        case 'f':
          s += '\f';
          break;
        case 'n':
          s += '\n';
          break;
        case 'r':
          s += '\r';
          break;
        case 't':
          s += '\t';
          break;
        case 'u':
          if (i_ + 4 > t_.size()) fail("short \\u escape");
          for (int k = 0; k < 4; ++k) {
            if (!isxdigit(static_cast<unsigned char>(t_[i_ + k]))) fail("bad \\u escape");
          }
          s += '?';
          i_ += 4;
          break;
        default:
          fail("bad escape");
      }
    }
  }
  Json number() {
    const size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (isdigit(static_cast<unsigned char>(peek()))) {
      while (isdigit(static_cast<unsigned char>(peek()))) ++i_;
    } else {
      fail("unexpected character");
    }
    if (peek() == '.') {
      ++i_;
      if (!isdigit(static_cast<unsigned char>(peek()))) fail("digit expected after '.'");
      while (isdigit(static_cast<unsigned char>(peek()))) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!isdigit(static_cast<unsigned char>(peek()))) fail("digit expected in exponent");
      while (isdigit(static_cast<unsigned char>(peek()))) ++i_;
    }
    Json v;
    v.type = Json::Type::kNumber;
    v.num = std::stod(t_.substr(start, i_ - start));
    return v;
  }
  const std::string& t_;
  size_t i_ = 0;
};

}  // namespace npusim::testing
