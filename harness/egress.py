"""Egress only to the model API: the proxy harness runs on the host for one agent call.

An agent whose registry entry says `"network": "proxy"` (what `harness init` writes for
claude, codex and gemini) gets no network of the host: its sandbox has loopback only, and its
one way out is a Unix socket bound into it, to which forward.py relays from loopback inside.
Behind the socket this proxy speaks HTTP CONNECT, plain HTTP with an absolute URI, and SOCKS5,
and lets through only the hosts the entry allows: those its `egress` names and the host of each
base URL the CLI is pointed at, or, with no base URL, its provider's API. A host named so may
be anywhere, the host's own loopback included; a provider's API must resolve to public
addresses, so neither the host's loopback services nor the cloud's metadata address are
reachable through a name nobody named. The proxy connects to the very address it checked (no
second lookup that a rebinding DNS could answer otherwise), refuses everything else — fail
closed, a malformed request included — and keeps each refused target for the call's record.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import files, sandbox
from .errors import Halted
from .forward import relay, shut

# Each CLI's model API, allowed when nothing points the CLI elsewhere.
PROVIDERS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com:443",),
    "codex": ("api.openai.com:443",),
    "gemini": ("generativelanguage.googleapis.com:443",),
}
RECORD = "egress.json"  # among the call's exchange files, which meta.json hashes
SOCKET = "proxy.sock"
MALFORMED = "(malformed request)"
MAX_REFUSED = 100  # distinct targets kept: a hostile CLI cannot grow the record without end
MAX_CONNECTIONS = 64  # at once; more are closed unanswered
HEAD_LIMIT = 64 << 10  # bytes of a request's head
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0
STOP_GRACE_S = 2.0  # for connections still relaying when the call has ended

Resolver = Callable[..., list[tuple[Any, ...]]]  # socket.getaddrinfo's shape


class Refusal(Exception):
    """The target is not one the call may reach."""


# A DNS label as clients send it (IDNs arrive in their ASCII form).
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


def host_of(raw: str) -> str:
    """`raw` as the proxy compares hosts: an IP address in its one canonical form (IPv6 in
    brackets on the way in), or a DNS name in lower case without its final dot. ValueError
    for anything else, and for an address written as only some resolvers read one (`127.1`,
    `0x7f.0.0.1`, `2130706433`): it would match no rule, and must not slip past one either."""
    if not raw.isascii():
        raise ValueError(f"not a host: {raw!r}")
    if raw.startswith("[") and raw.endswith("]"):
        if "%" in raw:  # a zone names an interface of the host
            raise ValueError(f"an IPv6 address with a zone: {raw!r}")
        return str(ipaddress.IPv6Address(raw[1:-1]))
    try:
        return str(ipaddress.IPv4Address(raw))
    except ValueError:
        pass
    name = raw.lower().removesuffix(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(p) for p in name.split(".")):
        raise ValueError(f"not a host: {raw!r}")
    try:
        socket.inet_aton(name)
    except OSError:
        return name
    raise ValueError(f"an address in a form resolvers disagree on: {raw!r}")


def port_of(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 5 and 0 < int(raw) < 65536):
        raise ValueError(f"not a port: {raw!r}")
    return int(raw)


def target_of(text: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port`) as the proxy compares targets; ValueError when malformed."""
    host, sep, port = text.rpartition(":")
    if not sep or (":" in host and not host.startswith("[")):
        raise ValueError(f"not host:port: {text!r}")
    return host_of(host), port_of(port)


def shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url_target(url: str) -> tuple[str, int] | None:
    """The host and port an http(s) base URL points at, or None when it is no such URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
        raw = parts.hostname
        if parts.scheme not in ("http", "https") or not raw:
            return None
        host = host_of(f"[{raw}]" if ":" in raw else raw)
    except ValueError:
        return None
    return host, port or (443 if parts.scheme == "https" else 80)


@dataclass(frozen=True)
class Rules:
    """What one call may reach: `named` targets at any address they resolve to, `public`
    ones (a provider's API nobody named) only at public addresses."""

    named: frozenset[tuple[str, int]] = frozenset()
    public: frozenset[tuple[str, int]] = frozenset()

    def addresses(self, host: str, port: int, resolve: Resolver) -> list[tuple[Any, ...]]:
        """Where to connect for `host:port`: each (family, address) it resolves to, for a
        public-only target those that are public. Refusal when it is not allowed or no
        address is left; OSError when it does not resolve."""
        if (host, port) not in self.named and (host, port) not in self.public:
            raise Refusal(f"{shown(host, port)} is not allowed")
        found = [
            (info[0], info[4])
            for info in resolve(host, port, 0, socket.SOCK_STREAM)
            if info[0] in (socket.AF_INET, socket.AF_INET6)
        ]
        if (host, port) not in self.named:
            found = [f for f in found if _public(f[1][0])]
            if not found:
                raise Refusal(f"{shown(host, port)} resolves to no public address")
        if not found:
            raise OSError(f"{shown(host, port)} has no address")
        return found


def _public(address: str) -> bool:
    """Reachable on the internet: not loopback, link-local (the cloud's metadata service),
    private, shared, reserved or multicast, also when written as an IPv4-mapped IPv6."""
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def rules(cli: str | None, environ: Mapping[str, str], egress: Iterable[str], home: Path) -> Rules:
    """One call's rules: the entry's `egress` and the host of each base URL its CLI sees
    (every `*_BASE_URL` in `environ`, the variables it is given; for codex also the provider
    its own config chooses), or with no base URL its provider's API."""
    named = {target_of(t) for t in egress}
    urls = [v for k, v in sorted(environ.items()) if k.endswith("_BASE_URL") and v]
    program = Path(cli).name if cli else ""
    if program == "codex":
        urls += _codex_provider(home)
    pointed = {t for t in map(url_target, urls) if t is not None}
    provider = set() if urls else {target_of(t) for t in PROVIDERS.get(program, ())}
    return Rules(frozenset(named | pointed), frozenset(provider - named - pointed))


def _codex_provider(home: Path) -> list[str]:
    """The base URL of the model provider the user's codex config chooses, if any: the
    shim keeps it when no OPENAI_BASE_URL is given."""
    try:
        doc = tomllib.loads((home / ".codex" / "config.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    name, providers = doc.get("model_provider"), doc.get("model_providers")
    chosen = providers.get(name) if isinstance(providers, dict) and isinstance(name, str) else None
    url = chosen.get("base_url") if isinstance(chosen, dict) else None
    return [url] if isinstance(url, str) else []


def record(folder: Path, network: str, refused: Iterable[str] = ()) -> None:
    """The call's network among its exchange files: "host" (the opt-out, recorded), or
    "proxy" with every target the proxy refused, sorted; nothing of the host (no address
    it resolved, no time, no count)."""
    doc: dict[str, Any] = {"network": network}
    if network == "proxy":
        doc["refused"] = sorted(refused)
    (folder / RECORD).write_bytes(files.pretty(doc))


class Proxy:
    """One call's proxy: a Unix socket in `folder` (made afresh, mode 0700, in harness's
    state, where no sandbox but the call's sees it), served by threads until stop()."""

    def __init__(self, folder: Path, rules: Rules, resolve: Resolver = socket.getaddrinfo) -> None:
        self.folder, self.rules, self.resolve = folder, rules, resolve
        self._refused: set[str] = set()
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()  # the clients' connections
        self._upstream: set[socket.socket] = set()  # and those the proxy opened for them
        self._threads: list[threading.Thread] = []
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
            files.wipe(self.folder)
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

    def _join(self, until: float) -> None:
        done = 0
        while done < len(self._threads):  # grows while the accepting thread drains its queue
            self._threads[done].join(max(0.0, until - time.monotonic()))
            done += 1

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if self._stopping.is_set():
                    return
                continue
            except OSError:
                return
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

    def _relay(self, conn: socket.socket, up: socket.socket) -> None:
        conn.settimeout(None)
        with self._lock:
            self._upstream.add(up)
        try:
            relay(conn, up)
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
        self._relay(conn, up)

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
