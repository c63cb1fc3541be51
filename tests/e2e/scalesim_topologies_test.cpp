// SCALE-Sim v2's own topology files (tests/e2e/scalesim_topologies: the 4k-image ResNet-50 and MobileNet and
// UNet of scalesim-project/scale-sim-v2 topologies/conv_nets) on configs/scalesim.yaml, weight- and
// output-stationary: every row's compute_cycles is the count SCALE-Sim's compute model steps for it, worked
// out here from SCALE-Sim v2's sources, not from npusim's:
// - topology_utils.py: ofmap = ceil((ifmap - filter + stride) / stride) per side, the GEMM of a row is
//   M = ofmap pixels x K = filter h x w x channels x N = filters;
// - systolic_compute_ws.py: Sr = K, Sc = N, T = M; each of the ceil(Sr / R) x ceil(Sc / C) folds has
//   R + T + (R - 1) + (C - 1) demand rows (the filter shifted in, the stream, the skew fill and drain);
// - systolic_compute_os.py: Sr = M, Sc = N, T = K; each fold has T + (C - 1) + (R - 1) rows.
// SCALE-Sim prints the index of the last of those rows, one less than their count, which npusim reports
// (docs/architecture.md, "SCALE-Sim correspondence"). The rows stream up to 4.2 M output pixels; SCALE-Sim
// pays each fold's preload, fill and drain once per layer, whatever its SRAM, and so does npusim when the
// layer is one tile: the preset's 4 GiB scratchpads hold every row whole, run as a user runs it (no --set
// but the dataflow).
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace npusim::test {
namespace {

struct Row {
  std::string name;
  int64_t m = 0, k = 0, n = 0;  // output pixels, filter window, filters
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The conv rows of a SCALE-Sim topology file: a header, then "name, H, W, R, S, C, filters, stride," (blank
// lines, '#' lines and a remark after the last column skipped).
std::vector<Row> rows_of(const std::string& text) {
  std::vector<Row> rows;
  std::istringstream in(text);
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string v; std::getline(fields, v, ',');) f.push_back(v);
    Row r;
    r.name = f.at(0);
    std::vector<int64_t> v;
    for (size_t i = 1; i < f.size() && v.size() < 7; ++i) v.push_back(std::stoll(f[i]));
    const int64_t h = v.at(0), w = v.at(1), fh = v.at(2), fw = v.at(3), c = v.at(4), filters = v.at(5),
                  s = v.at(6);
    r.m = ceil_div(h - fh + s, s) * ceil_div(w - fw + s, s);
    r.k = fh * fw * c;
    r.n = filters;
    rows.push_back(r);
  }
  return rows;
}

// The demand-matrix rows SCALE-Sim's compute model steps for a row on an R x C array.
int64_t scalesim_cycles(const Row& r, const std::string& dataflow, int64_t R, int64_t C) {
  if (dataflow == "ws") return ceil_div(r.k, R) * ceil_div(r.n, C) * (R + r.m + (R - 1) + (C - 1));
  return ceil_div(r.m, R) * ceil_div(r.n, C) * (r.k + (C - 1) + (R - 1));
}

struct Case {
  std::string file, dataflow;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.file << " " << c.dataflow; }

class ScaleSimTopologies : public ::testing::TestWithParam<Case> {};

TEST_P(ScaleSimTopologies, EveryRowsComputeCyclesAreScaleSimsCount) {
  const Case& c = GetParam();
  const std::string topo =
      std::string(NPUSIM_SOURCE_DIR) + "/tests/e2e/scalesim_topologies/" + c.file + ".csv";
  const std::string dir = temp_dir("scalesim-" + c.file + "-" + c.dataflow);
  const std::string report = dir + "/r.json";
  const CommandResult run =
      npusim({"run", topo, "--config", std::string(NPUSIM_SOURCE_DIR) + "/configs/scalesim.yaml", "--set",
              "systolic_array.dataflow=" + c.dataflow, "-q", "--report", report});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::map<std::string, int64_t> got;
  std::istringstream layers(
      json_eval(report, "'\\n'.join(l['name'] + ' ' + str(l['compute_cycles']) for l in r['layers'])"));
  for (std::string name; layers >> name;) layers >> got[name];
  const std::vector<Row> rows = rows_of(read_file(topo));
  ASSERT_EQ(got.size(), rows.size());
  for (const Row& r : rows) {
    ASSERT_TRUE(got.count(r.name)) << r.name;
    EXPECT_EQ(got[r.name], scalesim_cycles(r, c.dataflow, 32, 32))
        << c.file << " " << c.dataflow << " " << r.name << ": M " << r.m << " K " << r.k << " N " << r.n;
  }
}

INSTANTIATE_TEST_SUITE_P(ConvNets, ScaleSimTopologies,
                         ::testing::Values(Case{"Resnet50_4k_no_pool", "ws"},
                                           Case{"Resnet50_4k_no_pool", "os"}, Case{"UNet_2d", "ws"},
                                           Case{"UNet_2d", "os"}, Case{"mobilnet_4k", "ws"},
                                           Case{"mobilnet_4k", "os"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return i.param.file + "_" + i.param.dataflow;
                         });

}  // namespace
}  // namespace npusim::test
