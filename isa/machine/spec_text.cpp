#include "isa/machine/spec_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <system_error>

#include "isa/edit_distance.h"

namespace npusim::isa {

// ---------------------------------------------------------------------------------------------------
// PathVisitor

std::string PathVisitor::path_of(std::string_view key) const {
  if (stack_.empty()) return std::string(key);
  std::string p = stack_.back();
  p += '.';
  p += key;
  return p;
}

void PathVisitor::group(std::string_view key, std::string_view description,
                        const std::function<void()>& body) {
  std::string path = path_of(key);
  on_group_begin(path, key, description);
  stack_.push_back(path);
  body();
  stack_.pop_back();
  on_group_end(path);
}

void PathVisitor::integer(const Param& p, int64_t& value, int64_t min, int64_t max) {
  on_integer(path_of(p.key), p, value, min, max);
}
void PathVisitor::real(const Param& p, double& value, double min, double max) {
  on_real(path_of(p.key), p, value, min, max);
}
void PathVisitor::boolean(const Param& p, bool& value) { on_boolean(path_of(p.key), p, value); }
void PathVisitor::choice(const Param& p, int& index, const std::vector<std::string_view>& names) {
  on_choice(path_of(p.key), p, index, names);
}
void PathVisitor::on_group_begin(const std::string&, std::string_view, std::string_view) {}
void PathVisitor::on_group_end(const std::string&) {}

// ---------------------------------------------------------------------------------------------------
// Value text

std::string format_integer(int64_t v) { return std::to_string(v); }

std::string format_real(double v) {
  char buf[400];
  // Shortest text that reads back to exactly `v` (std::to_chars without a precision); fixed notation
  // in the range people write by hand, scientific outside it.
  const double mag = std::fabs(v);
  const bool fixed = mag == 0 || (mag >= 1e-4 && mag < 1e15);
  auto res = fixed ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed)
                   : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  if (!std::isfinite(v)) return s;
  if (s.find('.') == std::string::npos) {
    // YAML 1.1 readers (PyYAML) only take "1e+06" as a float when it has a dot.
    size_t e = s.find('e');
    if (e == std::string::npos)
      s += ".0";
    else
      s.insert(e, ".0");
  }
  return s;
}

std::string_view format_boolean(bool v) { return v ? "true" : "false"; }

namespace {

std::string join_names(const std::vector<std::string_view>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) s += ", ";
    s += names[i];
  }
  return s;
}

std::string int_range(int64_t min, int64_t max) { return format_integer(min) + ".." + format_integer(max); }
std::string real_range(double min, double max) { return format_real(min) + ".." + format_real(max); }

}  // namespace

std::string parse_integer(std::string_view text, int64_t min, int64_t max, int64_t& out) {
  const std::string not_int = "is not an integer (allowed " + int_range(min, max) + ")";
  // Optional sign, then decimal digits only (from_chars alone would take a '-' but not a '+').
  std::string_view digits = text;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) digits.remove_prefix(1);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return not_int;
  std::string_view t = text[0] == '+' ? digits : text;
  int64_t v = 0;
  auto res = std::from_chars(t.data(), t.data() + t.size(), v);
  if (res.ec == std::errc::result_out_of_range || (res.ec == std::errc() && (v < min || v > max)))
    return "is out of range (allowed " + int_range(min, max) + ")";
  if (res.ec != std::errc() || res.ptr != t.data() + t.size()) return not_int;
  out = v;
  return "";
}

std::string parse_real(std::string_view text, double min, double max, double& out) {
  std::string_view t = text;
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  const bool starts_ok = !t.empty() && (t[0] == '-' || t[0] == '.' || (t[0] >= '0' && t[0] <= '9')) &&
                         !(t[0] == '-' && text[0] == '+');
  if (!starts_ok) return "is not a number (allowed " + real_range(min, max) + ")";
  double v = 0;
  auto res = std::from_chars(t.data(), t.data() + t.size(), v, std::chars_format::general);
  if (res.ptr != t.data() + t.size()) return "is not a number (allowed " + real_range(min, max) + ")";
  if (res.ec == std::errc::result_out_of_range)
    return "is out of range (allowed " + real_range(min, max) + ")";
  if (res.ec != std::errc() || !std::isfinite(v))
    return "is not a finite number (allowed " + real_range(min, max) + ")";
  if (v < min || v > max) return "is out of range (allowed " + real_range(min, max) + ")";
  out = v;
  return "";
}

std::string parse_boolean(std::string_view text, bool& out) {
  if (text == "true" || text == "True" || text == "TRUE") {
    out = true;
    return "";
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    out = false;
    return "";
  }
  return "is not a boolean (allowed true, false)";
}

std::string parse_choice(std::string_view text, const std::vector<std::string_view>& names, int& out) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) {
      out = static_cast<int>(i);
      return "";
    }
  }
  std::string msg = "is not one of " + join_names(names);
  std::string guess = closest_name(text, std::vector<std::string>(names.begin(), names.end()));
  if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
  return msg;
}

int edit_distance(std::string_view a, std::string_view b) {
  return static_cast<int>(edit_distance_between(a, b, /*transpositions=*/true));
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  // A typo changes a few characters; beyond a third of the word it is a different word.
  const int limit = word.size() <= 3 ? 1 : word.size() <= 8 ? 2 : 3;
  int best = limit + 1;
  std::string best_name;
  for (const std::string& c : candidates) {
    // Cheap bound first: the distance is at least the length difference.
    const int len_diff =
        static_cast<int>(c.size() > word.size() ? c.size() - word.size() : word.size() - c.size());
    if (len_diff >= best) continue;
    const int d = edit_distance(word, c);
    if (d < best) {
      best = d;
      best_name = c;
    }
  }
  return best_name;
}

// ---------------------------------------------------------------------------------------------------
// Flat parameter list

namespace {

class Lister final : public PathVisitor {
 public:
  std::vector<ParamInfo> out;

 protected:
  void on_group_begin(const std::string& path, std::string_view key, std::string_view description) override {
    ParamInfo i = base(path, key, ParamInfo::Kind::kGroup, "", description);
    out.push_back(std::move(i));
  }
  void on_integer(const std::string& path, const Param& p, int64_t& value, int64_t min,
                  int64_t max) override {
    ParamInfo i = base(path, p.key, ParamInfo::Kind::kInteger, p.unit, p.description);
    i.affects_timing = p.affects_timing;
    i.int_min = min;
    i.int_max = max;
    i.calibrate = p.calibrate;
    i.value = format_integer(value);
    out.push_back(std::move(i));
  }
  void on_real(const std::string& path, const Param& p, double& value, double min, double max) override {
    ParamInfo i = base(path, p.key, ParamInfo::Kind::kReal, p.unit, p.description);
    i.affects_timing = p.affects_timing;
    i.real_min = min;
    i.real_max = max;
    i.calibrate = p.calibrate;
    i.value = format_real(value);
    out.push_back(std::move(i));
  }
  void on_boolean(const std::string& path, const Param& p, bool& value) override {
    ParamInfo i = base(path, p.key, ParamInfo::Kind::kBoolean, p.unit, p.description);
    i.affects_timing = p.affects_timing;
    i.value = std::string(format_boolean(value));
    out.push_back(std::move(i));
  }
  void on_choice(const std::string& path, const Param& p, int& index,
                 const std::vector<std::string_view>& names) override {
    ParamInfo i = base(path, p.key, ParamInfo::Kind::kChoice, p.unit, p.description);
    i.affects_timing = p.affects_timing;
    for (std::string_view n : names) i.names.emplace_back(n);
    i.value = index >= 0 && index < static_cast<int>(names.size()) ? std::string(names[index]) : "?";
    out.push_back(std::move(i));
  }

 private:
  ParamInfo base(const std::string& path, std::string_view key, ParamInfo::Kind kind, std::string_view unit,
                 std::string_view description) const {
    ParamInfo i;
    i.kind = kind;
    i.path = path;
    i.key = std::string(key);
    i.depth = depth();
    i.unit = std::string(unit);
    i.description = std::string(description);
    return i;
  }
};

}  // namespace

std::vector<ParamInfo> list_params(const NpuConfig& c) {
  NpuConfig copy = c;  // visit() takes a mutable config; the lister only reads
  return list_params([&copy](Visitor& v) { copy.visit(v); });
}

std::vector<ParamInfo> list_params(const std::function<void(Visitor&)>& visit) {
  Lister l;
  visit(l);
  return std::move(l.out);
}

std::string kind_name(ParamInfo::Kind k) {
  switch (k) {
    case ParamInfo::Kind::kGroup:
      return "group";
    case ParamInfo::Kind::kInteger:
      return "integer";
    case ParamInfo::Kind::kReal:
      return "real";
    case ParamInfo::Kind::kBoolean:
      return "boolean";
    case ParamInfo::Kind::kChoice:
      return "choice";
  }
  return "?";
}

std::string allowed_text(const ParamInfo& p) {
  switch (p.kind) {
    case ParamInfo::Kind::kGroup:
      return "";
    case ParamInfo::Kind::kInteger:
      return int_range(p.int_min, p.int_max);
    case ParamInfo::Kind::kReal:
      return real_range(p.real_min, p.real_max);
    case ParamInfo::Kind::kBoolean:
      return "true, false";
    case ParamInfo::Kind::kChoice: {
      std::string s;
      for (size_t i = 0; i < p.names.size(); ++i) s += (i ? ", " : "") + p.names[i];
      return s;
    }
  }
  return "";
}

// ---------------------------------------------------------------------------------------------------
// Machine spec text

namespace {

class SpecWriter final : public PathVisitor {
 public:
  std::string out;

 protected:
  void on_integer(const std::string& path, const Param&, int64_t& value, int64_t, int64_t) override {
    line(path, format_integer(value));
  }
  void on_real(const std::string& path, const Param&, double& value, double, double) override {
    line(path, format_real(value));
  }
  void on_boolean(const std::string& path, const Param&, bool& value) override {
    line(path, format_boolean(value));
  }
  void on_choice(const std::string& path, const Param&, int& index,
                 const std::vector<std::string_view>& names) override {
    line(path, names.at(static_cast<size_t>(index)));
  }

 private:
  void line(const std::string& path, std::string_view value) {
    out += path;
    out += '=';
    out += value;
    out += '\n';
  }
};

struct SpecLine {
  int number = 0;
  std::string value;
  bool used = false;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

class SpecReader final : public PathVisitor {
 public:
  SpecReader(std::map<std::string, SpecLine>& lines, std::vector<std::string>& errors)
      : lines_(lines), errors_(errors) {}

 protected:
  void on_integer(const std::string& path, const Param&, int64_t& value, int64_t min, int64_t max) override {
    if (SpecLine* l = find(path)) check(*l, path, parse_integer(l->value, min, max, value));
  }
  void on_real(const std::string& path, const Param&, double& value, double min, double max) override {
    if (SpecLine* l = find(path)) check(*l, path, parse_real(l->value, min, max, value));
  }
  void on_boolean(const std::string& path, const Param&, bool& value) override {
    if (SpecLine* l = find(path)) check(*l, path, parse_boolean(l->value, value));
  }
  void on_choice(const std::string& path, const Param&, int& index,
                 const std::vector<std::string_view>& names) override {
    if (SpecLine* l = find(path)) check(*l, path, parse_choice(l->value, names, index));
  }

 private:
  SpecLine* find(const std::string& path) {
    auto it = lines_.find(path);
    if (it == lines_.end()) {
      // Programs compiled before the energy model (or multi-core NPUs, or DRAM capacities) existed have no
      // technology/energy/area (or cores, dram.capacity_mib) lines; those keys do not shape a program, so
      // their defaults stand.
      for (const char* observer : {"technology.", "energy.", "area.", "cores", "dram.capacity_mib"})
        if (path.rfind(observer, 0) == 0) return nullptr;
      errors_.push_back("machine spec: " + path + ": missing");
      return nullptr;
    }
    it->second.used = true;
    return &it->second;
  }
  void check(const SpecLine& l, const std::string& path, const std::string& reason) {
    if (!reason.empty())
      errors_.push_back("machine spec line " + std::to_string(l.number) + ": " + path + " = " + l.value +
                        " " + reason);
  }
  std::map<std::string, SpecLine>& lines_;
  std::vector<std::string>& errors_;
};

}  // namespace

std::string to_spec_text(const NpuConfig& c) {
  NpuConfig copy = c;
  SpecWriter w;
  copy.visit(w);
  return std::move(w.out);
}

NpuConfig from_spec_text(const std::string& text) {
  std::vector<std::string> errors;
  std::map<std::string, SpecLine> lines;
  int number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view raw(text.data() + pos, end - pos);
    pos = end + 1;
    ++number;
    std::string_view line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      errors.push_back("machine spec line " + std::to_string(number) + ": '" +
                       std::string(line.substr(0, 80)) + "': expected key=value");
      continue;
    }
    std::string key(trim(line.substr(0, eq)));
    std::string value(trim(line.substr(eq + 1)));
    auto [it, inserted] = lines.emplace(key, SpecLine{number, value, false});
    if (!inserted)
      errors.push_back("machine spec line " + std::to_string(number) + ": " + key +
                       ": duplicate (first on line " + std::to_string(it->second.number) + ")");
  }
  NpuConfig c;
  SpecReader r(lines, errors);
  c.visit(r);
  for (const auto& [key, l] : lines) {
    if (!l.used)
      errors.push_back("machine spec line " + std::to_string(l.number) + ": " + key.substr(0, 80) +
                       ": unknown key");
  }
  if (!errors.empty()) {
    std::string msg;
    for (size_t i = 0; i < errors.size(); ++i) msg += (i ? "\n" : "") + errors[i];
    throw SpecTextError(msg);
  }
  return c;
}

}  // namespace npusim::isa
