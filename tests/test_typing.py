"""Typing that checks (issue 32): type checkers see torchport's public names with their real signatures,
while ``import torchport`` stays lazy. ``mypy --strict`` on a user script passes, and fails on a misspelt
name or keyword (torch and the other heavy packages are treated as untyped: the check is about torchport)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import torchport

USER = '''\
import torch
import torchport
from torchport.runtime.device import device

target = torchport.select_device()
dev: torch.device = torchport.device()
amp = torchport.Amp("auto")
model = torch.nn.Linear(2, 2).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torchport.to_device(torch.zeros(2, 2))
with amp.autocast():
    loss = model(x).sum()
amp.backward(loss)
stepped: bool = amp.step(opt, clip_grad_norm=1.0)
kw = torchport.loader_kwargs(seed=0)
torchport.seed_everything(0)
stats = torchport.memory_stats()
ddp = torchport.wrap_ddp(model)
r: int = torchport.rank()
main: bool = torchport.is_main_process()
cur = torchport.current()
print(cur.type, cur.index, cur.is_accelerator, torchport.__version__, device())
torchport.tune(cudnn_benchmark=True)
'''
BAD = '''\
import torchport

amp = torchport.Amp(precison="bf16")
torchport.no_such_function()
'''
CONFIG = '''\
[mypy]
strict = True
follow_imports = silent
[mypy-torch.*,torchvision.*,numpy.*,libcst.*,typer.*,rich.*,click.*,fsspec.*,s3fs.*,PIL.*,yaml.*,filelock.*]
follow_imports = skip
ignore_missing_imports = True
'''


def _mypy(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess:
    (tmp_path / name).write_text(text)
    (tmp_path / "mypy.ini").write_text(CONFIG.replace("[mypy]\n", f"[mypy]\ncache_dir = {tmp_path / 'cache'}\n", 1))
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), name],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_mypy_strict_accepts_the_public_api_and_catches_typos(tmp_path):
    good = _mypy(tmp_path, "user.py", USER)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = _mypy(tmp_path, "bad.py", BAD)
    assert bad.returncode == 1, bad.stdout
    assert 'Unexpected keyword argument "precison" for "Amp"' in bad.stdout
    assert 'Module has no attribute "no_such_function"' in bad.stdout


def test_type_checkers_see_exactly_the_lazy_exports():
    tree = ast.parse(Path(torchport.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
                 and any(isinstance(b, ast.ImportFrom) and b.module.startswith("torchport.runtime") for b in n.body))
    seen = {a.asname: f"{b.module}" for b in block.body if isinstance(b, ast.ImportFrom) for a in b.names}
    # a module export (``torchport.compat``): ``import torchport.shim.compat as compat``
    seen |= {a.asname: a.name for b in block.body if isinstance(b, ast.Import) for a in b.names}
    assert all(a.name == a.asname for b in block.body if isinstance(b, ast.ImportFrom) for a in b.names)
    assert seen == dict(torchport._EXPORTS), "the TYPE_CHECKING imports and _EXPORTS disagree"
    listed = next(b for b in block.body if isinstance(b, ast.Assign))
    assert sorted(ast.literal_eval(listed.value)) == sorted(torchport.__all__)


def test_import_torchport_stays_lazy():
    code = "import sys, torchport; assert 'torch' not in sys.modules; print(torchport.Amp.__name__)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "Amp", res.stderr
