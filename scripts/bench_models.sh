#!/bin/bash
# Compile + timing-simulation speed of real models: wall time and peak memory of
#   npusim run MODEL.onnx --config configs/edge.yaml -q
# measured with /usr/bin/time -f "%e %M", best wall time of --repeat runs (the machine is shared), the
# largest peak RSS, plus the compile and simulation seconds from one --report run. Checks the Compiler
# issue's targets: ResNet-50 <= 2 s and <= 1 GB, ViT-B/16 <= 5 s.
#
# Usage: scripts/bench_models.sh [--npusim PATH] [--models DIR] [--config FILE] [--repeat N] [MODEL...]
#   --npusim  the binary (default: build/npusim under the repository)
#   --models  where MODEL.onnx live; missing ones are exported there with scripts/export_models.py
#             (default: build/test_models, the folder the ctests use)
#   MODEL     export_models.py names (default: resnet50 vit_b_16 mobilenet_v2 bert_base)
# Exit status: 0 when every target is met, 1 when one is missed, 2 on a usage or setup error.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NPUSIM=$ROOT/build/npusim
MODELS=$ROOT/build/test_models
CONFIG=$ROOT/configs/edge.yaml
REPEAT=3
names=()
while (($#)); do
  case $1 in
    --npusim) NPUSIM=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "bench_models.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
((${#names[@]})) || names=(resnet50 vit_b_16 mobilenet_v2 bert_base)
[[ -x $NPUSIM ]] || { echo "bench_models.sh: no npusim binary at $NPUSIM (use --npusim)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench_models.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
mkdir -p "$MODELS"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

# Targets in seconds and KiB; models without one are only reported.
declare -A max_s=([resnet50]=2.0 [vit_b_16]=5.0)
declare -A max_kib=([resnet50]=1048576)

status=0
printf '%-14s %9s %9s %10s %9s %9s %12s  %s\n' model "wall_s" "cpu_s" "peak_MiB" compile_s sim_s cycles target
for n in "${names[@]}"; do
  f=$MODELS/$n.onnx
  if [[ ! -f $f ]]; then
    /usr/bin/python3 "$ROOT/scripts/export_models.py" "$MODELS" "$n" >"$T/export.log" 2>&1 \
      || { echo "bench_models.sh: could not export $n (see below)" >&2; tail -5 "$T/export.log" >&2; exit 2; }
  fi
  cat "$f" >/dev/null  # warm the file cache: the first read of a 340 MB model is disk time, not npusim's
  best=; cpu=; rss=0
  for ((i = 0; i < REPEAT; ++i)); do
    /usr/bin/time -f "%e %U %S %M" -o "$T/t" "$NPUSIM" run "$f" --config "$CONFIG" -q >"$T/out" 2>&1 \
      || { echo "bench_models.sh: npusim failed on $n: $(tail -c 300 "$T/out")" >&2; exit 2; }
    read -r w u s m <"$T/t"
    if [[ -z $best ]] || /usr/bin/python3 -c "import sys; sys.exit(0 if $w < $best else 1)"; then
      best=$w; cpu=$(/usr/bin/python3 -c "print(f'{$u + $s:.2f}')")
    fi
    ((m > rss)) && rss=$m
  done
  "$NPUSIM" run "$f" --config "$CONFIG" -q --report "$T/r.json" >/dev/null 2>&1
  read -r comp sim cycles < <(/usr/bin/python3 -c "
import json; r = json.load(open('$T/r.json'))
print(f\"{r['compile']['seconds']:.3f} {r['sim']['wall_seconds']:.3f} {r['total_cycles']}\")")
  verdict=
  if [[ -n ${max_s[$n]:-} ]]; then
    if /usr/bin/python3 -c "import sys; sys.exit(0 if $best <= ${max_s[$n]} and $rss <= ${max_kib[$n]:-99999999999} else 1)"; then
      verdict="ok (<= ${max_s[$n]} s${max_kib[$n]:+, <= $((max_kib[$n] / 1024)) MiB})"
    else
      verdict="MISSED (<= ${max_s[$n]} s${max_kib[$n]:+, <= $((max_kib[$n] / 1024)) MiB})"; status=1
    fi
  fi
  printf '%-14s %9s %9s %10d %9s %9s %12s  %s\n' "$n" "$best" "$cpu" $((rss / 1024)) "$comp" "$sim" "$cycles" "$verdict"
done
echo "command: $NPUSIM run MODEL.onnx --config $CONFIG -q  (best wall of $REPEAT, largest peak RSS; load average $(cut -d' ' -f1-3 /proc/loadavg))"
exit $status
