#include "isa/text_wrap.h"

namespace npusim::isa {
namespace {

void wrap_one(std::string_view line, size_t width, size_t indent, std::string& out) {
  const std::string pad(indent, ' ');
  bool first = true;
  while (true) {
    const size_t room = first ? width : width - indent;
    if (!first) out += pad;
    if (line.size() <= room) {
      out += line;
      return;
    }
    // The last space at or before `room` (the line is then at most `room` long); none past the line's
    // leading spaces: split the word.
    size_t cut = line.rfind(' ', room);
    const size_t lead = line.find_first_not_of(' ');
    size_t next = cut;
    if (cut == std::string_view::npos || lead == std::string_view::npos || cut < lead) {
      cut = next = room;
    } else {
      while (cut > 0 && line[cut - 1] == ' ') --cut;
      while (next < line.size() && line[next] == ' ') ++next;
    }
    out += line.substr(0, cut);
    out += '\n';
    line.remove_prefix(next);
    if (line.empty()) return;
    first = false;
  }
}

}  // namespace

std::string wrap_lines(std::string_view text, size_t width, size_t indent) {
  if (width == 0) return std::string(text);
  if (indent + 16 > width) indent = 0;
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  while (!text.empty()) {
    const size_t end = text.find('\n');
    wrap_one(text.substr(0, end), width, indent, out);
    if (end == std::string_view::npos) break;
    out += '\n';
    text.remove_prefix(end + 1);
  }
  return out;
}

}  // namespace npusim::isa
