// Reports on a real model (label models; needs the exported MobileNetV2 of tests/models): run and exec
// of its compiled program agree, and the trace's slices nest on every track.
#include <gtest/gtest.h>

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
  const std::string same = "r['total_cycles'], r['macs'], r['array_utilization'], r['precision']['utilization']";
  EXPECT_EQ(json_eval(dir + "/run.json", same), json_eval(dir + "/exec.json", same));
  EXPECT_EQ(json_eval(dir + "/exec.json", "r['macs'] == sum(l['macs'] for l in r['layers'])"), "True");
}

// Trace viewers expect the slices of one track to nest (each pair disjoint or one inside the other).
// The DRAM channel tracks once broke that: 4 141 of 9 464 MobileNetV2 slices overlapped without nesting,
// the two DMA engines' transfers crossing on one channel. Checked on every track of the trace CSV (in
// cycles, exact) and on the Chrome JSON's tracks (its tids).
TEST(ReportsModels, MobileNetV2TraceSlicesNestOnEveryTrack) {
  const std::string dir = temp_dir("reports-models-trace");
  const CommandResult r = run_command({NPUSIM_BIN, "run", kModel, "-q", "--trace-csv", dir + "/t.csv", "--trace",
                                       dir + "/t.json"});
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
  r = run_command({"/usr/bin/python3", std::string(NPUSIM_SOURCE_DIR) + "/scripts/plot_timeline.py", dir + "/t.csv",
                   "-o", dir + "/t.png"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t slices = std::stoul(r.out.substr(r.out.find("units, ") + 7));
  const size_t bars = std::stoul(r.out.substr(r.out.find("drawn as ") + 9));
  EXPECT_GT(slices, 10000u) << r.out;
  EXPECT_LT(bars * 10, slices) << r.out;
}

}  // namespace
}  // namespace npusim::test
