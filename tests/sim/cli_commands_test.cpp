// The command table (sim/cli/commands/table.cpp) is the only list of commands: the top-level help lists
// exactly its entries, each name reaches its own handler (its own --help), and a name not in it is a
// usage error.
#include <gtest/gtest.h>

#include <systemc>  // declares sc_main, which runs the tests

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/cli.h"
#include "sim/cli/command.h"

namespace npusim::sim {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result npusim(std::vector<std::string> args) {
  args.insert(args.begin(), "npusim");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

// The command names `npusim --help` lists: the first word of each line under "commands:".
std::vector<std::string> listed_commands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream in(help.substr(help.find("commands:\n") + 10));
  for (std::string line; std::getline(in, line) && line.rfind("  ", 0) == 0;) {
    names.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  return names;
}

TEST(CliCommands, TopLevelHelpListsExactlyTheCommandTable) {
  const Result r = npusim({"--help"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  std::vector<std::string> table;
  for (const cli::Command& c : cli::commands()) table.emplace_back(c.name);
  EXPECT_EQ(listed_commands(r.out), table);
  // The commands every workflow in docs/ starts from.
  for (const char* c : {"run", "compile", "exec", "asm", "disasm", "ops", "config", "diff", "report", "serve",
                        "sweep"}) {
    EXPECT_NE(std::find(table.begin(), table.end(), c), table.end()) << c;
  }
}

TEST(CliCommands, EachCommandOfTheTableAnswersItsOwnHelp) {
  for (const cli::Command& c : cli::commands()) {
    const std::string name(c.name);
    const Result r = npusim({name, "--help"});
    EXPECT_EQ(r.code, kExitOk) << name << ": " << r.err;
    EXPECT_NE(r.out.find("usage: npusim " + name), std::string::npos) << name << ": " << r.out;
    EXPECT_EQ(r.err, "") << name;
  }
}

TEST(CliCommands, EachCommandReachesItsOwnHandler) {
  // An option only one command has is accepted by that command's --help parse and rejected by the others.
  struct Own {
    const char* command;
    const char* option;
  };
  for (const Own& own : {Own{"run", "--precision=int8"}, Own{"compile", "--asm=x.s"}, Own{"config", "--dump"},
                         Own{"serve", "--scenario=x.yaml"}, Own{"sweep", "--dry-run"}}) {
    for (const cli::Command& c : cli::commands()) {
      const std::string name(c.name);
      const Result r = npusim({name, own.option, "--help"});
      if (name == own.command) {
        EXPECT_EQ(r.code, kExitOk) << name << " " << own.option << ": " << r.err;
      } else if (!(name == "compile" && std::string(own.option) == "--precision=int8")) {
        EXPECT_EQ(r.code, kExitUsage) << name << " " << own.option;
      }
    }
  }
}

TEST(CliCommands, ANameNotInTheTableIsAUsageError) {
  const Result r = npusim({"simulate"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "npusim: error: unknown command 'simulate' (see 'npusim --help')\n");
}

}  // namespace
}  // namespace npusim::sim

int sc_main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
