"""The equivalence harness (tools/migrate_corpus.py) over our own corpus (tests/migrate/equivalence/).

Each script re-creates a third-party pattern; the original under `torchport run` and the output of
`torchport fix` must give the same loss trajectory (bitwise on CPU), forward dtypes, parameter devices
and a weight update. CI has no network, so the pinned third-party corpus runs outside the test suite.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("migrate_corpus", ROOT / "tools" / "migrate_corpus.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["migrate_corpus"] = corpus
_spec.loader.exec_module(corpus)

SCRIPTS = {s.name: s for s in corpus.own_corpus()}


def _rank(losses, dtypes=("float32",), devices=("cpu",), changed=True, steps=2):
    return [{"step": i + 1, "losses": list(losses), "dtypes": list(dtypes), "devices": list(devices),
             "changed": changed} for i in range(steps)]


def test_a_divergence_is_a_failing_row():
    base = corpus.ModeResult(0, {0: _rank([0.5, 0.25])})
    assert corpus.compare(base, corpus.ModeResult(0, {0: _rank([0.5, 0.25])}), 5e-3) == "yes"
    cases = {
        "losses": corpus.ModeResult(0, {0: _rank([0.5, 0.2500001])}),            # bitwise on CPU
        "forward dtypes": corpus.ModeResult(0, {0: _rank([0.5, 0.25], dtypes=("bfloat16",))}),  # AMP off/on
        "parameters on": corpus.ModeResult(0, {0: _rank([0.5, 0.25], devices=("npu:0",))}),
        "weights changed": corpus.ModeResult(0, {0: _rank([0.5, 0.25], changed=False)}),
        "ranks differ": corpus.ModeResult(0, {0: _rank([0.5]), 1: _rank([0.5])}),
        "not compared": corpus.ModeResult(1, {}),
    }
    for needle, other in cases.items():
        verdict = corpus.compare(base, other, 5e-3)
        assert needle in verdict, (needle, verdict)
    frozen = corpus.ModeResult(0, {0: _rank([0.5, 0.25], changed=False)})
    assert "nothing trained" in corpus.compare(frozen, corpus.ModeResult(0, {0: _rank([0.5, 0.25], changed=False)}),
                                               5e-3)
    warm_up = [{**rec, "changed": rec["step"] > 1} for rec in _rank([0.5, 0.25])]  # a first learning rate of 0
    assert corpus.compare(corpus.ModeResult(0, {0: warm_up}), corpus.ModeResult(0, {0: list(warm_up)}), 5e-3) == "yes"
    amp = corpus.ModeResult(0, {0: _rank([0.5, 0.25], dtypes=("float16",))})
    near = corpus.ModeResult(0, {0: _rank([0.5, 0.2501], dtypes=("float16",))})
    assert corpus.compare(amp, near, 5e-3) == "yes"  # fp16 tolerance only where a forward ran in fp16
    row = corpus.Row(corpus.Script("x", Path("x.py")), {}, {"cpu": "yes", "npu": "losses ..."})
    assert not row.passed


#: scripts that import apex: on a CPU-only machine only the emulator serves apex (its stand-in), so the
#: original cannot run on the plain CPU; they are compared on the emulated npu below
NEEDS_APEX = frozenset({"modelzoo_apex"})


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(SCRIPTS) - NEEDS_APEX))
def test_fixed_script_is_equivalent_on_cpu(name):
    row = corpus.check(SCRIPTS[name], devices=("cpu",), steps=3, timeout=240)  # 3: data_parallel_single ends and saves
    assert row.equivalent == {"cpu": "yes"}, (row.equivalent, {m: r.error for m, r in row.modes.items()})
    if name == "data_parallel_single":  # its checkpoint was compared too (keys, values, devices after load)
        assert [len(v) for v in row.modes["fix cpu"].saves.values()] == [1]
    assert row.fixed_imports_torchport


@pytest.mark.slow
def test_amp_guard_is_equivalent_on_the_emulated_npu():
    """On an accelerator the AMP guard matters: the old fix ran this forward in float32 instead of float16."""
    row = corpus.check(SCRIPTS["unet_amp_guard"], devices=("npu",), steps=2, timeout=300)
    assert row.equivalent == {"npu": "yes"}, (row.equivalent, {m: r.error for m, r in row.modes.items()})
    assert "float16" in {d for rec in row.modes["fix npu"].ranks[0] for d in rec["dtypes"]}


@pytest.mark.slow
def test_fixed_apex_script_is_equivalent_on_the_emulated_npu():
    """apex AMP fixed to torch.amp (TP210) trains like the original on the emulator's apex stand-in: same
    losses within fp16 tolerance, fp16 forwards in both, and the fixed copy also runs on the plain CPU."""
    row = corpus.check(SCRIPTS["modelzoo_apex"], devices=("npu", "cpu"), steps=2, timeout=300)
    assert row.equivalent["npu"] == "yes", (row.equivalent, {m: r.error for m, r in row.modes.items()})
    for mode in ("run npu", "fix npu"):
        assert "float16" in {d for rec in row.modes[mode].ranks[0] for d in rec["dtypes"]}, mode
    assert row.modes["fix cpu"].rc == 0 and row.modes["fix cpu"].ranks, row.modes["fix cpu"].error
    assert "apex" in row.modes["run cpu"].error  # the original needs apex: only the emulator serves it here


@pytest.mark.slow
@pytest.mark.parametrize("name, device, dtype", [("spawn_ddp_set_device", "cpu", "float32"),
                                                 ("unet_amp_guard", "npu", "float16"),
                                                 ("ssd_multibox", "npu", "float32")])
def test_torch_only_fix_is_equivalent(name, device, dtype):
    """`fix --emit torch` output imports no torchport and behaves like the original under `torchport run`:
    one spawned rank on the CPU (device_count 0 would spawn none), fp16 autocast on the emulated npu, a
    detection loss whose priors and targets are built on the module-level device, on the emulated npu."""
    row = corpus.check(SCRIPTS[name], devices=(device,), steps=2, timeout=300, emit="torch")
    assert row.equivalent == {device: "yes"}, (row.equivalent, {m: r.error for m, r in row.modes.items()})
    assert not row.fixed_imports_torchport
    records = row.modes[f"fix {device}"].ranks[0]
    assert dtype in {d for rec in records for d in rec["dtypes"]}
    assert {d.split(":")[0] for rec in records for d in rec["devices"]} == {device}

_REPLICA = '''
import collections, torch
model = torch.nn.Linear(4, 2)
replica = model._replicate_for_data_parallel()  # what nn.parallel.replicate builds per device
replica._former_parameters = collections.OrderedDict()
for name, param in model._parameters.items():
    copy = param * 1  # replicas hold non-leaf copies as plain attributes, not parameters
    setattr(replica, name, copy)
    replica._former_parameters[name] = copy
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = replica(torch.ones(3, 4))
out.float().sum().backward()
opt.step()
'''


def _probe_one_step(tmp_path, source: str) -> tuple[str, list[dict]]:
    """Run ``source`` once under the probe on the CPU: (its stdout, the probe's records)."""
    import json
    import subprocess

    out = tmp_path / "probe"
    out.mkdir()
    (tmp_path / "script.py").write_text(source, encoding="utf-8")
    env = corpus._env(out, steps=1, device="cpu", seed=0)
    proc = subprocess.run([sys.executable, str(tmp_path / "script.py")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()]


def test_probe_records_the_forward_dtype_of_a_data_parallel_replica(tmp_path):
    """nn.DataParallel runs replicas whose weights are not parameters; the probe missed their dtypes (fix npu of
    pytorch-cifar recorded no dtype while run npu, on one device, recorded float32)."""
    _, records = _probe_one_step(tmp_path, _REPLICA)
    assert [r["dtypes"] for r in records] == [["bfloat16"]]


_SCALED = """
import torch
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
loss = m(torch.ones(2, 4)).pow(2).mean()
print("LOSS", float(loss))
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
"""


def test_probe_records_the_loss_a_grad_scaler_scaled_not_its_multiple(tmp_path):
    """timm --amp scales its loss only when device.type == "cuda" (under `run`), not on the fixed npu script:
    the probe compared 159840.4 with 2.44 -- the same loss, times the scaler's 65536."""
    stdout, records = _probe_one_step(tmp_path, _SCALED)
    loss = float(stdout.split("LOSS")[1].split()[0])
    assert [r["losses"] for r in records] == [[loss]] and loss > 0


def _saved(keys, device="cpu", sha="a", file="<script>/ckpt.pt", loaded=("cpu",)):
    obj = {"dict": "OrderedDict", "keys": list(keys),
           "values": [{"tensor": "float32", "shape": [2], "device": device, "sha": sha, "sum": 1.0} for _ in keys]}
    return {"rank": 0, "file": file, "object": obj, "loaded_devices": list(loaded)}


def test_saved_state_is_part_of_the_verdict():
    """Equal losses are not enough (issue 30): a `module.` prefix lost from the saved keys (TP303's old fix), a
    tensor saved on another device, other values, another file or a different random-generator state fail."""
    records = {0: _rank([0.5, 0.25])}
    base = corpus.ModeResult(0, records, saves={0: [_saved(["module.w", "module.b"])]},
                             files={"<script>/log.txt": "text:1"})

    def other(**kw):
        saves = kw.pop("saves", base.saves)
        return corpus.ModeResult(0, kw.pop("ranks", records), saves=saves, files=kw.pop("files", base.files))

    assert corpus.verdict(base, other(), 5e-3) == ("yes", "yes")
    cases = {
        "keys differ": other(saves={0: [_saved(["w", "b"])]}),
        "tensor device": other(saves={0: [_saved(["module.w", "module.b"], device="npu:0")]}),
        "tensor values differ": other(saves={0: [_saved(["module.w", "module.b"], sha="b")]}),
        "after loading": other(saves={0: [_saved(["module.w", "module.b"], loaded=("npu:0",))]}),
        "torch.save calls": other(saves={0: []}),
        "files written differ": other(files={}),
        "content differs": other(files={"<script>/log.txt": "text:2"}),
    }
    for needle, fix in cases.items():
        whole, training = corpus.verdict(base, fix, 5e-3)
        assert training == "yes" and needle in whole, (needle, whole)
    # a folder named by the clock (timm's output/train/<date>-<time>-<model>/) is the same file in both runs
    stamped = lambda t: corpus.ModeResult(0, records, saves=base.saves, files={f"<script>/out/{t}-r50/args.yaml": "text:1"})
    assert corpus.verdict(stamped("20261202-204923"), stamped("20261202-204938"), 5e-3) == ("yes", "yes")
    rng = other(ranks={0: [dict(r, rng="x") for r in records[0]]})
    base_rng = corpus.ModeResult(0, {0: [dict(r, rng="y") for r in records[0]]}, saves=base.saves, files=base.files)
    assert "random generators" in corpus.compare(base_rng, rng, 5e-3)
    row = corpus.Row(corpus.Script("x", Path("x.py")), {}, {"cpu": cases["keys differ"].error or "keys differ"},
                     training_only={"cpu": "yes"})
    assert corpus.changed_by_state(row) == ["cpu"]


_SAVES = """
import torch
model = torch.nn.DataParallel(torch.nn.Linear(3, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.ones(1, 3)).sum().backward()
torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 1}, "ckpt.pt")
opt.step()
"""


def test_probe_records_what_torch_save_was_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _probe_one_step(tmp_path, _SAVES)
    [record] = [json.loads(line) for f in (tmp_path / "probe").glob("*.saves.jsonl") for line in f.read_text().splitlines()]
    assert record["file"] == "ckpt.pt" and record["loaded_devices"] == ["cpu"]
    top = record["object"]
    assert top["keys"] == ["model", "opt", "epoch"] and top["values"][2] == 1
    assert top["values"][0]["keys"] == ["module.weight", "module.bias"]
    assert top["values"][0]["values"][0]["shape"] == [2, 3]


def test_a_crash_at_a_reported_only_line_is_counted(tmp_path):
    """The count issue 30 asks for: the original runs under `run`, the fixed copy dies at a line whose finding
    the fix only reported (TP114's `torch.cuda.memory_summary()` dying with KeyError, before compat)."""
    fixed = tmp_path / "fixed"
    (fixed / "pkg").mkdir(parents=True)
    err = (f'Traceback (most recent call last):\n  File "{fixed}/train.py", line 40, in <module>\n'
           f'  File "{fixed}/pkg/util.py", line 7, in report\n  File "/site-packages/torch/cuda/memory.py", line 9\n'
           "KeyError: 'allocated_bytes.all.current'\n")
    assert corpus._failed_at(err, fixed) == "pkg/util.py:7"
    ok = corpus.ModeResult(0, {0: _rank([0.5])})
    dead = corpus.ModeResult(1, {}, error="KeyError", failed_at="pkg/util.py:7")
    row = corpus.Row(corpus.Script("x", Path("x.py")), {"run cpu": ok, "fix cpu": dead}, {"cpu": "not compared"},
                     left={"pkg/util.py:7": ["TP114"]})
    assert row.crashes_at_finding() == {"cpu": "pkg/util.py:7 TP114"}
    row.left = {"pkg/util.py:8": ["TP114"]}
    assert row.crashes_at_finding() == {}
    # but the row still names the failure: a finding left at one line (ddpm's `device="cuda"` parameter default,
    # an unsafe fix) can fail at another (the tensor built on it)
    assert row.fails_where_run_works() == {"cpu": "pkg/util.py:7 KeyError"}
    row.modes["fix cpu"] = corpus.ModeResult(0, {0: _rank([0.5])})
    assert row.fails_where_run_works() == {}


def test_a_text_file_naming_the_scripts_own_path_is_the_same_file(tmp_path):
    """minGPT's args.txt records sys.argv: the original's path (orig/) and the fixed copy's (fixed/) differ, the
    file does not."""
    for sub in ("orig", "fixed"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "args.txt").write_text(f"{tmp_path / sub / 'adder.py'} --seed 3")
    a, b = (corpus._digest(tmp_path / sub / "args.txt", tmp_path) for sub in ("orig", "fixed"))
    assert a == b
    (tmp_path / "fixed" / "args.txt").write_text(f"{tmp_path / 'fixed' / 'adder.py'} --seed 3 --half")
    assert corpus._digest(tmp_path / "fixed" / "args.txt", tmp_path) != a

