#!/usr/bin/env bash
# Hazard reports for the three corpus-style scripts and the reference trainer (tinycnn, resnet18), on the CPU and
# on the emulated npu (issue 34 item 4). Writes $OUT/<name>-<device>.{json,log}; then prints the summary table.
# usage: bash benchmarks/hazard_corpus/run_all.sh [OUT]     (from the repository root; ~10 min on 2 cores)
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/hazard_corpus}
mkdir -p "$OUT"
TP=.venv/bin/torchport
.venv/bin/python -c "from torchport.data.synth import make_dataset; make_dataset('$OUT/data', classes=4, train_per_class=32, val_per_class=4, size=72)"
for dev in cpu npu; do
  if [ "$dev" = npu ]; then export TORCHPORT_EMULATE=npu; else unset TORCHPORT_EMULATE; fi
  for s in lm seg gan; do
    timeout 600 $TP run --device $dev --format none --hazards "$OUT/$s-$dev.json" benchmarks/hazard_corpus/$s.py \
        >"$OUT/$s-$dev.log" 2>&1
  done
  for m in tinycnn:32:16 resnet18:64:8; do
    IFS=: read -r model size bs <<<"$m"
    rm -rf "$OUT/run-$model-$dev"
    timeout 900 $TP run --device $dev --format none --hazards "$OUT/train-$model-$dev.json" --user-path src/torchport/train \
        -m torchport.train --data "$OUT/data" --model "$model" --image-size "$size" --batch-size "$bs" --max-steps 8 \
        --epochs 1 --workers 0 --run-dir "$OUT/run-$model-$dev" >"$OUT/train-$model-$dev.log" 2>&1
  done
done
.venv/bin/python benchmarks/hazard_corpus/summarize.py "$OUT"/*.json
