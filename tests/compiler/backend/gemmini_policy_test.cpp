// The gemmini mapping policy's conv tiles (compiler/backend/matrix/gemmini_policy.h) against the tiles
// Gemmini's own software chose for ResNet-18's layers on an 8x8 mesh with a 64 KiB scratchpad and a
// 16 KiB accumulator, as ONNXim's tests print them beside Gemmini's RTL cycles (PSAL-POSTECH/ONNXim
// a1e86296, tests/operatons/ConvWSTest.cc, the mapping strings' inner tile `[I] N1 C.. M.. P.. Q..`:
// C input channels, M output channels, P x Q output pixels).
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/backend/matrix/gemmini_policy.h"

namespace npusim::compiler::backend {
namespace {

struct Layer {
  const char* name;
  int64_t out, in_ch, out_ch, kernel, stride;
  int64_t c, m, p, q;  // the test's tile
};

TEST(GemminiPolicy, ConvTilesAreThoseOfGemminisSoftwareForResNet18On64KiB) {
  const GemminiGeometry g{8, 64 * 1024 / 8, 16 * 1024 / (8 * 4)};
  const Layer layers[] = {
      {"ResNet18_Conv1", 112, 3, 64, 7, 2, 3, 8, 15, 17},
      {"ResNet18_layer1_0_Conv1", 56, 64, 64, 3, 1, 64, 8, 15, 17},
      {"ResNet18_layer2_0_Conv1", 28, 64, 128, 3, 2, 24, 8, 15, 17},
      {"ResNet18_layer2_0_downsample_0", 28, 64, 128, 1, 2, 64, 8, 15, 17},
      {"ResNet18_layer2_0_Conv2", 28, 128, 128, 3, 1, 80, 8, 17, 14},
      {"ResNet18_layer3_0_Conv1", 14, 128, 256, 3, 2, 32, 8, 14, 14},
      {"ResNet18_layer3_0_Conv2", 14, 256, 256, 3, 1, 96, 8, 14, 14},
      {"ResNet18_layer3_0_downsample_0", 14, 128, 256, 1, 2, 128, 8, 14, 14},
      {"ResNet18_layer4_0_Conv1", 7, 256, 512, 3, 2, 51, 40, 7, 7},
      {"ResNet18_layer4_0_downsample_0", 7, 256, 512, 1, 2, 256, 40, 7, 7},
      {"ResNet18_layer4_0_Conv2", 7, 512, 512, 3, 1, 73, 40, 7, 7},
  };
  for (const Layer& l : layers) {
    // Gemmini downsamples the 1x1 stride-2 layers' inputs (every other pixel, even-sized inputs).
    const bool downsample = l.kernel == 1 && l.stride == 2;
    const GemminiConvTile t =
        gemmini_conv_tile(g, l.out, l.out, l.out_ch, l.kernel, l.kernel, l.in_ch, l.stride, 1, downsample);
    EXPECT_EQ(t.kchs, l.c) << l.name;
    EXPECT_EQ(t.ochs, l.m) << l.name;
    // The row length, which decides how a row splits into COMPUTEs of 8 pixels.
    EXPECT_EQ(t.ocols, std::max(l.p, l.q)) << l.name;
    EXPECT_EQ(t.krows, l.kernel) << l.name;
  }
}

// The same layers with the 96 KiB (64 + 16 + 16) the tests configure give other channel tiles: the tiles
// above are evidence that Gemmini's software saw 64 KiB.
TEST(GemminiPolicy, A96KiBScratchpadGivesOtherChannelTilesThanTheRtlRuns) {
  const GemminiGeometry g{8, 96 * 1024 / 8, 16 * 1024 / (8 * 4)};
  EXPECT_EQ(gemmini_conv_tile(g, 7, 7, 512, 3, 3, 256, 2, 1, false).kchs, 79);
  EXPECT_EQ(gemmini_conv_tile(g, 28, 28, 128, 3, 3, 64, 2, 1, false).kchs, 40);
}

}  // namespace
}  // namespace npusim::compiler::backend
