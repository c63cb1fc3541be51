// npusim ops: the ONNX operator support table; with a model, that model's support summary.
#include <fmt/format.h>

#include <map>
#include <ostream>

#include "compiler/ops/op_table.h"
#include "sim/cli/commands/commands.h"
#include "sim/cli/compile_model.h"
#include "sim/cli/options/groups.h"

namespace npusim::sim::cli {
namespace {

namespace po = boost::program_options;

void count_ops(const compiler::Graph& g, std::map<std::string, int>& n) {
  for (const auto& node : g.nodes) {
    ++n[node.op_type];
    for (const auto& [name, sub] : node.subgraphs) count_ops(*sub, n);
  }
}

// What a deployment engineer reads first: per op type of the model, how many nodes it has, how many
// layers the compiled program runs where, and why each host layer is on the host.
void model_summary(Context& ctx, const std::string& model, const CompiledModel& cm) {
  std::map<std::string, int> imported;
  count_ops(cm.imported, imported);
  struct Row {
    int matrix = 0, vector = 0, free = 0, host = 0;
  };
  std::map<std::string, Row> layers;
  for (const auto& l : cm.result.layers) {
    Row& r = layers[l.op];
    switch (l.placement) {
      case compiler::Placement::kNpuMatrix:
        ++r.matrix;
        break;
      case compiler::Placement::kNpuVector:
        ++r.vector;
        break;
      case compiler::Placement::kFree:
        ++r.free;
        break;
      case compiler::Placement::kHost:
        ++r.host;
        break;
    }
  }
  int total = 0;
  for (const auto& [op, n] : imported) total += n;
  ctx.out << fmt::format("{}: {} nodes imported (subgraphs included), {} compiled\n\n", model, total,
                         layer_count_text(cm.result));
  ctx.out << fmt::format("{:<26} {:>8} {:>7} {:>7} {:>7} {:>5} {:>5}\n", "op", "imported", "layers", "matrix",
                         "vector", "free", "host");
  std::map<std::string, bool> ops;
  for (const auto& [op, n] : imported) ops[op] = true;
  for (const auto& [op, r] : layers) ops[op] = true;
  for (const auto& [op, unused] : ops) {
    const Row r = layers.count(op) ? layers.at(op) : Row{};
    const int n = imported.count(op) ? imported.at(op) : 0;
    ctx.out << fmt::format("{:<26} {:>8} {:>7} {:>7} {:>7} {:>5} {:>5}\n", op, n,
                           r.matrix + r.vector + r.free + r.host, r.matrix, r.vector, r.free, r.host);
  }
  ctx.out << "\nImported nodes without layers were folded at compile time (constants, control flow whose "
             "condition is known,\nshape arithmetic) or rewritten into other ops (recurrent layers, "
             "normalisations, fused epilogues).\n";
  if (cm.result.fallbacks.empty()) {
    ctx.out << "Every layer runs on the NPU.\n";
    return;
  }
  ctx.out
      << "\nHost layers and why (binding a dimension with --input-shape, fixing an input with --input-value "
         "or another\nopset can move them):\n";
  for (const auto& f : cm.result.fallbacks) ctx.out << fmt::format("  {} ({}): {}\n", f.node, f.op, f.reason);
  // What would move them: the op table's constraints of each op type on the host (one line per type).
  std::map<std::string, int> host_ops;
  for (const auto& f : cm.result.fallbacks) ++host_ops[f.op];
  ctx.out << "\nWhat the NPU needs of each op type on the host (the op table: npusim ops):\n";
  for (const auto& [op, n] : host_ops) {
    const compiler::OpSupport* row = compiler::find_op(op);
    const std::string needs = !row ? "no NPU lowering: it always runs on the host"
                              : std::string(row->constraints).empty() ? "runs on the host (no NPU form)"
                                                                      : std::string(row->constraints);
    ctx.out << fmt::format("  {} ({} layer{}): {}\n", op, n, n == 1 ? "" : "s", needs);
  }
}

}  // namespace

int cmd_ops(Context& ctx, const Command& cmd) {
  Options opts;
  const CommonOptions& o = opts.common;
  ModelCliOptions& m = opts.model;
  std::string model;
  po::options_description d("Options");
  d.add_options()("model", po::value(&model)->value_name("MODEL"),
                  "summarise this model's ops: where each runs and why host ones do");
  po::positional_options_description pos;
  pos.add("model", 1);
  if (!parse(ctx, cmd, d, pos, &opts)) return kExitOk;
  if (!model.empty()) {
    m.timing_only = true;  // placement does not depend on weight values
    const isa::NpuConfig config = resolve_config(o);
    model_summary(ctx, model, compile_or_throw(model, config, m));
    return kExitOk;
  }
  ctx.out << fmt::format("{:<26} {:<11} {}\n", "op", "runs on", "constraints");
  for (const compiler::OpSupport& row : compiler::op_table()) {
    ctx.out << fmt::format("{:<26} {:<11} {}\n", row.op, compiler::to_string(row.placement), row.constraints);
  }
  ctx.out << "\nAn op not listed, or whose constraints do not hold, runs on the host CPU (HOSTCALL); its "
             "transfers and\n"
             "CPU time are counted as host time.\n";
  return kExitOk;
}

}  // namespace npusim::sim::cli
