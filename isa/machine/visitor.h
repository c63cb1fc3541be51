#pragma once
// The one mechanism through which every NPU parameter is declared: each config struct has a
// visit(Visitor&) that lists its fields with key, unit, valid range and description. The YAML loader,
// --set, `npusim config --dump`, the docs table and the program-file machine spec all walk it.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace npusim::isa {

// The range within which `npusim calibrate` may move a parameter to fit a board's measurements
// (docs/calibrate.md); empty (the default) for the parameters a measurement may not move.
struct CalibrationRange {
  double min = 0, max = -1;
  bool empty() const { return min > max; }
};

// What a parameter is, for users: its key (last path component), unit and one-line description.
struct Param {
  std::string_view key;
  std::string_view unit;  // "" for dimensionless
  std::string_view description;
  // False for the few parameters that cannot change a run's figures (the description says why); the
  // test that perturbs every key on a probe workload skips them.
  bool affects_timing = true;
  CalibrationRange calibrate = {};
};

// Walks the parameters of a config tree. Implementations read (YAML, --set), write (dump) or both.
class Visitor {
 public:
  virtual ~Visitor() = default;
  // A nested group of parameters, e.g. "systolic_array"; `body` visits its members.
  virtual void group(std::string_view key, std::string_view description,
                     const std::function<void()>& body) = 0;
  virtual void integer(const Param& p, int64_t& value, int64_t min, int64_t max) = 0;
  virtual void real(const Param& p, double& value, double min, double max) = 0;
  virtual void boolean(const Param& p, bool& value) = 0;
  // One of `names`; `index` is the position of the chosen name.
  virtual void choice(const Param& p, int& index, const std::vector<std::string_view>& names) = 0;

  template <class E, size_t N>
  void choice(const Param& p, E& value, const std::array<std::string_view, N>& names) {
    int i = static_cast<int>(value);
    choice(p, i, std::vector<std::string_view>(names.begin(), names.end()));
    value = static_cast<E>(i);
  }
};

}  // namespace npusim::isa
