#include "sim/calibrate/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "arch/simulate.h"
#include "isa/machine/spec_text.h"
#include "sim/calibrate/least_squares.h"
#include "sim/cli/compile_model.h"
#include "sim/config/config_dump.h"
#include "sim/config/config_loader.h"

namespace npusim::sim::calibrate {
namespace {

using isa::ParamInfo;

const ParamInfo* find_param(const std::vector<ParamInfo>& params, const std::string& path) {
  for (const ParamInfo& p : params)
    if (p.path == path) return &p;
  return nullptr;
}

bool selected(const std::string& path, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  for (const std::string& s : only)
    if (path == s || (path.size() > s.size() && path.compare(0, s.size(), s) == 0 && path[s.size()] == '.'))
      return true;
  return false;
}

std::string percent(double v) { return fmt::format("{:+.1f}%", 100 * v); }

std::string value_text(const Parameter& p, double v) {
  return p.integer ? isa::format_integer(static_cast<int64_t>(std::llround(v))) : fmt::format("{:.6g}", v);
}

struct FitOutcome {
  isa::NpuConfig config;
  std::vector<Move> moves;
  int iterations = 0;
};

FitOutcome fit(const isa::NpuConfig& start, const std::vector<Parameter>& params, const Predictor& predictor,
               const Options& o) {
  std::vector<double> measured(predictor.rows().size());
  for (size_t i = 0; i < measured.size(); ++i) measured[i] = predictor.measured_cycles(i, start);
  std::vector<Unknown> unknowns;
  for (const Parameter& p : params) unknowns.push_back({get(start, p), p.min, p.max, p.integer});
  auto config_at = [&](const std::vector<double>& x) {
    isa::NpuConfig c = start;
    for (size_t j = 0; j < params.size(); ++j) c = with(std::move(c), params[j], x[j]);
    return c;
  };
  const Residuals residuals = [&](const std::vector<double>& x) {
    return relative_errors(predictor.predict(config_at(x)), measured);
  };
  FitOptions options;
  options.max_iterations = o.max_iterations;
  options.restart_passes = o.restart_passes;
  const FitResult r = least_squares(unknowns, residuals, options);
  FitOutcome out{config_at(r.values), {}, r.iterations};
  for (size_t j = 0; j < params.size(); ++j)
    out.moves.push_back({params[j], unknowns[j].value, r.values[j], r.moves[j]});
  return out;
}

}  // namespace

std::vector<Parameter> calibratable(const isa::NpuConfig& c, const std::vector<std::string>& only) {
  std::vector<Parameter> out;
  for (const ParamInfo& i : isa::list_params(c)) {
    if (i.calibrate.empty() || !c.unused_reason(i.path).empty() || !selected(i.path, only)) continue;
    if (i.kind != ParamInfo::Kind::kInteger && i.kind != ParamInfo::Kind::kReal) continue;
    Parameter p{i.path, i.unit, i.kind == ParamInfo::Kind::kInteger, i.calibrate.min, i.calibrate.max};
    // The range never excludes where the configuration starts.
    const double v = std::strtod(i.value.c_str(), nullptr);
    p.min = std::min(p.min, v);
    p.max = std::max(p.max, v);
    out.push_back(p);
  }
  for (const std::string& s : only) {
    bool any = false;
    for (const Parameter& p : out) any = any || selected(p.path, {s});
    if (!any)
      throw std::invalid_argument(fmt::format(
          "'{}' selects no calibratable parameter this configuration uses (npusim config --dump marks them "
          "[calibratable])",
          s));
  }
  return out;
}

double get(const isa::NpuConfig& c, const Parameter& p) {
  const std::vector<ParamInfo> params = isa::list_params(c);
  const ParamInfo* i = find_param(params, p.path);
  if (!i) throw std::logic_error("no parameter " + p.path);
  return std::strtod(i->value.c_str(), nullptr);
}

isa::NpuConfig with(isa::NpuConfig c, const Parameter& p, double v) {
  v = std::clamp(v, p.min, p.max);
  const std::string text =
      p.integer ? isa::format_integer(static_cast<int64_t>(std::llround(v))) : isa::format_real(v);
  std::vector<std::string> errors;
  apply_sets(c, {p.path + "=" + text}, errors);
  if (!errors.empty()) throw std::logic_error(errors.front());
  return c;
}

Predictor::Predictor(std::vector<Measurement> rows) : rows_(std::move(rows)) {
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Measurement& m = rows_[i];
    groups_[Key{m.model, m.precision, m.batch, m.input_shapes}].push_back(i);
  }
}

Predictor Predictor::fold(int folds, int fold, bool held_out) const {
  std::vector<Measurement> rows;
  for (size_t i = 0; i < rows_.size(); ++i)
    if ((static_cast<int>(i % static_cast<size_t>(folds)) == fold) == held_out) rows.push_back(rows_[i]);
  Predictor out(std::move(rows));
  for (const auto& group : out.groups_) {
    const auto program = programs_.find(group.first);
    if (program != programs_.end()) out.programs_.insert(*program);
  }
  return out;
}

double Predictor::measured_cycles(size_t row, const isa::NpuConfig& c) const {
  const Measurement& m = rows_[row];
  return m.ms ? m.value * c.frequency_mhz * 1e3 : m.value;
}

std::vector<double> Predictor::predict(const isa::NpuConfig& c) const {
  std::vector<double> out(rows_.size(), 0.0);
  for (const auto& group : groups_) {
    const std::vector<size_t>& members = group.second;
    const Measurement& first = rows_[members.front()];
    cli::ModelCliOptions m;
    m.precision = first.precision;
    m.batch = first.batch;
    m.batch_given = first.batch > 0;
    m.input_shapes = first.input_shapes;
    m.timing_only = true;
    traces::Report report;
    try {
      auto program = programs_.find(group.first);
      if (program == programs_.end())
        program =
            programs_.emplace(group.first, cli::compile_or_throw(first.model, c, m).result.program).first;
      report = arch::simulate(program->second, c, {});
    } catch (const cli::RunError& e) {
      throw cli::RunError(fmt::format("{}: model '{}': {}", first.where, first.model, e.what()));
    } catch (const arch::SimError& e) {
      throw cli::RunError(fmt::format("{}: model '{}': {}", first.where, first.model, e.what()));
    } catch (const std::runtime_error& e) {
      throw MeasurementError(fmt::format("{}: model '{}': {}", first.where, first.model, e.what()));
    }
    ++simulations_;
    for (size_t i : members) {
      const Measurement& row = rows_[i];
      if (row.layer.empty()) {
        out[i] = static_cast<double>(report.total_cycles);
        continue;
      }
      const auto layer = std::find_if(report.layers.begin(), report.layers.end(),
                                      [&](const traces::LayerReport& l) { return l.name == row.layer; });
      if (layer == report.layers.end()) {
        std::string names;
        for (size_t k = 0; k < report.layers.size() && k < 12; ++k)
          names += (k ? ", " : "") + report.layers[k].name;
        if (report.layers.size() > 12) names += ", ...";
        throw MeasurementError(fmt::format("{}: model '{}' has no layer '{}' (its layers: {})", row.where,
                                           row.model, row.layer, names));
      }
      if (!layer->fused_into.empty())
        throw MeasurementError(fmt::format("{}: layer '{}' of '{}' is fused into '{}': measure that layer",
                                           row.where, row.layer, row.model, layer->fused_into));
      out[i] = static_cast<double>(layer->cycles);
    }
  }
  return out;
}

std::vector<double> relative_errors(const std::vector<double>& predicted,
                                    const std::vector<double>& measured) {
  std::vector<double> out(predicted.size());
  for (size_t i = 0; i < predicted.size(); ++i) out[i] = predicted[i] / measured[i] - 1.0;
  return out;
}

ErrorSummary summarize(const std::vector<double>& relative_errors) {
  ErrorSummary s;
  const size_t n = relative_errors.size();
  if (n == 0) return s;
  for (double e : relative_errors) s.mean += std::abs(e);
  s.mean /= static_cast<double>(n);
  if (n < 2) return s;
  double var = 0;
  for (double e : relative_errors) var += (std::abs(e) - s.mean) * (std::abs(e) - s.mean);
  var /= static_cast<double>(n - 1);
  s.half_width = 1.96 * std::sqrt(var / static_cast<double>(n));
  return s;
}

Calibration calibrate(const isa::NpuConfig& start, const Predictor& predictor, const Options& options) {
  const std::vector<Parameter> params = calibratable(start, options.only);
  const size_t n = predictor.rows().size();
  Calibration out;
  for (size_t i = 0; i < n; ++i) out.measured.push_back(predictor.measured_cycles(i, start));
  out.before = predictor.predict(start);
  FitOutcome full = fit(start, params, predictor, options);
  out.config = full.config;
  out.moves = full.moves;
  out.iterations = full.iterations;
  out.after = predictor.predict(out.config);
  out.simulations = predictor.simulations();
  out.folds = std::min<int>(options.folds, static_cast<int>(n));
  if (out.folds >= 2) {
    out.held_out_error.assign(n, 0.0);
    for (int f = 0; f < out.folds; ++f) {
      const Predictor train = predictor.fold(out.folds, f, false);
      const Predictor test = predictor.fold(out.folds, f, true);
      const FitOutcome o = fit(start, params, train, options);
      const std::vector<double> predicted = test.predict(o.config);
      for (size_t k = 0, i = static_cast<size_t>(f); i < n; i += static_cast<size_t>(out.folds), ++k)
        out.held_out_error[i] = predicted[k] / test.measured_cycles(k, start) - 1.0;
      out.simulations += train.simulations() + test.simulations();
    }
  }
  return out;
}

std::string calibrated_yaml(const Calibration& c, const std::string& command) {
  const ErrorSummary before = summarize(relative_errors(c.before, c.measured));
  const ErrorSummary after = summarize(relative_errors(c.after, c.measured));
  std::string head =
      fmt::format("# Calibrated by `{}`\n# from {} measurements ({} fit iterations, {} simulations).\n",
                  command, c.measured.size(), c.iterations, c.simulations);
  head += fmt::format("# Mean |error| of the measured rows: {:.2f}% before, {:.2f}% after.\n",
                      100 * before.mean, 100 * after.mean);
  if (!c.held_out_error.empty()) {
    const ErrorSummary cv = summarize(c.held_out_error);
    head += fmt::format("# {}-fold cross-validated mean |error|: {:.2f}% (95% interval {:.2f}%..{:.2f}%).\n",
                        c.folds, 100 * cv.mean, 100 * std::max(0.0, cv.mean - cv.half_width),
                        100 * (cv.mean + cv.half_width));
  }
  head += "# What moved:\n";
  bool any = false;
  for (const Move& m : c.moves) {
    if (!m.measured || value_text(m.parameter, m.before) == value_text(m.parameter, m.after)) continue;
    any = true;
    head += fmt::format("#   {}: {} -> {} {} ({})\n", m.parameter.path, value_text(m.parameter, m.before),
                        value_text(m.parameter, m.after), m.parameter.unit,
                        m.before != 0 ? percent(m.after / m.before - 1.0) : std::string("from 0"));
  }
  if (!any) head += "#   nothing\n";
  std::string unmeasured;
  for (const Move& m : c.moves)
    if (!m.measured) unmeasured += (unmeasured.empty() ? "" : ", ") + m.parameter.path;
  if (!unmeasured.empty())
    head += "# Left as they were (no measured row depends on them): " + unmeasured + "\n";
  return head + config_yaml(c.config);
}

std::string calibration_text(const Calibration& c, const Predictor& predictor) {
  std::string out = fmt::format("{:<24} {:<28} {:<16} {:>12} {:>12} {:>8} {:>12} {:>8}\n", "row", "model",
                                "layer", "measured", "before", "error", "after", "error");
  for (size_t i = 0; i < c.measured.size(); ++i) {
    const Measurement& m = predictor.rows()[i];
    std::string where =
        m.where.substr(m.where.find_last_of('/') == std::string::npos ? 0 : m.where.find_last_of('/') + 1);
    out += fmt::format("{:<24} {:<28} {:<16} {:>12.0f} {:>12.0f} {:>8} {:>12.0f} {:>8}\n", where, m.model,
                       m.layer.empty() ? "(model)" : m.layer, c.measured[i], c.before[i],
                       percent(c.before[i] / c.measured[i] - 1), c.after[i],
                       percent(c.after[i] / c.measured[i] - 1));
  }
  const ErrorSummary before = summarize(relative_errors(c.before, c.measured));
  const ErrorSummary after = summarize(relative_errors(c.after, c.measured));
  out += fmt::format(
      "\nmean |error|      before {:.2f}% (+-{:.2f}%), after {:.2f}% (+-{:.2f}%) over {} rows (95% "
      "intervals)\n",
      100 * before.mean, 100 * before.half_width, 100 * after.mean, 100 * after.half_width,
      c.measured.size());
  if (!c.held_out_error.empty()) {
    const ErrorSummary cv = summarize(c.held_out_error);
    out += fmt::format(
        "cross-validated   {:.2f}% (95% interval {:.2f}%..{:.2f}%): {} folds, each row predicted by "
        "the fit on the other folds\n",
        100 * cv.mean, 100 * std::max(0.0, cv.mean - cv.half_width), 100 * (cv.mean + cv.half_width),
        c.folds);
  } else {
    out += "cross-validated   (not run: needs --folds >= 2 and as many rows)\n";
  }
  out += "moved\n";
  for (const Move& m : c.moves) {
    if (!m.measured) {
      out += fmt::format("  {:<36} {} (no measured row depends on it)\n", m.parameter.path,
                         value_text(m.parameter, m.before));
      continue;
    }
    out += fmt::format("  {:<36} {} -> {} {}\n", m.parameter.path, value_text(m.parameter, m.before),
                       value_text(m.parameter, m.after), m.parameter.unit);
  }
  return out;
}

}  // namespace npusim::sim::calibrate
