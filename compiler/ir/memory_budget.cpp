#include "compiler/ir/memory_budget.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace npusim::compiler {
namespace {

constexpr uint64_t kUnset = ~uint64_t{0};
std::atomic<uint64_t> g_limit{kUnset};

uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace

uint64_t memory_limit_bytes() {
  uint64_t v = g_limit.load();
  if (v == kUnset) {
    v = available_memory();
    g_limit.store(v);
  }
  return v;
}

void set_memory_limit_bytes(uint64_t bytes) { g_limit.store(bytes); }

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

void check_allocation(const std::string& what, uint64_t bytes, const std::string& avoid) {
  const uint64_t limit = memory_limit_bytes();
  if (limit == 0 || bytes <= limit) return;
  throw MemoryError(what + " needs " + format_bytes(bytes) + ", more than the " + format_bytes(limit) +
                    " of memory available; " + avoid);
}

}  // namespace npusim::compiler
