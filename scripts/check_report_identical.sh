#!/bin/bash
# The report's features, run by two npusim builds and compared byte for byte: plain and --functional runs,
# energy, --pipeline (e2e with a stream), --split layers|batch (multicore), --generate, --dynamic with
# --requests, serve, exec, the exported models in fp32 and int8 with --accuracy, `npusim diff` output and a
# sweep's results.csv/.jsonl. The fields that say when or with which build a run happened (wall and
# compile seconds, version) are blanked; everything else must be the same bytes. scripts/check_identical.py
# covers the zoo's reports, programs, --functional outputs and mapping files; this covers the report's
# sections and readers.
#
# usage: scripts/check_report_identical.sh OLD_NPUSIM NEW_NPUSIM OUTDIR [MODELS_DIR]
#   MODELS_DIR (default /work/tmp/models): resnet18, mobilenet_v2, resnet50, bert_small_dyn .onnx if there.
# One line a case, `same` or `DIFFERENT` (OUTDIR/CASE.diff says what); exit 1 when any differs.
set -u
if [ $# -lt 3 ]; then sed -n '2,13p' "$0"; exit 2; fi
BASE=$(realpath "$1"); NEW=$(realpath "$2"); OUT=$(realpath -m "$3"); M=${4:-/work/tmp/models}
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$OUT"; mkdir -p "$OUT"/base "$OUT"/new
LLM="llm:layers=2,hidden=128,heads=4,kv_heads=2,ffn=256,vocab=500"
cat > "$OUT"/scenario.yaml <<'Y'
config: edge
policy: priority
duration_ms: 20
seed: 7
models:
  - name: a
    model: demo
    priority: 2
    deadline_ms: 5
    arrival: {type: periodic, period_ms: 4, phase_ms: 0}
  - name: b
    model: conv:H=16,W=16,C=16,K=32,R=3,S=3,stride=1,pad=1
    priority: 1
    arrival: {type: poisson, rate_hz: 200}
Y
printf 'seq,arrival_ms\n20,0\n33,1\n64,5\n' > "$OUT"/req.csv
printf 'seq,arrival_ms\n20,0\n33,1\n64,5\n' > "$OUT"/req2.csv
cat > "$OUT"/sweep.yaml <<Y
name: cmp
base: edge
axes:
  - model:
      - {name: conv, path: "conv:H=16,W=16,C=16,K=32,R=3,S=3,stride=1,pad=1"}
      - {name: r18, path: $M/resnet18.onnx}
  - systolic_array.rows: [8, 16]
    systolic_array.cols: [8, 16]
Y
cases=(
  "demo|run demo -q --report @/r.json --layers-csv @/l.csv"
  "demo_func|run demo -q --functional --report @/r.json"
  "gemm|run gemm:M=256,N=256,K=512 -q --report @/r.json"
  "conv_energy|run conv:H=16,W=16,C=16,K=32,R=3,S=3,stride=1,pad=1 -q --report @/r.json"
  "pipeline|run demo -q --pipeline $SRC/configs/pipelines/classifier.yaml --report @/r.json"
  "split_layers|run demo -q --set cores=2 --split layers --report @/r.json"
  "split_batch|run $M/resnet18.onnx -q --set cores=2 --split batch --batch 2 --report @/r.json"
  "generate|run $LLM -q --generate 16:4 --report @/r.json"
  "serve|serve $OUT/scenario.yaml -q --report @/r.json"
  "exec|exec $SRC/tests/programs/bank_conflict.s -q --report @/r.json"
)
for n in resnet18 mobilenet_v2 resnet50; do
  [ -f $M/$n.onnx ] && cases+=("${n}|run $M/$n.onnx -q --report @/r.json")
done
[ -f $M/resnet18.onnx ] && cases+=("resnet18_int8acc|run $M/resnet18.onnx -q --precision int8 --calibration-samples 1 --accuracy --report @/r.json")
[ -f $M/mobilenet_v2.onnx ] && cases+=("mobilenet_func|run $M/mobilenet_v2.onnx -q --functional --report @/r.json")
[ -f $M/bert_small_dyn.onnx ] && cases+=("bert_dynamic|run $M/bert_small_dyn.onnx -q --dynamic seq=32,64 --requests $OUT/req2.csv --compile-ms-per-layer 2 --report @/r.json")
fail=0
for c in "${cases[@]}"; do
  name=${c%%|*}; cmd=${c#*|}
  for side in base new; do
    bin=$BASE; [ $side = new ] && bin=$NEW
    d="$OUT/$side/$name"; mkdir -p "$d"
    (cd "$d" && $bin ${cmd//@/$d} > stdout.txt 2> stderr.txt; echo $? > rc)
    for j in "$d"/*.json; do
      [ -f "$j" ] || continue
      sed -i -E 's/"([a-z_]*seconds)": [0-9.e+-]+/"\1": 0/g; s/"version": "[^"]*"/"version": "V"/; s#'"$d"'#DIR#g' "$j"
    done
    sed -i -E 's/in [0-9.]+ s$/in T s/; s/^host time .*$/host time T/; s#'"$d"'#DIR#g' "$d"/stdout.txt "$d"/stderr.txt
  done
  if diff -r "$OUT/base/$name" "$OUT/new/$name" > "$OUT/$name.diff"; then
    echo "same      $name (rc $(cat $OUT/base/$name/rc))"
    rm "$OUT/$name.diff"
  else
    echo "DIFFERENT $name"; fail=1
  fi
done
# diff of two reports, and a sweep's results
for side in base new; do
  bin=$BASE; [ $side = new ] && bin=$NEW
  $bin diff "$OUT/$side/demo/r.json" "$OUT/$side/conv_energy/r.json" --top all 2>&1 | sed "s#$OUT/$side#DIR#g" > "$OUT/$side/diff.txt"
  $bin diff "$OUT/$side/gemm/r.json" "$OUT/$side/pipeline/r.json" 2>&1 | sed "s#$OUT/$side#DIR#g" >> "$OUT/$side/diff.txt"
  (cd "$OUT" && $bin sweep "$OUT/sweep.yaml" -j 1 -o "$OUT/$side/sweep" > /dev/null 2>&1; echo "sweep rc $?" >> "$OUT/$side/diff.txt")
  cut -d, -f1-400 "$OUT/$side/sweep/results.csv" >> "$OUT/$side/diff.txt" 2>&1
  sed -E 's/"(wall_seconds)": [0-9.e+-]+/"\1": T/g' "$OUT/$side/sweep/results.jsonl" >> "$OUT/$side/diff.txt" 2>&1
done
if diff "$OUT/base/diff.txt" "$OUT/new/diff.txt" > "$OUT/diff_sweep.diff"; then echo "same      diff+sweep"; else echo "DIFFERENT diff+sweep"; fail=1; fi
exit $fail
