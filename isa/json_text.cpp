#include "isa/json_text.h"

#include <fmt/format.h>

#include <cmath>

namespace npusim {

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string json_string(std::string_view s) {
  std::string o;
  append_json_string(o, s);
  return o;
}

namespace {

bool lines(JsonWriter::Layout l) {
  return l == JsonWriter::Layout::kLines || l == JsonWriter::Layout::kCompactLines;
}
bool compact(JsonWriter::Layout l) {
  return l == JsonWriter::Layout::kCompact || l == JsonWriter::Layout::kCompactLines;
}

}  // namespace

int JsonWriter::level() const {
  int n = base_level_;
  for (const Frame& f : frames_) n += lines(f.layout) ? 1 : 0;
  return n;
}

void JsonWriter::newline(int lvl) {
  out_ += '\n';
  if (!frames_.empty() && frames_.back().layout == Layout::kCompactLines) return;
  out_.append(2 * static_cast<size_t>(lvl), ' ');
}

void JsonWriter::separate() {
  if (after_key_) {  // the value of a member: the key wrote the separator
    after_key_ = false;
    return;
  }
  if (frames_.empty()) return;
  Frame& f = frames_.back();
  if (f.count++ > 0) out_ += ',';
  if (lines(f.layout) && !same_line_) {
    newline(level());
  } else if (f.count > 1 && !compact(f.layout)) {
    out_ += ' ';
  }
  same_line_ = false;
}

void JsonWriter::open(Layout layout, char open_char, char close_char) {
  separate();
  out_ += open_char;
  frames_.push_back({layout, close_char});
}

JsonWriter& JsonWriter::object(Layout layout) {
  open(layout, '{', '}');
  return *this;
}

JsonWriter& JsonWriter::array(Layout layout) {
  open(layout, '[', ']');
  return *this;
}

JsonWriter& JsonWriter::members() {
  frames_.push_back({Layout::kInline, 0});
  return *this;
}

JsonWriter& JsonWriter::end() {
  const Frame f = frames_.back();
  if (lines(f.layout) && f.count > 0) {
    frames_.pop_back();
    // The closing bracket sits at the level of the line that opened the container.
    out_ += '\n';
    if (f.layout == Layout::kLines) out_.append(2 * static_cast<size_t>(level()), ' ');
  } else {
    frames_.pop_back();
  }
  if (f.close) out_ += f.close;
  return *this;
}

JsonWriter& JsonWriter::same_line() {
  same_line_ = true;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  separate();
  append_json_string(out_, k);
  out_ += compact(frames_.back().layout) ? ":" : ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  separate();
  append_json_string(out_, s);
  return *this;
}

JsonWriter& JsonWriter::value(bool b) { return raw(b ? "true" : "false"); }

JsonWriter& JsonWriter::value(double v) {
  if (!std::isfinite(v)) return raw("0");
  return raw(fmt::format("{}", v));
}

JsonWriter& JsonWriter::fixed(double v, int decimals) {
  if (!std::isfinite(v)) return raw("0");
  return raw(fmt::format("{:.{}f}", v, decimals));
}

JsonWriter& JsonWriter::significant(double v, int digits) {
  if (!std::isfinite(v)) return raw("0");
  return raw(fmt::format("{:.{}g}", v, digits));
}

JsonWriter& JsonWriter::null() { return raw("null"); }

JsonWriter& JsonWriter::raw(std::string_view json) {
  separate();
  out_ += json;
  return *this;
}

JsonWriter& JsonWriter::raw_members(std::string_view members) {
  if (members.empty()) return *this;
  separate();
  out_ += members;
  return *this;
}

}  // namespace npusim
