#pragma once
// Files the commands read and write, their failures as the CLI's errors (InputError: exit 2).
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "isa/machine/config.h"
#include "isa/program.h"

namespace npusim::sim::cli {

// The whole file at `path` (InputError when it cannot be opened).
std::string read_text_file(const std::string& path);

// An input file an option names (`option` as typed: "--preprocess"): InputError in one sentence naming the
// option and the path when it does not exist, is a directory or cannot be read.
void check_input_file(std::string_view option, const std::string& path);

// An input folder an option names (--calibration DIR), holding `holds` ("images, .npy or .pb files"):
// InputError naming the option and the path when it does not exist or is not a folder.
void check_input_folder(std::string_view option, const std::string& path, std::string_view holds);

// Opens an output file for a trace, or nothing when no path was given.
std::unique_ptr<std::ofstream> open_output(const std::string& path);

// Writes `text` to the file at `path`.
void write_output(const std::string& path, const std::string& text);

// A MODEL or PROGRAM argument that names a directory: InputError saying so (the importer would read
// it as a stream of unknown size and call it too large).
void check_not_directory(const std::string& path);

// A program file by its name: .npu, or assembly text (.s, .asm).
bool is_program_file(const std::string& path);

// Loads a program from a binary program file or assembly text (by extension).
isa::Program load_program(const std::string& path);

// Checks that a program compiled for one machine runs on an array of the same shape (its tiles and
// preloads were chosen for it) and on scratchpads at least as large as it was compiled for (it
// addresses them; more room changes nothing).
void check_machine(const isa::Program& p, const isa::NpuConfig& config);

}  // namespace npusim::sim::cli
