#pragma once
// What every `npusim` command shares: the errors that map onto exit codes, the invocation a handler
// reads, the command table's entry, and the option parsing with --help.
#include <boost/program_options.hpp>
#include <future>
#include <iosfwd>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cli/cli.h"

namespace npusim::sim::cli {

// A mistake in how npusim was called (exit 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// An input file that cannot be read or understood (exit 2).
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A valid input that cannot be compiled or simulated (exit 1).
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One invocation of a command.
struct Context {
  std::vector<std::string> args;  // after the command name
  std::ostream& out;
  std::ostream& err;
  std::string command;  // the whole command line, for the report
  // The model files' SHA-256 for the report, each computed on a second thread from the moment the
  // command knows the path (start_model_hash): ResNet-50's 100 MB take about 0.3 s, which the compile
  // hides on a machine with two cores.
  std::map<std::string, std::shared_future<std::string>> model_hashes;
};

struct Command;
struct Options;
// An option group's heading in --help and its options.
struct GroupOptions {
  std::string heading;
  boost::program_options::options_description options;
};
// An option group (sim/cli/options/groups.h): declares its options, bound to its part of Options.
using OptionGroup = GroupOptions (*)(Options& o);
// A command's handler: parses ctx.args (parse() below) and returns the exit code, or throws one of the
// errors above (run_cli maps them onto exit codes).
using Handler = int (*)(Context& ctx, const Command& cmd);

// One entry of the command table (commands()).
struct Command {
  std::string_view name;
  std::string_view synopsis;
  std::string_view summary;
  std::vector<OptionGroup> groups;  // the option groups it takes, in the order its --help lists them
  std::string_view examples;        // --help's examples, one command line each ("" for none)
  Handler handler;
};

// The command table: every command npusim has, in the order `npusim --help` lists them. The only list
// of commands: help, dispatch and the tests walk it.
const std::vector<Command>& commands();

// Parses `ctx.args` against the command's own options `desc`, then its option groups bound to `*options`
// (which a command with groups must give), plus --help. Returns false when help was printed: the
// synopsis, summary, one line per option under its group's heading, the examples and a pointer to
// docs/cli.md, which describes every option at length.
bool parse(Context& ctx, const Command& cmd, boost::program_options::options_description desc,
           const boost::program_options::positional_options_description& pos, Options* options = nullptr);

}  // namespace npusim::sim::cli
