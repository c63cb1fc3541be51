#pragma once
// A graph input's layout change done in its conv's loads (internal to the back end). The passes give a
// model's NCHW input an NHWC copy for its stem conv (passes/layout.cpp: `layout_0_input`); lowered alone
// that Transpose reads the input, transposes it tile by tile and writes the copy for the conv to read back
// (ConvNeXt-Tiny on edge: a layer of 52.7 k cycles fp16, 60.1 k int8, before its stem conv). Here each
// LOAD of the copy x that the conv's walk emits becomes a LOAD of the same pixels of the NCHW source y, one
// channel plane after the other (the conv's padding too), into the tile -- # int8: into fp32 work rows of the
// accumulator -- and one VEC transpose makes them pixels of all channels (# int8: then the Transpose's own
// quantize, VEC div and add, writes the codes into the tile): x is never written, the Transpose emits
// nothing, and its vector work runs beside the array's.
//
// Exact: a transpose moves values; # int8 the codes are those the Transpose's tile loop writes (the same
// VECs on the same fp32 values), the padding 0.0 quantized to the zero point, as the conv pads its codes.
// Only a layout Transpose from a dense NCHW tensor to the NHWC input of one Conv on the array (its only
// reader) whose windows do not overlap (stride at least the kernel, at least 2x2: a patchify stem, ConvNeXt's
// 4x4 / 4, ViT's 16x16 / 16), in the conv's type or fp32 to its int8 codes: each pixel is then loaded once
// and the transposes are the Transpose's own vector work. Overlapping windows load their halo rows again and
// would transpose them again (measured slower on every 3x3 / 7x7 stride-2 stem: docs/models.md, "The input
// transpose in its conv's loads (stemt)"). A mapping file that tiles or places the Transpose leaves it apart.
#include <array>
#include <cstddef>
#include <cstdint>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// The conv that may do layout Transpose node i in its loads (the graph's side of plan_pre_transpose), else
// -1. The memory plan keeps the Transpose's input until that conv.
int64_t pre_transpose_reader(const Graph& g, size_t i);
// Before layer i (a vector layer) is lowered: plans whether its reader does it (nothing emitted).
void plan_pre_transpose(Context& c, size_t i);
// Layer i's work is the transpose its reader does in its loads: fills its plan and returns true.
bool pre_transpose_member(Context& c, size_t i, LayerPlan& plan);
// Before matrix layer i is lowered: when it is the planned Transpose's reader, # int8 reserves the work rows
// and conversion constants at the top of the accumulator and loads the constants.
void begin_pre_transpose(Context& c, size_t i);
// Context::load's hook: a LOAD of the Transpose's output while its reader is lowered; emits the LOADs of the
// source's channel planes and the VECs instead. False when it is no such LOAD.
bool load_pre_transpose(Context& c, isa::Buffer buf, uint64_t sram, const Range& dram_range,
                        uint64_t dram_addr, isa::DType t, const std::array<int64_t, 4>& s,
                        const std::array<int64_t, 3>& st, const std::array<int64_t, 4>& pads,
                        int64_t pad_value);
// The Transpose's layer when layer i was to do it and its NPU lowering declined, for the caller to lower
// first; -1 otherwise.
int64_t pre_transpose_declined(Context& c, size_t i);
// After layer i is lowered: the reservation ends; its code did the transpose.
void finish_pre_transpose(Context& c, size_t i, const LayerPlan& plan);

}  // namespace npusim::compiler::backend
