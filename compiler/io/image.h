#pragma once
// PNG and JPEG images as model inputs: decoding (libpng, libjpeg-turbo) to 8-bit RGB, recognised by
// their content (signature bytes), not their file name.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace npusim::compiler {

// An image file that cannot be read or decoded (the message names the file).
class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// 8-bit RGB pixels, row-major, interleaved (R, G, B of pixel (0, 0) first), the values OpenCV's
// imread(IMREAD_COLOR) and PIL's convert("RGB") give (before OpenCV's BGR order): grey and palette images
// expanded to RGB, 16-bit PNG samples cut to their high byte, alpha dropped (not composited), no gamma or
// colour-profile conversion; CMYK JPEGs converted as (255 - C) x (255 - K) / 255; a JPEG's EXIF orientation
// is read, not applied (as PIL's Image.open; upright() applies it, as OpenCV does). A JPEG or PNG that ends
// early is an error.
struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
  // A JPEG's EXIF orientation (1..8; 1: the pixels as stored are upright), read but not applied: see
  // upright().
  int orientation = 1;
};

// `img` turned upright as its EXIF orientation says (what OpenCV's imread does, and PIL's
// ImageOps.exif_transpose): 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 rotate 90 clockwise, 7
// transverse, 8 rotate 90 counter-clockwise; orientation 1 afterwards.
Image upright(const Image& img);

enum class ImageFormat { kNone, kPng, kJpeg };

// The format a file's first bytes announce (kNone when it is neither, or cannot be opened).
ImageFormat sniff_image(const std::string& path);

// Decodes a PNG or JPEG file. Throws ImageError naming the file.
Image read_image(const std::string& path);

}  // namespace npusim::compiler
