"""install -> uninstall restores every patched attribute as the identical object."""

from __future__ import annotations

import torch

import torchport.shim as shim
from torchport.shim._patch import MISSING, PatchTable, own_attr


def _snapshot(owners):
    return {id(o): (o, dict(vars(o))) for o in owners}


def _assert_identical(snap):
    for owner, before in snap.values():
        after = dict(vars(owner))
        changed = sorted(k for k in set(before) | set(after)
                         if before.get(k, MISSING) is not after.get(k, MISSING) and not k.startswith("__pycache"))
        assert not changed, f"{owner!r}: attributes not restored by identity: {changed}"


def test_full_patch_table_restored_by_identity():
    # Learn the patch table, then snapshot every owner's whole namespace *before* the real cycle.
    s = shim.install(warn=False)
    owners = {id(p.owner): p.owner for p in s.patches}.values()
    planned = [(p.owner, p.name) for p in s.patches]
    assert len(planned) > 60
    shim.uninstall()
    snap = _snapshot(owners)
    originals = {(id(o), n): getattr(o, n) for o, n in planned}  # what attribute reads returned before

    s = shim.install(warn=False)
    table = s.patches
    for p in table:  # every entry is really in effect while installed
        assert own_attr(p.owner, p.name) is p.replacement, p.qualname
        assert p.replacement is not p.original
    assert shim.uninstall() is s.report
    _assert_identical(snap)
    for p in table:  # and reads through getattr give back the very same objects
        assert own_attr(p.owner, p.name) is p.original, p.qualname
    assert {(id(p.owner), p.name) for p in table} == set(originals)
    for (oid, name), obj in originals.items():
        owner = snap[oid][0]
        assert getattr(owner, name) is obj, f"{owner!r}.{name}"
    assert s.patches == []


def test_table_covers_the_issue_list():
    s = shim.install(warn=False)
    apis = {p.api for p in s.patches}
    shim.uninstall()
    for api in ("torch.Tensor.to", "torch.Tensor.cuda", "torch.nn.Module.to", "torch.nn.Module.cuda", "torch.zeros",
                "torch.tensor", "torch.load", "torch.autocast", "torch.amp.GradScaler",
                "torch.distributed.init_process_group", "torch.nn.parallel.DistributedDataParallel",
                "torch.utils.data.DataLoader", "torch.cuda.is_available", "torch.cuda.set_device",
                "torch.cuda.synchronize", "torch.cuda.device_count", "torch.cuda.current_device",
                "torch.cuda.max_memory_allocated", "torch.cuda.empty_cache", "torch.cuda.manual_seed_all",
                "torch.cuda.get_rng_state", "torch.cuda.Stream", "torch.cuda.Event"):
        assert api in apis, api


def test_inherited_attributes_are_deleted_not_shadowed():
    # Tensor.to lives on the C base class: after uninstall, torch.Tensor must not keep its own copy.
    assert "to" not in vars(torch.Tensor)
    base_to = torch.Tensor.to
    shim.install(warn=False)
    assert "to" in vars(torch.Tensor)
    shim.uninstall()
    assert "to" not in vars(torch.Tensor)
    assert torch.Tensor.to is base_to


def test_jit_script_untouched_and_builtin_table_restored():
    from torch.jit import _builtins

    script, table_before = torch.jit.script, dict(_builtins._get_builtin_table())
    s = shim.install(warn=False)
    assert torch.jit.script is script  # never disabled (transfer_to_npu replaces it)

    @torch.jit.script
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(3) + torch.ones(3)

    assert f(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert _builtins._find_builtin(torch.zeros) == "aten::zeros"  # torch.zeros is our wrapper now
    shim.uninstall()
    assert dict(_builtins._get_builtin_table()) == table_before
    assert s.patches == []


def test_double_patch_unwinds_in_reverse():
    class Owner:
        pass

    Owner.attr = original = object()
    table = PatchTable()
    table.apply(Owner, "attr", "first", api="x")
    table.apply(Owner, "attr", "second", api="x")
    table.apply(Owner, "new", "added", api="y")
    assert table.restore() == []
    assert vars(Owner)["attr"] is original and "new" not in vars(Owner)


def test_context_manager_and_reentrant_install():
    with shim.redirect_cuda(warn=False) as s:
        assert shim.active() is s
        with shim.redirect_cuda() as inner:
            assert inner is s
        assert shim.active() is s  # the inner block did not uninstall the outer shim
        assert shim.install() is s
    assert shim.active() is None
    assert torch.cuda.is_available.__module__.startswith("torch.cuda")


def test_conflicting_install_is_an_error():
    import pytest

    shim.install("cpu", warn=False)
    with pytest.raises(shim.ShimError, match="already installed"):
        shim.install("npu")


def test_import_torchport_shim_patches_nothing():
    import subprocess
    import sys

    code = ("import sys, torchport, torchport.shim; assert 'torch' not in sys.modules, 'torch imported'; "
            "import torch; assert torch.cuda.is_available.__module__ == 'torch.cuda'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
