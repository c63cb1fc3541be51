#include "isa/timing/units.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "isa/ceil_div.h"

namespace npusim::isa::timing {
int64_t us_to_cycles(double us, double f_mhz) { return static_cast<int64_t>(std::ceil(us * f_mhz - 1e-9)); }

int64_t vec_work_elements(const Instruction& ins) {
  const int64_t d0 = ins.get(Field::kD0), d1 = std::max<int64_t>(1, ins.get(Field::kD1)),
                d2 = std::max<int64_t>(1, ins.get(Field::kD2));
  const auto op = static_cast<VecOp>(ins.get(Field::kVop));
  if (op == VecOp::kMaxPool || op == VecOp::kAvgPool) {
    const int64_t wh = ins.get(Field::kWinH), ww = ins.get(Field::kWinW);
    const int64_t sh = std::max<int64_t>(1, ins.get(Field::kStrH)),
                  sw = std::max<int64_t>(1, ins.get(Field::kStrW));
    if (wh <= 0 || ww <= 0 || wh > d2 || ww > d1) return 0;
    const int64_t oh = (d2 - wh) / sh + 1, ow = (d1 - ww) / sw + 1;
    return oh * ow * d0 * wh * ww;
  }
  if (op == VecOp::kDwConv) {  // one MAC per lane per cycle: every (output element, tap) pair
    const int64_t wh = ins.get(Field::kWinH), ww = ins.get(Field::kWinW);
    const int64_t sh = std::max<int64_t>(1, ins.get(Field::kStrH)),
                  sw = std::max<int64_t>(1, ins.get(Field::kStrW));
    const int64_t rh = (wh - 1) * std::max<int64_t>(1, ins.get(Field::kImm0)) + 1;
    const int64_t rw = (ww - 1) * std::max<int64_t>(1, ins.get(Field::kImm1)) + 1;
    if (wh <= 0 || ww <= 0 || rh > d2 || rw > d1) return 0;
    return ((d2 - rh) / sh + 1) * ((d1 - rw) / sw + 1) * d0 * wh * ww;
  }
  return d0 * d1 * d2;
}

int64_t dwconv_macs_per_lane(DType dtype, const VectorConfig& v) {
  return dtype == DType::kInt8 || dtype == DType::kUint8 ? std::max<int64_t>(1, v.int8_dot_width) : 1;
}

int64_t vec_lane_work(const Instruction& ins, const VectorConfig& v) {
  const int64_t work = vec_work_elements(ins);
  if (static_cast<VecOp>(ins.get(Field::kVop)) != VecOp::kDwConv || work == 0) return work;
  const int64_t per_cycle = dwconv_macs_per_lane(static_cast<DType>(ins.get(Field::kDtype)), v);
  const int64_t taps = ins.get(Field::kWinH) * ins.get(Field::kWinW);
  return work / taps * ceil_div(taps, per_cycle);
}

int64_t vec_cycles(const Instruction& ins, const VectorConfig& v) {
  const VecOpTiming& t = v.ops[static_cast<size_t>(ins.get(Field::kVop)) % kNumVecOps];
  return t.latency_cycles + ceil_div(vec_lane_work(ins, v), v.lanes) * t.ii_cycles;
}

bool on_output_stage(const Instruction& ins, const NpuConfig& c) {
  return c.systolic_array.output_stage && ins.opcode == Opcode::kVec &&
         static_cast<VecOp>(ins.get(Field::kVop)) == VecOp::kOutput &&
         static_cast<Buffer>(ins.get(Field::kSrc1Buf)) == Buffer::kAccumulator;
}

int64_t output_stage_cycles(const Instruction& ins, const NpuConfig& c) {
  const VecOpTiming& t = c.vector.ops[static_cast<size_t>(VecOp::kOutput)];
  return t.latency_cycles + ceil_div(vec_work_elements(ins), std::max<int64_t>(1, c.systolic_array.cols));
}

int64_t vec_lane_cycles(const Instruction& ins, const NpuConfig& c) {
  return on_output_stage(ins, c) ? 0 : vec_cycles(ins, c.vector);
}

HostCycles host_cycles(int64_t in_bytes, int64_t out_bytes, int64_t cpu_ops, const HostConfig& h,
                       double f_mhz) {
  HostCycles c;
  // bytes / (GB/s) = ns; / 1000 = us.
  c.link_in = us_to_cycles(h.link_latency_us + in_bytes / h.link_bandwidth_gbps / 1000.0, f_mhz);
  c.link_out = us_to_cycles(h.link_latency_us + out_bytes / h.link_bandwidth_gbps / 1000.0, f_mhz);
  c.cpu = host_cpu_cycles(cpu_ops, h, f_mhz);
  c.overhead = us_to_cycles(h.call_overhead_us, f_mhz);
  return c;
}

int64_t host_cpu_cycles(int64_t cpu_ops, const HostConfig& h, double f_mhz) {
  return us_to_cycles(static_cast<double>(cpu_ops) / h.cpu_gops / 1000.0, f_mhz);
}

int64_t host_copy_cycles(int64_t bytes, const HostConfig& h, double f_mhz) {
  return us_to_cycles(static_cast<double>(bytes) / h.link_bandwidth_gbps / 1000.0, f_mhz);
}

int64_t sram_transfer_cycles(int64_t bytes, const ScratchpadConfig& s) {
  return ceil_div(bytes, s.banks * s.bank_width_bytes * s.ports);
}

int64_t bank_conflict_factor(uint64_t base, int64_t stride_bytes, int64_t count, const ScratchpadConfig& s) {
  if (count <= 1) return 1;
  const int64_t w = s.bank_width_bytes, b = s.banks;
  int64_t worst;
  if (stride_bytes % w == 0) {
    // Bank of element i is (bank0 + i * step) mod banks: it cycles through banks / gcd(step, banks).
    const int64_t step = (stride_bytes / w) % b;
    const int64_t period = step == 0 ? 1 : b / std::gcd(step, b);
    worst = ceil_div(count, period);
  } else {
    // Elements sharing a bank word are one access; count distinct words per bank.
    std::vector<int64_t> per_bank(b, 0);
    int64_t last_word = -1;
    worst = 0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t word = static_cast<int64_t>((base + i * stride_bytes) / w);
      if (word == last_word) continue;
      last_word = word;
      worst = std::max(worst, ++per_bank[word % b]);
    }
  }
  return std::max<int64_t>(1, ceil_div(worst, s.ports));
}

}  // namespace npusim::isa::timing
