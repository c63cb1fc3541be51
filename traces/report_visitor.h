#pragma once
// The one mechanism through which every field of the run report is declared: traces::Report and its
// sections have a visit(ReportVisitor&) that lists their fields in JSON order with key, unit and
// description, as the configuration's visit() does (isa/machine/visitor.h). The JSON writer
// (traces::report_json), the typed reader (sim::read_report), the figures `npusim diff` and the sweep
// columns take (traces::report_figures) and the docs check (tests/traces/report_docs_test.cpp) all walk it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "isa/json_text.h"
#include "traces/report.h"

namespace npusim::traces {

// What a report field is, for users: its JSON key, unit and one-line description (docs/report.md says
// more). An empty key is an element of a list.
struct Field {
  std::string_view key;
  std::string_view unit;  // "" for dimensionless or text
  std::string_view description;
  // Reals: fixed notation with this many digits after the point; -1: the shortest round-trip form.
  int decimals = -1;
};

// A real field's value as the JSON writer writes it.
inline JsonWriter& write_real(JsonWriter& w, const Field& f, double v) {
  return f.decimals >= 0 ? w.fixed(v, f.decimals) : w.value(v);
}

// Walks the fields of a report. A writer reads the fields; the reader fills them (fills() is true) and
// skips the derived ones, which the report's functions compute again (precision_figures, op_rollup, ...).
class ReportVisitor {
 public:
  using Layout = JsonWriter::Layout;
  virtual ~ReportVisitor() = default;

  // True when the visitor fills the report it walks (the reader): a visit() then sizes lists and sets
  // the names a map's keys carry, and computes no derived figure.
  virtual bool fills() const { return false; }

  // Stored fields.
  virtual void integer(const Field& f, uint64_t& v) = 0;
  virtual void integer(const Field& f, int64_t& v) = 0;
  virtual void real(const Field& f, double& v) = 0;
  virtual void boolean(const Field& f, bool& v) = 0;
  virtual void text(const Field& f, std::string& v) = 0;
  // Absent from the JSON when none.
  virtual void integer(const Field& f, std::optional<uint64_t>& v) = 0;
  // One of `names`, written as the name; `index` is its position.
  virtual void choice(const Field& f, size_t& index, const std::vector<std::string_view>& names) = 0;
  // A configuration parameter's canonical text: a JSON number or boolean when it reads as one, else a
  // string.
  virtual void parameter(const Field& f, std::string& v) = 0;
  // JSON text a stage outside the simulator wrote: a section's value, or (empty key) members added to
  // the current object.
  virtual void json(const Field& f, std::string& text) = 0;

  // Figures computed from the stored fields: written and looked up, never read back.
  virtual void derived(const Field& f, uint64_t v) = 0;
  virtual void derived(const Field& f, double v) = 0;
  virtual void derived(const Field& f, std::string_view v) = 0;
  // A field that has no value in this report, written as null (a setting that does not apply).
  virtual void null(const Field& f) = 0;

  // Containers. Each begin_* is closed by end().
  // An object that is there when `present` (a writer's view); returns whether to visit its members (a
  // reader: whether the JSON has it).
  virtual bool begin_object(const Field& f, bool present, Layout layout) = 0;
  // A list of `n` elements (a writer's view); returns how many to visit. Before each, element(i).
  virtual size_t begin_list(const Field& f, size_t n, Layout layout) = 0;
  virtual void element(size_t i) = 0;
  // An object whose keys are data (unit names, precisions, parameter keys): `keys` is a writer's view;
  // returns the keys to visit. `placeholder` names any key in the docs ("<name>"); empty: the docs name
  // the keys themselves, or the map as a whole.
  virtual std::vector<std::string> begin_map(const Field& f, std::vector<std::string> keys, Layout layout,
                                             std::string_view placeholder) = 0;
  virtual void end() = 0;
  // The next member continues the current line of a kLines object (the writer's layout; others ignore it).
  virtual void same_line() {}

  // An object; `body()` visits its members.
  template <class F>
  void object(const Field& f, F&& body, Layout layout = Layout::kInline, bool present = true) {
    if (!begin_object(f, present, layout)) return;
    body();
    end();
  }
  // An optional object: present when `o` is; the reader creates it when the JSON has it.
  template <class T, class F>
  void optional_object(const Field& f, std::optional<T>& o, F&& body, Layout layout = Layout::kInline) {
    if (!begin_object(f, o.has_value(), layout)) return;
    if (!o) o.emplace();
    body(*o);
    end();
  }
  // A list of `items`; `each(item, i)` visits element i (after element(i)).
  template <class T, class F>
  void list(const Field& f, std::vector<T>& items, F&& each, Layout layout = Layout::kInline) {
    const size_t n = begin_list(f, items.size(), layout);
    if (fills()) items.resize(n);
    for (size_t i = 0; i < n && i < items.size(); ++i) {
      element(i);
      each(items[i], i);
    }
    end();
  }
};

template <class T>
void TypedSection<T>::visit(ReportVisitor& v) {
  v.object({key_, "", "a section a stage outside the simulator adds"}, [&] { value_.visit(v); });
}

// A section of the report that a stage outside the simulator declares (`e2e`, `multicore`, ...) as the
// JSON writer writes it: `members` visits the section's fields; the text is the section's value (an
// object laid out as `layout`).
std::string section_json(const std::function<void(ReportVisitor&)>& members,
                         ReportVisitor::Layout layout = ReportVisitor::Layout::kInline);

}  // namespace npusim::traces
