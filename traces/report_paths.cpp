#include "traces/report_paths.h"

#include <set>

#include "isa/json_text.h"
#include "traces/report_visitor.h"

namespace npusim::traces {
namespace {

// A visitor that knows the dotted path of each field it meets; `lists` says whether to walk into lists.
class PathWalker : public ReportVisitor {
 public:
  explicit PathWalker(bool lists) : lists_(lists) {}

  void integer(const Field& f, uint64_t& v) override {
    number(f, ReportFigure::Kind::kInteger, json_of(v), v);
  }
  void integer(const Field& f, int64_t& v) override {
    number(f, ReportFigure::Kind::kInteger, json_of(v), static_cast<double>(v));
  }
  void real(const Field& f, double& v) override { number(f, ReportFigure::Kind::kReal, real_text(f, v), v); }
  void boolean(const Field& f, bool& v) override { field(f, {ReportFigure::Kind::kBoolean, json_of(v), {}}); }
  void text(const Field& f, std::string& v) override { field(f, {ReportFigure::Kind::kText, v, {}}); }
  void integer(const Field& f, std::optional<uint64_t>& v) override {
    if (v) integer(f, *v);
  }
  void choice(const Field& f, size_t& index, const std::vector<std::string_view>& names) override {
    field(f, {ReportFigure::Kind::kText, std::string(names[index]), {}});
  }
  void parameter(const Field& f, std::string& v) override { field(f, {ReportFigure::Kind::kText, v, {}}); }
  void json(const Field& f, std::string&) override {
    if (!f.key.empty()) seen(path_of(f));
  }
  void derived(const Field& f, uint64_t v) override {
    number(f, ReportFigure::Kind::kInteger, json_of(v), static_cast<double>(v));
  }
  void derived(const Field& f, double v) override {
    number(f, ReportFigure::Kind::kReal, real_text(f, v), v);
  }
  void derived(const Field& f, std::string_view v) override {
    field(f, {ReportFigure::Kind::kText, std::string(v), {}});
  }

  void null(const Field& f) override { seen(path_of(f)); }
  bool begin_object(const Field& f, bool present, Layout) override {
    if (present) enter(path_of(f));
    return present;
  }
  size_t begin_list(const Field& f, size_t n, Layout) override {
    seen(path_of(f));
    frames_.push_back({path_of(f) + "[]", ""});
    return lists_ ? n : 0;
  }
  void element(size_t) override {}
  std::vector<std::string> begin_map(const Field& f, std::vector<std::string> keys, Layout,
                                     std::string_view placeholder) override {
    enter(path_of(f));
    frames_.back().placeholder = placeholder;
    return keys;
  }
  void end() override { frames_.pop_back(); }

 protected:
  virtual void field(const Field& f, ReportFigure figure) = 0;
  virtual void seen(const std::string& path) = 0;
  // The path of `f` in the current container: a list's element is the list's `[]`, a key of a map with a
  // placeholder is the placeholder.
  std::string path_of(const Field& f) const {
    const std::string parent = frames_.empty() ? "" : frames_.back().path;
    if (f.key.empty()) return parent;
    const std::string key(frames_.empty() || frames_.back().placeholder.empty() ? f.key
                                                                                : frames_.back().placeholder);
    return parent.empty() ? key : parent + "." + key;
  }

 private:
  struct Frame {
    std::string path;
    std::string_view placeholder;  // a map's, for its keys
  };
  static std::string real_text(const Field& f, double v) {
    std::string s;
    JsonWriter w(s);
    write_real(w, f, v);
    return s;
  }
  template <class T>
  static std::string json_of(T v) {
    std::string s;
    JsonWriter(s).value(v);
    return s;
  }
  void number(const Field& f, ReportFigure::Kind kind, std::string text, double v) {
    field(f, {kind, std::move(text), v});
  }
  void enter(const std::string& path) {
    seen(path);
    frames_.push_back({path, ""});
  }

  bool lists_;
  std::vector<Frame> frames_;
};

// The figures outside lists.
class FigureCollector final : public PathWalker {
 public:
  FigureCollector() : PathWalker(false) {}
  std::map<std::string, ReportFigure> figures;

 private:
  void field(const Field& f, ReportFigure figure) override { figures[path_of(f)] = std::move(figure); }
  void seen(const std::string&) override {}
};

// Every path, once, in order.
class PathCollector final : public PathWalker {
 public:
  PathCollector() : PathWalker(true) {}
  std::vector<std::string> paths;

 private:
  void field(const Field& f, ReportFigure) override { seen(path_of(f)); }
  void seen(const std::string& path) override {
    if (!path.empty() && known_.insert(path).second) paths.push_back(path);
  }
  std::set<std::string> known_;
};

}  // namespace

std::map<std::string, ReportFigure> report_figures(const Report& r) {
  FigureCollector c;
  const_cast<Report&>(r).visit(c);  // the collector only reads
  return std::move(c.figures);
}

std::vector<std::string> field_paths(const Report& r) {
  PathCollector c;
  const_cast<Report&>(r).visit(c);  // the collector only reads
  return std::move(c.paths);
}

}  // namespace npusim::traces
