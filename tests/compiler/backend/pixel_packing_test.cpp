// Narrow convolutions packed several output pixels a column (compiler/backend/matrix/pixel_packing.h): the
// packed weights compute each output pixel with the unpacked kernel (a direct convolution as reference), the
// programs compute bit for bit what the unpacked ones compute (fp32, fp16, int8; stride 1 and 2, dilation 2),
// the search packs a conv whose output channels fill few of the array's columns and leaves one that fills
// them, and a mapping file writes and imposes the packing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "compiler/backend/compile.h"
#include "compiler/backend/matrix/pixel_packing.h"
#include "compiler/passes/lowered.h"
#include "compiler/quant/accuracy.h"
#include "tests/compiler/backend/functional.h"

namespace npusim::compiler::testing {
namespace {

using backend::MatrixJob;

// Direct convolution of one NHWC image x [H][W][C] with weights [kh][kw][C][M] (the job's layout), zero
// padding, in job j's geometry: y [OH][OW][M], each sum in the order kernel row, kernel column, channel.
std::vector<int64_t> direct_conv(const MatrixJob& j, const std::vector<int64_t>& x,
                                 const std::vector<int64_t>& w) {
  std::vector<int64_t> y(static_cast<size_t>(j.OH * j.OW * j.M), 0);
  for (int64_t oy = 0; oy < j.OH; ++oy)
    for (int64_t ox = 0; ox < j.OW; ++ox)
      for (int64_t m = 0; m < j.M; ++m) {
        int64_t s = 0;
        for (int64_t i = 0; i < j.kh; ++i)
          for (int64_t jj = 0; jj < j.kw; ++jj) {
            const int64_t iy = oy * j.sh + i * j.dh - j.pt, ix = ox * j.sw + jj * j.dw - j.pl;
            if (iy < 0 || iy >= j.H || ix < 0 || ix >= j.W) continue;
            for (int64_t ch = 0; ch < j.C; ++ch)
              s += x[static_cast<size_t>((iy * j.W + ix) * j.C + ch)] *
                   w[static_cast<size_t>(((i * j.kw + jj) * j.C + ch) * j.M + m)];
          }
        y[static_cast<size_t>((oy * j.OW + ox) * j.M + m)] = s;
      }
  return y;
}

MatrixJob job(int64_t c, int64_t m, int64_t h, int64_t w, int64_t k, int64_t stride, int64_t dilation) {
  MatrixJob j;
  j.C = j.cg = c, j.M = j.mg = m, j.H = h, j.W = w, j.kh = j.kw = k, j.sh = j.sw = stride,
  j.dh = j.dw = dilation;
  j.pt = j.pl = dilation * (k - 1) / 2;
  j.OH = (h + 2 * j.pt - dilation * (k - 1) - 1) / stride + 1;
  j.OW = (w + 2 * j.pl - dilation * (k - 1) - 1) / stride + 1;
  return j;
}

TEST(PixelPacking, PackedWeightsComputeEachOutputPixelWithTheUnpackedKernel) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> v(-100, 100);
  for (const MatrixJob& j : {job(3, 8, 12, 16, 7, 2, 1), job(5, 4, 8, 8, 3, 1, 1), job(4, 6, 9, 12, 3, 1, 2),
                             job(6, 3, 6, 8, 1, 1, 1)}) {
    std::vector<int64_t> x(static_cast<size_t>(j.H * j.W * j.C)),
        w(static_cast<size_t>(j.kh * j.kw * j.C * j.M));
    for (int64_t& e : x) e = v(rng);
    for (int64_t& e : w) e = v(rng);
    const std::vector<int64_t> want = direct_conv(j, x, w);
    for (int64_t p : {2, 4}) {
      if (j.OW % p != 0) continue;
      MatrixJob q = j;
      backend::pack_geometry(q, p);
      EXPECT_EQ(q.kw, (p - 1) * j.sw + (j.kw - 1) * j.dw + 1);
      EXPECT_EQ(q.OW * p, j.OW);
      EXPECT_EQ(q.M, p * j.M);
      // Output pixel x' of p * M channels is pixels p x' .. p x' + p - 1 of M: the same NHWC tensor.
      EXPECT_EQ(direct_conv(q, x, backend::packed_weights(j, w, p)), want)
          << j.kh << "x" << j.kw << " stride " << j.sw << " dilation " << j.dw << ", " << p << " pixels";
    }
  }
}

// The per-channel vectors repeat once per pixel of a packed column.
TEST(PixelPacking, PackedChannelsRepeatTheLayersChannelsOncePerPixel) {
  EXPECT_EQ(backend::packed_channels(std::vector<int>{1, 2, 3}, 2), (std::vector<int>{1, 2, 3, 1, 2, 3}));
}

Node& conv(GraphBuilder& b, const std::string& x, const std::string& y, int64_t cin, int64_t cout,
           int64_t stride, int64_t dilation, uint32_t seed) {
  b.constant(y + "_w", {cout, cin, 3, 3}, 0.5f, seed).constant(y + "_b", {cout}, 0.5f, seed + 1);
  Node& n = b.node("Conv", {x, y + "_w", y + "_b"}, {y}, y + "_conv");
  n.attrs["pads"].value = std::vector<int64_t>{dilation, dilation, dilation, dilation};
  n.attrs["kernel_shape"].value = std::vector<int64_t>{3, 3};
  n.attrs["strides"].value = std::vector<int64_t>{stride, stride};
  n.attrs["dilations"].value = std::vector<int64_t>{dilation, dilation};
  return n;
}

// x [2, 4, 16, 16] -> 3x3 conv to 8 channels, Relu -> 3x3 stride-2 conv -> 3x3 dilation-2 conv: 8 output
// channels fill a quarter of the default 32 x 32 array's columns, and 36 or 72 reduction rows two or three
// folds of its 32 rows.
Graph model() {
  GraphBuilder b;
  b.input("x", {2, 4, 16, 16});
  conv(b, "x", "a", 4, 8, 1, 1, 1);
  b.node("Relu", {"a"}, {"ar"}, "a_relu");
  conv(b, "ar", "s", 8, 8, 2, 1, 3);
  conv(b, "s", "y", 8, 8, 1, 2, 5);
  b.output("y");
  return b.build();
}

const std::vector<std::string> kConvs = {"a_conv", "s_conv", "y_conv"};

MappingOverrides packed(int64_t p) {
  MappingOverrides m;
  for (const std::string& name : kConvs) {
    LayerMapping e;
    e.name = name;
    e.pack_pixels = p;
    e.where[""] = "m.yaml:1:1";
    m.layers[name] = e;
  }
  return m;
}

const LayerPlan& layer(const CompileResult& r, const std::string& name) { return layer_named(r, name); }

TEST(PixelPacking, PackedConvsComputeBitForBitWhatUnpackedConvsCompute) {
  const Graph g = model();
  for (const isa::DType t : {isa::DType::kFp32, isa::DType::kFp16, isa::DType::kInt8}) {
    const std::string name(isa::kDTypeNames[static_cast<size_t>(t)]);
    Compiled one, two, four;
    compile_and_run(g, isa::NpuConfig{}, t, packed(1), &one);
    compile_and_run(g, isa::NpuConfig{}, t, packed(2), &two);
    compile_and_run(g, isa::NpuConfig{}, t, packed(4), &four);
    for (const std::string& conv : kConvs) {
      EXPECT_EQ(layer(one.result, conv).mapping.find("side by side"), std::string::npos)
          << name << " " << conv;
      EXPECT_NE(layer(four.result, conv).mapping.find("4 output pixels side by side"), std::string::npos)
          << name << " " << conv << ": " << layer(four.result, conv).mapping;
      EXPECT_EQ(layer(four.result, conv).chosen.pack_pixels, 4) << name << " " << conv;
      EXPECT_EQ(layer(four.result, conv).macs, layer(one.result, conv).macs) << name << " " << conv;
      // The packed reduction: kernel rows x (3 pixels' stride + the kernel's reach) columns x channel chunk.
      const int64_t kwp = conv == "a_conv" ? 6 : conv == "s_conv" ? 9 : 8;
      EXPECT_EQ(layer(four.result, conv).tile_k % (3 * kwp), 0) << name << " " << conv;
    }
    EXPECT_TRUE(same_bits(one.out, two.out)) << name;
    EXPECT_TRUE(same_bits(one.out, four.out)) << name;
  }
}

TEST(PixelPacking, TheSearchPacksAConvWhoseChannelsFillFewColumnsAndNotOneThatFillsThem) {
  const Graph g = model();
  Compiled wide, narrow;
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kFp32, MappingOverrides{}, &wide);
  EXPECT_NE(layer(wide.result, "a_conv").mapping.find("output pixels side by side"), std::string::npos)
      << layer(wide.result, "a_conv").mapping;
  EXPECT_GT(layer(wide.result, "a_conv").chosen.pack_pixels.value_or(1), 1);
  isa::NpuConfig eight = isa::NpuConfig{};  // 8 columns: the convs' 8 channels fill them
  eight.systolic_array.cols = 8;
  compile_and_run(g, eight, isa::DType::kFp32, MappingOverrides{}, &narrow);
  for (const std::string& conv : kConvs)
    EXPECT_EQ(layer(narrow.result, conv).mapping.find("side by side"), std::string::npos) << conv;
  EXPECT_TRUE(same_bits(wide.out, narrow.out));
}

TEST(PixelPacking, AMappingFileWritesThePackingAndImposingItReproducesTheProgram) {
  const Graph g = model();
  Compiled first, again;
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kInt8, MappingOverrides{}, &first);
  MappingOverrides m;
  for (const std::string& conv : kConvs) {
    LayerMapping e = layer(first.result, conv).chosen;
    e.name = conv;
    e.where[""] = "m.yaml:1:1";
    m.layers[conv] = e;
  }
  ASSERT_GT(m.layers["a_conv"].pack_pixels.value_or(1), 1);
  compile_and_run(g, isa::NpuConfig{}, isa::DType::kInt8, m, &again);
  EXPECT_EQ(again.result.program.instructions.size(), first.result.program.instructions.size());
  // The same mapping line up to its figures (which say the packing was imposed).
  auto shape = [](const std::string& s) { return s.substr(0, s.find(';')); };
  for (const std::string& conv : kConvs) {
    EXPECT_EQ(shape(layer(again.result, conv).mapping), shape(layer(first.result, conv).mapping)) << conv;
    EXPECT_EQ(layer(again.result, conv).chosen.pack_pixels, layer(first.result, conv).chosen.pack_pixels);
  }
  for (size_t i = 0; i < first.result.program.instructions.size(); ++i)
    ASSERT_TRUE(again.result.program.instructions[i] == first.result.program.instructions[i]) << i;
  EXPECT_TRUE(same_bits(first.out, again.out));
}

TEST(PixelPacking, PackPixelsThatDoNotDivideTheOutputColumnsAreAMappingError) {
  const Graph g = model();
  Compiled c;
  try {
    compile_and_run(g, isa::NpuConfig{}, isa::DType::kFp32, packed(3), &c);
    ADD_FAILURE() << "pack_pixels=3 on 16 output columns compiled";
  } catch (const MappingError& e) {
    EXPECT_NE(std::string(e.what()).find("pack_pixels=3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("m.yaml:1:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim::compiler::testing
