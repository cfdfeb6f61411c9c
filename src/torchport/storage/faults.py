"""A fault-injecting HTTP proxy in front of an S3 endpoint (for tests and the store benchmark).

For a fraction ``rate`` of requests it answers HTTP 500 or 503 (an S3 XML error body, 503 as
``SlowDown``), drops the connection without answering, or resets it half-way through the response
body; with ``stall_rate`` it stalls past the client's read timeout. (An HTTP client may retry a
request dropped before any byte of the answer on its own -- aiohttp does for pooled connections --
so only the other kinds are sure to reach torchport's retry loop.) Everything else is forwarded unchanged. Counters say what was
injected, so a test can assert that faults really happened and that none leaked through.

Example::

    with FaultProxy("http://127.0.0.1:5000", rate=0.1, seed=0) as proxy:
        os.environ["TORCHPORT_STORAGE_ENDPOINT"] = proxy.url
        ...
        print(proxy.counts)    # {'forwarded': 812, '500': 23, '503': 22, 'drop': 21, 'reset': 24}
"""

from __future__ import annotations

import collections
import http.client
import random
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FaultProxy"]

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"}


class FaultProxy:
    """Threaded proxy on ``127.0.0.1`` that injects transient S3 faults.

    Args:
        upstream: the real endpoint (``http://host:port``).
        rate: fraction of requests answered with 500 / 503 / a dropped connection (equal shares).
        stall_rate: fraction of requests held for ``stall_s`` seconds before being dropped.
        seed: the fault pattern's random seed.
        max_faults: stop injecting after this many (None: no limit).
    """

    def __init__(self, upstream: str, *, rate: float = 0.1, stall_rate: float = 0.0, stall_s: float = 3.0,
                 seed: int = 0, max_faults: int | None = None) -> None:
        u = urllib.parse.urlsplit(upstream)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.rate, self.stall_rate, self.stall_s = rate, stall_rate, stall_s
        self.max_faults = max_faults
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: collections.Counter = collections.Counter()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def faults(self) -> int:
        """Faults injected so far."""
        return sum(v for k, v in self.counts.items() if k != "forwarded")

    def _decide(self) -> str:
        with self._lock:
            if self.max_faults is not None and self.faults >= self.max_faults:
                self.counts["forwarded"] += 1
                return "forward"
            r = self._rng.random()
            if r < self.rate:
                kind = ("500", "503", "drop", "reset")[int(r / self.rate * 4) % 4]
            elif r < self.rate + self.stall_rate:
                kind = "stall"
            else:
                kind = "forward"
            self.counts["forwarded" if kind == "forward" else kind] += 1
            return kind

    def start(self) -> "FaultProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _hang_up(self):
                """Close the client connection at once (both directions)."""
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                kind = proxy._decide()
                if kind == "drop":
                    self._hang_up()
                    return
                if kind == "stall":
                    time.sleep(proxy.stall_s)
                    self.close_connection = True
                    return
                if kind in ("500", "503"):
                    code = "InternalError" if kind == "500" else "SlowDown"
                    msg = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
                           f"<Message>injected fault</Message></Error>").encode()
                    self.send_response(int(kind))
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(msg)
                    return
                conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except OSError:
                    self.close_connection = True
                    return
                finally:
                    conn.close()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP and (k.lower() != "content-length" or self.command == "HEAD"):
                        self.send_header(k, v)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if kind == "reset" and self.command != "HEAD" and len(data) > 1:
                    self.wfile.write(data[: len(data) // 2])  # half the body, then the connection goes away
                    self.wfile.flush()
                    self._hang_up()
                    return
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="torchport-fault-proxy")
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
