#pragma once
// A 2-D ConvTranspose as the stride-1 convolution it equals: over a zero-inserted, padded copy of its
// input, with its kernel flipped and its input and output channels swapped. The back end runs it in
// this form on the array (fp and int8) and the int8 reference emulates the same form, so the padding
// arithmetic of ONNX's ConvTranspose (pads, auto_pad, output_padding, output_shape) lives here once.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "compiler/ir/graph.h"

namespace npusim::compiler {

// Input pixel (iy, ix) lands at (lead_h + iy * sh, lead_w + ix * sw) of an hp x wp map that is zero
// elsewhere (a pixel that lands outside is cropped by the pads); a kh x kw conv with dilations dh x dw,
// stride 1 and no padding over that map gives the oh x ow output.
struct ConvTransposeForm {
  int64_t h = 0, w = 0;  // the ConvTranspose's input size
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;
  int64_t lead_h = 0, lead_w = 0;
  int64_t hp = 0, wp = 0;
};

// The form of 2-D ConvTranspose `n` with input size h x w and kernel kh x kw, its output size as ONNX
// defines it (output_shape, or SAME auto_pad's input x stride, or the full size less the pads). Throws
// std::invalid_argument when the node's attributes are not 2-D or the output size is not positive.
ConvTransposeForm conv_transpose_form(const Node& n, int64_t h, int64_t w, int64_t kh, int64_t kw);

// ConvTranspose weights [C][M/groups][kh][kw] as the equivalent conv's [M][C/groups][kh][kw]: output
// channel g*mg + m, input channel ci of group g, tap (i, j) = w[g*cg + ci][m][kh-1-i][kw-1-j].
template <typename T>
std::vector<T> conv_transpose_conv_weights(const std::vector<T>& w, int64_t groups, int64_t cg, int64_t mg,
                                           int64_t kh, int64_t kw) {
  if (static_cast<int64_t>(w.size()) != groups * cg * mg * kh * kw)
    throw std::invalid_argument("ConvTranspose weights do not match their shape");
  std::vector<T> out(w.size());
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t m = 0; m < mg; ++m)
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j)
            out[static_cast<size_t>((((g * mg + m) * cg + ci) * kh + i) * kw + j)] =
                w[static_cast<size_t>((((g * cg + ci) * mg + m) * kh + (kh - 1 - i)) * kw + (kw - 1 - j))];
  return out;
}

}  // namespace npusim::compiler
