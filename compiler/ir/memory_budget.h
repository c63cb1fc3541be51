#pragma once
// Memory is planned, not hoped for: before a large allocation (a constant's values, a growing
// instruction stream) the compiler asks check_allocation(), which fails with a sentence naming what
// would be allocated, how many bytes and what avoids it, instead of ending in std::bad_alloc or the
// kernel's OOM killer. The limit defaults to the machine's available memory (MemAvailable).
#include <cstdint>
#include <stdexcept>
#include <string>

namespace npusim::compiler {

// An allocation past the limit: a compile or simulation failure (exit 1), not a user error.
class MemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The limit in bytes: set_memory_limit_bytes()'s value, else the available memory at the first call
// (0 = unknown: no limit).
uint64_t memory_limit_bytes();
void set_memory_limit_bytes(uint64_t bytes);

// "40.0 GB" (decimal units, as `free -h`'s users read them).
std::string format_bytes(uint64_t bytes);

// Throws MemoryError when `bytes` exceed the limit: "<what> needs <bytes>, more than the <limit> of
// memory available; <avoid>".
void check_allocation(const std::string& what, uint64_t bytes, const std::string& avoid);

}  // namespace npusim::compiler
