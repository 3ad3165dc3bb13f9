"""Egress only to the model API: the proxy's allow decision, the proxy itself over its Unix
socket, and a program in a real sandbox that reaches the stand-in for its model API on the
host's 127.0.0.1 and nothing else, each refusal on the call's record."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.base.errors import InvalidInput
from harness.boundary import egress, registry, sandbox
from harness.boundary.contain import Containment
from harness.boundary.registry import Agent
from harness.repository.layout import Layout
from harness.repository.repo import Repo
from harness.spec import config

from .builders import git

# -- the allow decision ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "host"),
    [
        ("API.Anthropic.COM", "api.anthropic.com"),
        ("api.anthropic.com.", "api.anthropic.com"),
        ("under_score.example", "under_score.example"),
        ("127.0.0.1", "127.0.0.1"),
        ("169.254.169.254", "169.254.169.254"),
        ("[::1]", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
    ],
)
def test_a_host_is_compared_in_one_form(raw: str, host: str) -> None:
    assert egress.host_of(raw) == host


@pytest.mark.parametrize(
    "raw",
    [
        "127.1",  # resolvers read these as 127.0.0.1; no rule names them so
        "0x7f.0.0.1",
        "2130706433",
        "017.0.0.1",
        "0x7f",
        "::1",  # IPv6 only in brackets
        "[fe80::1%eth0]",  # a zone names an interface of the host
        "[not-v6]",
        "",
        ".",
        "a..b",
        "-a.example",
        "a-.example",
        "ex ample.com",
        "exämple.com",
        "\u212aelvin.example",  # KELVIN SIGN, which lower() turns into k
        "a" * 64 + ".example",
        ("a." * 127) + "example",
    ],
)
def test_a_host_in_another_form_is_malformed(raw: str) -> None:
    with pytest.raises(ValueError):
        egress.host_of(raw)


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("api.openai.com:443", ("api.openai.com", 443)),
        ("[::1]:8080", ("::1", 8080)),
        ("127.0.0.1:1", ("127.0.0.1", 1)),
        ("x.example:65535", ("x.example", 65535)),
    ],
)
def test_a_target_is_a_host_and_a_port(text: str, target: tuple[str, int]) -> None:
    assert egress.target_of(text) == target
    assert egress.shown(*target) == text


@pytest.mark.parametrize(
    "text",
    [
        *("host", "host:", ":443", "host:0", "host:65536", "host:+80", "host:٣", "host:080080"),
        *("::1:443", "host:443:1", "[::1]", "user@host:443", "host:443/path"),
    ],
)
def test_a_malformed_target_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        egress.target_of(text)


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("http://127.0.0.1:8080/v1", ("127.0.0.1", 8080)),
        ("https://API.example/", ("api.example", 443)),
        ("http://gateway.example", ("gateway.example", 80)),
        ("http://[::1]:9/", ("::1", 9)),
        (" https://user@api.example:8443/x?y ", ("api.example", 8443)),
        ("ftp://api.example/", None),
        ("http://", None),
        ("http://api.example:99999/", None),
        ("http://127.1:80/", None),
        ("not a url", None),
    ],
)
def test_a_base_url_names_its_host_and_port(url: str, target: tuple[str, int] | None) -> None:
    assert egress.url_target(url) == target


def resolver(table: dict[str, list[str]], calls: list[str] | None = None) -> egress.Resolver:
    """getaddrinfo as the table says, each lookup noted in `calls`."""

    def resolve(host: str, port: int, *_: Any) -> list[tuple[Any, ...]]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in table[host]
        ]

    return resolve


PROVIDER = egress.Rules(public=frozenset({("api.example", 443)}))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.9.9.9",
        "169.254.169.254",  # the cloud's metadata service
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00::2",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "ff02::1",
    ],
)
def test_a_provider_nobody_named_resolving_to_the_host_or_its_network_is_refused(
    address: str,
) -> None:
    resolve = resolver({"api.example": [address]})
    with pytest.raises(egress.Refusal, match="no public address"):
        PROVIDER.addresses("api.example", 443, resolve)


def test_a_provider_resolving_to_public_addresses_is_reached_at_those_only() -> None:
    resolve = resolver({"api.example": ["127.0.0.1", "8.8.8.8", "2001:4860:4860::8888"]})
    assert PROVIDER.addresses("api.example", 443, resolve) == [
        (socket.AF_INET, ("8.8.8.8", 443)),
        (socket.AF_INET6, ("2001:4860:4860::8888", 443)),
    ]


def test_a_named_host_may_be_the_hosts_loopback() -> None:
    named = egress.Rules(named=frozenset({("model.test", 8080), ("127.0.0.1", 9)}))
    resolve = resolver({"model.test": ["127.0.0.1"], "127.0.0.1": ["127.0.0.1"]})
    assert named.addresses("model.test", 8080, resolve) == [(socket.AF_INET, ("127.0.0.1", 8080))]
    assert named.addresses("127.0.0.1", 9, resolve) == [(socket.AF_INET, ("127.0.0.1", 9))]


@pytest.mark.parametrize(
    ("host", "port"),
    [
        ("api.example", 80),  # another port of an allowed host
        ("evil.example", 443),
        ("sub.api.example", 443),
        ("127.0.0.1", 443),
        ("169.254.169.254", 80),
    ],
)
def test_a_target_nobody_allowed_is_refused_before_any_lookup(host: str, port: int) -> None:
    calls: list[str] = []
    with pytest.raises(egress.Refusal, match="not allowed"):
        PROVIDER.addresses(host, port, resolver({}, calls))
    assert calls == []


def test_rules_default_to_the_providers_api() -> None:
    for cli, host in (("claude", "api.anthropic.com"), ("/opt/bin/codex", "api.openai.com")):
        found = egress.rules(cli, {"ANTHROPIC_API_KEY": "k"}, (), Path("/nonexistent"))
        assert found == egress.Rules(public=frozenset({(host, 443)}))
    gemini = egress.rules("gemini", {}, (), Path("/nonexistent"))
    assert gemini.public == {("generativelanguage.googleapis.com", 443)}
    assert egress.rules(None, {}, (), Path("/nonexistent")) == egress.Rules()


def test_a_base_url_replaces_the_provider_and_egress_adds_to_either() -> None:
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:4000", "OTHER": "http://x.example"}
    found = egress.rules("claude", env, ["extra.example:8443"], Path("/nonexistent"))
    assert found == egress.Rules(named=frozenset({("127.0.0.1", 4000), ("extra.example", 8443)}))
    found = egress.rules("claude", {}, ["extra.example:8443"], Path("/nonexistent"))
    assert found.named == {("extra.example", 8443)}
    assert found.public == {("api.anthropic.com", 443)}


def test_codex_is_allowed_the_provider_its_own_config_chooses(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(
        'model_provider = "local"\n[model_providers.local]\nbase_url = "http://localhost:11434/v1"\n'
    )
    assert egress.rules("codex", {}, (), tmp_path).named == {("localhost", 11434)}
    # The twin: a config choosing no provider of its own leaves the public API.
    (tmp_path / ".codex" / "config.toml").write_text('model = "x"\n')
    assert egress.rules("codex", {}, (), tmp_path).public == {("api.openai.com", 443)}


def test_the_registry_keeps_the_network_and_egress_an_entry_names(tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    entry = registry.shim_entry("claude") | {"egress": ["mirror.example:443", "[::1]:8080"]}
    path.write_bytes(orjson.dumps({"agents": [entry]}))
    (agent,) = registry.load(path, tmp_path)
    assert agent.network == "proxy" and agent.egress == ("mirror.example:443", "[::1]:8080")
    bare = replace(agent, cli=None)  # no CLI to find as installed here
    assert not bare.box(tmp_path, tmp_path, tmp_path, ()).network  # never the host's
    assert replace(bare, network="host").box(tmp_path, tmp_path, tmp_path, ()).network


@pytest.mark.parametrize("bad", ["127.1:80", "host:0", "host:70000", "http://host:80", "host"])
def test_a_registry_egress_that_is_no_target_is_one_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "registry.json"
    entry = registry.shim_entry("claude") | {"egress": [bad]}
    path.write_bytes(orjson.dumps({"agents": [entry]}))
    with pytest.raises(InvalidInput) as refused:
        registry.load(path, tmp_path)
    assert "\n" not in str(refused.value) and "registry.json" in str(refused.value)


def test_the_network_is_one_of_three(tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_bytes(orjson.dumps({"agents": [registry.shim_entry("codex") | {"network": "all"}]}))
    with pytest.raises(InvalidInput, match="network"):
        registry.load(path, tmp_path)


# -- the call's record --------------------------------------------------------------------


def test_the_record_says_the_network_and_what_was_refused(tmp_path: Path) -> None:
    egress.record(tmp_path, "proxy", ["b.example:443", "a.example:443"])
    assert orjson.loads((tmp_path / egress.RECORD).read_bytes()) == {
        "network": "proxy",
        "refused": ["a.example:443", "b.example:443"],
    }
    assert egress.refused((tmp_path / egress.RECORD).read_bytes()) == [
        "a.example:443",
        "b.example:443",
    ]
    egress.record(tmp_path, "host")
    assert orjson.loads((tmp_path / egress.RECORD).read_bytes()) == {"network": "host"}
    assert egress.refused((tmp_path / egress.RECORD).read_bytes()) == []


@pytest.mark.parametrize(
    "forged", [b"", b"not json", b"[]", b'{"refused": "a:1"}', b'{"refused": [1, "a:1"]}']
)
def test_a_record_not_as_written_refuses_nothing_to_tell(forged: bytes) -> None:
    assert egress.refused(forged) == []


# -- a program in a real sandbox ------------------------------------------------------------


class Listener:
    """A TCP server on the host's 127.0.0.1 that notes every connection and what came on
    it, and answers each with one line naming itself."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[bytes] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data and b"ping" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.seen.append(data)
                body = f"hello from {self.name}\n".encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (len(body), body)
                )
            except OSError:
                pass  # a client that went away: nothing to answer

    def close(self) -> None:
        # Woken and gone before the socket closes: an accept() still waiting on a closed
        # descriptor would take connections meant for the next test's socket there.
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)
        self.server.close()


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    ok, other = Listener("model"), Listener("other")
    yield ok, other
    ok.close()
    other.close()


# What the program in the sandbox tries, each as the CLI it stands in for might: through the
# proxy its environment names (CONNECT, and a plain request), straight to the base URL's
# loopback port, through the proxy's socket itself, and straight out.
NOSY = r"""
import errno, json, os, socket, sys
ok, other = int(sys.argv[1]), int(sys.argv[2])
proxy = os.environ.get("HTTPS_PROXY", "")
port = int(proxy.rpartition(":")[2]) if proxy else 0

def talk(conn, data, then=b"ping"):
    conn.settimeout(2)
    conn.sendall(data)
    got = conn.recv(4096)
    if then and got.startswith(b"HTTP/1.1 200 Connection"):
        conn.sendall(then)
        got = conn.recv(4096)
    if b"hello from" in got:
        return "hello from " + got.rsplit(b"hello from ", 1)[1].decode().strip()
    return got.split(b"\r\n")[0].decode()

def attempt(how, target_port, address="127.0.0.1", name=None):
    target = f"{name or address}:{target_port}"
    try:
        if how == "direct":
            conn = socket.create_connection((address, target_port), timeout=1)
            return talk(conn, b"ping", b"")
        if how == "socket":
            conn = socket.socket(socket.AF_UNIX)
            conn.connect("/sandbox/egress.sock")
        elif not port:
            return "no proxy"
        else:
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
        if how == "plain":
            head = f"GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n"
            return talk(conn, head.encode(), b"")
        return talk(conn, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, type(exc).__name__)

print(json.dumps({
    "proxy to the model": attempt("proxy", ok),
    "plain to the model": attempt("plain", ok),
    "straight to the model": attempt("direct", ok),
    "proxy to another listener": attempt("proxy", other),
    "plain to another listener": attempt("plain", other),
    "socket to another listener": attempt("socket", other),
    "straight to another listener": attempt("direct", other),
    "proxy to the metadata address": attempt("proxy", 80, "169.254.169.254"),
    "straight to the metadata address": attempt("direct", 80, "169.254.169.254"),
    "proxy to a name": attempt("proxy", 443, name="example.com"),
    "straight out": attempt("direct", 53, "8.8.8.8"),
}, sort_keys=True))
"""


@pytest.fixture
def calling(
    tmp_path: Path, listeners: tuple[Listener, Listener], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[dict[str, str], dict[str, Any] | None]]:
    """A call of an agent that runs NOSY in its sandbox, its base URL the listener `ok`:
    what NOSY saw, and the call's egress record (None without one)."""
    if sandbox.problem() is not None:
        pytest.skip(f"no sandbox here: {sandbox.problem()}")
    ok, other = listeners
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{ok.port}/")
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-qb", "main")
    (root / "f.txt").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    layout = Layout(root)
    contain = Containment(layout, replace(config.load(layout.config), visible=("**",)))
    program = tmp_path / "nosy"
    program.write_text(f"#!{sys.executable} -I\n{NOSY}")
    program.chmod(0o755)
    agent = Agent(
        id="nosy",
        cmd=str(program),
        version=">=0",
        capabilities=("review",),
        args=(str(ok.port), str(other.port)),
        env=("ANTHROPIC_BASE_URL",),
        timeouts=None,
        network="proxy",
    )

    def call(name: str = "call", **fields: Any) -> tuple[dict[str, str], dict[str, Any] | None]:
        staging = tmp_path / "staging" / name
        staging.mkdir(parents=True)
        (staging / "stdin").write_bytes(b"")
        scratch = layout.state / "tasks" / "t" / name
        timeouts = {"soft_s": 60.0, "hard_s": 90.0}
        ran = contain.call(replace(agent, **fields), Repo(root), base, staging, timeouts, scratch)
        assert ran.code == 0, (staging / "stderr.log").read_text()
        record = staging / egress.RECORD
        seen = orjson.loads((staging / "stdout.ndjson").read_bytes())
        return seen, orjson.loads(record.read_bytes()) if record.exists() else None

    return call


@pytest.mark.e2e
def test_a_sandboxed_program_reaches_its_model_api_and_nothing_else(
    calling: Callable[..., tuple[dict[str, str], dict[str, Any] | None]],
    listeners: tuple[Listener, Listener],
) -> None:
    ok, other = listeners
    seen, record = calling()
    assert seen == {
        "proxy to the model": "hello from model",
        "plain to the model": "hello from model",
        "straight to the model": "hello from model",  # the base URL's port, tunnelled
        "proxy to another listener": "HTTP/1.1 403 Forbidden",
        "plain to another listener": "HTTP/1.1 403 Forbidden",
        "socket to another listener": "HTTP/1.1 403 Forbidden",
        "straight to another listener": "ECONNREFUSED",  # the sandbox's own loopback
        "proxy to the metadata address": "HTTP/1.1 403 Forbidden",
        "straight to the metadata address": "ENETUNREACH",
        "proxy to a name": "HTTP/1.1 403 Forbidden",
        "straight out": "ENETUNREACH",
    }
    assert other.seen == [] and len(ok.seen) == 3, ok.seen
    # Each refusal is on the call's record, once, sorted, nothing of the host's making.
    assert record == {
        "network": "proxy",
        "refused": sorted([f"127.0.0.1:{other.port}", "169.254.169.254:80", "example.com:443"]),
    }


@pytest.mark.e2e
def test_the_host_network_is_an_opt_out_on_record_and_none_is_none(
    calling: Callable[..., tuple[dict[str, str], dict[str, Any] | None]],
    listeners: tuple[Listener, Listener],
) -> None:
    ok, other = listeners
    seen, record = calling("host", network="host")
    assert seen["straight to another listener"] == "hello from other"  # what it opts out of
    assert seen["proxy to the model"] == "no proxy" and record == {"network": "host"}
    seen, record = calling("none", network="none")
    assert seen["straight to the model"] == "ECONNREFUSED" and record is None
    assert seen["proxy to the model"] == "no proxy"
    assert len(other.seen) == 1 and len(ok.seen) == 1


@pytest.mark.e2e
def test_calls_at_once_in_sandboxes_keep_their_own_proxies(
    calling: Callable[..., tuple[dict[str, str], dict[str, Any] | None]],
    listeners: tuple[Listener, Listener],
) -> None:
    _, other = listeners
    found: dict[str, tuple[dict[str, str], dict[str, Any] | None]] = {}
    names = ("one", "two", "three")
    threads = [threading.Thread(target=lambda n=n: found.update({n: calling(n)})) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(found) == sorted(names)
    for seen, record in found.values():
        assert seen["proxy to the model"] == "hello from model"
        assert seen["proxy to another listener"] == "HTTP/1.1 403 Forbidden"
        assert record is not None and f"127.0.0.1:{other.port}" in record["refused"]
    assert other.seen == []
