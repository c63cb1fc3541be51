// The command table (sim/cli/commands/table.cpp) is the only list of commands: the top-level help lists
// exactly its entries, each name reaches its own handler (its own --help), and a name not in it is a
// usage error. docs/cli.md describes every option of every command and no other.
#include <gtest/gtest.h>

#include <systemc>  // declares sc_main, which runs the tests

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/accuracy_report.h"
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
  for (const char* c :
       {"run", "compile", "exec", "asm", "disasm", "ops", "config", "diff", "report", "serve", "sweep"}) {
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

// The long options a command's --help lists: the first --name on each option line ("  -c, --config ...",
// "  --top N|all ...", or boost's "  -j [ --jobs ] N ..." for sweep).
std::set<std::string> help_options(const std::string& help) {
  std::set<std::string> names;
  std::istringstream in(help);
  const std::regex option("--([a-z][a-z0-9-]*)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  -", 0) == 0 && std::regex_search(line, m, option)) names.insert(m[1]);
  }
  return names;
}

// Every --name docs/cli.md mentions.
std::set<std::string> doc_options(const std::string& text) {
  std::set<std::string> names;
  const std::regex option("(^|[^A-Za-z0-9-])--([a-z][a-z0-9-]*)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), option); it != std::sregex_iterator(); ++it)
    names.insert((*it)[2]);
  return names;
}

std::string read_doc(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(CliCommands, DocsDescribeEveryOptionOfEveryCommandAndNoOther) {
  const std::string doc = read_doc(std::string(NPUSIM_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_FALSE(doc.empty());
  const std::set<std::string> documented = doc_options(doc);
  std::set<std::string> all;
  for (const cli::Command& c : cli::commands()) {
    const std::string name(c.name);
    EXPECT_NE(doc.find("\n## npusim " + name + "\n"), std::string::npos) << "no section for " << name;
    const Result r = npusim({name, "--help"});
    const std::set<std::string> options = help_options(r.out);
    EXPECT_FALSE(options.empty()) << name;
    for (const std::string& o : options) {
      EXPECT_TRUE(documented.count(o)) << "npusim " << name << " --" << o << " is not in docs/cli.md";
      all.insert(o);
    }
  }
  for (const std::string& o : documented)
    EXPECT_TRUE(all.count(o)) << "docs/cli.md names --" << o << ", which no command has";
}

TEST(CliCommands, RunHelpIsShortAndGrouped) {
  const Result r = npusim({"run", "--help"});
  // One line per option: no line of an option's description wraps onto the next.
  std::istringstream in(r.out);
  size_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines)
    EXPECT_FALSE(line.rfind("    ", 0) == 0) << "a wrapped line: " << line;
  EXPECT_LE(lines, 110u);
  for (const char* heading :
       {"Machine", "Model:", "Precision and quantization", "Accuracy", "Functional runs", "End to end",
        "Multi-core", "Dynamic shapes", "Outputs", "Examples:"})
    EXPECT_NE(r.out.find(std::string("\n") + heading), std::string::npos) << heading;
  EXPECT_NE(r.out.find("docs/cli.md"), std::string::npos);
  // sweep checks `run --help` for the options its axes need (sim/sweep/sweep_cli.cpp).
  for (const char* o : {"--precision", "--batch", "--generate", "--dynamic", "--requests", "--shape-policy"})
    EXPECT_NE(r.out.find(o), std::string::npos) << o;
}

// The advice is "met by the plan as it is" only when it moves no layer: one that met the target by moving
// layers to int16 alone says how many (it once said that no layer needed fp16 and stopped there).
TEST(AdviceAnswer, SaysMetByThePlanOnlyWhenNoLayerMovesToInt16OrFp16) {
  compiler::quant::MixedPrecisionAdvice adv;
  adv.target_sqnr_db = 30, adv.met = true, adv.achieved_sqnr_db = 31, adv.cost = 200, adv.cost_int8 = 180;
  EXPECT_NE(cli::advice_answer(adv).find("met by the plan as it is"), std::string::npos);
  adv.int16_layers = {"conv1", "conv2"};
  adv.overrides = "conv1=int16,conv2=int16";
  const std::string a = cli::advice_answer(adv);
  EXPECT_EQ(a.find("met by the plan as it is"), std::string::npos) << a;
  EXPECT_NE(a.find("met, 31.00 dB with 2 layer(s) in int16 and 0 in fp16"), std::string::npos) << a;
  EXPECT_NE(a.find("--precision-override 'conv1=int16,conv2=int16'"), std::string::npos) << a;
}

}  // namespace
}  // namespace npusim::sim

int sc_main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
