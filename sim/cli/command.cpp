#include "sim/cli/command.h"

#include <fmt/format.h>

#include <ostream>

#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

bool parse(Context& ctx, const Command& cmd, po::options_description desc,
           const po::positional_options_description& pos, Options* options) {
  if (!cmd.groups.empty() && !options)
    throw std::logic_error(fmt::format("npusim {}: its option groups need their Options", cmd.name));
  bool help = false;
  desc.add_options()("help,h", po::bool_switch(&help), "show this help");
  for (const OptionGroup group : cmd.groups) desc.add(group(*options));
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(ctx.args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(fmt::format("{} (see 'npusim {} --help')", e.what(), cmd.name));
  }
  if (help) {
    ctx.out << "usage: npusim " << cmd.synopsis << "\n\n" << cmd.summary << "\n\n" << desc << "\n";
    return false;
  }
  return true;
}

}  // namespace npusim::sim::cli
