// Mapping files on DenseNet-121 (label models; needs its export of tests/models).
#include <gtest/gtest.h>

#include "tests/e2e/mapping_round_trip.h"

namespace npusim::test {
namespace {

// DenseNet-121 int8: a block's first Concat requantizes the block input into the shared buffer (a vector
// layer, `placement: vector` in the file) and the later Concats are free, finding that slice there.
// Imposing the file's `placement: vector` used to keep the first Concat out of the folding, so the
// second could not fold and the file was rejected ("placement free: this Concat is a vector layer").
TEST(MappingModels, DenseNet121Int8WrittenMappingImposedAgainGivesTheSameCycles) {
  expect_mapping_round_trip("densenet121.onnx", "int8");
}

TEST(MappingModels, DenseNet121Fp16WrittenMappingImposedAgainGivesTheSameCycles) {
  expect_mapping_round_trip("densenet121.onnx", "fp16");
}

}  // namespace
}  // namespace npusim::test
