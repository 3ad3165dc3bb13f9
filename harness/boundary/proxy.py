"""The proxy harness runs on the host for one agent call whose network is "proxy".

Its sandbox has loopback only; its one way out is the Unix socket this proxy listens at,
bound into the sandbox, to which forward.py relays from loopback inside. Behind the socket it
speaks HTTP CONNECT, plain HTTP with an absolute URI (one request a connection) and SOCKS5
(CONNECT only), and lets through what egress.py's rules allow. It connects to the very address
it checked (no second lookup that a rebinding DNS could answer otherwise), refuses everything
else — fail closed, a malformed request included — and keeps each refused target for the
call's record.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.base import folders
from harness.base.errors import Halted
from harness.boundary import sandbox
from harness.boundary.egress import Refusal, Resolver, Rules, host_of, shown, target_of, url_target
from harness.boundary.forward import relay, shut

SOCKET = "proxy.sock"
MALFORMED = "(malformed request)"
MAX_REFUSED = 100  # distinct targets kept: a hostile CLI cannot grow the record without end
MAX_CONNECTIONS = 64  # at once; more are closed unanswered
HEAD_LIMIT = 64 << 10  # bytes of a request's head
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0
STOP_GRACE_S = 2.0  # for connections still relaying when the call has ended


class Proxy:
    """One call's proxy: a Unix socket in `folder` (made afresh, mode 0700, in harness's
    state, where no sandbox but the call's sees it), served by threads until stop()."""

    def __init__(self, folder: Path, rules: Rules, resolve: Resolver = socket.getaddrinfo) -> None:
        self.folder, self.rules, self.resolve = folder, rules, resolve
        self._refused: set[str] = set()
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()  # the clients' connections
        self._upstream: set[socket.socket] = set()  # and those the proxy opened for them
        # The threads still serving: each leaves when done, so a call of many short
        # connections holds none of them (2.3 KB each, for the whole call, before).
        self._threads: set[threading.Thread] = set()
        self._stopping = threading.Event()
        self._server: socket.socket | None = None

    @property
    def path(self) -> Path:
        return self.folder / SOCKET

    @property
    def refused(self) -> list[str]:
        with self._lock:
            return sorted(self._refused)

    def start(self) -> Proxy:
        """Listening, or Halted saying why not: no call runs without its proxy."""
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            folders.remove(self.folder)
            self.folder.mkdir(mode=0o700, parents=True)
            self.folder.chmod(0o700)  # whatever the umask
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                # Through the folder's descriptor: a socket's path may hold 107 bytes, and a
                # repository's state folder can lie deeper than that.
                server.bind(f"/proc/self/fd/{fd}/{SOCKET}")
            finally:
                os.close(fd)
        except OSError as exc:
            server.close()
            raise Halted(f"the egress proxy cannot listen in {self.folder}: {exc}") from None
        server.listen(MAX_CONNECTIONS)
        server.settimeout(0.1)  # so the accepting thread sees stop()
        self._server = server
        self._spawn(self._accept, server)
        return self

    def way_out(self) -> sandbox.Egress:
        """How the sandbox reaches this proxy: the socket, and a tunnel at each loopback
        address and port a named target has (a base URL on the host's loopback), for a
        client that goes there directly; ports below 1024 cannot be bound inside."""
        tunnels = []
        for host, port in sorted(self.rules.named):
            if port < 1024:
                continue
            try:
                found = {str(a[4][0]) for a in self.resolve(host, port, 0, socket.SOCK_STREAM)}
            except OSError:
                continue
            if found and all(ipaddress.ip_address(a).is_loopback for a in found):
                tunnels += [(a, port, shown(host, port)) for a in sorted(found)]
        return sandbox.Egress(self.path, tuple(tunnels))

    def stop(self) -> None:
        """Stop accepting, handle what was already asked (a CLI that asked and died is still
        on record), give live relays a grace, then cut them."""
        server = self._server
        if server is None:
            return
        self._server = None
        self._stopping.set()
        self._join(time.monotonic() + STOP_GRACE_S)
        with self._lock:
            live = [*self._live, *self._upstream]
        for conn in live:
            shut(conn)
        self._join(time.monotonic() + STOP_GRACE_S)
        server.close()
        self.path.unlink(missing_ok=True)

    @property
    def serving(self) -> int:
        """How many threads the proxy has now: the accepting one and each live connection's."""
        with self._lock:
            return len(self._threads)

    def _join(self, until: float) -> None:
        # The set grows while the accepting thread drains its queue: asked again until empty.
        while True:
            with self._lock:
                running = list(self._threads)
            if not running or time.monotonic() >= until:
                return
            for thread in running:
                thread.join(max(0.0, until - time.monotonic()))

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        def run() -> None:
            try:
                target(*args)
            finally:
                with self._lock:
                    self._threads.discard(thread)

        thread = threading.Thread(target=run, daemon=True)
        with self._lock:
            self._threads.add(thread)
        try:
            thread.start()
        except RuntimeError:
            with self._lock:
                self._threads.discard(thread)
            raise

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if self._stopping.is_set():
                    return
                continue
            except OSError:  # out of descriptors for a moment: the client waits in the queue
                if self._stopping.is_set():
                    return
                time.sleep(0.05)
                continue
            conn.settimeout(HEAD_TIMEOUT_S)
            with self._lock:
                crowded = len(self._live) >= MAX_CONNECTIONS
                if not crowded:
                    self._live.add(conn)
            if crowded:
                conn.close()
                continue
            try:
                self._spawn(self._serve, conn)
            except RuntimeError:  # no thread to be had now: this one is closed unanswered
                with self._lock:
                    self._live.discard(conn)
                conn.close()

    def _refuse(self, what: str) -> None:
        with self._lock:
            if len(self._refused) < MAX_REFUSED or what in self._refused:
                self._refused.add(what)
            else:
                self._refused.add(f"(more than {MAX_REFUSED} refused)")

    def _serve(self, conn: socket.socket) -> None:
        try:
            first = conn.recv(1, socket.MSG_PEEK)
            if first == b"\x05":
                self._socks(conn)
            elif first:
                self._http(conn)
        except (OSError, ValueError):
            pass  # the client went away or sent nonsense mid-way: nothing left to answer
        finally:
            with self._lock:
                self._live.discard(conn)
            conn.close()

    def _open(self, host: str, port: int) -> socket.socket:
        """A connection to an allowed target, at an address that was checked."""
        last: OSError = OSError(f"{shown(host, port)}: no address")
        for family, address in self.rules.addresses(host, port, self.resolve):
            up = socket.socket(family, socket.SOCK_STREAM)
            up.settimeout(CONNECT_TIMEOUT_S)
            try:
                up.connect(address)
            except OSError as exc:
                up.close()
                last = exc
                continue
            up.settimeout(None)
            return up
        raise last

    def _relay(self, conn: socket.socket, up: socket.socket, plain: bool = False) -> None:
        conn.settimeout(None)
        with self._lock:
            self._upstream.add(up)
        try:
            relay(conn, up, _closing if plain else None)
        finally:
            with self._lock:
                self._upstream.discard(up)

    # -- HTTP -----------------------------------------------------------------------------

    def _http(self, conn: socket.socket) -> None:
        try:
            method, host, port, head, rest = _request(conn)
        except ValueError:
            self._refuse(MALFORMED)
            conn.sendall(_status(400, "a proxy request was expected"))
            return
        try:
            up = self._open(host, port)
        except Refusal as refusal:
            self._refuse(shown(host, port))
            conn.sendall(_status(403, f"harness: {refusal}"))
            return
        except OSError as exc:
            conn.sendall(_status(502, f"harness: {shown(host, port)}: {exc.strerror or exc}"))
            return
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        if head or rest:
            up.sendall(head + rest)  # a plain request's head is empty for a CONNECT
        self._relay(conn, up, plain=method != "CONNECT")

    # -- SOCKS5 ---------------------------------------------------------------------------

    def _socks(self, conn: socket.socket) -> None:
        _, count = _exactly(conn, 2)
        if 0 not in _exactly(conn, count):  # only "no authentication"
            conn.sendall(b"\x05\xff")
            self._refuse(MALFORMED)
            return
        conn.sendall(b"\x05\x00")
        _, command, _, kind = _exactly(conn, 4)
        try:
            if kind == 1:
                host = str(ipaddress.IPv4Address(_exactly(conn, 4)))
            elif kind == 4:
                host = str(ipaddress.IPv6Address(_exactly(conn, 16)))
            elif kind == 3:
                host = host_of(_exactly(conn, _exactly(conn, 1)[0]).decode("ascii"))
            else:
                raise ValueError("no such address type")
            port = int.from_bytes(_exactly(conn, 2), "big")
            if command != 1 or port == 0:  # CONNECT only: no BIND, no UDP
                raise ValueError("not a CONNECT")
        except (ValueError, UnicodeDecodeError):
            self._refuse(MALFORMED)
            conn.sendall(_socks_reply(7))
            return
        try:
            up = self._open(host, port)
        except Refusal:
            self._refuse(shown(host, port))
            conn.sendall(_socks_reply(2))  # not allowed by ruleset
            return
        except OSError:
            conn.sendall(_socks_reply(4))  # host unreachable
            return
        conn.sendall(_socks_reply(0))
        self._relay(conn, up)


# Hop-by-hop headers of the client's connection to the proxy: not passed on.
_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization"})
_METHOD = re.compile(rb"[A-Z]{1,20}")
_VERSIONS = (b"HTTP/1.1", b"HTTP/1.0")


def _request(conn: socket.socket) -> tuple[str, str, int, bytes, bytes]:
    """The method, target host and port of a proxy request, the head to send on (none for a
    CONNECT), and the bytes that followed it. ValueError when it is no proxy request: a
    head too long, cut or late, an origin-form or https target, a header line without a
    name."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = conn.recv(HEAD_LIMIT)
        except TimeoutError:
            raise ValueError("no request in time") from None
        if not chunk or len(data) + len(chunk) > HEAD_LIMIT:
            raise ValueError("a head cut or too long")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    first, *lines = head.split(b"\r\n")
    parts = first.split(b" ")
    if (
        len(parts) != 3
        or not _METHOD.fullmatch(parts[0])
        or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0")
    ):
        raise ValueError("not a request line")
    method, target = parts[0].decode(), parts[1].decode("ascii")
    if method == "CONNECT":
        host, port = target_of(target)
        return method, host, port, b"", rest
    found = url_target(target) if target.startswith("http://") else None
    if found is None:
        raise ValueError("not an absolute http URI")
    url = urlsplit(target)
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = []
    for line in lines:
        name, colon, _ = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise ValueError("not a header line")
        if name.lower() not in _HOP:
            kept.append(line)
    # One request a connection: the next may name another host, so the server must close.
    start = f"{method} {path} {parts[2].decode()}".encode()
    sent = b"\r\n".join([start, *kept, b"Connection: close"]) + b"\r\n\r\n"
    return method, *found, sent, rest


def _closing(up: socket.socket, conn: socket.socket) -> None:
    """A plain request's answer passed on with `Connection: close` in its head: the proxy
    takes one request a connection, so the client must not send another on it. Interim
    (1xx) heads go as they are, and so does what is no head it can read."""
    data = b""
    while True:
        while b"\r\n\r\n" not in data:
            chunk = up.recv(HEAD_LIMIT)
            if not chunk or len(data) + len(chunk) > HEAD_LIMIT:
                conn.sendall(data + chunk)
                return
            data += chunk
        head, _, data = data.partition(b"\r\n\r\n")
        status, *fields = head.split(b"\r\n")
        if status[9:10] == b"1":
            conn.sendall(head + b"\r\n\r\n")
            if status[9:12] == b"101":  # switched to another protocol: bytes from now on
                conn.sendall(data)
                return
            continue
        kept = [f for f in fields if f.partition(b":")[0].strip().lower() not in _HOP]
        conn.sendall(b"\r\n".join([status, *kept, b"Connection: close\r\n\r\n"]) + data)
        return


def _status(code: int, why: str) -> bytes:
    body = (why.replace("\r", " ").replace("\n", " ") + "\n").encode("utf-8", "replace")
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[code]
    return (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _socks_reply(code: int) -> bytes:
    return bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0])


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("cut short")
        data += chunk
    return data
