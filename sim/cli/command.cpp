#include "sim/cli/command.h"

#include <fmt/format.h>

#include <ostream>

#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

namespace {

// One line per option: its names and value, then its description.
void print_options(std::ostream& out, const std::string& heading, const po::options_description& d) {
  if (d.options().empty()) return;
  out << "\n" << heading << ":\n";
  for (const auto& o : d.options()) {
    std::string names = "--" + o->long_name();
    const std::string first = o->canonical_display_name(po::command_line_style::allow_dash_for_short);
    if (first.size() == 2 && first[0] == '-') names = first + ", " + names;  // -c, --config
    const std::string value = o->format_parameter();
    if (!value.empty()) names += " " + value;
    out << fmt::format("  {:<30} {}\n", names, o->description());
  }
}

}  // namespace

bool parse(Context& ctx, const Command& cmd, po::options_description desc,
           const po::positional_options_description& pos, Options* options) {
  if (!cmd.groups.empty() && !options)
    throw std::logic_error(fmt::format("npusim {}: its option groups need their Options", cmd.name));
  bool help = false;
  desc.add_options()("help,h", po::bool_switch(&help), "show this help");
  std::vector<GroupOptions> groups;
  for (const OptionGroup group : cmd.groups) groups.push_back(group(*options));
  po::options_description all;
  all.add(desc);
  for (const GroupOptions& g : groups) all.add(g.options);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(ctx.args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(fmt::format("{} (see 'npusim {} --help')", e.what(), cmd.name));
  }
  if (!help && options) check_input_paths(*options);
  if (help) {
    ctx.out << "usage: npusim " << cmd.synopsis << "\n\n" << cmd.summary << "\n";
    print_options(ctx.out, "Options", desc);
    for (const GroupOptions& g : groups) print_options(ctx.out, g.heading, g.options);
    if (!cmd.examples.empty()) ctx.out << "\nExamples:\n" << cmd.examples;
    ctx.out << fmt::format("\nEvery option at length: docs/cli.md, \"npusim {}\".\n", cmd.name);
    return false;
  }
  return true;
}

}  // namespace npusim::sim::cli
