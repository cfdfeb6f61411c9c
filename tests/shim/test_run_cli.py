"""`torchport run` end to end: the unmodified CUDA-only training script, on the CPU target.

Each test is one fresh interpreter (that is what users run). The emulated-npu twins are
in test_emulated_npu.py.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest

from shim_helpers import FIXTURE_SCRIPT, ROOT, fixture_line, run_cli
from clean_env import clean_env

LOSS = re.compile(r"^step (\d+) loss (\d+\.\d+)$", re.M)


def _no_accelerator_here() -> bool:
    from torchport import backends

    return not any(s.is_accelerator and s.probe() for s in backends.specs())


def _losses(stdout: str) -> list[float]:
    return [float(m.group(2)) for m in LOSS.finditer(stdout)]


@pytest.mark.skipif(not _no_accelerator_here(), reason="checks the no-accelerator path")
def test_cuda_script_trains_on_cpu_with_report(tmp_path):
    report = tmp_path / "redirects.json"
    ckpt = tmp_path / "ckpt.pt"
    proc = run_cli(["run", "--report", "json", "--report-file", str(report), str(FIXTURE_SCRIPT),
                    "--steps", "6", "--checkpoint", str(ckpt)])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "done" in out and f"reloaded checkpoint step 6" in out and ckpt.exists()
    losses = _losses(out)
    assert len(losses) == 6 and all(l == l and l < 10 for l in losses)  # finite, real numbers
    # one loud warning, no more (torch's own FutureWarnings about torch.cuda.amp are the script's business)
    # (torchport's own warnings speak the CLI vocabulary: `torchport: warning: ...`, not Python's `file:0: Category:`)
    assert proc.stderr.count("torchport: warning: no accelerator found") == 1, proc.stderr
    assert "CPUFallbackWarning" not in proc.stderr, proc.stderr

    doc = json.loads(report.read_text())
    assert doc["target"] == "cpu" and doc["cpu_fallback"] is True
    rec = {r["api"]: r for r in doc["redirects"]}
    script = FIXTURE_SCRIPT.name
    expect = {
        "torch.nn.Module.cuda": ("model = model.cuda()", 1),
        "torch.Tensor.cuda": ("images = images.cuda(non_blocking=True)", 6),
        "torch.cuda.amp.autocast": ("with autocast():", 6),
        "torch.cuda.amp.GradScaler": ("scaler = GradScaler()", 1),
        "torch.cuda.manual_seed_all": ("torch.cuda.manual_seed_all(args.seed)", 1),
        "torch.cuda.synchronize": ("torch.cuda.synchronize()", 1),
        "torch.cuda.max_memory_allocated": ("torch.cuda.max_memory_allocated()", 1),
        "torch.cuda.reset_peak_memory_stats": ("torch.cuda.reset_peak_memory_stats()", 1),
        "torch.utils.data.DataLoader": ("return DataLoader(", 1),
        "torch.load": ('map_location="cuda:0"', 1),
        "torch.nn.Module.to": ('TinyCNN().to(torch.device("cuda:0"))', 1),
        "torch.cuda.is_available": ('device = "cuda" if torch.cuda.is_available() else "cpu"', 1),
    }
    for api, (snippet, count) in expect.items():
        assert api in rec, f"{api} missing from the report: {sorted(rec)}"
        assert rec[api]["count"] == count, (api, rec[api])
        assert rec[api]["first_call_site"].endswith(f"{script}:{fixture_line(snippet)}"), (api, rec[api])
    assert doc["total_redirects"] == sum(r["count"] for r in doc["redirects"])


def _invoke(args, monkeypatch=None):
    """Run the ``torchport`` CLI in this process (fast: no new interpreter, torch already imported)."""
    from typer.testing import CliRunner

    from torchport.cli.main import app

    return CliRunner().invoke(app, args, catch_exceptions=False)


def test_printed_report_and_data_parallel():
    result = _invoke(["run", "--device", "cpu", str(FIXTURE_SCRIPT), "--steps", "2", "--data-parallel"])
    assert result.exit_code == 0, result.output
    assert len(_losses(result.stdout)) == 2 and "done" in result.stdout
    err = result.stderr
    assert "torchport shim: CUDA calls redirected to cpu" in err
    assert "torch.nn.DataParallel" in err and "torch.Tensor.cuda" in err
    assert "note: nn.DataParallel is not supported on cpu" in err
    assert "NO ACCELERATOR" not in err  # --device cpu was asked for: not a fallback


@pytest.mark.skipif(not _no_accelerator_here(), reason="checks the no-accelerator path")
def test_require_accelerator_fails_clearly(monkeypatch):
    result = _invoke(["run", "--require-accelerator", str(FIXTURE_SCRIPT), "--steps", "1"])
    assert result.exit_code == 7  # ExitCode.NO_ACCELERATOR, as in every verb
    assert "require-accelerator" in result.stderr and "torchport doctor" in result.stderr
    assert "step 0" not in result.stdout  # the script never ran
    monkeypatch.setenv("TORCHPORT_REQUIRE_ACCELERATOR", "1")
    assert _invoke(["run", str(FIXTURE_SCRIPT), "--steps", "1"]).exit_code == 7
    assert _invoke(["run", "--allow-cpu", "--report", "none", str(FIXTURE_SCRIPT), "--steps", "1"]).exit_code == 0


def test_arguments_pass_through_and_exit_codes(tmp_path):
    script = tmp_path / "echo_args.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        import torch
        print(json.dumps({"argv": sys.argv[1:], "name": __name__, "dev": str(torch.zeros(1, device="cuda").device)}))
        sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
    """))
    args = ["--device", "cuda:0", "--report", "x", "-m", "--unknown=1", "positional", "7"]
    result = _invoke(["run", "--report", "none", "--device", "cpu", str(script), *args])
    assert result.exit_code == 7  # the script's own exit code
    assert json.loads(result.stdout.splitlines()[0]) == {"argv": args, "name": "__main__", "dev": "cpu"}
    assert "torchport shim" not in result.stderr  # --report none
    missing = _invoke(["run", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2 and "script not found" in missing.stderr
    bad = _invoke(["run", "--device", "tpu", str(script)])
    assert bad.exit_code == 2 and "unknown backend" in bad.stderr
    crash = tmp_path / "crash.py"
    crash.write_text("import torch\ntorch.ones(1).cuda()\nraise ValueError('boom')\n")
    result = _invoke(["run", "--device", "cpu", str(crash)])
    assert result.exit_code == 1 and "ValueError: boom" in result.stderr
    assert "torch.Tensor.cuda" in result.stderr  # the report still comes out after a crash


def test_module_mode_and_json_alias(tmp_path, monkeypatch):
    pkg = tmp_path / "mytrain"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(textwrap.dedent("""
        import sys
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.ones(2).cuda()
        print("ran", sys.argv[1:], x.device.type)
        raise SystemExit(0)
    """))
    out = tmp_path / "r.json"
    monkeypatch.chdir(tmp_path)
    result = _invoke(["run", "--device", "cpu", "--json", str(out), "-m", "mytrain", "--lr", "0.1"])
    assert result.exit_code == 0, result.output
    assert "ran ['--lr', '0.1'] cpu" in result.stdout
    doc = json.loads(out.read_text())
    site = {r["api"]: r["first_call_site"] for r in doc["redirects"]}
    assert site["torch.Tensor.cuda"].endswith("__main__.py:5")
    assert site["torch.cuda.is_available"].endswith("__main__.py:4")
    assert _invoke(["run", "-m", "no_such_module_here"]).exit_code == 2


def test_import_torchport_auto(tmp_path):
    script = tmp_path / "legacy.py"
    script.write_text(textwrap.dedent("""
        import torchport.auto  # noqa: F401
        import torch
        net = torch.nn.Linear(2, 2).cuda()
        print("on", next(net.parameters()).device.type, torch.cuda.is_available())
    """))
    report = tmp_path / "auto.json"
    import subprocess

    env = clean_env()
    env.update(TORCHPORT_DEVICE="cpu", TORCHPORT_SHIM_REPORT=str(report))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "on cpu False" in proc.stdout
    doc = json.loads(report.read_text())
    assert [r["first_call_site"] for r in doc["redirects"] if r["api"] == "torch.nn.Module.cuda"][0].endswith("legacy.py:4")
