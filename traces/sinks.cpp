#include <fmt/format.h>

#include "traces/sink.h"

namespace npusim::traces {
namespace {

std::string_view opcode_name(isa::Opcode op) { return isa::format(op).mnemonic; }

}  // namespace

void append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) {
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
  info_ = info;
  buf_.clear();
  buf_ += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  buf_ += "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"npusim\"}}";
  for (size_t i = 0; i < info_.units.size(); ++i) {
    buf_ += fmt::format(",\n{{\"ph\":\"M\",\"pid\":0,\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":", i);
    append_json_string(buf_, info_.units[i]);
    buf_ += fmt::format("}}}},\n{{\"ph\":\"M\",\"pid\":0,\"tid\":{},\"name\":\"thread_sort_index\","
                        "\"args\":{{\"sort_index\":{}}}}}",
                        i, i);
  }
  out_ << buf_;
  open_ = true;
}

void ChromeTraceSink::event(const Event& e) {
  buf_.clear();
  const double f = info_.frequency_mhz;
  buf_ += ",\n{\"ph\":\"X\",\"pid\":0,\"tid\":";
  fmt::format_to(std::back_inserter(buf_), "{},\"name\":", e.unit);
  append_json_string(buf_, slice_name(e, info_));
  fmt::format_to(std::back_inserter(buf_),
                 ",\"cat\":\"{}\",\"ts\":{:.6f},\"dur\":{:.6f},\"args\":{{\"opcode\":\"{}\",\"instruction\":{},"
                 "\"start_cycle\":{},\"end_cycle\":{},\"bytes\":{},\"reason\":\"{}\"",
                 kKindNames[static_cast<int>(e.kind)], e.start / f, (e.end - e.start) / f, opcode_name(e.opcode),
                 e.instruction, e.start, e.end, e.bytes, kReasonNames[static_cast<int>(e.reason)]);
  if (e.layer < info_.layers.size()) {
    buf_ += ",\"layer\":";
    append_json_string(buf_, info_.layers[e.layer]);
  }
  buf_ += "}}";
  out_ << buf_;
}

void ChromeTraceSink::power(const std::vector<PowerStep>& steps) {
  if (!open_) return;
  buf_.clear();
  for (const PowerStep& s : steps) {
    fmt::format_to(std::back_inserter(buf_),
                   ",\n{{\"ph\":\"C\",\"pid\":0,\"name\":\"power\",\"ts\":{:.6f},\"args\":{{\"W\":{}}}}}",
                   s.start_cycle / info_.frequency_mhz, s.watts);
  }
  out_ << buf_;
}

void ChromeTraceSink::finish() {
  if (!open_) return;
  open_ = false;
  out_ << "\n]}\n";
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
