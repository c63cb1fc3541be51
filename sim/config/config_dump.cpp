#include "sim/config/config_dump.h"

#include <algorithm>
#include <vector>

#include "isa/machine/spec_text.h"

namespace npusim::sim {
namespace {

using isa::ParamInfo;

struct Row {
  std::string key, type, unit, def, allowed, description;
};

// The description as the reference prints it: a parameter `npusim calibrate` may move says within what.
std::string described(const ParamInfo& p) {
  if (p.calibrate.empty()) return p.description;
  const bool integer = p.kind == ParamInfo::Kind::kInteger;
  auto bound = [&](double v) {
    return integer ? isa::format_integer(static_cast<int64_t>(v)) : isa::format_real(v);
  };
  return p.description + " [calibratable: " + bound(p.calibrate.min) + ".." + bound(p.calibrate.max) + "]";
}

std::vector<Row> rows_of(const std::vector<ParamInfo>& params) {
  std::vector<Row> rows;
  for (const ParamInfo& p : params) {
    if (p.kind == ParamInfo::Kind::kGroup) continue;
    rows.push_back({p.path, isa::kind_name(p.kind), p.unit, p.value, isa::allowed_text(p), described(p)});
  }
  return rows;
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string config_reference() {
  const std::vector<ParamInfo> params = isa::list_params(isa::NpuConfig{});
  const std::vector<Row> rows = rows_of(params);
  Row head{"KEY", "TYPE", "UNIT", "DEFAULT", "ALLOWED", "DESCRIPTION"};
  size_t w[5] = {head.key.size(), head.type.size(), head.unit.size(), head.def.size(), head.allowed.size()};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.key.size());
    w[1] = std::max(w[1], r.type.size());
    w[2] = std::max(w[2], r.unit.size());
    w[3] = std::max(w[3], r.def.size());
    w[4] = std::max(w[4], r.allowed.size());
  }
  auto line = [&](const Row& r) {
    std::string s = pad(r.key, w[0] + 2) + pad(r.type, w[1] + 2) + pad(r.unit, w[2] + 2) +
                    pad(r.def, w[3] + 2) + pad(r.allowed, w[4] + 2) + r.description;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = "npusim configuration parameters (the defaults are the edge preset)\n\n" + line(head);
  size_t next_row = 0;
  for (const ParamInfo& p : params) {
    if (p.kind == ParamInfo::Kind::kGroup) {
      // Groups without a description (the per-op timing groups) would only add noise.
      if (!p.description.empty()) out += "\n" + p.path + ": " + p.description + "\n";
      continue;
    }
    out += line(rows[next_row++]);
  }
  return out;
}

std::string config_reference_markdown() {
  const std::vector<ParamInfo> params = isa::list_params(isa::NpuConfig{});
  std::string out = "| key | type | unit | default | allowed | description |\n|---|---|---|---|---|---|\n";
  for (const ParamInfo& p : params) {
    if (p.kind == ParamInfo::Kind::kGroup) {
      if (!p.description.empty())
        out += "| **`" + p.path + "`** | group | | | | " + md_cell(p.description) + " |\n";
      continue;
    }
    out += "| `" + p.path + "` | " + isa::kind_name(p.kind) + " | " + md_cell(p.unit) + " | " +
           md_cell(p.value) + " | " + md_cell(isa::allowed_text(p)) + " | " + md_cell(described(p)) + " |\n";
  }
  return out;
}

std::string config_yaml(const isa::NpuConfig& c) {
  std::string out = "# npusim configuration, fully resolved: every parameter (see `npusim config --dump`).\n";
  for (const ParamInfo& p : isa::list_params(c)) {
    std::string line(static_cast<size_t>(p.depth) * 2, ' ');
    line += p.key + ":";
    std::string comment;
    if (p.kind == ParamInfo::Kind::kGroup) {
      comment = p.description;
    } else {
      line += " " + p.value;
      comment = p.unit;
      // A key the chosen model does not use would be rejected on loading: keep it visible, commented.
      const std::string_view unused = c.unused_reason(p.path);
      if (!unused.empty()) {
        line.insert(static_cast<size_t>(p.depth) * 2, "# ");
        comment = p.path.rfind("dram.", 0) == 0
                      ? "not used by the " +
                            std::string(isa::kDramModelNames[static_cast<size_t>(c.dram.model)]) + " model"
                      : "not used: " + std::string(unused);
      }
    }
    if (!comment.empty()) line += "  # " + comment;
    out += line + "\n";
  }
  return out;
}

}  // namespace npusim::sim
