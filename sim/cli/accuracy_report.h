#pragma once
// `run --accuracy` and `--advise-sqnr`: the quantized model against fp32 on evaluation inputs, and the
// layers to keep in higher precision; the report's `accuracy` section (docs/quantization.md).
#include <cstdint>
#include <string>

#include "compiler/quant/accuracy.h"
#include "isa/machine/config.h"
#include "sim/cli/command.h"
#include "sim/cli/options/accuracy.h"
#include "sim/cli/options/model.h"
#include "sim/cli/simulate.h"
#include "sim/model/model.h"

namespace npusim::sim::cli {

// The advice's lines on the console: met by the plan as it is only when no layer moves to int16 or fp16;
// else how many move where, the overrides, and the int16 + fp16 mix against its fp16 twin.
std::string advice_answer(const compiler::quant::MixedPrecisionAdvice& adv);

// Adds the accuracy section, its summary and the advice to `extras`.
void accuracy_report(Context& /*ctx*/, const CompiledModel& cm, const isa::NpuConfig& config,
                     const ModelCliOptions& m, const AccuracyCliOptions& a, uint32_t seed,
                     ReportExtras& extras);

}  // namespace npusim::sim::cli
