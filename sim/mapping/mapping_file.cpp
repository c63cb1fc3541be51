// Mapping files: reader and writer over one list of keys (see mapping_file.h).
#include "sim/mapping/mapping_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "isa/machine/spec_text.h"

namespace npusim::sim {

using compiler::LayerMapping;

namespace {

// One key of an entry: how its value is written (a null node when the entry has none) and read (an
// error message, "" when the value was taken).
struct Field {
  std::string_view key;
  std::function<YAML::Node(const LayerMapping&)> write;
  std::function<std::string(const YAML::Node&, LayerMapping&)> read;
};

// A key whose value is one of an enum's names.
template <typename E>
Field choice(std::string_view key, std::optional<E> LayerMapping::*field, std::string_view (*name)(E),
             std::optional<E> (*parse)(std::string_view), std::string_view expected) {
  return {key,
          [=](const LayerMapping& m) {
            return m.*field ? YAML::Node(std::string(name(*(m.*field)))) : YAML::Node();
          },
          [=](const YAML::Node& v, LayerMapping& m) -> std::string {
            m.*field = v.IsScalar() ? parse(v.Scalar()) : std::nullopt;
            return m.*field ? "" : fmt::format("{}: {}", key, expected);
          }};
}

// A key whose value is true or false.
Field bool_field(std::string_view key, std::optional<bool> LayerMapping::*field) {
  return {key, [=](const LayerMapping& m) { return m.*field ? YAML::Node(*(m.*field)) : YAML::Node(); },
          [=](const YAML::Node& v, LayerMapping& m) -> std::string {
            bool b = false;
            if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b))
              return fmt::format("{}: expected true or false", key);
            m.*field = b;
            return "";
          }};
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? std::string(sep) : "") + v[i];
  return s;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& keys) {
  const std::string guess = isa::closest_name(word, keys);
  return guess.empty() ? fmt::format(" (keys: {})", join(keys, ", "))
                       : fmt::format(" (did you mean '{}'?)", guess);
}

// band_loop: {rows: N, buffer_rows: N, resident: B, pieces: B, project: B} (compiler::BandLoop; rows
// required).
YAML::Node write_band_loop(const LayerMapping& m) {
  if (!m.band_loop) return YAML::Node();
  const compiler::BandLoop& b = *m.band_loop;
  YAML::Node v(YAML::NodeType::Map);
  v["rows"] = b.rows;
  if (b.buffer_rows) v["buffer_rows"] = *b.buffer_rows;
  if (b.resident) v["resident"] = *b.resident;
  if (b.pieces) v["pieces"] = *b.pieces;
  if (b.project) v["project"] = *b.project;
  return v;
}

std::string read_band_loop(const YAML::Node& v, LayerMapping& m) {
  const char* expected =
      "band_loop: expected {rows: N, buffer_rows: N, resident: true|false, pieces: true|false, project: "
      "true|false} (rows required, each at least 1)";
  if (!v.IsMap() || !v["rows"]) return expected;
  compiler::BandLoop b;
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    int64_t x = 0;
    bool flag = false;
    if (key == "rows" || key == "buffer_rows") {
      if (!kv.second.IsScalar() || !YAML::convert<int64_t>::decode(kv.second, x) || x < 1) return expected;
      (key == "rows" ? b.rows : b.buffer_rows.emplace()) = x;
    } else if (key == "resident" || key == "pieces" || key == "project") {
      if (!kv.second.IsScalar() || !YAML::convert<bool>::decode(kv.second, flag)) return expected;
      (key == "resident" ? b.resident : key == "pieces" ? b.pieces : b.project) = flag;
    } else {
      return fmt::format("band_loop: unknown key '{}'{}", key,
                         suggestion(key, {"rows", "buffer_rows", "resident", "pieces", "project"}));
    }
  }
  m.band_loop = b;
  return "";
}

// Every key of an entry in file order: the list both directions walk.
const std::vector<Field>& fields() {
  static const std::vector<Field> list = [] {
    std::vector<Field> f;
    f.push_back({"name", [](const LayerMapping& m) { return YAML::Node(m.name); },
                 [](const YAML::Node& v, LayerMapping& m) -> std::string {
                   if (!v.IsScalar() || v.Scalar().empty()) return "name: expected the layer's node name";
                   m.name = v.Scalar();
                   return "";
                 }});
    f.push_back(choice("placement", &LayerMapping::placement, compiler::placement_name,
                       compiler::parse_placement, "expected one of matrix, vector, free, host"));
    for (const compiler::TileKey& k : compiler::tile_keys()) {
      f.push_back({k.key,
                   [field = k.field](const LayerMapping& m) {
                     return m.*field ? YAML::Node(*(m.*field)) : YAML::Node();
                   },
                   [key = k.key, field = k.field](const YAML::Node& v, LayerMapping& m) -> std::string {
                     int64_t x = 0;
                     if (!v.IsScalar() || !YAML::convert<int64_t>::decode(v, x)) {
                       return fmt::format("{}: expected an integer", key);
                     }
                     m.*field = x;
                     return "";
                   }});
    }
    f.push_back(choice("loop_order", &LayerMapping::loop_order, compiler::loop_order_name,
                       compiler::parse_loop_order,
                       "expected spatial_outer, channel_outer, input_resident or groups_inner"));
    f.push_back(bool_field("on_chip", &LayerMapping::on_chip));
    f.push_back(bool_field("merge_siblings", &LayerMapping::merge_siblings));
    f.push_back({"band_loop", write_band_loop, read_band_loop});
    f.push_back(bool_field("in_loads", &LayerMapping::in_loads));
    f.push_back({"fused",
                 [](const LayerMapping& m) {
                   YAML::Node v;
                   if (m.fused) {
                     v = YAML::Node(YAML::NodeType::Sequence);
                     for (const std::string& n : *m.fused) v.push_back(n);
                   }
                   return v;
                 },
                 [](const YAML::Node& v, LayerMapping& m) -> std::string {
                   if (!v.IsSequence()) return "fused: expected a list of the model's node names";
                   std::vector<std::string> names;
                   for (const YAML::Node& n : v) {
                     if (!n.IsScalar() || n.Scalar().empty())
                       return "fused: expected a list of the model's node names";
                     names.push_back(n.Scalar());
                   }
                   m.fused = std::move(names);
                   return "";
                 }});
    return f;
  }();
  return list;
}

std::string position(const std::string& source, const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return source;
  return fmt::format("{}:{}:{}", source, m.line + 1, m.column + 1);
}

}  // namespace

MappingFileError::MappingFileError(std::vector<std::string> messages)
    : std::runtime_error(join(messages, "\n")), messages_(std::move(messages)) {}

compiler::MappingOverrides read_mapping_text(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw MappingFileError({fmt::format("{}: {}", position(source, e.mark), e.msg)});
  }
  std::vector<std::string> errors;
  compiler::MappingOverrides out;
  if (root.IsNull()) return out;
  if (!root.IsMap())
    throw MappingFileError({position(source, root.Mark()) + ": expected a map with the key 'layers'"});
  YAML::Node layers;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key == "layers") {
      layers = kv.second;
    } else {
      errors.push_back(fmt::format("{}: unknown key '{}'{}", position(source, kv.first.Mark()), key,
                                   suggestion(key, {"layers"})));
    }
  }
  if (layers && !layers.IsNull() && !layers.IsSequence()) {
    errors.push_back(position(source, layers.Mark()) +
                     ": layers: expected a list of entries {name: ..., ...}");
  } else if (layers) {
    std::vector<std::string> keys;
    for (const Field& f : fields()) keys.emplace_back(f.key);
    for (const YAML::Node& e : layers) {
      const std::string at = position(source, e.Mark());
      if (!e.IsMap() || !e["name"]) {
        errors.push_back(at + ": expected an entry {name: NODE, KEY: VALUE, ...}");
        continue;
      }
      LayerMapping m;
      m.where[""] = at;
      std::string err = fields()[0].read(e["name"], m);
      if (!err.empty()) {
        errors.push_back(fmt::format("{}: {}", position(source, e["name"].Mark()), err));
        continue;
      }
      for (const auto& kv : e) {
        const std::string key = kv.first.Scalar();
        const std::string kat = position(source, kv.second.Mark());
        if (key == "name") continue;
        auto f = std::find_if(fields().begin(), fields().end(), [&](const Field& x) { return x.key == key; });
        if (f == fields().end()) {
          errors.push_back(fmt::format("{}: layer '{}': unknown key '{}'{}",
                                       position(source, kv.first.Mark()), m.name, key,
                                       suggestion(key, keys)));
          continue;
        }
        m.where[key] = kat;
        err = f->read(kv.second, m);
        if (!err.empty()) errors.push_back(fmt::format("{}: layer '{}': {}", kat, m.name, err));
      }
      auto [it, fresh] = out.layers.emplace(m.name, m);
      if (!fresh) {
        errors.push_back(fmt::format("{}: layer '{}': a second entry for the layer (the first is at {})", at,
                                     m.name, it->second.at("")));
      }
    }
  }
  if (!errors.empty()) throw MappingFileError(errors);
  return out;
}

compiler::MappingOverrides read_mapping_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MappingFileError({fmt::format("cannot open mapping file '{}'", path)});
  std::ostringstream s;
  s << in.rdbuf();
  return read_mapping_text(s.str(), path);
}

std::string mapping_text(const std::vector<compiler::LayerPlan>& layers,
                         const std::vector<std::string>& header) {
  std::string text;
  for (const std::string& line : header) text += line.empty() ? "#\n" : "# " + line + "\n";
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "layers" << YAML::Value << YAML::BeginSeq;
  for (const compiler::LayerPlan& p : layers) {
    e << YAML::Flow << YAML::BeginMap;
    for (const Field& f : fields()) {
      const YAML::Node v = f.write(p.chosen);
      if (!v.IsNull()) e << YAML::Key << std::string(f.key) << YAML::Value << v;
    }
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return text + e.c_str() + "\n";
}

void write_mapping_file(const std::string& path, const std::vector<compiler::LayerPlan>& layers,
                        const std::vector<std::string>& header) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << mapping_text(layers, header)) || !out.flush()) {
    throw std::runtime_error(fmt::format("cannot write '{}'", path));
  }
}

}  // namespace npusim::sim
