#pragma once
// Running a sweep on a Slurm cluster: its shards as a job array and a merge job after them.
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/sweep/sweep_spec.h"

namespace npusim::sim {

// Writes out_dir/slurm/{array,merge}.sbatch and submits them with sbatch (the merge job depends on the
// array). With `wait`, blocks until the merge job ends. Returns the exit status.
int submit_slurm(const SweepSpec& spec, const std::vector<SweepPoint>& points, const std::string& out_dir,
                 const std::string& exe, bool wait, std::ostream& out, std::ostream& err);

}  // namespace npusim::sim
