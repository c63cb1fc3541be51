#pragma once
// Compiling a model for the commands that do (run, compile, serve): the compiler's errors mapped onto the
// CLI's exit codes, and what -v, --graphs and --mapping-out print or write.
#include <string>

#include "isa/machine/config.h"
#include "sim/cli/command.h"
#include "sim/cli/options/common.h"
#include "sim/cli/options/model.h"
#include "sim/dynamic/profiles.h"
#include "sim/model/model.h"

namespace npusim::sim::cli {

// Compiles `spec`, mapping the compiler's errors onto the CLI's exit codes.
CompiledModel compile_or_throw(const std::string& spec, const isa::NpuConfig& config, ModelCliOptions& m,
                               const dynamic::DimBinding& dims = {});

// An imported graph (a path of a data-dependent If, sim/model/branches.h) compiled the same way; `spec`
// names the model in messages. --graphs is left to the model's own compile.
CompiledModel compile_graph_or_throw(compiler::Graph imported, const std::string& spec,
                                     const isa::NpuConfig& config, ModelCliOptions m);

// -v: the mapping table and the precision plan (print_mapping); --graphs: last, after whatever else the
// command prints, the graph after import and after every pass (print_graphs).
void print_mapping(Context& ctx, const ModelCliOptions& m, const CompiledModel& cm);
void print_graphs(Context& ctx, const ModelCliOptions& m);

// "124 layers (4 more fused into them)": the layers the report and the HTML page count, those whose work is
// not another layer's code (a fused attention block's Softmax and MatMuls have a layer tag but no code of
// their own), and the fused ones apart. compile and ops say it the same way.
std::string layer_count_text(const compiler::CompileResult& r);

// --mapping-out: every layer's mapping, under a header saying what it was compiled from.
void write_mapping_out(const Context& ctx, const CommonOptions& o, const ModelCliOptions& m,
                       const std::string& spec, const CompiledModel& cm);

}  // namespace npusim::sim::cli
