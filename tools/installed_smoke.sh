#!/usr/bin/env bash
# The package as a user gets it: build the wheel (`pip install .`, NOT editable), install it into fresh
# venvs, and run the README's commands from a folder outside the source tree -- so a file missing from the
# wheel, an import that only works from src/, or a dependency left out of an extra fails CI.
#
#   tools/installed_smoke.sh [PYTHON]     (PYTHON: an interpreter with the [train] stack installed,
#                                          e.g. .ci/run's .venv/bin/python; default: python3)
#
# The sdist too (`python -m build --sdist`): it must carry the tests, the docs and what setup.py ships
# (src/torchport-emulate.pth), and it is what the light install below installs -- pip builds it into a
# wheel in isolation, as a user installing torchport from source would.
#
# Two installs, both fresh venvs:
#   1. light: `pip install torchport-X.tar.gz` (the sdist; typer, rich, LibCST from the index / local wheel
#      store): scan, fix, rules, explain, --version; every other verb must say in one line what to install
#      (exit 2).
#   2. train: the same wheel, its [train] dependencies REUSED from PYTHON's environment instead of a fresh
#      multi-GB torch download: the venv's own site-packages comes first (the wheel), then PYTHON's
#      site-packages as a plain path entry (a .pth line: that folder's own .pth files -- an editable
#      torchport -- are not run). `pip install --no-deps` installs the wheel; an import check then proves
#      torchport comes from the venv, not from the source tree. Honest limit: the versions of torch & co
#      are PYTHON's, not a fresh resolve of the [train] extra.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:-python3}
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")";; *) PY=$(command -v "$PY");; esac
WORK=$(mktemp -d "${TMPDIR:-/tmp}/torchport-installed.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
say() { printf '\n== %s\n' "$*" >&2; }
fail() { echo "installed_smoke: FAILED: $*" >&2; exit 1; }

say "build the wheel (pip wheel: an isolated build with setuptools>=77)"
"$PY" -m pip wheel -q --no-deps -w "$WORK/dist" "$SRC" >/dev/null
WHEEL=$(ls "$WORK"/dist/torchport-*.whl)
"$PY" - "$WHEEL" <<'EOF' || fail "the wheel lacks files the package needs"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["torchport/py.typed", "torchport/data/_native.c", "torchport-emulate.pth", "torchport_emulate_boot.py"]
missing = [n for n in need if n not in names] + ([] if any(n.startswith("torchport/emulate/_csrc/") for n in names)
                                                  else ["torchport/emulate/_csrc/*.cpp"])
lic = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
assert not missing, missing
assert lic, "LICENSE not in the wheel's .dist-info/licenses"
EOF

say "build the sdist (python -m build --sdist, with $PY's setuptools: no download)"
"$PY" -m build --sdist --no-isolation -o "$WORK/sdist" "$SRC" >/dev/null 2>&1 || fail "the sdist does not build"
SDIST=$(ls "$WORK"/sdist/torchport-*.tar.gz)
"$PY" - "$SDIST" "$SRC" <<'EOF' || fail "the sdist lacks files a packager needs"
import subprocess, sys, tarfile
names = {n.split("/", 1)[1] for n in tarfile.open(sys.argv[1]).getnames() if "/" in n}
tracked = subprocess.run(["git", "-C", sys.argv[2], "ls-files", "tests", "docs"], capture_output=True, text=True).stdout
want = {n for n in tracked.splitlines() if n} or {"tests/conftest.py", "docs/cli.md"}
missing = sorted(want - names) + [n for n in ("src/torchport-emulate.pth", "setup.py", "LICENSE", ".pre-commit-hooks.yaml",
                                               "src/torchport/py.typed") if n not in names]
assert not missing, f"missing from the sdist: {missing[:10]} ({len(missing)} in all)"
assert not [n for n in names if "__pycache__" in n or ".torchport_cache" in n], "build litter in the sdist"
EOF

mkdir -p "$WORK/user" && cd "$WORK/user"          # outside the source tree from here on
printf 'import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\nprint("ran on", next(model.parameters()).device)\n' > train.py

say "1. light install: pip install the sdist"
"$PY" -m venv "$WORK/light"
T0=$(date +%s)
"$WORK/light/bin/python" -m pip install -q "$SDIST"
echo "light install (from the sdist): $(( $(date +%s) - T0 )) s" >&2
L="$WORK/light/bin/torchport"
"$WORK/light/bin/python" -c "import torch" 2>/dev/null && fail "the light install pulled torch in"
"$L" --version
set +e
"$L" scan train.py --output-format concise; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "light: scan exit $rc, expected 1 (a finding)"
"$L" fix train.py --check >/dev/null && fail "light: fix --check found nothing"
"$L" rules >/dev/null
"$L" explain TP101 >/dev/null
for verb in train doctor "run train.py" check; do
  set +e
  out=$("$L" $verb 2>&1); rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "light: torchport $verb exit $rc, expected 2: $out"
  case "$out" in *"pip install 'torchport[train]'"*) ;; *) fail "light: torchport $verb did not say what to install: $out";; esac
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "light: torchport $verb printed more than one line: $out"
done

say "2. train install: the wheel + [train] dependencies reused from $PY"
"$PY" -m venv "$WORK/full"
"$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$WORK/full/lib/reuse.txt"
SITE=$("$WORK/full/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp "$WORK/full/lib/reuse.txt" "$SITE/zz-reuse-train-deps.pth"
"$WORK/full/bin/python" -m pip install -q --no-deps "$WHEEL"
F="$WORK/full/bin/torchport"
"$WORK/full/bin/python" - "$SITE" <<'EOF' || fail "torchport is not imported from the installed wheel"
import sys, torchport
assert torchport.__file__.startswith(sys.argv[1]), torchport.__file__
EOF
export TORCHPORT_CACHE="${TORCHPORT_CACHE:-$HOME/.cache/torchport}"
"$F" --version
"$F" doctor >/dev/null
"$F" rules >/dev/null
set +e; "$F" scan train.py >/dev/null; rc=$?; set -e
[ "$rc" -eq 1 ] || fail "scan exit $rc"
"$F" fix train.py --write >/dev/null
"$F" run train.py --format none
"$F" data synth data --num-classes 2 --per-class 8 --val-per-class 2 >/dev/null
"$F" data pack data shards --mode jpeg >/dev/null
"$F" data verify shards >/dev/null
"$F" data inspect shards >/dev/null
"$F" train --data data --epochs 1 --batch-size 8 --image-size 32 --workers 0 --run-dir run >/dev/null
test -f run/summary.json || fail "train wrote no summary.json"
"$F" check --list >/dev/null
"$F" profile --preset tiny --device cpu >/dev/null
"$F" bench --preset tiny --device cpu >/dev/null
say "installed package: every command ran from $WORK/user"
