"""``torchport doctor`` on a cluster node: which interface the collectives would use and whether the rendezvous
endpoint answers. Only when a scheduler environment names several nodes (nothing is probed otherwise).

* interface: the one pinned by ``HCCL_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` / ``GLOO_SOCKET_IFNAME``, or the
  interface that holds ``HCCL_IF_IP`` / the node's ``--local-addr``, else the one the kernel routes the endpoint
  through (a UDP ``connect``: it sends no packet) -- the interface a bootstrap without pins ends up on;
* endpoint: one TCP connect to ``MASTER_ADDR:MASTER_PORT`` (timeout 2 s); refused / timed out is a problem with
  the fix (node 0 not started yet, a wrong address or port, a firewall).

Example::

    from torchport.cluster.doctor import cluster_report
    cluster_report({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "29400"})
"""

from __future__ import annotations

import os
import socket
from typing import Any, Mapping

__all__ = ["cluster_report", "interfaces"]

PIN_VARS = ("HCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def interfaces() -> dict[str, str]:
    """``{interface name: IPv4 address}`` of this host's interfaces that have one."""
    import fcntl
    import struct

    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _idx, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
            except OSError:
                continue
            out[name] = socket.inet_ntoa(raw[20:24])
    return out


def _route_source(host: str, port: int) -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), port))      # UDP: picks the route, sends nothing
            return s.getsockname()[0]
    except OSError:
        return None


def cluster_report(environ: Mapping[str, str] | None = None, *, timeout: float = 2.0) -> dict[str, Any] | None:
    """The node's interface and endpoint reachability (see the module docstring); None when no scheduler
    environment names several nodes. ``problems`` uses doctor's ``{id, problem, fix}`` shape."""
    from torchport.cluster.environments import detect
    from torchport.errors import ConfigError

    env = dict(os.environ if environ is None else environ)
    try:
        plan = detect(env)
    except ConfigError as exc:
        return {"environment": None, "problems": [{"id": "cluster-env", "problem": str(exc),
                                                   "fix": "fix the scheduler variable it names"}]}
    if plan.nnodes <= 1:
        return None
    names = interfaces()
    pinned = next(((v, env[v]) for v in PIN_VARS if env.get(v)), None)
    problems = []
    if pinned:
        iface, why = pinned[1].split(",")[0].lstrip("^="), pinned[0]
        if iface not in names:
            problems.append({"id": "cluster-ifname", "problem": f"{why}={pinned[1]}: no interface {iface!r} with an "
                             f"IPv4 address on this node (have: {', '.join(sorted(names)) or 'none'})",
                             "fix": f"set {why} to one of this node's interfaces"})
    else:
        addr = env.get("HCCL_IF_IP") or plan.local_addr or _route_source(plan.master_addr, plan.master_port)
        why = "HCCL_IF_IP" if env.get("HCCL_IF_IP") else ("local address" if plan.local_addr else "route to the endpoint")
        iface = next((n for n, a in names.items() if a == addr), None)
        if env.get("HCCL_IF_IP") and iface is None:
            problems.append({"id": "cluster-if-ip", "problem": f"HCCL_IF_IP={addr} is not an address of this node",
                             "fix": "set HCCL_IF_IP to this node's host IP (ip -4 addr)"})
    from torchport.runtime.doctor import connect_error

    exc = connect_error(plan.master_addr, plan.master_port, timeout)
    endpoint_ok = exc is None
    if exc is not None:
        detail = f"{type(exc).__name__}: {exc}"
        problems.append({"id": "cluster-endpoint", "problem": f"rendezvous endpoint {plan.endpoint} does not answer "
                         f"({detail})", "fix": "start node 0 first, or check MASTER_ADDR / MASTER_PORT and the "
                         "firewall between the nodes"})
    return {"environment": plan.source, "nnodes": plan.nnodes, "node_rank": plan.node_rank, "endpoint": plan.endpoint,
            "interface": iface, "interface_from": why, "address": names.get(iface) if iface else None,
            "endpoint_reachable": endpoint_ok, "problems": problems}
