#include "sim/sweep/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "sim/sweep/result_store.h"

namespace npusim::sim::sweep_detail {

namespace fs = std::filesystem;

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, const std::string& cwd) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the sweep died before prctl took effect
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null_in = ::open("/dev/null", O_RDONLY);
    if (fd < 0 || null_in < 0) _exit(126);
    dup2(null_in, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    execv(cargv[0], cargv.data());
    const std::string m = std::string("cannot execute ") + cargv[0] + ": " + std::strerror(errno) + "\n";
    if (::write(2, m.data(), m.size()) < 0) _exit(127);
    _exit(127);
  }
  return pid;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

int run_shell(const std::string& command, const std::string& cwd, const std::string& log_path) {
  const pid_t pid = spawn({"/bin/sh", "-c", command}, log_path, cwd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::pair<int, std::string> capture(const std::vector<std::string>& argv, const std::string& log_path) {
  const pid_t pid = spawn(argv, log_path);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {status, read_text(log_path)};
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(in, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / name;
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string tail_message(const std::string& log_path) {
  std::vector<std::string> lines;
  for (std::string& l : lines_of(read_text(log_path))) {
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
    const size_t cr = l.rfind('\r');  // progress bars redraw with carriage returns
    if (cr != std::string::npos) l = l.substr(cr + 1);
    if (!l.empty()) lines.push_back(l);
  }
  std::string m;
  const size_t from = lines.size() > 3 ? lines.size() - 3 : 0;
  for (size_t i = from; i < lines.size(); ++i) m += (m.empty() ? "" : " | ") + lines[i];
  if (m.size() > 600) m = m.substr(0, 597) + "...";
  return m;
}

}  // namespace npusim::sim::sweep_detail

namespace npusim::sim {

std::string self_exe() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : p.string();
}

}  // namespace npusim::sim
