// Mapping files on EfficientNet-B0 (label models; needs its export of tests/models).
#include <gtest/gtest.h>

#include "tests/e2e/mapping_round_trip.h"

namespace npusim::test {
namespace {

// EfficientNet-B0 int8 has convs whose output stays on chip while the reader's closed form declined to
// read it in place (a conv tile, the value spilled first): the reader's own entry decides, not the
// producer's `on_chip: true` (before: "tile_oh applies to convolutions; a Gemm/MatMul layer's tile
// is ..."). Its squeeze-and-excitation groups round-trip too.
TEST(MappingModels, EfficientNetB0Int8WrittenMappingImposedAgainGivesTheSameCycles) {
  expect_mapping_round_trip("efficientnet_b0.onnx", "int8");
}

}  // namespace
}  // namespace npusim::test
