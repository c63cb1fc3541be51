#include "sim/dynamic/profiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace npusim::sim::dynamic {

int64_t positive_integer(const std::string& text, const std::string& what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || v < 1)
    throw DynamicUsageError(fmt::format("{} '{}' is not a positive integer", what, text));
  return v;
}

std::vector<DimValues> parse_dynamic_specs(const std::vector<std::string>& specs) {
  std::vector<DimValues> out;
  std::set<std::string> names;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      throw DynamicUsageError(
          fmt::format("--dynamic '{}' is not NAME=V1,V2,... (e.g. seq=64,128,256)", spec));
    }
    DimValues d;
    d.name = spec.substr(0, eq);
    if (!names.insert(d.name).second) {
      throw DynamicUsageError(
          fmt::format("--dynamic names '{}' twice; list all its values in one option", d.name));
    }
    size_t pos = eq + 1;
    while (pos <= spec.size()) {
      const size_t comma = std::min(spec.find(',', pos), spec.size());
      const std::string text = spec.substr(pos, comma - pos);
      const int64_t v = positive_integer(text, "--dynamic " + d.name + ":");
      if (std::find(d.values.begin(), d.values.end(), v) != d.values.end()) {
        throw DynamicUsageError(fmt::format("--dynamic {}: value {} is listed twice", d.name, v));
      }
      d.values.push_back(v);
      pos = comma + 1;
    }
    std::sort(d.values.begin(), d.values.end());
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<DimBinding> profile_bindings(const std::vector<DimValues>& dims) {
  std::vector<DimBinding> out;
  if (dims.empty()) return out;
  std::vector<size_t> idx(dims.size(), 0);
  while (true) {
    DimBinding b;
    for (size_t k = 0; k < dims.size(); ++k) b[dims[k].name] = dims[k].values[idx[k]];
    out.push_back(std::move(b));
    size_t k = dims.size();
    while (k > 0) {
      --k;
      if (++idx[k] < dims[k].values.size()) break;
      idx[k] = 0;
      if (k == 0) return out;
    }
  }
}

std::string binding_text(const DimBinding& b) {
  std::string s;
  for (const auto& [name, v] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ",", name, v);
  return s;
}

std::string bindings_list(const std::vector<DimBinding>& bs) {
  std::string s;
  for (const DimBinding& b : bs) s += (s.empty() ? "" : ", ") + binding_text(b);
  return s;
}

bool holds(const DimBinding& profile, const DimBinding& shape) {
  for (const auto& [name, v] : shape) {
    auto it = profile.find(name);
    if (it == profile.end() || it->second < v) return false;
  }
  return true;
}

}  // namespace npusim::sim::dynamic
