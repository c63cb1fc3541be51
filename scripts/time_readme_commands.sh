#!/bin/bash
# Times the README's commands as a newcomer runs them: a fresh clone of this checkout's HEAD in a scratch
# folder, the packages already installed, ccache off (a fresh machine has an empty cache). Prints one
# line per command: wall seconds, CPU seconds (user + system, children included), and the load average
# at the start (a loaded machine stretches wall time; on 2 cores, CPU / 2 is what a quiet one takes).
#
# Usage: scripts/time_readme_commands.sh [--keep DIR] [1] [2] [3] [4]   (default: 1 2)
#   --keep DIR  clone into DIR and keep it (default: a temporary folder, removed at the end)
# Exit status: 0 when every command succeeded, 1 when one failed, 2 on a usage error.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
keep=
which=()
while (($#)); do
  case $1 in
    --keep) keep=$2; shift 2 ;;
    1|2|3|4) which+=("$1"); shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "time_readme_commands.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
((${#which[@]})) || which=(1 2)
dir=${keep:-$(mktemp -d)}
[[ -n $keep ]] || trap 'rm -rf "$dir"' EXIT
git clone -q "$ROOT" "$dir/npusim" || { echo "time_readme_commands.sh: cannot clone $ROOT" >&2; exit 2; }
cd "$dir/npusim"
mapfile -t commands < <(/usr/bin/python3 -c '
import re, sys
text = open("README.md").read()
for m in re.finditer(r"```sh\n([^\n]*)\n```", text):
    print(m.group(1))')
((${#commands[@]} == 4)) || { echo "time_readme_commands.sh: README.md has ${#commands[@]} commands, expected 4" >&2; exit 2; }
export CCACHE_DISABLE=1
status=0
printf '%-8s %8s %8s %6s  %s\n' command wall_s cpu_s load commit
for i in "${which[@]}"; do
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%e %U %S" -o "$dir/time.$i" bash -c "${commands[$((i - 1))]}" >"$dir/log.$i" 2>&1 || {
    status=1
    echo "command $i failed; the end of its output:" >&2
    tail -20 "$dir/log.$i" >&2
  }
  read -r wall user sys <"$dir/time.$i"
  printf '%-8s %8.0f %8.0f %6s  %s\n' "$i" "$wall" "$(echo "$user + $sys" | bc)" "$load" "$(git rev-parse --short HEAD)"
done
exit $status
