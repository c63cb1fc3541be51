// Built-in micro-models, SCALE-Sim topologies and the model-spec dispatcher. Each builds an ONNX
// ModelProto and imports it, so all sources get the same checks and ONNX shape inference.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/import/import.h"
#include "compiler/import/onnx_internal.h"
#include "compiler/ir/memory_budget.h"
#include "isa/ceil_div.h"

namespace npusim::compiler {
namespace {

using detail::ModelBuilder;
using detail::pseudo_random;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

int64_t parse_positive(const std::string& text, const std::string& what) {
  std::string t = trim(text);
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || v <= 0)
    throw ModelError(what + " must be a positive integer, got '" + t + "'");
  return v;
}

// "key=v,key=v" after the "kind:" prefix; every key must be one of `allowed`.
std::map<std::string, int64_t> parse_params(const std::string& spec, const std::string& body,
                                            const std::vector<std::string>& allowed) {
  std::map<std::string, int64_t> out;
  for (const auto& item : split(body, ',')) {
    std::string it = trim(item);
    if (it.empty()) continue;
    auto eq = it.find('=');
    if (eq == std::string::npos) throw ModelError("model spec '" + spec + "': '" + it + "' is not KEY=VALUE");
    std::string key = trim(it.substr(0, eq));
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw ModelError("model spec '" + spec + "': unknown parameter '" + key + "' (expected " + list + ")");
    }
    if (key == "pad") {  // the only parameter that may be zero
      std::string v = trim(it.substr(eq + 1));
      out[key] = v == "0" ? 0 : parse_positive(v, "model spec '" + spec + "': pad");
    } else {
      out[key] = parse_positive(it.substr(eq + 1), "model spec '" + spec + "': " + key);
    }
  }
  return out;
}

int64_t need(const std::map<std::string, int64_t>& p, const std::string& key, const std::string& spec) {
  auto it = p.find(key);
  if (it == p.end()) throw ModelError("model spec '" + spec + "' lacks " + key + "=...");
  return it->second;
}

void demo_model(ModelBuilder& b) {
  b.add_input("input", {1, 3, 32, 32});
  const int64_t chans[4] = {3, 16, 32, 64};
  const int64_t strides[3] = {1, 2, 2};
  std::string x = "input";
  for (int l = 0; l < 3; ++l) {
    const std::string p = "conv" + std::to_string(l + 1);
    const int64_t ci = chans[l], co = chans[l + 1];
    b.add_initializer(p + ".weight", {co, ci, 3, 3},
                      pseudo_random(co * ci * 9, std::sqrt(2.0f / static_cast<float>(ci * 9)), 11 + l));
    auto& conv = b.add_node("Conv", p, {x, p + ".weight"}, {p + ".out"});
    ModelBuilder::set_attr(conv, "kernel_shape", std::vector<int64_t>{3, 3});
    ModelBuilder::set_attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
    ModelBuilder::set_attr(conv, "strides", std::vector<int64_t>{strides[l], strides[l]});
    const std::string bn = "bn" + std::to_string(l + 1);
    std::vector<float> scale = pseudo_random(co, 0.2f, 21 + l), bias = pseudo_random(co, 0.1f, 31 + l),
                       mean = pseudo_random(co, 0.1f, 41 + l), var = pseudo_random(co, 0.2f, 51 + l);
    for (auto& s : scale) s += 1.0f;
    for (auto& v : var) v += 1.0f;
    b.add_initializer(bn + ".scale", {co}, scale);
    b.add_initializer(bn + ".bias", {co}, bias);
    b.add_initializer(bn + ".mean", {co}, mean);
    b.add_initializer(bn + ".var", {co}, var);
    auto& bnn =
        b.add_node("BatchNormalization", bn,
                   {p + ".out", bn + ".scale", bn + ".bias", bn + ".mean", bn + ".var"}, {bn + ".out"});
    ModelBuilder::set_attr(bnn, "epsilon", 1e-5f);
    const std::string relu = "relu" + std::to_string(l + 1);
    b.add_node("Relu", relu, {bn + ".out"}, {relu + ".out"});
    x = relu + ".out";
  }
  b.add_node("GlobalAveragePool", "pool", {x}, {"pool.out"});
  b.add_node("Flatten", "flatten", {"pool.out"}, {"flatten.out"});
  b.add_initializer("fc.weight", {10, 64}, pseudo_random(640, 0.125f, 61));
  b.add_initializer("fc.bias", {10}, pseudo_random(10, 0.1f, 62));
  auto& fc = b.add_node("Gemm", "fc", {"flatten.out", "fc.weight", "fc.bias"}, {"logits"});
  ModelBuilder::set_attr(fc, "transB", int64_t{1});
  b.add_output("logits");
}

// The values of a weight are held about three times over while compiling (the ONNX initializer, the
// graph's constant, the program's data segment), 4 bytes each as float.
void check_weight_bytes(const std::string& name, const Shape& shape) {
  const double elements = static_cast<double>(num_elements(shape));
  const double bytes = elements * 4.0 * 3.0;
  check_allocation("the weight " + name + " (" + shape_to_string(shape) + " values)",
                   bytes > 1.8e19 ? ~uint64_t{0} : static_cast<uint64_t>(bytes),
                   "use smaller dimensions, or --memory-limit-gb to set the limit");
}

void add_matmul(ModelBuilder& b, const std::string& name, int64_t m, int64_t n, int64_t k, uint32_t seed) {
  if (b.weight_values()) check_weight_bytes(name + ".b", {k, n});
  b.add_input(name + ".a", {m, k});
  b.add_weight(name + ".b", {k, n},
               [=] { return pseudo_random(k * n, 1.0f / std::sqrt(static_cast<float>(k)), seed); });
  b.add_node("MatMul", name, {name + ".a", name + ".b"}, {name + ".out"});
  b.add_output(name + ".out");
}

// A Conv on a pre-padded or padded 1xCxHxW input.
void add_conv(ModelBuilder& b, const std::string& name, int64_t h, int64_t w, int64_t c, int64_t k, int64_t r,
              int64_t s, int64_t stride_h, int64_t stride_w, int64_t pad, int64_t group, uint32_t seed) {
  const int64_t cin = c / group;
  check_weight_bytes(name + ".weight", {k, cin, r, s});
  b.add_input(name + ".ifmap", {1, c, h, w});
  b.add_initializer(name + ".weight", {k, cin, r, s},
                    pseudo_random(k * cin * r * s, 1.0f / std::sqrt(static_cast<float>(cin * r * s)), seed));
  auto& n = b.add_node("Conv", name, {name + ".ifmap", name + ".weight"}, {name + ".ofmap"});
  ModelBuilder::set_attr(n, "kernel_shape", std::vector<int64_t>{r, s});
  ModelBuilder::set_attr(n, "strides", std::vector<int64_t>{stride_h, stride_w});
  ModelBuilder::set_attr(n, "pads", std::vector<int64_t>{pad, pad, pad, pad});
  if (group != 1) ModelBuilder::set_attr(n, "group", group);
  b.add_output(name + ".ofmap");
}

}  // namespace

std::pair<std::string, Shape> parse_input_shape(const std::string& spec) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    throw ModelError("--input-shape '" + spec + "' is not NAME=D0xD1x... (e.g. input=1x3x224x224)");
  std::string name = spec.substr(0, eq), dims = trim(spec.substr(eq + 1));
  Shape shape;
  if (!dims.empty())
    for (const auto& d : split(dims, 'x'))
      shape.push_back(parse_positive(d, "--input-shape " + name + " dimension"));
  return {name, shape};
}

std::pair<std::string, std::vector<double>> parse_input_value(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw ModelError("--input-value '" + spec + "' is not NAME=V[,V...] (e.g. sr=16000)");
  std::vector<double> values;
  for (const auto& text : split(spec.substr(eq + 1), ',')) {
    const std::string t = trim(text);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (t.empty() || used != t.size())
      throw ModelError("--input-value " + spec.substr(0, eq) + ": '" + t + "' is not a number");
    values.push_back(v);
  }
  return {spec.substr(0, eq), values};
}

bool is_builtin_model_spec(const std::string& spec) {
  return spec == "demo" || spec.rfind("gemm:", 0) == 0 || spec.rfind("conv:", 0) == 0 ||
         spec.rfind("llm:", 0) == 0;
}

int64_t LlmSpec::parameters() const {
  const int64_t hd = head_dim();
  const int64_t per_layer =
      hidden * (heads * hd) + 2 * hidden * (kv_heads * hd) + hidden * hidden + 3 * hidden * ffn + 2 * hidden;
  return layers * per_layer + hidden + hidden * vocab;
}

LlmSpec parse_llm_spec(const std::string& spec) {
  if (spec.rfind("llm:", 0) != 0) throw ModelError("'" + spec + "' is not an llm: model spec");
  auto p = parse_params(spec, spec.substr(4),
                        {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "past"});
  LlmSpec s;
  s.layers = need(p, "layers", spec);
  s.hidden = need(p, "hidden", spec);
  s.heads = need(p, "heads", spec);
  s.kv_heads = need(p, "kv_heads", spec);
  s.ffn = need(p, "ffn", spec);
  s.vocab = need(p, "vocab", spec);
  if (p.count("seq")) s.seq = p["seq"];
  if (p.count("past")) s.past = p["past"];
  if (s.hidden % s.heads != 0)
    throw ModelError("model spec '" + spec + "': hidden (" + std::to_string(s.hidden) +
                     ") is not a multiple of heads (" + std::to_string(s.heads) + ")");
  if (s.heads % s.kv_heads != 0)
    throw ModelError("model spec '" + spec + "': heads (" + std::to_string(s.heads) +
                     ") is not a multiple of kv_heads (" + std::to_string(s.kv_heads) + ")");
  if (s.head_dim() % 2 != 0)
    throw ModelError("model spec '" + spec + "': the head dimension hidden/heads (" +
                     std::to_string(s.head_dim()) + ") must be even for rotary embeddings");
  return s;
}

std::string llm_spec_text(const LlmSpec& s) {
  return "llm:layers=" + std::to_string(s.layers) + ",hidden=" + std::to_string(s.hidden) +
         ",heads=" + std::to_string(s.heads) + ",kv_heads=" + std::to_string(s.kv_heads) +
         ",ffn=" + std::to_string(s.ffn) + ",vocab=" + std::to_string(s.vocab) +
         ",seq=" + std::to_string(s.seq) + (s.past > 0 ? ",past=" + std::to_string(s.past) : std::string());
}

namespace {

// The built-in model `spec`, built; its MatMul weights shape-only unless `weight_values`
// (ImportOptions::weight_values).
ModelBuilder builtin_builder(const std::string& spec, bool weight_values) {
  if (spec == "demo") {
    ModelBuilder b("demo", weight_values);
    demo_model(b);
    return b;
  }
  if (spec.rfind("gemm:", 0) == 0) {
    auto p = parse_params(spec, spec.substr(5), {"M", "N", "K"});
    ModelBuilder b("gemm", weight_values);
    add_matmul(b, "gemm", need(p, "M", spec), need(p, "N", spec), need(p, "K", spec), 7);
    return b;
  }
  if (spec.rfind("conv:", 0) == 0) {
    auto p = parse_params(spec, spec.substr(5), {"H", "W", "C", "K", "R", "S", "stride", "pad"});
    const int64_t h = need(p, "H", spec), w = need(p, "W", spec), r = need(p, "R", spec),
                  s = need(p, "S", spec);
    const int64_t stride = p.count("stride") ? p["stride"] : 1, pad = p.count("pad") ? p["pad"] : 0;
    if (h + 2 * pad < r || w + 2 * pad < s)
      throw ModelError("model spec '" + spec + "': the filter is larger than the padded input");
    ModelBuilder b("conv", weight_values);
    add_conv(b, "conv", h, w, need(p, "C", spec), need(p, "K", spec), r, s, stride, stride, pad, 1, 7);
    return b;
  }
  if (spec.rfind("llm:", 0) == 0) {
    const LlmSpec s = parse_llm_spec(spec);
    if (weight_values) check_weight_bytes("weights of " + spec, {s.parameters()});
    ModelBuilder b("llm", weight_values);
    detail::llm_model(s, b);
    return b;
  }
  throw ModelError(
      "unknown built-in model '" + spec +
      "' (expected demo, gemm:M=..,N=..,K=.., conv:H=..,W=..,... or llm:layers=..,hidden=..,...)");
}

}  // namespace

Graph builtin_model(const std::string& spec, bool weight_values) {
  ModelBuilder b = builtin_builder(spec, weight_values);
  return detail::import_built(b, "builtin:" + spec);
}

std::string builtin_model_onnx(const std::string& spec) {
  return builtin_builder(spec, true).model().SerializeAsString();
}

Graph import_scalesim_csv_text(const std::string& text, const std::string& display_name, bool weight_values) {
  std::istringstream is(text);
  std::string line;
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  std::vector<std::string> header;
  int lineno = 0;
  while (std::getline(is, line)) {
    ++lineno;
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    auto fields = split(trim(line), ',');
    // A remark after the last column ("1,#dw"): SCALE-Sim drops whatever follows the last comma.
    for (size_t i = 1; i < fields.size(); ++i) {
      if (trim(fields[i]).rfind('#', 0) == 0) {
        fields.resize(i);
        break;
      }
    }
    // SCALE-Sim's trailing comma; a row without one keeps its last column (unlike SCALE-Sim, which
    // would drop the stride).
    if (!fields.empty() && trim(fields.back()).empty()) fields.pop_back();
    if (header.empty())
      header = fields;
    else
      rows.emplace_back(lineno, fields);
  }
  if (header.size() < 2) throw ModelError(display_name + " is not a SCALE-Sim topology CSV (no header row)");
  std::string h1 = trim(header[1]);
  for (auto& c : h1) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool gemm = h1 == "m";
  if (!gemm && h1.find("ifmap") == std::string::npos)
    throw ModelError(display_name + " is not a SCALE-Sim topology CSV: its header's second column is '" +
                     trim(header[1]) + "' (expected 'IFMAP Height' or 'M')");
  if (rows.empty()) throw ModelError(display_name + " has no layers");
  std::string gname = display_name;
  auto slash = gname.find_last_of('/');
  if (slash != std::string::npos) gname = gname.substr(slash + 1);
  ModelBuilder b(gname, weight_values);
  std::map<std::string, int> seen;
  uint32_t seed = 100;
  for (const auto& [ln, f] : rows) {
    const std::string where = display_name + ":" + std::to_string(ln);
    std::string name = trim(f[0]);
    if (name.empty()) throw ModelError(where + ": layer name is empty");
    if (seen[name]++) name += "_" + std::to_string(seen[name] - 1);
    if (gemm) {
      if (f.size() < 4) throw ModelError(where + ": a GEMM row needs Layer Name, M, N, K");
      add_matmul(b, name, parse_positive(f[1], where + ": M"), parse_positive(f[2], where + ": N"),
                 parse_positive(f[3], where + ": K"), seed++);
      continue;
    }
    if (f.size() < 8)
      throw ModelError(where +
                       ": a conv row needs Layer name, IFMAP Height, IFMAP Width, Filter Height, "
                       "Filter Width, Channels, Num Filter, Strides");
    const int64_t h = parse_positive(f[1], where + ": IFMAP Height"),
                  w = parse_positive(f[2], where + ": IFMAP Width");
    const int64_t r = parse_positive(f[3], where + ": Filter Height"),
                  s = parse_positive(f[4], where + ": Filter Width");
    const int64_t c = parse_positive(f[5], where + ": Channels"),
                  k = parse_positive(f[6], where + ": Num Filter");
    const int64_t sh = parse_positive(f[7], where + ": Strides");
    const int64_t sw = f.size() > 8 ? parse_positive(f[8], where + ": Stride width") : sh;
    if (r > h || s > w) throw ModelError(where + ": the filter is larger than the IFMAP");
    // SCALE-Sim: ofmap = ceil((ifmap - filter + stride) / stride). Its inputs are pre-padded, so the
    // rows and columns the ceiling adds are part of the input map: it grows by them (no conv padding,
    // which could exceed the filter's reach on a 1x1 strided row).
    const int64_t oh = ceil_div(h - r + sh, sh), ow = ceil_div(w - s + sw, sw);
    const int64_t extra_h = std::max<int64_t>((oh - 1) * sh + r - h, 0);
    const int64_t extra_w = std::max<int64_t>((ow - 1) * sw + s - w, 0);
    // A depthwise layer ("DP" in the name): SCALE-Sim runs one single-channel layer per channel; one
    // grouped Conv with C groups of `k` filters each is the same computation.
    const bool dp = name.find("DP") != std::string::npos;
    if (!dp && r == 1 && c == 1 && s == w + extra_w && ow == 1) {
      // One filter row spanning the whole single-channel map (DLRM's MLP rows, filters up to 1040
      // wide): each output is a dot product of one input row, i.e. the GEMM [OH x S] x [S x K] that
      // SCALE-Sim computes for it, without a kernel wider than a conv instruction takes.
      add_matmul(b, name, oh, k, s, seed++);
      continue;
    }
    add_conv(b, name, h + extra_h, w + extra_w, c, dp ? c * k : k, r, s, sh, sw, 0, dp ? c : 1, seed++);
  }
  Graph g = detail::import_built(b, display_name);
  // Rows are layers on the array's own feature-map layout: no conversions around them.
  g.nhwc_io = true;
  return g;
}

Graph import_scalesim_csv(const std::string& path, bool weight_values) {
  std::ifstream in(path);
  if (!in) throw ModelError("cannot open SCALE-Sim topology '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return import_scalesim_csv_text(ss.str(), path, weight_values);
}

Graph load_model(const std::string& spec, const ImportOptions& options) {
  if (is_builtin_model_spec(spec)) {
    if (!options.input_shapes.empty() || options.batch > 0)
      throw ModelError("--input-shape and --batch do not apply to built-in model '" + spec +
                       "' (its shapes are fixed)");
    if (!options.dim_params.empty())
      throw ModelError("--dynamic does not apply to built-in model '" + spec + "' (its shapes are fixed)");
    return builtin_model(spec, options.weight_values);
  }
  if (spec.size() > 4 && spec.compare(spec.size() - 4, 4, ".csv") == 0) {
    if (!options.dim_params.empty())
      throw ModelError("--dynamic does not apply to SCALE-Sim topology '" + spec +
                       "' (its shapes are fixed)");
    if (!options.input_shapes.empty() || options.batch > 0)
      throw ModelError("--input-shape and --batch do not apply to SCALE-Sim topology '" + spec +
                       "' (its shapes are fixed)");
    return import_scalesim_csv(spec, options.weight_values);
  }
  return import_onnx_file(spec, options);
}

}  // namespace npusim::compiler
