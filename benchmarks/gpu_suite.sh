#!/usr/bin/env bash
# The one prepared GPU check for a session that is lent a device machine (see DEVELOPERS' guide).
# Run on the device machine from the repository root:  bash benchmarks/gpu_suite.sh
# Writes everything under ${OUT:-/tmp/gpu_suite}; every step runs even when an earlier one fails, and
# the script ends with a one-line summary per step. Budget: ~8 minutes on an H100/H200-class GPU.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_suite}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]" >"$OUT/install.log" 2>&1
TP=.venv/bin/torchport
declare -a SUMMARY

step() {   # step NAME COMMAND...: run, log to $OUT/NAME.log, remember the exit code
    local name=$1; shift
    local t0=$SECONDS
    "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    SUMMARY+=("$name: exit $rc in $((SECONDS - t0)) s")
}

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
.venv/bin/python -c "import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0))" \
    >"$OUT/torch.txt" 2>&1
# 1. the CUDA parametrisations and CUDA-only paths of the suite
step tests-cuda .venv/bin/python -m pytest -p no:cacheprovider -q -k "cuda" --timeout 300 tests
# 2. FP32 vs AMP bf16, ResNet-50 224^2, channels_last, batch 64 and 256
for bs in 64 256; do
    step "bench-bs$bs" "$TP" bench --preset resnet50-224 --batch-size "$bs" --precision fp32,bf16 --channels-last \
        --device cuda --require-accelerator --json "$OUT/bench-bs$bs.json" --png "$OUT/bench-bs$bs.png"
done
# 3. the readiness checks on cuda
step check "$TP" check --device cuda --require-accelerator --json "$OUT/check.json" -o "$OUT/check.html"
# 4. migration: the CUDA-only fixture script, unmodified under `torchport run`, and after `fix`
step run "$TP" run --device cuda --json "$OUT/run-report.json" tests/fixtures/cuda_train_script.py --steps 5
cp tests/fixtures/cuda_train_script.py "$OUT/fixed_script.py"
step fix "$TP" fix --write --unsafe-fixes "$OUT/fixed_script.py"
step fixed-run .venv/bin/python "$OUT/fixed_script.py" --steps 5

# 5. the CPU TF32 emulation (torchport.emulate.cuda_numerics) against this GPU's TF32: ulp distance per op and
#    rounding (rne/rna/rz); exits 1 when TF32 did not engage or the emulation is not closer than plain FP32
step tf32 .venv/bin/python benchmarks/tf32_vs_gpu.py --json "$OUT/tf32_vs_gpu.json"

printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
