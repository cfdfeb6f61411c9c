"""Rehearsal nodes in Linux network namespaces: one namespace per node on a bridge, every address inside them.

Layout for a rehearsal of N nodes (``<id>`` = ``<creator pid>x<counter>``, so leftovers of a dead run are found)::

    tp-<id>-br   a namespace holding the Linux bridge ``br0`` (and, for services such as a test S3 server,
                 the address ``10.213.<x>.254/24`` on ``br0``)
    tp-<id>-n0   node 0: ``lo`` up, ``tpnet0`` = 10.213.<x>.1/24, the veth peer of ``v0`` in tp-<id>-br
    tp-<id>-n1   node 1: ``tpnet0`` = 10.213.<x>.2/24, peer ``v1`` ...

Both ends of every veth pair are created inside those namespaces (``ip -n NS link add ... peer ... netns BR``), so
the root namespace never gets an interface, an address or a route, and nothing in the root namespace sends a
packet anywhere but loopback. The interface in the node namespaces is ``tpnet0`` rather than ``eth0`` on purpose:
a process that by mistake runs in the root namespace with ``GLOO_SOCKET_IFNAME=tpnet0`` fails instead of binding
the host's real interface.

:func:`create` builds the layout and :meth:`NetNamespaces.close` removes it (every namespace, and with them their
veths and the bridge); :func:`cleanup_stale` removes the namespaces of rehearsals whose creator process is gone.
:func:`unavailable` says why namespaces cannot be used here (not root, no ``ip``, ``ip netns add`` refused), or
None.

Example::

    with create(2) as ns:
        subprocess.run([*ns.exec_prefix(0), "ip", "-br", "addr"])     # lo, tpnet0 10.213.x.1/24
        ns.addresses                                                   # ["10.213.x.1", "10.213.x.2"]
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from torchport._tmpfiles import pid_alive

__all__ = ["NetNamespaces", "create", "cleanup_stale", "unavailable", "list_namespaces", "PREFIX", "IFNAME"]

#: Every namespace a rehearsal makes starts with this.
PREFIX = "tp-"
#: The node's interface inside its namespace (what ``GLOO_SOCKET_IFNAME`` names).
IFNAME = "tpnet0"
#: The bridge inside the bridge namespace.
BRIDGE = "br0"
_counter = itertools.count()
_NAME = re.compile(rf"^{re.escape(PREFIX)}(\d+)x(\d+)-(br|n\d+)$")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def list_namespaces() -> list[str]:
    """The names ``ip netns list`` shows (empty without ``ip``)."""
    if shutil.which("ip") is None:
        return []
    out = _ip("netns", "list", check=False).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.strip()]


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None when they can (probed by adding and deleting one)."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "not Linux"
    if os.geteuid() != 0:
        return "not root (ip netns needs CAP_SYS_ADMIN)"
    if shutil.which("ip") is None:
        return "no ip command (iproute2)"
    probe = f"{PREFIX}{os.getpid()}x{next(_counter)}-br"
    try:
        made = _ip("netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"ip netns add failed: {(made.stderr or made.stdout).strip()[:160]}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def kill_inside(name: str) -> list[int]:
    """SIGKILL every process still running in namespace ``name`` (``ip netns pids``); returns their pids."""
    import signal

    listed = _ip("netns", "pids", name, check=False)
    pids = [int(p) for p in listed.stdout.split() if p.isdigit()] if listed.returncode == 0 else []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def cleanup_stale() -> list[str]:
    """Delete the rehearsal namespaces (``tp-<pid>x<n>-...``) whose creator process no longer runs; returns them."""
    gone = []
    for name in list_namespaces():
        m = _NAME.match(name)
        if m and not pid_alive(m.group(1)):
            kill_inside(name)
            _ip("netns", "del", name, check=False)
            gone.append(name)
    return gone


@dataclass
class NetNamespaces:
    """The namespaces of one rehearsal (see the module docstring). A context manager: :meth:`close` on exit."""

    tag: str
    nnodes: int
    subnet: int
    names: list = field(default_factory=list)        # every namespace made, in creation order

    @property
    def bridge_ns(self) -> str:
        return f"{PREFIX}{self.tag}-br"

    def node_ns(self, rank: int) -> str:
        return f"{PREFIX}{self.tag}-n{rank}"

    def address(self, rank: int) -> str:
        """Node ``rank``'s address (inside its namespace only)."""
        return f"10.213.{self.subnet}.{rank + 1}"

    @property
    def addresses(self) -> list[str]:
        return [self.address(r) for r in range(self.nnodes)]

    @property
    def service_address(self) -> str:
        """The address on the bridge itself (in the bridge namespace): where a service for the nodes listens."""
        return f"10.213.{self.subnet}.254"

    def exec_prefix(self, rank: int | None = None) -> list[str]:
        """``ip netns exec <node rank's namespace>`` (None: the bridge namespace, where services run)."""
        return ["ip", "netns", "exec", self.bridge_ns if rank is None else self.node_ns(rank)]

    def _build(self) -> None:
        br = self.bridge_ns
        _ip("netns", "add", br)
        self.names.append(br)
        _ip("-n", br, "link", "set", "lo", "up")
        _ip("-n", br, "link", "add", BRIDGE, "type", "bridge")
        _ip("-n", br, "addr", "add", f"{self.service_address}/24", "dev", BRIDGE)
        _ip("-n", br, "link", "set", BRIDGE, "up")
        for rank in range(self.nnodes):
            ns = self.node_ns(rank)
            _ip("netns", "add", ns)
            self.names.append(ns)
            # both ends made inside the namespaces: the root namespace never holds either veth
            _ip("-n", ns, "link", "add", IFNAME, "type", "veth", "peer", "name", f"v{rank}", "netns", br)
            _ip("-n", br, "link", "set", f"v{rank}", "master", BRIDGE)
            _ip("-n", br, "link", "set", f"v{rank}", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(rank)}/24", "dev", IFNAME)
            _ip("-n", ns, "link", "set", IFNAME, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def close(self) -> None:
        """Delete every namespace made (node namespaces first; their veths and the bridge go with them), after
        killing what still runs inside (a worker orphaned by its launcher would keep a deleted namespace alive)."""
        for name in reversed(self.names):
            kill_inside(name)
            _ip("netns", "del", name, check=False)
        self.names.clear()

    def __enter__(self) -> "NetNamespaces":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create(nnodes: int) -> NetNamespaces:
    """Make the bridge namespace and ``nnodes`` node namespaces; on any failure remove what was made and raise
    ``RuntimeError`` with ``ip``'s message."""
    if not 1 <= nnodes <= 250:
        raise ValueError(f"nnodes={nnodes}: between 1 and 250")
    cleanup_stale()
    n = next(_counter)
    ns = NetNamespaces(tag=f"{os.getpid()}x{n}", nnodes=nnodes, subnet=(os.getpid() + n) % 250 + 1)
    try:
        ns._build()
    except subprocess.CalledProcessError as exc:
        ns.close()
        raise RuntimeError(f"{' '.join(exc.cmd)}: {(exc.stderr or '').strip()[:200]}") from None
    except BaseException:
        ns.close()
        raise
    return ns
