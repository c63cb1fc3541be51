#include "sim/cli/files.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string_view>
#include <tuple>

#include "isa/assembly.h"
#include "isa/machine/spec_text.h"
#include "sim/cli/command.h"

namespace npusim::sim::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot open '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_input_file(std::string_view option, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(fmt::format("{} {}: no such file", option, path));
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("{} {}: is a directory, not a file", option, path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{} {}: cannot read it ({})", option, path, std::strerror(errno)));
}

void check_input_folder(std::string_view option, const std::string& path, std::string_view holds) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw InputError(fmt::format("{} {}: no such folder (a folder of {})", option, path, holds));
  if (!std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("{} {}: not a folder (a folder of {})", option, path, holds));
}

std::unique_ptr<std::ofstream> open_output(const std::string& path) {
  if (path.empty()) return nullptr;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("cannot write '{}': it is a directory (name a file in it)", path));
  auto f = std::make_unique<std::ofstream>(path, std::ios::binary);
  if (!*f) throw InputError(fmt::format("cannot write '{}'", path));
  return f;
}

void write_output(const std::string& path, const std::string& text) {
  auto f = open_output(path);
  if (!f->write(text.data(), static_cast<std::streamsize>(text.size())) || !f->flush()) {
    throw InputError(fmt::format("cannot write '{}'", path));
  }
}

void check_not_directory(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format(
        "'{}' is a directory, not a model or program file (an .onnx model, a SCALE-Sim .csv topology or an "
        ".npu/.s program)",
        path));
}

bool is_program_file(const std::string& path) {
  return ends_with(path, ".npu") || ends_with(path, ".s") || ends_with(path, ".asm");
}

isa::Program load_program(const std::string& path) {
  check_not_directory(path);
  try {
    if (ends_with(path, ".s") || ends_with(path, ".asm")) return isa::assemble(read_text_file(path), path);
    return isa::read_program_file(path);
  } catch (const isa::ProgramError& e) {
    throw InputError(e.what());
  }
}

void check_machine(const isa::Program& p, const isa::NpuConfig& config) {
  if (p.machine.empty()) return;
  isa::NpuConfig target;
  try {
    target = isa::from_spec_text(p.machine);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("the program's machine spec is unreadable: {}", e.what()));
  }
  auto mismatch = [&](const char* key, int64_t compiled, int64_t have, bool ok) {
    if (!ok) {
      throw UsageError(
          fmt::format("the program was compiled for {} = {} but the configuration has {}; recompile "
                      "it or pass a matching --config/--set",
                      key, compiled, have));
    }
  };
  mismatch("systolic_array.rows", target.systolic_array.rows, config.systolic_array.rows,
           target.systolic_array.rows == config.systolic_array.rows);
  mismatch("systolic_array.cols", target.systolic_array.cols, config.systolic_array.cols,
           target.systolic_array.cols == config.systolic_array.cols);
  for (const auto& [key, compiled, have] :
       {std::tuple{"sram.input.size_kib", target.sram.input.size_kib, config.sram.input.size_kib},
        std::tuple{"sram.weight.size_kib", target.sram.weight.size_kib, config.sram.weight.size_kib},
        std::tuple{"sram.accumulator.size_kib", target.sram.accumulator.size_kib,
                   config.sram.accumulator.size_kib}}) {
    mismatch(key, compiled, have, have >= compiled);
  }
}

}  // namespace npusim::sim::cli
