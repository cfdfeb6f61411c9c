"""Check 6, distributed smoke: can N processes on this device talk, agree and not hang?

Launched from a single process, the check starts ``python -m torch.distributed.run
--standalone --nproc-per-node N -m torchport.checks._dist_worker`` in its own process
group with a hard timeout. Each rank logs every stage to a file before and after it
runs (:mod:`torchport.checks._dist_worker`), so a hung or failed rank is reported by
rank and stage -- never waited on forever:

* the process group initialises with the device's backend (``get_default_backend_for_device``
  / the backend record's ``dist_backend``);
* an all-reduce of ``rank + 1`` returns ``N(N+1)/2`` on every rank;
* a barrier completes within ``barrier_timeout``;
* every rank builds the same initial weights from the target's seed;
* FSDP2: the model sharded over the ranks takes one SGD step on each rank's slice of a batch; the
  gathered weights equal (within :data:`FSDP_TOLERANCE`) one process's step on the whole batch, and
  each rank holds ~1/N of the parameters (a backend whose process group cannot host FSDP: a warning).

Under torchrun already (``WORLD_SIZE`` > 1, e.g. ``torchrun ... -m torchport check --only
distributed``) the same stages run in the current ranks instead.

Example::

    from torchport.checks import distributed_smoke
    r = distributed_smoke(nproc=2, timeout=120)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from torchport.checks.result import CheckResult, Evidence, Status

__all__ = ["distributed_smoke", "read_rank_logs"]

NAME = "distributed"
STAGES = ("start", "init", "all_reduce", "barrier", "weights", "fsdp", "done")

#: Largest weight difference after one FSDP step vs the same step in one process (float32 reduction order).
FSDP_TOLERANCE = 1e-5


def read_rank_logs(folder: str | Path, nproc: int) -> dict[int, list[dict[str, Any]]]:
    """``{rank: [stage records]}`` from ``rank<R>.jsonl`` files (missing ranks map to ``[]``)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in range(nproc):
        f = Path(folder) / f"rank{r}.jsonl"
        recs = []
        if f.is_file():
            for line in f.read_text().splitlines():
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a kill
                    pass
        out[r] = recs
    return out


def _launch(args: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str, bool, dict[int, int]]:
    """Run the launcher in a new session; kill the whole group at ``timeout``. ``(rc, output tail, timed_out,
    {rank: exit code} of the ranks torchrun reports as failed)``."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            rc = proc.returncode
        log.seek(0)
        text = log.read()
        tail = "\n".join(text.strip().splitlines()[-6:])
    return rc, tail, timed_out, launcher_exit_codes(text)


def _launch_nodes(worker: list[str], env: dict[str, str], timeout: float, *, nnodes: int, nproc: int,
                  out: str, net: str = "loopback") -> tuple[int | None, str, bool, dict[int, int], str]:
    """The smoke on ``nnodes`` loopback rehearsal nodes of ``nproc`` ranks: ``(worst exit, output tail of the
    first failed node, timed_out, {global rank: exit code} of failed ranks, what was launched)``; every node is
    killed at ``timeout``."""
    from torchport.cluster.rehearsal import Rehearsal

    with Rehearsal(nnodes=nnodes, nproc=nproc, workdir=Path(out) / "nodes", env=env,
                   join_timeout=max(5.0, timeout / 2), rdzv_id="torchport-check", net=net) as rh:
        rh.start(worker)
        results = rh.wait(timeout=timeout)
    codes = [r.returncode for r in results]
    timed_out = any(c is None for c in codes)
    failed = [r for r in results if r.returncode != 0]
    rc = None if timed_out else max(codes, key=abs)
    tail = "\n".join(failed[0].output.strip().splitlines()[-6:]) if failed else ""
    exits: dict[int, int] = {}
    for r in results:   # torchrun names local ranks: this node's global rank = node * nproc + local
        exits.update({r.rank * nproc + local: c for local, c in launcher_exit_codes(r.output).items()})
    kind = "network-namespace" if rh.net == "netns" else "loopback"
    return rc, tail, timed_out, exits, (f"{nnodes} {kind} nodes x torchport launch --nproc-per-node {nproc} (exit codes "
                                 + "/".join(str(c) for c in codes) + ")")


def launcher_exit_codes(text: str) -> dict[int, int]:
    """``{local rank: exit code}`` of the ranks torchrun reports as failed (``failed (exitcode: 3)
    local_rank: 1`` and its ``Failures`` table), so a dead rank is named with its code."""
    import re

    out: dict[int, int] = {}
    for m in re.finditer(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)", text):
        out[int(m.group(2))] = int(m.group(1))
    for m in re.finditer(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)", text):
        out.setdefault(int(m.group(1)), int(m.group(2)))
    return out


def _evidence(logs: dict[int, list[dict[str, Any]]], nproc: int, *, timed_out: bool, timeout: float,
              barrier_timeout: float, exits: dict[int, int] | None = None) -> list[Evidence]:
    ev: list[Evidence] = []
    hashes: dict[int, str] = {}
    disagree = False  # a rank's MIN/MAX all-reduce of the weight hash saw different values
    for r in range(nproc):
        recs = logs.get(r, [])
        last = {rec["stage"]: rec for rec in recs}
        where = f"rank {r}"
        init = last.get("init", {})
        if init.get("status") == "ok":
            ok = init.get("backend") == init.get("expected")
            ev.append(Evidence(what="process group backend", measured=init.get("backend"), threshold=init.get("expected"),
                               where=f"{where} on {init.get('device')}", status=Status.PASS if ok else Status.FAIL))
        ar = last.get("all_reduce", {})
        if ar.get("status") == "ok":
            ok = ar.get("value") == ar.get("expected")
            ev.append(Evidence(what="all-reduce sum of rank+1", measured=ar.get("value"), threshold=f"== {ar.get('expected')}",
                               where=where, status=Status.PASS if ok else Status.FAIL))
        br = last.get("barrier", {})
        if br.get("status") == "ok":
            ev.append(Evidence(what="barrier", measured=f"{br.get('seconds')} s", threshold=f"<= {barrier_timeout:g} s",
                               where=where, status=Status.PASS))
        w = last.get("weights", {})
        if w.get("status") in ("ok", "mismatch"):
            hashes[r] = w.get("hash", "?")
            disagree = disagree or w.get("agree") is False
        fs = last.get("fsdp", {})
        if fs.get("status") == "ok":
            ok = fs.get("max_abs_diff", 1.0) <= FSDP_TOLERANCE
            ev.append(Evidence(what="FSDP step == one-process step", measured=fs.get("max_abs_diff"),
                               threshold=f"<= {FSDP_TOLERANCE:g} max abs weight difference", where=where,
                               status=Status.PASS if ok else Status.FAIL,
                               detail=f"this rank holds {fs.get('param_share', 0):.0%} of the parameters"))
        elif fs.get("status") == "unsupported":
            ev.append(Evidence(what="FSDP unavailable", measured=fs.get("reason"), where=where, status=Status.WARN))
        errors = [rec for rec in recs if rec.get("status") == "error"]
        for rec in errors:
            ev.append(Evidence(what=f"{rec['stage']} failed", measured=rec.get("error"), where=where, status=Status.FAIL))
        done = last.get("done", {}).get("status") == "ok"
        if not done and not errors:
            stage = recs[-1]["stage"] if recs else None
            state = recs[-1]["status"] if recs else None
            code = (exits or {}).get(r)
            if code is not None and code != 0:   # the launcher saw this rank die: say so, with its code
                measured = (f"exited with code {code}" if code > 0 else f"killed by signal {-code}") + (
                    f" during '{stage}'" if stage is not None else "")
            elif stage is None:
                measured = "never started"
            elif state == "begin":
                measured = f"entered '{stage}' at {recs[-1]['t']} s and never left it"
            else:
                nxt = STAGES[STAGES.index(stage) + 1] if stage in STAGES[:-1] else "?"
                measured = f"stopped after '{stage}' (did not reach '{nxt}')"
            ev.append(Evidence(what="rank did not finish", measured=measured, where=where, status=Status.FAIL,
                               detail=("killed at the check's timeout" if timed_out else
                                       "exited or was terminated by the launcher after another rank failed")))
    if hashes:
        distinct = sorted(set(hashes.values()))
        bad = len(distinct) > 1 or disagree
        ev.append(Evidence(what="ranks agree on initial weights",
                           measured=f"{len(distinct)} distinct hash(es) logged" + ("; all-reduce MIN != MAX" if disagree else ""),
                           threshold="1", where=", ".join(f"rank {r}: {h}" for r, h in sorted(hashes.items())) if bad else None,
                           status=Status.FAIL if bad else Status.PASS,
                           detail="Seed every rank identically before building the model (or broadcast rank 0's "
                           "weights; DDP does at wrap time)." if bad else None))
    if timed_out:
        ev.append(Evidence(what="launcher finished", measured=f"killed after {timeout:g} s", threshold=f"<= {timeout:g} s",
                           status=Status.FAIL))
    return ev


def distributed_smoke(target: Any = None, *, nproc: int = 2, timeout: float = 120.0, barrier_timeout: float = 30.0,
                      device: Any = None, fault: str | None = None, nnodes: int = 1,
                      net: str = "loopback") -> CheckResult:
    """Run the distributed smoke test (see module docstring).

    Args:
        target: :class:`~torchport.checks.target.CheckTarget`, spec string or None (its model
            factory is used for the initial-weights agreement; needs an import spec).
        nproc: processes to launch.
        timeout: hard limit for the whole launch, after which every process is killed.
        barrier_timeout: collective / barrier timeout inside the ranks.
        device: torchport ``Target`` whose backend the ranks use (default: the current one).
        fault: fault injection for testing the check (``"hang:1"``, ``"exit:1"``, ``"weights:1"``).
        nnodes: > 1: ``nproc`` ranks on each of ``nnodes`` loopback rehearsal nodes (127.0.0.x, one
            ``torchport launch`` each, one c10d rendezvous: :mod:`torchport.cluster.rehearsal`).
        net: the rehearsal nodes' network: ``loopback`` or ``netns`` (a Linux network namespace per node;
            loopback, said in one line, where namespaces are unavailable).

    Returns:
        A :class:`~torchport.checks.result.CheckResult` named ``distributed``.
    """
    from torchport.checks.target import load_target
    from torchport.runtime.device import current

    started = time.perf_counter()
    target = load_target(target)
    dev = device or current()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return _in_torchrun(target, dev, barrier_timeout, started)
    if not target.spec:
        return CheckResult(name=NAME, status=Status.SKIP, summary="the target has no import spec; ranks cannot build it",
                           platform=str(dev))
    with tempfile.TemporaryDirectory(prefix="torchport-dist-") as out:
        worker = ["-m", "torchport.checks._dist_worker", "--out", out, "--target", target.spec,
                  "--device", dev.backend.name, "--barrier-timeout", str(barrier_timeout)]
        worker += [a for p in sys.path if p and os.path.isdir(p) for a in ("--sys-path", p)]
        if dev.backend.emulated:
            worker.append("--emulate")
        args = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *worker]
        env = dict(os.environ)
        from torchport.emulate import ENV_VAR

        env.pop(ENV_VAR, None)  # the workers install the emulator themselves (after importing torch)
        env.setdefault("OMP_NUM_THREADS", "1")
        if fault:
            env["TORCHPORT_CHECK_DIST_FAULT"] = fault
        else:
            env.pop("TORCHPORT_CHECK_DIST_FAULT", None)
        if nnodes > 1:
            rc, tail, timed_out, exits, launched = _launch_nodes(worker, env, timeout, nnodes=nnodes, nproc=nproc,
                                                                 out=out, net=net)
        else:
            rc, tail, timed_out, exits = _launch(args, env, timeout)
            launched = f"torchrun --nproc-per-node {nproc}"
        logs = read_rank_logs(out, nproc * nnodes)
    nproc = nproc * nnodes
    ev = [Evidence(what="launch", measured=f"{launched}: exit {rc}"
                   + (" (killed)" if timed_out else ""), threshold="exit 0 within the timeout",
                   status=Status.PASS if rc == 0 and not timed_out else Status.FAIL,
                   detail=None if rc == 0 else tail[-600:] or None)]
    ev += _evidence(logs, nproc, timed_out=timed_out, timeout=timeout, barrier_timeout=barrier_timeout,
                    exits=exits)
    where = f" ({launched.split(' x ')[0]})" if nnodes > 1 else ""      # "2 loopback nodes", "2 network-namespace nodes"
    result = CheckResult.from_evidence(NAME, ev, ok=f"{nproc} ranks{where} on {dev.backend.label}: init, all-reduce, barrier, "
                                       "identical initial weights, FSDP step == one process", platform=str(dev), started=started)
    located = [e for e in result.problems if e.where and e.where.startswith("rank")]
    if located:  # name ranks and stages first, the launcher's exit code last
        result.summary = "; ".join(f"{e.where}: {e.what} ({str(e.measured).splitlines()[0][:120]})" for e in located[:3])
    return result


def _in_torchrun(target: Any, dev: Any, barrier_timeout: float, started: float) -> CheckResult:
    """Run the worker stages in this (already launched) rank and judge from its own log."""
    from torchport.checks import _dist_worker

    rank = int(os.environ.get("RANK", "0"))
    with tempfile.TemporaryDirectory(prefix="torchport-dist-rank-") as out:
        args = ["--out", out, "--device", dev.backend.name, "--barrier-timeout", str(barrier_timeout)]
        if target.spec:
            args += ["--target", target.spec]
        _dist_worker.main(args)
        logs = read_rank_logs(out, rank + 1)
    mine = {rank: logs.get(rank, [])}
    ev = _evidence(mine, rank + 1, timed_out=False, timeout=0.0, barrier_timeout=barrier_timeout)
    ev = [e for e in ev if e.where is None or e.where.startswith(f"rank {rank}")]
    return CheckResult.from_evidence(NAME, ev, ok=f"rank {rank}: init, all-reduce, barrier and initial weights agree",
                                     platform=str(dev), started=started)
