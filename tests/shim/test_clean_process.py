"""Shim install / uninstall in a clean process (nothing imported or patched beforehand): uninstall
restores every attribute of torch it could have touched, identically; so does a second round."""

from __future__ import annotations

import json
import subprocess
import sys

from clean_env import clean_env

SCRIPT = r'''
import json, sys
import torch
import torch.distributed, torch.amp, torch.nn, torch.nn.parallel, torch.utils.data, torch.backends.cudnn

MODULES = {"torch": torch, "torch.cuda": torch.cuda, "torch.cuda.amp": torch.cuda.amp, "torch.amp": torch.amp,
           "torch.distributed": torch.distributed, "torch.nn.parallel": torch.nn.parallel,
           "torch.utils.data": torch.utils.data, "torch.backends.cudnn": torch.backends.cudnn}
CLASSES = {"Tensor": torch.Tensor, "Module": torch.nn.Module, "DataParallel": torch.nn.DataParallel,
           "DistributedDataParallel": torch.nn.parallel.DistributedDataParallel,
           "DataLoader": torch.utils.data.DataLoader, "GradScaler": torch.amp.GradScaler}

def snapshot():
    out = {}
    for name, mod in MODULES.items():
        for k, v in list(vars(mod).items()):
            out[f"{name}.{k}"] = id(v)
    for name, cls in CLASSES.items():
        for k, v in list(vars(cls).items()):
            out[f"{name}.{k}"] = id(v)
    return out

import torchport                      # importing torchport patches nothing
before = snapshot()
assert snapshot() == before
import torchport.shim as shim
assert snapshot() == before, "importing torchport.shim patched torch"
changed = []
for round_ in range(2):
    s = shim.install(warn=False)
    during = snapshot()
    changed.append(sorted(k for k in before if during.get(k) != before[k]))
    shim.uninstall()
    after = snapshot()
    diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if diff:
        print(json.dumps({"round": round_, "not_restored": diff}))
        sys.exit(1)
    assert shim.active() is None
print(json.dumps({"patched": changed[0], "ok": True}))
'''


def test_install_uninstall_restores_everything_in_a_clean_process():
    env = clean_env()
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["ok"] and len(doc["patched"]) >= 5, doc      # it did patch things, and put every one back
    assert any(k.startswith("torch.cuda.") for k in doc["patched"]), doc
