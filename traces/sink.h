#pragma once
// Trace sinks: where events go when tracing is on. The simulator calls begin() once, event() per
// slice, power() once with the run's power profile (docs/energy.md) and finish() at the end of the run;
// finish() is idempotent, so the owner may call it again.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "isa/json_text.h"
#include "traces/energy.h"
#include "traces/event.h"

namespace npusim::traces {

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void begin(const TraceInfo& info) = 0;
  virtual void event(const Event& e) = 0;
  // The power profile, after the last event (sinks without a counter track ignore it).
  virtual void power(const std::vector<PowerStep>&) {}
  virtual void finish() = 0;
};

// Chrome trace-event JSON (chrome://tracing, Perfetto): one track per unit with thread_name
// metadata, one complete ("X") slice per event, timestamps in microseconds.
class ChromeTraceSink : public Sink {
 public:
  explicit ChromeTraceSink(std::ostream& out) : out_(out) {}
  void begin(const TraceInfo& info) override;
  void event(const Event& e) override;
  // A counter track "power" (watts), one "C" sample per step of the profile.
  void power(const std::vector<PowerStep>& steps) override;
  void finish() override;

 private:
  std::ostream& out_;
  TraceInfo info_;
  std::string buf_;                 // the text of the current call, written to out_ at its end
  std::optional<JsonWriter> json_;  // writes into buf_; the trace's object and event array stay open
  bool open_ = false;
};

// The same events as CSV with header unit,name,opcode,start_cycle,end_cycle,kind,reason,bytes,layer.
class CsvTraceSink : public Sink {
 public:
  explicit CsvTraceSink(std::ostream& out) : out_(out) {}
  void begin(const TraceInfo& info) override;
  void event(const Event& e) override;
  void finish() override;

 private:
  std::ostream& out_;
  TraceInfo info_;
  std::string buf_;
};

// Forwards every call to several sinks (null entries are skipped).
class TeeSink : public Sink {
 public:
  explicit TeeSink(std::vector<Sink*> sinks) : sinks_(std::move(sinks)) {}
  void begin(const TraceInfo& info) override;
  void event(const Event& e) override;
  void power(const std::vector<PowerStep>& steps) override;
  void finish() override;

 private:
  std::vector<Sink*> sinks_;
};

// The name a slice gets: its layer's name, "stall: <reason>" for stalls, the opcode otherwise.
std::string slice_name(const Event& e, const TraceInfo& info);

// JSON string escaping: the one in isa/json_text.h.
using npusim::append_json_string;
// A CSV field, quoted when it holds a comma, a quote, a newline or a carriage return (RFC 4180), quotes
// doubled: every CSV npusim writes (traces, layer tables, sweep results).
void append_csv_field(std::string& out, std::string_view s);

}  // namespace npusim::traces
