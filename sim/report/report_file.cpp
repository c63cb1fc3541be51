#include "sim/report/report_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

namespace npusim::sim {
namespace {

constexpr const char* kGive = "give a report written by `npusim run --report FILE.json`";

// Where a text stops being JSON (RFC 8259): yaml-cpp reads JSON as YAML's flow style and so accepts
// more than JSON (trailing commas, a second document, unquoted words), and its error positions are
// YAML's; this strict pass says what is wrong in JSON's terms first.
class JsonCheck {
 public:
  explicit JsonCheck(const std::string& t) : t_(t) {}

  // An empty string when `t` is one JSON value; else what is wrong, as the end of a sentence.
  std::string problem() {
    try {
      ws();
      value(0);
      ws();
      if (i_ != t_.size()) fail();
      return "";
    } catch (const Stop&) {
      if (i_ >= t_.size()) {
        const size_t last = t_.find_last_not_of(" \t\r\n");
        return fmt::format("it breaks off at line {}: truncated?",
                           line_of(last == std::string::npos ? 0 : last));
      }
      const size_t line_start = i_ == 0 ? 0 : t_.rfind('\n', i_ - 1) + 1;  // npos + 1 == 0: the first line
      return fmt::format("a syntax error at line {}, column {}", line_of(i_), i_ - line_start + 1);
    }
  }

 private:
  struct Stop {};
  [[noreturn]] static void fail() { throw Stop{}; }
  size_t line_of(size_t at) const {
    const size_t end = std::min(at, t_.size());
    return 1 +
           static_cast<size_t>(std::count(t_.begin(), t_.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
  }
  bool at_end() const { return i_ >= t_.size(); }
  char peek() const { return at_end() ? '\0' : t_[i_]; }
  void expect(char c) {
    if (peek() != c) fail();
    ++i_;
  }
  void ws() {
    while (!at_end() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  void digits() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) fail();
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
  }
  // A literal; one cut short by the end of the text breaks off there.
  void word(std::string_view w) {
    size_t k = 0;
    while (k < w.size() && i_ + k < t_.size() && t_[i_ + k] == w[k]) ++k;
    i_ += k;
    if (k != w.size()) fail();
  }
  void string() {
    expect('"');
    while (true) {
      if (at_end()) fail();
      const auto c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') break;
      if (c < 0x20) fail();
      if (c == '\\') {
        ++i_;
        if (at_end()) fail();
        if (t_[i_] == 'u') {
          for (int k = 0; k < 4; ++k) {
            ++i_;
            if (!std::isxdigit(static_cast<unsigned char>(peek()))) fail();
          }
        } else if (std::string_view("\"\\/bfnrt").find(t_[i_]) == std::string_view::npos) {
          fail();
        }
      }
      ++i_;
    }
    ++i_;
  }
  void number() {
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else {
      digits();
    }
    if (peek() == '.') {
      ++i_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      digits();
    }
  }
  void value(int depth) {
    if (depth > 256) fail();
    const char c = peek();
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++i_;
      ws();
      if (peek() == close) {
        ++i_;
        return;
      }
      while (true) {
        if (c == '{') {
          string();
          ws();
          expect(':');
          ws();
        }
        value(depth + 1);
        ws();
        if (peek() == ',') {
          ++i_;
          ws();
          continue;
        }
        expect(close);
        return;
      }
    }
    if (c == '"') return string();
    if (c == 't') return word("true");
    if (c == 'f') return word("false");
    if (c == 'n') return word("null");
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    fail();
  }

  const std::string& t_;
  size_t i_ = 0;
};

}  // namespace

std::string read_report_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportReadError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ReportReadError(fmt::format("cannot read '{}'", path));
  return text.str();
}

YAML::Node parse_report(const std::string& t, const std::string& name) {
  const size_t first = t.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw ReportReadError(fmt::format("{} is empty; {}", name, kGive));
  if (t[first] != '{') {
    throw ReportReadError(fmt::format("{} is not JSON (it does not start with '{{'); {}", name, kGive));
  }
  const std::string problem = JsonCheck(t).problem();
  if (!problem.empty()) throw ReportReadError(fmt::format("{} is not JSON ({}); {}", name, problem, kGive));
  YAML::Node root;
  try {
    root = YAML::Load(t);
  } catch (const YAML::Exception&) {
    throw ReportReadError(
        fmt::format("{} is JSON that npusim cannot read (yaml-cpp refused it); {}", name, kGive));
  }
  if (!root.IsMap() || !root["total_cycles"] || !root["layers"] || !root["layers"].IsSequence()) {
    throw ReportReadError(
        fmt::format("{} is not an npusim report (it has no total_cycles and layers[])", name));
  }
  return root;
}

YAML::Node load_report(const std::string& path) { return parse_report(read_report_text(path), path); }

}  // namespace npusim::sim
