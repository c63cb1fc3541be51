// npusim diff: the command line of the report comparison (sim/cli/diff.h).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "sim/cli/commands/commands.h"
#include "sim/cli/diff.h"
#include "sim/cli/options/common.h"
#include "sim/cli/simulate.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

int cmd_diff(Context& ctx, const Command& cmd) {
  std::vector<std::string> files;
  std::string top = CommonOptions{}.top;
  po::options_description d("Options");
  d.add_options()("reports", po::value(&files)->value_name("A.json B.json"),
                  "two reports (npusim run --report)")(
      "top", po::value(&top)->value_name("N|all"),
      fmt::format("layers that changed most to list (default {})", top).c_str());
  po::positional_options_description pos;
  pos.add("reports", 2);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (files.size() != 2)
    throw UsageError("diff needs two reports, A.json and B.json (see 'npusim diff --help')");
  try {
    ctx.out << diff_reports(files[0], files[1], top_layers(top));
  } catch (const ReportReadError& e) {
    throw InputError(e.what());
  }
  return kExitOk;
}

}  // namespace npusim::sim::cli
