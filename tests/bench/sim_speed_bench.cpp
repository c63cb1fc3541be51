// Simulation speed: simulated instructions per host second on a large synthetic program (a
// pipelined LOAD -> MATMUL -> VEC -> STORE loop over many small tiles, tokens balanced so nothing
// accumulates). Run: npusim_bench [--benchmark_filter=...]
//
// Memory: each size also reports the program's own bytes (instructions x sizeof(isa::Instruction))
// and the process's peak RSS. Run one size per process (--benchmark_filter=BM_SimulateTiming/N$)
// to compare peaks: what the simulator adds on top of the program does not grow with its length.
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <cstdlib>
#include <systemc>

#include "arch/simulate.h"

namespace {

using namespace npusim;
using isa::Field;

isa::Instruction make(isa::Opcode op) {
  isa::Instruction i;
  i.opcode = op;
  return i;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

int64_t mask(isa::Queue q) { return int64_t{1} << static_cast<int>(q); }

// `tiles` repetitions of: LOAD A (ping-pong), MATMUL, VEC requantize, STORE; 4 instructions each.
isa::Program synthetic(int64_t tiles) {
  isa::Program p;
  p.layers.push_back({"tile", "Gemm"});
  p.instructions.reserve(static_cast<size_t>(tiles) * 4 + 1);
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t half = t % 2;
    isa::Instruction ld = make(isa::Opcode::kLoad);
    ld.set(Field::kDtype, 0)
        .set(Field::kBuf, 0)
        .set(Field::kDramAddr, (t % 64) * 1024)
        .set(Field::kSramAddr, half * 1024)
        .set(Field::kSize0, 1024)
        .set(Field::kSize1, 1)
        .set(Field::kSize2, 1)
        .set(Field::kSize3, 1)
        .set(Field::kSignal, mask(isa::Queue::kMatrix));
    if (t >= 2) ld.set(Field::kWait, mask(isa::Queue::kMatrix));  // the buffer half is free again
    isa::Instruction mm = make(isa::Opcode::kMatmul);
    mm.set(Field::kDtype, 0)
        .set(Field::kAAddr, half * 1024)
        .set(Field::kAStride, 32)
        .set(Field::kBAddr, 0)
        .set(Field::kCAddr, half * 4096)
        .set(Field::kM, 32)
        .set(Field::kK, 32)
        .set(Field::kN, 32)
        .set(Field::kWait, mask(isa::Queue::kLoad))
        .set(Field::kSignal, mask(isa::Queue::kVector) | (t + 2 < tiles ? mask(isa::Queue::kLoad) : 0));
    isa::Instruction v = make(isa::Opcode::kVec);
    v.set(Field::kVop, static_cast<int>(isa::VecOp::kRequantize))
        .set(Field::kDtype, static_cast<int>(isa::DType::kInt32))
        .set(Field::kDtypeOut, 0)
        .set(Field::kSrc1Buf, 2)
        .set(Field::kSrc1Addr, half * 4096)
        .set(Field::kDstBuf, 0)
        .set(Field::kDstAddr, 8192 + half * 1024)
        .set(Field::kD0, 32)
        .set(Field::kD1, 32)
        .set(Field::kD2, 1)
        .set(Field::kImm0, 1 << 30)
        .set(Field::kImm1, 31)
        .set(Field::kWait, mask(isa::Queue::kMatrix))
        .set(Field::kSignal, mask(isa::Queue::kStore));
    isa::Instruction st = make(isa::Opcode::kStore);
    st.set(Field::kDtype, 0)
        .set(Field::kBuf, 0)
        .set(Field::kDramAddr, 0x100000 + (t % 64) * 1024)
        .set(Field::kSramAddr, 8192 + half * 1024)
        .set(Field::kSize0, 1024)
        .set(Field::kSize1, 1)
        .set(Field::kSize2, 1)
        .set(Field::kSize3, 1)
        .set(Field::kWait, mask(isa::Queue::kVector));
    for (auto* i : {&ld, &mm, &v, &st}) p.instructions.push_back(*i);
  }
  p.instructions.push_back(make(isa::Opcode::kHalt));
  return p;
}

void BM_SimulateTiming(benchmark::State& state) {
  const isa::Program p = synthetic(state.range(0));
  const isa::NpuConfig config;  // the default (edge) machine, LPDDR4 banked model
  uint64_t cycles = 0;
  for (auto _ : state) cycles = arch::simulate(p, config, {}).total_cycles;
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(p.instructions.size()));
  state.counters["instructions"] = static_cast<double>(p.instructions.size());
  state.counters["sim_cycles"] = static_cast<double>(cycles);
  state.counters["program_mib"] =
      static_cast<double>(p.instructions.size() * sizeof(isa::Instruction)) / (1024.0 * 1024.0);
  state.counters["peak_rss_mib"] = peak_rss_mib();
}
BENCHMARK(BM_SimulateTiming)->Arg(5000)->Arg(25000)->Arg(50000)->Arg(250000)->Unit(benchmark::kMillisecond);

// The pre-run check alone (validation and SRAM footprints of every instruction).
void BM_CheckProgram(benchmark::State& state) {
  const isa::Program p = synthetic(state.range(0));
  const isa::NpuConfig config;
  for (auto _ : state) arch::check_program(p, config);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(p.instructions.size()));
}
BENCHMARK(BM_CheckProgram)->Arg(50000)->Unit(benchmark::kMillisecond);

}  // namespace

int sc_main(int argc, char* argv[]) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
