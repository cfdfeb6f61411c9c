"""``torchport fix --emit torch``: fixed code that needs only torch (issue 22, item 2).

Per construct the exact rewrite; the rewrite run on this CPU-only host (a CUDA wheel without a GPU,
where ``torch.accelerator.set_device_index(0)`` and ``synchronize()`` raise) and on the emulated npu;
idempotence (twice = once, also across ``--emit`` choices); config and CLI; and a subprocess run of a
fixed training script with torchport made unimportable.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchport.migrate import fix_source, scan_source
from torchport.migrate.runner import Options
from clean_env import clean_env

DEVICE = 'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'
AVAILABLE = "torch.accelerator.is_available()"


def _torch(src: str, **kw) -> str:
    return fix_source(textwrap.dedent(src), emit="torch", **kw)


# (CUDA line, the line --emit torch writes for it); each runs after `import torch`
CONSTRUCTS = [
    ("x = torch.zeros(2).cuda()", "x = torch.zeros(2).to(DEVICE)"),
    ("ok = torch.cuda.is_available()", f"ok = {AVAILABLE}"),
    ("n = torch.cuda.device_count()", "n = max(1, torch.accelerator.device_count())"),
    ("i = torch.cuda.current_device()",
     f"i = (torch.accelerator.current_device_index() if {AVAILABLE} else 0)"),
    ("d = torch.device('cuda' if torch.cuda.is_available() else 'cpu')", "d = DEVICE"),
    ("t = 'cuda' if torch.cuda.is_available() else 'cpu'", "t = DEVICE.type"),
    ("a = torch.cuda.amp.autocast()", "a = torch.amp.autocast(DEVICE.type)"),
    ("s = torch.cuda.amp.GradScaler()", "s = torch.amp.GradScaler(DEVICE.type)"),
    ("s = torch.amp.GradScaler()", "s = torch.amp.GradScaler(DEVICE.type)"),
    ("m = torch.cuda.memory_allocated()",
     f"m = (torch.accelerator.memory_allocated() if {AVAILABLE} else 0)"),
    ("p = torch.cuda.max_memory_allocated()",
     f"p = (torch.accelerator.max_memory_allocated() if {AVAILABLE} else 0)"),
    ("torch.cuda.synchronize()", f"if {AVAILABLE}:\n    torch.accelerator.synchronize()"),
    ("torch.cuda.empty_cache()", f"if {AVAILABLE}:\n    torch.accelerator.empty_cache()"),
    ("torch.cuda.reset_peak_memory_stats()", f"if {AVAILABLE}:\n    torch.accelerator.reset_peak_memory_stats()"),
    ("Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor",
     f"Tensor = torch.get_device_module(DEVICE).FloatTensor if {AVAILABLE} else torch.FloatTensor"),
]


@pytest.mark.parametrize("cuda, expected", CONSTRUCTS, ids=[c[0][:40] for c in CONSTRUCTS])
def test_each_construct_is_written_in_torch_core(cuda, expected):
    out = _torch(f"import torch\n\n{cuda}\n")
    assert "torchport" not in out, out
    body = out.split("\n", 1)[1]
    uses_device = "DEVICE" in expected
    assert body == (f"\n{DEVICE}\n\n" if uses_device else "\n") + expected + "\n", out


def test_the_rewrites_run_on_a_host_without_an_accelerator():
    """Every construct above, fixed, runs here (torch's CUDA wheel, no GPU): the calls that raise without an
    accelerator are guarded, the device is the CPU and the device count is 1 (as the torchport runtime says)."""
    import torch

    src = "import torch\n\n" + "\n".join(c for c, _ in CONSTRUCTS) + "\ntorch.cuda.set_device(0)\n"
    out = _torch(src)
    assert "torchport" not in out
    scope: dict = {}
    exec(compile(out, "<fixed>", "exec"), scope)
    if not torch.accelerator.is_available():
        assert scope["DEVICE"] == torch.device("cpu") and scope["n"] == 1 and scope["i"] == 0
        assert scope["x"].device.type == "cpu" and scope["m"] == 0
        assert scope["Tensor"] is torch.FloatTensor


@pytest.mark.emulated_npu(devices=2)
def test_the_rewrites_follow_the_emulated_npu(emulated_npu):
    """Under the emulated npu torch.accelerator says npu: the same fixed code runs there, on npu:1 after
    `set_device(1)`, with the npu's legacy tensor type.

    The emulator comes from the plugin's ``emulated_npu`` fixture: requesting it is what makes the plugin
    register the npu device guard before the session's first ``backward()``. A direct ``emulated()`` call
    here failed whenever an earlier test (tests/migrate/test_apex_fix.py, any cpu backward) had run first,
    since torch's autograd engine sizes its device queues once, at the first backward."""
    import torch

    src = ("import torch\n\ntorch.cuda.set_device(1)\nx = torch.zeros(2).cuda()\nn = torch.cuda.device_count()\n"
           "torch.cuda.synchronize()\ni = torch.cuda.current_device()\n"
           "Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\n"
           "with torch.cuda.amp.autocast():\n    y = torch.nn.Linear(2, 2).cuda()(x)\n")
    out = _torch(src)
    assert "torchport" not in out
    scope: dict = {}
    try:
        exec(compile(out, "<fixed>", "exec"), scope)
        assert scope["DEVICE"].type == "npu" and scope["n"] == 2 and scope["i"] == 1
        assert str(scope["x"].device) == "npu:1" and scope["y"].dtype == torch.float16
        assert scope["Tensor"] is torch.npu.FloatTensor
    finally:
        torch.accelerator.set_device_index(0)


SPAWN = """\
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(gpu, world):
    torch.cuda.set_device(gpu)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:23456", rank=gpu, world_size=world)
    model = DDP(torch.nn.Linear(2, 2).cuda(gpu), device_ids=[gpu], output_device=gpu)


if __name__ == "__main__":
    ngpus = torch.cuda.device_count()
    mp.spawn(worker, nprocs=ngpus, args=(ngpus,))
"""


def test_spawn_ddp_keeps_its_ids_where_an_accelerator_exists():
    out = _torch(SPAWN)
    assert "torchport" not in out and "from torch.nn.parallel import DistributedDataParallel as DDP" in out
    assert f"    if {AVAILABLE}:\n        torch.accelerator.set_device_index(gpu)\n" in out
    assert 'dist.init_process_group(dist.get_default_backend_for_device(DEVICE), init_method=' in out
    assert (f"DDP(torch.nn.Linear(2, 2).to(torch.device(DEVICE.type, gpu)), device_ids=[gpu] if {AVAILABLE} else "
            f"None, output_device=gpu if {AVAILABLE} else None)") in out
    assert "ngpus = max(1, torch.accelerator.device_count())" in out  # one rank on the CPU, not zero


def test_dist_backend_is_torchs_default_for_the_device():
    import torch
    import torch.distributed as dist

    assert dist.get_default_backend_for_device(torch.device("cpu")) == "gloo"
    out = _torch('import torch\nimport torch.distributed as dist\n\nb = "nccl"\n')
    assert out.endswith("b = dist.get_default_backend_for_device(DEVICE)\n"), out


def test_what_torch_lacks_stays_on_torchport_or_is_reported():
    # a statement inside a one-line suite cannot become an `if` statement: it stays on the runtime
    out = _torch("import torch\n\nif True: torch.cuda.synchronize()\n")
    assert "import torchport" in out and "if True: torchport.synchronize()" in out
    # bf16 "supported" has no torch-core spelling that means the same
    out = _torch("import torch\n\nok = torch.cuda.is_bf16_supported()\n", unsafe=True)
    assert 'torchport.current().backend.bf16_supported()' in out
    # cuDNN knobs: harmless off CUDA, so kept (reported, not rewritten to torchport.tune)
    from torchport.migrate.runner import analyze_text

    src = "import torch\n\ntorch.backends.cudnn.benchmark = True\nx = torch.zeros(1).cuda()\n"
    assert _torch(src).endswith("\ntorch.backends.cudnn.benchmark = True\nx = torch.zeros(1).to(DEVICE)\n")
    found = analyze_text(src, "x.py", Options(fix=True, emit="torch")).findings
    knob = [f for f in found if f.code == "TP120"]
    assert len(knob) == 1 and not knob[0].fixed and "kept by --emit torch" in knob[0].message


def test_a_file_that_imports_torchport_keeps_the_runtime():
    src = "import torch\nimport torchport\n\nx = torch.zeros(2).cuda()\n"
    assert _torch(src) == fix_source(src) == "import torch\nimport torchport\n\nx = torch.zeros(2).to(torchport.device())\n"


def test_a_file_written_against_torch_accelerator_keeps_torch_core():
    """The file's own style wins: what is left to fix in torch.accelerator code is lowered with either choice."""
    src = "import torch\n\nok = torch.accelerator.is_available()\nx = torch.zeros(2).cuda()\n"
    assert fix_source(src) == fix_source(src, emit="torch")
    assert fix_source(src).endswith("x = torch.zeros(2).to(DEVICE)\n")


def test_the_default_is_the_torchport_runtime():
    assert fix_source("import torch\n\nx = torch.zeros(2).cuda()\n").endswith("x = torch.zeros(2).to(torchport.device())\n")


def test_a_later_fix_reuses_the_device_line():
    once = _torch("import torch\n\nx = torch.zeros(2).cuda()\n")
    again = _torch(once + "y = torch.ones(2).cuda()\n")
    assert again.count("current_accelerator(") == 1 and again.endswith("y = torch.ones(2).to(DEVICE)\n"), again


def test_the_device_line_follows_an_import_inside_try():
    """PyTorch-GAN's clustergan imports torch inside `try:`; the device line must come after it."""
    src = "try:\n    import torch\nexcept ImportError:\n    raise\n\nx = torch.zeros(1).cuda()\n"
    out = _torch(src)
    assert out.index("import torch") < out.index("DEVICE = torch.accelerator"), out
    scope: dict = {}
    exec(compile(out, "<fixed>", "exec"), scope)
    assert scope["x"].device == scope["DEVICE"]


def test_torch_under_an_alias_and_torch_not_imported():
    out = _torch("import torch as th\n\nx = th.zeros(1).cuda()\nth.cuda.synchronize()\n")
    assert out == ("import torch as th\n\n"
                   'DEVICE = th.accelerator.current_accelerator(check_available=True) or th.device("cpu")\n\n'
                   "x = th.zeros(1).to(DEVICE)\nif th.accelerator.is_available():\n    th.accelerator.synchronize()\n")
    out = _torch("from torch import nn\n\nm = nn.Linear(1, 1).cuda()\n")
    assert out.startswith("from torch import nn\nimport torch\n\nDEVICE = torch.accelerator."), out


def test_the_device_name_avoids_one_the_file_uses():
    out = _torch("import torch\n\nDEVICE = 3\nx = torch.zeros(2).cuda()\n")
    assert "TORCH_DEVICE = torch.accelerator.current_accelerator(" in out and ".to(TORCH_DEVICE)" in out
    assert "DEVICE = 3" in out


CORPUS = sorted((Path(__file__).parent / "equivalence").glob("*.py"))


# the `cuda` flag keeps the fixed text in the scanner's prefilter (examples/dcgan's `--cuda`)
KNOBS = ("import torch\nimport torch.backends.cudnn as cudnn\n\ncuda = True\ncudnn.benchmark = True\n"
         "x = torch.zeros(1).cuda()\n")


# no `cuda` is left after the fix: a second pass must still treat the "mps" tests as special cases
MPS_GUARD = """\
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
with torch.autocast(device.type if device.type != "mps" else "cpu"):
    pass
if device.type == "mps":
    torch.mps.synchronize()
"""
SOURCES = {"spawn": SPAWN, "knobs": KNOBS, "mps": MPS_GUARD}


#: what torch lacks stays on the runtime: apex's O1 forward (autocast inside, float32 outputs) has no torch call
#: runtime calls --emit torch keeps because torch has no equivalent (each says so in its finding's message)
RUNTIME_KEPT = {"modelzoo_apex": ("import torchport\n", "torchport.autocast_forward("),
                # a one-device DataParallel for a backend without one (TP303)
                "data_parallel_single": ("import torchport\n", "torchport.compat.DataParallel(")}


@pytest.mark.parametrize("path", [*CORPUS, *SOURCES], ids=[p.stem for p in CORPUS] + list(SOURCES))
def test_idempotent_and_stable_across_emit_choices(path):
    src = SOURCES[path] if isinstance(path, str) else path.read_text(encoding="utf-8")
    once = fix_source(src, emit="torch")
    rest = once.replace("torchport run", "")
    for spelling in RUNTIME_KEPT.get(getattr(path, "stem", path), ()):
        rest = rest.replace(spelling, "")
    assert once != src and "torchport" not in rest
    assert fix_source(once, emit="torch") == once
    assert fix_source(once) == once            # a torch-only file needs nothing from a torchport fix either
    assert not [f for f in scan_source(once).findings if f.code.startswith(("TP1", "TP2", "TP3"))
                and f.code != "TP120"], scan_source(once).findings


def test_config_emit_and_cli_flag(tmp_path):
    from torchport.errors import ConfigError
    from torchport.migrate.config import read_config

    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.torchport]\nemit = "torch"\n', encoding="utf-8")
    assert read_config(cfg).emit == "torch"
    cfg.write_text('[tool.torchport]\nemit = "jax"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="emit must be one of 'torchport', 'torch'"):
        read_config(cfg)
    with pytest.raises(ValueError, match="emit='jax'"):
        Options(emit="jax")

    from typer.testing import CliRunner

    from torchport.cli.main import app

    script = tmp_path / "train.py"
    script.write_text("import torch\n\nx = torch.zeros(2).cuda()\n", encoding="utf-8")
    cfg.write_text('[tool.torchport]\nemit = "torch"\n', encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(app, ["fix", str(script)])
    assert "+x = torch.zeros(2).to(DEVICE)" in res.output, res.output
    res = runner.invoke(app, ["fix", str(script), "--emit", "torchport"])   # the flag wins over the file
    assert "+x = torch.zeros(2).to(torchport.device())" in res.output, res.output
    res = runner.invoke(app, ["fix", str(script), "--emit", "jax"])
    assert res.exit_code == 2 and "--emit jax: choose one of torchport, torch" in res.output


TRAIN = """\
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Linear(4, 2).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()
x, y = torch.randn(16, 4).cuda(), torch.randint(0, 2, (16,)).cuda()
for step in range(3):
    with torch.cuda.amp.autocast():
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    torch.cuda.synchronize()
torch.save(model.state_dict(), "ckpt.pt")
model.load_state_dict(torch.load("ckpt.pt", map_location="cuda:0"))
print(f"device={next(model.parameters()).device} loss={loss.item():.6f} n={torch.cuda.device_count()}")
"""


@pytest.mark.slow
@pytest.mark.parametrize("emulate", ["", "npu"])
def test_a_torch_only_fixed_script_trains_without_torchport(tmp_path, emulate):
    """The fixed script trains with `import torchport` made to fail (on the CPU), and on the emulated npu
    (where only torch's backend autoload loads the emulator, never the script)."""
    script = tmp_path / "train.py"
    script.write_text(_torch(TRAIN), encoding="utf-8")
    assert "torchport" not in script.read_text(encoding="utf-8")
    env = clean_env()
    if emulate:
        env["TORCHPORT_EMULATE"] = emulate
    else:  # a `torchport` package that cannot be imported, first on the path
        blocker = tmp_path / "block" / "torchport"
        blocker.mkdir(parents=True)
        (blocker / "__init__.py").write_text("raise ImportError('torchport imported')\n", encoding="utf-8")
        env.update(PYTHONPATH=str(blocker.parent), TORCH_DEVICE_BACKEND_AUTOLOAD="0", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.strip().splitlines()[-1]
    if emulate:
        assert line.startswith("device=npu:0 loss=") and line.endswith(" n=1"), line
    else:
        assert line.startswith("device=cpu loss=") and line.endswith(" n=1"), line


def test_messages_recommend_what_emit_torch_writes():
    """With --emit torch a finding's message names torch core's spelling, never torchport.device()."""
    from torchport.migrate.runner import Options, run_source

    src = 'import torch\nx = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\nd = "cuda"\n'
    torch_only = run_source(src, "t.py", Options(fix=True, emit="torch")).findings
    default = run_source(src, "t.py", Options(fix=True)).findings
    assert any("torchport.device()" in f.message for f in default)
    assert not any("torchport.device()" in f.message or "torchport.current()" in f.message for f in torch_only)
    assert any("torch.accelerator.current_accelerator()" in f.message for f in torch_only)
