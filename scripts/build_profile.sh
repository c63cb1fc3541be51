#!/bin/bash
# Where the build's time goes: builds the tree from scratch in a scratch folder (ccache off) with a
# launcher that records the CPU seconds (user + system) of every compile and link, then prints the
# totals per library or test folder and the costliest translation units. CPU time, not wall time, so the
# figures hold on a shared machine; on 2 cores a quiet build takes about half of the total.
#
# Usage: scripts/build_profile.sh [--build-dir DIR] [--target T] [--top N] [-- CMAKE_ARGS...]
#   --build-dir DIR  where to build (default: a temporary folder, removed at the end)
#   --target T       build only target T (README command 1 builds `npusim`; default: everything)
#   --top N          how many translation units to list (default 25)
# Exit status: 0 on success, 1 when the build fails, 2 on a usage error.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
dir=
top=25
target=()
while (($#)); do
  case $1 in
    --build-dir) dir=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --target) target=(--target "$2"); shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "build_profile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z $dir ]]; then dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT; fi
mkdir -p "$dir"
log=$dir/cpu_times.log
: >"$log"
cat >"$dir/launcher.sh" <<'LAUNCH'
#!/bin/bash
out=; prev=
for a in "$@"; do [[ $prev == -o ]] && out=$a; prev=$a; done
/usr/bin/time -f "%U %S" -o "$0.$$" "$@"; rc=$?
echo "$(tail -1 "$0.$$") $out" >>"${0%/*}/cpu_times.log"; rm -f "$0.$$"
exit $rc
LAUNCH
chmod +x "$dir/launcher.sh"
export CCACHE_DISABLE=1
cmake -S "$ROOT" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DNPUSIM_CCACHE=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$dir/launcher.sh" -DCMAKE_CXX_LINKER_LAUNCHER="$dir/launcher.sh" "$@" \
  >"$dir/cmake.log" 2>&1 || { echo "build_profile.sh: cmake failed (see $dir/cmake.log)" >&2; exit 1; }
start=$SECONDS
cmake --build "$dir/build" -j2 "${target[@]}" >"$dir/build.log" 2>&1 || { echo "build_profile.sh: the build failed:" >&2; tail -20 "$dir/build.log" >&2; exit 1; }
wall=$((SECONDS - start))
/usr/bin/python3 - "$log" "$wall" "$top" <<'PY'
import collections, re, sys
log, wall, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
for line in open(log):
    parts = line.split()
    if len(parts) < 3:
        continue
    try:
        cpu = float(parts[0]) + float(parts[1])
    except ValueError:
        continue
    rows.append((cpu, parts[2]))
def group(out):
    m = re.search(r"CMakeFiles/([^/]+)\.dir/", out)
    if m:
        return ("compile", m.group(1))
    return ("link", out.split("/")[-1])
by = collections.defaultdict(float)
kinds = collections.defaultdict(float)
for cpu, out in rows:
    kind, name = group(out)
    by[name if kind == "compile" else "(links)"] += cpu
    kinds[kind] += cpu
total = sum(cpu for cpu, _ in rows)
print(f"build: {wall} s wall, {total:.0f} s CPU ({kinds['compile']:.0f} compiling {len([r for r in rows if group(r[1])[0] == 'compile'])} units, {kinds['link']:.0f} linking)")
print("\nCPU seconds by target")
for name, cpu in sorted(by.items(), key=lambda kv: -kv[1]):
    print(f"  {cpu:7.1f}  {100 * cpu / total:5.1f}%  {name}")
print(f"\nthe {top} costliest units")
for cpu, out in sorted(rows, reverse=True)[:top]:
    print(f"  {cpu:7.1f}  {out}")
PY
