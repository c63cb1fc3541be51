// End-to-end tests of the npusim command line, run as a user would run it.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "isa/isa.h"
#include "isa/machine/config.h"
#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kSource = NPUSIM_SOURCE_DIR;

// Every dotted parameter key, collected from the one declaration (NpuConfig::visit).
class KeyCollector : public isa::Visitor {
 public:
  std::vector<std::string> keys;
  void group(std::string_view key, std::string_view, const std::function<void()>& body) override {
    path_.push_back(std::string(key));
    body();
    path_.pop_back();
  }
  void integer(const isa::Param& p, int64_t&, int64_t, int64_t) override { add(p); }
  void real(const isa::Param& p, double&, double, double) override { add(p); }
  void boolean(const isa::Param& p, bool&) override { add(p); }
  void choice(const isa::Param& p, int&, const std::vector<std::string_view>&) override { add(p); }

 private:
  void add(const isa::Param& p) {
    std::string k;
    for (const auto& s : path_) k += s + ".";
    keys.push_back(k + std::string(p.key));
  }
  std::vector<std::string> path_;
};

TEST(Cli, HelpListsEveryCommand) {
  const CommandResult r = npusim({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* c : {"run", "compile", "exec", "asm", "disasm", "ops", "config"}) {
    EXPECT_NE(r.out.find(std::string("  ") + c), std::string::npos) << c;
  }
}

TEST(Cli, EveryCommandHasItsOwnHelp) {
  for (const char* c : {"run", "compile", "exec", "asm", "disasm", "ops", "config"}) {
    const CommandResult r = npusim({c, "--help"});
    EXPECT_EQ(r.exit_code, 0) << c << ": " << r.err;
    EXPECT_NE(r.out.find(std::string("usage: npusim ") + c), std::string::npos) << c;
  }
}

TEST(Cli, UnknownCommandOrOptionIsAUsageError) {
  CommandResult r = npusim({"simulate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'simulate'"), std::string::npos) << r.err;
  r = npusim({"run", "--no-such-option"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-option"), std::string::npos) << r.err;
  r = npusim({});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Cli, ConfigDumpListsEveryParameterWithItsDescription) {
  const CommandResult r = npusim({"config", "--dump"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  isa::NpuConfig config;
  KeyCollector keys;
  config.visit(keys);
  ASSERT_GT(keys.keys.size(), 40u);
  for (const std::string& k : keys.keys) EXPECT_NE(r.out.find(k), std::string::npos) << k;
  EXPECT_NE(r.out.find("rows of the MAC array"), std::string::npos);
}

TEST(Cli, ResolvedConfigReadsBackAsTheSameConfig) {
  const std::string dir = temp_dir("config");
  // tpu-v1 chains its instructions, an os array cannot: the preset's chained_instructions is inert under
  // the later --set and reads as its default, as the dump writes it.
  CommandResult r = npusim({"config", "--config", "tpu-v1", "--set", "systolic_array.dataflow=os"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  write_file(dir + "/resolved.yaml", r.out);
  const CommandResult again = npusim({"config", "--config", dir + "/resolved.yaml"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, r.out);
}

TEST(Cli, MisspelledKeyNamesTheKeyTheFileTheLineAndSuggestsTheRightOne) {
  const std::string dir = temp_dir("badkey");
  write_file(dir + "/bad.yaml", "systolic_array:\n  rowz: 8\n");
  const CommandResult r = npusim({"config", "--config", dir + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("systolic_array.rowz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bad.yaml:2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'rows'"), std::string::npos) << r.err;
}

TEST(Cli, OutOfRangeSetNamesTheAllowedRange) {
  const CommandResult r = npusim({"config", "--set", "systolic_array.rows=0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("systolic_array.rows"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1..4096"), std::string::npos) << r.err;
}

TEST(Cli, AsmThenDisasmRoundTripsAProgramUsingEveryOpcode) {
  const std::string dir = temp_dir("roundtrip");
  const std::string src = kSource + "/tests/programs/all_opcodes.s";
  CommandResult r = npusim({"asm", src, "-o", dir + "/a.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = npusim({"disasm", dir + "/a.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = r.out;
  for (const isa::Format& f : isa::kFormats) {
    EXPECT_TRUE(std::regex_search(text, std::regex("(^|\\n)" + std::string(f.mnemonic) + "\\b")))
        << f.mnemonic;
  }
  write_file(dir + "/b.s", text);
  r = npusim({"asm", dir + "/b.s", "-o", dir + "/b.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(dir + "/a.npu"), read_file(dir + "/b.npu"));
  r = npusim({"disasm", dir + "/b.npu"});
  EXPECT_EQ(r.out, text);
}

TEST(Cli, AssemblyErrorsNameTheLine) {
  const std::string dir = temp_dir("asmerr");
  write_file(dir + "/bad.s", "# a comment\nNOP\nMATMULL m=1\n");
  const CommandResult r = npusim({"asm", dir + "/bad.s", "-o", dir + "/bad.npu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.s:3"), std::string::npos) << r.err;
}

TEST(Cli, RandomAndTruncatedProgramFilesExitWithAMessageNeverASignal) {
  const std::string dir = temp_dir("fuzz");
  CommandResult r = npusim({"asm", kSource + "/tests/programs/all_opcodes.s", "-o", dir + "/good.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string good = read_file(dir + "/good.npu");
  std::mt19937 rng(7);
  std::vector<std::string> inputs = {""};
  for (int i = 1; i <= 6; ++i) {
    std::string s(i * 97, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    inputs.push_back(s);
  }
  for (size_t cut : {size_t{4}, size_t{8}, size_t{12}, size_t{20}, good.size() / 2, good.size() - 1}) {
    inputs.push_back(good.substr(0, cut));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string path = dir + "/in" + std::to_string(i) + ".npu";
    write_file(path, inputs[i]);
    for (const char* sub : {"disasm", "exec"}) {
      r = npusim({sub, path});
      EXPECT_EQ(r.signal, 0) << sub << " input " << i;
      EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << sub << " input " << i << " exit " << r.exit_code;
      EXPECT_FALSE(r.err.empty()) << sub << " input " << i;
    }
  }
}

TEST(Cli, DefaultRunPrintsAReportAndWritesItsJson) {
  const std::string dir = temp_dir("run");
  const CommandResult r =
      npusim({"run", "--report", dir + "/r.json", "--trace", dir + "/t.json", "--trace-csv", dir + "/t.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cycles"), std::string::npos);
  EXPECT_GT(std::stoll(json_eval(dir + "/r.json", "r['total_cycles']")), 0);
  EXPECT_EQ(json_eval(dir + "/r.json", "sum(r['breakdown'].values()) == r['total_cycles']"), "True");
  EXPECT_EQ(json_eval(dir + "/t.json", "len(r['traceEvents']) > 0"), "True");
  EXPECT_NE(read_file(dir + "/t.csv").find("\n"), std::string::npos);
}

// --no-fusion keeps every activation and bias a layer of its own: the demo CNN's conv-BN-ReLU layers
// become conv + ReLU pairs, so there are more layers and more cycles, the report says fusion was off,
// and the functional outputs stay the same.
TEST(Cli, NoFusionShowsWhatFusionBuys) {
  const std::string dir = temp_dir("no_fusion");
  const CommandResult a =
      npusim({"run", "-q", "--functional", "--report", dir + "/a.json", "--outputs", dir + "/a"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CommandResult b = npusim(
      {"run", "-q", "--functional", "--no-fusion", "--report", dir + "/b.json", "--outputs", dir + "/b"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(json_eval(dir + "/a.json", "r['compile']['fusion']"), "True");
  EXPECT_EQ(json_eval(dir + "/b.json", "r['compile']['fusion']"), "False");
  // Program layers: the fused run lists its fused nodes too, with no cycles of their own.
  const std::string program = "sum(l['placement'] != 'fused' for l in r['layers'])";
  const int64_t layers_a = std::stoll(json_eval(dir + "/a.json", program));
  const int64_t layers_b = std::stoll(json_eval(dir + "/b.json", program));
  EXPECT_GT(layers_b, layers_a);
  EXPECT_EQ(
      json_eval(dir + "/a.json", "any(l['placement'] == 'fused' and l['op'] == 'Relu' for l in r['layers'])"),
      "True");
  EXPECT_GT(std::stoll(json_eval(dir + "/b.json", "r['total_cycles']")),
            std::stoll(json_eval(dir + "/a.json", "r['total_cycles']")));
  EXPECT_EQ(json_eval(dir + "/b.json", "sum(l['op'] == 'Relu' for l in r['layers']) > 0"), "True");
  const CommandResult cmp =
      run_command({"/usr/bin/python3", "-c",
                   "import glob, os, sys, numpy as np\n"
                   "fs = sorted(glob.glob(sys.argv[1] + '/*.npy'))\n"
                   "assert fs\n"
                   "for f in fs:\n"
                   "    a, b = np.load(f), np.load(os.path.join(sys.argv[2], os.path.basename(f)))\n"
                   "    assert np.max(np.abs(a - b)) <= 1e-5 * max(1e-30, np.max(np.abs(a))), f\n",
                   dir + "/a", dir + "/b"});
  EXPECT_EQ(cmp.exit_code, 0) << cmp.err;
}

TEST(Cli, QuietRunPrintsNothing) {
  const CommandResult r = npusim({"run", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Cli, EveryPresetRunsTheDemo) {
  for (const auto& e : std::filesystem::directory_iterator(kSource + "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    const CommandResult r = npusim({"run", "-q", "--config", e.path().string()});
    EXPECT_EQ(r.exit_code, 0) << e.path() << ": " << r.err;
  }
}

TEST(Cli, ReadmeCommandsAreWhatCiRuns) {
  const std::string readme = read_file(kSource + "/README.md");
  const std::string ci = read_file(kSource + "/.ci/run");
  std::vector<std::string> commands;
  const std::regex block("```sh\\n([^\\n]*)\\n```");
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), block); it != std::sregex_iterator();
       ++it) {
    commands.push_back((*it)[1]);
  }
  // 1 try it (builds the npusim target only), 2 the test suite, 3 the slow tests, 4 the sanitizers.
  ASSERT_EQ(commands.size(), 4u) << "README must hold exactly four one-line ```sh blocks";
  EXPECT_NE(commands[0].find("--target npusim"), std::string::npos) << commands[0];
  EXPECT_NE(commands[1].find("ctest"), std::string::npos) << commands[1];
  EXPECT_NE(commands[1].find("-LE slow"), std::string::npos) << commands[1];
  EXPECT_NE(commands[2].find("-L slow"), std::string::npos) << commands[2];
  EXPECT_NE(commands[3].find("-DNPUSIM_SANITIZE=ON"), std::string::npos) << commands[3];
  // CI runs 2, 3 and 4 verbatim, in that order.
  std::size_t at = 0;
  for (int i = 1; i < 4; ++i) {
    const std::size_t found = ci.find("\n" + commands[i] + "\n", at);
    EXPECT_NE(found, std::string::npos)
        << "README command " << i + 1 << " is not in .ci/run after the one before: " << commands[i];
    if (found != std::string::npos) at = found + 1;
  }
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

TEST(Cli, BatchOutOfRangeOrOnAFixedShapeModelIsAUsageError) {
  CommandResult r = npusim({"run", "gemm:M=8,N=8,K=8", "--batch", "-3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--batch"), std::string::npos) << r.err;
  r = npusim({"run", "gemm:M=8,N=8,K=8", "--batch", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--batch do not apply"), std::string::npos) << r.err;
}

TEST(Cli, ADirectoryGivenAsModelOrProgramIsNamedAsADirectory) {
  const std::string dir = temp_dir("model_dir");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", dir}, {"compile", dir, "-o", dir + "/p.npu"}, {"exec", dir}}) {
    const CommandResult r = npusim(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_NE(r.err.find("'" + dir + "' is a directory, not a model or program file"), std::string::npos)
        << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("2 GB"), std::string::npos) << r.err;
  }
}

// A directory where a file is written, and a missing folder of functional inputs: one sentence, exit 2 (the
// latter was filesystem's own "directory iterator cannot open directory", exit 1).
TEST(Cli, AnOutputFileThatIsADirectoryOrInputsThatAreNoFolderAreOneSentence) {
  const std::string dir = temp_dir("output_dir");
  for (const char* option : {"--html", "--report", "--layers-csv"}) {
    const CommandResult r = npusim({"run", "demo", "-q", option, dir});
    EXPECT_EQ(r.exit_code, 2) << option;
    EXPECT_NE(r.err.find("cannot write '" + dir + "': it is a directory (name a file in it)"),
              std::string::npos)
        << option << ": " << r.err;
  }
  const CommandResult r = npusim({"run", "demo", "-q", "--functional", "--inputs", dir + "/none"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "npusim: error: --inputs " + dir +
                       "/none: no such folder (a folder of the model's inputs: NAME.npy, .pb or an image)\n");
}

// Every option that reads a file or a folder names itself when the path is missing or of the wrong kind
// (--preprocess and --precision-file named only the path; --precision-file on a directory was a raw
// "basic_filebuf::underflow" with exit 1, --mapping on a directory was read as an empty mapping, exit 0).
TEST(Cli, EveryInputFileOrFolderOptionNamesItselfWhenThePathIsMissingOrOfTheWrongKind) {
  const std::string dir = temp_dir("input_paths");
  const std::string file = dir + "/a.yaml";
  write_file(file, "{}\n");
  struct Case {
    std::vector<std::string> command;  // the option is appended with its path
    std::string option;
    bool folder;
  };
  const std::vector<Case> cases = {
      {{"run", "demo"}, "--preprocess", false},
      {{"run", "demo"}, "--precision-file", false},
      {{"compile", "demo"}, "--precision-file", false},
      {{"run", "demo"}, "--mapping", false},
      {{"compile", "demo"}, "--mapping", false},
      {{"run", "demo"}, "--pipeline", false},
      {{"run", "demo"}, "--requests", false},
      {{"run", "demo"}, "--labels", false},
      {{"run", "demo"}, "--keys", false},
      {{"serve"}, "--scenario", false},
      {{"calibrate", "-o", dir + "/c.yaml"}, "--measured", false},
      {{"run", "demo"}, "--calibration", true},
      {{"run", "demo"}, "--accuracy-inputs", true},
      {{"run", "demo"}, "--advise-inputs", true},
      {{"run", "demo"}, "--inputs", true},
  };
  for (const Case& c : cases) {
    const std::string missing = dir + "/missing" + (c.folder ? "" : ".yaml");
    // A missing path; a directory where a file belongs, a file where a folder belongs.
    for (const auto& [path, what] :
         {std::pair{missing, std::string(c.folder ? "no such folder" : "no such file")},
          std::pair{c.folder ? file : dir,
                    std::string(c.folder ? "not a folder" : "is a directory, not a file")}}) {
      std::vector<std::string> args = c.command;
      args.push_back(c.option);
      args.push_back(path);
      const CommandResult r = npusim(args);
      EXPECT_EQ(r.exit_code, 2) << c.option << " " << path << ": " << r.err;
      EXPECT_EQ(r.err.rfind("npusim: error: " + c.option + " " + path + ": " + what, 0), 0u)
          << c.option << " " << path << ": " << r.err;
    }
  }
}

// A folder of images without --preprocess is told at once, naming the option and an image (it was told by
// the sample reader, after a calibration of the synthetic inputs: 22 s for MobileNetV3-Small when loaded).
TEST(Cli, ImagesWithoutPreprocessAreToldBeforeAnythingRuns) {
  const std::string dir = temp_dir("images_no_pre");
  std::filesystem::create_directories(dir + "/imgs/cat");
  write_file(dir + "/imgs/cat/b.png", std::string("\x89PNG\r\n\x1a\n", 8) + std::string(32, '\0'));
  write_file(dir + "/imgs/a.npy", "not read");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--precision", "int8", "--calibration", dir + "/imgs"},
        std::vector<std::string>{"--precision", "int8", "--accuracy", "--accuracy-inputs", dir + "/imgs"},
        std::vector<std::string>{"--functional", "--inputs", dir + "/imgs"}}) {
    std::vector<std::string> args = {"run", "demo", "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = npusim(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(dir + "/imgs holds images (b.png): an image needs --preprocess FILE.yaml"),
              std::string::npos)
        << extra[extra.size() - 2] << ": " << r.err;
  }
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

// An int8 quantization option on a run that quantizes nothing would do nothing: exit 2 naming it.
TEST(Cli, Int8QuantizationOptionsOnARunWithoutInt8LayersAreUsageErrors) {
  CommandResult r = npusim({"run", "demo", "-q", "--precision", "fp16", "--calibration-method", "mse"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--calibration-method applies to int8 quantization, and this run quantizes no layer "
                       "(--precision fp16)"),
            std::string::npos)
      << r.err;
  r = npusim(
      {"run", "demo", "-q", "--precision", "fp32", "--weights", "per-tensor", "--empirical-bias-correction"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--weights, --empirical-bias-correction apply to int8 quantization"),
            std::string::npos)
      << r.err;
  r = npusim({"compile", "demo", "--precision", "fp16", "--no-bias-correction", "-o",
              temp_dir("int8_inert") + "/p.npu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-bias-correction applies to int8 quantization"), std::string::npos) << r.err;
  // --cle rewrites the float graph an fp32 run computes: it applies (quant_e2e_cle checks the function is
  // kept).
  EXPECT_EQ(npusim({"run", "demo", "-q", "--precision", "fp32", "--cle"}).exit_code, 0);
  // A pre-processing description nothing reads.
  r = npusim({"run", "demo", "-q", "--preprocess", std::string(NPUSIM_SOURCE_DIR) + "/tests/ocr/rec.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.err.find("--preprocess says how images become the model's input, but nothing in this run reads"),
      std::string::npos)
      << r.err;
  // The same options where something is int8 (the whole model, or one layer) run.
  EXPECT_EQ(npusim({"run", "demo", "-q", "--precision", "int8", "--calibration-method", "mse"}).exit_code, 0);
  r = npusim({"run", "demo", "-q", "--precision", "fp16", "--precision-override", "Conv=int8", "--weights",
              "per-tensor"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Cli, ACompiledProgramRunsOnLargerScratchpadsButNotOnSmallerOnesOrAnotherArray) {
  const std::string dir = temp_dir("machine");
  CommandResult r = npusim({"compile", "demo", "-o", dir + "/d.npu", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = npusim({"exec", dir + "/d.npu", "-q", "--set", "sram.input.size_kib=1024"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = npusim({"exec", dir + "/d.npu", "-q", "--set", "sram.input.size_kib=128"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sram.input.size_kib = 256"), std::string::npos) << r.err;
  r = npusim({"exec", dir + "/d.npu", "-q", "--set", "systolic_array.rows=16"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("systolic_array.rows"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

TEST(Cli, ReportCarriesEachLayersRooflineBoundAndEfficiencyAndTheModelsInJsonAndSummary) {
  const std::string dir = temp_dir("roofline");
  const std::string report = dir + "/r.json";
  // fp32: the DRAM bytes fusion saved below are 4-byte values.
  const CommandResult r = npusim({"run", "demo", "--precision", "fp32", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Every NPU layer and every node fused into one has a bound; host layers have none. A layer's
  // efficiency is its own compiled work's bound over its cycles, a true fraction even where fusion
  // happens (conv1 runs bn1 and relu1: the nodes' bounds over its cycles were 235%); what fusion
  // saved is its own field, the bounds of the nodes listed right after it as fused into it.
  EXPECT_EQ(
      json_eval(report, "all(('bound_cycles' in l) == (l['placement'] != 'host') for l in r['layers'])"),
      "True");
  EXPECT_EQ(json_eval(report,
                      "sorted(l['name'] for l in r['layers'] if l['placement'] == 'fused') == "
                      "['bn1', 'bn2', 'bn3', 'relu1', 'relu2', 'relu3']"),
            "True");
  EXPECT_EQ(json_eval(report,
                      "all(abs(l['efficiency'] - l['compiled_bound_cycles'] / l['cycles']) < 1e-9 "
                      "for l in r['layers'] if l['cycles'] > 0 and 'bound_cycles' in l)"),
            "True");
  EXPECT_EQ(json_eval(report, "[l['name'] for l in r['layers'] if l.get('efficiency', 0) > 1]"), "[]");
  EXPECT_EQ(json_eval(report,
                      "all(l['fusion_saved_cycles'] == sum(f['bound_cycles'] for f in "
                      "r['layers'] if f.get('fused_into') == l['name']) "
                      "for l in r['layers'] if l['cycles'] > 0 and 'bound_cycles' in l)"),
            "True");
  EXPECT_EQ(json_eval(report, "[l['fusion_saved_cycles'] > 0 for l in r['layers'] if l['name'] == 'conv1']"),
            "[True]");
  // The program's roof: its layers' work with the units overlapping, between the largest layer's roof
  // and their sum, never above the run's cycles.
  EXPECT_EQ(
      json_eval(report,
                "max(l.get('compiled_bound_cycles', 0) for l in r['layers']) <= r['compiled_bound_cycles'] "
                "<= sum(l.get('compiled_bound_cycles', 0) for l in r['layers'])"),
      "True");
  EXPECT_EQ(json_eval(report, "0 < r['compiled_efficiency'] <= 1"), "True");
  EXPECT_EQ(json_eval(report,
                      "all('efficiency' not in l and l['cycles'] == 0 for l in r['layers'] "
                      "if l['placement'] == 'fused')"),
            "True");
  // What fusion kept out of DRAM: each fused node's inputs the program no longer has (the conv's
  // output feeds the folded BN, the BN's the ReLU), written once and read once in a layer-by-layer
  // program, in the layer's precision (fp32 here).
  EXPECT_EQ(
      json_eval(report,
                "[(l['name'], l['on_chip_inputs']) for l in r['layers'] if l['name'] in ('bn1', 'relu1')]"),
      "[('bn1', ['conv1.out']), ('relu1', ['bn1.out'])]");
  EXPECT_EQ(json_eval(report,
                      "[l['dram_bytes_saved'] for l in r['layers'] if l['name'] == 'bn1'] == "
                      "[4 * 2 * 16 * 32 * 32]"),
            "True");
  EXPECT_EQ(json_eval(report,
                      "r['fusion'] == {'fused_nodes': 6, 'tensors_on_chip': 6, 'dram_bytes_saved': "
                      "sum(l['dram_bytes_saved'] for l in r['layers'] if l['placement'] == 'fused')}"),
            "True");
  EXPECT_NE(r.out.find("fusion            6 nodes fused into their layers: 6 tensors never in DRAM"),
            std::string::npos)
      << r.out;
  // The program as compiled: each layer's own tensors after fusion, a lower roof.
  EXPECT_EQ(json_eval(report, "0 < r['compiled_bound_cycles'] < r['bound_cycles']"), "True");
  EXPECT_EQ(json_eval(report, "any(l['bound_cycles'] > 0 for l in r['layers'])"), "True");
  // The model: the sum of the layers' bounds over total_cycles.
  EXPECT_EQ(json_eval(report, "r['bound_cycles'] == sum(l.get('bound_cycles', 0) for l in r['layers'])"),
            "True");
  EXPECT_EQ(json_eval(report, "abs(r['unfused_bound_ratio'] - r['bound_cycles'] / r['total_cycles']) < 1e-9"),
            "True");
  EXPECT_EQ(json_eval(report, "'efficiency' in r"), "False");  // the nodes' sum is no efficiency
  // The summary headlines the program's own work against its roof, then the nodes' sum under its name.
  EXPECT_NE(
      r.out.find("roofline          as compiled: bound " + json_eval(report, "r['compiled_bound_cycles']") +
                 " cycles, efficiency " + json_eval(report, "'%.1f%%' % (100 * r['compiled_efficiency'])")),
      std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find("                  unfused nodes: bound " + json_eval(report, "r['bound_cycles']") +
                 " cycles, " + json_eval(report, "'%.2fx' % r['unfused_bound_ratio']") + " total cycles"),
      std::string::npos)
      << r.out;
  EXPECT_EQ(json_eval(report, "r['array']['macs_per_pe_per_cycle']['int8']"), "1");
}

TEST(Cli, ExecOfAProgramWithoutTheCompilersViewReportsNoBound) {
  const std::string dir = temp_dir("roofline_exec");
  CommandResult r = npusim({"compile", "demo", "-o", dir + "/d.npu", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = npusim({"exec", dir + "/d.npu", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("\nroofline "), std::string::npos) << r.out;  // the run line names the temp dir
  EXPECT_EQ(read_file(dir + "/r.json").find("bound_cycles"), std::string::npos);
  EXPECT_EQ(read_file(dir + "/r.json").find("efficiency"), std::string::npos);
}

TEST(Cli, GemminiAt8x8RunsFunctionallyOnOneSharedScratchpad) {
  // The 8x8 Gemmini of issue 10: a 64 KiB scratchpad shared by inputs and weights, a 16 KiB
  // accumulator, Gemmini's tiles and per-position conv reduction; int8 (--precision auto).
  const std::vector<std::string> sets = {"--config", "gemmini",
                                         "--set",    "systolic_array.rows=8",
                                         "--set",    "systolic_array.cols=8",
                                         "--set",    "sram.input.size_kib=64",
                                         "--set",    "sram.accumulator.size_kib=16"};
  std::vector<std::string> args = {"run", "demo", "--functional"};
  args.insert(args.end(), sets.begin(), sets.end());
  const CommandResult r = npusim(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("array             8x8 ws"), std::string::npos) << r.out;
  std::vector<std::string> show = {"config"};
  show.insert(show.end(), sets.begin(), sets.end());
  const CommandResult c = npusim(show);
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("shared_scratchpad: true"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("mapping_policy: gemmini"), std::string::npos) << c.out;
}

// Gemmini's LoopMatmul loads a tile's weights and computes on them DIM rows of K at a time, each block's
// compute following its mvin, and the next tile loads into the other scratchpad half meanwhile
// (compiler/backend/matrix/gemmini_policy.h, gemmini_stream_rows). A batch-1 FC 512 -> 1000 on the 8x8
// validation setup with memory of 8 B/cycle and no latency: its 512,000 weight bytes take 64,000 cycles
// to arrive, and its 64 x 125 folds of 8 cycles take 64,000 on the mesh. Overlapped, the layer ends
// within 10% of the longer plus one tile's compute (Gemmini's tile: 448 + 64 rows of K by 64 columns,
// 512 folds, 4,096 cycles); each tile's load followed by its compute (the 448-row part comes back to the
// same half every 64 columns) costs nearly the sum, 115,693 cycles.
TEST(Cli, GemminiFcWeightsLoadUnderTheComputeAsGemminisLoopMatmulStreamsThem) {
  const std::string dir = temp_dir("gemmini_stream");
  const CommandResult r = npusim({"run",          "gemm:M=1,N=1000,K=512",
                                  "--config",     "gemmini",
                                  "--set",        "systolic_array.rows=8",
                                  "--set",        "systolic_array.cols=8",
                                  "--set",        "vector.lanes=8",
                                  "--set",        "sram.input.size_kib=64",
                                  "--set",        "sram.accumulator.size_kib=16",
                                  "--set",        "dram.bandwidth_gbps=8",
                                  "--set",        "dram.latency_ns=0",
                                  "-q",           "--report",
                                  dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t cycles =
      std::stoll(json_eval(dir + "/r.json", "[l['cycles'] for l in r['layers'] if l['op'] == 'MatMul'][0]"));
  EXPECT_GT(cycles, 64000);
  EXPECT_LE(cycles, 64000 * 11 / 10 + 4096);
}

// A SCALE-Sim topology stays as written: one report layer per row, in order, every one on the array
// (FC rows on 1x1 maps, 1x1 stride-2 rows, rows whose output follows the ceiling rule, single-channel
// rows), no layout conversions, and total_cycles is the sum of the rows' cycles.
TEST(Cli, ScaleSimTopologyRowsAreTheReportLayersAllOnTheArray) {
  const std::string dir = temp_dir("topology-rows");
  write_file(
      dir + "/topo.csv",
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
      "\n"
      "stem, 112, 112, 3, 3, 3, 24, 2,\n"
      "dw_like, 56, 56, 3, 3, 1, 1, 1,#dw\n"
      "proj, 56, 56, 1, 1, 24, 48, 1\n"
      "down, 56, 56, 1, 1, 48, 96, 2,\n"
      "odd, 27, 27, 3, 3, 96, 96, 2,\n"
      "head, 1, 1, 1, 1, 1280, 1000, 1,\n");
  const CommandResult r =
      npusim({"run", dir + "/topo.csv", "--config", std::string(NPUSIM_SOURCE_DIR) + "/configs/scalesim.yaml",
              "-q", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string f = dir + "/r.json";
  EXPECT_EQ(json_eval(f, "[l['name'] for l in r['layers']]"),
            "['stem', 'dw_like', 'proj', 'down', 'odd', 'head']");
  EXPECT_EQ(json_eval(f, "sorted(set(l['placement'] for l in r['layers']))"), "['npu']");
  EXPECT_EQ(json_eval(f, "all(l['compute_cycles'] > 0 for l in r['layers'])"), "True");
  EXPECT_EQ(json_eval(f, "r['compile']['fallbacks']"), "[]");
  EXPECT_EQ(json_eval(f, "r['total_cycles'] == sum(l['cycles'] for l in r['layers'])"), "True");
}

// Memory is planned: a micro-model whose weights would not fit fails before allocating them, with one
// sentence naming the tensor, the bytes and what avoids it (never std::bad_alloc). 10^10 fp32 weights
// are 40 GB, held about three times while compiling.
TEST(Cli, HugeMicroModelFailsBeforeAllocatingNamingTheTensorAndTheBytes) {
  // Functional: the weights' values are needed (a timing run leaves them out, docs/compiler.md).
  const CommandResult r =
      npusim({"run", "gemm:M=100000,N=100000,K=100000", "-q", "--functional", "--memory-limit-gb", "64"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the weight gemm.b (100000x100000 values) needs 120.0 GB, more than the 64.0 GB"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--memory-limit-gb"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
}

// int8 calibration runs the model in fp32 on its samples: a 2048 x 2048 input's 3x3 conv to 64 channels makes
// a 1.07 GB output, held and returned as a copy (2.14 GB; measured 2.33 GB resident at 0af2022), for a 17 MB
// sample, so under a 1 GB limit it stops before making the sample, with the estimate (a 4k-image UNet
// topology met the OOM killer there, exit 137).
TEST(Cli, Int8CalibrationThatWouldNotFitFailsBeforeRunningTheModel) {
  const std::string dir = temp_dir("calibration-memory");
  write_file(
      dir + "/big.csv",
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
      "big, 2048, 2048, 3, 3, 1, 64, 1,\n");
  const CommandResult r =
      npusim({"run", dir + "/big.csv", "-c", std::string(NPUSIM_SOURCE_DIR) + "/configs/scalesim.yaml",
              "--precision", "int8", "-q", "--memory-limit-gb", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("calibrating on 1 sample of 16.8 MB (the model run in fp32 holds up to 2.1 GB more) "
                       "needs 2.2 GB, more than the 1.0 GB of memory available"),
            std::string::npos)
      << r.err;
}

// The same model timed: no weights are held, but its MatMul (K beyond an instruction's reach) would run on
// the host with more operations than a host call carries: one sentence naming the layer, not a field of
// an instruction.
TEST(Cli, HugeMicroModelTimedFailsNamingTheLayerItCannotRun) {
  const CommandResult r = npusim({"run", "gemm:M=100000,N=100000,K=100000", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("would run on the host"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the model is too large to simulate"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("HOSTCALL"), std::string::npos) << r.err;
}

// The instruction stream is budgeted too: 4096 rows of a 32 x 32 GEMM need more than a thousand
// instructions, which (instruction, queue position, dependency clock) exceed 20 kB.
TEST(Cli, ProgramPastTheMemoryLimitFailsNamingTheProgram) {
  const CommandResult r = npusim({"run", "gemm:M=4096,N=32,K=32", "-q", "--memory-limit-gb", "0.00002"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the compiled program (1024 instructions) needs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("more than the 20.0 kB of memory available"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

// A functional run feeds random values to integer inputs; where a host op's result shape follows them
// (a Tile's repeats), the program compiled for the model's declared shape cannot hold the result: one
// sentence naming the op and the fix, exit 1 (it wrote past its DRAM buffer and crashed before).
TEST(Cli, AHostResultWhoseShapeFollowsRandomInputValuesIsASentenceAndInputValueFixesIt) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_tile/model.onnx";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const CommandResult random = npusim({"run", model, "-q", "--functional"});
  EXPECT_EQ(random.exit_code, 1) << random.err;
  EXPECT_NE(random.err.find("host op 'Tile_0' (Tile) computed 'z' with shape"), std::string::npos)
      << random.err;
  EXPECT_NE(random.err.find("compiled for 14x18x16x10"), std::string::npos) << random.err;
  EXPECT_NE(random.err.find("--input-value"), std::string::npos) << random.err;
  // The test's own repeats: [2, 3, 4, 5] tiled 7, 6, 4, 2 times is the declared [14, 18, 16, 10].
  const CommandResult fixed = npusim({"run", model, "-q", "--functional", "--input-value", "y=7,6,4,2"});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
}

}  // namespace
}  // namespace npusim::test
