#pragma once
// JSON text: the one writer every JSON producer uses (reports, traces, sweeps, the accuracy section,
// serve/e2e/dynamic results). Strings: quotes and backslashes escaped, \n \r \t by name, other control
// characters as \u00XX; bytes >= 0x80 pass through (UTF-8 stays UTF-8).
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace npusim {

// Appends s as a quoted JSON string.
void append_json_string(std::string& out, std::string_view s);
// s as a quoted JSON string.
std::string json_string(std::string_view s);

// Writes JSON into a string: separators, layout and escaping in one place; the caller says what
// (objects, arrays, keys, values) and how each container is laid out. Containers nest; end() closes
// the innermost. The writer appends only, so a streaming producer may flush and clear the string
// between calls (traces/sinks.cpp).
class JsonWriter {
 public:
  // How a container's members are separated:
  //   kInline   {"a": 1, "b": 2}
  //   kLines    {\n  "a": 1,\n  "b": 2\n}  (one member a line, indented two spaces a kLines level)
  //   kCompact  {"a":1,"b":2}
  //   kCompactLines  {\n"a":1,\n"b":2\n}  (one member a line, no spaces)
  // Empty containers are {} / [] in every layout.
  enum class Layout { kInline, kLines, kCompact, kCompactLines };

  // base_level: the kLines levels the text is already inside (a value nested in another writer's
  // kLines container), so lines are indented to match.
  explicit JsonWriter(std::string& out, int base_level = 0) : out_(out), base_level_(base_level) {}

  JsonWriter& object(Layout layout = Layout::kInline);
  JsonWriter& array(Layout layout = Layout::kInline);
  // Members ("k": v, "k2": v2) of an object whose braces another writer writes (raw_members); end()
  // closes it without a brace.
  JsonWriter& members();
  // Closes the innermost container.
  JsonWriter& end();
  // The next member or element continues the current line (", " instead of a new line) in a kLines
  // container.
  JsonWriter& same_line();

  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JsonWriter& value(T v) {
    return raw(std::to_string(v));
  }
  // Shortest round-trip form; NaN and infinities (not JSON) are written as 0.
  JsonWriter& value(double v);
  // Fixed notation with `decimals` digits after the point (trace timestamps, e2e/serve figures).
  JsonWriter& fixed(double v, int decimals);
  // `digits` significant digits, %g style (printf's and iostream's default notation).
  JsonWriter& significant(double v, int digits);
  JsonWriter& null();
  // A value that is already JSON text (a section another producer wrote).
  JsonWriter& raw(std::string_view json);
  // Members that are already JSON text ("k": v, "k2": v2) added to the current object.
  JsonWriter& raw_members(std::string_view members);

  // key(k).value(v) in one call.
  template <class T>
  JsonWriter& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

 private:
  struct Frame {
    Layout layout;
    char close;  // 0: members() without braces
    size_t count = 0;
  };
  void separate();  // before a member (object) or element (array)
  void open(Layout layout, char open_char, char close_char);
  void newline(int level);
  int level() const;  // kLines / kCompactLines containers open, base included

  std::string& out_;
  int base_level_;
  std::vector<Frame> frames_;
  bool after_key_ = false;
  bool same_line_ = false;
};

}  // namespace npusim
