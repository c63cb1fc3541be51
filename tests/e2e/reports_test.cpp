// End-to-end tests of the reports a deployment engineer acts on (issue 16): the per-layer CSV, the
// roll-up by op type, the summary's layer list.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

// Runs a Python program over the report JSON (r) and the layers CSV (rows, a list of dicts); returns
// what it prints.
std::string check_csv(const std::string& report, const std::string& csv, const std::string& body) {
  const CommandResult r = run_command({"/usr/bin/python3", "-c",
                                       "import csv, json, sys\n"
                                       "r = json.load(open(sys.argv[1]))\n"
                                       "rows = list(csv.DictReader(open(sys.argv[2], newline='')))\n" +
                                           body,
                                       report, csv});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out.substr(0, r.out.find_last_not_of('\n') + 1);
}

// Runs a Python program over the report JSON (r); returns what it prints.
std::string check_report(const std::string& report, const std::string& body) {
  const CommandResult r = run_command(
      {"/usr/bin/python3", "-c", "import json, sys\nr = json.load(open(sys.argv[1]))\n" + body, report});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out.substr(0, r.out.find_last_not_of('\n') + 1);
}

TEST(Reports, LayersCsvHasOneRowPerLayerWithItsCyclesBreakdownBytesAndBound) {
  const std::string dir = temp_dir("layers_csv");
  const CommandResult r =
      npusim({"run", "demo", "-q", "--report", dir + "/r.json", "--layers-csv", dir + "/l.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = dir + "/l.csv";
  EXPECT_EQ(
      read_file(csv).substr(0, read_file(csv).find('\n')),
      "index,name,display_name,op,placement,precision,start_cycle,end_cycle,cycles,compute,memory,"
      "scheduling,host,macs,"
      "dram_bytes_read,dram_bytes_written,bound,bound_cycles,efficiency,fused_into,energy_mj,limit_cycles,"
      "unit,input_shape,output_shape,kernel,stride,groups,mac_utilization,compiled_bound_cycles,"
      "fusion_saved_cycles,mapping");
  EXPECT_EQ(check_csv(dir + "/r.json", csv, "print(len(rows) == len(r['layers']) > 0)"), "True");
  // Each row is its layer: cycles are end - start, the breakdown adds up to them.
  EXPECT_EQ(
      check_csv(dir + "/r.json", csv,
                "print(all(x['name'] == l['name'] and int(x['cycles']) == l['cycles'] == "
                "int(x['end_cycle']) - int(x['start_cycle']) and "
                "sum(int(x[k]) for k in ('compute', 'memory', 'scheduling', 'host')) == l['cycles'] and "
                "int(x['macs']) == l['macs'] and x['precision'] == l['precision'] and "
                "float(x['energy_mj']) == l['energy']['total_mj'] "
                "for x, l in zip(rows, r['layers'])))"),
      "True");
  // Every DMA transfer belongs to a layer: the layers' bytes add up to the run's.
  EXPECT_EQ(check_csv(dir + "/r.json", csv,
                      "print(sum(int(x['dram_bytes_read']) for x in rows) == r['dram']['bytes_read'] > 0, "
                      "sum(int(x['dram_bytes_written']) for x in rows) == r['dram']['bytes_written'] > 0)"),
            "True True");
  // The bound label is the largest part of the breakdown (the JSON carries the same label).
  EXPECT_EQ(check_csv(dir + "/r.json", csv,
                      "ks = ('compute', 'memory', 'scheduling', 'host')\n"
                      "print(all(x['bound'] == l['bound'] == max(ks, key=lambda k: int(x[k])) "
                      "for x, l in zip(rows, r['layers']) if int(x['cycles']) > 0))"),
            "True");
  // Efficiency is the layer's compiled bound over its cycles (the JSON's), with four decimals; empty
  // without one and on fused rows.
  EXPECT_EQ(
      check_csv(dir + "/r.json", csv,
                "print(all(x['efficiency'] == ('%.4f' % (l['compiled_bound_cycles'] / int(x['cycles'])) "
                "if 'compiled_bound_cycles' in l and int(x['cycles']) else '') "
                "for x, l in zip(rows, r['layers'])), any(x['fused_into'] for x in rows))"),
      "True True");
}

// A 3x3 stride-2 conv of 8 channels over 16x16 into 16: what the layer tables show of it, from the spec
// (shapes, window, 8x8 outputs x 16 channels x 8 x 3 x 3 = 73728 MACs), the unit it ran on and the
// useful MACs against that unit's peak over its cycles, the same in the JSON, the CSV and the summary.
TEST(Reports, LayerTablesShowAConvsShapesWindowUnitMacUtilizationAndMapping) {
  const std::string dir = temp_dir("layer_tables");
  const CommandResult r = npusim({"run", "conv:H=16,W=16,C=8,K=16,R=3,S=3,stride=2,pad=1", "--report",
                                  dir + "/r.json", "--layers-csv", dir + "/l.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string conv = "[l for l in r['layers'] if l['name'] == 'conv'][0]";
  EXPECT_EQ(json_eval(dir + "/r.json",
                      "[" + conv +
                          "[k] for k in ('input_shape', 'output_shape', 'kernel', 'stride', 'groups', "
                          "'unit', 'macs')]"),
            "['1x8x16x16', '1x16x8x8', '3x3', '2x2', 1, 'array', 73728]");
  EXPECT_EQ(
      json_eval(dir + "/r.json",
                "abs((lambda l: l['mac_utilization'] - 73728 / (r['array']['rows'] * r['array']['cols'] * "
                "r['array']['macs_per_pe_per_cycle'][l['precision']] * l['cycles']))(" +
                    conv + ")) < 1e-12"),
      "True");
  // The mapping in short: the conv's output tile (rows x cols), its channels and reduction chunk, the
  // loop order's letter.
  EXPECT_EQ(json_eval(dir + "/r.json",
                      "(lambda m: m['short'] == '%dx%d n%d k%d %s' % (m['tile']['oh'], m['tile']['ow'], "
                      "m['tile']['n'], m['tile']['k'], m['loop_order'][0].upper()))(" +
                          conv + "['mapping'])"),
            "True");
  EXPECT_EQ(
      check_csv(dir + "/r.json", dir + "/l.csv",
                "x = [x for x in rows if x['name'] == 'conv'][0]\nl = " + conv +
                    "\nprint([x[k] for k in ('unit', 'input_shape', 'output_shape', 'kernel', 'stride', "
                    "'groups')], x['mac_utilization'] == '%.4f' % l['mac_utilization'], "
                    "x['mapping'] == l['mapping']['short'])"),
      "['array', '1x8x16x16', '1x16x8x8', '3x3', '2x2', '1'] True True");
  std::istringstream summary(r.out);
  std::string line, row;
  while (std::getline(summary, line))
    if (line.rfind("conv ", 0) == 0) row = line;
  EXPECT_NE(row.find(" array "), std::string::npos) << r.out;
  EXPECT_NE(row.find("1x8x16x16 -> 1x16x8x8"), std::string::npos) << r.out;
  EXPECT_NE(row.find("3x3 s2x2 g1"), std::string::npos) << r.out;
  EXPECT_NE(row.find(json_eval(dir + "/r.json", conv + "['mapping']['short']")), std::string::npos) << r.out;
}

TEST(Reports, OpRollupSumsTheLayersOfEachOpTypeInJsonAndSummary) {
  const std::string dir = temp_dir("op_rollup");
  const CommandResult r = npusim({"run", "demo", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string report = dir + "/r.json";
  EXPECT_EQ(
      json_eval(
          report,
          "all(o['cycles'] == sum(l['cycles'] for l in r['layers'] if l['op'] == o['op']) and "
          "o['layers'] == sum(l['op'] == o['op'] and l['placement'] != 'fused' for l in r['layers']) and "
          "o['fused_nodes'] == sum(l['op'] == o['op'] and l['placement'] == 'fused' for l in r['layers']) "
          "and "
          "o['dram_bytes_read'] == sum(l['dram_bytes_read'] for l in r['layers'] if l['op'] == o['op']) "
          "for o in r['ops'])"),
      "True");
  EXPECT_EQ(json_eval(report, "sorted(o['op'] for o in r['ops']) == sorted({l['op'] for l in r['layers']})"),
            "True");
  EXPECT_EQ(json_eval(report, "abs(sum(o['share'] for o in r['ops']) - 1) < 1e-9"), "True");
  EXPECT_EQ(json_eval(report,
                      "[o['cycles'] for o in r['ops']] == sorted((o['cycles'] for o in r['ops']), "
                      "reverse=True)"),
            "True");
  EXPECT_NE(r.out.find("time by op type"), std::string::npos) << r.out;
  const std::string first = json_eval(report, "r['ops'][0]['op']");
  EXPECT_NE(r.out.find("\n" + first + " "), std::string::npos) << r.out;
}

// A classifier ending in an ArgMax, which the compiler places on the host (one HOSTCALL), reports that
// layer on the host in the summary, the layers CSV and the JSON, as `compile -v` does; the program's final
// HALT, which carries the last layer's index, is no work of that layer (issue 40, item 2).
TEST(Reports, ALastLayerThatFallsBackToTheHostIsReportedOnTheHostEverywhere) {
  const std::string dir = temp_dir("argmax_host");
  const CommandResult model = run_command(
      {"/usr/bin/python3", "-c",
       "import sys, numpy as np, onnx\n"
       "from onnx import helper as h, TensorProto as T, numpy_helper as nh\n"
       "w = nh.from_array(np.random.default_rng(0).standard_normal((16, 10)).astype(np.float32), 'w')\n"
       "g = h.make_graph([h.make_node('MatMul', ['x', 'w'], ['s'], name='classifier'),\n"
       "                  h.make_node('ArgMax', ['s'], ['y'], axis=1, keepdims=0, name='argmax')], "
       "'argmax',\n"
       "                 [h.make_tensor_value_info('x', T.FLOAT, [1, 16])],\n"
       "                 [h.make_tensor_value_info('y', T.INT64, [1])], [w])\n"
       "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), sys.argv[1])\n",
       dir + "/argmax.onnx"});
  ASSERT_EQ(model.exit_code, 0) << model.err;
  const CommandResult compiled = npusim({"compile", dir + "/argmax.onnx", "-o", dir + "/a.npu", "-v"});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  EXPECT_NE(compiled.out.find("argmax (ArgMax): "), std::string::npos) << compiled.out;  // a fallback
  const CommandResult r =
      npusim({"run", dir + "/argmax.onnx", "--report", dir + "/r.json", "--layers-csv", dir + "/l.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/r.json", "[(l['name'], l['placement']) for l in r['layers']]"),
            "[('classifier', 'npu'), ('argmax', 'host')]");
  EXPECT_EQ(check_csv(dir + "/r.json", dir + "/l.csv", "print([(x['name'], x['placement']) for x in rows])"),
            "[('classifier', 'npu'), ('argmax', 'host')]");
  std::istringstream summary(r.out);
  std::string line, row;
  while (std::getline(summary, line))
    if (line.rfind("argmax ", 0) == 0) row = line;
  std::istringstream words(row);
  std::string name, op, where;
  words >> name >> op >> where;
  EXPECT_EQ(op + " " + where, "ArgMax host") << r.out;
}

TEST(Reports, TopChoosesHowManyLayersTheSummaryLists) {
  const std::string dir = temp_dir("top");
  CommandResult r = npusim({"run", "demo", "--top", "all", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string n =
      json_eval(dir + "/r.json",
                "sum(l['placement'] != 'fused' for l in r['layers'])");  // fused nodes have no cycles to rank
  EXPECT_NE(r.out.find("\nlayers by cycles\n"), std::string::npos) << r.out;
  r = npusim({"run", "demo", "--top", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("top 2 of " + n + " layers by cycles"), std::string::npos) << r.out;
  for (const char* bad : {"x", "-1", "3x"}) {
    r = npusim({"run", "demo", "--top", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("npusim: error: --top"), std::string::npos) << r.err;
  }
}

TEST(Reports, ExecWritesTheLayersCsvToo) {
  const std::string dir = temp_dir("exec_csv");
  CommandResult r = npusim({"compile", "demo", "-o", dir + "/d.npu", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = npusim({"exec", dir + "/d.npu", "-q", "--report", dir + "/r.json", "--layers-csv", dir + "/l.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(check_csv(dir + "/r.json", dir + "/l.csv",
                      "print(len(rows) == len(r['layers']) > 0, all(x['efficiency'] == '' for x in rows))"),
            "True True");
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

std::string check_report(const std::string& report, const std::string& body);

// The demo on edge runs in fp32 (--precision auto), whose MACs run at a quarter of the int8 rate:
// utilization is stated against the fp32 peak, with the int8-peak figure kept.
TEST(Reports, UtilizationIsAgainstThePeakOfThePrecisionPlan) {
  const std::string dir = temp_dir("precision_peak");
  const std::string report = dir + "/r.json";
  // edge's default precision, fp16, at systolic_array.fp16_rate 0.5 of the int8 rate.
  const CommandResult r = npusim({"run", "demo", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      json_eval(report, "r['precision']['plan'], r['precision']['layers']"),
      "fp16 {'fp16': " + json_eval(report, "sum(l['placement'] != 'fused' for l in r['layers'])") + "}");
  const std::string pes = "r['array']['rows'] * r['array']['cols']";
  EXPECT_EQ(json_eval(report, "r['precision']['peak_macs_per_cycle'] == " + pes + " * 0.5"), "True");
  EXPECT_EQ(json_eval(report, "abs(r['precision']['utilization'] - r['macs'] / (" + pes +
                                  " * 0.5 * r['total_cycles'])) < 1e-12"),
            "True");
  EXPECT_EQ(json_eval(report,
                      "abs(r['array_utilization'] - r['macs'] / (" + pes + " * r['total_cycles'])) < 1e-12"),
            "True");
  EXPECT_NE(r.out.find("precision         fp16: peak " + json_eval(report, "'%g' % (" + pes + " * 0.5)") +
                       " MACs/cycle"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(json_eval(report,
                                 "'utilization %.1f%% of the fp16 peak (%.1f%% of the int8 peak)' % "
                                 "(100 * r['precision']['utilization'], 100 * r['array_utilization'])")),
            std::string::npos)
      << r.out;
}

// An int8 plan's peak is the int8 peak: its utilization is said once. On a 256x256 array the demo's
// utilization is below 1%, given to two significant digits rather than as "0.0%" or "0.4%".
TEST(Reports, Int8UtilizationIsSaidOnceAndASmallOneKeepsTwoSignificantDigits) {
  const std::string report = temp_dir("precision_int8_peak") + "/r.json";
  const CommandResult r =
      npusim({"run", "demo", "--precision", "int8", "-c",
              std::string(NPUSIM_SOURCE_DIR) + "/configs/tpu-v1.yaml", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string utilization = json_eval(report,
                                            "'%.2g' % (100 * r['macs'] / (r['array']['rows'] * "
                                            "r['array']['cols'] * r['total_cycles']))");
  ASSERT_LT(std::stod(utilization), 1.0) << utilization;
  EXPECT_NE(r.out.find("utilization " + utilization + "% of the int8 peak\n"), std::string::npos) << r.out;
}

// Misaligned bursts and bank-conflict waits are counted per layer (adding up to the run's figures); the
// summary calls the first DMA time (not latency), says which part of the second the units' stalls expose,
// and names the layers with the largest shares of each.
TEST(Reports, MisalignedBurstsAndBankConflictsAreDmaTimeAndStallsNamingTheirTopLayers) {
  const std::string report = temp_dir("dma_time") + "/r.json";
  const CommandResult r = npusim({"run", "demo", "--set", "dma.alignment_bytes=4096", "--set",
                                  "sram.input.banks=1", "--set", "sram.weight.banks=1", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(check_report(
                report,
                "L = r['layers']\n"
                "print(sum(l['misaligned_bursts'] for l in L) == r['dma']['misaligned_bursts'] > 0,\n"
                "      sum(l['bank_conflict_cycles'] for l in L) == r['sram']['bank_conflict_cycles'] > 0)"),
            "True True");
  const std::string top =
      check_report(report,
                   "L = sorted(r['layers'], key=lambda l: -l['misaligned_bursts'])\n"
                   "print('%s (%.0f%%)' % (L[0]['display_name'], 100 * L[0]['misaligned_bursts'] / "
                   "r['dma']['misaligned_bursts']))");
  EXPECT_NE(
      r.out.find(" cycles of DMA time (DRAM bus, overlapped with other work: not latency); most in " + top),
      std::string::npos)
      << top << "\n"
      << r.out;
  const std::string waits =
      check_report(report,
                   "L = sorted(r['layers'], key=lambda l: -l['bank_conflict_cycles'])\n"
                   "print('%d bank conflicts: %d cycles of waiting, %d of them exposed as matrix/vector "
                   "stalls, the rest DMA "
                   "time; most in %s' % (r['sram']['bank_conflicts'], r['sram']['bank_conflict_cycles'], "
                   "sum(u['stalls']['bank_conflict'] for u in r['units'].values()), L[0]['display_name']))");
  EXPECT_NE(r.out.find("sram              " + waits), std::string::npos) << waits << "\n" << r.out;
}

// A configuration chooses the precision --precision auto compiles in (a product's toolchain default): edge's
// is its array's fastest floating-point type, fp16, which needs no calibration; an int8-only array's is int8,
// calibrated; datacenter names bf16. The summary, compile's summary and the report say where it came from,
// and --precision still decides.
TEST(Reports, EachPresetsDefaultPrecisionIsTakenAndSaidWhereNoPrecisionIsGiven) {
  const std::string dir = temp_dir("default_precision");
  const std::string fp16 =
      "edge's default precision (lowering.default_precision: auto, the array's fastest floating-point type; "
      "needs no calibration; --precision to choose another)";
  CommandResult r = npusim({"run", "demo", "--report", dir + "/edge.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/edge.json", "r['precision']['plan'], r['run']['precision_source']"),
            "fp16 " + fp16);
  // 32 x 32 PEs at fp16_rate 0.5.
  EXPECT_NE(r.out.find("precision         fp16: peak 512 MACs/cycle; " + fp16 + "\n"), std::string::npos)
      << r.out;
  r = npusim({"compile", "demo", "-o", dir + "/demo.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("precision         fp16: " + fp16 + "\n"), std::string::npos) << r.out;
  // Without fp16 MACs the fastest floating-point type is bf16 (fp32 runs at half its rate).
  r = npusim({"run", "demo", "--set", "systolic_array.fp16_rate=0", "--report", dir + "/bf16.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/bf16.json", "r['precision']['plan']"), "bf16");
  // An array that multiplies int8 only: int8, calibrated.
  r = npusim({"run", "demo", "-c", "tpu-v1", "--report", dir + "/tpu.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      json_eval(dir + "/tpu.json", "r['precision']['plan'], r['run']['precision_source']"),
      "int8 tpu-v1's default precision (lowering.default_precision: auto, and the array multiplies int8 "
      "only; calibrated; --precision to choose another)");
  r = npusim({"run", "demo", "-c", "datacenter", "--report", dir + "/datacenter.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/datacenter.json", "r['precision']['plan'], r['run']['precision_source']"),
            "bf16 datacenter's default precision (lowering.default_precision: bf16; needs no calibration; "
            "--precision to choose another)");
  r = npusim({"run", "demo", "--precision", "fp32", "--report", dir + "/fp32.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/fp32.json", "r['precision']['plan'], r['run']['precision_source']"),
            "fp32 --precision fp32");
  EXPECT_NE(r.out.find("precision         fp32: peak 256 MACs/cycle; chosen by --precision fp32\n"),
            std::string::npos)
      << r.out;
  // --help says what auto is (it had said "the widest float the array has").
  r = npusim({"run", "--help"});
  EXPECT_NE(r.out.find("auto (default): the configuration's lowering.default_precision, fp16 on edge"),
            std::string::npos)
      << r.out;
  // A default the array has no MACs for is a configuration error naming both keys.
  r = npusim(
      {"run", "demo", "--set", "lowering.default_precision=bf16", "--set", "systolic_array.bf16_rate=0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("lowering.default_precision = bf16 needs bf16 MACs on the array: "
                       "systolic_array.bf16_rate is 0"),
            std::string::npos)
      << r.err;
}

// The host's time by phase: an int8 run's calibration is its own phase (it can take most of the time),
// a float run has none; a program run (exec) has no compile phases.
TEST(Reports, PhaseTimesSayWhereTheHostsTimeWentCalibrationApart) {
  const std::string dir = temp_dir("phases");
  CommandResult r = npusim({"run", "demo", "--precision", "int8", "--report", dir + "/int8.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/int8.json",
                      "all(r['phases'][k] > 0 for k in ('import_seconds', 'calibration_seconds', "
                      "'compile_seconds')) and r['phases']['accuracy_seconds'] == 0"),
            "True");
  EXPECT_NE(r.out.find("\nhost time         import "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", calibration "), std::string::npos) << r.out;
  r = npusim({"run", "demo", "--precision", "fp32", "--report", dir + "/fp32.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/fp32.json", "r['phases']['calibration_seconds']"), "0");
  EXPECT_EQ(r.out.find(", calibration "), std::string::npos) << r.out;
  r = npusim({"run", "demo", "--precision", "int8", "--accuracy", "--report", dir + "/acc.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/acc.json", "r['phases']['accuracy_seconds'] > 0"), "True");
  ASSERT_EQ(npusim({"compile", "demo", "-q", "-o", dir + "/d.npu"}).exit_code, 0);
  r = npusim({"exec", dir + "/d.npu", "--report", dir + "/exec.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/exec.json", "'phases' in r"), "False");
  EXPECT_EQ(r.out.find("host time"), std::string::npos) << r.out;
}

// A mixed plan: the peak is the rate at which the layers' MACs would run, each at its precision's peak.
TEST(Reports, MixedPlanNamesItsPrecisionsAndTheirCombinedPeak) {
  const std::string dir = temp_dir("precision_mixed");
  const std::string report = dir + "/r.json";
  const CommandResult r = npusim(
      {"run", "demo", "--precision", "int8", "--precision-override", "conv2=fp16", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string n = json_eval(report, "sum(l['placement'] != 'fused' for l in r['layers']) - 1");
  EXPECT_EQ(json_eval(report, "r['precision']['plan']"), "mixed: " + n + " int8, 1 fp16");
  EXPECT_EQ(
      check_report(
          report,
          "pes = r['array']['rows'] * r['array']['cols']; rate = r['array']['macs_per_pe_per_cycle']\n"
          "m = {p: sum(l['macs'] for l in r['layers'] if l['precision'] == p) for p in ('int8', 'fp16')}\n"
          "peak = sum(m.values()) / sum(m[p] / (pes * rate[p]) for p in m)\n"
          "print(abs(r['precision']['peak_macs_per_cycle'] - peak) < 1e-9 * peak and "
          "m['fp16'] > 0 and m['int8'] > 0)"),
      "True");
  // The summary prints the combined peak with one decimal (it printed 1020.6139556446376).
  const std::string peak = json_eval(report, "'%.1f' % r['precision']['peak_macs_per_cycle']");
  EXPECT_EQ(
      json_eval(report,
                "r['precision']['peak_macs_per_cycle'] != round(r['precision']['peak_macs_per_cycle'])"),
      "True");
  EXPECT_NE(r.out.find("precision         mixed: " + n + " int8, 1 fp16: peak " + peak +
                       " MACs/cycle; chosen by --precision int8 with per-layer overrides\n"),
            std::string::npos)
      << r.out;
}

TEST(Reports, RooflinePlotDrawsTheRoofOfEachPrecisionOfThePlan) {
  const std::string dir = temp_dir("precision_roofs");
  for (const auto& [args, roofs] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "under the fp16 roof"},  // edge's default precision
           {{"--precision", "int8", "--precision-override", "conv2=fp16"}, "under the fp16, int8 roofs"}}) {
    std::vector<std::string> run = {"run", "demo", "-q", "--report", dir + "/r.json"};
    run.insert(run.end(), args.begin(), args.end());
    CommandResult r = npusim(run);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_command({"/usr/bin/python3", std::string(NPUSIM_SOURCE_DIR) + "/scripts/plot_roofline.py",
                     dir + "/r.json", "-o", dir + "/roof.png"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(roofs), std::string::npos) << r.out;
    // The plot is titled by the model and configuration the report records, not its file name.
    EXPECT_NE(r.out.find(" layers of demo on edge under the "), std::string::npos) << r.out;
  }
}

// One naming scheme: the summary's layer rows, the CSV and the JSON's display_name are the same short
// names (isa::display_names, unit-tested in tests/isa); the JSON keeps the full name.
TEST(Reports, SummaryCsvAndJsonShowTheSameShortUniqueLayerNames) {
  const std::string dir = temp_dir("names");
  const std::string report = dir + "/r.json";
  const CommandResult r =
      npusim({"run", "demo", "--top", "all", "--report", report, "--layers-csv", dir + "/l.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(check_csv(report, dir + "/l.csv",
                      "print(all(x['display_name'] == l['display_name'] and x['name'] == l['name'] "
                      "for x, l in zip(rows, r['layers'])))"),
            "True");
  EXPECT_EQ(json_eval(report, "len({l['display_name'] for l in r['layers']}) == len(r['layers'])"), "True");
  // The summary and the compile table list the program's layers (fused nodes have no cycles or code).
  const std::string program = "[l for l in r['layers'] if l['placement'] != 'fused']";
  const int n = std::stoi(json_eval(report, "len(" + program + ")"));
  for (int i = 0; i < n; ++i) {
    const std::string name = json_eval(report, program + "[" + std::to_string(i) + "]['display_name']");
    EXPECT_NE(r.out.find("\n" + name + " "), std::string::npos) << name << "\n" << r.out;
  }
  const CommandResult c = npusim({"compile", "demo", "-o", dir + "/d.npu", "-v"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  for (int i = 0; i < n; ++i) {
    const std::string name = json_eval(report, program + "[" + std::to_string(i) + "]['display_name']");
    EXPECT_NE(c.out.find("\n" + name + " "), std::string::npos) << name << "\n" << c.out;
  }
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

// Every parameter key `npusim config --dump` lists (its KEY column).
std::vector<std::string> dumped_keys() {
  const CommandResult r = npusim({"config", "--dump"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> keys;
  std::istringstream in(r.out);
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("KEY ", 0) == 0) {
      table = true;
      continue;
    }
    const std::string key = line.substr(0, line.find(' '));
    if (table && !key.empty() && key.back() != ':') keys.push_back(key);  // "sram:" is a group
  }
  return keys;
}

TEST(Reports, RunRecordsTheModelAndItsHashEveryConfigurationKeyTheCommandAndTheVersion) {
  const std::string dir = temp_dir("run_info");
  CommandResult r = npusim({"compile", "demo", "-o", dir + "/d.npu", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string report = dir + "/r.json";
  r = npusim({"exec", dir + "/d.npu", "-q", "--set", "sram.input.size_kib=512", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(report, "r['run']['model']"), dir + "/d.npu");
  // The hash is SHA-256 of the file, as hashlib (and sha256sum) computes it.
  EXPECT_EQ(json_eval(report,
                      "r['run']['model_sha256'] == __import__('hashlib').sha256(open(r['run']['model'], "
                      "'rb').read()).hexdigest()"),
            "True");
  EXPECT_EQ(json_eval(report, "r['run']['sets'], r['run']['config']"), "['sram.input.size_kib=512'] ");
  EXPECT_EQ(json_eval(report,
                      "r['run']['parameters']['sram.input.size_kib'], "
                      "r['run']['parameters']['systolic_array.dataflow']"),
            "512 ws");
  const std::vector<std::string> keys = dumped_keys();
  ASSERT_GT(keys.size(), 50u);
  std::string expected = "[";
  for (const std::string& k : keys) expected += (expected.size() > 1 ? ", '" : "'") + k + "'";
  EXPECT_EQ(json_eval(report, "list(r['run']['parameters'])"), expected + "]");
  EXPECT_EQ(json_eval(report, "r['run']['command']"),
            "npusim exec " + dir + "/d.npu -q --set sram.input.size_kib=512 --report " + report);
  const CommandResult v = npusim({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ("npusim " + json_eval(report, "r['run']['version']") + "\n", v.out);
  EXPECT_NE(v.out.find("0.1.0 ("), std::string::npos) << v.out;
  // A built-in model has no file to hash.
  r = npusim({"run", "demo", "-q", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(report, "repr(r['run']['model']), repr(r['run']['model_sha256'])"), "'demo' ''");
}

TEST(Reports, DiffPrintsWhatDiffersInConfigurationResultsAndLayers) {
  const std::string dir = temp_dir("diff");
  CommandResult r = npusim({"run", "demo", "-q", "--report", dir + "/a.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = npusim({"run", "demo", "-q", "--set", "systolic_array.rows=16", "--set", "dram.model=hbm2", "--report",
              dir + "/b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CommandResult d = npusim({"diff", dir + "/a.json", dir + "/b.json", "--top", "all"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const std::string n = json_eval(dir + "/a.json", "len(r['run']['parameters'])");
  EXPECT_NE(d.out.find("configuration: 2 of " + n + " parameters differ"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("systolic_array.rows"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("lpddr4_4266"), std::string::npos) << d.out;
  const std::string ta = json_eval(dir + "/a.json", "r['total_cycles']");
  const std::string tb = json_eval(dir + "/b.json", "r['total_cycles']");
  EXPECT_NE(d.out.find(json_eval(dir + "/a.json", "'  %-28s %16d %16d %9s' % ('total_cycles', " + ta + ", " +
                                                      tb + ", '%+.1f%%' % (100 * (" + tb + " - " + ta +
                                                      ") / " + ta + "))")),
            std::string::npos)
      << d.out;
  const std::string layers = json_eval(dir + "/a.json", "len(r['layers'])");
  EXPECT_NE(d.out.find("layers: " + layers + " matched by name, 0 only in A, 0 only in B"), std::string::npos)
      << d.out;
  // The layer that changed most comes first.
  const std::string most =
      check_report(dir + "/a.json",
                   "b = json.load(open(sys.argv[1].replace('a.json', 'b.json')))\n"
                   "cb = {l['name']: l['cycles'] for l in b['layers']}\n"
                   "print(max(r['layers'], key=lambda l: abs(cb[l['name']] - l['cycles']))['display_name'])");
  EXPECT_NE(d.out.find("B - A    change\n" + most + " "), std::string::npos) << d.out;
  // Cycles by op type, from each report's layers.
  EXPECT_NE(d.out.find(check_report(
                dir + "/a.json",
                "b = json.load(open(sys.argv[1].replace('a.json', 'b.json')))\n"
                "ca = sum(l['cycles'] for l in r['layers'] if l['op'] == 'Conv')\n"
                "cb = sum(l['cycles'] for l in b['layers'] if l['op'] == 'Conv')\n"
                "print('  %-28s %16d %16d %9s' % ('Conv', ca, cb, '%+.1f%%' % (100 * (cb - ca) / ca)))")),
            std::string::npos)
      << d.out;
  // The same report twice: nothing differs.
  const CommandResult same = npusim({"diff", dir + "/a.json", dir + "/a.json"});
  EXPECT_NE(same.out.find("configuration: 0 of"), std::string::npos) << same.out;
  // ... and the verdict says so first; two different runs get no such line.
  EXPECT_NE(same.out.find("\nthe two reports agree: the same run, configuration, results and layers\n"),
            std::string::npos)
      << same.out;
  EXPECT_EQ(d.out.find("the two reports agree"), std::string::npos) << d.out;
}

// A SCALE-Sim topology CSV of `rows` ("name, H, W, R, S, C, K, stride,\n" each).
void write_topology(const std::string& path, const std::string& rows) {
  write_file(
      path,
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n" +
          rows);
}

// A model path longer than the run section's columns kept no space before B's value
// ("models/efficientnet_b0.onnx models/efficientnet_b0.onnx"): A's column widens to its longest value.
TEST(Reports, DiffKeepsItsRunColumnsApartForALongModelPath) {
  const std::string dir = temp_dir("diff_long_model_path");
  const std::string model = dir + "/a_scalesim_topology_with_a_long_name.csv";
  write_topology(model, "Conv1, 16, 16, 3, 3, 8, 16, 1,\n");
  ASSERT_EQ(npusim({"run", model, "-q", "--report", dir + "/a.json"}).exit_code, 0);
  ASSERT_EQ(npusim({"run", model, "-q", "-c", "tpu-v1", "--report", dir + "/b.json"}).exit_code, 0);
  const CommandResult d = npusim({"diff", dir + "/a.json", dir + "/b.json"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const std::string pad(30 - std::string("  model").size(), ' ');
  // The same model in both: its path said once (issue 40, item 7).
  EXPECT_NE(d.out.find("\n  model" + pad + " " + model + " (both)\n"), std::string::npos) << d.out;
  // The rows below keep the same columns.
  const std::string config = "\n  config" + std::string(30 - 8, ' ') + " edge (built-in)" +
                             std::string(model.size() - std::string("edge (built-in)").size(), ' ') +
                             " tpu-v1";
  EXPECT_NE(d.out.find(config), std::string::npos) << d.out;
}

// Issue 40, item 7: a layer that moved to another unit or another tiling is what explains its cycles; op
// types whose nodes are fused in both runs have no cycles to compare.
TEST(Reports, DiffShowsPlacementAndMappingChangesAndHidesOpTypesWithoutCycles) {
  const std::string dir = temp_dir("diff_placement");
  ASSERT_EQ(npusim({"run", "demo", "-q", "--precision", "fp32", "--report", dir + "/a.json"}).exit_code, 0);
  ASSERT_EQ(npusim({"run", "demo", "-q", "--precision", "fp32", "--set", "systolic_array.rows=8", "--set",
                    "systolic_array.cols=8", "--report", dir + "/b.json"})
                .exit_code,
            0);
  // B's conv2 as if it had run on the vector unit (its array cycles moved there).
  ASSERT_EQ(run_command({"/usr/bin/python3", "-c",
                         "import json, sys\nr = json.load(open(sys.argv[1]))\n"
                         "l = [l for l in r['layers'] if l['name'] == 'conv2'][0]\n"
                         "l['vector_cycles'] = l['compute_cycles']\nl['compute_cycles'] = 0\n"
                         "json.dump(r, open(sys.argv[1], 'w'))",
                         dir + "/b.json"})
                .exit_code,
            0);
  const CommandResult d = npusim({"diff", dir + "/a.json", dir + "/b.json"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  // Every matched layer whose unit, precision or mapping differs, with both, from the reports' own fields.
  const std::string expected = check_report(dir + "/a.json",
                                            "b = json.load(open(sys.argv[1].replace('a.json', 'b.json')))\n"
                                            "def short(l):\n"
                                            "    m = l.get('mapping') or {}\n"
                                            "    return m.get('short', '')\n"
                                            "mb = {l['name']: short(l) for l in b['layers']}\n"
                                            "print(sum(short(l) != mb[l['name']] for l in r['layers']) + 0)");
  ASSERT_NE(expected, "0");
  EXPECT_NE(d.out.find("placement and mapping: "), std::string::npos) << d.out;
  const size_t at = d.out.find("\nconv2 ");
  ASSERT_NE(at, std::string::npos) << d.out;
  const std::string line = d.out.substr(at + 1, d.out.find('\n', at + 1) - at - 1);
  const std::string a_map =
      json_eval(dir + "/a.json", "[l['mapping']['short'] for l in r['layers'] if l['name'] == 'conv2'][0]");
  const std::string b_map =
      json_eval(dir + "/b.json", "[l['mapping']['short'] for l in r['layers'] if l['name'] == 'conv2'][0]");
  EXPECT_NE(line.find("array fp32 " + a_map), std::string::npos) << line;
  EXPECT_NE(line.find("vector fp32 " + b_map), std::string::npos) << line;
  // BatchNormalization and Relu are fused into the convolutions in both runs: no rows of zeros.
  const size_t ops_at = d.out.find("cycles by op type");
  ASSERT_NE(ops_at, std::string::npos) << d.out;
  const std::string ops = d.out.substr(ops_at, d.out.find("\nlayers: ") - ops_at);
  EXPECT_EQ(ops.find("  BatchNormalization "), std::string::npos) << ops;
  EXPECT_EQ(ops.find("  Relu "), std::string::npos) << ops;
  EXPECT_NE(ops.find("  Conv "), std::string::npos) << ops;
}

// Issue 40, item 12: --labels scores the evaluation inputs against their true classes, as vendor toolkits
// do. Expected values from the NPU's own fp32 outputs (`--functional`, not the reference interpreter the
// accuracy report runs): two inputs labelled with their fp32 top-1 class, two with their fp32 last class,
// which no top-5 of 10 classes holds: fp32 top-1 and top-5 are both 50%.
TEST(Reports, LabelsGiveTop1AndTop5AgainstTheGroundTruth) {
  const std::string dir = temp_dir("labels");
  ASSERT_EQ(run_command({"/usr/bin/python3", "-c",
                         "import numpy as np, os, sys\nd = sys.argv[1]\nrng = np.random.default_rng(7)\n"
                         "os.makedirs(os.path.join(d, 'eval'), exist_ok=True)\n"
                         "for n in 'abcd':\n"
                         "    os.makedirs(os.path.join(d, 'one_' + n), exist_ok=True)\n"
                         "    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)\n"
                         "    np.save(os.path.join(d, 'eval', n + '.npy'), x)\n"
                         "    np.save(os.path.join(d, 'one_' + n, 'input.npy'), x)\n",
                         dir})
                .exit_code,
            0);
  std::string labels = "# image class\n";
  for (const std::string n : {"a", "b", "c", "d"}) {
    const CommandResult r = npusim(
        {"run", "demo", "-q", "--functional", "--inputs", dir + "/one_" + n, "--outputs", dir + "/out_" + n});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string pick = n == "a" || n == "b" ? "argmax" : "argmin";
    const CommandResult c = run_command(
        {"/usr/bin/python3", "-c",
         "import numpy as np, glob, sys\ny = np.load(glob.glob(sys.argv[1] + '/*.npy')[0]).reshape(-1)\n"
         "assert y.size == 10, y.size\nprint(int(np." +
             pick + "(y)))",
         dir + "/out_" + n});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    // Names as a label list gives them: with and without the extension, with a folder.
    labels += (n == "a"   ? "val/a.npy"
               : n == "b" ? "b"
                          : n + std::string(".npy")) +
              (n == "c" ? "," : " ") + c.out.substr(0, c.out.find('\n')) + "\n";
  }
  write_file(dir + "/labels.txt", labels);
  const CommandResult r =
      npusim({"run", "demo", "--precision", "int8", "--accuracy", "--accuracy-inputs", dir + "/eval",
              "--labels", dir + "/labels.txt", "--report", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/r.json", "r['accuracy']['task']['task']"), "classify");
  EXPECT_EQ(json_eval(dir + "/r.json", "r['accuracy']['task']['labels']['inputs']"), "4");
  EXPECT_EQ(json_eval(dir + "/r.json", "r['accuracy']['task']['labels']['fp32_top1']"), "0.5");
  EXPECT_EQ(json_eval(dir + "/r.json", "r['accuracy']['task']['labels']['fp32_top5']"), "0.5");
  EXPECT_EQ(json_eval(dir + "/r.json",
                      "0 <= r['accuracy']['task']['labels']['quantized_top1'] <= "
                      "r['accuracy']['task']['labels']['quantized_top5'] <= 1"),
            "True");
  EXPECT_NE(r.out.find("labels (4 inputs): top-1 quantized "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", fp32 50.0%; top-5 quantized "), std::string::npos) << r.out;

  // Bad labels: one sentence, exit 2.
  write_file(dir + "/missing.txt", "a 1\nb 2\nc 3\n");
  write_file(dir + "/twice.txt", "a 1\nb 2\nc 3\nd 4\nval/a 5\n");
  write_file(dir + "/bad.txt", "a 1\nb two\n");
  write_file(dir + "/range.txt", "a 1\nb 2\nc 3\nd 10\n");
  const std::vector<std::string> run = {"run", "demo", "-q", "--precision", "int8", "--accuracy"};
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {{"--accuracy-inputs", dir + "/eval", "--labels", dir + "/missing.txt"},
            dir + "/missing.txt has no label for the input 'd.npy'"},
           {{"--accuracy-inputs", dir + "/eval", "--labels", dir + "/twice.txt"}, "'a' is labelled twice"},
           {{"--accuracy-inputs", dir + "/eval", "--labels", dir + "/bad.txt"},
            dir + "/bad.txt:2: 'b two' is not 'NAME CLASS'"},
           {{"--accuracy-inputs", dir + "/eval", "--labels", dir + "/range.txt"},
            "label 10 of input 4 is not one of the output's classes (0..9)"},
           {{"--accuracy-inputs", dir + "/eval", "--labels", dir + "/none.txt"}, "none.txt"},
           {{"--labels", dir + "/labels.txt"}, "--labels FILE needs --accuracy-inputs DIR"},
           {{"--accuracy-inputs", dir + "/eval", "--task", "regress", "--labels", dir + "/labels.txt"},
            "it goes with --task classify, not regress"}}) {
    std::vector<std::string> args = run;
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CommandResult b = npusim(args);
    EXPECT_EQ(b.exit_code, 2) << c.expect << ": " << b.err;
    EXPECT_NE(b.err.find(c.expect), std::string::npos) << b.err;
    EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
  }
  const CommandResult no_acc = npusim({"run", "demo", "-q", "--labels", dir + "/labels.txt"});
  EXPECT_EQ(no_acc.exit_code, 2);
  EXPECT_NE(no_acc.err.find("--labels needs --accuracy"), std::string::npos) << no_acc.err;
}

// Issue 40, item 7: --objective says what the mapping search minimises, and the report says which.
TEST(Reports, TheMappingObjectiveIsChosenAndReported) {
  const std::string dir = temp_dir("objective");
  const CommandResult plain = npusim({"run", "demo", "--report", dir + "/c.json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(json_eval(dir + "/c.json", "r['run']['objective']"), "cycles");
  EXPECT_EQ(plain.out.find("objective  "), std::string::npos) << plain.out;
  for (const std::string objective : {"energy", "edp"}) {
    const CommandResult r = npusim({"run", "demo", "--objective", objective, "--report", dir + "/e.json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json_eval(dir + "/e.json", "r['run']['objective']"), objective);
    EXPECT_NE(r.out.find("objective         " + objective +
                         ": the mapping search kept each layer's simulated candidate of least " +
                         (objective == "edp" ? "energy x cycles" : "energy") + " (--objective)\n"),
              std::string::npos)
        << r.out;
  }
  // The search keeps the candidate of least energy: the demo CNN's conv3 takes another tiling (at fd075d9:
  // 0.023644 -> 0.023497 mJ; its cycles happen to drop too, 32786 -> 32021).
  ASSERT_EQ(npusim({"run", "demo", "-q", "--objective", "energy", "--report", dir + "/e.json"}).exit_code, 0);
  EXPECT_EQ(json_eval(dir + "/e.json",
                      "r['energy']['total_mj'] < json.load(open(sys.argv[1].replace('e.json', "
                      "'c.json')))['energy']['total_mj']"),
            "True");
  const CommandResult bad = npusim({"run", "demo", "-q", "--objective", "speed"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "npusim: error: --objective 'speed' is not one of cycles, energy, edp\n");
}

TEST(Reports, DiffOfSomethingElseThanTwoReportsIsOneSentenceAndExit2) {
  const std::string dir = temp_dir("diff_bad");
  ASSERT_EQ(npusim({"run", "demo", "-q", "--report", dir + "/a.json"}).exit_code, 0);
  write_file(dir + "/x.txt", "not json {");
  write_file(dir + "/y.json", "{\"a\": 1}");
  // A report whose figure is not of the type npusim writes there: diff reads figures by type.
  std::string wrong = read_file(dir + "/a.json");
  const size_t at = wrong.find("\"total_cycles\": ");
  ASSERT_NE(at, std::string::npos);
  wrong.insert(at + std::string("\"total_cycles\": ").size(), "\"many\", \"was\": ");
  write_file(dir + "/wrong.json", wrong);
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  for (const Case& c :
       std::vector<Case>{{{"diff", dir + "/a.json"}, "diff needs two reports"},
                         {{"diff", dir + "/a.json", dir + "/none.json"}, "cannot open"},
                         {{"diff", dir + "/a.json", dir + "/x.txt"}, "is not JSON"},
                         {{"diff", dir + "/y.json", dir + "/a.json"}, "is not an npusim report"},
                         {{"diff", dir + "/a.json", dir + "/wrong.json"},
                          "wrong.json: the report's 'total_cycles' is not what npusim writes"}}) {
    const CommandResult r = npusim(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.expect;
    EXPECT_EQ(r.err.rfind("npusim: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

// `npusim exec` of a compiled program reports what `npusim run` of the model does: the same useful MACs
// (per layer and in total), array MAC slots apart, utilization and precision plan. A depthwise
// convolution on the array spends more MAC slots than it has MACs (block-diagonal blocks): the demo has
// none, so a SCALE-Sim topology with a depthwise ("DP") row, which stays on the array, is run too.
TEST(Reports, RunAndExecOfTheSameProgramReportTheSameMacs) {
  const std::string dir = temp_dir("run_exec_macs");
  write_file(
      dir + "/topo.csv",
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
      "conv, 16, 16, 3, 3, 8, 32, 1,\n"
      "DP_conv, 16, 16, 3, 3, 32, 1, 1,\n");
  for (const auto& [model, extra] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"demo", {}}, {"demo", {"--precision", "int8"}}, {dir + "/topo.csv", {}}}) {
    std::vector<std::string> compile = {"compile", model, "-o", dir + "/d.npu", "-q"};
    std::vector<std::string> run = {"run", model, "-q", "--report", dir + "/run.json"};
    compile.insert(compile.end(), extra.begin(), extra.end());
    run.insert(run.end(), extra.begin(), extra.end());
    ASSERT_EQ(npusim(compile).exit_code, 0);
    CommandResult r = npusim(run);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = npusim({"exec", dir + "/d.npu", "-q", "--report", dir + "/exec.json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string same =
        "r['total_cycles'], r['macs'], r['array_utilization'], r['precision'], "
        "[(l['name'], l['macs'], l.get('array_macs'), l['precision']) for l in r['layers'] "
        "if l['placement'] != 'fused']";  // exec has no compiler's view of which nodes were fused
    EXPECT_EQ(json_eval(dir + "/run.json", same), json_eval(dir + "/exec.json", same)) << model;
  }
  // The topology's depthwise layer has fewer useful MACs than the array spent slots on it.
  EXPECT_EQ(json_eval(dir + "/exec.json",
                      "[l['array_macs'] > l['macs'] > 0 for l in r['layers'] if 'DP' in l['name']]"),
            "[True]");
}

}  // namespace
}  // namespace npusim::test

// The smaller things of issue 16, each with its test.
namespace npusim::test {
namespace {

TEST(SmallThings, BatchZeroIsAUsageErrorLikeANegativeBatch) {
  for (const char* b : {"0", "-1"}) {
    const CommandResult r = npusim({"run", "demo", "-q", "--batch", b});
    EXPECT_EQ(r.exit_code, 2) << b;
    EXPECT_NE(r.err.find(std::string("npusim: error: --batch ") + b + " is out of range (1..65536)"),
              std::string::npos)
        << r.err;
  }
}

TEST(SmallThings, ConfigurationErrorsCarryThePrefixOfEveryError) {
  const CommandResult r =
      npusim({"run", "demo", "-q", "--set", "systolic_array.rowz=3", "--set", "dram.model=ddr9"});
  EXPECT_EQ(r.exit_code, 2);
  std::istringstream in(r.err);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_EQ(line.rfind("npusim: error: ", 0), 0u) << line;
  }
  EXPECT_EQ(lines, 2) << r.err;
}

TEST(SmallThings, AMissingInputNamesTheFilesItLookedForWithoutADoubleSlash) {
  const std::string dir = temp_dir("missing_input");
  const CommandResult r = npusim({"run", "demo", "-q", "--functional", "--inputs", dir + "/"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected " + dir + "/input.npy, " + dir + "/input.pb"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("//"), std::string::npos) << r.err;
}

TEST(SmallThings, TheSyntheticCalibrationWarningNamesTheOptionThatTakesRealInputs) {
  // It said "Pass a folder of real inputs to calibrate." without saying how.
  const CommandResult r = npusim({"run", "demo", "--precision", "int8", "--accuracy"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CALIBRATION USED SYNTHETIC DATA"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Pass a folder of real inputs to calibrate on: --calibration DIR."), std::string::npos)
      << r.out;
}

TEST(SmallThings, OutputsSaysWhatItWrote) {
  const std::string dir = temp_dir("outputs_written");
  CommandResult r = npusim({"run", "demo", "--functional", "--outputs", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote 1 output to " + dir + ":\n  " + dir + "/logits.npy (1x10)\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(read_file(dir + "/logits.npy").substr(1, 5), "NUMPY");
  r = npusim({"run", "demo", "-q", "--functional", "--outputs", dir});
  EXPECT_EQ(r.out, "");
}

TEST(SmallThings, PlotScriptsWithoutMatplotlibSayWhichPythonToUseInOneSentence) {
  const std::string dir = temp_dir("no_matplotlib");
  ASSERT_EQ(
      npusim({"run", "demo", "-q", "--report", dir + "/r.json", "--trace-csv", dir + "/t.csv"}).exit_code, 0);
  const std::string scripts = std::string(NPUSIM_SOURCE_DIR) + "/scripts/";
  // -S: no site packages, so neither matplotlib nor numpy, as on a python3 without them.
  for (const auto& [script, input] :
       std::vector<std::pair<std::string, std::string>>{{"plot_layers.py", dir + "/r.json"},
                                                        {"plot_roofline.py", dir + "/r.json"},
                                                        {"plot_timeline.py", dir + "/t.csv"}}) {
    const CommandResult r =
        run_command({"/usr/bin/python3", "-S", scripts + script, input, "-o", dir + "/x.png"});
    EXPECT_EQ(r.exit_code, 2) << script;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("is not installed for"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("run the script with /usr/bin/python3"), std::string::npos) << r.err;
  }
}

// --advise-sqnr answers a question: its answer is printed once, also under -q, and says so plainly when
// the int8 plan already meets the target.
TEST(SmallThings, AdviseSqnrPrintsItsAnswerOnceEvenWhenQuiet) {
  CommandResult r = npusim({"run", "demo", "-q", "--precision", "int8", "--advise-sqnr", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mixed-precision advice (target 1.0 dB): met by the plan as it is ("),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("no layer needs int16 or fp16\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--precision-override"), std::string::npos) << r.out;
  r = npusim({"run", "demo", "--precision", "int8", "--advise-sqnr", "60"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t count = 0;
  for (size_t at = r.out.find("--precision-override '"); at != std::string::npos;
       at = r.out.find("--precision-override '", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << r.out;
  EXPECT_EQ(r.out.find("mixed precision for"), std::string::npos) << r.out;
}

// --advise-out writes the advice as a --precision-file: running with that file gives the plan the printed
// --precision-override gives (the same cycles), and the option needs --advise-sqnr.
TEST(SmallThings, AdviseOutWritesAPrecisionFileThatReproducesTheAdvisedPlan) {
  const std::string dir = temp_dir("advise_out");
  const std::string file = dir + "/advice.yaml";
  CommandResult r =
      npusim({"run", "demo", "-q", "--precision", "int8", "--advise-sqnr", "60", "--advise-out", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("written to " + file), std::string::npos) << r.out;
  const std::string yaml = read_file(file);
  EXPECT_NE(yaml.find("overrides:"), std::string::npos) << yaml;
  const size_t at = r.out.find("--precision-override '");
  ASSERT_NE(at, std::string::npos) << r.out;
  const size_t from = at + std::string("--precision-override '").size();
  const std::string overrides = r.out.substr(from, r.out.find('\'', from) - from);
  ASSERT_FALSE(overrides.empty());
  ASSERT_EQ(npusim({"run", "demo", "-q", "--precision", "int8", "--precision-override", overrides, "--report",
                    dir + "/o.json"})
                .exit_code,
            0);
  r = npusim(
      {"run", "demo", "-q", "--precision", "int8", "--precision-file", file, "--report", dir + "/f.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_eval(dir + "/f.json", "r['total_cycles']"), json_eval(dir + "/o.json", "r['total_cycles']"));
  EXPECT_NE(json_eval(dir + "/f.json", "r['total_cycles']"), "");
  r = npusim({"run", "demo", "-q", "--precision", "int8", "--advise-out", file});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--advise-out need --advise-sqnr"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace npusim::test

namespace npusim::test {
namespace {

// Every column of the compile table is documented (docs/backend.md, "The compile table"); the old
// undocumented `gb` is `groups`.
TEST(SmallThings, EveryColumnOfTheCompileTableIsDocumented) {
  const std::string dir = temp_dir("compile_table");
  const CommandResult r = npusim({"compile", "demo", "-o", dir + "/d.npu", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string header;
  while (std::getline(in, header) && header.rfind("layer ", 0) != 0) {
  }
  ASSERT_FALSE(header.empty()) << r.out;
  const std::string doc = read_file(std::string(NPUSIM_SOURCE_DIR) + "/docs/backend.md");
  const std::string section = doc.substr(doc.find("## The compile table"));
  std::istringstream columns(header);
  int n = 0;
  for (std::string c; columns >> c; ++n) EXPECT_NE(section.find("`" + c + "`"), std::string::npos) << c;
  EXPECT_EQ(n, 13);
}

// -v prints the mapping table and the precision plan, nothing else of the compiler (compile without it: what
// it wrote, and the phases' times); --graphs adds the
// graph after every pass, last: after the table (compile) or after the simulation's summary (run).
TEST(SmallThings, VerboseCompileAndRunPrintTheMappingTableAndGraphsOnlyOnRequest) {
  const std::string dir = temp_dir("verbose");
  CommandResult r = npusim({"compile", "demo", "-o", dir + "/d.npu", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t table = r.out.find("\nlayer "), plan = r.out.find("\nprecision plan: ");
  EXPECT_NE(r.out.find(" layers, "), std::string::npos);
  EXPECT_LT(r.out.find(" layers, "), table);
  EXPECT_LT(table, plan);
  EXPECT_NE(plan, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("== imported"), std::string::npos) << r.out;
  r = npusim({"compile", "demo", "-o", dir + "/d.npu", "-v", "--graphs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t graphs = r.out.find("graphs after import and after each pass (--graphs)\n== imported");
  EXPECT_LT(r.out.find("\nprecision plan: "), graphs);
  EXPECT_NE(graphs, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("== after placement", graphs), std::string::npos);
  // Without -v, compile says what it wrote and how long each phase took: no table, no plan.
  r = npusim({"compile", "demo", "-o", dir + "/d.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("\nlayer "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("precision plan: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.rfind("wrote " + dir + "/d.npu: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nhost time         import "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(-v prints the mapping table and the precision plan)"), std::string::npos) << r.out;
  r = npusim({"run", "demo", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nprecision plan: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("== imported"), std::string::npos) << r.out;
  r = npusim({"run", "demo", "--graphs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t total = r.out.find("\ntotal cycles"),
               run_graphs = r.out.find("graphs after import and after each pass");
  EXPECT_LT(total, run_graphs);
  EXPECT_NE(run_graphs, std::string::npos) << r.out;
}

// Plot labels never overlap (scripts/npusim_report.place_labels): ten labels on one point, and the
// roofline plot of a real run, whose named layers sit close together.
TEST(SmallThings, PlotLabelsDoNotOverlap) {
  const CommandResult r = run_command(
      {"/usr/bin/python3", "-c",
       "import sys; sys.path.insert(0, sys.argv[1])\n"
       "import npusim_report\n"
       "plt = npusim_report.pyplot()\n"
       "fig, ax = plt.subplots(figsize=(6, 4)); ax.set_xlim(0, 10); ax.set_ylim(0, 10)\n"
       "legend = ax.legend(handles=[ax.plot([0], [0], label='x')[0]], loc='upper right')\n"
       "fig.tight_layout()\n"
       "placed = npusim_report.place_labels(ax, [('label number %d' % i, (5, 5)) for i in range(10)], "
       "avoid=[legend], fontsize=7)\n"
       "rd = fig.canvas.get_renderer()\n"
       "boxes = [a.get_window_extent(rd) for a in placed] + [legend.get_window_extent(rd)]\n"
       "print(len(placed) >= 4, not any(boxes[i].overlaps(boxes[j]) for i in range(len(boxes)) "
       "for j in range(i + 1, len(boxes))))\n",
       std::string(NPUSIM_SOURCE_DIR) + "/scripts"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "True True\n") << r.err;
}

// One naming scheme in the timeline too: given the run's report, its layer labels are the report's display
// names (the trace carries full names; without a report the timeline shortens them itself).
TEST(SmallThings, TimelineLabelsLayersByTheirDisplayNamesGivenTheReport) {
  const std::string dir = temp_dir("timeline_names");
  const std::string topo = dir + "/t.csv";
  write_topology(topo,
                 "Conv1, 16, 16, 3, 3, 8, 16, 1,\n"
                 "a_layer_name_far_longer_than_twenty_eight_characters, 16, 16, 1, 1, 16, 16, 1,\n");
  ASSERT_EQ(
      npusim({"run", topo, "-q", "--report", dir + "/r.json", "--trace-csv", dir + "/trace.csv"}).exit_code,
      0);
  const std::string scripts = std::string(NPUSIM_SOURCE_DIR) + "/scripts";
  CommandResult r = run_command({"/usr/bin/python3", scripts + "/plot_timeline.py", dir + "/trace.csv",
                                 "--report", dir + "/r.json", "-o", dir + "/t.png"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command({"/usr/bin/python3", "-c",
                   "import sys; sys.path.insert(0, sys.argv[1]); import plot_timeline as p\n"
                   "print(p.layer_label(sys.argv[2])(sys.argv[3]))",
                   scripts, dir + "/r.json", "a_layer_name_far_longer_than_twenty_eight_characters"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, json_eval(dir + "/r.json", "r['layers'][1]['display_name']") + "\n");
  EXPECT_LE(r.out.size(), 29u) << r.out;
}

// The summary's figures start in one column after their labels, the DRAM line's too ("dram (ideal)  read"
// stood out by four columns).
TEST(SmallThings, SummaryFiguresStartInOneColumn) {
  for (const char* dram : {"ideal", "hbm2", "lpddr4_4266"}) {
    const CommandResult r = npusim({"run", "demo", "--set", std::string("dram.model=") + dram});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string label = std::string("\ndram (") + dram + ")";
    const size_t at = r.out.find(label);
    ASSERT_NE(at, std::string::npos) << r.out;
    const size_t read = r.out.find(" read ", at);
    EXPECT_EQ(read - at - 1, std::max<size_t>(label.size() - 1, 17)) << r.out;
    EXPECT_NE(r.out.find("\ndma               "), std::string::npos) << r.out;
  }
}

// A plot's title names the model, configuration, precision plan and what was left out: MobileNetV2's
// roofline title ran past both edges of the figure. npusim_report.fit_title wraps it until it fits.
TEST(SmallThings, PlotTitlesFitTheFigure) {
  const CommandResult r =
      run_command({"/usr/bin/python3", "-c",
                   "import sys; sys.path.insert(0, sys.argv[1])\n"
                   "import npusim_report\n"
                   "plt = npusim_report.pyplot()\n"
                   "fig, ax = plt.subplots(figsize=(8, 6))\n"
                   "long = 'mobilenet_v2.onnx on edge: 53 layers; precision mixed: 40 int8, 3 fp16; 3 layers "
                   "without MACs or '"
                   " 'DRAM traffic not shown; model efficiency 142%'\n"
                   "title = npusim_report.fit_title(fig, ax.set_title(long, fontsize=10))\n"
                   "fig.tight_layout()\n"
                   "box = title.get_window_extent(fig.canvas.get_renderer())\n"
                   "print(box.x0 >= 0, box.x1 <= fig.bbox.width, box.y1 <= fig.bbox.height, "
                   "title.get_text().count('\\n') >= 1,"
                   " title.get_text().replace('\\n', ' ') == long)\n",
                   std::string(NPUSIM_SOURCE_DIR) + "/scripts"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "True True True True True\n") << r.err;
}

// docs/report.md's field tables against what npusim writes (tests/e2e/check_report_docs.py): every field
// of these reports is documented, and every documented field of a section they write is written. The
// reports together write every section: the compiler's view with int8 and accuracy, an end-to-end
// pipeline, generation, dynamic profiles and requests, a depthwise conv (array_macs).
TEST(Reports, DocsReportMdNamesExactlyTheFieldsTheReportsWrite) {
  const std::string src = NPUSIM_SOURCE_DIR;
  const std::string dir = temp_dir("report_docs");
  const CommandResult models =
      run_command({"/usr/bin/python3", src + "/tests/e2e/make_report_models.py", dir});
  ASSERT_EQ(models.exit_code, 0) << models.err;
  write_file(dir + "/requests.csv", "arrival_ms,seq\n0,8\n1,12\n");
  const std::vector<std::vector<std::string>> runs = {
      {"demo", "--precision", "int8", "--accuracy", "--cle"},
      {"demo", "--pipeline", src + "/configs/pipelines/classifier.yaml"},
      {"llm:layers=1,hidden=64,heads=2,kv_heads=1,ffn=128,vocab=100", "--generate", "4:2"},
      {dir + "/dyn.onnx", "--dynamic", "seq=8,16", "--requests", dir + "/requests.csv"},
      {dir + "/dw.onnx"},
  };
  std::vector<std::string> check = {"/usr/bin/python3", src + "/tests/e2e/check_report_docs.py",
                                    src + "/docs/report.md"};
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> args = {"run", "-q", "--report", dir + "/r" + std::to_string(i) + ".json"};
    args.insert(args.begin() + 1, runs[i].begin(), runs[i].end());
    const CommandResult r = npusim(args);
    ASSERT_EQ(r.exit_code, 0) << runs[i][0] << ": " << r.err;
    check.push_back(dir + "/r" + std::to_string(i) + ".json");
  }
  const CommandResult r = run_command(check);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace npusim::test
