#pragma once
// The trace of an end-to-end run: the NPU's events shifted to where the model starts in the pipeline,
// and the host stages (pre-processing, copies, link transfers, post-processing) and NPU-inserted
// stages as slices on lanes of their own ("e2e: host_cpu_pre", ...), one per e2e::Resource.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/e2e/pipeline.h"
#include "traces/sink.h"

namespace npusim::sim::e2e {

class E2eTraceSink : public traces::Sink {
 public:
  // `plan`: the pipeline as plan_pipeline costed it (the model's start does not depend on its cycles).
  E2eTraceSink(traces::Sink& inner, const E2eResult& plan);
  void begin(const traces::TraceInfo& info) override;
  void event(const traces::Event& e) override;
  void power(const std::vector<traces::PowerStep>& steps) override;
  // Held until complete(): the simulator finishes its sink before the model's cycles are known.
  void finish() override {}
  // Writes the stages of `r` (add_npu_run done) on their lanes, then finishes the inner sink.
  void complete(const E2eResult& r);

 private:
  traces::Sink& inner_;
  std::vector<std::string> names_;  // the stages' slice names
  uint64_t offset_ = 0;             // cycles before the model starts
  size_t first_lane_ = 0;           // unit index of the first e2e lane
  size_t first_layer_ = 0;          // layer index of the first stage's name
  bool begun_ = false;
  bool done_ = false;
};

}  // namespace npusim::sim::e2e
