#include "compiler/io/image.h"

#include <png.h>
// clang-format off: jpeglib.h needs FILE and size_t declared before it.
#include <cstdio>
#include <jpeglib.h>
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

Image read_png(const std::string& path) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str()))
    throw ImageError(path + ": not a readable PNG image (" + img.message + ")");
  img.format = PNG_FORMAT_RGB;
  Image out;
  out.width = img.width;
  out.height = img.height;
  out.rgb.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, out.rgb.data(), 0, nullptr)) {
    const std::string why = img.message;
    png_image_free(&img);
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

// Returns false (with `e.message` set) when libjpeg failed.
bool decode_jpeg(std::FILE* f, JpegError& e, int64_t& width, int64_t& height, std::vector<uint8_t>& rgb) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = jpeg_error_exit;
  if (setjmp(e.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  width = cinfo.output_width;
  height = cinfo.output_height;
  rgb.resize(static_cast<size_t>(width * height * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = rgb.data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(width) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
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
  const bool ok = decode_jpeg(f, e, out.width, out.height, out.rgb);
  std::fclose(f);
  if (!ok) throw ImageError(path + ": corrupt JPEG image (" + e.message + ")");
  return out;
}

}  // namespace

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
