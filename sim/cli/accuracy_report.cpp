#include "sim/cli/accuracy_report.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "arch/simulate.h"
#include "compiler/quant/calibration.h"
#include "compiler/quant/precision.h"
#include "compiler/quant/task_metrics.h"
#include "sim/cli/files.h"

namespace npusim::sim::cli {
namespace {

// The advice as a --precision-file: its overrides under `overrides:`, node names quoted where YAML needs
// it, and comments saying what it was fitted for and how to use it.
std::string advice_file(const compiler::quant::MixedPrecisionAdvice& adv) {
  namespace q = compiler::quant;
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "overrides" << YAML::Value << YAML::BeginMap;
  for (const q::PrecisionOverride& o : q::parse_overrides(adv.overrides))
    out << YAML::Key << o.key << YAML::Value << std::string(q::to_string(o.precision));
  out << YAML::EndMap << YAML::EndMap;
  return fmt::format(
      "# npusim's mixed-precision advice: target {:.1f} dB output SQNR, {} {:.2f} dB, {:.0f} cycles "
      "(int8 as planned: {:.0f}).\n# Use: npusim run MODEL --precision int8 --precision-file THIS_FILE\n{}\n",
      adv.target_sqnr_db, adv.met ? "met with" : "NOT met, best", adv.achieved_sqnr_db, adv.cost,
      adv.cost_int8, adv.layers.empty() && adv.int16_layers.empty() ? "overrides: {}" : out.c_str());
}

// --labels FILE: the true class of each evaluation input, in the order of `names` (the inputs' file or
// sub-folder names, load_samples). A line is `NAME CLASS` (or `NAME,CLASS`), NAME a file name, with or
// without its extension and folders, as ImageNet's validation lists and vendor toolkits' label files give
// them; blank lines and lines starting with '#' are skipped. InputError for a line that is not that, a
// name given twice, or an input without a label.
std::vector<int64_t> read_labels(const std::string& path, const std::vector<std::string>& names) {
  std::istringstream in(read_text_file(path));
  std::map<std::string, int64_t> by_name;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t last = line.find_last_not_of(" \t");
    const std::string text = line.substr(first, last - first + 1);
    const size_t cut = text.find_last_of(" \t,");
    const std::string label = cut == std::string::npos ? "" : text.substr(cut + 1);
    std::string name = cut == std::string::npos ? "" : text.substr(0, text.find_last_not_of(" \t,", cut) + 1);
    if (name.find('/') != std::string::npos) name = name.substr(name.find_last_of('/') + 1);
    const bool whole =
        !label.empty() && label.find_first_not_of("0123456789") == std::string::npos && label.size() < 10;
    if (name.empty() || !whole)
      throw InputError(fmt::format("{}:{}: '{}' is not 'NAME CLASS' (a file name and a class index from 0)",
                                   path, number, text));
    if (!by_name.emplace(name, std::stoll(label)).second)
      throw InputError(fmt::format("{}:{}: '{}' is labelled twice", path, number, name));
  }
  std::vector<int64_t> labels;
  for (const std::string& n : names) {
    auto it = by_name.find(n);
    if (it == by_name.end()) {
      const size_t dot = n.find_last_of('.');
      if (dot != std::string::npos && dot > 0) it = by_name.find(n.substr(0, dot));
    }
    if (it == by_name.end()) throw InputError(fmt::format("{} has no label for the input '{}'", path, n));
    labels.push_back(it->second);
  }
  return labels;
}

}  // namespace

std::string advice_answer(const compiler::quant::MixedPrecisionAdvice& adv) {
  if (adv.met && adv.layers.empty() && adv.int16_layers.empty()) {
    return fmt::format(
        "mixed-precision advice (target {:.1f} dB): met by the plan as it is ({:.2f} dB, {:.0f} cycles): no "
        "layer needs int16 or fp16\n",
        adv.target_sqnr_db, adv.achieved_sqnr_db, adv.cost_int8);
  }
  std::string s = fmt::format(
      "mixed-precision advice (target {:.1f} dB): {} {:.2f} dB with {} layer(s) in int16 and {} in fp16, "
      "{:.0f} "
      "cycles (int8 as planned: {:.0f})\n",
      adv.target_sqnr_db, adv.met ? "met," : "NOT met, best", adv.achieved_sqnr_db, adv.int16_layers.size(),
      adv.layers.size(), adv.cost, adv.cost_int8);
  s += fmt::format("  --precision-override '{}'\n", adv.overrides);
  if (adv.fp16_twin_cost)
    s += fmt::format(
        "  (int16 + fp16 mix: {:.2f} dB, {:.0f} cycles; the same layers all in fp16: {:.2f} dB, {:.0f} "
        "cycles; "
        "{} kept)\n",
        adv.mix_sqnr_db, adv.mix_cost, *adv.fp16_twin_sqnr_db, *adv.fp16_twin_cost,
        adv.took_fp16_twin ? "the fp16 twin" : "the mix");
  return s;
}

void accuracy_report(Context& /*ctx*/, const CompiledModel& cm, const isa::NpuConfig& config,
                     const ModelCliOptions& m, const AccuracyCliOptions& a, uint32_t seed,
                     ReportExtras& extras) {
  namespace q = compiler::quant;
  if (a.samples && *a.samples < 1) throw UsageError("--accuracy-samples must be >= 1");
  const compiler::Preprocess* pre = m.preprocess ? &*m.preprocess : nullptr;
  q::AccuracyOptions opt;
  opt.bad_layer_sqnr_db = a.threshold_db;
  if (!a.task.empty()) {
    q::TaskOptions t;
    try {
      t.task = q::parse_task(a.task);
      // Before any evaluation input runs: an output the task cannot read is a usage error.
      if (!cm.lowered.outputs.empty() && cm.lowered.value(cm.lowered.outputs[0]).shape_known)
        q::check_task_output(t.task, cm.lowered.value(cm.lowered.outputs[0]).shape);
      if (!a.keys.empty()) {
        t.keys = q::read_keys_file(a.keys);
        const compiler::Value& out = cm.lowered.value(cm.lowered.outputs.at(0));
        if (out.shape_known && !out.shape.empty()) q::check_keys(t.keys, out.shape.back(), a.keys);
      }
    } catch (const q::TaskError& e) {
      throw UsageError(e.what());
    }
    opt.task = t;
  }
  std::vector<q::Sample> samples;
  std::vector<std::string> names;  // of the --accuracy-inputs files, for --labels
  try {
    if (!a.inputs_dir.empty())
      samples = q::load_samples(cm.lowered, a.inputs_dir, a.samples.value_or(0), pre, &names);
    else if (!m.calibration_dir.empty())
      samples = q::load_samples(cm.lowered, m.calibration_dir,
                                a.samples.value_or(AccuracyCliOptions::kSyntheticSamples), pre);
    else
      samples = q::synthetic_samples(cm.lowered, a.samples.value_or(AccuracyCliOptions::kSyntheticSamples),
                                     seed + 1000);
  } catch (const q::CalibrationError& e) {
    throw InputError(e.what());
  }
  if (!a.labels.empty()) opt.task->labels = read_labels(a.labels, names);
  q::AccuracyReport r;
  try {
    r = q::evaluate_accuracy(cm.lowered, cm.plan, samples, opt);
  } catch (const q::TaskError& e) {
    throw InputError(e.what());
  }
  r.evaluation_synthetic = a.inputs_dir.empty() && m.calibration_dir.empty();
  r.evaluation_source = !a.inputs_dir.empty() ? a.inputs_dir : m.calibration_dir;
  if (a.advise_sqnr) {
    if (!cm.plan.has_int8()) throw UsageError("--advise-sqnr needs int8 layers (--precision int8)");
    // Cost of a plan: compile it and simulate it (timing only).
    q::PlanCost cost = [&](const q::PrecisionPlan& p) {
      const compiler::CompileResult res =
          compile_with_plan(cm.lowered, config, p, simulation_timer(config), nullptr, cm.fusion);
      return static_cast<double>(arch::simulate(res.program, config, {}).total_cycles);
    };
    // int16 activations as the step before fp16, where the array has int16 x int8 MACs (the plan quantized
    // again from its calibration statistics; not for a model's own scales, an empirically corrected plan or a
    // recipe chosen by measurement, whose statistics are the chosen candidate's).
    q::PlanRequantizer int16;
    const q::QuantOptions quant = to_model_options(m, config).plan.quant;
    if (config.systolic_array.int16_rate > 0 && !cm.prequantized && !quant.empirical_bias_correction &&
        !cm.calibration_stats.empty())
      int16 = [&](const q::PrecisionPlan& p) {
        return q::requantize_plan(cm.lowered, p, cm.calibration_stats, quant);
      };
    std::vector<q::Sample> fit;
    if (!a.advise_inputs.empty()) {
      try {
        fit = q::load_samples(cm.lowered, a.advise_inputs, a.advise_samples.value_or(0), pre);
      } catch (const q::CalibrationError& e) {
        throw InputError(e.what());
      }
    }
    q::PrecisionPlan advised;
    r.advice = q::advise_mixed_precision(cm.lowered, cm.plan, fit.empty() ? samples : fit, *a.advise_sqnr,
                                         cost, int16, &advised);
    r.advice->fitted_source = fit.empty() ? r.evaluation_source : a.advise_inputs;
    if (!fit.empty()) {
      // The advised plan on the evaluation inputs, which the advice did not see.
      q::MixedPrecisionAdvice::Judgement h;
      h.inputs = static_cast<int>(samples.size());
      h.source = r.evaluation_source;
      if (r.advice->layers.empty() && r.advice->int16_layers.empty()) {
        h.sqnr_db = r.output_sqnr_db, h.cosine = r.output_cosine, h.task = r.task;
      } else {
        q::AccuracyOptions output_only = opt;
        output_only.own_error = false;  // only the output figures are kept
        const q::AccuracyReport j = q::evaluate_accuracy(cm.lowered, advised, samples, output_only);
        h.sqnr_db = j.output_sqnr_db, h.cosine = j.output_cosine, h.task = j.task;
      }
      r.advice->held_out = h;
    }
  }
  if (a.accuracy || a.advise_sqnr)
    extras.sections.push_back(std::make_shared<traces::JsonSection>("accuracy", q::accuracy_json(r)));
  extras.text += q::accuracy_summary(r);
  if (r.advice) {
    const q::MixedPrecisionAdvice& adv = *r.advice;
    extras.answer += advice_answer(adv);
    if (!a.advise_out.empty()) {
      write_output(a.advise_out, advice_file(adv));
      extras.answer += fmt::format("  written to {} (--precision-file {})\n", a.advise_out, a.advise_out);
    }
    if (adv.held_out)
      extras.answer += fmt::format(
          "  fitted on {} input(s) of {}; on the {} evaluation input(s), which it did not see: {:.2f} dB, "
          "cosine "
          "{:.4f}\n{}",
          adv.fitted_inputs, adv.fitted_source, adv.held_out->inputs, adv.held_out->sqnr_db,
          adv.held_out->cosine, adv.held_out->task ? "  " + q::task_summary(*adv.held_out->task) : "");
  }
}

}  // namespace npusim::sim::cli
