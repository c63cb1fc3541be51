// The standard lowering pipeline: the order matters. Folding first (shape arithmetic and Constant
// nodes become constants the matchers can read), Gemm normalisation before BN folding (which assumes
// B is [K, N]), recognition before BN folding (the patterns are the exporters' spelling: a HardSwish's
// Div(6) must not be folded into the affine map after it) and before fusion (Gelu becomes fusable) and
// decomposition (which expands what recognition built), BN folding before epilogue fusion (the BN sits
// between the matrix op and its activation), layout after every rewrite of the compute nodes, placement last.
#include "compiler/passes/pass_util.h"
#include "compiler/passes/passes.h"

namespace npusim::compiler {

std::vector<Pass> standard_pipeline(const PipelineOptions& o) {
  std::vector<Pass> p;
  if (o.fold_constants) p.push_back({"fold-constants", passes::fold_constants});
  p.push_back({"dce", passes::eliminate_dead_nodes});
  if (o.decompose) p.push_back({"decompose-recurrent", passes::decompose_recurrent});
  p.push_back({"normalize-gemm", passes::normalize_gemm});
  p.push_back({"conv1d-as-2d", passes::conv1d_as_2d});
  if (o.recognize_patterns) p.push_back({"recognize-patterns", passes::recognize_patterns});
  if (o.fold_batchnorm) p.push_back({"fold-batchnorm", passes::fold_batchnorm});
  if (o.fuse_epilogues) p.push_back({"fuse-epilogues", passes::fuse_epilogues});
  if (o.decompose) {
    const int64_t limit = o.whole_row_limit;
    p.push_back({"decompose", [limit](Graph& g) { passes::decompose(g, limit); }});
  }
  p.push_back({"transposes-after-matmuls", passes::transposes_after_matmuls});
  p.push_back({"scalar-ops-first", passes::scalar_ops_first});
  if (o.nhwc) p.push_back({"layout", passes::assign_layouts});
  p.push_back({"alias-free-ops", passes::alias_free_ops});
  p.push_back({"dce-final", passes::eliminate_dead_nodes});
  p.push_back({"placement", passes::assign_placement});
  return p;
}

void lower(Graph& g, const PipelineOptions& options, PassManager::Observer observer) {
  PassManager pm;
  for (auto& p : standard_pipeline(options)) pm.add(std::move(p));
  if (observer) pm.set_observer(std::move(observer));
  pm.run(g);
}

std::vector<LayoutChange> layout_changes(const Graph& g) {
  std::vector<LayoutChange> out;
  for (const auto& n : g.nodes) {
    if (n.domain != kNpuDomain || n.op_type != "Transpose" || n.attr_int(kLayoutChange, 0) != 1) continue;
    LayoutChange c;
    c.node = n.name;
    c.input = n.inputs[0];
    c.output = n.outputs[0];
    c.shape = g.value(c.input).shape;
    c.from_layout = g.value(c.input).layout;
    c.to_layout = g.value(c.output).layout;
    c.reason = n.attr_string(kLayoutReason, "");
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace npusim::compiler
