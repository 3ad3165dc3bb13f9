"""The way out of an agent's sandbox: loopback listeners that relay to harness's proxy.

An agent whose entry says `"network": "proxy"` has a network namespace of its own, with
loopback only. Its one way out is the Unix socket of the proxy harness runs for the call
(proxy.py), bound into the sandbox. The sandbox's init (sandbox.py) runs this source itself,
in the sandbox's namespace, before the command starts, so it imports only the standard
library: at the proxy port, where HTTPS_PROXY and its twins point, each connection is relayed
to the proxy as it comes; at a tunnel, the loopback port of a base URL on the host, it is
relayed as a CONNECT to that host:port, for a client that goes to its base URL directly
rather than through a proxy. The proxy decides either way.

proxy.py relays with `relay` too.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

CHUNK = 64 << 10
# The longest answer to a CONNECT the tunnel reads: the proxy's is one short line.
HEAD = 16 << 10


def relay(
    a: socket.socket,
    b: socket.socket,
    head: Callable[[socket.socket, socket.socket], None] | None = None,
) -> None:
    """Copy both ways, one thread each (neither waits on the other's peer), until both sides
    have ended; an end of one side is passed on as a half-close. Closes both. `head`, given,
    passes the start of what `b` says on to `a` itself (proxy.py rewrites a response's head)
    before the copying that way begins."""
    other = threading.Thread(target=_pump, args=(a, b), daemon=True)
    other.start()
    try:
        if head is not None:
            head(b, a)
    except OSError:
        shut(a)
        shut(b)
    _pump(b, a)
    other.join()
    a.close()
    b.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        # One side broke (or the proxy is stopping): end both, so the other pump ends too.
        shut(src)
        shut(dst)


def shut(end: socket.socket) -> None:
    """End both directions of a connection, whatever state it is in."""
    with contextlib.suppress(OSError):
        end.shutdown(socket.SHUT_RDWR)


def start(spec: dict[str, Any]) -> None:
    """Bind every listener of `spec` now, so they are there before the command starts, and
    serve each from a thread: {"socket": path, "listen": [[address, port, target], ...]},
    target None for the proxy port, "host:port" for a tunnel. A tunnel that cannot be bound
    is left out (the proxy port is still the way out); the proxy port raises."""
    for address, port, target in spec["listen"]:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        try:
            server.bind((address, port))
            server.listen(64)
        except OSError:
            server.close()
            if target is None:
                raise
            continue
        args = (server, spec["socket"], target)
        threading.Thread(target=_accept, args=args, daemon=True).start()


def _accept(server: socket.socket, path: str, target: str | None) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            time.sleep(0.05)  # out of descriptors for a moment: the client waits in the queue
            continue
        threading.Thread(target=_forward, args=(conn, path, target), daemon=True).start()


def _forward(conn: socket.socket, path: str, target: str | None) -> None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(path)
        if target is not None:
            up.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            early = _established(up)
            if early is None:
                raise OSError("refused")
            conn.sendall(early)
    except OSError:
        conn.close()
        up.close()
        return
    relay(conn, up)


def _established(up: socket.socket) -> bytes | None:
    """What came after the proxy's 200 to a CONNECT (the far side may speak first), or None
    when the proxy refused or said nothing sensible."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = up.recv(CHUNK)
        if not data or len(head) + len(data) > HEAD:
            return None
        head += data
    answer, _, rest = head.partition(b"\r\n\r\n")
    status = answer.split(b"\r\n", 1)[0].split(b" ")
    return rest if len(status) >= 2 and status[1] == b"200" else None
