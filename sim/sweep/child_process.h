#pragma once
// The child processes a sweep starts: simulations, model preparation commands and sbatch, each with its
// output into a log file, and what their logs and wait statuses say.
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace npusim::sim {

// Path of the running executable (/proc/self/exe resolved).
std::string self_exe();

namespace sweep_detail {

// Starts `argv` with stdout and stderr into `log_path` (in `cwd` when given). The child dies with the
// sweep process, so a killed sweep leaves no simulations behind.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, const std::string& cwd = "");

// A wait status in words: "exit 2", "killed by signal 9 (Killed)".
std::string describe_status(int status);

// Runs a shell command to completion (model preparation); returns its wait status.
int run_shell(const std::string& command, const std::string& cwd, const std::string& log_path);

// Runs `argv` and returns (wait status, captured stdout+stderr).
std::pair<int, std::string> capture(const std::vector<std::string>& argv, const std::string& log_path);

// The executable `name` found on PATH, "" when there is none.
std::string find_in_path(const std::string& name);

// The last few non-empty lines of a log, as one line: what a failed point's `error` column shows.
std::string tail_message(const std::string& log_path);

}  // namespace sweep_detail
}  // namespace npusim::sim
