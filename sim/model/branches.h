#pragma once
// A data-dependent If in a timing run (a cascade that runs its second stage only when a score passes a
// threshold): at run time the host picks the branch the data takes, so the model's latency depends on the
// data. Each path is compiled and simulated on its own (compiler::passes::take_branch), the report lists
// both paths of every such If, and the run's program is the path --branch chooses: the longer by default.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "sim/model/model.h"
#include "traces/report.h"
#include "traces/report_visitor.h"

namespace npusim::sim {

enum class BranchChoice { kLongest, kThen, kElse };
inline constexpr std::string_view kBranchChoiceNames[] = {"longest", "then", "else"};
// "longest", "then", "else": the choice, or nullopt for any other text.
std::optional<BranchChoice> parse_branch_choice(std::string_view text);

// What a timing run does at a data-dependent If (--branch).
struct BranchRequest {
  BranchChoice choice = BranchChoice::kLongest;
};

// The report's `branches` section (docs/compiler.md, "Control flow"), field by field.
struct BranchSection {
  size_t choice = 0;  // index in kBranchChoiceNames
  struct If {
    std::string name;
    // The whole model's cycles with this If taking each branch: the Ifs before it on the branches taken,
    // the ones after it (inside the branch or later in the graph) on the host.
    uint64_t then_cycles = 0, else_cycles = 0;
    bool then_taken = false;
  };
  std::vector<If> ifs;                    // in the order they were decided
  std::vector<std::string> left_on_host;  // Ifs past kMaxBranchIfs: they stay one host call each
  void visit(traces::ReportVisitor& v);
};

// At most this many Ifs are decided per run (each costs two compiles and simulations).
inline constexpr size_t kMaxBranchIfs = 16;

struct BranchStudy {
  CompiledModel chosen;          // the path taken: the rest of the report shows it
  traces::Report chosen_report;  // its timing-only simulation (the report reuses it)
  BranchSection section;
  std::string text;  // the summary's lines
};

// Compiles a graph (the CLI maps its errors to exit codes) and simulates a program, timing only.
using GraphCompiler = std::function<CompiledModel(compiler::Graph imported)>;
using ProgramTimer = std::function<traces::Report(const isa::Program& program)>;

// nullopt when `whole` (compiled with its Ifs on the host) has no data-dependent If. Otherwise each If,
// in graph order (nested ones once their enclosing branch is taken), gets both branches compiled and
// simulated, and the chosen one is kept for the Ifs after it.
std::optional<BranchStudy> study_branches(const CompiledModel& whole, const BranchRequest& request,
                                          const GraphCompiler& compile, const ProgramTimer& simulate);

}  // namespace npusim::sim
