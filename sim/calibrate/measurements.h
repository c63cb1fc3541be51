#pragma once
// The measurements `npusim calibrate` fits a configuration to (docs/calibrate.md): a CSV file with one row
// per measurement of a board: the model, the layer (empty: the whole model), the cycles or milliseconds
// measured, and optionally the precision, batch and input shape it ran with.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace npusim::sim::calibrate {

// A measurement file that cannot be read or understood; what() names file:line and what is wrong.
class MeasurementError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Measurement {
  std::string where;  // "FILE.csv:LINE", for messages
  std::string model;  // as `npusim run` takes it; a relative file path resolved against the CSV's folder
  std::string layer;  // a report layer name; "" = the whole model
  double value = 0;   // the measured figure, in `ms` or cycles
  bool ms = false;
  std::string precision = "auto";
  int64_t batch = 0;                      // 0: not given
  std::vector<std::string> input_shapes;  // "NAME=1x3x224x224", several separated by ';' in the file
};

// Reads `path`. The header names the columns: model, layer, cycles and/or ms (each row gives exactly one),
// and optionally precision, batch, input_shape. Throws MeasurementError naming file:line for an unknown or
// repeated column, a missing value, a figure that is not a positive number, a batch that is not a positive
// integer, or a file without rows.
std::vector<Measurement> read_measurements(const std::string& path);

}  // namespace npusim::sim::calibrate
