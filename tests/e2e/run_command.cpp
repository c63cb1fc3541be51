#include "tests/e2e/run_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace npusim::test {

CommandResult run_command(const std::vector<std::string>& argv, const std::string& stdin_text) {
  const std::string dir = temp_dir("cmd");
  const std::string in_path = dir + "/stdin", out_path = dir + "/stdout", err_path = dir + "/stderr";
  write_file(in_path, stdin_text);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int in = open(in_path.c_str(), O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  std::filesystem::remove_all(dir);
  return r;
}

std::string temp_dir(const std::string& name) {
  static int counter = 0;
  const std::string dir = std::string(NPUSIM_BINARY_DIR) + "/test-tmp/" + name + "-" +
                          std::to_string(getpid()) + "-" + std::to_string(counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string json_eval(const std::string& path, const std::string& expr) {
  const CommandResult r =
      run_command({"/usr/bin/python3", "-c",
                   "import json,sys; r=json.load(open(sys.argv[1])); print(" + expr + ")", path});
  if (r.exit_code != 0) throw std::runtime_error("json_eval(" + path + ", " + expr + "): " + r.err);
  return r.out.substr(0, r.out.find_last_not_of('\n') + 1);
}

}  // namespace npusim::test
