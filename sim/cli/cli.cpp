#include "sim/cli/cli.h"

#include <fmt/format.h>

#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "sim/cli/command.h"
#include "sim/config/config_loader.h"
#include "sim/config/yaml_errors.h"
#include "sim/version/version.h"

namespace npusim::sim {
namespace {

using cli::Command;
using cli::commands;
using cli::Context;
using cli::InputError;
using cli::RunError;
using cli::UsageError;

void print_usage(std::ostream& out) {
  out << "usage: npusim COMMAND [options]   (npusim COMMAND --help for its options)\n\n"
         "A cycle-level NPU simulator and the compiler that maps ONNX models onto it.\n\ncommands:\n";
  for (const Command& c : commands()) out << fmt::format("  {:<8} {}\n", c.name, c.summary);
  out << "\nexit codes: 0 success, 1 compile or simulation error, 2 usage or configuration error\n";
}

// The command line as a shell would take it back: arguments with spaces or quotes single-quoted.
std::string command_line(int argc, const char* const* argv) {
  std::string s = "npusim";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>(){}[]!#~") == std::string::npos;
    s += " ";
    if (plain) {
      s += a;
    } else {
      s += "'";
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += "'";
    }
  }
  return s;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  if (argc < 2) {
    print_usage(err);
    return kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(out);
    return kExitOk;
  }
  if (name == "--version") {
    out << "npusim " << npusim_version() << "\n";
    return kExitOk;
  }
  Context ctx{std::vector<std::string>(argv + 2, argv + argc), out, err, command_line(argc, argv), {}};
  for (const Command& cmd : commands()) {
    if (cmd.name != name) continue;
    try {
      return cmd.handler(ctx, cmd);
    } catch (const ConfigError& e) {
      for (const std::string& m : e.messages()) err << "npusim: error: " << m << "\n";
      return kExitUsage;
    } catch (const YamlFileError& e) {  // pipeline and scenario files
      for (const std::string& m : e.messages()) err << "npusim: error: " << m << "\n";
      return kExitUsage;
    } catch (const UsageError& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitUsage;
    } catch (const InputError& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitUsage;
    } catch (const RunError& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitFailure;
    } catch (const std::bad_alloc&) {
      // The last resort: the estimates before large allocations (compiler/ir/memory_budget.h) missed one.
      err << "npusim: error: out of memory: an allocation failed after the model's estimated needs were "
             "checked; try a smaller model or --memory-limit-gb to fail earlier with the estimate\n";
      return kExitFailure;
    } catch (const std::exception& e) {
      err << "npusim: error: " << e.what() << "\n";
      return kExitFailure;
    }
  }
  err << fmt::format("npusim: error: unknown command '{}' (see 'npusim --help')\n", name);
  return kExitUsage;
}

}  // namespace npusim::sim
