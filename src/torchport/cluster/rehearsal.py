"""A multi-node rehearsal on one machine: N "nodes", each a ``torchport launch`` (so a torchrun agent) with its own
address (in a network namespace of its own, or on loopback), its own emulated npus or CPU ranks, its own
node-local cache, one c10d rendezvous.

What a node gets (the variables a Kubeflow PyTorchJob pod gets, so the run goes through ``torchport launch`` and
its ``kubeflow`` environment): ``PET_NNODES``, ``PET_NODE_RANK``, ``PET_NPROC_PER_NODE``, ``PET_MASTER_ADDR`` /
``PET_MASTER_PORT`` (node 0), ``TORCHPORT_NODE_ADDR`` = its address (the one the agent advertises;
``127.0.0.<rank + 1>`` on loopback), ``GLOO_SOCKET_IFNAME`` (gloo, and the emulated hccl over it, binds that
interface: ``lo`` on loopback), ``TORCHPORT_CACHE`` = a folder of its own, and ``TORCHPORT_EMULATE=<emulate>``
when given (emulated accelerators per node, e.g. 2 per node). ``overrides={rank: {var: value}}`` is set last on
that node (a rehearsed mistake: a wrong ``MASTER_ADDR`` or ``HCCL_IF_IP`` on one node).

``net="loopback"`` (the default): every address is loopback, nothing is sent outside this host.
``net="netns"``: each node runs in a Linux network namespace of its own (:mod:`torchport.cluster.netns`: a bridge
namespace, one namespace per node, a veth pair each, ``10.213.<x>.<rank + 1>/24`` inside the node's namespace
only, ``lo`` up), its launcher started through ``ip netns exec``; the rendezvous endpoint is node 0's namespace
address, and the node gets what a cluster node would: ``MASTER_ADDR`` / ``PET_MASTER_ADDR`` = node 0's address,
``HCCL_IF_IP`` = ``TORCHPORT_NODE_ADDR`` = its own, ``GLOO_SOCKET_IFNAME=tpnet0``. The namespaces are removed
when the rehearsal ends. Where namespaces cannot be made (not root, no ``ip``), the rehearsal says so in one line
on stderr (also in :attr:`Rehearsal.net_note`) and uses loopback; :attr:`Rehearsal.net` is what was used.

Example::

    from torchport.cluster.rehearsal import Rehearsal
    with Rehearsal(nnodes=2, nproc=2, emulate=EMULATE_SPEC, workdir="/tmp/rh") as rh:
        rh.start(["train", "--epochs", "1", "--run-dir", "/tmp/rh/run"])
        results = rh.wait(timeout=600)          # [NodeResult(rank, returncode, output), ...]
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from torchport.train.metrics import step_losses  # noqa: F401  (re-exported: the rehearsal compares runs by it)

__all__ = ["Rehearsal", "NodeResult", "free_port", "node_address", "step_losses", "max_abs_diff"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_address(rank: int) -> str:
    """Node ``rank``'s loopback address: 127.0.0.1, 127.0.0.2, ..."""
    return f"127.0.0.{rank + 1}"


@dataclass
class NodeResult:
    """One node's end: its launcher's exit code (None: still running when killed) and everything it printed."""

    rank: int
    returncode: int | None
    output: str
    seconds: float = 0.0


@dataclass
class _Node:
    rank: int
    proc: subprocess.Popen
    log: Path
    started: float
    killed: bool = False


@dataclass
class Rehearsal:
    """N nodes of ``nproc`` ranks each, on loopback or in network namespaces (see the module docstring). A context
    manager: on exit every node still running is killed (agent and workers) and the namespaces are removed."""

    nnodes: int
    nproc: int = 1
    emulate: str | None = None
    workdir: str | os.PathLike = "."
    port: int = field(default_factory=free_port)
    join_timeout: float = 60.0
    connect_timeout: float | None = None
    max_restarts: int = 0
    env: dict = field(default_factory=dict)
    rdzv_id: str = "rehearsal"
    net: str = "loopback"
    overrides: dict = field(default_factory=dict)   # {rank: {var: value}}: set last (a node's wrong variable)
    nodes: list = field(default_factory=list)
    netns: object = None            # the NetNamespaces when net == "netns"
    net_note: str = ""

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.net not in ("loopback", "netns"):
            raise ValueError(f"net={self.net!r}: netns or loopback")
        if self.net == "netns":
            from torchport.cluster import netns

            why = netns.unavailable()
            if why is None:
                try:
                    self.netns = netns.create(self.nnodes)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:     # ip refused, or hung
                    why = str(exc)
            if why is not None:
                self.net = "loopback"
                self.net_note = (f"torchport rehearsal: warning: network namespaces unavailable ({why}); the {self.nnodes} "
                                 "nodes use loopback addresses 127.0.0.x instead")
                print(self.net_note, file=sys.stderr, flush=True)

    def address(self, rank: int) -> str:
        """Node ``rank``'s address: in its namespace (net="netns") or on loopback."""
        return self.netns.address(rank) if self.netns is not None else node_address(rank)

    def node_env(self, rank: int) -> dict[str, str]:
        """The environment of node ``rank`` (what its scheduler would set, and its own cache)."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "SLURM_", "MA_", "VC_"))
                and k not in ("RANK_TABLE_FILE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                              "TORCHELASTIC_RUN_ID", "TORCHPORT_EMULATE")}
        base.update(self.env)
        base.update({"PET_NNODES": str(self.nnodes), "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": str(self.nproc),
                     "PET_MASTER_ADDR": self.address(0), "PET_MASTER_PORT": str(self.port), "PET_RDZV_ID": self.rdzv_id,
                     "TORCHPORT_NODE_ADDR": self.address(rank), "GLOO_SOCKET_IFNAME": "lo",
                     "TORCHPORT_CACHE": str(self.workdir / f"node{rank}" / "cache")})
        if self.netns is not None:       # what a cluster node has: node 0's address, its own interface and address
            from torchport.cluster.netns import IFNAME

            base.update({"MASTER_ADDR": self.address(0), "MASTER_PORT": str(self.port),
                         "HCCL_IF_IP": self.address(rank), "GLOO_SOCKET_IFNAME": IFNAME})
        base.setdefault("OMP_NUM_THREADS", "1")
        base.setdefault("PYTHONUNBUFFERED", "1")      # node logs line by line (a test watches them)
        if self.emulate:
            base["TORCHPORT_EMULATE"] = self.emulate
        base.update(self.overrides.get(rank, {}))
        return base

    def command(self, rank: int, program: Sequence[str]) -> list[str]:
        """``python -m torchport launch`` for node ``rank`` (node 0 hosts the rendezvous store), through
        ``ip netns exec`` in its namespace when there is one."""
        prefix = self.netns.exec_prefix(rank) if self.netns is not None else []
        cmd = [*prefix, sys.executable, "-m", "torchport", "launch", "--env", "kubeflow", "--join-timeout",
               f"{self.join_timeout:g}", "--host-store" if rank == 0 else "--no-host-store"]
        if self.max_restarts:
            cmd += ["--max-restarts", str(self.max_restarts)]
        if self.connect_timeout:
            cmd += ["--connect-timeout", f"{self.connect_timeout:g}"]
        return [*cmd, "--", *program]

    def start_node(self, rank: int, program: Sequence[str], *, tag: str = "") -> _Node:
        """Start node ``rank`` (again, as a replacement, with ``tag`` naming its log)."""
        (self.workdir / f"node{rank}").mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"node{rank}{tag}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen(self.command(rank, program), env=self.node_env(rank), stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True, cwd=self.workdir / f"node{rank}")
        node = _Node(rank, proc, log, time.monotonic())
        self.nodes.append(node)
        return node

    def start(self, program: Sequence[str], ranks: Sequence[int] | None = None) -> None:
        """Start every node (or ``ranks``), node 0 first."""
        for rank in (range(self.nnodes) if ranks is None else ranks):
            self.start_node(rank, program)

    def kill(self, node: _Node, sig: int = signal.SIGKILL) -> None:
        """Lose ``node``: its launcher, its torchrun agent and every worker at once, as a machine that dies.

        torchrun starts each worker in a session of its own, so the node's process group alone would leave the
        workers running: every descendant of the node's launcher is signalled (found from ``/proc``)."""
        node.killed = True
        for pid in [*_descendants(node.proc.pid), node.proc.pid]:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            os.killpg(node.proc.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> list[NodeResult]:
        """Wait for every node; kill those still running at ``timeout``. One result per started node."""
        deadline = time.monotonic() + timeout
        out = []
        for node in self.nodes:
            try:
                rc: int | None = node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(node)
                node.proc.wait()
                rc = None
            out.append(NodeResult(node.rank, rc, node.log.read_text(errors="replace"),
                                  round(time.monotonic() - node.started, 2)))
        return out

    def __enter__(self) -> "Rehearsal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill every node still running, then remove the network namespaces (if any)."""
        try:
            for node in self.nodes:
                if node.proc.poll() is None:
                    self.kill(node)
                    node.proc.wait()
        finally:
            if self.netns is not None:
                self.netns.close()


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first found in ``/proc/<pid>/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(c) for c in task.read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def max_abs_diff(a: dict[int, float], b: dict[int, float]) -> float:
    """Largest per-step loss difference (inf when the runs did not log the same steps)."""
    if set(a) != set(b) or not a:
        return float("inf")
    return max(abs(a[s] - b[s]) for s in a)
