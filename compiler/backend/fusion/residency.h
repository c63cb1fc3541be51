#pragma once
// On-chip residency between layers (internal to the back end). A convolution whose output is read by
// one pointwise convolution right after it can leave that output in the input scratchpad instead of
// storing it to DRAM: its epilogue's one VEC writes each tile there (tiles of every output channel over
// whole rows of pixels, so the tensor lies dense [pixels][channels]), and the consumer, mapped as a
// GEMM over those pixels, reads each K chunk in place (MATMUL's a_stride). The tensor never touches
// DRAM: the bytes a layer-by-layer program would have written and read back are saved (MobileNet's
// depthwise -> project pairs, ResNet's 3x3 -> 1x1). The bytes it takes are held at the top of the
// input scratchpad from the producer's mapping on (FusionState::input_reserved), so both layers' tiles are
// searched, costed and simulated as they will run. Any other reader (a host fallback, a conversion)
// gets the tensor through Context::spill_on_chip first, so the program stays exact whatever lowers.
// The same for GEMM chains (a MatMul or Gemm read by the MatMul or Gemm after it: a transformer's FFN), the
// value in column blocks of the producer's output-channel tile (MatrixJob::y_block), and for a LayerNorm's
// rows read by the GEMM after it (rows_left_on_chip).
#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/backend/core/context.h"
#include "compiler/backend/matrix/matrix_walk.h"

namespace npusim::compiler::backend {

// Why node i's output cannot stay on chip for node i + 1 as far as the reader goes ("" = it can): node
// i + 1 must be a pointwise Conv reading it as its input, its only reader, and it a dense NHWC feature
// map that is not a graph output nor written into a Concat's buffer. With `others`, later readers are
// allowed too (*others says whether there are any): they read the value in DRAM, which its producer then
// writes as well (MatrixJob::y_store: a block's output that the next block's first conv reads on chip and
// its residual Add in DRAM).
std::string next_reads_on_chip(const Context& c, size_t i, bool* others = nullptr);
// Why node i's output (a MatMul's or Gemm's) cannot stay on chip for node i + 1 ("" = it can): a GEMM
// chain (a transformer's FFN: its first MatMul with the GELU fused, the second reading the hidden layer).
// Node i + 1 must be a MatMul or Gemm reading it as its A against constant weights, its only reader, and it
// a dense row-major value that is not a graph output nor written into a Concat's buffer.
// With `others` (a LayerNorm's rows), other readers are allowed too (*others says whether there are any):
// they read the value in DRAM, which its producer then stores as well.
std::string gemm_reads_on_chip(const Context& c, size_t i, bool* others = nullptr);
// Why value v cannot lie on chip as rows ("" = it can): it must be a dense row-major value of at least two
// dims whose spill is one STORE box (rows_on_chip: 16-bit sizes).
std::string rows_fit_on_chip(const Context& c, const std::string& v);
// A GEMM chain's value (DRAM tensor y, row-major, rows of its last dim N) left at `addr` by layer
// `producer`: in column blocks [N / block][rows][block] (block 0: dense [rows][N]; MatrixJob::y_block).
OnChipValue rows_on_chip(const std::string& value, const DramTensor& y, uint64_t addr, uint32_t producer,
                         int64_t block);
// The value `value` (DRAM tensor y, dense NHWC) left at `addr` of the input scratchpad by layer
// `producer`, pending for its reader.
OnChipValue nhwc_on_chip(const std::string& value, const DramTensor& y, uint64_t addr, uint32_t producer);
// Before node i of the graph is lowered: whether its output can stay on chip for node i + 1 (a pointwise
// Conv reading it as its input; other readers read the copy its producer also stores), small enough that with
// a value node i itself reads on chip a quarter of the input scratchpad stays for the layers' own tiles). If
// so, sets FusionState::keep_output and reserves its bytes (FusionState::input_reserved).
void plan_on_chip(Context& c, size_t i);
// A matrix job about to be mapped (its strategy built): a pointwise conv over several images becomes one
// GEMM over all their pixels when the closed form does not find it slower (the batch folded into the rows:
// weights stream once per batch); reads its input where the layer before left it
// (MatrixJob::a_sram, as a GEMM over the input's pixels; recorded in FusionState::kept_on_chip), and leaves
// its output on chip when the planner asked for it and its epilogue ends with a VEC (MatrixJob::y_sram).
// Each only when the closed form does not find it slower (MatrixMapper::search, DepthwiseMapper::search).
void place_on_chip(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm);
// A row-wise layer (a LayerNorm: vector/rowwise.h) about to write `value`, which the planner keeps for the
// GEMM after it: its record, dense [rows][N] at the returned address of the input scratchpad, now pending
// (FusionState::on_chip), where the layer writes its rows instead of storing them. nullopt: stored as
// usual (not planned, or the address lies below `below`, where the layer's own tiles reach).
// With `stored`, also a value with other readers (*stored = true: the layer stores its rows as well, from
// where it wrote them).
std::optional<uint64_t> rows_left_on_chip(Context& c, const std::string& value, uint64_t below,
                                          bool* stored = nullptr);
// Maps a matrix job (its strategy built): its on-chip input and output (place_on_chip), the array's
// tiling (MatrixMapper::choose) and, for a depthwise job, the vector unit when that is faster
// (lower_depthwise_on_vector, which emits it); when no tiling leaves the output on chip it goes to DRAM.
// Returns true when the vector unit took the job; otherwise *t is the array's tiling for the caller to
// generate (*evaluated == 0: not even the smallest fits).
bool map_matrix_job(Context& c, MatrixJob& j, MatrixStrategy& s, MatrixMapper& mm, Tiling* t,
                    int64_t* evaluated);
// After node i is lowered: keeps the reservation while the next node is to read the value, holds it on
// for a later residual reader (FusionState::residual: released after that reader), otherwise spills a
// value nobody read in place and releases the bytes.
// The layer's plan counts the value's bytes in its input scratchpad use (LayerPlan::sram_input_bytes).
void finish_on_chip(Context& c, size_t i, LayerPlan& plan);

// The layer after node i that reads node i's output as its residual (its Add fused into that Conv) and for
// which the output can stay in the input scratchpad from node i on, or -1: within a few layers, none of
// them a line buffer's conv or an SE block's pool (they need the scratchpad's top), no SE input held now,
// no other value held past this layer, and the reader's own output a value that can stay on chip beside it
// (for a pointwise conv after it, or held in turn), so that its tiles hold every channel of whole rows and
// read the value in place. The value's other readers are the next layer (in place) or read it in DRAM (its
// producer then stores it too).
// With `input`, also a later layer that reads the output as its input in place, dense (*input = true): a
// stage's strided 1x1 downsample conv reading the block output that the next layer reads on chip as well
// (the value is then never stored).
int64_t hold_for_residual(const Context& c, size_t i, bool* input = nullptr);
// Where a residual reader finds the box of its residual `value` at `dram_addr` in the input scratchpad:
// the value held for this layer (FusionState::residual) and the box one contiguous run of it (every channel
// of whole rows of pixels, as tiles that leave their own output on chip are). nullopt: it loads the box
// from DRAM (Context::load stores the value there first if only SRAM has it).
std::optional<uint64_t> residual_in_sram(const Context& c, const Range& value, uint64_t dram_addr,
                                         isa::DType t, const std::array<int64_t, 4>& box,
                                         const std::array<int64_t, 3>& strides);

// The bookkeeping of value v read in place by the layer being lowered (its plan's on_chip_input, the bytes
// saved; kept_on_chip when nothing stored it): no longer pending unless a later layer reads it as its
// residual.
void read_in_place(Context& c, OnChipValue& v);

// Values read in place, never in DRAM -> their SRAM address (the binding stage reports them in
// CompileResult::on_chip).
const std::map<std::string, uint64_t>& kept_on_chip(const Context& c);
// Whether the layer being lowered is to leave `value` on chip (plan_on_chip chose it).
bool keeps_on_chip(const Context& c, const std::string& value);
// Those of them in column blocks (a GEMM chain's: rows_on_chip) -> the block.
const std::map<std::string, int64_t>& kept_blocks(const Context& c);
// Those of them padded (a padded conv's input) -> their strides (HostTensor::strides).
const std::map<std::string, std::vector<int64_t>>& kept_strides(const Context& c);

// Why node i's output cannot stay on chip padded for node i + 1 ("" = it can): node i + 1 a Conv with a
// kernel or padding (ResNet's 1x1 -> 3x3) reading it as its input, its only reader, the output a dense NHWC
// map of float or byte codes. *pad: the layout that conv reads, each image padded as its own LOADs pad a
// tile (rows stacked as MatrixMapper::image_rows stacks them), the halo value the value's zero point.
std::string next_reads_padded(const Context& c, size_t i, OnChipValue::Padded* pad);

}  // namespace npusim::compiler::backend
