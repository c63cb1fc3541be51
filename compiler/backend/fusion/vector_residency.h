#pragma once
// Vector layers' values on chip (internal to the back end): an element-wise layer whose output the row-wise
// layer after it reads (a transformer's residual Add -> LayerNorm) writes each result tile into the input
// scratchpad, dense [rows][D] at the top (FusionState::on_chip, reserved as residency.h reserves a conv's
// output), and the LayerNorm reads its rows there in place: the value's write and read through DRAM are
// saved (only its read when other readers need it in DRAM: the producer then stores it too). The same
// bookkeeping as residency.h's (finish_on_chip releases the bytes, Context::load spills the value before
// any DRAM reader), so the program stays exact whatever reads it. Whether the producer writes it there is
// decided by simulating its stream both ways (vector/elementwise.cpp), the reader's load credited at the
// DRAM's sustained rate, as residency.h's closed form credits a conv's.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "compiler/backend/core/context.h"

namespace npusim::compiler::backend {

// Why node i's output cannot stay on chip for the row-wise layer i + 1 ("" = it can): node i an
// element-wise layer with one output, node i + 1 a LayerNormalization (default domain) reading the output
// as its input and nothing else, the output a dense row-major value that is not a graph output nor written
// into a Concat's buffer. *others: whether the output has readers besides (they read it in DRAM).
std::string rowwise_reads_on_chip(const Context& c, size_t i, bool* others);
// Before vector layer i is lowered: plans its output on chip for the LayerNorm after it
// (rowwise_reads_on_chip), when nothing else is held and the value with what is reserved already fits 3/4 of
// the input scratchpad: FusionState::keep_output set and its bytes reserved at the top.
void plan_vector_rows(Context& c, size_t i);
// The element-wise layer being lowered writes `y` (its output, planned by plan_vector_rows): the address of
// the input scratchpad where its rows go, dense, or nullopt (not planned). Nothing is recorded yet:
// vector_rows_written does once the layer writes them there.
std::optional<uint64_t> vector_rows_planned(const Context& c, const DramTensor& y);
// ... it wrote them there (at the address vector_rows_planned gave): the value is pending for its reader
// (FusionState::on_chip), stored as well when it has other readers (*stored is then true).
void vector_rows_written(Context& c, const DramTensor& y, bool* stored);
// Whether the layer being lowered has written its output's rows on chip (vector_rows_written).
bool vector_rows_pending(const Context& c);
// The bytes plan_vector_rows reserved for `y` freed for the layer's own tiles (timing it as it would run
// storing y); returns the reservation before, which restore_planned_rows puts back.
int64_t free_planned_rows(Context& c, const DramTensor& y);
void restore_planned_rows(Context& c, int64_t reserved);
// A LayerNorm about to load its input `value`: where its rows lie dense in the input scratchpad
// (the value an element-wise layer left there for it), recorded as read in place; nullopt: it loads them.
std::optional<uint64_t> rows_read_in_place(Context& c, const std::string& value, isa::DType t);

}  // namespace npusim::compiler::backend
