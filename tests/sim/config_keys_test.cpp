// Every numeric key of the declared configuration matters: perturbing it changes some figure of a run
// on a probe workload, unless the declaration says it cannot (isa::Param::affects_timing, with the
// reason in its description). A DRAM key is walked on every DRAM model that uses it; for the others
// the loader rejects it (DramConfig::unused_reason).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "arch/simulate.h"
#include "isa/assembly.h"
#include "isa/machine/spec_text.h"
#include "isa/timing/systolic.h"
#include "sim/config/config_loader.h"
#include "sim/model/model.h"
#include "traces/report.h"

namespace npusim::sim {
namespace {

using isa::ParamInfo;

// The outcome of a run without the figures that merely restate the configuration (clock, array shape,
// peak bandwidth, roofline bounds) or the host machine (wall time).
std::string outcome(traces::Report r) {
  r.frequency_mhz = 0;
  r.array_utilization = 0;
  r.dataflow.clear();
  r.array_rows = r.array_cols = 0;
  r.array_macs_per_pe_per_cycle.clear();
  r.dram.model.clear();
  r.dram.peak_bandwidth_gbps = 0;
  r.sim = {};
  for (traces::LayerReport& l : r.layers) l.bound_cycles.reset();
  return traces::report_json(r);
}

// A program that runs every vector op once (fp32, except requantize), a burst of small loads (deeper
// than the DMA queues), misaligned loads and stores to and from every scratchpad, and a host call: the
// keys of the vector unit's op table, of the DMA queues, of every scratchpad and of the host link show
// here even where the compiled probes never exercise them.
std::string vector_and_host_probe() {
  std::string s = ".layer vec Probe\n.layer host Probe\n.hostop host Probe 5000\n";
  // Two loads into each scratchpad on the two idle DMA engines at once: they collide in its banks.
  for (const char* buf : {"input", "weight", "acc"}) {
    for (const char* signal : {"", " signal=vector"})
      s += std::string("LOAD layer=vec") + signal + " dtype=fp32 buf=" + buf +
           " dram=0x44 sram=0x0 size0=64 size1=8 size2=1 size3=1 stride1=300 stride2=0 stride3=0\n";
    s += "BARRIER layer=vec\n";
  }
  for (int i = 0; i < 48; ++i)
    s += "LOAD layer=vec dtype=fp32 buf=input dram=" + std::to_string(0x20000 + 256 * i) +
         " sram=" + std::to_string(0x8000 + 64 * i) + " size0=16 size1=1 size2=1 size3=1\n";
  for (size_t i = 0; i < isa::kVecOpNames.size(); ++i) {
    const std::string op(isa::kVecOpNames[i]);
    // The first VECs take the three tokens of the loads.
    const std::string wait = i < 3 ? " wait=load" : "";
    if (op == "requantize") {
      s += "VEC layer=vec" + wait +
           " op=requantize dtype=int32 dtype_out=int8 src1_buf=input src1=0x0 dst_buf=acc "
           "dst=0x4000 d0=64 d1=8 d2=1 imm0=1073741824 imm1=2\n";
    } else if (op == "max_pool" || op == "avg_pool") {
      s += "VEC layer=vec" + wait + " op=" + op +
           " dtype=fp32 dtype_out=fp32 src1_buf=input src1=0x0 dst_buf=acc "
           "dst=0x4000 d0=8 d1=8 d2=8 win_h=2 win_w=2 str_h=2 str_w=2\n";
    } else if (op == "output") {
      s +=
          "VEC layer=vec" + wait +
          " op=output dtype=fp32 dtype_out=fp16 src1_buf=input src1=0x0 src2_buf=weight src2=0x0 dst_buf=acc "
          "dst=0x4000 d0=64 d1=8 d2=1 bcast=row\n";
    } else if (op == "lut") {
      s += "VEC layer=vec" + wait +
           " op=lut dtype=int8 dtype_out=int8 src1_buf=input src1=0x0 src2_buf=weight src2=0x0 dst_buf=acc "
           "dst=0x4000 d0=64 d1=8 d2=1\n";
    } else if (op == "dwconv") {
      s +=
          "VEC layer=vec" + wait +
          " op=dwconv dtype=fp32 dtype_out=fp32 src1_buf=input src1=0x0 src2_buf=weight src2=0x0 dst_buf=acc "
          "dst=0x4000 d0=8 d1=8 d2=8 win_h=3 win_w=3 str_h=1 str_w=1\n";
      // On 8-bit codes too: a lane sums vector.int8_dot_width products per cycle.
      s += "VEC layer=vec op=dwconv dtype=uint8 dtype_out=int32 src1_buf=input src1=0x0 src2_buf=weight "
           "src2=0x0 dst_buf=acc dst=0x4000 d0=8 d1=8 d2=8 win_h=3 win_w=3 str_h=1 str_w=1\n";
    } else {
      s += "VEC layer=vec" + wait + " op=" + op +
           " dtype=fp32 dtype_out=fp32 src1_buf=input src1=0x0 "
           "src2_buf=input src2=0x0 dst_buf=acc dst=0x4000 d0=64 d1=8 d2=1\n";
    }
  }
  const char* kBuffers[] = {"input", "weight", "acc"};
  // Two operands from one scratchpad: its ports decide how soon both arrive.
  for (const char* buf : {"weight", "acc"})
    s += std::string("VEC layer=vec op=add dtype=fp32 dtype_out=fp32 src1_buf=") + buf +
         " src1=0x0 src2_buf=" + buf + " src2=0x0 dst_buf=" + buf + " dst=0x800 d0=64 d1=8 d2=1" +
         (buf[0] == 'a' ? " signal=store" : "") + "\n";
  for (int k = 0; k < 3; ++k)
    s += std::string("STORE layer=vec") + (k == 0 ? " wait=vector" : "") +
         " signal=host dtype=fp32 buf=" + kBuffers[k] + " dram=" + std::to_string(0x10044 + 0x4000 * k) +
         " sram=0x0 size0=64 size1=8 size2=1 size3=1 stride1=300 stride2=0 stride3=0\n";
  s += "HOSTCALL layer=host wait=store host_op=0 in_bytes=4096 out_bytes=4096 cpu_ops=5000\nHALT\n";
  return s;
}

// The probes' outcomes on `c`, or "" when a probe cannot run there (a perturbation the compiler or
// the machine rejects is no evidence either way).
std::string probe(const isa::NpuConfig& c, std::string* why = nullptr) {
  static const isa::Program kVectorProgram = isa::assemble(vector_and_host_probe(), "probe.s");
  std::string all;
  try {
    // Small layers of each precision (each has its own MAC rate and MAC energy) and a padded conv: the array,
    // the scratchpads, the DMA and the DRAM all take part.
    const char* kPrecisions[] = {"fp32", "fp16", "bf16", "int8"};
    for (const char* p : kPrecisions) {
      ModelOptions o;
      o.plan.spec.model = compiler::quant::parse_precision(p);
      const CompiledModel m = compile_model("gemm:M=40,N=72,K=100", c, o, nullptr);
      all += outcome(arch::simulate(m.result.program, c, {}));
    }
    // The same layer with int16 activations (its own MAC rate and MAC energy), where the array has them.
    if (c.systolic_array.int16_rate > 0) {
      ModelOptions o;
      o.plan.spec.model = compiler::quant::Precision::kInt8;
      o.plan.spec.overrides = compiler::quant::parse_overrides("MatMul=int16");
      const CompiledModel m = compile_model("gemm:M=40,N=72,K=100", c, o, nullptr);
      all += outcome(arch::simulate(m.result.program, c, {}));
    }
    // Layers larger than the scratchpads: their tiling depends on every capacity (the conv's rows of 33
    // pixels end in a block of one, which systolic_array.min_block_cycles stretches).
    for (const char* spec : {"conv:H=30,W=33,C=64,K=96,R=3,S=3,pad=1", "gemm:M=200,N=320,K=600"}) {
      const CompiledModel m = compile_model(spec, c, {}, nullptr);
      all += outcome(arch::simulate(m.result.program, c, {}));
    }
    all += outcome(arch::simulate(kVectorProgram, c, {}));
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return "";
  }
  return all;
}

// Values to try instead of `p`'s current one: smaller and larger values within its range.
std::vector<std::string> perturbations(const ParamInfo& p) {
  std::vector<std::string> out;
  if (p.kind == ParamInfo::Kind::kInteger) {
    const int64_t v = std::stoll(p.value);
    for (int64_t w : {v / 2, v / 8, v == 0 ? int64_t{8} : v * 4})
      if (w != v && w >= p.int_min && w <= p.int_max) out.push_back(isa::format_integer(w));
    if (out.empty()) out.push_back(isa::format_integer(v == p.int_min ? p.int_max : p.int_min));
  } else {
    const double v = std::stod(p.value);
    for (double w : {v / 2, v / 8, v == 0 ? 50.0 : v * 4})
      if (w != v && w >= p.real_min && w <= p.real_max) out.push_back(isa::format_real(w));
    if (out.empty()) out.push_back(isa::format_real(v == p.real_min ? p.real_max : p.real_min));
  }
  return out;
}

TEST(ConfigKeys, EveryNumericKeyChangesAFigureOnAProbeOrIsDeclaredNotToAffectTiming) {
  // The defaults (lpddr4_4266, banked), the two other kinds of DRAM model, and the other banked models
  // (each has its own energy keys).
  const std::vector<std::vector<std::string>> bases = {
      {}, {"dram.model=simple"}, {"dram.model=ideal"}, {"dram.model=ddr4_3200"}, {"dram.model=hbm2"}};
  std::vector<std::string> failures;
  int walked = 0;
  for (const std::vector<std::string>& sets : bases) {
    const isa::NpuConfig base = load_config("", sets);
    std::string why;
    const std::string before = probe(base, &why);
    ASSERT_FALSE(before.empty()) << "the probes do not run on the base configuration: " << why;
    for (const ParamInfo& p : isa::list_params(base)) {
      if (p.kind != ParamInfo::Kind::kInteger && p.kind != ParamInfo::Kind::kReal) continue;
      if (!p.affects_timing || !base.unused_reason(p.path).empty()) continue;
      // Keys outside dram (and its energy) are walked once, on the defaults.
      if (!sets.empty() && p.path.rfind("dram.", 0) != 0 && p.path.rfind("energy.dram.", 0) != 0) continue;
      ++walked;
      bool changed = false, ran = false;
      for (const std::string& value : perturbations(p)) {
        isa::NpuConfig c = base;
        std::vector<std::string> errors;
        apply_sets(c, {p.path + "=" + value}, errors);
        if (!errors.empty() || !check_constraints(c).empty()) continue;
        const std::string after = probe(c);
        if (after.empty()) continue;
        ran = true;
        if (after != before) {
          changed = true;
          break;
        }
      }
      const std::string on = sets.empty() ? "the defaults" : sets[0];
      if (!ran)
        failures.push_back(p.path + ": no perturbation could run on " + on);
      else if (!changed)
        failures.push_back(p.path + ": changes no figure of the probes on " + on);
    }
  }
  EXPECT_GT(walked, 100);
  std::string all;
  for (const std::string& f : failures) all += f + "\n";
  EXPECT_TRUE(failures.empty()) << all;
}

// The loader's error text for a YAML document and --set list ("" when it loads).
std::string message(const std::string& yaml, const std::vector<std::string>& sets) {
  try {
    load_config_text(yaml, "x.yaml", sets);
  } catch (const ConfigError& e) {
    return std::string(e.what());
  }
  return std::string();
}

// The DRAM keys a model does not use are rejected when given for it, naming the key and the model.
TEST(ConfigKeys, DramKeysAModelDoesNotUseAreRejectedNamingKeyAndModel) {
  EXPECT_NE(message("dram:\n  model: hbm2\n  bandwidth_gbps: 100\n", {})
                .find("x.yaml:3:19: dram.bandwidth_gbps does not apply to the hbm2 DRAM model"),
            std::string::npos);
  EXPECT_NE(message("dram:\n  model: hbm2\n", {"dram.latency_ns=5"})
                .find("--set: dram.latency_ns does not apply to the hbm2 DRAM model"),
            std::string::npos);
  EXPECT_NE(
      message("dram:\n  model: ideal\n  channels: 4\n", {}).find("dram.channels does not apply to the ideal"),
      std::string::npos);
  // Without dram.model the default model (lpddr4_4266) decides.
  EXPECT_NE(message("dram:\n  latency_ns: 20\n", {}).find("does not apply to the lpddr4_4266 DRAM model"),
            std::string::npos);
  // Every key the model uses loads.
  EXPECT_EQ(message("dram:\n  model: simple\n  channels: 4\n  latency_ns: 20\n  bandwidth_gbps: 30\n", {}),
            "");
  EXPECT_EQ(message("dram:\n  model: ideal\n  latency_ns: 20\n", {}), "");
  // A key given for one model and a later layer switching the model (a sweep over dram.model on a
  // preset): the key was written for the earlier choice and is not an error.
  EXPECT_EQ(message("dram:\n  model: hbm2\n  channels: 8\n", {"dram.model=ideal"}), "");
  EXPECT_EQ(message("{}\n", {"dram.latency_ns=0", "dram.model=hbm2"}), "");
}

// pipelined_folds on an array that cannot pipeline (output-stationary, or without shadow registers) is
// rejected when given, unless a later layer changed what decides it.
TEST(ConfigKeys, PipelinedFoldsOnAnArrayThatCannotPipelineAreRejected) {
  EXPECT_NE(message("systolic_array:\n  dataflow: os\n  pipelined_folds: true\n", {})
                .find("x.yaml:3:20: systolic_array.pipelined_folds does not apply to this array (an "
                      "output-stationary array"),
            std::string::npos);
  EXPECT_NE(
      message("systolic_array:\n  double_buffered: false\n", {"systolic_array.pipelined_folds=true"})
          .find("--set: systolic_array.pipelined_folds does not apply to this array (pipelined folds load"),
      std::string::npos);
  // A preset that pipelines, swept over the dataflow: the later layer decides, no error.
  EXPECT_EQ(message("systolic_array:\n  pipelined_folds: true\n", {"systolic_array.dataflow=os"}), "");
  EXPECT_EQ(message("systolic_array:\n  dataflow: os\n  pipelined_folds: false\n", {}), "");
  // The key changes the timing where it applies.
  isa::NpuConfig on = load_config_text("{}\n", "x.yaml", {}), off = on;
  off.systolic_array.pipelined_folds = false;
  EXPECT_LT(isa::timing::gemm_cycles(on.systolic_array, {64, 256, 64}, isa::DType::kInt8, false).total,
            isa::timing::gemm_cycles(off.systolic_array, {64, 256, 64}, isa::DType::kInt8, false).total);
}

// min_block_cycles on an array that does not stream pixels in blocks (output- or input-stationary) or on
// the PE-level model is rejected when given above 1.
TEST(ConfigKeys, MinBlockCyclesWhereNoBlocksStreamIsRejected) {
  EXPECT_NE(message("systolic_array:\n  dataflow: os\n  min_block_cycles: 4\n", {})
                .find("x.yaml:3:21: systolic_array.min_block_cycles does not apply to this array (only a "
                      "weight-stationary array"),
            std::string::npos);
  EXPECT_NE(message("systolic_array:\n  model: pe\n", {"systolic_array.min_block_cycles=4"})
                .find("--set: systolic_array.min_block_cycles does not apply to this array (the PE-level"),
            std::string::npos);
  EXPECT_EQ(message("systolic_array:\n  min_block_cycles: 4\n", {"systolic_array.dataflow=is"}), "");
  EXPECT_EQ(message("systolic_array:\n  dataflow: os\n  min_block_cycles: 1\n", {}), "");
}

// chained_instructions where instructions cannot chain (no pipelined folds, or the PE-level model) is
// rejected naming why.
TEST(ConfigKeys, ChainedInstructionsWhereFoldsDoNotPipelineAreRejected) {
  EXPECT_NE(message("systolic_array:\n  dataflow: os\n  chained_instructions: true\n", {})
                .find("x.yaml:3:25: systolic_array.chained_instructions does not apply to this array "
                      "(instructions chain as pipelined folds do"),
            std::string::npos);
  EXPECT_NE(
      message("systolic_array:\n  model: pe\n", {"systolic_array.chained_instructions=true"})
          .find("--set: systolic_array.chained_instructions does not apply to this array (the PE-level"),
      std::string::npos);
  EXPECT_EQ(message("systolic_array:\n  chained_instructions: true\n", {}), "");
  EXPECT_EQ(message("systolic_array:\n  dataflow: os\n  chained_instructions: false\n", {}), "");
}

// A preset's key that a later --set makes inert (tpu-v1 chains its instructions, an output-stationary
// array cannot; tpu-v1's simple DRAM bandwidth under another DRAM model) is not an error: it reads as its
// default, as the resolved dump writes it, so that the dump loads back as the same configuration.
TEST(ConfigKeys, APresetKeyALaterSetMakesInertReadsAsItsDefault) {
  const isa::NpuConfig defaults;
  const isa::NpuConfig tpu = load_config("tpu-v1", {});
  ASSERT_TRUE(tpu.systolic_array.chained_instructions);
  ASSERT_NE(tpu.dram.bandwidth_gbps, defaults.dram.bandwidth_gbps);
  const isa::NpuConfig os = load_config("tpu-v1", {"systolic_array.dataflow=os"});
  EXPECT_EQ(os.systolic_array.chained_instructions, defaults.systolic_array.chained_instructions);
  const isa::NpuConfig ddr = load_config("tpu-v1", {"dram.model=ddr4_3200"});
  EXPECT_EQ(ddr.dram.bandwidth_gbps, defaults.dram.bandwidth_gbps);
  EXPECT_TRUE(ddr.systolic_array.chained_instructions);
}

// preload_in_stream where no weight-stationary stream pipelines its folds, or on the PE-level model, is
// rejected naming why.
TEST(ConfigKeys, PreloadInStreamWithoutAPipelinedWeightStationaryStreamIsRejected) {
  EXPECT_NE(message("systolic_array:\n  dataflow: is\n  preload_in_stream: true\n", {})
                .find("x.yaml:3:22: systolic_array.preload_in_stream does not apply to this array (the next "
                      "fold's operand follows the stream of a weight-stationary array"),
            std::string::npos);
  EXPECT_NE(message("systolic_array:\n  model: pe\n", {"systolic_array.preload_in_stream=true"})
                .find("--set: systolic_array.preload_in_stream does not apply to this array (the PE-level"),
            std::string::npos);
  EXPECT_EQ(message("systolic_array:\n  preload_in_stream: true\n", {}), "");
}

}  // namespace
}  // namespace npusim::sim

// SystemC owns main(): the runs go through arch::simulate.
#include <cstdlib>
#include <systemc>

// Before SystemC prints its banner (gtest_discover_tests parses this binary's output).
static const int kQuiet = setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);

int sc_main(int argc, char* argv[]) {
  (void)kQuiet;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
