#pragma once
// Helpers shared by the configuration tests: an exact comparison of two configs and random configs,
// both written against the Visitor interface directly (independent of the code under test).
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "isa/machine/config.h"
#include "isa/machine/visitor.h"

namespace npusim::sim::testing {

// Records every parameter's raw value (reals by bit pattern, so -0.0 != 0.0 and nothing rounds).
class RawValues final : public isa::Visitor {
 public:
  std::vector<std::string> values;
  void group(std::string_view key, std::string_view, const std::function<void()>& body) override {
    values.push_back("[" + std::string(key));
    body();
    values.push_back("]");
  }
  void integer(const isa::Param& p, int64_t& v, int64_t, int64_t) override {
    values.push_back(std::string(p.key) + "=i" + std::to_string(v));
  }
  void real(const isa::Param& p, double& v, double, double) override {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    values.push_back(std::string(p.key) + "=r" + std::to_string(bits));
  }
  void boolean(const isa::Param& p, bool& v) override {
    values.push_back(std::string(p.key) + "=b" + (v ? "1" : "0"));
  }
  void choice(const isa::Param& p, int& i, const std::vector<std::string_view>&) override {
    values.push_back(std::string(p.key) + "=c" + std::to_string(i));
  }
  using isa::Visitor::choice;
};

inline std::vector<std::string> raw_values(isa::NpuConfig c) {
  RawValues r;
  c.visit(r);
  return r.values;
}

// Sets every parameter to a random value inside its declared range (reals with random mantissas, so
// printing them must be exact to round-trip).
class Randomizer final : public isa::Visitor {
 public:
  explicit Randomizer(uint32_t seed) : rng_(seed) {}
  void group(std::string_view, std::string_view, const std::function<void()>& body) override { body(); }
  void integer(const isa::Param&, int64_t& v, int64_t min, int64_t max) override {
    v = std::uniform_int_distribution<int64_t>(min, max)(rng_);
  }
  void real(const isa::Param&, double& v, double min, double max) override {
    switch (rng_() % 4) {
      case 0:
        v = min;
        break;
      case 1:
        v = max;
        break;
      default:
        v = std::uniform_real_distribution<double>(min, max)(rng_);
    }
  }
  void boolean(const isa::Param&, bool& v) override { v = rng_() % 2; }
  void choice(const isa::Param&, int& i, const std::vector<std::string_view>& names) override {
    i = static_cast<int>(rng_() % names.size());
  }
  using isa::Visitor::choice;

 private:
  std::mt19937 rng_;
};

inline isa::NpuConfig random_config(uint32_t seed) {
  isa::NpuConfig c;
  Randomizer r(seed);
  c.visit(r);
  return c;
}

}  // namespace npusim::sim::testing
