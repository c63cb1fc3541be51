#pragma once
// Runs a command as a child process and captures its exit status and output (no shell involved).
#include <string>
#include <vector>

namespace npusim::test {

struct CommandResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  int signal = 0;      // the signal that killed it, if any
  std::string out;
  std::string err;
};

CommandResult run_command(const std::vector<std::string>& argv, const std::string& stdin_text = "");

// A fresh empty directory under the build tree, removed by the caller if wanted.
std::string temp_dir(const std::string& name);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);

// Evaluates a Python expression over the parsed JSON file `r` (Debian's python3 parses strictly) and
// returns what it prints, without the final newline; throws std::runtime_error when Python fails.
std::string json_eval(const std::string& path, const std::string& expr);

#ifdef NPUSIM_BIN
// The npusim binary under test (the target's NPUSIM_BIN) run with `args`.
inline CommandResult npusim(std::vector<std::string> args) {
  args.insert(args.begin(), NPUSIM_BIN);
  return run_command(args);
}
#endif

}  // namespace npusim::test
