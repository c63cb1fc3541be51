#include "compiler/quant/precision.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

namespace npusim::compiler::quant {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
    case Precision::kInt16:
      return "int16";
  }
  return "fp32";
}

Precision parse_precision(const std::string& text) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "fp32") return Precision::kFp32;
  if (t == "fp16") return Precision::kFp16;
  if (t == "bf16") return Precision::kBf16;
  if (t == "int8") return Precision::kInt8;
  if (t == "int16") return Precision::kInt16;
  throw PrecisionError("unknown precision '" + text + "' (expected fp32, fp16, bf16, int8 or int16)");
}

std::string_view to_string(Int8Vector s) { return s == Int8Vector::kInteger ? "integer" : "float"; }

Int8Vector parse_int8_vector(const std::string& text) {
  if (text == "integer") return Int8Vector::kInteger;
  if (text == "float") return Int8Vector::kFloat;
  throw PrecisionError("unknown int8 vector scheme '" + text + "' (expected integer or float)");
}

isa::DType to_dtype(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return isa::DType::kFp32;
    case Precision::kFp16:
      return isa::DType::kFp16;
    case Precision::kBf16:
      return isa::DType::kBf16;
    case Precision::kInt8:
      return isa::DType::kInt8;
    case Precision::kInt16:
      return isa::DType::kInt16;
  }
  return isa::DType::kFp32;
}

static std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

static std::string unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}

std::vector<PrecisionOverride> parse_overrides(const std::string& text) {
  std::vector<PrecisionOverride> out;
  std::string entry;
  std::vector<std::string> entries;
  for (char c : text) {
    if (c == ',' || c == '\n') {
      entries.push_back(entry);
      entry.clear();
    } else {
      entry += c;
    }
  }
  entries.push_back(entry);
  for (std::string e : entries) {
    const size_t hash = e.find('#');
    if (hash != std::string::npos) e = e.substr(0, hash);
    e = trim(e);
    if (e.empty()) continue;
    if (e.size() >= 2 && e[0] == '-' && std::isspace(static_cast<unsigned char>(e[1]))) e = trim(e.substr(1));
    // '=' first: a node name may contain ':' (torch exports "/layer1/conv::0"-like names rarely, but the
    // value never does), so split at the last separator.
    size_t sep = e.rfind('=');
    if (sep == std::string::npos) sep = e.rfind(':');
    if (sep == std::string::npos || sep == 0 || sep + 1 >= e.size())
      throw PrecisionError("precision override '" + e + "': expected NODE_OR_OP=PRECISION");
    PrecisionOverride o;
    o.key = unquote(trim(e.substr(0, sep)));
    const std::string prec = unquote(trim(e.substr(sep + 1)));
    if (o.key.empty()) throw PrecisionError("precision override '" + e + "': empty node or op name");
    try {
      o.precision = parse_precision(prec);
    } catch (const PrecisionError& err) {
      throw PrecisionError("precision override '" + e + "': " + err.what());
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::string format_overrides(const std::vector<PrecisionOverride>& overrides) {
  std::string s;
  for (const auto& o : overrides) {
    if (!s.empty()) s += ',';
    s += o.key + "=" + std::string(to_string(o.precision));
  }
  return s;
}

int32_t QParams::quantize(float real) const {
  // ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point). The division is one fp32
  // operation; NaN maps to the zero point (float_to_int maps NaN to 0).
  const float r = real / scale;
  if (std::isnan(r)) return zero_point;
  const double rounded = std::nearbyint(static_cast<double>(r));
  const double v = rounded + zero_point;
  if (v <= qmin()) return qmin();
  if (v >= qmax()) return qmax();
  return static_cast<int32_t>(v);
}

const QParams* PrecisionPlan::qparams(const std::string& name) const {
  const auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

Precision PrecisionPlan::precision_of(const std::string& name) const {
  auto it = nodes.find(name);
  return it == nodes.end() ? model : it->second.effective;
}

Precision PrecisionPlan::reported_precision(const std::string& name) const {
  auto it = nodes.find(name);
  return it == nodes.end() ? model : it->second.reported();
}

// The op types whose activation input can be int16 (the array's int16 x int8 MACs).
static bool int16_capable(const std::string& op_type) {
  return op_type == "Conv" || op_type == "ConvTranspose" || op_type == "Gemm" || op_type == "MatMul";
}
static bool int16_capable(const Node& n) { return n.domain.empty() && int16_capable(n.op_type); }

bool PrecisionPlan::has_int8() const {
  for (const auto& [name, np] : nodes)
    if (np.effective == Precision::kInt8) return true;
  return model == Precision::kInt8 && nodes.empty();
}

static bool derived_from(const std::string& name, const std::string& key) {
  return name.size() > key.size() && name.compare(0, key.size(), key) == 0 && name[key.size()] == '_';
}

PrecisionPlan resolve_plan(const Graph& g, const PrecisionSpec& spec, const Graph* original) {
  if (spec.model == Precision::kInt16)
    throw PrecisionError(
        "int16 is a per-layer option for matrix layers: use --precision int8 with "
        "--precision-override NODE_OR_OP=int16");
  PrecisionPlan plan;
  plan.model = spec.model;
  std::set<std::string> node_names, op_types;
  for (const auto& n : g.nodes) {
    node_names.insert(n.name);
    op_types.insert(n.op_type);
  }
  // Op types of the original graph, mapped to the names of its nodes of that type.
  std::map<std::string, std::vector<std::string>> original_by_op;
  if (original)
    for (const auto& n : original->nodes) original_by_op[n.op_type].push_back(n.name);

  std::vector<std::string> unmatched;
  for (const auto& o : spec.overrides) {
    bool matched = node_names.count(o.key) || op_types.count(o.key) || original_by_op.count(o.key);
    if (!matched)
      for (const auto& n : g.nodes)
        if (derived_from(n.name, o.key)) matched = true;
    if (!matched && original)
      for (const auto& n : original->nodes)
        if (n.name == o.key) matched = true;  // a node the passes folded away: harmless
    if (!matched) unmatched.push_back(o.key);
  }
  if (!unmatched.empty()) {
    std::string list;
    for (const auto& k : unmatched) list += (list.empty() ? "'" : ", '") + k + "'";
    throw PrecisionError("precision override " + list + " names no node and no op type of the model");
  }
  // int16 names matrix layers only: an op type or a node (of the graph, or of the imported graph before
  // a pass fused it) of another kind is a request int16 cannot honour.
  for (const auto& o : spec.overrides) {
    if (o.precision != Precision::kInt16) continue;
    std::string other;  // the op type of a non-matrix node or op type the key names
    if ((op_types.count(o.key) || original_by_op.count(o.key)) && !int16_capable(o.key)) other = o.key;
    for (const Graph* graph : {&g, original})
      if (graph)
        for (const auto& n : graph->nodes)
          if (n.name == o.key && !int16_capable(n)) other = n.op_type;
    if (!other.empty())
      throw PrecisionError("precision override '" + o.key +
                           "=int16': int16 activations are for matrix layers "
                           "(Conv, ConvTranspose, Gemm, MatMul), not " +
                           other);
  }

  for (const auto& n : g.nodes) {
    NodePrecision np;
    np.requested = spec.model;
    // Op-type keys first, so that name keys (applied after) win.
    for (const auto& o : spec.overrides) {
      bool hit = n.op_type == o.key;
      if (!hit && original_by_op.count(o.key))
        for (const auto& orig : original_by_op.at(o.key))
          if (n.name == orig || derived_from(n.name, orig)) hit = true;
      if (hit) {
        np.requested = o.precision;
        np.overridden = true;
      }
    }
    for (const auto& o : spec.overrides) {
      if (n.name == o.key || derived_from(n.name, o.key)) {
        np.requested = o.precision;
        np.overridden = true;
      }
    }
    if (np.requested == Precision::kInt16) {
      // A node a pass derived from a named matrix layer (its padding, say) runs in int8 with the layer.
      if (!int16_capable(n)) np.requested = Precision::kInt8;
      np.int16 = int16_capable(n);
    }
    np.effective = np.requested == Precision::kInt16 ? Precision::kInt8 : np.requested;
    plan.nodes[n.name] = np;
  }
  return plan;
}

std::string plan_summary(const PrecisionPlan& plan) {
  std::map<Precision, std::vector<std::string>> by;
  for (const auto& [name, np] : plan.nodes) by[np.reported()].push_back(name);
  std::ostringstream os;
  bool first = true;
  for (const auto& [p, names] : by) {
    if (!first) os << "; ";
    first = false;
    os << to_string(p) << ": ";
    if (names.size() > 6) {
      os << names.size() << " nodes";
    } else {
      for (size_t k = 0; k < names.size(); ++k) os << (k ? ", " : "") << names[k];
    }
  }
  int fallbacks = 0;
  for (const auto& [name, np] : plan.nodes)
    if (np.fell_back()) ++fallbacks;
  if (fallbacks) os << " (" << fallbacks << " nodes could not run in the requested precision)";
  return os.str();
}

AffineArith affine_arith(const std::vector<float>& scale, const std::vector<float>& shift, const QParams* x,
                         const QParams* y, const std::string& act, float act_lo, float act_hi) {
  AffineArith r;
  r.codes_out = y && (act.empty() || act == "Relu" || act == "Clip");
  const double sx = x ? static_cast<double>(x->scale) : 1.0;
  const double sy = r.codes_out ? static_cast<double>(y->scale) : 1.0;
  const double zy = r.codes_out ? static_cast<double>(y->zero_point) : 0.0;
  r.mul.resize(scale.size());
  r.add.resize(shift.size());
  for (size_t c = 0; c < scale.size(); ++c) {
    r.mul[c] = static_cast<float>(static_cast<double>(scale[c]) * sx / sy);
    r.add[c] = static_cast<float>(static_cast<double>(shift[c]) / sy + zy);
  }
  if (r.codes_out && act == "Relu") r.lo = static_cast<float>(zy);
  if (r.codes_out && act == "Clip") {
    // An open bound (float lowest()/max()) may leave fp32's range in code space: it stays open.
    auto bound = [&](float b) {
      const double v = static_cast<double>(b) / sy + zy;
      return std::fabs(v) > std::numeric_limits<float>::max() ? static_cast<float>(std::copysign(INFINITY, v))
                                                              : static_cast<float>(v);
    };
    r.lo = bound(act_lo);
    r.hi = bound(act_hi);
  }
  return r;
}

}  // namespace npusim::compiler::quant
