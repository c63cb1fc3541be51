#include "isa/layer_names.h"

#include <algorithm>
#include <map>

namespace npusim::isa {
namespace {

std::vector<std::string> path_parts(std::string_view name) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= name.size()) {
    const size_t j = std::min(name.find('/', i), name.size());
    if (j > i) parts.emplace_back(name.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

// The path without scopes that only repeat the next one ("conv/conv.1" -> "conv.1"), with or
// without its last part.
std::string short_path(std::string_view name, bool keep_last) {
  std::vector<std::string> parts = path_parts(name);
  if (parts.size() > 1 && !keep_last) parts.pop_back();
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i + 1 < parts.size() && parts[i + 1].compare(0, parts[i].size(), parts[i]) == 0) continue;
    out += (out.empty() ? "" : "/") + parts[i];
  }
  return out.empty() ? std::string(name) : out;
}

// At most `width` characters: the first scope (up to half the width) and the end, ".." between.
std::string cut(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  const size_t slash = s.find('/');
  const size_t head = slash == std::string::npos ? 0 : std::min(slash + 1, (width - 2) / 2);
  return s.substr(0, head) + ".." + s.substr(s.size() - (width - 2 - head));
}

// Indices of the entries of `v` whose value occurs more than once.
std::vector<bool> duplicated(const std::vector<std::string>& v) {
  std::map<std::string, int> count;
  for (const std::string& s : v) ++count[s];
  std::vector<bool> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = count[v[i]] > 1;
  return out;
}

}  // namespace

std::vector<std::string> display_names(const std::vector<std::string>& names, size_t width) {
  width = std::max<size_t>(width, 8);
  std::vector<std::string> out(names.size());
  for (size_t i = 0; i < names.size(); ++i) out[i] = cut(short_path(names[i], false), width);
  std::vector<bool> dup = duplicated(out);
  for (size_t i = 0; i < names.size(); ++i) {
    if (dup[i]) out[i] = cut(short_path(names[i], true), width);
  }
  dup = duplicated(out);
  std::map<std::string, int> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!dup[i]) continue;
    const int n = ++seen[out[i]];
    if (n == 1) continue;
    const std::string suffix = "#" + std::to_string(n);
    out[i] = cut(out[i], width - suffix.size()) + suffix;
  }
  return out;
}

}  // namespace npusim::isa
