#include "isa/program.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string_view>

namespace npusim::isa {
namespace {

constexpr char kMagic[8] = {'N', 'P', 'U', 'S', 'I', 'M', 'P', 'G'};
constexpr size_t kFileHeaderBytes = 16;     // magic, version, section count
constexpr size_t kSectionHeaderBytes = 12;  // kind, byte length

enum SectionKind : uint32_t {
  kMachine = 1,
  kLayers = 2,
  kData = 3,
  kInstructions = 4,
  kHostOps = 5,
  kTensors = 6,
  kLayerInfo = 7,
};
constexpr uint32_t kNumSectionKinds = 7;
constexpr uint8_t kNoPrecision = 255;

std::string_view section_name(uint32_t kind) {
  static constexpr std::array<std::string_view, kNumSectionKinds + 1> kNames = {
      "?", "machine", "layers", "data", "instructions", "host_ops", "tensors", "layer_info"};
  return kind >= 1 && kind <= kNumSectionKinds ? kNames[kind] : kNames[0];
}

// ---------------------------------------------------------------------------------------------
// Writing.

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void str(const std::string& s) {
    if (s.size() > UINT32_MAX) throw ProgramError("a name is longer than 4 GiB and cannot be stored");
    u32(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  size_t size() const { return out_.size(); }
  // Patches a u64 written earlier at byte `at`.
  void patch_u64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) out_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

uint32_t count32(size_t n, std::string_view what) {
  if (n > UINT32_MAX)
    throw ProgramError(fmt::format("too many {} ({}) for the program file format", what, n));
  return static_cast<uint32_t>(n);
}

// ---------------------------------------------------------------------------------------------
// Reading. Every read checks the bytes left in the current section first, so a corrupt length can
// only produce a ProgramError, never an out-of-bounds access or a huge allocation.

class Reader {
 public:
  Reader(const uint8_t* data, size_t begin, size_t end, std::string_view where)
      : data_(data), pos_(begin), end_(end), where_(where) {}

  size_t pos() const { return pos_; }
  size_t left() const { return end_ - pos_; }

  void need(size_t n, std::string_view what) const {
    if (n > left()) {
      throw ProgramError(fmt::format("{} at byte {} needs {} bytes but only {} remain in {}", what, pos_, n,
                                     left(), where_));
    }
  }
  uint8_t u8(std::string_view what) {
    need(1, what);
    return data_[pos_++];
  }
  uint32_t u32(std::string_view what) { return static_cast<uint32_t>(le(4, what)); }
  uint64_t u64(std::string_view what) { return le(8, what); }

  // A count of items each at least `min_item_bytes` long: rejected before anything is allocated when
  // the remaining bytes cannot possibly hold that many.
  size_t count32(std::string_view what, size_t min_item_bytes) {
    const size_t at = pos_;
    const uint32_t n = u32(what);
    check_count(n, at, what, min_item_bytes);
    return n;
  }
  void check_count(uint64_t n, size_t at, std::string_view what, size_t min_item_bytes) const {
    if (n > left() / min_item_bytes) {
      throw ProgramError(
          fmt::format("{} at byte {} claims {} entries of at least {} bytes but only {} bytes "
                      "remain in {}",
                      what, at, n, min_item_bytes, left(), where_));
    }
  }

  std::string str(std::string_view what) {
    const size_t at = pos_;
    const uint32_t n = u32(what);
    if (n > left()) {
      throw ProgramError(
          fmt::format("{} at byte {} claims {} bytes but only {} remain in {}", what, at, n, left(), where_));
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  void copy(void* dst, size_t n) {
    std::memcpy(dst, data_ + pos_, n);
    pos_ += n;
  }
  const uint8_t* here() const { return data_ + pos_; }
  void skip(size_t n) { pos_ += n; }

 private:
  uint64_t le(int n, std::string_view what) {
    need(static_cast<size_t>(n), what);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }

  const uint8_t* data_;
  size_t pos_;
  size_t end_;
  std::string_view where_;
};

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void read_machine(Reader& r, Program& p) {
  p.machine.assign(reinterpret_cast<const char*>(r.here()), r.left());
  r.skip(r.left());
  // The machine spec is "key=value\n" lines; anything else would not survive the assembly round trip.
  size_t line_start = 0;
  int line = 1;
  while (line_start < p.machine.size()) {
    const size_t nl = p.machine.find('\n', line_start);
    if (nl == std::string::npos) {
      throw ProgramError(fmt::format("machine section line {} does not end with a newline", line));
    }
    const size_t eq = p.machine.find('=', line_start);
    if (eq == line_start || eq >= nl) {
      throw ProgramError(fmt::format("machine section line {} is not of the form key=value", line));
    }
    line_start = nl + 1;
    ++line;
  }
}

void read_layers(Reader& r, Program& p) {
  const size_t n = r.count32("layer count", 8);
  p.layers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    p.layers[i].name = r.str(fmt::format("layer {} name", i));
    p.layers[i].op = r.str(fmt::format("layer {} op type", i));
  }
}

// The layers' MACs and precisions (names and op types empty); deserialize() checks the count against
// the layers section and merges them.
std::vector<Layer> read_layer_info(Reader& r) {
  std::vector<Layer> info(r.count32("layer_info count", 9));
  for (size_t i = 0; i < info.size(); ++i) {
    info[i].macs = r.u64(fmt::format("layer {} MACs", i));
    const uint8_t t = r.u8(fmt::format("layer {} precision", i));
    if (t != kNoPrecision && t >= kNumDTypes) {
      throw ProgramError(fmt::format("layer {} has precision {} (not a dtype)", i, t));
    }
    if (t != kNoPrecision) info[i].precision = static_cast<DType>(t);
  }
  return info;
}

void read_data(Reader& r, Program& p) {
  const size_t n = r.count32("data segment count", 16);
  p.data.resize(n);
  for (size_t i = 0; i < n; ++i) {
    DataSegment& d = p.data[i];
    d.dram_addr = r.u64("data segment address");
    const size_t at = r.pos();
    const uint64_t len = r.u64("data segment length");
    if (len > r.left()) {
      throw ProgramError(
          fmt::format("data segment {} at byte {} claims {} bytes but only {} remain in section "
                      "'data'",
                      i, at, len, r.left()));
    }
    d.bytes.resize(len);
    if (len) r.copy(d.bytes.data(), len);
  }
}

void read_instructions(Reader& r, Program& p) {
  const size_t at = r.pos();
  const uint64_t n = r.u64("instruction word count");
  r.check_count(n, at, "instruction word count", 16);
  std::vector<uint64_t> words(2 * n);
  for (size_t i = 0; i < words.size(); ++i) words[i] = load_le64(r.here() + 8 * i);
  r.skip(16 * n);
  // Most instructions take two or three words; reserving for the average avoids regrowth.
  p.instructions.reserve(n / 2 + 1);
  size_t pos = 0;
  while (pos < words.size()) {
    try {
      p.instructions.push_back(decode(words, pos));
    } catch (const EncodeError& e) {
      throw ProgramError(fmt::format("instruction {}: {}", p.instructions.size(), e.what()));
    }
  }
}

void read_host_ops(Reader& r, Program& p) {
  const size_t n = r.count32("host op count", 16);
  p.host_ops.resize(n);
  for (size_t i = 0; i < n; ++i) {
    p.host_ops[i].name = r.str(fmt::format("host op {} name", i));
    p.host_ops[i].op_type = r.str(fmt::format("host op {} op type", i));
    p.host_ops[i].cpu_ops = r.u64("host op cpu ops");
  }
}

void read_tensors(Reader& r, Program& p) {
  const size_t n = r.count32("tensor count", 18);
  p.tensors.resize(n);
  for (size_t i = 0; i < n; ++i) {
    TensorBinding& t = p.tensors[i];
    t.name = r.str(fmt::format("tensor {} name", i));
    const uint8_t role = r.u8("tensor role");
    if (role > 1)
      throw ProgramError(
          fmt::format("tensor {} ('{}') has role {}, not 0 (input) or 1 (output)", i, t.name, role));
    t.role = static_cast<TensorBinding::Role>(role);
    const uint8_t dtype = r.u8("tensor dtype");
    if (dtype >= kNumDTypes) {
      throw ProgramError(
          fmt::format("tensor {} ('{}') has dtype {}, not one of 0..{}", i, t.name, dtype, kNumDTypes - 1));
    }
    t.dtype = static_cast<DType>(dtype);
    t.dram_addr = r.u64("tensor address");
    const size_t rank = r.count32(fmt::format("tensor {} rank", i), 8);
    t.dims.resize(rank);
    for (size_t d = 0; d < rank; ++d) t.dims[d] = r.u64("tensor dimension");
  }
}

// Instructions refer to layers and host ops by index; an index past the end is rejected whenever the
// program defines any (a program without layers or host ops leaves the fields as free tags).
void check_references(const Program& p) {
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction& ins = p.instructions[i];
    if (!p.layers.empty() && ins.layer() >= p.layers.size()) {
      throw ProgramError(fmt::format("instruction {} ({}) refers to layer {} but the program has {} layers",
                                     i, format(ins.opcode).mnemonic, ins.layer(), p.layers.size()));
    }
    if (ins.opcode == Opcode::kHostCall && !p.host_ops.empty() &&
        static_cast<uint64_t>(ins.get(Field::kHostOp)) >= p.host_ops.size()) {
      throw ProgramError(fmt::format("instruction {} (HOSTCALL) refers to host op {} but the program has {}",
                                     i, ins.get(Field::kHostOp), p.host_ops.size()));
    }
  }
}

}  // namespace

void require_data_bytes(const Program& p, const std::string& what) {
  for (const DataSegment& d : p.data) {
    if (d.elided_bytes == 0) continue;
    throw ProgramError(
        fmt::format("{} needs the program's data, but the {} bytes at DRAM {:#x} were compiled "
                    "for timing only (shape-only weights): compile the model with its values",
                    what, d.elided_bytes, d.dram_addr));
  }
}

std::vector<uint8_t> serialize(const Program& p) {
  require_data_bytes(p, "writing a program file");
  std::vector<uint8_t> out;
  std::vector<uint64_t> words;
  words.reserve(p.instructions.size() * 5);
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    try {
      encode(p.instructions[i], words);
    } catch (const EncodeError& e) {
      throw ProgramError(fmt::format("instruction {}: {}", i, e.what()));
    }
  }
  out.reserve(kFileHeaderBytes + 6 * kSectionHeaderBytes + p.machine.size() + 8 * words.size() + 64);

  Writer w(out);
  w.bytes(kMagic, sizeof kMagic);
  w.u32(kProgramFormatVersion);
  w.u32(kNumSectionKinds);
  auto section = [&](uint32_t kind, auto&& body) {
    w.u32(kind);
    const size_t len_at = w.size();
    w.u64(0);
    body();
    w.patch_u64(len_at, w.size() - len_at - 8);
  };
  section(kMachine, [&] { w.bytes(p.machine.data(), p.machine.size()); });
  section(kLayers, [&] {
    w.u32(count32(p.layers.size(), "layers"));
    for (const Layer& l : p.layers) {
      w.str(l.name);
      w.str(l.op);
    }
  });
  section(kData, [&] {
    w.u32(count32(p.data.size(), "data segments"));
    for (const DataSegment& d : p.data) {
      w.u64(d.dram_addr);
      w.u64(d.bytes.size());
      w.bytes(d.bytes.data(), d.bytes.size());
    }
  });
  section(kInstructions, [&] {
    w.u64(words.size() / 2);
    for (uint64_t x : words) w.u64(x);
  });
  section(kHostOps, [&] {
    w.u32(count32(p.host_ops.size(), "host ops"));
    for (const HostOp& h : p.host_ops) {
      w.str(h.name);
      w.str(h.op_type);
      w.u64(h.cpu_ops);
    }
  });
  section(kTensors, [&] {
    w.u32(count32(p.tensors.size(), "tensors"));
    for (const TensorBinding& t : p.tensors) {
      w.str(t.name);
      w.u8(static_cast<uint8_t>(t.role));
      w.u8(static_cast<uint8_t>(t.dtype));
      w.u64(t.dram_addr);
      w.u32(count32(t.dims.size(), "tensor dimensions"));
      for (uint64_t d : t.dims) w.u64(d);
    }
  });
  section(kLayerInfo, [&] {
    w.u32(count32(p.layers.size(), "layers"));
    for (const Layer& l : p.layers) {
      w.u64(l.macs);
      w.u8(l.precision ? static_cast<uint8_t>(*l.precision) : kNoPrecision);
    }
  });
  return out;
}

Program deserialize(const std::vector<uint8_t>& bytes) {
  const uint8_t* data = bytes.data();
  const size_t size = bytes.size();
  if (size < sizeof kMagic || std::memcmp(data, kMagic, sizeof kMagic) != 0) {
    if (size < sizeof kMagic && (size == 0 || std::memcmp(data, kMagic, size) == 0)) {
      throw ProgramError(
          fmt::format("not an npusim program (only {} bytes, the header needs {})", size, kFileHeaderBytes));
    }
    throw ProgramError("not an npusim program (bad magic)");
  }
  Reader r(data, sizeof kMagic, size, "the file");
  const uint32_t version = r.u32("format version");
  if (version != kProgramFormatVersion) {
    throw ProgramError(fmt::format("program format version {} is not supported (this build reads version {})",
                                   version, kProgramFormatVersion));
  }
  const size_t count = r.count32("section count", kSectionHeaderBytes);

  Program p;
  std::array<size_t, kNumSectionKinds + 1> seen_at{};  // 0: not seen yet
  std::vector<Layer> layer_info;
  for (size_t s = 0; s < count; ++s) {
    const size_t at = r.pos();
    const uint32_t kind = r.u32("section kind");
    const uint64_t len = r.u64("section length");
    if (kind < 1 || kind > kNumSectionKinds) {
      throw ProgramError(fmt::format("unknown section kind {} at byte {}", kind, at));
    }
    const std::string_view name = section_name(kind);
    if (seen_at[kind]) {
      throw ProgramError(
          fmt::format("section '{}' appears twice (at byte {} and at byte {})", name, seen_at[kind], at));
    }
    seen_at[kind] = at;
    if (len > r.left()) {
      throw ProgramError(
          fmt::format("section '{}' at byte {} claims {} bytes but only {} remain", name, at, len, r.left()));
    }
    const std::string where = fmt::format("section '{}'", name);
    Reader body(data, r.pos(), r.pos() + len, where);
    switch (kind) {
      case kMachine:
        read_machine(body, p);
        break;
      case kLayers:
        read_layers(body, p);
        break;
      case kData:
        read_data(body, p);
        break;
      case kInstructions:
        read_instructions(body, p);
        break;
      case kHostOps:
        read_host_ops(body, p);
        break;
      case kTensors:
        read_tensors(body, p);
        break;
      case kLayerInfo:
        layer_info = read_layer_info(body);
        break;
    }
    if (body.left() != 0) {
      throw ProgramError(fmt::format("section '{}' at byte {} has {} unused bytes after its contents", name,
                                     at, body.left()));
    }
    r.skip(len);
  }
  if (r.left() != 0) {
    throw ProgramError(
        fmt::format("{} unexpected bytes after the last section (at byte {})", r.left(), r.pos()));
  }
  if (seen_at[kLayerInfo] && layer_info.size() != p.layers.size()) {
    throw ProgramError(fmt::format("section 'layer_info' describes {} layers but the program has {}",
                                   layer_info.size(), p.layers.size()));
  }
  for (size_t i = 0; i < layer_info.size(); ++i) {
    p.layers[i].macs = layer_info[i].macs;
    p.layers[i].precision = layer_info[i].precision;
  }
  check_references(p);
  return p;
}

void write_program_file(const std::string& path, const Program& p) {
  const std::vector<uint8_t> bytes = serialize(p);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw ProgramError(fmt::format("cannot open '{}' for writing: {}", path, std::strerror(errno)));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw ProgramError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
}

Program read_program_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw ProgramError(fmt::format("cannot open program file '{}': {}", path, std::strerror(errno)));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  const bool failed = std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (failed) throw ProgramError(fmt::format("cannot read program file '{}': {}", path, std::strerror(err)));
  try {
    return deserialize(bytes);
  } catch (const ProgramError& e) {
    throw ProgramError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace npusim::isa
