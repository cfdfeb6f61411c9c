"""``torchport launch``: this node's torchrun command from the scheduler's environment, run, its failures in one line.

torchrun stays the engine (TorchElastic agent, c10d rendezvous, ``--max-restarts``); this module builds its
command from a :class:`~torchport.cluster.environments.NodePlan`, passes torchrun's output through unchanged and,
when torchrun fails, adds one line saying what went wrong across the nodes:

* the other nodes never arrived (``RendezvousTimeoutError`` after the join timeout) -- how many were expected,
  the endpoint, this node's rank;
* the rendezvous endpoint cannot be reached (wrong ``MASTER_ADDR`` / port, node 0 not started);
* the rendezvous store went away while the job ran (node 0, whose agent hosts the c10d store, was lost): torchrun
  cannot re-rendezvous without it, so the job ends on every surviving node;
* before torchrun starts, :func:`local_address_problem`: ``HCCL_IF_IP`` or the address this node advertises
  (``--local-addr``: ``TORCHPORT_NODE_ADDR``, ``MA_CURRENT_IP``, a rank table's ``HCCL_IF_IP``) is not an
  address of this node -- exit 2 at once (on CPU/gloo with a pinned ``GLOO_SOCKET_IFNAME`` such a job would run
  and silently advertise an address nobody can reach; HCCL would fail to bind it);
* a worker failed (a rank died, a node was lost and the restarts ran out) -- the ranks and exit codes torchrun
  reported.

Exit codes: 0 the job succeeded; 2 bad scheduler variables or options; 8 the rendezvous failed or the job's
workers failed (:data:`~torchport.errors.ExitCode.DISTRIBUTED`).

Example::

    cmd = torchrun_command(detect(), ["train", "--epochs", "1"], nproc_per_node=2)
    # [python, -m, torch.distributed.run, --nnodes, 2, ..., -m, torchport, train, --epochs, 1]
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from typing import Sequence

from torchport.cluster.environments import NodePlan
from torchport.errors import ConfigError

__all__ = ["torchrun_command", "torchrun_env", "program_args", "run_torchrun", "explain_failure", "TORCHPORT_VERBS",
           "local_address_problem"]

#: Words after ``--`` that are torchport verbs: ``launch -- train ARGS`` runs ``-m torchport train ARGS``.
TORCHPORT_VERBS = ("train", "check", "run", "bench", "profile")


def program_args(program: Sequence[str]) -> list[str]:
    """What torchrun runs on every rank: a torchport verb (``train ...`` -> ``-m torchport train ...``), a module
    (``-m pkg ...``) or a script (``script.py ...``).

    Raises:
        ConfigError: nothing after ``--``."""
    prog = list(program)
    if not prog:
        raise ConfigError("nothing to run; give the program after --, e.g. torchport launch -- train --epochs 1")
    if prog[0] in TORCHPORT_VERBS:
        return ["-m", "torchport", *prog]
    if prog[0] == "-m":
        if len(prog) < 2:
            raise ConfigError("-m needs a module name")
        return prog
    return ["--no-python", *prog] if not prog[0].endswith(".py") else prog


def torchrun_command(plan: NodePlan, program: Sequence[str], *, nproc_per_node: int | None = None,
                     max_restarts: int = 0, join_timeout: float | None = None, connect_timeout: float | None = None,
                     is_host: bool | None = None, python: str | None = None) -> list[str]:
    """The full command: ``python -m torch.distributed.run <this node's args> <program>``."""
    return [python or sys.executable, "-m", "torch.distributed.run",
            *plan.torchrun_args(nproc_per_node=nproc_per_node, max_restarts=max_restarts, join_timeout=join_timeout,
                                connect_timeout=connect_timeout, is_host=is_host), *program_args(program)]


def explain_failure(plan: NodePlan, text: str, rc: int, *, join_timeout: float | None = None) -> str | None:
    """One line for a failed torchrun, from its output ``text`` (None when there is nothing to add)."""
    where = f"node {plan.node_rank} of {plan.nnodes}, rendezvous {plan.rdzv_id!r} at {plan.endpoint}"
    if "RendezvousTimeoutError" in text:
        waited = f" within {join_timeout:g} s" if join_timeout is not None else " within the join timeout"
        return (f"{where}: the job needs {plan.nnodes} node(s) and not all of them joined{waited}; start torchport "
                f"launch on every node (same --rdzv-id), or check that they reach {plan.endpoint}")
    if "RendezvousConnectionError" in text and any(s in text for s in (
            "Connection was likely closed", "got 0 bytes", "num_nodes_waiting")):
        # the store answered before and is gone now: node 0 (whose agent hosts it) was lost while the job ran
        return (f"{where}: lost the rendezvous store at {plan.endpoint} while the job ran (node 0, whose torchrun "
                "agent hosts it, stopped or is unreachable); the job cannot continue without it: start it again on "
                "every node (train --resume auto resumes from the last committed checkpoint)")
    if any(s in text for s in ("RendezvousConnectionError", "DistNetworkError", "failed to connect",
                               "Connection refused")) and "ChildFailedError" not in text:
        return (f"{where}: cannot reach the rendezvous endpoint {plan.endpoint} ({plan.origin.get('master_addr', 'address')}); "
                "check the address and port (MASTER_ADDR / MASTER_PORT, HCCL_IF_IP) and that node 0 is running")
    failed = sorted(set(re.findall(r"rank\s*:\s*(\d+) \(local_rank: (\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)", text)),
                    key=lambda t: int(t[0]))
    if failed:
        parts = ", ".join(f"rank {r} " + (f"exit {c}" if int(c) >= 0 else f"signal {-int(c)}") for r, _, c in failed[:4])
        return f"{where}: worker(s) failed ({parts}); their own error lines are above"
    return None


def _is_local(addr: str) -> bool:
    """Whether ``addr`` (an IP or a host name) is an address of this host: a socket can bind it (no packet sent)."""
    import socket

    try:
        infos = socket.getaddrinfo(addr, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    for family, _type, _proto, _name, sockaddr in infos:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((sockaddr[0], 0))
            return True
        except OSError:
            continue
    return False


def local_address_problem(plan: NodePlan, environ: dict | None = None) -> str | None:
    """One line when, in a job of several nodes, ``HCCL_IF_IP`` or the address this node advertises to the others
    (``plan.local_addr``) is not an address of this node (it does not bind here); None when they are, or unset."""
    import os

    env = os.environ if environ is None else environ
    if plan.nnodes <= 1:
        return None
    checks = [("HCCL_IF_IP", (env.get("HCCL_IF_IP") or "").strip())]
    if plan.local_addr:
        checks.append((plan.origin.get("local_addr") or "--local-addr", plan.local_addr))
    for var, addr in checks:
        if addr and not _is_local(addr):
            from torchport.cluster.doctor import interfaces

            have = ", ".join(f"{a} ({n})" for n, a in sorted(interfaces().items())) or "none"
            shown = f"--local-addr {addr}" if var in ("command line", "--local-addr") else f"{var}={addr}"
            return (f"node {plan.node_rank} of {plan.nnodes}: {shown} is not an address of this node (its addresses: "
                    f"{have}); set it to this node's address on the cluster network (ip -4 addr), or unset it")
    return None


#: torchrun's switch off its TCP-store sharing between the rendezvous and the workers (torch >= 2.4 shares it).
NO_SHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


def torchrun_env(plan: NodePlan, *, max_restarts: int = 0, environ: dict | None = None) -> dict[str, str]:
    """torchrun's environment for this node: ``environ`` (default ``os.environ``) plus, for a job of several nodes
    that may restart, ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (unless set already).

    Why: with the shared store, a *replacement* node (a new agent after a node was lost) waits for the workers'
    ``MASTER_ADDR`` of the new rendezvous round, which the surviving node 0 never writes again (it keeps its
    store from the first round): both sides time out after 60 s (``DistStoreError: wait timeout``, measured
    with torch 2.14 in benchmarks/bench_cluster.py). Without sharing, every round publishes a fresh worker store."""
    import os

    env = dict(os.environ if environ is None else environ)
    if plan.nnodes > 1 and max_restarts > 0:
        env.setdefault(NO_SHARED_STORE, "1")
    return env


def run_torchrun(cmd: list[str], plan: NodePlan, *, join_timeout: float | None = None, env: dict | None = None) -> int:
    """Run ``cmd`` (torchrun), its stdout passed through, its stderr passed through and kept (last 64 kB) to explain
    a failure; SIGTERM / SIGINT are forwarded to torchrun (which stops its workers). Returns torchrun's exit code,
    or 8 with one more line on stderr when the job failed across the nodes."""
    from torchport.errors import ExitCode

    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env=env)
    previous = {}

    def forward(signum, _frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, forward)
        except ValueError:          # not the main thread
            pass
    tail = bytearray()
    try:
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, b""):
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
            tail += line
            del tail[:-65536]
        rc = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if rc == 0:
        return 0
    line = explain_failure(plan, tail.decode("utf-8", "replace"), rc, join_timeout=join_timeout)
    if line is None:
        return rc
    from torchport.cli._common import error_line

    error_line("launch", line)
    return int(ExitCode.DISTRIBUTED)
