#include "compiler/io/image.h"

#include <png.h>
// clang-format off: jpeglib.h needs FILE and size_t declared before it.
#include <jerror.h>
#include <jpeglib.h>
#include <cstdio>
// clang-format on

#include <csetjmp>
#include <cstring>
#include <fstream>

namespace npusim::compiler {

ImageFormat sniff_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[8] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return ImageFormat::kNone;
  static const unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (std::memcmp(head, kPng, 8) == 0) return ImageFormat::kPng;
  if (head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) return ImageFormat::kJpeg;
  return ImageFormat::kNone;
}

namespace {

// libpng reports errors through its error callback, which must not return: it jumps back to decode_png
// (no C++ object with a destructor lives between the setjmp and the libpng calls). Warnings (an unknown
// chunk, an ICC profile libpng does not like) do not stop the decode and are dropped.
struct PngError {
  std::jmp_buf jump;
  char message[256];
};

void png_error_exit(png_structp png, png_const_charp message) {
  PngError* e = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", message);
  std::longjmp(e->jump, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

// The stored 8-bit values, as OpenCV's imread(IMREAD_COLOR) and PIL's convert("RGB") give them: palette
// and grey expanded to RGB, 16-bit samples cut to their high byte, alpha (and tRNS) dropped -- not
// composited -- and no gamma or colour-profile conversion. Returns false (with `e.message` set) when
// libpng failed.
bool decode_png(std::FILE* f, PngError& e, int64_t& width, int64_t& height, std::vector<uint8_t>& rgb) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &e, png_error_exit, png_ignore_warning);
  if (!png) {
    std::snprintf(e.message, sizeof e.message, "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    std::snprintf(e.message, sizeof e.message, "libpng could not start");
    png_destroy_read_struct(&png, nullptr, nullptr);
    return false;
  }
  if (setjmp(e.jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, f);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  width = png_get_image_width(png, info);
  height = png_get_image_height(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(width) * 3)
    png_error(png, "unexpected row size after conversion to 8-bit RGB");
  rgb.resize(static_cast<size_t>(width * height * 3));
  for (int pass = 0; pass < passes; ++pass)
    for (int64_t y = 0; y < height; ++y)
      png_read_row(png, rgb.data() + static_cast<size_t>(y * width * 3), nullptr);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Image read_png(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw ImageError(path + ": cannot open the file");
  Image out;
  PngError e;
  e.message[0] = '\0';
  const bool ok = decode_png(f, e, out.width, out.height, out.rgb);
  std::fclose(f);
  if (!ok) {
    // libpng's read callback says "Read Error" when the file ends before the image does.
    const std::string why = std::strcmp(e.message, "Read Error") == 0 ? "the file ends early" : e.message;
    throw ImageError(path + ": corrupt PNG image (" + why + ")");
  }
  return out;
}

// libjpeg reports errors through error_exit, which must not return: it jumps back to read_jpeg
// (no C++ object with a destructor lives between the setjmp and the libjpeg calls).
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  JpegError* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// libjpeg's warnings: a file that ends early decodes with grey where the data stopped, so it is an error
// here (as PIL says "image file is truncated"); the others (extraneous bytes before a marker and the like)
// leave the pixels right and are dropped rather than printed on stderr.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_error_exit(cinfo);
}

// The orientation tag (0x0112) of an APP1 Exif payload, 1 when there is none or the payload is malformed.
int exif_orientation(const uint8_t* d, size_t n) {
  if (n < 14 || std::memcmp(d, "Exif\0\0", 6) != 0) return 1;
  const uint8_t* t = d + 6;  // the TIFF header
  const size_t tn = n - 6;
  const bool little = t[0] == 'I' && t[1] == 'I';
  if (!little && !(t[0] == 'M' && t[1] == 'M')) return 1;
  auto u16 = [&](size_t at) { return little ? t[at] | t[at + 1] << 8 : t[at] << 8 | t[at + 1]; };
  auto u32 = [&](size_t at) {
    return little ? uint32_t{t[at]} | uint32_t{t[at + 1]} << 8 | uint32_t{t[at + 2]} << 16 |
                        uint32_t{t[at + 3]} << 24
                  : uint32_t{t[at]} << 24 | uint32_t{t[at + 1]} << 16 | uint32_t{t[at + 2]} << 8 |
                        uint32_t{t[at + 3]};
  };
  if (u16(2) != 42) return 1;
  const size_t ifd = u32(4);
  if (ifd + 2 > tn) return 1;
  const size_t entries = u16(ifd);
  for (size_t k = 0; k < entries; ++k) {
    const size_t e = ifd + 2 + 12 * k;
    if (e + 12 > tn) return 1;
    if (u16(e) == 0x0112 && u16(e + 2) == 3) {  // Orientation, SHORT
      const int v = u16(e + 8);
      return v >= 1 && v <= 8 ? v : 1;
    }
  }
  return 1;
}

// Returns false (with `e.message` set) when libjpeg failed.
bool decode_jpeg(std::FILE* f, JpegError& e, int64_t& width, int64_t& height, std::vector<uint8_t>& rgb,
                 int& orientation) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = jpeg_error_exit;
  e.mgr.emit_message = jpeg_message;
  if (setjmp(e.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f);
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&cinfo, TRUE);
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next)
    if (m->marker == JPEG_APP0 + 1 && orientation == 1)
      orientation = exif_orientation(m->data, m->data_length);
  // CMYK (and YCCK) files: libjpeg gives the four inks, converted below as PIL and OpenCV do.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  width = cinfo.output_width;
  height = cinfo.output_height;
  rgb.resize(static_cast<size_t>(width * height * (cmyk ? 4 : 3)));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row =
        rgb.data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(width) * (cmyk ? 4 : 3);
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  if (cmyk) {
    // Adobe's files store the inks inverted (255 = no ink); the colour is (255 - C) x (255 - K) / 255.
    const bool inverted = cinfo.saw_Adobe_marker;
    const size_t pixels = static_cast<size_t>(width * height);
    for (size_t i = 0; i < pixels; ++i) {
      const int k = inverted ? rgb[i * 4 + 3] : 255 - rgb[i * 4 + 3];
      for (int ch = 0; ch < 3; ++ch) {
        const int paper = inverted ? rgb[i * 4 + ch] : 255 - rgb[i * 4 + ch];
        rgb[i * 3 + ch] = static_cast<uint8_t>((paper * k + 127) / 255);
      }
    }
    rgb.resize(pixels * 3);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

Image read_jpeg(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw ImageError(path + ": cannot open the file");
  Image out;
  JpegError e;
  e.message[0] = '\0';
  const bool ok = decode_jpeg(f, e, out.width, out.height, out.rgb, out.orientation);
  std::fclose(f);
  if (!ok) throw ImageError(path + ": corrupt JPEG image (" + e.message + ")");
  return out;
}

}  // namespace

Image upright(const Image& img) {
  const int o = img.orientation;
  if (o <= 1 || o > 8) {
    Image out = img;
    out.orientation = 1;
    return out;
  }
  const int64_t W = img.width, H = img.height;
  const bool swap = o >= 5;  // 5..8 exchange width and height
  Image out;
  out.width = swap ? H : W;
  out.height = swap ? W : H;
  out.rgb.resize(img.rgb.size());
  for (int64_t oy = 0; oy < out.height; ++oy)
    for (int64_t ox = 0; ox < out.width; ++ox) {
      int64_t ix = ox, iy = oy;
      switch (o) {
        case 2:
          ix = W - 1 - ox;
          break;
        case 3:
          ix = W - 1 - ox, iy = H - 1 - oy;
          break;
        case 4:
          iy = H - 1 - oy;
          break;
        case 5:
          ix = oy, iy = ox;
          break;
        case 6:
          ix = oy, iy = H - 1 - ox;
          break;
        case 7:
          ix = W - 1 - oy, iy = H - 1 - ox;
          break;
        case 8:
          ix = W - 1 - oy, iy = ox;
          break;
      }
      for (int c = 0; c < 3; ++c) out.rgb[(oy * out.width + ox) * 3 + c] = img.rgb[(iy * W + ix) * 3 + c];
    }
  return out;
}

Image read_image(const std::string& path) {
  switch (sniff_image(path)) {
    case ImageFormat::kPng:
      return read_png(path);
    case ImageFormat::kJpeg:
      return read_jpeg(path);
    case ImageFormat::kNone:
      break;
  }
  throw ImageError(path + ": not a PNG or JPEG image");
}

}  // namespace npusim::compiler
