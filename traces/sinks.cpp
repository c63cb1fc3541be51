#include <fmt/format.h>

#include "traces/sink.h"

namespace npusim::traces {
namespace {

std::string_view opcode_name(isa::Opcode op) { return isa::format(op).mnemonic; }

}  // namespace

void append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) {
    out += s;
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string slice_name(const Event& e, const TraceInfo& info) {
  if (e.kind == Kind::kStall) return "stall: " + std::string(kReasonNames[static_cast<int>(e.reason)]);
  if (e.layer < info.layers.size()) return info.layers[e.layer];
  return std::string(opcode_name(e.opcode));
}

void ChromeTraceSink::begin(const TraceInfo& info) {
  using Layout = JsonWriter::Layout;
  info_ = info;
  buf_.clear();
  JsonWriter& w = json_.emplace(buf_);
  w.object(Layout::kCompact).member("displayTimeUnit", "ns").key("traceEvents").array(Layout::kCompactLines);
  w.object(Layout::kCompact)
      .member("ph", "M")
      .member("pid", 0)
      .member("tid", 0)
      .member("name", "process_name");
  w.key("args").object(Layout::kCompact).member("name", "npusim").end().end();
  for (size_t i = 0; i < info_.units.size(); ++i) {
    w.object(Layout::kCompact)
        .member("ph", "M")
        .member("pid", 0)
        .member("tid", i)
        .member("name", "thread_name");
    w.key("args").object(Layout::kCompact).member("name", info_.units[i]).end().end();
    w.object(Layout::kCompact)
        .member("ph", "M")
        .member("pid", 0)
        .member("tid", i)
        .member("name", "thread_sort_index");
    w.key("args").object(Layout::kCompact).member("sort_index", i).end().end();
  }
  out_ << buf_;
  open_ = true;
}

void ChromeTraceSink::event(const Event& e) {
  using Layout = JsonWriter::Layout;
  buf_.clear();
  const double f = info_.frequency_mhz;
  JsonWriter& w = *json_;
  w.object(Layout::kCompact).member("ph", "X").member("pid", 0).member("tid", e.unit);
  w.member("name", slice_name(e, info_)).member("cat", kKindNames[static_cast<int>(e.kind)]);
  w.key("ts").fixed(e.start / f, 6).key("dur").fixed((e.end - e.start) / f, 6);
  w.key("args")
      .object(Layout::kCompact)
      .member("opcode", opcode_name(e.opcode))
      .member("instruction", e.instruction);
  w.member("start_cycle", e.start).member("end_cycle", e.end).member("bytes", e.bytes);
  w.member("reason", kReasonNames[static_cast<int>(e.reason)]);
  if (e.layer < info_.layers.size()) w.member("layer", info_.layers[e.layer]);
  w.end().end();
  out_ << buf_;
}

void ChromeTraceSink::power(const std::vector<PowerStep>& steps) {
  using Layout = JsonWriter::Layout;
  if (!open_) return;
  buf_.clear();
  JsonWriter& w = *json_;
  for (const PowerStep& s : steps) {
    w.object(Layout::kCompact).member("ph", "C").member("pid", 0).member("name", "power");
    w.key("ts").fixed(s.start_cycle / info_.frequency_mhz, 6);
    w.key("args").object(Layout::kCompact).member("W", s.watts).end().end();
  }
  out_ << buf_;
}

void ChromeTraceSink::finish() {
  if (!open_) return;
  open_ = false;
  buf_.clear();
  json_->end().end();
  out_ << buf_ << '\n';
  out_.flush();
}

void CsvTraceSink::begin(const TraceInfo& info) {
  info_ = info;
  out_ << "unit,name,opcode,start_cycle,end_cycle,kind,reason,bytes,layer\n";
}

void CsvTraceSink::event(const Event& e) {
  buf_.clear();
  append_csv_field(buf_, e.unit < info_.units.size() ? info_.units[e.unit] : std::string_view("?"));
  buf_ += ',';
  append_csv_field(buf_, slice_name(e, info_));
  fmt::format_to(std::back_inserter(buf_), ",{},{},{},{},{},{},", opcode_name(e.opcode), e.start, e.end,
                 kKindNames[static_cast<int>(e.kind)], kReasonNames[static_cast<int>(e.reason)], e.bytes);
  if (e.layer < info_.layers.size()) append_csv_field(buf_, info_.layers[e.layer]);
  buf_ += '\n';
  out_ << buf_;
}

void CsvTraceSink::finish() { out_.flush(); }

void TeeSink::begin(const TraceInfo& info) {
  for (Sink* s : sinks_)
    if (s) s->begin(info);
}
void TeeSink::event(const Event& e) {
  for (Sink* s : sinks_)
    if (s) s->event(e);
}
void TeeSink::power(const std::vector<PowerStep>& steps) {
  for (Sink* s : sinks_)
    if (s) s->power(steps);
}
void TeeSink::finish() {
  for (Sink* s : sinks_)
    if (s) s->finish();
}

}  // namespace npusim::traces
