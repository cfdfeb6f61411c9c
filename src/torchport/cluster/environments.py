"""Scheduler environments read into one node description, and that description turned into torchrun's arguments.

A cluster scheduler tells each node where it stands through environment variables (Slurm's ``SLURM_*``,
Kubeflow's PyTorchJob ``MASTER_ADDR`` / ``RANK`` / ``WORLD_SIZE`` or its elastic ``PET_*``, Volcano's ``VC_*``,
Huawei ModelArts' ``MA_*``) or a file (an HCCL rank table, ``RANK_TABLE_FILE``). Each reader below turns one of
them into a :class:`NodePlan` -- nodes, this node's rank, processes per node, the rendezvous endpoint -- and
:meth:`NodePlan.torchrun_args` turns that into the arguments of PyTorch's own launcher (torchrun with a c10d
rendezvous). torchport launches nothing itself: this is the shape of Lightning's cluster environments and
``accelerate launch``, with torchrun as the engine.

Readers are an explicit registry (:data:`ENVIRONMENTS`, tried in order; the first whose marker variable is set
wins). Inconsistent variables are one :class:`~torchport.errors.ConfigError` line naming the variable and the fix.

Example::

    from torchport.cluster.environments import detect
    plan = detect({"SLURM_JOB_ID": "4242", "SLURM_NNODES": "2", "SLURM_NODEID": "1",
                   "SLURM_JOB_NODELIST": "node[07-08]"})
    plan.torchrun_args()   # ['--nnodes', '2', '--node-rank', '1', ..., '--rdzv-endpoint', 'node07:19242', ...]
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from torchport.errors import ConfigError

__all__ = ["NodePlan", "ENVIRONMENTS", "detect", "read", "expand_hostlist", "DEFAULT_PORT"]

#: torchrun's default rendezvous port; used when the environment names no port.
DEFAULT_PORT = 29500


@dataclass(frozen=True, kw_only=True)
class NodePlan:
    """Where this node stands in the job: everything torchrun needs, and where each value came from.

    Attributes:
        source: the environment that was read (``slurm``, ``modelarts``, ...).
        nnodes: nodes in the job.
        node_rank: this node's index (0 hosts the rendezvous store).
        nproc_per_node: processes on this node; None: the launcher's option or the device count decides.
        master_addr / master_port: the rendezvous endpoint (node 0).
        rdzv_id: the job's rendezvous id (the same on every node).
        local_addr: the address this node advertises to the others (torchrun ``--local-addr``), when known.
        origin: ``{field: variable it came from}``, for ``--dry-run`` and error messages.
    """

    source: str
    nnodes: int
    node_rank: int
    nproc_per_node: int | None
    master_addr: str
    master_port: int
    rdzv_id: str = "torchport"
    local_addr: str | None = None
    origin: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        src = self.source
        if self.nnodes < 1:
            raise ConfigError(f"{src}: {self.origin.get('nnodes', 'nnodes')}={self.nnodes}: a job needs at least one node")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"{src}: node rank {self.node_rank} ({self.origin.get('node_rank', 'node_rank')}) is "
                              f"outside 0..{self.nnodes - 1} for {self.nnodes} node(s) "
                              f"({self.origin.get('nnodes', 'nnodes')}); the scheduler's variables disagree")
        if self.nproc_per_node is not None and self.nproc_per_node < 1:
            raise ConfigError(f"{src}: {self.origin.get('nproc_per_node', 'nproc_per_node')}={self.nproc_per_node}: "
                              "a node needs at least one process")
        if not 0 < self.master_port < 65536:
            raise ConfigError(f"{src}: rendezvous port {self.master_port} ({self.origin.get('master_port', 'port')}) "
                              "is not a TCP port (1..65535)")
        if not self.master_addr:
            raise ConfigError(f"{src}: no rendezvous address ({self.origin.get('master_addr', 'master address')} is empty)")

    def replace(self, **changes) -> "NodePlan":
        """A copy with ``changes`` (command-line overrides), validated again."""
        origin = {**self.origin, **{k: "command line" for k in changes}}
        return dataclasses.replace(self, origin=origin, **changes)

    @property
    def endpoint(self) -> str:
        host = f"[{self.master_addr}]" if ":" in self.master_addr else self.master_addr
        return f"{host}:{self.master_port}"

    def torchrun_args(self, *, nproc_per_node: int | None = None, max_restarts: int = 0,
                      join_timeout: float | None = None, connect_timeout: float | None = None,
                      is_host: bool | None = None) -> list[str]:
        """torchrun's arguments for this node (before the program).

        One node: ``--standalone`` (a private store on a free port). Several: a c10d rendezvous at node 0's
        endpoint; ``join_timeout`` seconds for the other nodes to arrive (torchrun's default 600);
        ``connect_timeout`` seconds to reach the endpoint's store (torchrun's ``read_timeout``, default 60);
        ``is_host`` pins which agent hosts the store (default: torchrun decides from its addresses)."""
        nproc = nproc_per_node or self.nproc_per_node
        args: list[str] = []
        if self.nnodes == 1 and self.source == "local":
            args += ["--standalone"]
        else:
            args += ["--nnodes", str(self.nnodes), "--node-rank", str(self.node_rank), "--rdzv-backend", "c10d",
                     "--rdzv-endpoint", self.endpoint, "--rdzv-id", self.rdzv_id]
            conf = []
            if join_timeout is not None:
                conf.append(f"join_timeout={join_timeout:g}")
            if connect_timeout is not None:
                conf.append(f"read_timeout={max(1, round(connect_timeout))}")
            if is_host is not None:
                conf.append(f"is_host={int(is_host)}")
            if conf:
                args += ["--rdzv-conf", ",".join(conf)]
            if self.local_addr:
                args += ["--local-addr", self.local_addr]
        if nproc is not None:
            args += ["--nproc-per-node", str(nproc)]
        if max_restarts:
            args += ["--max-restarts", str(max_restarts)]
        return args


# -- helpers ---------------------------------------------------------------------------------------------------

def _int(env: Mapping[str, str], name: str, source: str, default: int | None = None) -> int | None:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{source}: {name}={raw!r} is not an integer") from None


def _need(env: Mapping[str, str], name: str, source: str, why: str) -> str:
    raw = (env.get(name) or "").strip()
    if not raw:
        raise ConfigError(f"{source}: {name} is not set ({why}); run inside the scheduler's job or pass it explicitly")
    return raw


def _port(env: Mapping[str, str], source: str, default: int) -> tuple[int, str]:
    port = _int(env, "MASTER_PORT", source)
    return (port, "MASTER_PORT") if port is not None else (default, f"default {default}")


_RANGE = re.compile(r"^([^\[,]*)\[([^\]]+)\](.*)$")


def expand_hostlist(spec: str) -> list[str]:
    """Slurm's compressed host list (``node[01-03,07],gpu5``) as host names, in order.

    Raises:
        ConfigError: an unbalanced bracket or a backwards range."""
    hosts: list[str] = []
    depth, start = 0, 0
    parts = []
    for i, ch in enumerate(spec):      # split on commas outside brackets
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(spec[start:i])
            start = i + 1
    parts.append(spec[start:])
    if depth != 0:
        raise ConfigError(f"host list {spec!r}: unbalanced brackets")
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = _RANGE.match(part)
        if not m:
            if "[" in part or "]" in part:
                raise ConfigError(f"host list {spec!r}: cannot read {part!r}")
            hosts.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ConfigError(f"host list {spec!r}: {r!r} is not a number or a range")
            if hi and int(hi) < int(lo):
                raise ConfigError(f"host list {spec!r}: range {r!r} runs backwards")
            for n in range(int(lo), int(hi or lo) + 1):
                hosts.extend(f"{prefix}{str(n).zfill(len(lo))}{h}" for h in expand_hostlist(suffix) or [""])
    return hosts


# -- the readers -----------------------------------------------------------------------------------------------

def _slurm(env: Mapping[str, str]) -> NodePlan:
    """Slurm (one ``srun`` task per node): ``SLURM_NNODES``, ``SLURM_NODEID``, ``SLURM_JOB_NODELIST`` (the first
    host is node 0), ``SLURM_GPUS_ON_NODE``; port ``MASTER_PORT`` or 15000 + the job id's last 4 digits (as
    Lightning's SLURMEnvironment), so concurrent jobs on a node do not collide."""
    src = "slurm"
    job = _need(env, "SLURM_JOB_ID", src, "the job id names the rendezvous")
    ntasks = _int(env, "SLURM_NTASKS_PER_NODE", src)
    if ntasks is not None and ntasks > 1:
        raise ConfigError(f"slurm: SLURM_NTASKS_PER_NODE={ntasks}: torchport launch starts this node's processes "
                          "itself (torchrun); run one task per node: srun --ntasks-per-node 1 torchport launch ...")
    nnodes_var = "SLURM_NNODES" if env.get("SLURM_NNODES") else "SLURM_JOB_NUM_NODES"
    nnodes = _int(env, nnodes_var, src)
    if nnodes is None:
        raise ConfigError("slurm: neither SLURM_NNODES nor SLURM_JOB_NUM_NODES is set; run inside an allocation "
                          "(salloc / sbatch)")
    node_rank = _int(env, "SLURM_NODEID", src)
    if node_rank is None:
        raise ConfigError("slurm: SLURM_NODEID is not set (it is per node: launch with srun, not from the batch "
                          "script's shell)")
    list_var = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
    hosts = expand_hostlist(_need(env, list_var, src, "node 0 hosts the rendezvous"))
    if len(hosts) != nnodes:
        raise ConfigError(f"slurm: {list_var} names {len(hosts)} host(s) but {nnodes_var}={nnodes}; "
                          "the allocation's variables disagree")
    port, port_from = _port(env, src, 15000 + int(job[-4:]) if job[-4:].isdigit() else DEFAULT_PORT)
    gpus = _int(env, "SLURM_GPUS_ON_NODE", src)
    return NodePlan(source=src, nnodes=nnodes, node_rank=node_rank, nproc_per_node=gpus, master_addr=hosts[0],
                    master_port=port, rdzv_id=f"slurm-{job}",
                    origin={"nnodes": nnodes_var, "node_rank": "SLURM_NODEID", "master_addr": f"{list_var}[0]",
                            "master_port": port_from, "rdzv_id": "SLURM_JOB_ID",
                            **({"nproc_per_node": "SLURM_GPUS_ON_NODE"} if gpus is not None else {})})


def _kubeflow_elastic(env: Mapping[str, str]) -> NodePlan:
    """Kubeflow PyTorchJob with ``nprocPerNode`` / elastic policy: the training operator writes torchrun's own
    options as ``PET_*`` variables (``PET_NNODES``, ``PET_NODE_RANK``, ``PET_NPROC_PER_NODE``,
    ``PET_MASTER_ADDR`` / ``PET_MASTER_PORT`` or ``PET_RDZV_ENDPOINT``)."""
    src = "kubeflow"
    raw = _need(env, "PET_NNODES", src, "the number of pods")
    lo, _, hi = raw.partition(":")          # elastic "MIN:MAX": torchport launches fixed-size jobs
    if hi and lo != hi:
        raise ConfigError(f"kubeflow: PET_NNODES={raw!r} is an elastic range; torchport launch runs a fixed number "
                          "of nodes (set minReplicas = maxReplicas)")
    try:
        nnodes = int(lo)
    except ValueError:
        raise ConfigError(f"kubeflow: PET_NNODES={raw!r} is not an integer") from None
    node_rank = _int(env, "PET_NODE_RANK", src, _int(env, "RANK", src))
    if node_rank is None:
        raise ConfigError("kubeflow: neither PET_NODE_RANK nor RANK is set (the pod's index)")
    endpoint = (env.get("PET_RDZV_ENDPOINT") or "").strip()
    if endpoint:
        host, _, port_s = endpoint.rpartition(":")
        if not host or not port_s.isdigit():
            raise ConfigError(f"kubeflow: PET_RDZV_ENDPOINT={endpoint!r} is not HOST:PORT")
        addr, port, addr_from, port_from = host.strip("[]"), int(port_s), "PET_RDZV_ENDPOINT", "PET_RDZV_ENDPOINT"
    else:
        addr = (env.get("PET_MASTER_ADDR") or env.get("MASTER_ADDR") or "").strip()
        addr_from = "PET_MASTER_ADDR" if env.get("PET_MASTER_ADDR") else "MASTER_ADDR"
        port = _int(env, "PET_MASTER_PORT", src) or _int(env, "MASTER_PORT", src) or DEFAULT_PORT
        port_from = "PET_MASTER_PORT" if env.get("PET_MASTER_PORT") else "MASTER_PORT"
        if not addr:
            raise ConfigError("kubeflow: no rendezvous address: set PET_RDZV_ENDPOINT or PET_MASTER_ADDR")
    nproc = _int(env, "PET_NPROC_PER_NODE", src) if (env.get("PET_NPROC_PER_NODE") or "").isdigit() else None
    return NodePlan(source=src, nnodes=nnodes, node_rank=node_rank, nproc_per_node=nproc, master_addr=addr,
                    master_port=port, rdzv_id=(env.get("PET_RDZV_ID") or "torchport").strip(),
                    local_addr=(env.get("TORCHPORT_NODE_ADDR") or "").strip() or None,
                    origin={"nnodes": "PET_NNODES", "node_rank": "PET_NODE_RANK" if env.get("PET_NODE_RANK") else "RANK",
                            "master_addr": addr_from, "master_port": port_from,
                            **({"nproc_per_node": "PET_NPROC_PER_NODE"} if nproc else {}),
                            **({"local_addr": "TORCHPORT_NODE_ADDR"} if env.get("TORCHPORT_NODE_ADDR") else {})})


def _pytorchjob(env: Mapping[str, str]) -> NodePlan:
    """Kubeflow PyTorchJob, one process per pod (no ``nprocPerNode``): ``MASTER_ADDR`` / ``MASTER_PORT`` of the
    master pod, ``WORLD_SIZE`` pods, this pod's ``RANK``. Each pod is a node of one process unless
    ``--nproc-per-node`` says otherwise (the pod count stays the node count). Also PAI-DLC's variables."""
    src = "pytorchjob"
    nnodes = _int(env, "WORLD_SIZE", src)
    node_rank = _int(env, "RANK", src)
    if nnodes is None or node_rank is None:
        raise ConfigError("pytorchjob: MASTER_ADDR is set but WORLD_SIZE or RANK is not; the pod spec must set "
                          "all three (the training operator does)")
    port, port_from = _port(env, src, DEFAULT_PORT)
    nproc = _int(env, "NPROC_PER_NODE", src)
    return NodePlan(source=src, nnodes=nnodes, node_rank=node_rank, nproc_per_node=nproc,
                    master_addr=_need(env, "MASTER_ADDR", src, "the master pod's address"), master_port=port,
                    origin={"nnodes": "WORLD_SIZE (pods)", "node_rank": "RANK (pod index)", "master_addr": "MASTER_ADDR",
                            "master_port": port_from, **({"nproc_per_node": "NPROC_PER_NODE"} if nproc else {})})


def _task_hosts(env: Mapping[str, str], src: str) -> tuple[list[str], int, str]:
    """Volcano's host lists: ``VC_MASTER_HOSTS`` (if any) then ``VC_WORKER_HOSTS`` (or the single
    ``VC_<TASK>_HOSTS``), and this pod's index in them: its ``HOSTNAME`` when listed, else ``VC_TASK_INDEX``
    (only unambiguous with one task)."""
    tasks = sorted(k for k in env if k.startswith("VC_") and k.endswith("_HOSTS") and env[k].strip())
    if not tasks:
        raise ConfigError(f"{src}: no VC_<TASK>_HOSTS variable (enable Volcano's svc plugin on the job)")
    order = [k for k in ("VC_MASTER_HOSTS", "VC_WORKER_HOSTS") if k in tasks] or tasks
    if len(order) == 1 and len(tasks) > 1:
        raise ConfigError(f"{src}: several tasks ({', '.join(tasks)}) and neither VC_MASTER_HOSTS nor "
                          "VC_WORKER_HOSTS: name the training task 'worker' (and optionally 'master')")
    hosts = [h.strip() for k in order for h in env[k].split(",") if h.strip()]
    me = (env.get("HOSTNAME") or "").strip()
    short = [h.split(".")[0] for h in hosts]
    if me and (me in hosts or me.split(".")[0] in short):
        return hosts, (hosts.index(me) if me in hosts else short.index(me.split(".")[0])), "HOSTNAME in " + "+".join(order)
    index = _int(env, "VC_TASK_INDEX", src)
    if index is None:
        raise ConfigError(f"{src}: VC_TASK_INDEX is not set and HOSTNAME={me!r} is not in {'+'.join(order)}")
    if len(order) > 1:
        raise ConfigError(f"{src}: HOSTNAME={me!r} is not in {'+'.join(order)} and VC_TASK_INDEX={index} is ambiguous "
                          "with several tasks")
    return hosts, index, "VC_TASK_INDEX"


def _volcano(env: Mapping[str, str]) -> NodePlan:
    """Volcano job (svc + env plugins): hosts from ``VC_MASTER_HOSTS`` + ``VC_WORKER_HOSTS``, node 0 the first
    host, this pod's index from its ``HOSTNAME`` or ``VC_TASK_INDEX``; port ``MASTER_PORT`` or 23456
    (Volcano's pytorch plugin default)."""
    src = "volcano"
    hosts, index, index_from = _task_hosts(env, src)
    port, port_from = _port(env, src, 23456)
    return NodePlan(source=src, nnodes=len(hosts), node_rank=index, nproc_per_node=None, master_addr=hosts[0],
                    master_port=port, rdzv_id=(env.get("VC_JOB_NAME") or env.get("VK_TASK_NAME") or "torchport").strip()
                    or "torchport", origin={"nnodes": "VC_*_HOSTS (count)", "node_rank": index_from,
                                             "master_addr": "VC_*_HOSTS[0]", "master_port": port_from})


def _modelarts(env: Mapping[str, str]) -> NodePlan:
    """Huawei ModelArts training job: ``MA_NUM_HOSTS`` nodes, ``VC_TASK_INDEX`` this node, ``VC_WORKER_HOSTS``
    (node 0 is the first), ``MA_NUM_GPUS`` cards per node, ``MA_CURRENT_IP`` this node's address; port
    ``MASTER_PORT`` or torchrun's 29500."""
    src = "modelarts"
    nnodes = _int(env, "MA_NUM_HOSTS", src)
    index = _int(env, "VC_TASK_INDEX", src)
    if index is None:
        raise ConfigError("modelarts: MA_NUM_HOSTS is set but VC_TASK_INDEX is not (this node's index)")
    hosts = [h.strip() for h in (env.get("VC_WORKER_HOSTS") or "").split(",") if h.strip()]
    if not hosts:
        raise ConfigError("modelarts: VC_WORKER_HOSTS is not set (node 0's address hosts the rendezvous)")
    if nnodes is not None and len(hosts) != nnodes:
        raise ConfigError(f"modelarts: VC_WORKER_HOSTS names {len(hosts)} host(s) but MA_NUM_HOSTS={nnodes}; "
                          "the job's variables disagree")
    port, port_from = _port(env, src, DEFAULT_PORT)
    cards = _int(env, "MA_NUM_GPUS", src)
    me = (env.get("MA_CURRENT_IP") or env.get("MA_CURRENT_HOST_IP") or "").strip() or None
    return NodePlan(source=src, nnodes=len(hosts), node_rank=index, nproc_per_node=cards, master_addr=hosts[0],
                    master_port=port, rdzv_id=(env.get("MA_JOB_ID") or env.get("MA_VJ_NAME") or "torchport").strip()
                    or "torchport", local_addr=me,
                    origin={"nnodes": "MA_NUM_HOSTS", "node_rank": "VC_TASK_INDEX", "master_addr": "VC_WORKER_HOSTS[0]",
                            "master_port": port_from, **({"nproc_per_node": "MA_NUM_GPUS"} if cards else {}),
                            **({"local_addr": "MA_CURRENT_IP"} if me else {})})


def _rank_table(env: Mapping[str, str]) -> NodePlan:
    """An HCCL rank table (``RANK_TABLE_FILE``, version 1.0: ``server_list`` of ``server_id`` + ``device`` with
    ``rank_id``): node 0 is the first server, this node the server whose ``server_id`` is this host's address
    (``HCCL_IF_IP``, ``MA_CURRENT_IP`` or ``TORCHPORT_NODE_ADDR``), processes per node its device count. The
    table's rank order must be torchrun's (node-major, devices in order), or ranks would meet the wrong cards."""
    src = "rank table"
    path = _need(env, "RANK_TABLE_FILE", src, "the HCCL rank table")
    try:
        with open(path, encoding="utf-8") as fh:
            table = json.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"RANK_TABLE_FILE={path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"RANK_TABLE_FILE={path}: not a readable JSON rank table ({str(exc).splitlines()[0]})") from None
    if not isinstance(table, dict) or not isinstance(table.get("server_list"), list):
        kind = "version 0.x (group_list)" if isinstance(table, dict) and "group_list" in table else "no server_list"
        raise ConfigError(f"RANK_TABLE_FILE={path}: {kind}; torchport reads version 1.0 tables (server_list)")
    if str(table.get("status", "completed")) != "completed":
        raise ConfigError(f"RANK_TABLE_FILE={path}: status is {table.get('status')!r}, not 'completed' "
                          "(the scheduler has not finished writing it; wait for it)")
    servers = table["server_list"]
    if not servers:
        raise ConfigError(f"RANK_TABLE_FILE={path}: server_list is empty")
    count = table.get("server_count")
    if count is not None and str(count).strip() != str(len(servers)):
        raise ConfigError(f"RANK_TABLE_FILE={path}: server_count is {count} but server_list has {len(servers)} entries")
    ids, ndev, expected = [], None, 0
    for s in servers:
        sid = str(s.get("server_id", "")).strip()
        devices = s.get("device") or []
        if not sid or not devices:
            raise ConfigError(f"RANK_TABLE_FILE={path}: a server without server_id or devices ({json.dumps(s)[:80]})")
        if ndev is not None and len(devices) != ndev:
            raise ConfigError(f"RANK_TABLE_FILE={path}: server {sid} has {len(devices)} devices, the first has {ndev}; "
                              "torchrun runs the same number of processes on every node")
        ndev = len(devices)
        for d in devices:
            if str(d.get("rank_id")) != str(expected):
                raise ConfigError(f"RANK_TABLE_FILE={path}: server {sid} device {d.get('device_id')} has rank_id "
                                  f"{d.get('rank_id')}, torchrun gives it rank {expected} (node-major order); "
                                  "renumber the table")
            expected += 1
        ids.append(sid)
    var = next((v for v in ("HCCL_IF_IP", "MA_CURRENT_IP", "TORCHPORT_NODE_ADDR") if (env.get(v) or "").strip()), None)
    if var is None:
        raise ConfigError(f"RANK_TABLE_FILE={path}: cannot tell which server is this node; set HCCL_IF_IP to this "
                          f"node's address (one of {', '.join(ids)})")
    me = env[var].strip()
    if me not in ids:
        raise ConfigError(f"RANK_TABLE_FILE={path}: {var}={me} is not a server_id of the table ({', '.join(ids)}); "
                          f"set {var} to this node's address in the table")
    port, port_from = _port(env, src, DEFAULT_PORT)
    return NodePlan(source=src, nnodes=len(servers), node_rank=ids.index(me), nproc_per_node=ndev,
                    master_addr=ids[0], master_port=port, local_addr=me,
                    origin={"nnodes": "RANK_TABLE_FILE server_list", "node_rank": f"{var} in server_list",
                            "master_addr": "server_list[0].server_id", "master_port": port_from,
                            "nproc_per_node": "RANK_TABLE_FILE device count", "local_addr": var})


def _local(env: Mapping[str, str]) -> NodePlan:
    """No scheduler: one node, a standalone rendezvous."""
    return NodePlan(source="local", nnodes=1, node_rank=0, nproc_per_node=None, master_addr="127.0.0.1",
                    master_port=DEFAULT_PORT, origin={"nnodes": "no scheduler variables"})


#: name -> (marker variable(s), reader), tried in this order by :func:`detect`. The rank table comes first (on
#: ModelArts it is the more precise description); ``local`` is the fallback.
ENVIRONMENTS: dict[str, tuple[tuple[str, ...], Callable[[Mapping[str, str]], NodePlan]]] = {
    "rank-table": (("RANK_TABLE_FILE",), _rank_table),
    "modelarts": (("MA_NUM_HOSTS",), _modelarts),
    "slurm": (("SLURM_JOB_ID",), _slurm),
    "kubeflow": (("PET_NNODES",), _kubeflow_elastic),
    "volcano": (("VC_TASK_INDEX", "VC_WORKER_HOSTS"), _volcano),
    "pytorchjob": (("MASTER_ADDR",), _pytorchjob),
    "local": ((), _local),
}


def _under_torchrun(env: Mapping[str, str]) -> bool:
    return bool(env.get("TORCHELASTIC_RUN_ID")) and bool(env.get("LOCAL_RANK"))


def read(name: str, env: Mapping[str, str] | None = None) -> NodePlan:
    """Read environment ``name`` (a key of :data:`ENVIRONMENTS`) from ``env`` (default ``os.environ``)."""
    env = os.environ if env is None else env
    if name not in ENVIRONMENTS:
        raise ConfigError(f"--env {name!r}: unknown environment; use one of {', '.join(ENVIRONMENTS)} or auto")
    return ENVIRONMENTS[name][1](env)


def detect(env: Mapping[str, str] | None = None) -> NodePlan:
    """The first environment of :data:`ENVIRONMENTS` whose marker variable is set, read.

    Raises:
        ConfigError: already inside a torchrun worker, or the scheduler's variables are inconsistent."""
    env = os.environ if env is None else env
    if _under_torchrun(env):
        raise ConfigError("already inside a torchrun worker (TORCHELASTIC_RUN_ID and LOCAL_RANK are set); "
                          "run torchport launch on the node, not inside the job it starts")
    for name, (markers, reader) in ENVIRONMENTS.items():
        if all((env.get(m) or "").strip() for m in markers) if markers else True:
            return reader(env)
    raise AssertionError("unreachable: 'local' always matches")
