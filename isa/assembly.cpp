#include "isa/assembly.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "isa/edit_distance.h"

namespace npusim::isa {
namespace {

// ---------------------------------------------------------------------------------------------
// Small text helpers.

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Case-insensitive Levenshtein distance; names are short, so the O(n*m) table is cheap.
size_t typo_distance(std::string_view a, std::string_view b) {
  return static_cast<size_t>(
      edit_distance_between(a, b, false, [](char x, char y) { return lower(x) == lower(y); }));
}

// " (did you mean 'x'?)" for the closest candidate when it is plausibly what was meant, else
// " (valid: a, b, c)" so the user always learns what would have been accepted.
template <class Range>
std::string suggestion(std::string_view word, const Range& candidates) {
  std::string_view best;
  size_t best_d = SIZE_MAX;
  std::string all;
  for (std::string_view c : candidates) {
    if (!all.empty()) all += ", ";
    all += c;
    size_t d = typo_distance(word, c);
    // A candidate that the word extends or abbreviates ("dram_addr" for "dram") is a good guess too.
    const bool prefix = c.size() >= 2 && word.size() >= 2 &&
                        (iequal(word.substr(0, c.size()), c) || iequal(c.substr(0, word.size()), word));
    if (prefix) d = std::min<size_t>(d, 2);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (!best.empty() && best_d <= std::max<size_t>(2, word.size() / 3)) {
    return fmt::format(" (did you mean '{}'?)", best);
  }
  return all.empty() ? std::string() : fmt::format(" (valid: {})", all);
}

// A name that can be written without quotes: no whitespace, control bytes, '#' or '"'.
bool bare_safe(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c == 0x7f || c == '#' || c == '"') return false;
  }
  return true;
}

constexpr char kHexDigits[] = "0123456789abcdef";

void put_quoted(std::string& o, std::string_view s) {
  o += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      o += '\\';
      o += ch;
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else if (c == '\r') {
      o += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      o += "\\x";
      o += kHexDigits[c >> 4];
      o += kHexDigits[c & 15];
    } else {
      o += ch;
    }
  }
  o += '"';
}

void put_name(std::string& o, std::string_view s) {
  if (bare_safe(s)) {
    o += s;
  } else {
    put_quoted(o, s);
  }
}

void put_dec(std::string& o, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  o.append(buf, r.ptr);
}

void put_signed(std::string& o, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  o.append(buf, r.ptr);
}

void put_hex(std::string& o, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, 16);
  o += "0x";
  o.append(buf, r.ptr);
}

// Fields holding byte addresses read best in hex; everything else is a count and reads best in decimal.
constexpr std::array<bool, kNumFields> make_address_fields() {
  std::array<bool, kNumFields> a{};
  for (Field f : {Field::kDramAddr, Field::kSramAddr, Field::kAAddr, Field::kBAddr, Field::kCAddr,
                  Field::kSrc1Addr, Field::kSrc2Addr, Field::kDstAddr}) {
    a[static_cast<int>(f)] = true;
  }
  return a;
}
constexpr std::array<bool, kNumFields> kAddressField = make_address_fields();

template <size_t N>
void put_enum(std::string& o, int64_t v, const std::array<std::string_view, N>& names) {
  if (v >= 0 && static_cast<size_t>(v) < N) {
    o += names[static_cast<size_t>(v)];
  } else {
    put_signed(o, v);
  }
}

// The instruction writer below is the hot path (traces disassemble every instruction they show): it
// writes through a raw pointer into space reserved from a per-instruction upper bound.
constexpr size_t kMaxValueChars = 30;  // "load|matrix|vector|store|host"; int64 and 0x-hex are shorter

char* raw(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
char* raw_dec(char* p, uint64_t v) { return std::to_chars(p, p + 20, v).ptr; }
char* raw_signed(char* p, int64_t v) { return std::to_chars(p, p + 20, v).ptr; }
char* raw_hex(char* p, uint64_t v) {
  *p++ = '0';
  *p++ = 'x';
  return std::to_chars(p, p + 16, v, 16).ptr;
}
template <size_t N>
char* raw_enum(char* p, int64_t v, const std::array<std::string_view, N>& names) {
  if (v >= 0 && static_cast<size_t>(v) < N) return raw(p, names[static_cast<size_t>(v)]);
  return raw_signed(p, v);
}

char* raw_queue_mask(char* p, int64_t v) {
  if (v == 0) {
    *p++ = '-';
    return p;
  }
  if (v < 0 || v >= (int64_t{1} << kNumQueues)) return raw_signed(p, v);
  bool first = true;
  for (int q = 0; q < kNumQueues; ++q) {
    if ((v >> q) & 1) {
      if (!first) *p++ = '|';
      p = raw(p, kQueueNames[q]);
      first = false;
    }
  }
  return p;
}

// How each layer is written in `layer=`: its name when that name reads back to the same index (an
// identifier not starting with a digit, and the first layer with that name), else its index.
class LayerNames {
 public:
  explicit LayerNames(const Program* p) : p_(p) {}

  // For whole-program disassembly: decide every layer once.
  void precompute() {
    if (!p_) return;
    std::unordered_map<std::string_view, size_t> first;
    first.reserve(p_->layers.size());
    by_name_.resize(p_->layers.size());
    for (size_t i = 0; i < p_->layers.size(); ++i) {
      const std::string& name = p_->layers[i].name;
      const bool fresh = first.emplace(name, i).second;
      by_name_[i] = fresh && usable(name);
    }
    precomputed_ = true;
  }

  // The name to print for layer `v`, or nullptr to print the number.
  const std::string* name(int64_t v) const {
    if (!p_ || v < 0 || static_cast<uint64_t>(v) >= p_->layers.size()) return nullptr;
    const size_t i = static_cast<size_t>(v);
    const std::string& n = p_->layers[i].name;
    return (precomputed_ ? by_name_[i] : (usable(n) && first_index(n) == i)) ? &n : nullptr;
  }

 private:
  static bool usable(const std::string& name) { return bare_safe(name) && !is_digit(name[0]); }
  size_t first_index(const std::string& name) const {
    for (size_t i = 0; i < p_->layers.size(); ++i) {
      if (p_->layers[i].name == name) return i;
    }
    return SIZE_MAX;
  }

  const Program* p_;
  std::vector<bool> by_name_;
  bool precomputed_ = false;
};

char* raw_field(char* p, const FieldSpec& s, int64_t v, const std::string* layer_name) {
  *p++ = ' ';
  p = raw(p, s.name);
  *p++ = '=';
  switch (s.kind) {
    case FieldKind::kUnsigned:
      if (v < 0) return raw_signed(p, v);
      return kAddressField[static_cast<int>(s.field)] ? raw_hex(p, static_cast<uint64_t>(v))
                                                      : raw_dec(p, static_cast<uint64_t>(v));
    case FieldKind::kSigned:
      return raw_signed(p, v);
    case FieldKind::kQueueMask:
      return raw_queue_mask(p, v);
    case FieldKind::kDType:
      return raw_enum(p, v, kDTypeNames);
    case FieldKind::kBuffer:
      return raw_enum(p, v, kBufferNames);
    case FieldKind::kVecOp:
      return raw_enum(p, v, kVecOpNames);
    case FieldKind::kBcast:
      return raw_enum(p, v, kBcastNames);
    case FieldKind::kLayer:
      return layer_name ? raw(p, *layer_name) : raw_signed(p, v);
  }
  return p;
}

// Upper bound of the text of one instruction of each opcode, layer name excluded.
std::array<size_t, kNumOpcodes> make_text_bounds() {
  std::array<size_t, kNumOpcodes> b{};
  for (int op = 0; op < kNumOpcodes; ++op) {
    const Format& fmt = kFormats[op];
    b[op] = fmt.mnemonic.size() + 32;
    for (const FieldSpec& s : layout::kHeader) b[op] += s.name.size() + 2 + kMaxValueChars;
    for (int i = 0; i < fmt.num_fields; ++i) b[op] += fmt.fields[i].name.size() + 2 + kMaxValueChars;
  }
  return b;
}
const std::array<size_t, kNumOpcodes> kTextBounds = make_text_bounds();

void put_instruction(std::string& o, const Instruction& ins, const LayerNames& layers) {
  if (static_cast<int>(ins.opcode) >= kNumOpcodes) {
    o += "?opcode=";
    put_dec(o, static_cast<uint64_t>(ins.opcode));
    return;
  }
  const Format& fmt = format(ins.opcode);
  const std::string* layer_name = layers.name(ins.get(Field::kLayer));
  const size_t at = o.size();
  o.resize(at + kTextBounds[static_cast<int>(ins.opcode)] + (layer_name ? layer_name->size() : 0));
  char* const start = &o[at];
  char* p = raw(start, fmt.mnemonic);
  for (const FieldSpec& s : layout::kHeader) {
    const int64_t v = ins.get(s.field);
    if (v != 0) p = raw_field(p, s, v, layer_name);
  }
  for (int i = 0; i < fmt.num_fields; ++i)
    p = raw_field(p, fmt.fields[i], ins.get(fmt.fields[i].field), nullptr);
  o.resize(at + static_cast<size_t>(p - start));
}

// ---------------------------------------------------------------------------------------------
// Parsing.

// The assembler's state while it walks the text; every error goes through fail() so it carries the
// source name and line.
class Assembler {
 public:
  Assembler(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  Program run() {
    // An instruction is 528 bytes: growing the vector by doubling would copy the program several times.
    const size_t lines = static_cast<size_t>(std::count(text_.begin(), text_.end(), '\n')) + 1;
    p_.instructions.reserve(lines);
    lines_.reserve(lines);
    size_t pos = 0;
    while (pos <= text_.size()) {
      size_t nl = text_.find('\n', pos);
      if (nl == std::string::npos) nl = text_.size();
      ++line_;
      parse_line(std::string_view(text_).substr(pos, nl - pos));
      pos = nl + 1;
    }
    check_references();
    return std::move(p_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw ProgramError(fmt::format("{}:{}: {}", source_, line_, msg));
  }
  [[noreturn]] void fail_at(int line, const std::string& msg) const {
    throw ProgramError(fmt::format("{}:{}: {}", source_, line, msg));
  }

  // Splits a line into tokens: bare runs of non-space characters, or "quoted strings"; `#` outside
  // quotes starts a comment.
  void tokenize(std::string_view line) {
    tokens_.clear();
    size_t i = 0;
    while (true) {
      while (i < line.size() && is_space(line[i])) ++i;
      if (i >= line.size() || line[i] == '#') return;
      const size_t start = i;
      if (line[i] == '"') {
        ++i;
        while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
        if (i >= line.size()) fail(fmt::format("unterminated string {}", line.substr(start)));
        ++i;
        if (i < line.size() && !is_space(line[i]) && line[i] != '#') {
          fail(fmt::format("unexpected '{}' right after the string {}", line[i],
                           line.substr(start, i - start)));
        }
      } else {
        while (i < line.size() && !is_space(line[i]) && line[i] != '#') ++i;
      }
      tokens_.push_back(line.substr(start, i - start));
    }
  }

  // The text a name token stands for: quoted tokens are unescaped.
  std::string unquote(std::string_view tok) const {
    if (tok.empty() || tok[0] != '"') return std::string(tok);
    std::string s;
    for (size_t i = 1; i + 1 < tok.size(); ++i) {
      if (tok[i] != '\\') {
        s += tok[i];
        continue;
      }
      const char e = tok[++i];
      switch (e) {
        case '"':
        case '\\':
          s += e;
          break;
        case 'n':
          s += '\n';
          break;
        case 't':
          s += '\t';
          break;
        case 'r':
          s += '\r';
          break;
        case 'x': {
          int v = 0;
          for (int k = 0; k < 2; ++k) {
            const char h = i + 1 + k < tok.size() - 1 ? lower(tok[i + 1 + k]) : '\0';
            const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : -1;
            if (d < 0) fail(fmt::format("bad \\x escape in {} (two hex digits expected)", tok));
            v = v * 16 + d;
          }
          s += static_cast<char>(v);
          i += 2;
          break;
        }
        default:
          fail(fmt::format("unknown escape '\\{}' in {}", e, tok));
      }
    }
    return s;
  }

  // Decimal or 0x-hex without sign into 64 bits; false when it is not a number or does not fit
  // (`overflow` tells which).
  static bool parse_u64(std::string_view s, uint64_t& out, bool& hex, bool* overflow = nullptr) {
    hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    if (hex) s.remove_prefix(2);
    if (s.empty()) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out, hex ? 16 : 10);
    if (r.ptr != s.data() + s.size()) return false;
    if (overflow) *overflow = r.ec == std::errc::result_out_of_range;
    return r.ec == std::errc();
  }

  uint64_t directive_number(std::string_view tok, std::string_view what) const {
    uint64_t v;
    bool hex;
    if (!parse_u64(tok, v, hex)) {
      fail(fmt::format("{} '{}' is not a number (decimal or 0x hex, 0..2^64-1)", what, tok));
    }
    return v;
  }

  void parse_line(std::string_view line) {
    tokenize(line);
    if (tokens_.empty()) return;
    if (tokens_[0][0] == '.') {
      parse_directive();
    } else {
      parse_instruction();
    }
  }

  void expect_args(size_t n, std::string_view usage) const {
    if (tokens_.size() - 1 != n) {
      fail(fmt::format("{} takes {} argument{} ({}), got {}", tokens_[0], n, n == 1 ? "" : "s", usage,
                       tokens_.size() - 1));
    }
  }

  void parse_directive() {
    static constexpr std::array<std::string_view, 5> kDirectives = {".machine", ".layer", ".hostop",
                                                                    ".tensor", ".data"};
    const std::string_view d = tokens_[0];
    if (d == ".machine") {
      if (tokens_.size() < 2) fail(".machine takes key=value");
      std::string kv;
      if (tokens_.size() == 2 && tokens_[1][0] == '"') {
        kv = unquote(tokens_[1]);
      } else {
        const std::string_view& first = tokens_[1];
        const std::string_view& last = tokens_.back();
        kv.assign(first.data(), static_cast<size_t>(last.data() + last.size() - first.data()));
      }
      const size_t eq = kv.find('=');
      if (eq == 0 || eq == std::string::npos || kv.find('\n') != std::string::npos) {
        fail(fmt::format(".machine takes key=value, got '{}'", kv));
      }
      p_.machine += kv;
      p_.machine += '\n';
    } else if (d == ".layer") {
      if (tokens_.size() < 3 || tokens_.size() > 5) {
        fail(fmt::format(".layer takes 2 to 4 arguments (NAME OPTYPE [macs=N] [precision=P]), got {}",
                         tokens_.size() - 1));
      }
      Layer l{unquote(tokens_[1]), unquote(tokens_[2])};
      for (size_t i = 3; i < tokens_.size(); ++i) {
        const std::string_view t = tokens_[i];
        if (t.substr(0, 5) == "macs=") {
          l.macs = directive_number(t.substr(5), "layer MACs");
        } else if (t.substr(0, 10) == "precision=") {
          l.precision = static_cast<DType>(enum_value(t.substr(10), kDTypeNames, "precision", true));
        } else {
          fail(fmt::format(".layer takes NAME OPTYPE [macs=N] [precision=P], got '{}'", t));
        }
      }
      layer_index_.emplace(l.name, p_.layers.size());  // keeps the first layer of a name
      p_.layers.push_back(std::move(l));
    } else if (d == ".hostop") {
      expect_args(3, "NAME OPTYPE CPU_OPS");
      p_.host_ops.push_back(
          HostOp{unquote(tokens_[1]), unquote(tokens_[2]), directive_number(tokens_[3], "cpu op count")});
    } else if (d == ".tensor") {
      expect_args(5, "input|output NAME DTYPE DRAM_ADDR DIMS");
      TensorBinding t;
      if (tokens_[1] == "input") {
        t.role = TensorBinding::Role::kInput;
      } else if (tokens_[1] == "output") {
        t.role = TensorBinding::Role::kOutput;
      } else {
        fail(fmt::format("tensor role '{}' is neither 'input' nor 'output'", tokens_[1]));
      }
      t.name = unquote(tokens_[2]);
      t.dtype = static_cast<DType>(enum_value(tokens_[3], kDTypeNames, "dtype", true));
      t.dram_addr = directive_number(tokens_[4], "tensor address");
      t.dims = parse_dims(tokens_[5]);
      p_.tensors.push_back(std::move(t));
    } else if (d == ".data") {
      expect_args(2, "DRAM_ADDR HEXBYTES");
      DataSegment s;
      s.dram_addr = directive_number(tokens_[1], "data address");
      s.bytes = parse_hex_bytes(tokens_[2]);
      p_.data.push_back(std::move(s));
    } else {
      fail(fmt::format("unknown directive '{}'{}", d, suggestion(d, kDirectives)));
    }
  }

  std::vector<uint64_t> parse_dims(std::string_view tok) const {
    std::vector<uint64_t> dims;
    if (tok == "-") return dims;
    size_t start = 0;
    while (true) {
      size_t x = tok.find('x', start);
      if (x == std::string_view::npos) x = tok.size();
      // Hex dims would make 'x' ambiguous, so dimensions are decimal only.
      const std::string_view part = tok.substr(start, x - start);
      uint64_t v;
      const auto r = std::from_chars(part.data(), part.data() + part.size(), v);
      if (part.empty() || r.ec != std::errc() || r.ptr != part.data() + part.size()) {
        fail(
            fmt::format("tensor dims '{}' are not decimal sizes joined by 'x' (e.g. 1x3x224x224, or - for a "
                        "scalar)",
                        tok));
      }
      dims.push_back(v);
      if (x == tok.size()) return dims;
      start = x + 1;
    }
  }

  std::vector<uint8_t> parse_hex_bytes(std::string_view tok) const {
    std::vector<uint8_t> bytes;
    if (tok == "-") return bytes;
    if (tok.size() % 2) fail(fmt::format("data has an odd number of hex digits ({})", tok.size()));
    bytes.resize(tok.size() / 2);
    auto nibble = [&](size_t i) {
      const char c = lower(tok[i]);
      if (is_digit(c)) return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      fail(fmt::format("data byte {} has a non-hex digit '{}'", i / 2, tok[i]));
    };
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<uint8_t>(nibble(2 * i) * 16 + nibble(2 * i + 1));
    }
    return bytes;
  }

  // A name from `names` (any case) or, when `numbers` is set, its index written as a number.
  template <size_t N>
  int64_t enum_value(std::string_view tok, const std::array<std::string_view, N>& names,
                     std::string_view what, bool strict_range) const {
    for (size_t i = 0; i < N; ++i) {
      if (iequal(tok, names[i])) return static_cast<int64_t>(i);
    }
    if (!tok.empty() && is_digit(tok[0])) {
      uint64_t v;
      bool hex;
      // Out-of-range numbers are left to validate(), which names the field and its range.
      if (parse_u64(tok, v, hex) && (!strict_range || v < N) && v <= INT64_MAX)
        return static_cast<int64_t>(v);
      fail(fmt::format("{} '{}' is not valid (0..{} or a name)", what, tok, N - 1));
    }
    fail(fmt::format("unknown {} '{}'{}", what, tok, suggestion(tok, names)));
  }

  static const FieldSpec* find_field(const Format& fmt, std::string_view name) {
    for (const FieldSpec& s : layout::kHeader) {
      if (s.name == name) return &s;
    }
    for (int i = 0; i < fmt.num_fields; ++i) {
      if (fmt.fields[i].name == name) return &fmt.fields[i];
    }
    return nullptr;
  }

  int64_t number_value(const Format& fmt, const FieldSpec& s, std::string_view tok) const {
    const bool neg = !tok.empty() && tok[0] == '-';
    uint64_t mag;
    bool hex;
    bool overflow = false;
    if (!parse_u64(neg ? tok.substr(1) : tok, mag, hex, &overflow)) {
      if (overflow) fail(fmt::format("{} field '{}': {} is far out of range", fmt.mnemonic, s.name, tok));
      fail(fmt::format("{} field '{}': '{}' is not a number (decimal or 0x hex)", fmt.mnemonic, s.name, tok));
    }
    if (mag > (neg ? uint64_t{1} << 63 : uint64_t{INT64_MAX})) {
      fail(fmt::format("{} field '{}': {} is far out of range", fmt.mnemonic, s.name, tok));
    }
    if (neg) return mag == (uint64_t{1} << 63) ? INT64_MIN : -static_cast<int64_t>(mag);
    // Hex in a signed field is the field's raw bit pattern, so fp32 immediates can be written as bits.
    if (hex && s.kind == FieldKind::kSigned && mag < (uint64_t{1} << s.width) && (mag >> (s.width - 1)) & 1) {
      return static_cast<int64_t>(mag) - (int64_t{1} << s.width);
    }
    return static_cast<int64_t>(mag);
  }

  int64_t queue_mask_value(const Format& fmt, const FieldSpec& s, std::string_view tok) const {
    if (tok == "-") return 0;
    if (is_digit(tok[0])) return number_value(fmt, s, tok);
    int64_t mask = 0;
    size_t start = 0;
    while (true) {
      size_t bar = tok.find('|', start);
      if (bar == std::string_view::npos) bar = tok.size();
      const std::string_view q = tok.substr(start, bar - start);
      int found = -1;
      for (int i = 0; i < kNumQueues; ++i) {
        if (iequal(q, kQueueNames[i])) found = i;
      }
      if (found < 0) {
        fail(fmt::format("{} field '{}': unknown queue '{}'{}", fmt.mnemonic, s.name, q,
                         suggestion(q, kQueueNames)));
      }
      mask |= int64_t{1} << found;
      if (bar == tok.size()) return mask;
      start = bar + 1;
    }
  }

  int64_t layer_value(const Format& fmt, const FieldSpec& s, std::string_view tok) const {
    if (is_digit(tok[0])) return number_value(fmt, s, tok);
    key_.assign(tok.data(), tok.size());
    const auto it = layer_index_.find(key_);
    if (it != layer_index_.end()) return static_cast<int64_t>(it->second);
    std::vector<std::string_view> names;
    for (const Layer& l : p_.layers) names.push_back(l.name);
    std::string hint = suggestion(tok, names);
    if (names.empty()) hint = " (no layer is defined yet: declare it with .layer before use)";
    fail(fmt::format("unknown layer '{}'{}", tok, hint));
  }

  void parse_instruction() {
    const std::string_view mnemonic = tokens_[0];
    const std::optional<Opcode> op = opcode_from_mnemonic(mnemonic);
    if (!op) {
      std::vector<std::string_view> names;
      for (const Format& f : kFormats) names.push_back(f.mnemonic);
      fail(fmt::format("unknown instruction '{}'{}", mnemonic, suggestion(mnemonic, names)));
    }
    const Format& fmt = format(*op);
    Instruction ins;
    ins.opcode = *op;
    std::array<bool, kNumFields> given{};
    for (size_t t = 1; t < tokens_.size(); ++t) {
      const std::string_view tok = tokens_[t];
      const size_t eq = tok.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        fail(fmt::format("expected field=value, got '{}'", tok));
      }
      const std::string_view name = tok.substr(0, eq);
      const std::string_view value = tok.substr(eq + 1);
      const FieldSpec* s = find_field(fmt, name);
      if (!s) {
        std::vector<std::string_view> names;
        for (const FieldSpec& h : layout::kHeader) names.push_back(h.name);
        for (int i = 0; i < fmt.num_fields; ++i) names.push_back(fmt.fields[i].name);
        fail(fmt::format("{} has no field '{}'{}", fmt.mnemonic, name, suggestion(name, names)));
      }
      if (value.empty()) fail(fmt::format("{} field '{}' has no value", fmt.mnemonic, s->name));
      const int idx = static_cast<int>(s->field);
      if (given[idx]) fail(fmt::format("{} field '{}' is given twice", fmt.mnemonic, s->name));
      given[idx] = true;
      int64_t v = 0;
      switch (s->kind) {
        case FieldKind::kUnsigned:
        case FieldKind::kSigned:
          v = number_value(fmt, *s, value);
          break;
        case FieldKind::kQueueMask:
          v = queue_mask_value(fmt, *s, value);
          break;
        case FieldKind::kDType:
          v = enum_value(value, kDTypeNames, "dtype", false);
          break;
        case FieldKind::kBuffer:
          v = enum_value(value, kBufferNames, "buffer", false);
          break;
        case FieldKind::kVecOp:
          v = enum_value(value, kVecOpNames, "vector op", false);
          break;
        case FieldKind::kBcast:
          v = enum_value(value, kBcastNames, "broadcast", false);
          break;
        case FieldKind::kLayer:
          v = layer_value(fmt, *s, value);
          break;
      }
      ins.set(s->field, v);
    }
    if (std::string err = validate(ins); !err.empty()) fail(err);
    p_.instructions.push_back(ins);
    lines_.push_back(line_);
  }

  // Layer and host-op indexes can only be checked once every directive has been read.
  void check_references() const {
    for (size_t i = 0; i < p_.instructions.size(); ++i) {
      const Instruction& ins = p_.instructions[i];
      if (!p_.layers.empty() && ins.layer() >= p_.layers.size()) {
        fail_at(lines_[i], fmt::format("layer {} does not exist (the program defines {} layers)", ins.layer(),
                                       p_.layers.size()));
      }
      if (ins.opcode == Opcode::kHostCall && !p_.host_ops.empty() &&
          static_cast<uint64_t>(ins.get(Field::kHostOp)) >= p_.host_ops.size()) {
        fail_at(lines_[i], fmt::format("host_op {} does not exist (the program defines {} host ops)",
                                       ins.get(Field::kHostOp), p_.host_ops.size()));
      }
    }
  }

  const std::string& text_;
  const std::string& source_;
  int line_ = 0;
  Program p_;
  std::vector<std::string_view> tokens_;
  std::unordered_map<std::string, size_t> layer_index_;
  mutable std::string key_;  // reused for layer lookups so they do not allocate
  std::vector<int> lines_;   // source line of each instruction
};

}  // namespace

Program assemble(const std::string& text, const std::string& source_name) {
  return Assembler(text, source_name).run();
}

std::string disassemble(const Program& p) {
  require_data_bytes(p, "disassembling a program");
  std::string o;
  o.reserve(160 * p.instructions.size() + 64 * p.layers.size() + p.machine.size());
  size_t pos = 0;
  while (pos < p.machine.size()) {
    size_t nl = p.machine.find('\n', pos);
    if (nl == std::string::npos) nl = p.machine.size();
    const std::string_view kv = std::string_view(p.machine).substr(pos, nl - pos);
    o += ".machine ";
    // Written bare unless reading it back would change it (comment sign, outer spaces, control bytes).
    bool bare = !kv.empty() && kv[0] != '"' && !is_space(kv.front()) && !is_space(kv.back());
    for (char ch : kv) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '#' || (c < 0x20 && c != ' ') || c == 0x7f) bare = false;
    }
    if (bare) {
      o += kv;
    } else {
      put_quoted(o, kv);
    }
    o += '\n';
    pos = nl + 1;
  }
  for (const Layer& l : p.layers) {
    o += ".layer ";
    put_name(o, l.name);
    o += ' ';
    put_name(o, l.op);
    if (l.macs) o += fmt::format(" macs={}", l.macs);
    if (l.precision) o += fmt::format(" precision={}", kDTypeNames[static_cast<size_t>(*l.precision)]);
    o += '\n';
  }
  for (const HostOp& h : p.host_ops) {
    o += ".hostop ";
    put_name(o, h.name);
    o += ' ';
    put_name(o, h.op_type);
    o += ' ';
    put_dec(o, h.cpu_ops);
    o += '\n';
  }
  for (const TensorBinding& t : p.tensors) {
    o += ".tensor ";
    o += t.role == TensorBinding::Role::kInput ? "input " : "output ";
    put_name(o, t.name);
    o += ' ';
    put_enum(o, static_cast<int64_t>(t.dtype), kDTypeNames);
    o += ' ';
    put_hex(o, t.dram_addr);
    o += ' ';
    if (t.dims.empty()) o += '-';
    for (size_t i = 0; i < t.dims.size(); ++i) {
      if (i) o += 'x';
      put_dec(o, t.dims[i]);
    }
    o += '\n';
  }
  for (const DataSegment& d : p.data) {
    o += ".data ";
    put_hex(o, d.dram_addr);
    o += ' ';
    if (d.bytes.empty()) o += '-';
    const size_t at = o.size();
    o.resize(at + 2 * d.bytes.size());
    for (size_t i = 0; i < d.bytes.size(); ++i) {
      o[at + 2 * i] = kHexDigits[d.bytes[i] >> 4];
      o[at + 2 * i + 1] = kHexDigits[d.bytes[i] & 15];
    }
    o += '\n';
  }
  LayerNames layers(&p);
  layers.precompute();
  for (const Instruction& ins : p.instructions) {
    put_instruction(o, ins, layers);
    o += '\n';
  }
  return o;
}

std::string disassemble(const Instruction& ins, const Program* p) {
  std::string o;
  put_instruction(o, ins, LayerNames(p));
  return o;
}

}  // namespace npusim::isa
