"""The proxy over its Unix socket: CONNECT, plain HTTP and SOCKS5 to the allowed target
relayed, anywhere else refused and noted, malformed requests refused without a crash, one
proxy a call, and nothing left when it stops."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.base.errors import Halted
from harness.boundary import egress
from harness.boundary.proxy import MALFORMED, SOCKET, Proxy

from .test_egress import Listener, listeners, resolver

__all__ = ["listeners"]  # the fixture, shared with test_egress


@pytest.fixture
def proxy(tmp_path: Path, listeners: tuple[Listener, Listener]) -> Iterator[Proxy]:
    ok, _ = listeners
    rules = egress.Rules(named=frozenset({("127.0.0.1", ok.port)}))
    found = Proxy(tmp_path / "state" / "egress", rules).start()
    yield found
    found.stop()


def ask(proxy: Proxy, data: bytes, then: bytes = b"") -> bytes:
    """Send `data` to the proxy (then `then`, once it answered) and read until it closes."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(proxy.path))
        conn.sendall(data)
        got = conn.recv(4096)
        if then and got.startswith(b"HTTP/1.1 200"):
            conn.sendall(then)
        return got + drain(conn)


def drain(conn: socket.socket) -> bytes:
    """What comes until the end; a proxy that closed on bytes it never read resets the
    connection after what it sent."""
    got = b""
    try:
        while chunk := conn.recv(4096):
            got += chunk
    except ConnectionResetError:
        pass
    return got


def test_connect_to_the_allowed_target_relays(
    proxy: Proxy, listeners: tuple[Listener, Listener]
) -> None:
    ok, other = listeners
    target = f"127.0.0.1:{ok.port}".encode()
    got = ask(proxy, b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target), b"ping")
    assert got.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK")
    assert got.endswith(b"hello from model\n")
    assert ok.seen == [b"ping"] and other.seen == []
    assert proxy.refused == []


def test_a_plain_request_goes_on_alone_without_the_proxys_headers(
    proxy: Proxy, listeners: tuple[Listener, Listener]
) -> None:
    ok, _ = listeners
    head = (
        f"POST http://127.0.0.1:{ok.port}/v1/messages?beta=true HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{ok.port}\r\nProxy-Authorization: Basic c2VjcmV0\r\n"
        "Connection: keep-alive\r\nProxy-Connection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"
    )
    got = ask(proxy, head.encode())
    assert got.endswith(b"hello from model\n")
    assert ok.seen == [
        (
            f"POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:{ok.port}\r\n"
            "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
        ).encode()
    ]


def test_a_plain_answer_says_the_connection_closes_and_a_large_body_goes_through(
    tmp_path: Path,
) -> None:
    """The proxy takes one request a connection: the answer's head says so, whatever the
    server said (an interim 100 goes as it is); and the request's body keeps flowing while
    the proxy waits for the answer, however large it is."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    body = b"x" * (4 << 20)
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while len(data) < len(body) or b"\r\n\r\n" not in data:
                data += conn.recv(1 << 16)
            got.append(data)
            conn.sendall(
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                b"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nok"
            )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    proxy = Proxy(tmp_path / "egress", egress.Rules(frozenset({("127.0.0.1", port)})))
    proxy.start()
    try:
        head = f"POST http://127.0.0.1:{port}/v1 HTTP/1.1\r\nContent-Length: {len(body)}\r\n\r\n"
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(10)
            conn.connect(str(proxy.path))
            conn.sendall(head.encode() + body)
            answer = drain(conn)
    finally:
        proxy.stop()
        server.close()
    thread.join(5)
    assert answer == (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    )
    assert got[0].endswith(b"\r\n\r\n" + body)


@pytest.mark.parametrize(
    "target",
    ["127.0.0.1:{other}", "[::1]:{ok}", "localhost:{ok}", "169.254.169.254:80", "example.com:443"],
)
def test_connect_anywhere_else_is_refused_and_noted(
    proxy: Proxy, listeners: tuple[Listener, Listener], target: str
) -> None:
    ok, other = listeners
    text = target.format(ok=ok.port, other=other.port)
    got = ask(proxy, f"CONNECT {text} HTTP/1.1\r\nHost: {text}\r\n\r\n".encode(), b"ping")
    assert got.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert ok.seen == [] and other.seen == []
    assert proxy.refused == [text]


def test_a_plain_request_elsewhere_is_refused(
    proxy: Proxy, listeners: tuple[Listener, Listener]
) -> None:
    ok, other = listeners
    got = ask(proxy, f"GET http://127.0.0.1:{other.port}/ HTTP/1.1\r\n\r\n".encode())
    assert got.startswith(b"HTTP/1.1 403 Forbidden\r\n") and other.seen == []
    got = ask(proxy, b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 403")
    assert proxy.refused == [f"127.0.0.1:{other.port}", "169.254.169.254:80"]
    assert ok.seen == []


NONSENSE = [
    b"garbage\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # origin form: no proxy request
    b"GET https://127.0.0.1:{ok}/ HTTP/1.1\r\n\r\n",  # https goes through CONNECT
    b"CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n",
    b"CONNECT 127.1:{ok} HTTP/1.1\r\n\r\n",
    b"CONNECT 127.0.0.1:{ok} HTTP/2\r\n\r\n",
    b"CONNECT  127.0.0.1:{ok} HTTP/1.1\r\n\r\n",
    b"connect 127.0.0.1:{ok} HTTP/1.1\r\n\r\n",
    b"CONNECT 127.0.0.1:{ok}\r\n\r\n",
    b"GET http://127.0.0.1:{ok}/ HTTP/1.1\r\nno colon here\r\n\r\n",
    b"GET http://127.0.0.1:{ok}/ HTTP/1.1\r\n folded: x\r\n\r\n",
    b"GET http://127.0.0.1:{ok}/ HTTP/1.1\r\n: empty name\r\n\r\n",
    b"GET http://\xff\xfe/ HTTP/1.1\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS hello, cut
    b"GET http://127.0.0.1:{ok}/ HTTP/1.1\r\nX: " + b"a" * (70 << 10) + b"\r\n\r\n",
]


@pytest.mark.parametrize("data", NONSENSE, ids=range(len(NONSENSE)))
def test_a_malformed_request_is_refused_and_the_proxy_goes_on(
    proxy: Proxy, listeners: tuple[Listener, Listener], data: bytes
) -> None:
    ok, _ = listeners
    request = data.replace(b"{ok}", str(ok.port).encode())
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(proxy.path))
        conn.sendall(request)
        if not request.endswith(b"\r\n\r\n"):
            conn.shutdown(socket.SHUT_WR)  # a head that never ends
        got = drain(conn)
    assert got.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert ok.seen == [] and proxy.refused == [MALFORMED]
    # It still serves the next client.
    target = f"127.0.0.1:{ok.port}".encode()
    assert b"hello from model" in ask(proxy, b"CONNECT %s HTTP/1.1\r\n\r\n" % target, b"ping")


def socks(proxy: Proxy, greeting: bytes, request: bytes, then: bytes = b"") -> bytes:
    """A SOCKS5 exchange: the greeting, the request once the method is chosen, then `then`
    once the proxy said yes; all the proxy said."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(proxy.path))
        conn.sendall(greeting)
        got = conn.recv(2)
        if got == b"\x05\x00":
            conn.sendall(request)
            reply = conn.recv(10)
            got += reply
            if then and reply[:2] == b"\x05\x00":
                conn.sendall(then)
        return got + drain(conn)


NO_AUTH = b"\x05\x01\x00"


def socks_ipv4(port: int, address: str = "127.0.0.1", command: int = 1) -> bytes:
    return bytes([5, command, 0, 1]) + socket.inet_aton(address) + port.to_bytes(2, "big")


def socks_name(name: bytes, port: int) -> bytes:
    return bytes([5, 1, 0, 3, len(name)]) + name + port.to_bytes(2, "big")


def test_socks5_reaches_the_allowed_target(
    proxy: Proxy, listeners: tuple[Listener, Listener]
) -> None:
    ok, _ = listeners
    got = socks(proxy, NO_AUTH, socks_ipv4(ok.port), b"ping")
    assert got[:4] == b"\x05\x00\x05\x00" and got.endswith(b"hello from model\n")
    assert ok.seen == [b"ping"] and proxy.refused == []


@pytest.mark.parametrize(
    ("request_of", "noted"),
    [
        (lambda ok, other: socks_ipv4(other), "127.0.0.1:{other}"),
        (lambda ok, other: socks_ipv4(80, "169.254.169.254"), "169.254.169.254:80"),
        (lambda ok, other: socks_name(b"evil.example", 443), "evil.example:443"),
        (
            lambda ok, other: (
                bytes([5, 1, 0, 4])
                + socket.inet_pton(socket.AF_INET6, "::1")
                + ok.to_bytes(2, "big")
            ),
            "[::1]:{ok}",
        ),
    ],
)
def test_socks5_anywhere_else_is_refused_and_noted(
    proxy: Proxy,
    listeners: tuple[Listener, Listener],
    request_of: Callable[[int, int], bytes],
    noted: str,
) -> None:
    ok, other = listeners
    got = socks(proxy, NO_AUTH, request_of(ok.port, other.port), b"ping")
    assert got[2:4] == b"\x05\x02"  # not allowed by the ruleset
    assert ok.seen == [] and other.seen == []
    assert proxy.refused == [noted.format(ok=ok.port, other=other.port)]


@pytest.mark.parametrize(
    ("greeting", "asked", "answer"),
    [
        (b"\x05\x01\x02", b"", b"\x05\xff"),  # only a password offered
        (NO_AUTH, socks_ipv4(0), b"\x05\x00\x05\x07"),
        (NO_AUTH, socks_ipv4(80, command=2), b"\x05\x00\x05\x07"),  # BIND
        (NO_AUTH, socks_ipv4(80, command=3), b"\x05\x00\x05\x07"),  # UDP
        (NO_AUTH, bytes([5, 1, 0, 9, 1, 2]), b"\x05\x00\x05\x07"),
        (NO_AUTH, socks_name(b"127.1", 80), b"\x05\x00\x05\x07"),
        (NO_AUTH, socks_name("exämple.com".encode(), 80), b"\x05\x00\x05\x07"),
    ],
)
def test_a_malformed_socks5_request_is_refused(
    proxy: Proxy,
    listeners: tuple[Listener, Listener],
    greeting: bytes,
    asked: bytes,
    answer: bytes,
) -> None:
    ok, _ = listeners
    assert socks(proxy, greeting, asked)[: len(answer)] == answer
    assert proxy.refused == [MALFORMED] and ok.seen == []


def test_the_proxy_connects_to_the_address_it_checked(
    tmp_path: Path, listeners: tuple[Listener, Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: a provider's name answered with the host's loopback (beside a public
    address) is never connected to there, and the name is looked up once a connection."""
    ok, other = listeners
    monkeypatch.setattr("harness.boundary.proxy.CONNECT_TIMEOUT_S", 0.5)
    calls: list[str] = []
    resolve = resolver({"api.example": ["127.0.0.1", "2001:db9::1"]}, calls)
    rules = egress.Rules(public=frozenset({("api.example", other.port)}))
    proxy = Proxy(tmp_path / "egress", rules, resolve).start()
    try:
        target = f"api.example:{other.port}".encode()
        got = ask(proxy, b"CONNECT %s HTTP/1.1\r\n\r\n" % target, b"ping")
        assert got.startswith(b"HTTP/1.1 502 Bad Gateway")  # the public address: no route
        assert other.seen == [] and calls == ["api.example"] and proxy.refused == []
        # The twin: answered with the loopback alone, it is refused, and on record.
        proxy.resolve = resolver({"api.example": ["127.0.0.1"]}, calls)
        got = ask(proxy, b"CONNECT %s HTTP/1.1\r\n\r\n" % target, b"ping")
        assert got.startswith(b"HTTP/1.1 403") and other.seen == []
        assert proxy.refused == [target.decode()]
    finally:
        proxy.stop()
    assert ok.seen == []


def test_a_crowd_of_connections_is_cut_off(
    proxy: Proxy, listeners: tuple[Listener, Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    ok, _ = listeners
    monkeypatch.setattr("harness.boundary.proxy.MAX_CONNECTIONS", 1)
    target = f"127.0.0.1:{ok.port}".encode()
    with socket.socket(socket.AF_UNIX) as first:
        first.settimeout(10)
        first.connect(str(proxy.path))
        first.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target)
        assert first.recv(4096).startswith(b"HTTP/1.1 200")  # taken, and holding its place
        with socket.socket(socket.AF_UNIX) as more:
            more.settimeout(10)
            more.connect(str(proxy.path))
            assert drain(more) == b""  # closed unanswered
        first.sendall(b"ping")
        assert drain(first).endswith(b"hello from model\n")
    # The place is free again once the first is over.
    got = b""
    for _ in range(50):
        with contextlib.suppress(ConnectionError):  # still cut off: closed, or reset
            got = ask(proxy, b"CONNECT %s HTTP/1.1\r\n\r\n" % target, b"ping")
        if got:
            break
        time.sleep(0.1)
    assert got.endswith(b"hello from model\n")


def test_a_request_asked_just_before_the_end_is_on_record(
    proxy: Proxy, listeners: tuple[Listener, Listener]
) -> None:
    _, other = listeners
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(proxy.path))
        conn.sendall(f"CONNECT 127.0.0.1:{other.port} HTTP/1.1\r\n\r\n".encode())
    proxy.stop()
    assert proxy.refused == [f"127.0.0.1:{other.port}"]
    assert not proxy.path.exists()


def test_stop_ends_live_tunnels_and_the_socket(
    proxy: Proxy, listeners: tuple[Listener, Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    ok, _ = listeners
    monkeypatch.setattr("harness.boundary.proxy.STOP_GRACE_S", 0.2)
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(proxy.path))
        conn.sendall(f"CONNECT 127.0.0.1:{ok.port} HTTP/1.1\r\n\r\n".encode())
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        proxy.stop()
        assert drain(conn) == b""  # cut: the listener still waits for "ping"
    with socket.socket(socket.AF_UNIX) as late, pytest.raises(OSError):
        late.connect(str(proxy.path))


def test_the_socket_lies_in_a_private_folder_however_deep(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["a-long-folder-name"] * 8) / "egress"
    assert len(str(deep / SOCKET)) > 108  # more than a socket's path may hold
    proxy = Proxy(deep, egress.Rules()).start()
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert deep.stat().st_mode & 0o777 == 0o700
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(10)
            conn.connect(f"/proc/self/fd/{fd}/{SOCKET}")  # as the sandbox's bind does
            conn.sendall(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
            assert drain(conn).startswith(b"HTTP/1.1 403")
    finally:
        os.close(fd)
        proxy.stop()


def test_calls_at_once_each_have_a_proxy_of_their_own(
    tmp_path: Path, listeners: tuple[Listener, Listener]
) -> None:
    ok, other = listeners
    proxies = [
        Proxy(tmp_path / name / "egress", egress.Rules(frozenset({("127.0.0.1", port)})))
        for name, port in (("a", ok.port), ("b", other.port))
    ]
    for proxy in proxies:
        proxy.start()
    results: dict[int, list[bytes]] = {}

    def both(i: int) -> None:
        results[i] = [
            ask(proxies[i], f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode(), b"ping")
            for port in (ok.port, other.port)
        ]

    threads = [threading.Thread(target=both, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for proxy in proxies:
        proxy.stop()
    assert b"hello from model" in results[0][0] and b"403" in results[0][1]
    assert b"403" in results[1][0] and b"hello from other" in results[1][1]
    assert proxies[0].refused == [f"127.0.0.1:{other.port}"]
    assert proxies[1].refused == [f"127.0.0.1:{ok.port}"]


def test_a_proxy_that_cannot_listen_halts_the_call(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(Halted, match="egress proxy cannot listen"):
        Proxy(tmp_path / "a-file" / "egress", egress.Rules()).start()


def test_a_finished_connection_leaves_no_thread_behind(
    proxy: Proxy, listeners: tuple[Listener, Listener]
) -> None:
    ok, other = listeners
    target = f"127.0.0.1:{other.port}"
    for _ in range(200):
        got = ask(proxy, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert got.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    # Each thread leaves on its own once its connection is done; only the accepting one stays.
    deadline = 200
    while proxy.serving > 1 and deadline:
        threading.Event().wait(0.05)
        deadline -= 1
    assert proxy.serving == 1
    assert ok.seen == [] and other.seen == []
