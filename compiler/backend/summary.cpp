// The compile table (compile.h, compile_summary; docs/backend.md, "The compile table").
#include <fmt/format.h>

#include <string>
#include <vector>

#include "compiler/backend/compile.h"
#include "isa/layer_names.h"
#include "isa/text_wrap.h"

namespace npusim::compiler {

std::string compile_summary(const CompileResult& r) {
  std::string s;
  s += fmt::format("{} layers, {} instructions, {} data segments ({:.1f} KiB), compile {:.3f} s\n",
                   r.layers.size(), r.program.instructions.size(), r.program.data.size(),
                   static_cast<double>(r.memory.weight_bytes) / 1024.0, r.compile_seconds);
  const std::string header =
      fmt::format("{:<28} {:<18} {:<7} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>12}  {}", "layer",
                  "op", "place", "tile_m", "tile_k", "tile_n", "groups", "in_KiB", "w_KiB", "acc_KiB",
                  "instr", "est_cycles", "mapping");
  s += header + "\n";
  // A long mapping description wraps in its own column (the report's layers[].mapping.description has it
  // on one line).
  const size_t mapping_column = header.find("mapping");
  int64_t total = 0;
  std::vector<std::string> names;
  for (const LayerPlan& p : r.layers) names.push_back(p.name);
  names = isa::display_names(names);
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const LayerPlan& p = r.layers[i];
    const std::string_view where = placement_name(p.placement);
    total += p.est_cycles;
    s += isa::wrap_lines(
             fmt::format(
                 "{:<28} {:<18} {:<7} {:>6} {:>6} {:>6} {:>6} {:>9.1f} {:>9.1f} {:>9.1f} {:>7} {:>12}  {}{}",
                 names[i], p.op.substr(0, 18), where, p.tile_m, p.tile_k, p.tile_n, p.group_block,
                 p.sram_input_bytes / 1024.0, p.sram_weight_bytes / 1024.0, p.sram_acc_bytes / 1024.0,
                 p.instructions, p.est_cycles, p.mapping, p.loop_order.empty() ? "" : "; " + p.loop_order),
             kCompileTableWidth, mapping_column) +
         "\n";
  }
  s += fmt::format("estimated total (layers back to back): {} cycles\n", total);
  s += fmt::format(
      "memory: activations {:.1f} KiB with lifetime reuse ({:.1f} KiB without, saving {:.1f}%), "
      "weights {:.1f} KiB\n",
      r.memory.activation_bytes / 1024.0, r.memory.activation_bytes_no_reuse / 1024.0,
      r.memory.activation_bytes_no_reuse
          ? 100.0 * (1.0 - static_cast<double>(r.memory.activation_bytes) /
                               static_cast<double>(r.memory.activation_bytes_no_reuse))
          : 0.0,
      r.memory.weight_bytes / 1024.0);
  if (r.fallbacks.empty()) {
    s += "fallbacks: none\n";
  } else {
    s += fmt::format("fallbacks: {}\n", r.fallbacks.size());
    for (const Fallback& f : r.fallbacks) {
      s += isa::wrap_lines(
               fmt::format("  {} ({}): {} cycles on the host; {}", f.node, f.op, f.est_cycles, f.reason),
               kCompileTableWidth, 4) +
           "\n";
    }
  }
  if (!r.transposes.empty()) {
    s += fmt::format("inserted layout conversions: {}\n", r.transposes.size());
    for (const auto& t : r.transposes) {
      s += isa::wrap_lines(fmt::format("  {}: {} -> {} ({}){}", t.node, t.input, t.output,
                                       shape_to_string(t.shape), t.reason.empty() ? "" : ": " + t.reason),
                           kCompileTableWidth, 4) +
           "\n";
    }
  }
  return s;
}

}  // namespace npusim::compiler
