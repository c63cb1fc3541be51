// Tests of the SystemC model through arch::simulate: cycles from first principles, stall
// accounting, traces, repeated runs, failures.
#include <gtest/gtest.h>

#include <numeric>
#include <sstream>

#include "arch/simulate.h"
#include "isa/timing/systolic.h"
#include "test_util.h"
#include "traces/sink.h"

namespace npusim {
namespace {

using testing::JsonParser;
using testing::load_program;
using traces::Reason;

isa::NpuConfig small_config(isa::Dataflow df = isa::Dataflow::kWs) {
  isa::NpuConfig c;
  c.frequency_mhz = 1000;
  c.sequencer.dispatch_cycles = 0;
  c.systolic_array.rows = 4;
  c.systolic_array.cols = 4;
  c.systolic_array.dataflow = df;
  c.systolic_array.double_buffered = false;
  return c;
}

const traces::UnitReport& unit(const traces::Report& r, const std::string& name) {
  for (const auto& u : r.units) {
    if (u.name == name) return u;
  }
  throw std::runtime_error("no unit " + name);
}

void expect_adds_up(const traces::Report& r) {
  EXPECT_EQ(r.breakdown.total(), r.total_cycles);
  for (const auto& l : r.layers) {
    EXPECT_EQ(l.breakdown.total(), l.cycles) << l.name;
    EXPECT_EQ(l.end_cycle - l.start_cycle, l.cycles) << l.name;
    EXPECT_LE(l.end_cycle, r.total_cycles) << l.name;
  }
  for (const auto& u : r.units) EXPECT_EQ(u.busy + u.idle + u.stalled(), r.total_cycles) << u.name;
}

// The 8 x 4 x 4 tile of gemm_tile.s on a 4 x 4 array. Phases per fold, from the array's geometry:
// stationary shift-in R (ws, is), skewed fill R-1, T streamed rows, drain C-1.
TEST(Simulate, Gemm4x4EachDataflowTakesFillPlusStreamPlusDrainPerFold) {
  const isa::Program p = load_program("gemm_tile.s");
  const int64_t R = 4, C = 4, M = 8, K = 4, N = 4;
  struct Case {
    isa::Dataflow df;
    int64_t folds, preload, t;
  } cases[] = {
      {isa::Dataflow::kWs, (K / R) * (N / C), R, M},  // weights stationary, 1 fold, rows of A stream
      {isa::Dataflow::kOs, (M / R) * (N / C), 0, K},  // outputs stationary, 2 folds, K streams
      {isa::Dataflow::kIs, (K / R) * (M / C), R, N},  // inputs stationary, 2 folds, B columns stream
  };
  for (const Case& c : cases) {
    const traces::Report r = arch::simulate(p, small_config(c.df), {});
    const int64_t expected = c.folds * (c.preload + (R - 1) + c.t + (C - 1));
    EXPECT_EQ(r.total_cycles, static_cast<uint64_t>(expected)) << isa::kDataflowNames[static_cast<int>(c.df)];
    ASSERT_EQ(r.layers.size(), 1u);
    EXPECT_EQ(r.layers[0].compute_cycles, static_cast<uint64_t>(expected));
    EXPECT_EQ(r.layers[0].macs, static_cast<uint64_t>(M * K * N));
    EXPECT_EQ(r.breakdown.compute, r.total_cycles);
    EXPECT_DOUBLE_EQ(r.array_utilization, double(M * K * N) / (R * C * expected));
    expect_adds_up(r);
  }
}

// chained_instructions: a MATMUL that follows another on the array enters right behind its last row, so
// the run pays one preload and one skew fill and drain (R - 1 + C - 1); a stream shorter than R waits for
// its operand to shift in behind the previous fold (isa/timing/systolic.h).
TEST(Simulate, ChainedMatmulsPayOnePreloadAndOneFillAndDrainPerRun) {
  const isa::Program p = load_program("chained_matmuls.s");
  const int64_t R = 4, C = 4, skew = (R - 1) + (C - 1);
  isa::NpuConfig c = small_config();
  c.systolic_array.double_buffered = true;
  const traces::Report apart = arch::simulate(p, c, {});
  // One fold each: preload, stream and skew fill and drain; three streams of 8 rows and one of 2.
  EXPECT_EQ(apart.layers.at(0).compute_cycles, static_cast<uint64_t>(3 * (R + 8 + skew) + (R + 2 + skew)));
  c.systolic_array.chained_instructions = true;
  const traces::Report chained = arch::simulate(p, c, {});
  // The first pays its preload; the 2-row stream waits R - 2 cycles behind the third's last row.
  EXPECT_EQ(chained.layers.at(0).compute_cycles, static_cast<uint64_t>(R + 3 * 8 + 2 + (R - 2) + skew));
  EXPECT_EQ(chained.total_cycles, apart.total_cycles - static_cast<uint64_t>(3 * (R + skew) - (R - 2)));
  expect_adds_up(chained);
  // Without shadow registers nothing chains (the key is rejected by the loader; the model ignores it).
  c.systolic_array.double_buffered = false;
  c.systolic_array.chained_instructions = true;
  isa::NpuConfig plain = c;
  plain.systolic_array.chained_instructions = false;
  EXPECT_EQ(arch::simulate(p, c, {}).total_cycles, arch::simulate(p, plain, {}).total_cycles);
}

TEST(Simulate, PeModelGivesTheSameCyclesAsTheTileModel) {
  const isa::Program p = load_program("gemm_tile.s");
  for (auto df : {isa::Dataflow::kWs, isa::Dataflow::kOs, isa::Dataflow::kIs}) {
    isa::NpuConfig tile = small_config(df), pe = small_config(df);
    tile.systolic_array.double_buffered = pe.systolic_array.double_buffered = true;
    pe.systolic_array.model = isa::ArrayModel::kPe;
    EXPECT_EQ(arch::simulate(p, tile, {}).total_cycles, arch::simulate(p, pe, {}).total_cycles);
  }
}

TEST(Simulate, DmaBoundLoadTakesBytesOverBandwidth) {
  const isa::Program p = load_program("dma_bound.s");
  isa::NpuConfig c = small_config();
  c.dram.model = isa::DramModel::kSimple;
  c.dram.bandwidth_gbps = 10;
  c.dram.latency_ns = 100;
  c.dma.max_outstanding = 64;
  c.sram.input.size_kib = 1024;
  const traces::Report r = arch::simulate(p, c, {});
  const double bytes = 1 << 20;
  const double expected_cycles = bytes / 10.0 * c.frequency_mhz / 1000.0;  // ns at 1 GHz
  EXPECT_NEAR(static_cast<double>(r.total_cycles), expected_cycles, 0.02 * expected_cycles);
  EXPECT_EQ(r.dram.bytes_read, 1u << 20);
  EXPECT_NEAR(r.dram.avg_bandwidth_gbps, 10.0, 0.2);
  EXPECT_EQ(r.dma.bursts, (1u << 20) / 64);
  EXPECT_GT(r.breakdown.memory, r.total_cycles * 99 / 100);
  expect_adds_up(r);
}

TEST(Simulate, DependencyStallIsChargedToSchedulingInReportAndTrace) {
  const isa::Program p = load_program("dependency_stall.s");
  isa::NpuConfig c = small_config();
  std::stringstream csv;
  traces::CsvTraceSink sink(csv);
  arch::RunOptions o;
  o.sink = &sink;
  const traces::Report r = arch::simulate(p, c, o);
  const auto mm = isa::timing::matrix_cycles(p.instructions[0], c.systolic_array);
  // The RELU is dispatched at cycle 0 with the MATMUL and waits for all of it.
  EXPECT_EQ(unit(r, "vector").stalls[static_cast<int>(Reason::kScheduling)], static_cast<uint64_t>(mm.total));
  EXPECT_EQ(unit(r, "matrix").busy, static_cast<uint64_t>(mm.total));
  const std::string text = csv.str();
  EXPECT_NE(
      text.find("vector,stall: scheduling,VEC,0," + std::to_string(mm.total) + ",stall,scheduling,0,act"),
      std::string::npos)
      << text;
  // The act layer itself starts after the stall: its cycles are the RELU's.
  EXPECT_EQ(r.layers[1].start_cycle, static_cast<uint64_t>(mm.total));
  expect_adds_up(r);
}

TEST(Simulate, StridedReadsOnOneBankSerialise) {
  const isa::Program p = load_program("bank_conflict.s");
  isa::NpuConfig c = small_config(isa::Dataflow::kOs);
  c.sram.input.banks = 8;
  c.sram.input.bank_width_bytes = 16;
  c.sram.input.ports = 1;
  const traces::Report r = arch::simulate(p, c, {});
  const int64_t R = 4, C = 4, K = 8;
  const int64_t clean = K + (R - 1) + (C - 1);
  // 128-byte row stride = banks * width: the 4 rows' elements share one bank, so each of the K
  // stream cycles takes 4 single-port accesses.
  const int64_t strided = clean + K * (4 - 1);
  EXPECT_EQ(r.layers[0].cycles, static_cast<uint64_t>(strided));
  EXPECT_EQ(r.layers[1].cycles, static_cast<uint64_t>(clean));
  EXPECT_EQ(r.total_cycles, static_cast<uint64_t>(strided + clean));
  EXPECT_EQ(r.sram.bank_conflict_cycles, static_cast<uint64_t>(K * 3));
  EXPECT_EQ(r.sram.bank_conflicts, 1u);
  EXPECT_EQ(unit(r, "matrix").stalls[static_cast<int>(Reason::kBankConflict)], static_cast<uint64_t>(K * 3));
  EXPECT_EQ(r.layers[0].breakdown.memory, static_cast<uint64_t>(K * 3));
  expect_adds_up(r);
}

TEST(Simulate, MisalignedRowsCostExtraBursts) {
  isa::NpuConfig c = small_config();
  c.dram.model = isa::DramModel::kSimple;
  c.dram.bandwidth_gbps = 1;  // 1 byte per cycle: bursts dominate
  c.dram.latency_ns = 0;
  c.dma.setup_cycles = 0;
  const traces::Report al = arch::simulate(load_program("aligned_dma.s"), c, {});
  const traces::Report mis = arch::simulate(load_program("misaligned_dma.s"), c, {});
  EXPECT_EQ(al.dma.bursts, 16u);
  EXPECT_EQ(al.dma.misaligned_bursts, 0u);
  EXPECT_EQ(mis.dma.bursts, 32u);
  EXPECT_EQ(mis.dma.misaligned_bursts, 16u);
  // Each extra 64-byte burst occupies the 1 GB/s path for 64 ns = 64 cycles.
  EXPECT_EQ(mis.total_cycles - al.total_cycles, 16u * 64);
  EXPECT_EQ(mis.dma.misalignment_extra_cycles, 16u * 64);
}

TEST(Simulate, ChromeTraceParsesWithOneTrackPerUnitAndSlicesNamedByLayer) {
  const isa::Program p = load_program("all_opcodes.s");
  isa::NpuConfig c;  // the default (edge) machine with rows for all_opcodes.s's 64 x 2 fc weights
  c.systolic_array.rows = 64;
  std::stringstream json, csv;
  traces::ChromeTraceSink chrome(json);
  traces::CsvTraceSink table(csv);
  traces::TeeSink tee({&chrome, &table});
  arch::RunOptions o;
  o.sink = &tee;
  const traces::Report r = arch::simulate(p, c, o);
  const testing::Json doc = JsonParser::parse(json.str());
  std::map<int, std::string> tracks;
  std::map<std::string, int> slices_by_name;
  size_t x = 0;
  for (const testing::Json& e : doc["traceEvents"].arr) {
    if (e["ph"].str == "M" && e["name"].str == "thread_name")
      tracks[int(e["tid"].num)] = e["args"]["name"].str;
    if (e["ph"].str == "X") {
      ++x;
      ++slices_by_name[e["name"].str];
      EXPECT_GE(e["dur"].num, 0);
      EXPECT_TRUE(e["args"].has("opcode"));
    }
  }
  for (const char* t : {"sequencer", "load", "matrix", "vector", "store", "host", "dma0", "dma1",
                        "dram_ch0.dma0", "dram_ch0.dma1", "dram_ch1.dma0", "dram_ch1.dma1"}) {
    bool found = false;
    for (auto& [tid, name] : tracks) found |= name == t;
    EXPECT_TRUE(found) << t;
  }
  for (const isa::Layer& l : p.layers) EXPECT_GT(slices_by_name[l.name], 0) << l.name;
  // The CSV has the same events, one per line after the header.
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "unit,name,opcode,start_cycle,end_cycle,kind,reason,bytes,layer");
  size_t rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, x);
  // The report JSON parses too and carries the documented fields.
  const testing::Json rep = JsonParser::parse(traces::report_json(r));
  for (const char* k : {"total_cycles", "frequency_mhz", "latency_ms", "macs", "array_utilization",
                        "breakdown", "dram", "units", "layers", "sim", "dma", "sram"}) {
    EXPECT_TRUE(rep.has(k)) << k;
  }
  ASSERT_EQ(rep["layers"].arr.size(), p.layers.size());
  // all_opcodes.s runs its last layer (softmax) as a host call.
  EXPECT_EQ(rep["layers"].arr.back()["placement"].str, "host");
  EXPECT_EQ(rep["layers"].arr.front()["placement"].str, "npu");
  expect_adds_up(r);
}

TEST(Simulate, BreakdownsAddUpOnAPipelinedProgram) {
  const isa::Program p = load_program("pipeline.s");
  for (auto model : {isa::DramModel::kIdeal, isa::DramModel::kSimple, isa::DramModel::kDdr4_3200,
                     isa::DramModel::kLpddr4_4266, isa::DramModel::kHbm2}) {
    isa::NpuConfig c;
    c.dram.model = model;
    const traces::Report r = arch::simulate(p, c, {});
    expect_adds_up(r);
    EXPECT_GT(r.breakdown.compute, 0u);
    EXPECT_GT(r.breakdown.memory, 0u);
    EXPECT_EQ(r.dram.bytes_read, 4096u + 8192 * 2 + 16384);
    EXPECT_EQ(r.dram.bytes_written, 8192u * 2 + 16384 * 4);
  }
}

TEST(Simulate, RepeatedRunsInOneProcessGiveIdenticalReports) {
  const isa::Program p = load_program("pipeline.s");
  isa::NpuConfig c;
  std::string first;
  for (int i = 0; i < 3; ++i) {
    std::stringstream trace;
    traces::ChromeTraceSink sink(trace);
    arch::RunOptions o;
    o.sink = &sink;
    traces::Report r = arch::simulate(p, c, o);
    r.sim.wall_seconds = 0;
    const std::string text = traces::report_json(r) + trace.str();
    if (i == 0) first = text;
    EXPECT_EQ(text, first);
  }
  // A different program in between still works (a fresh netlist per run).
  EXPECT_GT(arch::simulate(load_program("gemm_tile.s"), small_config(), {}).total_cycles, 0u);
}

TEST(Simulate, DeadlockNamesTheWaitingQueueAndToken) {
  try {
    arch::simulate(load_program("deadlock.s"), isa::NpuConfig{}, {});
    FAIL() << "no deadlock reported";
  } catch (const arch::SimError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("deadlock"), std::string::npos) << m;
    EXPECT_NE(
        m.find("matrix queue: instruction 1 (MATMUL, layer gemm) waits for a token from the vector queue"),
        std::string::npos)
        << m;
  }
}

TEST(Simulate, AccessPastSramCapacityIsASimError) {
  isa::Program p = load_program("dma_bound.s");  // 1 MiB into a 256 KiB input buffer
  EXPECT_THROW(arch::simulate(p, isa::NpuConfig{}, {}), arch::SimError);
}

TEST(Simulate, FunctionalModeRunsTheHooksAndMatchesTimingMode) {
  const isa::Program p = load_program("all_opcodes.s");
  isa::NpuConfig c;
  c.systolic_array.rows = 64;
  bool before = false, after = false;
  arch::RunOptions o;
  o.functional = true;
  o.before_run = [&](arch::datapath::MachineState&) { before = true; };
  o.after_run = [&](arch::datapath::MachineState& s) {
    after = true;
    EXPECT_FALSE(s.tensors().empty());
  };
  const traces::Report f = arch::simulate(p, c, o);
  const traces::Report t = arch::simulate(p, c, {});
  EXPECT_TRUE(before && after);
  EXPECT_TRUE(f.sim.functional);
  EXPECT_EQ(f.total_cycles, t.total_cycles);
}

// Two LOADs of the load queue writing the same SRAM bytes, the later one handed to an engine that starts
// it first: the bytes are the later LOAD's. The queue takes effect in program order, as the compiler's
// dependency tokens assume (compiler/backend/core/emitter.h); before, a LOAD's data landed when its
// engine started it, and MobileNetV3-Small int8's SE Mul read a conv's constants that way.
TEST(Simulate, LoadsOfOneQueueWritingTheSameBytesTakeEffectInProgramOrder) {
  const isa::Program p = load_program("load_waw.s");
  isa::NpuConfig c;
  c.dma.engines = 2;
  c.dram.model = isa::DramModel::kIdeal;  // no DRAM contention: each transfer takes its SRAM side
  std::vector<uint8_t> got(64);
  arch::RunOptions o;
  o.functional = true;
  o.before_run = [&](arch::datapath::MachineState& s) {
    s.dram().fill(0x28000, 0xAA, 64);  // the earlier LOAD's bytes
    s.dram().fill(0x30000, 0x55, 64);  // the later LOAD's
  };
  o.after_run = [&](arch::datapath::MachineState& s) {
    const uint8_t* b = s.sram(isa::Buffer::kAccumulator).data();
    got.assign(b, b + 64);
  };
  const traces::Report f = arch::simulate(p, c, o);
  EXPECT_EQ(got, std::vector<uint8_t>(64, 0x55));
  // The timing is the program's, functional or not.
  EXPECT_EQ(f.total_cycles, arch::simulate(p, c, {}).total_cycles);
}

}  // namespace
}  // namespace npusim
