"""The plain install is the migration tools: scan/fix never import torch, and the rest says what to install.

``pip install torchport`` brings typer, rich and LibCST only (the pre-commit hook's environment);
``torchport[train]`` adds torch and the rest. These tests run the CLI in a fresh interpreter: one
watching ``sys.modules``, one where the heavy packages cannot be imported at all (the light install,
simulated by an import hook), and read the packaging metadata.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "torchvision", "numpy", "PIL", "simplejpeg", "matplotlib", "yaml", "fsspec", "s3fs", "skimage")

#: a fresh interpreter where the heavy packages are missing, as after `pip install torchport`
LIGHT = textwrap.dedent(f"""
    import importlib.abc, json, sys
    HEAVY = {HEAVY!r}
    class Missing(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, Missing())
    from torchport.cli.main import main
    sys.argv = ["torchport", *sys.argv[1:]]
    try:
        main()
    except SystemExit as exc:
        sys.exit(exc.code)
""")


def _light(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "light.py"
    script.write_text(LIGHT)
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, input=stdin)


CUDA = "import torch\nx = torch.zeros(3).cuda()\n"


def test_scan_and_fix_never_import_torch(tmp_path):
    (tmp_path / "a.py").write_text(CUDA)
    probe = textwrap.dedent(f"""
        import json, sys
        from torchport.cli.main import main
        loaded = set()
        for argv in (["scan", "a.py"], ["fix", "a.py"], ["fix", "a.py", "--check"], ["rules"], ["explain", "TP101"]):
            sys.argv = ["torchport", *argv]
            try:
                main()
            except SystemExit:
                pass
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_migration_tools_work_without_the_heavy_packages(tmp_path):
    (tmp_path / "a.py").write_text(CUDA)
    res = _light(tmp_path, "scan", "a.py", "--output-format", "concise")
    assert res.returncode == 1, res.stderr
    assert res.stdout.startswith("a.py:2:5: TP101 ")
    res = _light(tmp_path, "fix", "-", "--write", stdin=CUDA)
    assert "x = torch.zeros(3).to(torchport.device())" in res.stdout, res.stderr
    assert _light(tmp_path, "--version").returncode == 0
    assert _light(tmp_path, "--help").returncode == 0


@pytest.mark.parametrize("argv, verb, extra", [
    (("train",), "train", "train"),
    (("run", "a.py"), "run", "train"),
    (("doctor",), "doctor", "train"),
    (("check",), "check", "train"),
    (("bench",), "bench", "train"),
    (("profile",), "profile", "train"),
    (("data", "synth", "out"), "data synth", "train"),
    (("data", "bench"), "data bench", "bench"),   # its photo set needs scikit-image: the bench extra (train too)
])
def test_other_verbs_say_what_to_install(tmp_path, argv, verb, extra):
    (tmp_path / "a.py").write_text(CUDA)
    res = _light(tmp_path, *argv)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"torchport {verb}: error: ")
    assert f"pip install 'torchport[{extra}]'" in lines[0]


def test_pytest_plugin_loads_without_torch(tmp_path):
    probe = LIGHT.split("from torchport.cli.main")[0] + "import torchport.emulate.pytest_plugin\nprint('ok')\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_packaging_metadata():
    project = _pyproject()["project"]
    deps = " ".join(project["dependencies"])
    for heavy in ("torch", "numpy", "pillow", "matplotlib"):
        assert heavy not in deps, f"{heavy} in the plain install: the pre-commit hook would install it"
    extras = project["optional-dependencies"]
    assert any(d.startswith("torch>=") for d in extras["train"]) and any(d.startswith("ninja") for d in extras["train"])
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    for name, url in project.get("urls", {}).items():    # none until the public address is settled; never a placeholder
        assert url.startswith("https://") and not any(p in url for p in ("example.", "TODO", "your-org")), (name, url)
    assert any(c.startswith("License ::") for c in project["classifiers"]) is False   # PEP 639: SPDX only
    assert "Programming Language :: Python :: 3" in project["classifiers"]
    assert set(extras["train"]) | set(extras["s3"]) <= set(extras["dev"]), "dev (what CI installs) lacks a runtime dep"
    for name, group in extras.items():      # TorchFix pins libcst < 1.6: never in this environment's extras
        assert not any(d.lower().startswith("torchfix") for d in group), name
    build = _pyproject()["build-system"]["requires"]
    assert any(r.startswith("setuptools>=77") for r in build), "SPDX license + license-files need setuptools 77"


def test_pre_commit_hooks_use_the_light_install():
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "language: python" in hooks and "entry: torchport scan" in hooks
    assert "gigabytes" not in hooks and "no torch" in hooks
