#pragma once
// A fixed-size set of instructions, by content: whether an instruction equal to this one was added
// before. The pre-run check (arch::check_program) adds every instruction that passed it and skips the
// ones found here: the check is a function of the instruction and the machine alone, and a compiled
// program repeats its instructions (a layer's tiles on ping-pong buffers with one shape: about half of
// ResNet-50's, MobileNetV2's and BERT-small's instructions equal one of the few hundred before them).
//
// Set-associative on a hash of the instruction's 64 bytes (1 024 instructions, 2 per set, 72 KiB), so its
// memory is fixed: it does not grow with the program. Only instructions in their compact storage are held
// (compact_and_in_format(): every field in its byte slot, the overflow pointer null), so equal bytes are
// equal instructions; any other instruction is never found.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "isa/isa.h"

namespace npusim::arch {

class InstructionMemo {
 public:
  static constexpr size_t kSets = 512;
  static constexpr size_t kWays = 2;

  InstructionMemo() : words_(new Words[kSets * kWays]), hashes_(kSets * kWays, 0) {}

  // Whether an instruction equal to `ins` was added (and not displaced since).
  bool contains(const isa::Instruction& ins) const {
    if (!ins.compact_and_in_format()) return false;
    const Words w = words(ins);
    const uint64_t h = hash(w);
    const size_t set = set_of(h);
    for (size_t k = set; k < set + kWays; ++k) {
      if (hashes_[k] == h && words_[k] == w) return true;
    }
    return false;
  }
  // Adds `ins` to its set, displacing the set's least recently added instruction.
  void add(const isa::Instruction& ins) {
    if (!ins.compact_and_in_format()) return;
    const Words w = words(ins);
    const uint64_t h = hash(w);
    const size_t set = set_of(h);
    for (size_t k = set + kWays - 1; k > set; --k) {
      hashes_[k] = hashes_[k - 1];
      words_[k] = words_[k - 1];
    }
    hashes_[set] = h;
    words_[set] = w;
  }

 private:
  static constexpr size_t kWords = sizeof(isa::Instruction) / sizeof(uint64_t);
  static_assert(sizeof(isa::Instruction) == kWords * sizeof(uint64_t), "an Instruction is whole words");
  static_assert(sizeof(isa::Opcode) + isa::storage::kDataBytes + 8 + sizeof(void*) ==
                    sizeof(isa::Instruction),
                "an Instruction is its opcode, its field bytes and presence bits, and a pointer: no padding");
  static_assert((kSets & (kSets - 1)) == 0, "a power of two of sets");
  using Words = std::array<uint64_t, kWords>;

  // The object's bytes: the opcode, the field bytes with their presence bits, and the null overflow pointer.
  static Words words(const isa::Instruction& ins) {
    Words w;
    std::memcpy(w.data(), reinterpret_cast<const unsigned char*>(&ins), sizeof w);
    return w;
  }
  // Never 0, which marks an empty entry.
  static uint64_t hash(const Words& w) {
    uint64_t h = 0;
    for (uint64_t x : w) h = (h ^ x) * 0x9e3779b97f4a7c15ull;
    return h | 1;
  }
  static size_t set_of(uint64_t h) { return static_cast<size_t>(h >> 40) % kSets * kWays; }

  // A set's entries are kWays consecutive ones, the most recently added first. The words are not cleared:
  // an entry's are read only when its hash says it was written (a memo is made per check, often of a short
  // program).
  std::unique_ptr<Words[]> words_;
  std::vector<uint64_t> hashes_;
};

}  // namespace npusim::arch
