#include "sim/report/report_reader.h"

#include <string>
#include <vector>

#include "sim/report/report_file.h"
#include "traces/report_visitor.h"

namespace npusim::sim {
namespace {

// The reader: walks traces::Report::visit with the JSON's nodes, filling each stored field. A member
// that is absent (or null), or whose object is absent, leaves the field as it is (0, "", false, none);
// one of the wrong type is a ReportReadError naming its key. Derived figures are not read.
class YamlReportReader final : public traces::ReportVisitor {
 public:
  explicit YamlReportReader(const YAML::Node& root) { nodes_.push_back(root); }

  bool fills() const override { return true; }
  void integer(const traces::Field& f, uint64_t& v) override { get(f, v); }
  void integer(const traces::Field& f, int64_t& v) override { get(f, v); }
  void real(const traces::Field& f, double& v) override { get(f, v); }
  void boolean(const traces::Field& f, bool& v) override { get(f, v); }
  void text(const traces::Field& f, std::string& v) override { get(f, v); }
  void integer(const traces::Field& f, std::optional<uint64_t>& v) override {
    uint64_t x = 0;
    if (get(f, x)) v = x;
  }
  void choice(const traces::Field& f, size_t& index, const std::vector<std::string_view>& names) override {
    std::string name;
    if (!get(f, name) || name.empty()) return;  // absent: the field's default
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k] == name) {
        index = k;
        return;
      }
    }
    std::string alternatives;
    for (size_t k = 0; k < names.size(); ++k)
      alternatives += std::string(k == 0                  ? ""
                                  : k + 1 == names.size() ? " or "
                                                          : ", ") +
                      std::string(names[k]);
    throw ReportReadError("the report's '" + std::string(f.key) + "' is '" + name + "', not " + alternatives);
  }
  void parameter(const traces::Field& f, std::string& v) override {
    const YAML::Node n = node(f);
    if (n && n.IsScalar()) v = n.Scalar();
  }
  // Sections and members stages outside the simulator wrote stay in the JSON: their readers read them there.
  void json(const traces::Field&, std::string&) override {}
  void derived(const traces::Field&, uint64_t) override {}
  void derived(const traces::Field&, double) override {}
  void derived(const traces::Field&, std::string_view) override {}
  void null(const traces::Field&) override {}

  // An absent object is not entered (no end() follows); an absent list or map is entered empty.
  bool begin_object(const traces::Field& f, bool, Layout) override {
    const YAML::Node n = child(f, YAML::NodeType::Map);
    if (n) nodes_.push_back(n);
    return bool(n);
  }
  size_t begin_list(const traces::Field& f, size_t, Layout) override {
    const YAML::Node n = child(f, YAML::NodeType::Sequence);
    nodes_.push_back(n ? n : YAML::Node());
    return n ? n.size() : 0;
  }
  void element(size_t i) override { element_ = i; }
  std::vector<std::string> begin_map(const traces::Field& f, std::vector<std::string>, Layout,
                                     std::string_view) override {
    const YAML::Node n = child(f, YAML::NodeType::Map);
    nodes_.push_back(n ? n : YAML::Node());
    std::vector<std::string> keys;
    if (n) {
      for (const auto& kv : n) keys.push_back(kv.first.Scalar());
    }
    return keys;
  }
  void end() override { nodes_.pop_back(); }

 private:
  // The member `f` of the current object, or (empty key) the current element of the current list;
  // an undefined node when there is none.
  YAML::Node node(const traces::Field& f) const {
    const YAML::Node& n = nodes_.back();
    if (f.key.empty()) return n.IsSequence() && element_ < n.size() ? n[element_] : absent();
    return n.IsMap() ? n[std::string(f.key)] : absent();
  }
  static YAML::Node absent() {
    static const YAML::Node kEmpty(YAML::NodeType::Map);
    return kEmpty["absent"];
  }

  // The object, list or map `f`: an undefined node when it is absent or null; ReportReadError when it
  // is something else.
  YAML::Node child(const traces::Field& f, YAML::NodeType::value type) const {
    const YAML::Node n = node(f);
    if (!n || n.IsNull()) return absent();
    if (n.Type() != type) wrong(f);
    return n;
  }

  template <class T>
  bool get(const traces::Field& f, T& v) {
    const YAML::Node n = node(f);
    if (!n || n.IsNull()) return false;
    try {
      v = n.as<T>();
    } catch (const YAML::Exception&) {
      wrong(f);
    }
    return true;
  }

  [[noreturn]] static void wrong(const traces::Field& f) {
    throw ReportReadError("the report's '" + std::string(f.key) + "' is not what npusim writes there");
  }

  std::vector<YAML::Node> nodes_;
  size_t element_ = 0;
};

}  // namespace

traces::Report read_report(const YAML::Node& root) {
  traces::Report r;
  try {
    YamlReportReader reader(root);
    r.visit(reader);
  } catch (const YAML::Exception& e) {
    throw ReportReadError("the report does not have the fields npusim writes (" + e.msg + ")");
  }
  for (const traces::LayerReport& f : r.layers) {
    if (!f.fused() || !f.bound_cycles) continue;
    for (traces::LayerReport& l : r.layers) {
      if (l.name == f.fused_into && !l.fused() && l.bound_cycles) l.fused_bound_cycles += *f.bound_cycles;
    }
  }
  return r;
}

}  // namespace npusim::sim
