#pragma once
// The option groups: each a function declaring its options (one file each under sim/cli/options/), bound
// to its part of Options. A command's entry in the command table (commands/table.cpp) lists the groups it
// takes; parse() (command.h) declares them, in that order, after the command's own options. A default
// that a library struct has is taken from it, never restated (tests/sim/cli_options_test.cpp).
#include <boost/program_options.hpp>
#include <string>

#include "sim/cli/command.h"
#include "sim/cli/options/accuracy.h"
#include "sim/cli/options/common.h"
#include "sim/cli/options/model.h"
#include "sim/dynamic/dynamic_cli.h"
#include "sim/model/branches.h"
#include "sim/model/model.h"

namespace npusim::sim::cli {

// --pipeline and --preprocess-on.
struct EndToEndCliOptions {
  std::string pipeline_file;  // --pipeline PIPE.yaml
  std::string preprocess_on;  // --preprocess-on host|npu (empty: not given)
};

// Every group's values; a command reads the groups its table entry lists.
struct Options {
  CommonOptions common;   // machine and outputs
  ModelCliOptions model;  // model and precision
  AccuracyCliOptions accuracy;
  FunctionalIo io;  // --inputs, --outputs, --seed
  EndToEndCliOptions e2e;
  std::string split = "none";  // --split (multi-core)
  BranchRequest branch;        // --branch
  bool branch_given = false;
  dynamic::DynamicCliOptions dynamic;
};

GroupOptions machine_options(Options& o);     // machine.cpp
GroupOptions model_options(Options& o);       // model.cpp
GroupOptions precision_options(Options& o);   // precision.cpp
GroupOptions accuracy_options(Options& o);    // accuracy.cpp
GroupOptions functional_options(Options& o);  // functional.cpp
GroupOptions end_to_end_options(Options& o);  // end_to_end.cpp
GroupOptions multicore_options(Options& o);   // multicore.cpp
GroupOptions branch_options(Options& o);      // branches.cpp: --branch
GroupOptions dynamic_options(Options& o);     // dynamic.cpp: --dynamic
GroupOptions requests_options(Options& o);    // dynamic.cpp: --requests
GroupOptions generation_options(Options& o);  // dynamic.cpp: --generate
GroupOptions output_options(Options& o);      // outputs.cpp

// The groups' input files and folders (--preprocess, --calibration, ...): InputError naming the option when
// one is missing, unreadable or of the wrong kind (input_paths.cpp). parse() calls it.
void check_input_paths(const Options& o);

}  // namespace npusim::sim::cli
