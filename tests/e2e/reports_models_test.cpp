// Reports on a real model (label models; needs the exported MobileNetV2 of tests/models): run and exec
// of its compiled program agree, and the trace's slices nest on every track.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

const std::string kModel = std::string(NPUSIM_MODELS_DIR) + "/mobilenet_v2.onnx";

// The example: `run` reported 301 M MACs, `exec` of the same program 907 M (the zeros between
// the depthwise convs' groups). Both now count useful MACs; the slots are layers[].array_macs.
TEST(ReportsModels, MobileNetV2RunAndExecReportTheSameMacs) {
  const std::string dir = temp_dir("reports-models-macs");
  CommandResult r = run_command({NPUSIM_BIN, "compile", kModel, "-q", "-o", dir + "/m.npu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command({NPUSIM_BIN, "exec", dir + "/m.npu", "-q", "--report", dir + "/exec.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--report", dir + "/run.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string same =
      "r['total_cycles'], r['macs'], r['array_utilization'], r['precision']['utilization']";
  EXPECT_EQ(json_eval(dir + "/run.json", same), json_eval(dir + "/exec.json", same));
  EXPECT_EQ(json_eval(dir + "/exec.json", "r['macs'] == sum(l['macs'] for l in r['layers'])"), "True");
}

// Trace viewers expect the slices of one track to nest (each pair disjoint or one inside the other).
// The DRAM channel tracks once broke that: 4 141 of 9 464 MobileNetV2 slices overlapped without nesting,
// the two DMA engines' transfers crossing on one channel. Checked on every track of the trace CSV (in
// cycles, exact) and on the Chrome JSON's tracks (its tids).
TEST(ReportsModels, MobileNetV2TraceSlicesNestOnEveryTrack) {
  const std::string dir = temp_dir("reports-models-trace");
  const CommandResult r = run_command(
      {NPUSIM_BIN, "run", kModel, "-q", "--trace-csv", dir + "/t.csv", "--trace", dir + "/t.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CommandResult check = run_command(
      {"/usr/bin/python3", "-c",
       "import csv, json, sys\n"
       "from collections import defaultdict\n"
       "def crossings(tracks):\n"
       "    out = {}\n"
       "    for unit, slices in tracks.items():\n"
       "        slices.sort(key=lambda s: (s[0], -s[1]))\n"
       "        ends, n = [], 0\n"
       "        for a, b in slices:\n"
       "            while ends and ends[-1] <= a: ends.pop()\n"
       "            if ends and b > ends[-1]: n += 1\n"
       "            ends.append(b)\n"
       "        if n: out[unit] = n\n"
       "    return out\n"
       "rows = defaultdict(list)\n"
       "for x in csv.DictReader(open(sys.argv[1], newline='')):\n"
       "    rows[x['unit']].append((int(x['start_cycle']), int(x['end_cycle'])))\n"
       "slices = defaultdict(list)\n"
       "for e in json.load(open(sys.argv[2]))['traceEvents']:\n"
       "    if e['ph'] == 'X': slices[e['tid']].append((e['args']['start_cycle'], e['args']['end_cycle']))\n"
       "dram = sum(len(v) for u, v in rows.items() if u.startswith('dram_ch'))\n"
       "print(crossings(rows), crossings(slices), dram > 1000, len(rows) == len(slices))\n",
       dir + "/t.csv", dir + "/t.json"});
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ(check.out, "{} {} True True\n");
}

// At full-run scale most of MobileNetV2's slices are narrower than a pixel: the timeline joins slices
// less than a pixel apart into one bar (drawn one by one they alias or vanish) and says so; its layer
// labels keep their distance (at most one per 3% of the width: about 33, of 56 layers).
TEST(ReportsModels, MobileNetV2TimelineJoinsSlicesSmallerThanAPixel) {
  const std::string dir = temp_dir("reports-models-timeline");
  CommandResult r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--trace-csv", dir + "/t.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command({"/usr/bin/python3", std::string(NPUSIM_SOURCE_DIR) + "/scripts/plot_timeline.py",
                   dir + "/t.csv", "-o", dir + "/t.png"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t slices = std::stoul(r.out.substr(r.out.find("units, ") + 7));
  const size_t bars = std::stoul(r.out.substr(r.out.find("drawn as ") + 9));
  EXPECT_GT(slices, 10000u) << r.out;
  EXPECT_LT(bars * 5, slices) << r.out;  // drawn one by one, every slice would be a bar
}

// `compile -v --graphs` once printed 1 144 lines for MobileNetV2, 954 of them over 200 characters (its
// ONNX paths, a node's inputs, outputs and attributes on one line; the table's mapping descriptions). The
// table stays within 200 columns and the graphs within 120, with every node's full name still on a line
// of its own.
TEST(ReportsModels, MobileNetV2VerboseCompileLinesHaveABoundedWidth) {
  const std::string dir = temp_dir("reports-models-verbose");
  const CommandResult r =
      run_command({NPUSIM_BIN, "compile", kModel, "-o", dir + "/m.npu", "-v", "--graphs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t graphs = r.out.find("graphs after import and after each pass");
  ASSERT_NE(graphs, std::string::npos) << r.out;
  std::istringstream in(r.out);
  size_t at = 0, longest_table = 0, longest_graph = 0, lines = 0;
  for (std::string line; std::getline(in, line); at += line.size() + 1, ++lines) {
    size_t& longest = at < graphs ? longest_table : longest_graph;
    longest = std::max(longest, line.size());
  }
  EXPECT_GT(lines, 1000u);
  EXPECT_GT(longest_table, 150u);  // the table's own columns take 133
  EXPECT_LE(longest_table, 200u);
  EXPECT_LE(longest_graph, 120u);
  EXPECT_NE(r.out.find("\n  /features/features.1/conv/conv.0/conv.0.0/Conv =", graphs), std::string::npos);
  EXPECT_NE(
      r.out.find("\n      -> /features/features.1/conv/conv.0/conv.0.0/Conv_output_0:float32[1x32x112x112]\n",
                 graphs),
      std::string::npos);
  EXPECT_NE(
      r.out.find("\n      {dilations=[1,1], group=32, kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]}\n",
                 graphs),
      std::string::npos);
}

}  // namespace
}  // namespace npusim::test
