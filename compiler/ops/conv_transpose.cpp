#include "compiler/ops/conv_transpose.h"

#include <string>

namespace npusim::compiler {

ConvTransposeForm conv_transpose_form(const Node& n, int64_t h, int64_t w, int64_t kh, int64_t kw) {
  const auto st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1});
  const auto opad = n.attr_ints("output_padding", {0, 0}), pads = n.attr_ints("pads", {0, 0, 0, 0});
  auto oshape = n.attr_ints("output_shape", {});
  if (oshape.size() > 2) oshape.erase(oshape.begin(), oshape.end() - 2);
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (st.size() != 2 || dl.size() != 2 || opad.size() != 2 || pads.size() != 4 ||
      (!oshape.empty() && oshape.size() != 2))
    throw std::invalid_argument("ConvTranspose '" + n.name + "': attributes are not 2-D");
  ConvTransposeForm f;
  f.h = h, f.w = w, f.kh = kh, f.kw = kw, f.sh = st[0], f.sw = st[1], f.dh = dl[0], f.dw = dl[1];
  const int64_t in[2] = {h, w}, k[2] = {kh, kw};
  int64_t out[2] = {0, 0}, lead[2] = {0, 0};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t full = st[i] * (in[i] - 1) + opad[i] + (k[i] - 1) * dl[i] + 1;
    int64_t pb = 0;
    if (!oshape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = !oshape.empty() ? oshape[i] : in[i] * st[i];
      const int64_t total = full - out[i];
      // Floor division as ONNX's reference: a negative total (output_shape beyond the natural size)
      // extends the far end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pb = auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      if (auto_pad == "NOTSET") pb = pads[i];
      const int64_t pe = auto_pad == "NOTSET" ? pads[2 + i] : 0;
      out[i] = full - pb - pe;
    }
    if (out[i] <= 0)
      throw std::invalid_argument("ConvTranspose '" + n.name + "': output size is not positive");
    lead[i] = (k[i] - 1) * dl[i] - pb;
  }
  f.oh = out[0], f.ow = out[1];
  f.lead_h = lead[0], f.lead_w = lead[1];
  f.hp = f.oh + (kh - 1) * f.dh, f.wp = f.ow + (kw - 1) * f.dw;
  return f;
}

}  // namespace npusim::compiler
