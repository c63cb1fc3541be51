#pragma once
// Timing of the vector unit, the host fallback path and SRAM bank access: plain functions the
// SystemC modules and the compiler's cost model share.
#include <cstdint>

#include "isa/isa.h"
#include "isa/machine/config.h"

namespace npusim::isa::timing {

// Elements a VEC instruction processes: the d2 x d1 x d0 box, or for pooling and dwconv every (output
// element, window position) pair (dwconv: one multiply-accumulate each).
int64_t vec_work_elements(const Instruction& ins);
// Products one lane sums per cycle in a dwconv on `dtype`: vector.int8_dot_width on 8-bit codes, else 1.
int64_t dwconv_macs_per_lane(DType dtype, const VectorConfig& vector);
// Lane-cycles of a VEC instruction at one cycle per element (before the op's ii): its work elements, except
// a dwconv on 8-bit codes, whose lane sums vector.int8_dot_width products a cycle: ceil(window taps /
// int8_dot_width) cycles per output element.
int64_t vec_lane_work(const Instruction& ins, const VectorConfig& vector);
// latency + ceil(lane work / lanes) * ii from the config's per-op table.
int64_t vec_cycles(const Instruction& ins, const VectorConfig& vector);

// Whether VEC `ins` runs on the accumulator's output stage (systolic_array.output_stage) instead of the
// vector lanes: a VEC output whose sums (src1) are in the accumulator. The lanes take the vector queue's
// next instruction while it runs (arch/vector/vector_unit.h).
bool on_output_stage(const Instruction& ins, const NpuConfig& config);
// Cycles of a VEC output on the output stage: the op's latency from the vector table, then one
// accumulator row of systolic_array.cols elements a cycle, as the array drains them.
int64_t output_stage_cycles(const Instruction& ins, const NpuConfig& config);
// Cycles VEC `ins` keeps the vector lanes busy: 0 on the output stage, else vec_cycles.
int64_t vec_lane_cycles(const Instruction& ins, const NpuConfig& config);

// Cycles of one host call: link latency + bytes / bandwidth in each direction, the fixed call
// overhead and cpu_ops / cpu_gops, at the NPU clock. Each part is rounded up separately.
struct HostCycles {
  int64_t link_in = 0;
  int64_t cpu = 0;
  int64_t overhead = 0;
  int64_t link_out = 0;
  int64_t total() const { return link_in + cpu + overhead + link_out; }
};
HostCycles host_cycles(int64_t in_bytes, int64_t out_bytes, int64_t cpu_ops, const HostConfig& host,
                       double frequency_mhz);
// The parts of host_cycles on their own, for host work outside a host call (sim/e2e pipelines):
// microseconds at the NPU clock, rounded up; cpu_ops / cpu_gops; a host-side copy of `bytes` at the
// link bandwidth (the host config's figure for copies and cache maintenance), without the link latency.
int64_t us_to_cycles(double us, double frequency_mhz);
int64_t host_cpu_cycles(int64_t cpu_ops, const HostConfig& host, double frequency_mhz);
int64_t host_copy_cycles(int64_t bytes, const HostConfig& host, double frequency_mhz);

// Cycles a dense transfer of `bytes` occupies a scratchpad: all banks, every port.
int64_t sram_transfer_cycles(int64_t bytes, const ScratchpadConfig& sram);

// How many times slower than conflict-free a stream of `count` parallel element reads is when the
// elements are `stride_bytes` apart from `base`: the largest number of distinct bank words that
// map to one bank, divided by the ports (rounded up). 1 = no conflict.
int64_t bank_conflict_factor(uint64_t base, int64_t stride_bytes, int64_t count,
                             const ScratchpadConfig& sram);

}  // namespace npusim::isa::timing
