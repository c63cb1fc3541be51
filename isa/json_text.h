#pragma once
// JSON string literals: the one escaping every JSON writer uses (reports, traces, sweeps, the
// accuracy section): quotes and backslashes escaped, \n \r \t by name, other control characters as
// \u00XX; bytes >= 0x80 pass through (UTF-8 stays UTF-8).
#include <string>
#include <string_view>

namespace npusim {

// Appends s as a quoted JSON string.
void append_json_string(std::string& out, std::string_view s);
// s as a quoted JSON string.
std::string json_string(std::string_view s);

}  // namespace npusim
