// docs/report.md names every field the report's declaration (traces::Report::visit) has: the field
// tables under "## Fields" are checked against the declaration itself, walked over a report with every
// optional field set (tests/sim/rich_report.h). The naming rules are tests/e2e/check_report_docs.py's,
// which checks the same page against reports npusim writes (the sections of stages outside the simulator
// included).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/sim/rich_report.h"
#include "traces/report_paths.h"

namespace npusim::traces {
namespace {

std::string read_docs() {
  std::ifstream in(std::string(NPUSIM_SOURCE_DIR) + "/docs/report.md");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The backticked names in the first column of the tables under "## Fields": `a.{b,c}` is both, a bare
// name after a dotted one in the same cell takes the first one's parent.
std::set<std::string> documented_names(const std::string& md) {
  std::set<std::string> names;
  bool in_fields = false;
  std::istringstream lines(md);
  const std::regex ticked("`([^`]+)`"), braces("(.*)\\{([^}]*)\\}(.*)");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("## ", 0) == 0) {
      in_fields = line == "## Fields";
      continue;
    }
    if (!in_fields || line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    std::string parent;
    size_t i = 0;
    for (std::sregex_iterator it(cell.begin(), cell.end(), ticked), end; it != end; ++it, ++i) {
      const std::string raw = (*it)[1];
      std::vector<std::string> expanded;
      std::smatch m;
      if (std::regex_match(raw, m, braces)) {
        std::istringstream alternatives(m[2].str());
        for (std::string x; std::getline(alternatives, x, ',');) {
          x.erase(0, x.find_first_not_of(' '));
          x.erase(x.find_last_not_of(' ') + 1);
          expanded.push_back(m[1].str() + x + m[3].str());
        }
      } else {
        expanded.push_back(raw);
      }
      for (std::string name : expanded) {
        if (i > 0 && name.find('.') == std::string::npos && name.find('[') == std::string::npos &&
            !parent.empty())
          name = parent + name;
        names.insert(name);
      }
      if (i == 0) {
        const std::string& first = expanded[0];
        const size_t dot = first.rfind('.'), list = first.rfind("[]");
        long cut = dot == std::string::npos ? -1 : static_cast<long>(dot);
        if (list != std::string::npos) cut = std::max(cut, static_cast<long>(list) + 1);
        parent = cut >= 0 ? first.substr(0, static_cast<size_t>(cut) + 1) : "";
      }
    }
  }
  return names;
}

std::optional<std::string> parent_of(const std::string& path) {
  const size_t dot = path.rfind('.'), list = path.rfind("[]");
  if (dot == std::string::npos && list == std::string::npos) return std::nullopt;
  if (list == std::string::npos || (dot != std::string::npos && dot > list)) return path.substr(0, dot);
  return path.substr(0, list);
}

bool has_members(const std::string& p, const std::set<std::string>& names) {
  for (const std::string& n : names)
    if (n.rfind(p + ".", 0) == 0 || n.rfind(p + "[]", 0) == 0) return true;
  return false;
}

// Documented: named itself, below a name documented as a whole, or a container whose members are named.
bool documented(const std::string& path, const std::set<std::string>& names) {
  if (names.count(path) || has_members(path, names)) return true;
  for (std::optional<std::string> p = parent_of(path); p; p = parent_of(*p)) {
    if (names.count(*p)) return !has_members(*p, names);
  }
  return false;
}

// rich_report with what the compiler adds to a layer: its mapping, on-chip residency and fusion group.
Report compiled_report() {
  Report r = test::rich_report();
  r.layers[0].mapping.emplace();
  r.layers[0].on_chip_input = "x";
  r.layers[0].fusion_group = "conv_pool:/conv1/Conv";
  return r;
}

TEST(ReportDocs, EveryDeclaredFieldIsDocumented) {
  const std::set<std::string> names = documented_names(read_docs());
  ASSERT_GT(names.size(), 50u) << "docs/report.md's field tables were not found";
  const std::vector<std::string> paths = field_paths(compiled_report());
  ASSERT_GT(paths.size(), 100u);
  for (const std::string& path : paths)
    EXPECT_TRUE(documented(path, names)) << path << " is not in docs/report.md";
}

// The walk the docs check relies on sees the optional fields, the lists' elements and the maps' keys.
TEST(ReportDocs, TheDeclarationWalksListsMapsAndDerivedFigures) {
  const std::vector<std::string> paths = field_paths(compiled_report());
  const std::set<std::string> have(paths.begin(), paths.end());
  for (const char* p : {"total_cycles",
                        "precision.plan",
                        "precision.layers",
                        "unfused_bound_ratio",
                        "compiled_efficiency",
                        "array.macs_per_pe_per_cycle.fp16",
                        "units.<name>.stalls.queue_full",
                        "layers[].display_name",
                        "layers[].energy.by_component_mj.static",
                        "layers[].efficiency",
                        "layers[].compiled_bound_cycles",
                        "layers[].fusion_saved_cycles",
                        "ops[].bound_cycles",
                        "model_limit_cycles",
                        "model_efficiency",
                        "model_limit.dram_cycles",
                        "model_limit.bound_by",
                        "layers[].limit_cycles",
                        "layers[].mapping.sram_bytes.accumulator",
                        "layers[].on_chip_inputs",
                        "layers[].fusion_group",
                        "run.sets[]",
                        "run.parameters.dram.model",
                        "sim.functional"})
    EXPECT_TRUE(have.count(p)) << p;
}

// A field the page does not name fails the check: the rule is not vacuous.
TEST(ReportDocs, AFieldTheDocsDoNotNameIsCaught) {
  const std::set<std::string> names = documented_names(read_docs());
  EXPECT_FALSE(documented("dram.row_conflicts", names));
  EXPECT_FALSE(documented("layers[].cycles_saved", names));
  EXPECT_TRUE(documented("units.<name>.busy", names));
  EXPECT_TRUE(documented("run.parameters.dram.model", names));  // run.parameters is documented as a whole
}

}  // namespace
}  // namespace npusim::traces
