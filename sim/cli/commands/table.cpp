// The command table: each command's name, synopsis, summary, option groups and handler, in the order
// `npusim --help` lists them. Adding a command is adding its file under sim/cli/commands/ and its line
// here; adding an option group, its file under sim/cli/options/ and its name in the lines that take it.
#include "sim/cli/commands/commands.h"
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"run",
       "run [MODEL] [options]",
       "Compile MODEL (default: the built-in demo CNN) and simulate it; print the report.",
       {machine_options, model_options, branch_options, precision_options, accuracy_options,
        functional_options, end_to_end_options, multicore_options, dynamic_options, requests_options,
        generation_options, output_options},
       "  npusim run resnet50.onnx --config datacenter --report r.json\n"
       "  npusim run model.onnx --precision int8 --calibration images/ --preprocess pre.yaml --accuracy\n"
       "  npusim run gemm:M=512,N=512,K=512 --set systolic_array.rows=64 --html r.html\n"
       "  npusim run llm:layers=2,hidden=256,heads=4,kv_heads=4,ffn=512,vocab=1000 --generate 128:32\n",
       cmd_run},
      {"compile",
       "compile MODEL -o PROG.npu [--asm PROG.s] [options]",
       "Compile an ONNX model, SCALE-Sim topology or micro-model into an NPU program.",
       {machine_options, model_options, precision_options, dynamic_options},
       "  npusim compile model.onnx -o model.npu --asm model.s --precision int8\n",
       cmd_compile},
      {"exec",
       "exec PROG.npu [options]",
       "Simulate a compiled or assembled program.",
       {machine_options, output_options},
       "  npusim exec model.npu --functional --report r.json\n",
       cmd_exec},
      {"asm", "asm FILE.s -o PROG.npu", "Assemble a program (docs/isa.md).", {}, "", cmd_asm},
      {"disasm", "disasm PROG.npu", "Print a program file as assembly text.", {}, "", cmd_disasm},
      {"ops",
       "ops [MODEL] [options]",
       "Print the ONNX operator support table: where each op runs and its constraints; with a model, its "
       "ops, where each runs and why host ones do.",
       {machine_options, model_options},
       "  npusim ops\n"
       "  npusim ops model.onnx --input-shape x=1x3x224x224\n",
       cmd_ops},
      {"config",
       "config [--config FILE.yaml] [--set KEY=VALUE ...] [--dump [--markdown]]",
       "Print the resolved configuration as YAML, or with --dump every parameter with its type, unit, "
       "default, "
       "range and description.",
       {machine_options},
       "",
       cmd_config},
      {"diff",
       "diff A.json B.json [--top N|all]",
       "Compare two run reports: model, configuration, precision plan, results, and the layers (matched by "
       "name) "
       "that changed most.",
       {},
       "",
       cmd_diff},
      {"report",
       "report REPORT.json --html FILE.html",
       "Write a saved run report as one self-contained HTML page (summary, layers, timeline, roofline, "
       "energy, "
       "accuracy).",
       {},
       "",
       cmd_report},
      {"serve",
       "serve SCENARIO.yaml [--report FILE.json] [--trace FILE.json]",
       "Several models sharing one NPU: arrivals, priorities, a scheduling policy; latency percentiles, "
       "deadline "
       "misses, throughput, unit utilization (docs/scenarios.md).",
       {},
       "",
       cmd_serve},
      {"sweep",
       "sweep SWEEP.yaml [-j N] [-o DIR] [--dry-run] [--slurm] [--shard I/N] | sweep --merge DIR",
       "Run a design-space sweep over configuration keys and models, locally or on Slurm (docs/sweeps.md).",
       {},
       "",
       cmd_sweep},
      {"calibrate",
       "calibrate MEASURED.csv -c PRESET_OR_FILE -o CALIBRATED.yaml [--params KEY ...] [--folds K]",
       "Fit the configuration's calibratable parameters to a board's measured cycles; print the error "
       "before, "
       "after and cross-validated (docs/calibrate.md).",
       {machine_options},
       "  npusim calibrate board.csv -c edge -o edge_calibrated.yaml\n"
       "  npusim calibrate board.csv -c gemmini -o g.yaml --params dma.setup_cycles --folds 3\n",
       cmd_calibrate},
  };
  return kCommands;
}

}  // namespace npusim::sim::cli
