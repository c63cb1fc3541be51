// The control-flow option group of `run`: which path a timing run takes at a data-dependent If
// (--branch; sim/model/branches.h).
#include <fmt/format.h>

#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

GroupOptions branch_options(Options& o) {
  po::options_description d;
  d.add_options()(
      "branch",
      po::value<std::string>()->value_name("longest|then|else")->notifier([&o](const std::string& text) {
        const std::optional<BranchChoice> c = parse_branch_choice(text);
        if (!c) throw UsageError(fmt::format("--branch '{}' is not one of longest, then, else", text));
        o.branch.choice = *c;
        o.branch_given = true;
      }),
      fmt::format("the path a timing run takes at a data-dependent If; the report gives both (default {})",
                  kBranchChoiceNames[static_cast<size_t>(BranchRequest{}.choice)])
          .c_str());
  return {"Control flow", d};
}

}  // namespace npusim::sim::cli
