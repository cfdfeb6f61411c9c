#!/usr/bin/env bash
# Download the torch-npu wheel once into a cache directory, for the emulator's conformance test
# (tests/emulate/test_emu_conformance.py parses its pure-Python files; nothing is installed or imported).
#
# usage: tools/fetch_torch_npu_wheel.sh [CACHE_DIR]
#   CACHE_DIR           default: $TORCHPORT_TORCH_NPU_WHEEL_DIR, else ~/.cache/torchport/wheels
#   TORCH_NPU_VERSION   default: 2.14.0 (the release paired with torch 2.14)
#   PIP                 pip command to use (default: "$PYTHON -m pip")
#   PYTHON              default: <repo>/.venv/bin/python, else python3
#
# Exits 1 when the wheel cannot be had (CI's install step fails with it); the conformance tests need it
# (a developer may opt out with TORCHPORT_SKIP_CONFORMANCE=1).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${1:-${TORCHPORT_TORCH_NPU_WHEEL_DIR:-$HOME/.cache/torchport/wheels}}"
VERSION="${TORCH_NPU_VERSION:-2.14.0}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3 || true)"

mkdir -p "$CACHE" || { echo "fetch_torch_npu_wheel: ERROR: cannot create $CACHE" >&2; exit 1; }
if ls "$CACHE"/torch_npu-"$VERSION"-*.whl >/dev/null 2>&1; then
    echo "fetch_torch_npu_wheel: cached: $(ls "$CACHE"/torch_npu-"$VERSION"-*.whl | head -1)"
    exit 0
fi
if [ -z "${PIP:-}" ]; then
    if [ -z "$PY" ]; then
        echo "fetch_torch_npu_wheel: ERROR: no python found to run pip" >&2
        exit 1
    fi
    PIP="$PY -m pip"
fi
# The wheel is platform-specific but its Python files are what we read, so any platform will do:
# first the one matching this interpreter, then the manylinux x86_64 / cp311 build.
if timeout 600 $PIP download --quiet --no-deps --only-binary=:all: "torch-npu==$VERSION" -d "$CACHE" \
   || timeout 600 $PIP download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --python-version 3.11 "torch-npu==$VERSION" -d "$CACHE"; then
    ls "$CACHE"/torch_npu-"$VERSION"-*.whl >/dev/null 2>&1 \
        || { echo "fetch_torch_npu_wheel: ERROR: pip reported success but no wheel is in $CACHE" >&2; exit 1; }
    echo "fetch_torch_npu_wheel: downloaded $(ls "$CACHE"/torch_npu-"$VERSION"-*.whl 2>/dev/null | head -1)"
else
    echo "fetch_torch_npu_wheel: ERROR: could not download torch-npu==$VERSION (offline?);" \
         "tests/emulate/test_emu_conformance.py needs it" >&2
    exit 1
fi
exit 0
