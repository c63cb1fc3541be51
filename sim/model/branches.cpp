#include "sim/model/branches.h"

#include <fmt/format.h>

#include <utility>

#include "compiler/passes/passes.h"

namespace npusim::sim {

std::optional<BranchChoice> parse_branch_choice(std::string_view text) {
  for (size_t k = 0; k < std::size(kBranchChoiceNames); ++k)
    if (text == kBranchChoiceNames[k]) return static_cast<BranchChoice>(k);
  return std::nullopt;
}

void BranchSection::visit(traces::ReportVisitor& v) {
  v.choice({"choice", "", "which branch the run takes at each data-dependent If (--branch)"}, choice,
           {kBranchChoiceNames[0], kBranchChoiceNames[1], kBranchChoiceNames[2]});
  v.list({"ifs", "", "each data-dependent If, in the order decided"}, ifs, [&](If& i, size_t) {
    v.object({"", "", "an If"}, [&] {
      v.text({"name", "", "the If node"}, i.name);
      v.integer({"then_cycles", "cycles", "the model's cycles with the If taking its then branch"},
                i.then_cycles);
      v.integer({"else_cycles", "cycles", "the model's cycles with the If taking its else branch"},
                i.else_cycles);
      v.boolean({"then_taken", "", "the run's program takes the then branch"}, i.then_taken);
    });
  });
  v.list({"left_on_host", "", "Ifs past the first 16: each runs on the host"}, left_on_host,
         [&](std::string& s, size_t) {
           v.text({"", "", "an If"}, s);
         });
}

std::optional<BranchStudy> study_branches(const CompiledModel& whole, const BranchRequest& request,
                                          const GraphCompiler& compile, const ProgramTimer& simulate) {
  namespace passes = compiler::passes;
  if (passes::data_dependent_ifs(whole.lowered).empty()) return std::nullopt;
  // The imported graph with the Ifs that fold inlined, so that the Ifs left carry the names the lowered
  // graph gives them (nested ones `<If>/<inner>`).
  compiler::Graph g = whole.imported;
  passes::fold_constants(g);
  BranchStudy s;
  s.section.choice = static_cast<size_t>(request.choice);
  std::optional<CompiledModel> current;
  std::optional<traces::Report> current_report;
  for (std::vector<std::string> ifs = passes::data_dependent_ifs(g); !ifs.empty();
       ifs = passes::data_dependent_ifs(g)) {
    if (s.section.ifs.size() == kMaxBranchIfs) {
      s.section.left_on_host = ifs;
      break;
    }
    BranchSection::If record;
    record.name = ifs.front();
    compiler::Graph paths[2] = {g, g};  // then, else
    std::optional<CompiledModel> models[2];
    std::optional<traces::Report> reports[2];
    for (int b = 0; b < 2; ++b) {
      passes::take_branch(paths[b], record.name, b == 0);
      models[b] = compile(paths[b]);
      reports[b] = simulate(models[b]->result.program);
    }
    record.then_cycles = reports[0]->total_cycles;
    record.else_cycles = reports[1]->total_cycles;
    record.then_taken = request.choice == BranchChoice::kThen || (request.choice == BranchChoice::kLongest &&
                                                                  record.then_cycles >= record.else_cycles);
    const int taken = record.then_taken ? 0 : 1;
    g = std::move(paths[taken]);
    current = std::move(models[taken]);
    current_report = std::move(reports[taken]);
    s.text += fmt::format(
        "data-dependent If '{}': then {} cycles, else {} cycles; this run takes {} (--branch {})\n",
        record.name, record.then_cycles, record.else_cycles, record.then_taken ? "then" : "else",
        kBranchChoiceNames[s.section.choice]);
    s.section.ifs.push_back(std::move(record));
  }
  if (!current) return std::nullopt;  // every If left the lowered graph before the imported one's folded
  s.chosen = std::move(*current);
  s.chosen_report = std::move(*current_report);
  return s;
}

}  // namespace npusim::sim
