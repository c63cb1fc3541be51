// The command table: each command's name, synopsis, summary and handler, in the order `npusim --help`
// lists them. Adding a command is adding its file under sim/cli/commands/ and its line here.
#include "sim/cli/commands/commands.h"

namespace npusim::sim::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"run", "run [MODEL] [options]",
       "Compile MODEL (default: the built-in demo CNN) and simulate it; print the report.", cmd_run},
      {"compile", "compile MODEL -o PROG.npu [--asm PROG.s] [options]",
       "Compile an ONNX model, SCALE-Sim topology or micro-model into an NPU program.", cmd_compile},
      {"exec", "exec PROG.npu [options]", "Simulate a compiled or assembled program.", cmd_exec},
      {"asm", "asm FILE.s -o PROG.npu", "Assemble a program (docs/isa.md).", cmd_asm},
      {"disasm", "disasm PROG.npu", "Print a program file as assembly text.", cmd_disasm},
      {"ops", "ops", "Print the ONNX operator support table: where each op runs and its constraints.",
       cmd_ops},
      {"config", "config [--config FILE.yaml] [--set KEY=VALUE ...] [--dump [--markdown]]",
       "Print the resolved configuration as YAML, or with --dump every parameter with its type, unit, "
       "default, "
       "range and description.",
       cmd_config},
      {"diff", "diff A.json B.json [--top N|all]",
       "Compare two run reports: model, configuration, precision plan, results, and the layers (matched by "
       "name) "
       "that changed most.",
       cmd_diff},
      {"report", "report REPORT.json --html FILE.html",
       "Write a saved run report as one self-contained HTML page (summary, layers, timeline, roofline, "
       "energy, "
       "accuracy).",
       cmd_report},
      {"serve", "serve SCENARIO.yaml [--report FILE.json] [--trace FILE.json]",
       "Several models sharing one NPU: arrivals, priorities, a scheduling policy; latency percentiles, "
       "deadline "
       "misses, throughput, unit utilization (docs/scenarios.md).",
       cmd_serve},
      {"sweep", "sweep SWEEP.yaml [-j N] [-o DIR] [--dry-run] [--slurm] [--shard I/N] | sweep --merge DIR",
       "Run a design-space sweep over configuration keys and models, locally or on Slurm (docs/sweeps.md).",
       cmd_sweep},
      {"calibrate", "calibrate MEASURED.csv -c PRESET_OR_FILE -o CALIBRATED.yaml [--params KEY ...] [--folds K]",
       "Fit the configuration's calibratable parameters to a board's measured cycles; print the error before, "
       "after and cross-validated (docs/calibrate.md).",
       cmd_calibrate},
  };
  return kCommands;
}

}  // namespace npusim::sim::cli
