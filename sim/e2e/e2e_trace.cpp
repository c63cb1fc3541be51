#include "sim/e2e/e2e_trace.h"

namespace npusim::sim::e2e {

E2eTraceSink::E2eTraceSink(traces::Sink& inner, const E2eResult& plan) : inner_(inner) {
  for (const Stage& s : plan.stages) names_.push_back("e2e " + s.name);
  for (size_t i = 0; i < plan.model_stage; ++i) {
    const Stage& s = plan.stages[i];
    offset_ += static_cast<uint64_t>(s.per_frame ? s.run_cycles * plan.batch : s.run_cycles);
  }
}

void E2eTraceSink::begin(const traces::TraceInfo& info) {
  traces::TraceInfo t = info;
  first_lane_ = t.units.size();
  for (int r = 0; r < kNumResources; ++r)
    t.units.push_back("e2e: " + std::string(resource_name(static_cast<Resource>(r))));
  first_layer_ = t.layers.size();
  t.layers.insert(t.layers.end(), names_.begin(), names_.end());
  begun_ = true;
  inner_.begin(t);
}

void E2eTraceSink::event(const traces::Event& e) {
  traces::Event s = e;
  s.start += offset_;
  s.end += offset_;
  inner_.event(s);
}

void E2eTraceSink::power(const std::vector<traces::PowerStep>& steps) {
  std::vector<traces::PowerStep> shifted = steps;
  for (traces::PowerStep& p : shifted) p.start_cycle += offset_;
  inner_.power(shifted);
}

void E2eTraceSink::complete(const E2eResult& r) {
  if (done_) return;
  done_ = true;
  if (begun_) {
    for (size_t i = 0; i < r.stages.size(); ++i) {
      const Stage& s = r.stages[i];
      if (i == r.model_stage || s.cycles == 0) continue;
      traces::Event e;
      e.unit = static_cast<uint16_t>(first_lane_ + static_cast<size_t>(s.resource));
      e.layer = static_cast<uint32_t>(first_layer_ + i);
      e.start = static_cast<uint64_t>(s.start_cycle);
      e.end = static_cast<uint64_t>(s.start_cycle + s.cycles);
      e.bytes = static_cast<uint64_t>(s.bytes);
      inner_.event(e);
    }
  }
  inner_.finish();
}

}  // namespace npusim::sim::e2e
