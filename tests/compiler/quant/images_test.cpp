// Images as model inputs (compiler/io/image.h, compiler/io/preprocess.h), images in calibration folders
// (load_samples), and the task metrics (compiler/quant/task_metrics.h). Expected values are worked out
// by hand from the definitions (half-pixel bilinear sampling, (pixel * scale - mean) / std, CTC greedy
// decoding, Levenshtein distance, Dice/IoU).
#include <gtest/gtest.h>
#include <png.h>
// clang-format off: jpeglib.h needs FILE and size_t declared before it.
#include <jpeglib.h>
#include <cstdio>
// clang-format on

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "compiler/io/image.h"
#include "compiler/io/npy.h"
#include "compiler/io/preprocess.h"
#include "compiler/quant/calibration.h"
#include "compiler/quant/task_metrics.h"
#include "tests/compiler/passes/graph_builder.h"

namespace npusim::compiler {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path d = fs::path(NPUSIM_BINARY_DIR) / "images_test" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_png(const fs::path& p, int w, int h, const std::vector<uint8_t>& rgb) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = w;
  img.height = h;
  img.format = PNG_FORMAT_RGB;
  ASSERT_TRUE(png_image_write_to_file(&img, p.c_str(), 0, rgb.data(), 0, nullptr)) << img.message;
}

// A JPEG of `pixels` (quality 100: decodes within a level or two): 3 components are RGB, 4 CMYK (which
// libjpeg writes with Adobe's marker: stored inverted, 255 = no ink); with an APP1 Exif block holding
// `orientation` when it is not 0.
void write_jpeg_pixels(const fs::path& p, int w, int h, int n, const std::vector<uint8_t>& pixels,
                       int orientation = 0) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  std::FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  jpeg_stdio_dest(&c, f);
  c.image_width = w;
  c.image_height = h;
  c.input_components = n;
  c.in_color_space = n == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  if (orientation) {
    // "Exif\0\0", a big-endian TIFF header, IFD0 with one entry: Orientation (0x0112), SHORT, 1 value.
    const uint8_t exif[] = {
        'E', 'x', 'i', 'f',  0,    0, 'M', 'M', 0, 42, 0, 0, 0,
        8,   0,   1,   0x01, 0x12, 0, 3,   0,   0, 0,  1, 0, static_cast<uint8_t>(orientation),
        0,   0,   0,   0,    0,    0};
    jpeg_write_marker(&c, JPEG_APP0 + 1, exif, sizeof exif);
  }
  while (c.next_scanline < c.image_height) {
    JSAMPROW rp = const_cast<uint8_t*>(pixels.data()) + static_cast<size_t>(c.next_scanline) * w * n;
    jpeg_write_scanlines(&c, &rp, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

// The same colour everywhere.
void write_flat_jpeg(const fs::path& p, int w, int h, const std::vector<uint8_t>& colour) {
  std::vector<uint8_t> px;
  for (int k = 0; k < w * h; ++k) px.insert(px.end(), colour.begin(), colour.end());
  write_jpeg_pixels(p, w, h, static_cast<int>(colour.size()), px);
}

void write_jpeg(const fs::path& p, int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  write_flat_jpeg(p, w, h, {r, g, b});
}

// A PNG written with libpng's low-level API: any colour type and bit depth (16-bit samples big-endian, as
// PNG stores them), with a gAMA chunk when `gamma` > 0.
void write_png_raw(const fs::path& p, int w, int h, int color_type, int depth,
                   const std::vector<uint8_t>& data, double gamma = 0, bool interlaced = false) {
  std::FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, depth, color_type, interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (gamma > 0) png_set_gAMA(png, info, gamma);
  png_write_info(png, info);
  const int passes = interlaced ? png_set_interlace_handling(png) : 1;
  const size_t row = data.size() / static_cast<size_t>(h);
  for (int pass = 0; pass < passes; ++pass)
    for (int y = 0; y < h; ++y) png_write_row(png, data.data() + y * row);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

Image image(int64_t w, int64_t h, std::vector<uint8_t> rgb) { return Image{w, h, std::move(rgb)}; }

TEST(ImageDecode, PngRoundTripsEveryPixelAndJpegDecodesItsColour) {
  const fs::path d = scratch("decode");
  const std::vector<uint8_t> px = {1, 2, 3, 40, 50, 60, 70, 80, 90, 200, 210, 220, 255, 0, 128, 9, 8, 7};
  write_png(d / "a.png", 3, 2, px);
  EXPECT_EQ(sniff_image((d / "a.png").string()), ImageFormat::kPng);
  const Image a = read_image((d / "a.png").string());
  EXPECT_EQ(a.width, 3);
  EXPECT_EQ(a.height, 2);
  EXPECT_EQ(a.rgb, px);
  write_jpeg(d / "b.jpg", 16, 8, 200, 100, 50);
  EXPECT_EQ(sniff_image((d / "b.jpg").string()), ImageFormat::kJpeg);
  const Image b = read_image((d / "b.jpg").string());
  ASSERT_EQ(b.width, 16);
  ASSERT_EQ(b.height, 8);
  EXPECT_NEAR(b.rgb[0], 200, 2);
  EXPECT_NEAR(b.rgb[1], 100, 2);
  EXPECT_NEAR(b.rgb[2], 50, 2);
  std::ofstream(d / "c.png") << "not an image";
  EXPECT_EQ(sniff_image((d / "c.png").string()), ImageFormat::kNone);
  EXPECT_THROW(read_image((d / "c.png").string()), ImageError);
  // A PNG signature with nothing after it: a decode error naming the file, not a crash.
  std::ofstream(d / "d.png", std::ios::binary) << "\x89PNG\r\n\x1a\n";
  try {
    read_image((d / "d.png").string());
    FAIL();
  } catch (const ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("d.png"), std::string::npos);
  }
}

// What OpenCV's imread(IMREAD_COLOR) and PIL's convert("RGB") read (the loaders a deployment engineer's
// reference pipeline uses): the stored values, whatever the PNG's alpha, bit depth or gAMA chunk says.
TEST(ImageDecode, PngGivesTheStoredValuesAsOpenCvAndPilDo) {
  const fs::path d = scratch("png_forms");
  // RGBA with alpha 0, 100 and 255: the colours stay as stored (libpng's simplified reader composited
  // them on black: alpha 0 gave 0, 0, 0).
  write_png_raw(d / "rgba.png", 3, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8,
                {200, 100, 50, 0, 200, 100, 50, 100, 7, 8, 9, 255});
  EXPECT_EQ(read_image((d / "rgba.png").string()).rgb,
            (std::vector<uint8_t>{200, 100, 50, 200, 100, 50, 7, 8, 9}));
  // 16-bit RGB: each sample's high byte (0x1234 -> 0x12), no linear-to-sRGB conversion.
  write_png_raw(d / "rgb16.png", 2, 1, PNG_COLOR_TYPE_RGB, 16,
                {0x12, 0x34, 0x80, 0x00, 0xff, 0xff, 0x00, 0x01, 0x40, 0xff, 0x7f, 0x80});
  EXPECT_EQ(read_image((d / "rgb16.png").string()).rgb,
            (std::vector<uint8_t>{0x12, 0x80, 0xff, 0x00, 0x40, 0x7f}));
  // 16-bit grey with alpha: high byte, replicated to R, G and B, alpha dropped.
  write_png_raw(d / "ga16.png", 1, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 16, {0x60, 0x01, 0x00, 0x10});
  EXPECT_EQ(read_image((d / "ga16.png").string()).rgb, (std::vector<uint8_t>{0x60, 0x60, 0x60}));
  // An 8-bit file that declares gamma 1.0: the values as stored, no gamma correction.
  write_png_raw(d / "gamma.png", 2, 1, PNG_COLOR_TYPE_RGB, 8, {10, 64, 128, 200, 250, 3}, 1.0);
  EXPECT_EQ(read_image((d / "gamma.png").string()).rgb, (std::vector<uint8_t>{10, 64, 128, 200, 250, 3}));
  // Interlaced (Adam7): every pixel where it belongs.
  std::vector<uint8_t> px(9 * 7 * 3);
  for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>(k * 7 % 251);
  write_png_raw(d / "adam7.png", 9, 7, PNG_COLOR_TYPE_RGB, 8, px, 0, true);
  EXPECT_EQ(read_image((d / "adam7.png").string()).rgb, px);
  // 2-bit grey: expanded to 8 bits (0..3 -> 0, 85, 170, 255).
  write_png_raw(d / "grey2.png", 4, 1, PNG_COLOR_TYPE_GRAY, 2, {0x1b});
  EXPECT_EQ(read_image((d / "grey2.png").string()).rgb,
            (std::vector<uint8_t>{0, 0, 0, 85, 85, 85, 170, 170, 170, 255, 255, 255}));
}

TEST(ImageDecode, CmykJpegIsConvertedAndATruncatedJpegIsAnError) {
  const fs::path d = scratch("jpeg_forms");
  // Adobe-inverted C = 200, M = 255, Y = 100, K = 128: R = 200 x 128 / 255 = 100, G = 128, B = 50.
  write_flat_jpeg(d / "cmyk.jpg", 16, 8, {200, 255, 100, 128});
  const Image c = read_image((d / "cmyk.jpg").string());
  ASSERT_EQ(c.width, 16);
  ASSERT_EQ(c.rgb.size(), 16u * 8u * 3u);
  EXPECT_NEAR(c.rgb[0], 100, 2);
  EXPECT_NEAR(c.rgb[1], 128, 2);
  EXPECT_NEAR(c.rgb[2], 50, 2);
  // The first half of a JPEG: libjpeg would fill the rest with grey and print a warning; an error here.
  // And a PNG cut short says so too.
  write_jpeg(d / "full.jpg", 64, 64, 10, 20, 30);
  write_png(d / "full.png", 64, 64, std::vector<uint8_t>(64 * 64 * 3, 77));
  for (const std::string ext : {"jpg", "png"}) {
    std::ifstream in(d / ("full." + ext), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(d / ("half." + ext), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    const std::string want = ext == "jpg" ? "half.jpg: corrupt JPEG image (Premature end of JPEG file)"
                                          : "half.png: corrupt PNG image (the file ends early)";
    try {
      read_image((d / ("half." + ext)).string());
      ADD_FAILURE() << "a truncated " << ext << " decoded";
    } catch (const ImageError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

// EXIF orientation: read from the JPEG, applied only when the description says so, with PIL's
// ImageOps.exif_transpose (and OpenCV's imread) result for each of the eight values.
TEST(ImageDecode, ExifOrientationIsReadAndAppliedOnlyWhenAsked) {
  // A 3x2 image whose red values are 0, 3, .., 15 in row-major order; the expected red values of each
  // orientation come from PIL (Image.transpose with exif_transpose's method for it).
  Image img = image(3, 2, {});
  for (int k = 0; k < 18; ++k) img.rgb.push_back(static_cast<uint8_t>(k));
  const std::vector<std::vector<int>> want = {
      {0, 3, 6, 9, 12, 15}, {6, 3, 0, 15, 12, 9}, {15, 12, 9, 6, 3, 0}, {9, 12, 15, 0, 3, 6},
      {0, 9, 3, 12, 6, 15}, {9, 0, 12, 3, 15, 6}, {15, 6, 12, 3, 9, 0}, {6, 15, 3, 12, 0, 9}};
  for (int o = 1; o <= 8; ++o) {
    img.orientation = o;
    const Image u = upright(img);
    EXPECT_EQ(u.width, o >= 5 ? 2 : 3) << o;
    EXPECT_EQ(u.orientation, 1);
    std::vector<int> red;
    for (size_t k = 0; k < u.rgb.size(); k += 3) red.push_back(u.rgb[k]);
    EXPECT_EQ(red, want[o - 1]) << "orientation " << o;
  }
  // A JPEG tagged 6 (rotate 90 clockwise): 16x8, left half red, right half blue.
  const fs::path d = scratch("exif");
  std::vector<uint8_t> px;
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 16; ++x)
      px.insert(px.end(), {static_cast<uint8_t>(x < 8 ? 255 : 0), 0, static_cast<uint8_t>(x < 8 ? 0 : 255)});
  write_jpeg_pixels(d / "r.jpg", 16, 8, 3, px, 6);
  const Image stored = read_image((d / "r.jpg").string());
  EXPECT_EQ(stored.orientation, 6);
  EXPECT_EQ(stored.width, 16);  // read, not applied
  // Into a 16 (high) x 8 (wide) input: ignored, the 16x8 photo is stretched (left red, right blue);
  // applied, it stands upright, red on top and blue below.
  Preprocess p;
  p.scale = 1;
  const Tensor as_stored = preprocess_image(stored, p, {1, 3, 16, 8}, "r.jpg");
  p.exif_orientation = Preprocess::ExifOrientation::kApply;
  const Tensor turned = preprocess_image(stored, p, {1, 3, 16, 8}, "r.jpg");
  auto red_at = [](const Tensor& t, int y, int x) { return t.f[static_cast<size_t>(y * 8 + x)]; };
  EXPECT_GT(red_at(as_stored, 0, 0), 200);
  EXPECT_LT(red_at(as_stored, 0, 7), 50);
  EXPECT_GT(red_at(turned, 0, 0), 200);
  EXPECT_GT(red_at(turned, 0, 7), 200);
  EXPECT_LT(red_at(turned, 15, 0), 50);
  // No Exif block: orientation 1.
  write_jpeg(d / "plain.jpg", 4, 4, 1, 2, 3);
  EXPECT_EQ(read_image((d / "plain.jpg").string()).orientation, 1);
}

TEST(Preprocess, StretchIsHalfPixelBilinearThenScaleMeanStdPerChannel) {
  // 2x1 image, red 0 and 100 -> width 4: sample points x = (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25,
  // clamped to [0, 1]: 0, 25, 75, 100.
  const Image img = image(2, 1, {0, 10, 20, 100, 10, 20});
  Preprocess p;
  p.scale = 1.0;
  p.mean = {10, 0, 0};
  p.std = {5, 1, 2};
  const Tensor t = preprocess_image(img, p, {1, 3, 1, 4}, "x.png");
  ASSERT_EQ(t.shape, (Shape{1, 3, 1, 4}));
  const std::vector<float> want = {-2, 3, 13, 18, 10, 10, 10, 10, 10, 10, 10, 10};
  for (size_t k = 0; k < want.size(); ++k) EXPECT_FLOAT_EQ(t.f[k], want[k]) << k;
}

TEST(Preprocess, BgrNhwcUint8PutsBlueFirstAndSaturates) {
  const Image img = image(1, 1, {10, 20, 30});
  Preprocess p;
  p.channel_order = Preprocess::ChannelOrder::kBgr;
  p.layout = Preprocess::Layout::kNhwc;
  p.dtype = Preprocess::Dtype::kUint8;
  p.scale = 10.0;  // 300 saturates at 255
  const Tensor t = preprocess_image(img, p, {1, 1, 1, 3}, "x.png");
  EXPECT_EQ(t.dtype, DataType::kUInt8);
  EXPECT_EQ(t.i, (std::vector<int64_t>{255, 200, 100}));
}

// The description's dtype is the input's element type, or the image is refused: cast on the way in, a
// float32 image in [0, 1] reached a uint8 input as 0s and 1s.
TEST(Preprocess, TheDtypeMustBeTheInputsElementType) {
  Preprocess p;
  EXPECT_NO_THROW(check_image_dtype(p, DataType::kFloat32, "x"));
  EXPECT_NO_THROW(check_image_dtype(p, DataType::kFloat16, "x"));
  try {
    check_image_dtype(p, DataType::kUInt8, "a.png: model input 'x'");
    ADD_FAILURE() << "float32 pixels accepted by a uint8 input";
  } catch (const PreprocessError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "a.png: model input 'x' is uint8 but the pre-processing gives dtype float32 (set dtype: uint8, with "
        "the scale, mean and std that input expects)");
  }
  p.dtype = Preprocess::Dtype::kUint8;
  EXPECT_NO_THROW(check_image_dtype(p, DataType::kUInt8, "x"));
  EXPECT_THROW(check_image_dtype(p, DataType::kFloat32, "x"), PreprocessError);
  EXPECT_THROW(check_image_dtype(p, DataType::kInt8, "x"), PreprocessError);
  p.dtype = Preprocess::Dtype::kInt8;
  EXPECT_NO_THROW(check_image_dtype(p, DataType::kInt8, "x"));
  EXPECT_THROW(check_image_dtype(p, DataType::kInt64, "x"), PreprocessError);
}

TEST(Preprocess, LetterboxTopLeftKeepsTheAspectRatioAndPadsWithPadValue) {
  // 2x1 white image into 4x4: scale min(4/2, 4/1) = 2 -> 4x2 at the top, rows 2..3 padding.
  const Image img = image(2, 1, {255, 255, 255, 255, 255, 255});
  Preprocess p;
  p.resize = Preprocess::Resize::kLetterbox;
  p.anchor = Preprocess::Anchor::kTopLeft;
  p.pad_value = 51;
  const Tensor t = preprocess_image(img, p, {1, 1, 4, 4}, "x.png");  // one channel: grey level
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_NEAR(t.f[y * 4 + x], y < 2 ? 1.0 : 0.2, 1e-5) << y << "," << x;
  // Centered: a 1x2 (w x h) image into 4x4 sits in columns 1..2.
  p.anchor = Preprocess::Anchor::kCenter;
  const Tensor c = preprocess_image(image(1, 2, {255, 255, 255, 255, 255, 255}), p, {1, 1, 4, 4}, "x.png");
  EXPECT_NEAR(c.f[0], 0.2, 1e-5);
  EXPECT_NEAR(c.f[1], 1.0, 1e-5);
  EXPECT_NEAR(c.f[2], 1.0, 1e-5);
  EXPECT_NEAR(c.f[3], 0.2, 1e-5);
}

// An image whose columns (or rows) read 0, 10, 20, ... in every channel: grey level = that value.
Image ramp(int64_t w, int64_t h, bool along_x) {
  std::vector<uint8_t> rgb;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) rgb.push_back(static_cast<uint8_t>(10 * (along_x ? x : y)));
  return image(w, h, std::move(rgb));
}

// torchvision's Resize(N) + CenterCrop(crop): the shorter side becomes N, the longer int(N * long / short),
// and the crop starts at int(round((size - crop) / 2)) with Python's round, half to even.
TEST(Preprocess, CropTakesTheCentreAtTorchvisionsOffsets) {
  Preprocess p;
  p.resize = Preprocess::Resize::kCrop;
  p.scale = 1.0;
  p.resize_short = 4;
  auto row = [&](const Image& img) {
    const Tensor t = preprocess_image(img, p, {1, 1, 4, 4}, "x.png");
    return std::vector<float>(t.f.begin(), t.f.begin() + 4);
  };
  // 7 wide: (7 - 4) / 2 = 1.5 rounds to 2, columns 2..5; 5 wide: 0.5 rounds to 0, columns 0..3.
  EXPECT_EQ(row(ramp(7, 4, true)), (std::vector<float>{20, 30, 40, 50}));
  EXPECT_EQ(row(ramp(5, 4, true)), (std::vector<float>{0, 10, 20, 30}));
  // 4 wide and 7 tall: rows 2..5.
  const Tensor tall = preprocess_image(ramp(4, 7, false), p, {1, 1, 4, 4}, "x.png");
  EXPECT_FLOAT_EQ(tall.f[0], 20);
  EXPECT_FLOAT_EQ(tall.f[12], 50);
  // 8x4 to a shorter side of 2: 4x2 by half-pixel bilinear (output column x reads columns 2x and 2x + 1
  // half each: 20x + 5), cropped to 2x2 from column round(1) = 1.
  p.resize_short = 2;
  const Tensor shrunk = preprocess_image(ramp(8, 4, true), p, {1, 1, 2, 2}, "x.png");
  EXPECT_EQ(shrunk.f, (std::vector<float>{25, 45, 25, 45}));
  // resize_short 0: the smallest scale that covers the input, here the same 4x2.
  p.resize_short = 0;
  EXPECT_EQ(preprocess_image(ramp(8, 4, true), p, {1, 1, 2, 2}, "x.png").f, shrunk.f);
  // A shorter side that leaves the input uncovered names the image and the sizes.
  p.resize_short = 1;
  try {
    preprocess_image(ramp(8, 4, true), p, {1, 1, 2, 2}, "cal/a.png");
    FAIL();
  } catch (const PreprocessError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cal/a.png: resize_short: 1 scales a 8x4 image to 2x1, smaller than the input's 2x2 crop (give "
              "at least the crop's larger side)");
  }
}

TEST(Preprocess, ResizeNoneRejectsAnotherSizeNamingTheFileAndBothSizes) {
  Preprocess p;
  p.resize = Preprocess::Resize::kNone;
  try {
    preprocess_image(image(2, 1, std::vector<uint8_t>(6, 0)), p, {1, 3, 4, 4}, "cal/a.png");
    FAIL();
  } catch (const PreprocessError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cal/a.png"), std::string::npos) << m;
    EXPECT_NE(m.find("2x1"), std::string::npos) << m;
    EXPECT_NE(m.find("4x4"), std::string::npos) << m;
  }
  EXPECT_THROW(preprocess_image(image(1, 1, {0, 0, 0}), Preprocess{}, {1, 4, 4}, "a.png"), PreprocessError);
  EXPECT_THROW(preprocess_image(image(1, 1, {0, 0, 0}), Preprocess{}, {2, 3, 4, 4}, "a.png"),
               PreprocessError);
}

Graph one_input_model() {
  testing::GraphBuilder b;
  const std::string x = b.input("x", {1, 3, 8, 8});
  b.output(b.node("Relu", {x}, "y", {1, 3, 8, 8}));
  return b.build();
}

TEST(CalibrationImages, ImagesOfAnySizeAreResizedAndOtherFilesAreErrorsNamingTheFile) {
  const fs::path d = scratch("calib");
  write_png(d / "a.png", 4, 2, std::vector<uint8_t>(24, 255));
  write_jpeg(d / "b.jpg", 16, 16, 0, 0, 0);
  std::ofstream(d / ".hidden") << "skipped";
  const Graph g = one_input_model();
  Preprocess p;
  const auto samples = quant::load_samples(g, d.string(), 0, &p);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].at("x").shape, (Shape{1, 3, 8, 8}));
  EXPECT_FLOAT_EQ(samples[0].at("x").f[0], 1.0f);
  EXPECT_NEAR(samples[1].at("x").f[0], 0.0f, 0.02f);
  // Without a pre-processing description an image is an error saying what is missing.
  try {
    quant::load_samples(g, d.string(), 0, nullptr);
    FAIL();
  } catch (const quant::CalibrationError& e) {
    EXPECT_NE(std::string(e.what()).find("--preprocess"), std::string::npos) << e.what();
  }
  std::ofstream(d / "notes.txt") << "hello";
  try {
    quant::load_samples(g, d.string(), 0, &p);
    FAIL();
  } catch (const quant::CalibrationError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("notes.txt"), std::string::npos) << m;
    EXPECT_NE(m.find("1x3x8x8"), std::string::npos) << m;
  }
}

// One load_samples call on a folder holding `file` besides a good image: the CalibrationError's text.
std::string calibration_error(const fs::path& d, const Preprocess& p) {
  try {
    quant::load_samples(one_input_model(), d.string(), 0, &p);
  } catch (const quant::CalibrationError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CalibrationImages, AWrongShapeTensorOrABrokenFileIsAnErrorNamingTheFileAndWhatWasExpected) {
  Preprocess p;
  {
    const fs::path d = scratch("calib_shape");
    write_png(d / "a.png", 5, 3, std::vector<uint8_t>(45, 7));
    NpyArray a;
    a.descr = "<f4";
    a.shape = {1, 3, 4, 4};
    a.data.assign(48 * 4, 0);
    write_npy((d / "b.npy").string(), a);
    const std::string m = calibration_error(d, p);
    EXPECT_NE(m.find("b.npy"), std::string::npos) << m;
    EXPECT_NE(m.find("1x3x4x4"), std::string::npos) << m;
    EXPECT_NE(m.find("1x3x8x8"), std::string::npos) << m;
  }
  {
    const fs::path d = scratch("calib_truncated");
    write_png(d / "a.png", 5, 3, std::vector<uint8_t>(45, 7));
    std::ofstream(d / "b.npy", std::ios::binary) << "\x93NUMPY\x01\x00";
    const std::string m = calibration_error(d, p);
    EXPECT_NE(m.find("b.npy"), std::string::npos) << m;
  }
  {
    // A PNG signature followed by garbage: recognised as an image, and its decoding error names it.
    const fs::path d = scratch("calib_broken_png");
    write_png(d / "a.png", 5, 3, std::vector<uint8_t>(45, 7));
    std::ofstream(d / "b.png", std::ios::binary) << "\x89PNG\r\n\x1a\nnot really a png";
    const std::string m = calibration_error(d, p);
    EXPECT_NE(m.find("b.png"), std::string::npos) << m;
  }
  {
    // A tensor holding a NaN: an error counting them (all-NaN inputs once "matched" fp32 at 300 dB).
    const fs::path d = scratch("calib_nan");
    NpyArray a;
    a.descr = "<f4";
    a.shape = {1, 3, 8, 8};
    std::vector<float> v(192, 0.5f);
    v[7] = std::nanf("");
    v[9] = INFINITY;
    a.data.resize(v.size() * 4);
    std::memcpy(a.data.data(), v.data(), a.data.size());
    write_npy((d / "a.npy").string(), a);
    const std::string m = calibration_error(d, p);
    EXPECT_NE(m.find("a.npy: 2 of 192 values are NaN or infinite"), std::string::npos) << m;
  }
  {
    // An empty file, and a link to nothing: each named, with what is wrong with it.
    const fs::path d = scratch("calib_empty");
    write_png(d / "a.png", 5, 3, std::vector<uint8_t>(45, 7));
    std::ofstream(d / "b.png").close();
    std::string m = calibration_error(d, p);
    EXPECT_NE(m.find("b.png: the file is empty; expected a PNG/JPEG image or a tensor"), std::string::npos)
        << m;
    fs::remove(d / "b.png");
    fs::create_symlink(d / "gone.png", d / "c.png");
    m = calibration_error(d, p);
    EXPECT_NE(m.find("c.png: cannot be read: a link to a file that does not exist"), std::string::npos) << m;
  }
  {
    // A JPEG of another size and aspect is resized to the input (stretch: every pixel the same colour).
    const fs::path d = scratch("calib_resized_jpeg");
    write_jpeg(d / "a.jpg", 37, 11, 255, 255, 255);
    const auto samples = quant::load_samples(one_input_model(), d.string(), 0, &p);
    ASSERT_EQ(samples.size(), 1u);
    EXPECT_EQ(samples[0].at("x").shape, (Shape{1, 3, 8, 8}));
    for (float v : samples[0].at("x").f) EXPECT_NEAR(v, 1.0f, 0.02f);
  }
}

TEST(TaskMetrics, CtcGreedyMergesRepeatsDropsBlanksAndCountsEdits) {
  // Steps' argmax: 1 1 0 1 2 2 0 -> "1 1 2" (the blank separates the repeated 1).
  const std::vector<int64_t> best = {1, 1, 0, 1, 2, 2, 0};
  std::vector<float> s(best.size() * 3, 0.0f);
  for (size_t t = 0; t < best.size(); ++t) s[t * 3 + best[t]] = 1.0f;
  const Tensor scores = Tensor::from_floats({1, 7, 3}, s);
  EXPECT_EQ(quant::ctc_greedy_decode(scores), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(quant::decode_text({1, 2, 3}, {"a", "b"}), "ab ");
  EXPECT_EQ(quant::edit_distance({1, 2, 3}, {1, 3}), 1);
  EXPECT_EQ(quant::edit_distance({}, {4, 5}), 2);
  EXPECT_EQ(quant::edit_distance({1, 2, 3, 4}, {2, 1, 3, 5}), 3);

  quant::TaskOptions o;
  o.task = quant::Task::kOcrRec;
  o.keys = {"a", "b"};
  quant::TaskEvaluator ev(o);
  ev.add(scores, scores);
  std::vector<float> s2 = s;  // last real step reads 1 instead of 2: "1 1 1"
  s2[5 * 3 + 2] = 0, s2[5 * 3 + 1] = 1, s2[4 * 3 + 2] = 0, s2[4 * 3 + 1] = 1;
  ev.add(scores, Tensor::from_floats({1, 7, 3}, s2));
  const quant::TaskMetrics& m = ev.metrics();
  EXPECT_EQ(m.strings_equal, 1);
  EXPECT_EQ(m.strings_equal_trimmed, 1);
  // A trailing space (index 3 = one past the keys) differs strictly, not once trimmed.
  quant::TaskEvaluator sp(o);
  std::vector<float> s4(8 * 4, 0.0f);  // 4 classes: blank, a, b, space
  for (size_t t = 0; t < best.size(); ++t) s4[t * 4 + best[t]] = 1.0f;
  std::vector<float> s5 = s4;
  s5[7 * 4 + 3] = 1.0f;  // "aab" then a space
  s4[7 * 4 + 0] = 1.0f;
  s4[7 * 4 + 3] = 0.75f;  // fp32 itself nearly picks the space there: a margin of 0.25
  sp.add(Tensor::from_floats({1, 8, 4}, s4), Tensor::from_floats({1, 8, 4}, s5));
  EXPECT_EQ(sp.metrics().strings_equal, 0);
  EXPECT_EQ(sp.metrics().strings_equal_trimmed, 1);
  ASSERT_EQ(sp.metrics().mismatches.size(), 1u);
  EXPECT_EQ(sp.metrics().mismatches[0].steps_differing, 1);
  EXPECT_DOUBLE_EQ(sp.metrics().mismatches[0].fp32_margin_min, 0.25);
  EXPECT_DOUBLE_EQ(sp.metrics().mismatches[0].fp32_margin_max, 0.25);
  EXPECT_EQ(m.reference_chars, 6);
  EXPECT_EQ(m.char_edits, 1);
  EXPECT_DOUBLE_EQ(m.char_error_rate(), 1.0 / 6.0);
  ASSERT_EQ(m.mismatches.size(), 1u);
  EXPECT_EQ(m.mismatches[0].reference, "aab");
  EXPECT_EQ(m.mismatches[0].quantized, "aa");
  EXPECT_EQ(m.mismatches[0].steps_differing, 2);  // steps 4 and 5, each fp32's 1 against its 0
  EXPECT_DOUBLE_EQ(m.mismatches[0].fp32_margin_min, 1.0);
  EXPECT_DOUBLE_EQ(m.mismatches[0].fp32_margin_max, 1.0);
  const std::string json = quant::task_json(m);
  EXPECT_NE(json.find("\"steps_differing\": 2, \"fp32_margin_min\": 1, \"fp32_margin_max\": 1}"),
            std::string::npos)
      << json;
}

TEST(TaskMetrics, ClassifyTopOneTopFiveAndDetectionDiceIou) {
  quant::TaskOptions o;
  o.task = quant::Task::kClassify;
  quant::TaskEvaluator ev(o);
  // Two rows of 6 classes: row 0 agrees; row 1's fp32 best (class 0) is 2nd in the quantized scores.
  const Tensor ref = Tensor::from_floats({2, 6}, {0, 1, 5, 2, 3, 4, 9, 1, 2, 3, 4, 5});
  const Tensor q = Tensor::from_floats({2, 6}, {0, 1, 5, 2, 3, 4, 8, 1, 2, 3, 4, 9});
  ev.add(ref, q);
  EXPECT_EQ(ev.metrics().inputs, 2);
  EXPECT_DOUBLE_EQ(ev.metrics().top1_rate(), 0.5);
  EXPECT_DOUBLE_EQ(ev.metrics().top5_rate(), 1.0);

  o.task = quant::Task::kOcrDet;
  o.det_threshold = 0.3;
  quant::TaskEvaluator det(o);
  // Reference text pixels {0,1,2}, quantized {1,2,3}: both 2; Dice 4/6, IoU 2/4.
  det.add(Tensor::from_floats({1, 1, 1, 5}, {0.9f, 0.9f, 0.9f, 0.1f, 0.1f}),
          Tensor::from_floats({1, 1, 1, 5}, {0.2f, 0.9f, 0.9f, 0.9f, 0.25f}));
  EXPECT_DOUBLE_EQ(det.metrics().det_f1(), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(det.metrics().det_iou(), 0.5);
  EXPECT_THROW(quant::parse_task("segment"), quant::TaskError);
}

// A task reads only the outputs it is defined on: anything else is an error saying what it needs, not a
// figure (an identity model's [1, 3, 60, 200] output once gave "top-1 agreement 95.8%" over 720 "inputs",
// and a classifier's [1, 2] scores "same string on 4 of 4").
TEST(TaskMetrics, AKeysFileMustFitTheRecognisersClasses) {
  const fs::path d = scratch("keys");
  // A byte-order mark and Windows line endings are not part of the keys.
  std::ofstream(d / "keys.txt", std::ios::binary) << "\xEF\xBB\xBF"
                                                  << "a\r\nb\r\nc\r\n";
  const std::vector<std::string> keys = quant::read_keys_file((d / "keys.txt").string());
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_NO_THROW(quant::check_keys(keys, 4, "keys.txt"));   // blank + 3 keys
  EXPECT_NO_THROW(quant::check_keys(keys, 5, "keys.txt"));   // ... + space
  EXPECT_NO_THROW(quant::check_keys(keys, -1, "keys.txt"));  // not known before the run
  try {
    quant::check_keys(keys, 6625, "keys.txt");
    ADD_FAILURE() << "3 keys accepted for 6625 classes";
  } catch (const quant::TaskError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "keys.txt has 3 keys, but the model's output has 6625 classes, which takes 6623 or 6624 (the CTC "
        "blank first, one class per key, a space last)");
  }
  EXPECT_THROW(quant::check_keys(keys, 3, "keys.txt"), quant::TaskError);
}

TEST(TaskMetrics, ATaskRefusesAnOutputItCannotRead) {
  using quant::Task;
  auto message = [](Task t, const Shape& s) -> std::string {
    try {
      quant::check_task_output(t, s);
    } catch (const quant::TaskError& e) {
      return e.what();
    }
    return "";
  };
  for (const Shape& s : {Shape{1000}, Shape{4, 1000}, Shape{1, 1000, 1, 1}, Shape{-1, 10}})
    EXPECT_EQ(message(Task::kClassify, s), "") << shape_to_string(s);
  for (const Shape& s : {Shape{1, 3, 60, 200}, Shape{1, 1}, Shape{2, 10, 7, 7}, Shape{}})
    EXPECT_NE(message(Task::kClassify, s), "") << shape_to_string(s);
  EXPECT_EQ(
      message(Task::kClassify, {1, 3, 60, 200}),
      "--task classify reads class scores, [N, classes] (or [classes], [N, classes, 1, 1]); the model's "
      "first output is 1x3x60x200");
  for (const Shape& s : {Shape{1, 40, 6625}, Shape{-1, 40, 6625}})
    EXPECT_EQ(message(Task::kOcrRec, s), "") << shape_to_string(s);
  for (const Shape& s :
       {Shape{1, 2}, Shape{40, 6625}, Shape{4, 40, 6625}, Shape{1, 3, 48, 320}, Shape{1, 40, 1}})
    EXPECT_NE(message(Task::kOcrRec, s), "") << shape_to_string(s);
  for (const Shape& s : {Shape{1, 1, 640, 640}, Shape{1, 640, 640}, Shape{-1, 1, -1, -1}})
    EXPECT_EQ(message(Task::kOcrDet, s), "") << shape_to_string(s);
  for (const Shape& s : {Shape{1, 2}, Shape{1, 3, 640, 640}, Shape{6625}, Shape{640, 640}})
    EXPECT_NE(message(Task::kOcrDet, s), "") << shape_to_string(s);
  for (const Shape& s : {Shape{1, 2}, Shape{1, 3, 640, 640}, Shape{}})
    EXPECT_EQ(message(Task::kRegress, s), "");

  // The evaluator applies the same check, and reads [N, classes, 1, 1] as [N, classes].
  quant::TaskOptions o;
  o.task = Task::kClassify;
  quant::TaskEvaluator cls(o);
  cls.add(Tensor::from_floats({2, 3, 1, 1}, {0, 5, 1, 7, 2, 3}),
          Tensor::from_floats({2, 3, 1, 1}, {0, 5, 1, 2, 7, 3}));
  EXPECT_EQ(cls.metrics().inputs, 2);
  EXPECT_DOUBLE_EQ(cls.metrics().top1_rate(), 0.5);
  EXPECT_THROW(
      cls.add(Tensor::from_floats({1, 2, 2}, {0, 1, 2, 3}), Tensor::from_floats({1, 2, 2}, {0, 1, 2, 3})),
      quant::TaskError);
  // ocr-det scores a probability map: fp32 values outside [0, 1] (logits) are refused, naming their range.
  o.task = Task::kOcrDet;
  quant::TaskEvaluator det(o);
  try {
    det.add(Tensor::from_floats({1, 1, 1, 3}, {-2.5f, 0.5f, 3}),
            Tensor::from_floats({1, 1, 1, 3}, {-2.5f, 0.5f, 3}));
    ADD_FAILURE() << "logits were scored as a probability map";
  } catch (const quant::TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("reaches -2.5 .. 3 in fp32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npusim::compiler
