"""Cluster rehearsal on one machine (issue 33): the matrix, the fault table and the scheduler-environment table.

N "nodes" = N ``torchport launch`` processes (:mod:`torchport.cluster.rehearsal`), each in a Linux network
namespace of its own (``--net netns``, the default; needs root and ``ip``, else loopback, said in one line) or on
127.0.0.x loopback (``--net loopback``). Each section prints a markdown table; the baseline of every row is
measured in the same run.

    .venv/bin/python benchmarks/bench_cluster.py [--only matrix,faults,envs] [--quick] [--net netns|loopback]
    (further --only sections: loss, loss0, hang, data, wrongaddr, loss-s3, matrix-s3)

* ``matrix``: nodes x ranks x device (cpu/gloo, emulated npu/hccl) x strategy (ddp, fsdp): per-step losses vs ONE
  node with the same number of ranks (the same global batch), wall time of both;
* ``matrix-s3``: the matrix with the data and the checkpoints in moto's S3 server (inside the bridge namespace),
  2x2 and 3x2: per-step losses and the final weights read back from S3 vs ONE node reading the same data;
* ``faults``: a whole node killed mid-epoch and replaced (``--max-restarts 1``, ``--resume auto``) vs an
  uninterrupted run (per-step losses, final weights, steps lost); one rank hung (collective timeout) -- what
  every node printed last and its exit code;
* ``envs``: ``torchport launch --dry-run`` for each scheduler environment's documented variables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULT_TRAIN = str(ROOT / "tests" / "train" / "fault_train.py")
PY = sys.executable

from torchport.cluster.rehearsal import Rehearsal, max_abs_diff, step_losses  # noqa: E402

#: The rehearsal nodes' network (--net): netns or loopback.
NET = "netns"


def base_env(work: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_") or k.startswith("TORCHPORT_CPU_")}
    e.update({"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "TORCHPORT_CACHE": str(work / "cache")})
    return e


def train_args(data: Path, run_dir: Path, *, device: str, strategy: str, epochs: int = 1, extra: tuple = ()) -> list[str]:
    return ["--data", str(data), "--model", "tinycnn", "--image-size", "16", "--batch-size", "4", "--lr", "0.02",
            "--warmup-epochs", "0", "--epochs", str(epochs), "--workers", "0", "--log-every", "1", "--device", device,
            "--strategy", strategy, "--precision", "fp32", "--progress", "plain", "--run-dir", str(run_dir), *extra]


def one_node(program: list[str], nproc: int, env: dict, emulate: str | None, *, max_restarts: int = 0,
             timeout: float = 600, prefix: list[str] = ()) -> tuple[subprocess.CompletedProcess, float]:
    """The 1-node reference: ``torchrun --standalone`` of ``nproc`` ranks (behind ``prefix``: ``ip netns exec`` a
    node's namespace, where a service of the rehearsal such as the S3 server is reachable)."""
    e = dict(env)
    if emulate:
        e["TORCHPORT_EMULATE"] = emulate
    cmd = [*prefix, PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    if max_restarts:
        cmd += ["--max-restarts", str(max_restarts)]
    t0 = time.monotonic()
    out = subprocess.run([*cmd, *program], env=e, capture_output=True, text=True, timeout=timeout)
    return out, time.monotonic() - t0


def last_line(text: str) -> str:
    """The last line that is not a c10d warning (``[W... socket.cpp ...]``: in network namespaces, without DNS,
    c10d warns that the client's hostname cannot be retrieved)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("[W")]
    return lines[-1][:220] if lines else ""


# ----------------------------------------------------------------------------------------------------- matrix
MATRIX = [(2, 1, "cpu", "ddp"), (2, 1, "cpu", "fsdp"), (2, 2, "cpu", "ddp"), (2, 2, "npu", "ddp"),
          (2, 2, "cpu", "fsdp"), (2, 2, "npu", "fsdp"), (3, 2, "cpu", "ddp"), (3, 2, "npu", "fsdp")]
#: --only matrix-s3: data and checkpoints in the S3 server; 2x2 and 3x2, cpu/gloo and emulated npu/hccl, ddp and fsdp
#: (the order is the order of importance: every device and strategy at 2x2 and 3x2 before the rest)
MATRIX_S3 = [(2, 2, "cpu", "fsdp"), (3, 2, "npu", "fsdp"), (2, 2, "npu", "ddp"), (3, 2, "cpu", "ddp"),
             (2, 2, "npu", "fsdp"), (3, 2, "cpu", "fsdp"), (2, 2, "cpu", "ddp"), (3, 2, "npu", "ddp")]


def matrix(work: Path, data: Path, quick: bool, *, s3: bool = False, rows=None) -> None:
    """Each row: N nodes x K ranks, then ONE node of N*K ranks (the same global batch); per-step losses compared.

    ``s3`` (``--only matrix-s3``): data and checkpoints in moto's S3 server inside the bridge namespace
    (:class:`_S3`). ``data`` is packed to ``s3://bench/<row>/data`` (train / val shard sets, ``BENCH_SHARD_BYTES``
    each: several shards, so the nodes' rank slices read different ones), every node reads it through its own
    ``TORCHPORT_CACHE``, and ``--checkpoint-dir s3://bench/<row>/nodes`` (fsdp: DCP directories ``step-*``; ddp:
    ``ckpt-*.pt`` files). The 1-node reference runs inside node 0's namespace (the root namespace sends nothing off
    loopback), reads the same S3 data through a cache of its own and checkpoints to ``s3://bench/<row>/one``; both
    prefixes are then copied out and the final weights compared."""
    env = base_env(work)
    if s3:
        env["BENCH_SHARD_BYTES"] = str(1 << 12)
    rows = rows or (MATRIX_S3 if s3 else MATRIX)
    rows = rows[:3] if quick else rows
    print("\n| nodes x ranks | device / backend | strategy | steps | max per-step loss diff vs 1 node | "
          + ("final weights from S3: max diff vs 1 node | " if s3 else "")
          + "wall: nodes / 1 node (s) | ratio | exit codes: nodes (1 node) |")
    print("|---|---|---|---|---|" + ("---|" if s3 else "") + "---|---|---|")
    for nnodes, nproc, device, strategy in rows:
        tag = f"{'s3-' if s3 else ''}{nnodes}x{nproc}-{device}-{strategy}"
        emulate = f"npu:{nproc}" if device == "npu" else None
        one_emulate = f"npu:{nnodes * nproc}" if device == "npu" else None
        nodes_run, one_run = work / tag / "nodes-run", work / tag / "one-run"
        t0 = time.monotonic()
        weights, notes = "", []
        with Rehearsal(net=NET, nnodes=nnodes, nproc=nproc, emulate=emulate, workdir=work / tag / "nodes", env=env,
                       join_timeout=120) as rh:
            store = _S3(rh) if s3 else None
            try:
                nodes_extra = one_extra = ()
                where = data
                if store is not None:
                    url = f"s3://bench/{tag}"
                    made = store.run("setup", f"{url}/data", str(data),
                                     env={**env, "TORCHPORT_CACHE": str(work / tag / "pack-cache")})
                    if made.returncode != 0:
                        print(f"| {nnodes}x{nproc} | S3 setup failed: {last_line(made.stderr)} | | | | | | | |")
                        continue
                    notes.append("data: " + "; ".join(ln for ln in made.stdout.splitlines() if ln.startswith("{")))
                    rh.env.update(store.env)
                    where = f"{url}/data"
                    nodes_extra, one_extra = ("--checkpoint-dir", f"{url}/nodes"), ("--checkpoint-dir", f"{url}/one")
                t0 = time.monotonic()
                rh.start(["train", *train_args(where, nodes_run, device=device, strategy=strategy, extra=nodes_extra)])
                results = rh.wait(timeout=900)
                t_nodes = time.monotonic() - t0
                one_env = env if store is None else {**env, **store.env, "GLOO_SOCKET_IFNAME": "lo",
                                                     "TORCHPORT_CACHE": str(work / tag / "one-cache")}
                ref, t_one = one_node(["-m", "torchport", "train", *train_args(where, one_run, device=device,
                                                                               strategy=strategy, extra=one_extra)],
                                      nnodes * nproc, one_env, one_emulate, prefix=store.prefix if store else ())
                if store is not None:
                    notes += [store.fetch(f"{url}/nodes", nodes_run / "checkpoints", env),
                              store.fetch(f"{url}/one", one_run / "checkpoints", env)]
                    weights = f"{final_weights_diff(nodes_run, one_run)} | "
                    caches = [sum(f.stat().st_size for f in (work / tag / "nodes" / f"node{n}" / "cache").rglob("*")
                                  if f.is_file()) for n in range(nnodes)]
                    notes.append("node caches (bytes): " + ", ".join(f"n{n}: {c}" for n, c in enumerate(caches)))
            finally:
                if store is not None:
                    store.close()
        codes = "/".join(str(r.returncode) for r in results)
        a, b = step_losses(nodes_run), step_losses(one_run)
        print(f"| {nnodes}x{nproc} | {device} / {'hccl (emulated)' if device == 'npu' else 'gloo'} | {strategy} | "
              f"{len(a)} | {max_abs_diff(a, b):.2e} | {weights}{t_nodes:.1f} / {t_one:.1f} | {t_nodes / t_one:.2f} | "
              f"{codes} ({ref.returncode}) |", flush=True)
        for note in notes:
            print(f"<!-- {note} -->", flush=True)
        for r in results:
            if r.returncode != 0:
                print(f"<!-- node {r.rank}: {last_line(r.output)} -->")
        if ref.returncode != 0:
            print(f"<!-- 1 node: {last_line(ref.stderr)} -->")


# ----------------------------------------------------------------------------------------------------- faults
def _last_model(run: Path):
    """``(name, {key: tensor})`` of the model in a run's last checkpoint: a ddp ``ckpt-*.pt`` file, or an fsdp DCP
    directory ``step-*`` (read in this one process with torch's dcp_to_torch_save)."""
    import torch

    ck = run / "checkpoints"
    files = sorted(ck.glob("ckpt-*.pt"))
    dirs = sorted(d for d in ck.glob("step-*") if d.is_dir())
    if files:
        state = torch.load(files[-1], map_location="cpu", weights_only=False)
        return files[-1].name, state.get("model", state)
    if dirs:
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

        out = run / f"{dirs[-1].name}.flat.pt"
        dcp_to_torch_save(str(dirs[-1]), str(out))
        state = torch.load(out, map_location="cpu", weights_only=False)
        model = state.get("model") if isinstance(state.get("model"), dict) else \
            {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
        return dirs[-1].name, model
    return None


def final_weights_diff(run_a: Path, run_b: Path) -> str:
    """Largest difference between the model weights of the two runs' last checkpoints."""
    import torch

    try:
        a, b = _last_model(run_a), _last_model(run_b)
    except Exception as exc:        # a damaged / unreadable checkpoint is a finding, not a crash of the bench
        return f"unreadable ({type(exc).__name__}: {str(exc)[:80]})"
    if a is None or b is None:
        return "no checkpoint"
    keys = [k for k in a[1] if torch.is_tensor(a[1][k]) and a[1][k].is_floating_point() and k in b[1]]
    if not keys:
        return f"no common weights ({a[0]} vs {b[0]})"
    d = max(float((a[1][k].float() - b[1][k].float()).abs().max()) for k in keys)
    return f"{d:.1e} ({a[0]} vs {b[0]})"


def logged_step(log: Path) -> int:
    """The last optimizer step rank 0 printed (``epoch E/T step S/N`` progress lines) in a node's log."""
    import re

    found = re.findall(r"epoch (\d+)/\d+ step (\d+)/(\d+)", log.read_text(errors="replace"))
    return max(((int(e) - 1) * int(n) + int(s) for e, s, n in found), default=0)


def wait_for_step(log: Path, step: int, *, deadline: float) -> int:
    """Poll ``log`` until rank 0 has logged ``step`` (or ``time.monotonic()`` passes ``deadline``); the step seen."""
    seen = 0
    while time.monotonic() < deadline:
        seen = logged_step(log)
        if seen >= step:
            break
        time.sleep(0.1)
    return seen


def _resumed_at(text: str) -> tuple[list[str], int | None]:
    lines = [ln.strip() for ln in text.splitlines() if "resumed from" in ln]
    try:
        return lines, int(lines[-1].rsplit("step", 1)[1]) if lines else None
    except ValueError:
        return lines, None


def _said(r) -> str:
    """What a node printed that matters: its torchport error lines (deduplicated) or its last line; its exit."""
    errs = sorted({ln.strip()[:230] for ln in r.output.splitlines() if ln.startswith("torchport ") and "error" in ln})
    said = "; ".join(errs) if errs else last_line(r.output)
    return f"exit {r.returncode} after {r.seconds:.1f} s: {said}"


#: node-loss rows: (label, nodes, ranks per node, device, strategy, node killed, kill once rank 0 logged this step)
#: (checkpoints every 4 steps and at each epoch's end: 2x1 has 12 steps per epoch, 2x2 has 6)
NODE_LOSS = [("ddp cpu/gloo", 2, 1, "cpu", "ddp", 1, 10), ("fsdp + DCP cpu/gloo", 2, 1, "cpu", "fsdp", 1, 10),
             ("fsdp + DCP, emulated npu:2 / hccl", 2, 2, "npu", "fsdp", 1, 7)]
#: --only loss-s3: the fsdp + DCP row with --checkpoint-dir s3://... on moto's S3 server (in the bridge namespace)
NODE_LOSS_S3 = [("fsdp + DCP in S3 (moto), cpu/gloo", 2, 1, "cpu", "fsdp", 1, 10),
                ("fsdp + DCP in S3 (moto), emulated npu:2 / hccl", 2, 2, "npu", "fsdp", 1, 7),
                ("fsdp + DCP in S3 (moto), cpu/gloo, 3 nodes", 3, 1, "cpu", "fsdp", 1, 6)]


class _S3:
    """moto's S3 server for a rehearsal: inside its bridge namespace (10.213.x.254:9000) when there is one, else on
    127.0.0.1; ``env`` is what a node needs to reach it. Stopped (its process group) by :meth:`close`."""

    def __init__(self, rh: Rehearsal) -> None:
        from torchport.cluster.rehearsal import free_port

        self.rh, inside = rh, rh.netns is not None
        host = rh.netns.service_address if inside else "127.0.0.1"
        port = 9000 if inside else free_port()
        self.env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
                    "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
        self.server = subprocess.Popen([*(rh.netns.exec_prefix(None) if inside else []), PY, "-m", "moto.server",
                                        "-H", host, "-p", str(port)], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)

    def run(self, *args: str, env: dict) -> subprocess.CompletedProcess:
        """``cluster_data_worker.py ARGS`` inside node 0's namespace (where the server is reachable)."""
        return subprocess.run([*self.prefix, PY, DATA_WORKER, *args], env={**env, **self.env}, capture_output=True,
                              text=True, timeout=300)

    @property
    def prefix(self) -> list[str]:
        """What runs a command where the server is reachable: ``ip netns exec`` node 0's namespace (or nothing)."""
        return self.rh.netns.exec_prefix(0) if self.rh.netns is not None else []

    def fetch(self, url: str, dst: Path, env: dict) -> str:
        """Copy every object under ``url`` into ``dst`` (from inside node 0's namespace); a one-line summary."""
        got = self.run("fetch", url, str(dst), env=env)
        try:
            listing = json.loads(got.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return f"fetch {url} failed: {last_line(got.stderr)}"
        steps = sorted({k.split("/")[-2] for k in listing["keys"] if "/step-" in k})
        files = sorted({k.rsplit("/", 1)[-1] for k in listing["keys"] if k.endswith(".pt")})
        return (f"{url}: {len(listing['keys'])} objects; checkpoints {', '.join(steps + files)}; latest.json "
                f"{(listing['latest'] or '').strip()[:200]}")

    def close(self) -> None:
        import signal

        os.killpg(self.server.pid, signal.SIGTERM)
        self.server.wait(10)


def node_loss(work: Path, data: Path, rows=NODE_LOSS, *, s3: bool = False) -> None:
    """N nodes, 2 epochs, checkpoint every 4 steps; node K (agent and workers) SIGKILLed once rank 0 has logged
    step KILL_AT; a replacement node K is started (in the same namespace: the same address); the surviving node's
    torchrun restarts the job (--max-restarts 1) and every rank resumes from the last checkpoint (--resume auto).
    Reference: one node of N x ranks, uninterrupted, same flags (the same global batch).

    ``s3``: the rehearsal's checkpoints go to ``--checkpoint-dir s3://bench/<row>`` on moto's S3 server (:class:`_S3`;
    the run directory stays local); after the job the prefix is copied from inside node 0's namespace into the run's
    ``checkpoints`` folder, so the final DCP weights are compared as for a local run. The reference (one node, in the
    root namespace, which must send nothing off loopback) keeps its checkpoints local: they do not change its losses."""
    env = {**base_env(work), "TORCHPORT_FAULT_STEP_DELAY_S": "0.4"}
    extra = ("--checkpoint-every", "4", "--resume", "auto")
    print("\n| fault | job | surviving node | killed node | replacement node | steps lost | result vs uninterrupted | "
          "wall (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for label, nnodes, nproc, device, strategy, victim, kill_at in rows:
        tag = f"loss-{strategy}-{device}-{nnodes}x{nproc}"
        emulate = f"npu:{nproc}" if device == "npu" else None
        ref_dir, el_dir = work / f"{tag}-ref", work / f"{tag}-elastic"
        steps_total = 2 * (96 // (4 * nnodes * nproc))
        ref, t_ref = one_node([FAULT_TRAIN, *train_args(data, ref_dir, device=device, strategy=strategy, epochs=2,
                                                        extra=extra)],
                              nnodes * nproc, env, f"npu:{nnodes * nproc}" if emulate else None)
        t0 = time.monotonic()
        with Rehearsal(net=NET, nnodes=nnodes, nproc=nproc, emulate=emulate, workdir=work / f"{tag}-nodes", env=env,
                       join_timeout=120, max_restarts=1) as rh:
            store = _S3(rh) if s3 else None
            try:
                el_extra = extra
                if store is not None:
                    url = f"s3://bench/{tag}"
                    made = store.run("bucket", url, env=env)
                    if made.returncode != 0:
                        print(f"| {label} | S3 server not ready: {last_line(made.stderr)} | | | | | | |")
                        continue
                    rh.env.update(store.env)
                    el_extra = (*extra, "--checkpoint-dir", url)
                program = [FAULT_TRAIN, *train_args(data, el_dir, device=device, strategy=strategy, epochs=2,
                                                    extra=el_extra)]
                rh.start(program)
                seen = wait_for_step(rh.nodes[0].log, kill_at, deadline=t0 + 400)
                rh.kill(rh.nodes[victim])
                t_kill = time.monotonic() - t0
                rh.start_node(victim, program, tag="-replacement")
                results = rh.wait(timeout=600)
                if store is not None:
                    print(f"<!-- {store.fetch(url, el_dir / 'checkpoints', env)} -->", flush=True)
            finally:
                if store is not None:
                    store.close()
        t_el = time.monotonic() - t0
        a, b = step_losses(el_dir), step_losses(ref_dir)
        lines, at = _resumed_at(results[0].output if victim else results[1].output)
        lost = f"{seen - at} (logged {seen}, resumed at {at})" if at is not None else f"? (logged {seen}, no resume line)"
        survivors = [r for r in results[:nnodes] if r.rank != victim]
        print(f"| node {victim} of {nnodes} SIGKILLed (agent + workers) after step {seen} of {steps_total}; "
              f"replacement started | {label}, {nnodes}x{nproc}, `--max-restarts 1 --resume auto`, checkpoint every 4 | "
              + "; ".join(f"node {r.rank}: {_said(r)}" + "".join(f"; {ln}" for ln in _resumed_at(r.output)[0][-1:])
                          for r in survivors)
              + f" | killed at {t_kill:.1f} s (exit {results[victim].returncode}) | {_said(results[-1])} | {lost} | "
              f"per-step losses: max diff {max_abs_diff(a, b):.1e} over {len(a)} steps (reference {len(b)}, exit "
              f"{ref.returncode}); final weights: {final_weights_diff(el_dir, ref_dir)} | "
              f"{t_el:.1f} (uninterrupted 1 node: {t_ref:.1f}) |", flush=True)
        for r in results:
            if r.returncode not in (0, None):
                print(f"<!-- node {r.rank}: {r.output[-2500:]} -->")


#: --only wrongaddr: (case, node, its variables) -- ``X`` is the rehearsal's 10.213.x prefix
WRONG_ADDR = [("MASTER_ADDR in the nodes' /24 that no node has (no ARP answer)", 1,
               {"MASTER_ADDR": "X.99", "PET_MASTER_ADDR": "X.99"}),
              ("MASTER_ADDR off every node's network (no route)", 1,
               {"MASTER_ADDR": "10.214.0.1", "PET_MASTER_ADDR": "10.214.0.1"}),
              ("HCCL_IF_IP / node address that node 1 does not have", 1,
               {"HCCL_IF_IP": "X.77", "TORCHPORT_NODE_ADDR": "X.77"}),
              ("HCCL_IF_IP / node address that node 0 does not have", 0,
               {"HCCL_IF_IP": "X.77", "TORCHPORT_NODE_ADDR": "X.77"})]


def wrong_address(work: Path, data: Path, join_timeout: float = 10, connect_timeout: float = 5) -> None:
    """2 nodes x 1 rank, ddp on cpu, one node started with a wrong address variable (WRONG_ADDR): what each node
    prints last, its exit code and when it ended (every case must end by the join / connect timeout)."""
    print(f"\n| wrong variable (join timeout {join_timeout:g} s, connect timeout {connect_timeout:g} s) | node 0 | "
          "node 1 |")
    print("|---|---|---|")
    for n, (case, rank, bad) in enumerate(WRONG_ADDR):
        with Rehearsal(net=NET, nnodes=2, nproc=1, workdir=work / f"wrongaddr-{n}", env=base_env(work),
                       join_timeout=join_timeout, connect_timeout=connect_timeout) as rh:
            x = rh.address(0).rsplit(".", 1)[0]
            rh.overrides = {rank: {k: v.replace("X", x) for k, v in bad.items()}}
            t0 = time.monotonic()
            rh.start(["train", *train_args(data, work / f"wrongaddr-{n}" / "run", device="cpu", strategy="ddp")])
            ends = {}
            while len(ends) < 2 and time.monotonic() - t0 < 300:
                for node in rh.nodes:
                    if node.rank not in ends and node.proc.poll() is not None:
                        ends[node.rank] = time.monotonic() - t0
                time.sleep(0.1)
            results = rh.wait(timeout=5)
        shown = ", ".join(f"{k}={v.replace('X', '10.213.x')}" for k, v in bad.items())
        print(f"| node {rank}: {shown} ({case}) | "
              + " | ".join(f"exit {r.returncode} after {ends.get(r.rank, float('nan')):.1f} s: `{last_line(r.output)}`"
                           for r in results) + " |", flush=True)


def node0_loss(work: Path, data: Path) -> None:
    """2 nodes x 1 rank, ddp on cpu, checkpoint every 4 steps, --max-restarts 1: node 0 -- the rendezvous host --
    SIGKILLed mid-epoch. torchrun's c10d store lives in node 0's agent, so node 1 cannot re-rendezvous: what does
    node 1 print, with what exit code, how long after the kill? Then the whole job is started again (what a
    scheduler does) with --resume auto: it resumes from the last committed checkpoint; compared with an
    uninterrupted run."""
    env = {**base_env(work), "TORCHPORT_FAULT_STEP_DELAY_S": "0.4"}
    extra = ("--checkpoint-every", "4", "--resume", "auto")
    ref_dir, el_dir = work / "loss0-ref", work / "loss0-run"
    ref, t_ref = one_node([FAULT_TRAIN, *train_args(data, ref_dir, device="cpu", strategy="ddp", epochs=2,
                                                    extra=extra)], 2, env, None)
    program = [FAULT_TRAIN, *train_args(data, el_dir, device="cpu", strategy="ddp", epochs=2, extra=extra)]
    kill_at = 10
    t0 = time.monotonic()
    with Rehearsal(net=NET, nnodes=2, nproc=1, workdir=work / "loss0-nodes", env=env, join_timeout=120,
                   max_restarts=1, connect_timeout=20) as rh:
        rh.start(program)
        seen = wait_for_step(rh.nodes[0].log, kill_at, deadline=t0 + 300)
        rh.kill(rh.nodes[0])
        t_kill = time.monotonic()
        results = rh.wait(timeout=300)
    node1 = results[1]
    t_node1 = node1.seconds - (t_kill - t0)
    t1 = time.monotonic()
    with Rehearsal(net=NET, nnodes=2, nproc=1, workdir=work / "loss0-rerun", env=env, join_timeout=120) as rh:
        rh.start(program)
        rerun = rh.wait(timeout=600)
    t_rerun = time.monotonic() - t1
    a, b = step_losses(el_dir), step_losses(ref_dir)
    lines, at = _resumed_at(rerun[0].output)
    print("\n| fault | node 0 (killed) | node 1 | the job started again (`--resume auto`) | steps lost | "
          "result vs uninterrupted |")
    print("|---|---|---|---|---|---|")
    print(f"| node 0 (rendezvous store host) SIGKILLed after step {seen} of 24; 2x1 ddp cpu/gloo, `--max-restarts 1` | "
          f"killed at {t_kill - t0:.1f} s (exit {results[0].returncode}) | {_said(node1)} ({t_node1:.1f} s after the "
          f"kill) | node 0: {_said(rerun[0])}; {lines[-1] if lines else 'no resume line'}; node 1: exit "
          f"{rerun[1].returncode}; {t_rerun:.1f} s | "
          f"{f'{seen - at} (logged {seen}, resumed at {at})' if at is not None else '?'} | per-step losses: max diff "
          f"{max_abs_diff(a, b):.1e} over {len(a)} steps (reference {len(b)}); final weights: "
          f"{final_weights_diff(el_dir, ref_dir)} |", flush=True)
    print(f"<!-- node 1 after node 0 was lost, last 3000 chars:\n{node1.output[-3000:]}\n-->")


def hung_rank(work: Path, data: Path, timeout_s: float = 10) -> None:
    """2 nodes x 2 ranks, cpu ddp: rank 1 (node 0) stops answering after step 3; every other rank waits in its
    next all-reduce until TORCHPORT_COLLECTIVE_TIMEOUT_S."""
    env = {**base_env(work), "TORCHPORT_FAULT_HANG": "1:3", "TORCHPORT_COLLECTIVE_TIMEOUT_S": f"{timeout_s:g}"}
    t0 = time.monotonic()
    with Rehearsal(net=NET, nnodes=2, nproc=2, workdir=work / "hang-nodes", env=env, join_timeout=120) as rh:
        rh.start([FAULT_TRAIN, *train_args(data, work / "hang-run", device="cpu", strategy="ddp")])
        results = rh.wait(timeout=300)
    t = time.monotonic() - t0
    print(f"\n| one rank hung (rank 1 on node 0 after step 3), TORCHPORT_COLLECTIVE_TIMEOUT_S={timeout_s:g} | "
          + " | ".join(f"node {r.rank}: exit {r.returncode} after {r.seconds:.1f} s; "
                       + "; ".join(sorted({ln.strip()[:200] for ln in r.output.splitlines()
                                           if ln.startswith("torchport ") and "error" in ln}))
                       for r in results) + f" | wall {t:.1f} s |", flush=True)
    for r in results:
        if r.returncode is None:
            print(f"<!-- node {r.rank} still running at the timeout: {r.output[-2500:]} -->")


# ------------------------------------------------------------------------------------------------------- envs
ENVS = {
    "Slurm (srun --ntasks-per-node 1)": {"SLURM_JOB_ID": "184242", "SLURM_NNODES": "3", "SLURM_NODEID": "1",
                                         "SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_NODELIST": "gpu[07-09]",
                                         "SLURM_NTASKS_PER_NODE": "1"},
    "Kubeflow PyTorchJob (elastic, PET_*)": {"PET_NNODES": "4", "PET_NODE_RANK": "3", "PET_NPROC_PER_NODE": "8",
                                             "PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456"},
    "Kubeflow PyTorchJob (per pod)": {"MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2",
                                      "RANK": "1"},
    "Volcano (VC_*)": {"VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "job-worker-0.job,job-worker-1.job",
                       "VC_WORKER_NUM": "2"},
    "ModelArts (MA_*)": {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1", "MA_NUM_GPUS": "8",
                         "VC_WORKER_HOSTS": "modelarts-job-worker-0.modelarts-job,modelarts-job-worker-1.modelarts-job"},
}


def envs(work: Path) -> None:
    import json

    table = {"version": "1.0", "server_count": "2", "status": "completed", "server_list": [
        {"server_id": f"192.168.1.{i + 10}", "device": [{"device_id": str(d), "device_ip": f"10.0.{i}.{d}",
                                                      "rank_id": str(i * 8 + d)} for d in range(8)]}
        for i in range(2)]}
    rt = work / "rank_table.json"
    rt.write_text(json.dumps(table))
    cases = dict(ENVS)
    cases["HCCL rank table (RANK_TABLE_FILE)"] = {"RANK_TABLE_FILE": str(rt), "HCCL_IF_IP": "192.168.1.11"}
    cases["none (one standalone node)"] = {}
    print("\n| environment | variables | `torchport launch --dry-run -- train` | exit |")
    print("|---|---|---|---|")
    clean = {k: v for k, v in base_env(work).items()
             if not k.startswith(("PET_", "SLURM_", "MA_", "VC_")) and k not in
             ("RANK_TABLE_FILE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK")}
    for name, variables in cases.items():
        out = subprocess.run([PY, "-m", "torchport", "launch", "--device", "cpu", "--dry-run", "--", "train"],
                             env={**clean, **variables}, capture_output=True, text=True, timeout=120)
        cmd = out.stdout.strip().replace(PY, "python")
        shown = " ".join(f"{k}={v}" for k, v in variables.items() if k != "RANK_TABLE_FILE") or "(none)"
        if "RANK_TABLE_FILE" in variables:
            shown = "RANK_TABLE_FILE=rank_table.json (2 servers x 8) " + shown
        print(f"| {name} | `{shown}` | `{cmd or last_line(out.stderr)}` | {out.returncode} |", flush=True)


# ------------------------------------------------------------------------------------------------------- data
DATA_WORKER = str(ROOT / "benchmarks" / "cluster_data_worker.py")


def cluster_data(work: Path, node_counts=(1, 2, 3)) -> None:
    """Issue 33 #5: N nodes x 1 rank read a jpeg shard set from moto's S3 server for 2 epochs through torchport's
    loader (shard-aware order) and each node's own block cache. The server listens inside the rehearsal's bridge
    namespace (10.213.x.254; --net netns) or on 127.0.0.1 (loopback). Measured per epoch: samples and images/s per
    node, bytes the nodes fetched from the store (growth of the node caches: every fetched block lands there once
    per node), the share of the blocks a node's reads touched that its cache already held (hit rate)."""
    from torchport.data.synth import make_dataset

    src = work / "data-shapes"
    if not src.exists():
        make_dataset(src, classes=4, train_per_class=384, val_per_class=4, size=64)
    print("\n| nodes x ranks | samples per epoch (all nodes; dataset) | images/s per node, epoch 1 / epoch 2 | "
          "bytes from the store: opening the data (x dataset) | epoch 1 | epoch 2 | fetched, never read (epochs 1+2) | "
          "epoch-2 cache hit rate per node | exit codes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for nnodes in node_counts:
        tag = f"data-{nnodes}"
        with Rehearsal(net=NET, nnodes=nnodes, nproc=1, workdir=work / tag, env={}, join_timeout=120) as rh:
            store = _S3(rh)
            env = {**base_env(work), **store.env, "TORCHPORT_STORAGE_BLOCK_MB": "0.0625",
                   "BENCH_SHARD_BYTES": str(1 << 19)}
            rh.env.update(env)
            try:
                url = "s3://bench/shapes"
                made = store.run("setup", url, str(src / "train"), env={**env, "TORCHPORT_CACHE": str(work / tag / "pack")})
                if made.returncode != 0:
                    print(f"| {nnodes}x1 | setup failed: {last_line(made.stderr)} | | | | | | | |")
                    continue
                out = work / tag / "records.json"
                rh.start([DATA_WORKER, "read", url, str(out)])
                results = rh.wait(timeout=600)
            finally:
                store.close()
        codes = "/".join(str(r.returncode) for r in results)
        if not out.is_file():
            print(f"| {nnodes}x1 | no records | | | | | | | {codes} |")
            for r in results:
                print(f"<!-- node {r.rank}: {r.output[-2000:]} -->")
            continue
        rec = json.loads(out.read_text())
        D = rec["dataset_bytes"]
        by = {(r["epoch"], r["node"]): r for r in rec["records"]}

        def fetched(e):
            tot = 0
            for n in range(nnodes):
                r = by[(e, n)]
                tot += sum(sz for f, sz in r["after"].items() if f not in r["before"])
            return tot

        def unread(e):     # blocks an epoch fetched into a node's cache that none of that node's reads touched
            return sum(sz for n in range(nnodes) for r in [by[(e, n)]] for f, sz in r["after"].items()
                       if f not in r["before"] and f not in set(r["touched"]))

        def hit(e, n):
            r = by[(e, n)]
            return sum(1 for f in r["touched"] if f in r["before"]) / max(1, len(r["touched"]))

        samples = [sum(by[(e, n)]["samples"] for n in range(nnodes)) for e in (0, 1)]
        speed = "; ".join(f"n{n}: {by[(0, n)]['samples'] / by[(0, n)]['seconds']:.0f} / "
                          f"{by[(1, n)]['samples'] / by[(1, n)]['seconds']:.0f}" for n in range(nnodes))
        f0, f1, f2 = fetched(-1), fetched(0), fetched(1)
        print(f"| {nnodes}x1 | {samples[0]} / {samples[1]} ({rec['num_samples']}) | {speed} | "
              f"{f0 / 1e3:.0f} kB ({f0 / D:.2f}) | {f1 / 1e3:.0f} kB ({f1 / D:.2f}) | {f2 / 1e3:.0f} kB ({f2 / D:.2f}) | "
              f"{(unread(0) + unread(1)) / 1e3:.0f} kB ({(unread(0) + unread(1)) / D:.2f}) | "
              + ", ".join(f"n{n}: {hit(1, n):.0%}" for n in range(nnodes))
              + f" | {codes} |", flush=True)
        print(f"<!-- dataset {D} bytes in {len(rec['shards']) if 'shards' in rec else '?'} shards; block {rec['block']} B; "
              f"epoch-1 hit rates: {', '.join(f'{hit(0, n):.0%}' for n in range(nnodes))} -->", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="envs,faults,matrix")
    ap.add_argument("--quick", action="store_true", help="matrix: the first 3 rows only")
    ap.add_argument("--work", default=None)
    ap.add_argument("--net", choices=("netns", "loopback"), default="netns",
                    help="the nodes' network: a Linux network namespace each (default) or 127.0.0.x loopback")
    ns = ap.parse_args()
    global NET
    NET = ns.net
    work = Path(ns.work or tempfile.mkdtemp(prefix="bench_cluster-"))
    from torchport.data.synth import make_dataset

    data = work / "shapes"
    if not data.exists():
        make_dataset(data, classes=4, train_per_class=24, val_per_class=4, size=16)
    import torch
    from torchport.cluster import netns

    why = netns.unavailable() if NET == "netns" else None
    net = f"network namespaces ({netns.PREFIX}<pid>x<n>-n<i>, 10.213.<x>.0/24 on a bridge)" if NET == "netns" and \
        why is None else f"loopback 127.0.0.x{f' (network namespaces unavailable: {why})' if why else ''}"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"# bench_cluster: commit {commit}, {os.cpu_count()} cores, torch {torch.__version__}, nodes on {net}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, work dir {work}")
    only = ns.only.split(",")
    if "envs" in only:
        envs(work)
    if "faults" in only or "loss" in only:
        node_loss(work, data)
    if "wrongaddr" in only:
        wrong_address(work, data)
    if "loss-s3" in only:
        node_loss(work, data, NODE_LOSS_S3, s3=True)
    if "faults" in only or "loss0" in only:
        node0_loss(work, data)
    if "faults" in only or "hang" in only:
        hung_rank(work, data)
    if "matrix" in only:
        matrix(work, data, ns.quick)
    if "matrix-s3" in only:
        matrix(work, data, ns.quick, s3=True)
    if "data" in only:
        cluster_data(work)


if __name__ == "__main__":
    main()
