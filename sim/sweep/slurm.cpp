#include "sim/sweep/slurm.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "sim/sweep/child_process.h"
#include "sim/sweep/result_store.h"

namespace npusim::sim {
namespace {

namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

}  // namespace

using namespace sweep_detail;

int submit_slurm(const SweepSpec& spec, const std::vector<SweepPoint>& points, const std::string& out_dir_arg,
                 const std::string& exe_arg, bool wait, std::ostream& out, std::ostream& err) {
  const std::string sbatch = find_in_path("sbatch");
  if (sbatch.empty()) {
    err << "npusim: error: --slurm needs sbatch, which is not on PATH (is Slurm installed and configured?)\n";
    return 1;
  }
  const fs::path dir = fs::absolute(out_dir_arg).lexically_normal();
  fs::create_directories(dir / "slurm");
  write_plan(dir.string(), spec, points);
  const std::string exe = exe_arg.empty() ? self_exe() : exe_arg;
  const SlurmSpec& s = spec.slurm;
  const int64_t tasks = std::max<int64_t>(
      1, std::min<int64_t>(static_cast<int64_t>(points.size()), s.tasks > 0 ? s.tasks : 16));
  const std::string sweep_path = fs::absolute(spec.path).lexically_normal().string();

  auto header = [&](const std::string& job, const std::string& log) {
    std::string h = "#!/bin/bash\n# Written by npusim sweep --slurm; submit again with sbatch.\n";
    h += "#SBATCH --job-name=" + job + "\n#SBATCH --output=" + log + "\n";
    if (!s.partition.empty()) h += "#SBATCH --partition=" + s.partition + "\n";
    if (!s.time.empty()) h += "#SBATCH --time=" + s.time + "\n";
    if (!s.mem.empty()) h += "#SBATCH --mem=" + s.mem + "\n";
    for (const std::string& e : s.extra) h += "#SBATCH " + e + "\n";
    return h;
  };
  const std::string job = "npusim-" + spec.name;
  std::string array = header(job, (dir / "slurm" / "task-%a.log").string());
  array += fmt::format("#SBATCH --array=0-{}\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task={}\n", tasks - 1,
                       s.cpus_per_task);
  array += "set -eu\n";
  array += fmt::format(
      "exec {} sweep {} -o {} --shard \"$SLURM_ARRAY_TASK_ID/{}\" -j {} --progress-interval 30\n",
      shell_quote(exe), shell_quote(sweep_path), shell_quote(dir.string()), tasks, s.cpus_per_task);
  std::string merge = header(job + "-merge", (dir / "slurm" / "merge.log").string());
  merge += "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\nset -eu\n";
  merge += fmt::format("exec {} sweep --merge {}\n", shell_quote(exe), shell_quote(dir.string()));
  const std::string array_path = (dir / "slurm" / "array.sbatch").string();
  const std::string merge_path = (dir / "slurm" / "merge.sbatch").string();
  write_atomically(array_path, array);
  write_atomically(merge_path, merge);

  auto [st, text] =
      capture({sbatch, "--parsable", array_path}, (dir / "slurm" / "sbatch-array.out").string());
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    err << "npusim: error: sbatch " << array_path << " failed (" << describe_status(st) << "): " << text;
    return 1;
  }
  const std::string array_id = text.substr(0, text.find_first_of(";\n"));
  out << fmt::format("submitted job array {} ({} tasks for {} points)\n", array_id, tasks, points.size());
  std::vector<std::string> margv = {sbatch, "--parsable", "--dependency=afterany:" + array_id};
  if (wait) margv.push_back("--wait");
  margv.push_back(merge_path);
  out << fmt::format("merge job depends on it; results will be in {}/{}\n", dir.string(), kResultsCsv)
      << std::flush;
  auto [mst, mtext] = capture(margv, (dir / "slurm" / "sbatch-merge.out").string());
  const std::string merge_id = mtext.substr(0, mtext.find_first_of(";\n"));
  if (!WIFEXITED(mst) || WEXITSTATUS(mst) != 0) {
    err << "npusim: error: the merge job " << (wait ? merge_id + " " : "") << "failed ("
        << describe_status(mst) << "): " << mtext << "see " << (dir / "slurm" / "merge.log").string() << "\n";
    return 1;
  }
  out << "merge job " << merge_id << (wait ? " finished" : " submitted") << "\n";
  return 0;
}

}  // namespace npusim::sim
