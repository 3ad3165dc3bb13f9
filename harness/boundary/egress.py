"""Egress only to the model API: what one agent call may reach, and its record.

An agent whose registry entry says `"network": "proxy"` (what `harness init` writes for
claude, codex and gemini) gets no network of the host: its sandbox has loopback only, and its
one way out is the proxy harness runs for the call (proxy.py). The proxy lets through only
the targets (host:port) these rules allow: those the entry's `egress` names and the host of
each base URL the CLI is pointed at, or, with no base URL, its provider's API. A host named so
may be anywhere, the host's own loopback included; a provider's API must resolve to public
addresses, so neither the host's loopback services nor the cloud's metadata address are
reachable through a name nobody named. Hosts are compared in one written form, and a host
written as only some resolvers read it is malformed, never a near miss.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from harness.base import files
from harness.base.errors import InvalidInput

# Each CLI's model API, allowed when nothing points the CLI elsewhere.
PROVIDERS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com:443",),
    "codex": ("api.openai.com:443",),
    "gemini": ("generativelanguage.googleapis.com:443",),
}
RECORD = "egress.json"  # among the call's exchange files, which meta.json hashes

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
    path = home / ".codex" / "config.toml"
    try:
        doc = files.load_toml(path.read_bytes(), str(path), finite=False)
    except (OSError, InvalidInput):
        return []
    name, providers = doc.get("model_provider"), doc.get("model_providers")
    chosen = providers.get(name) if isinstance(providers, dict) and isinstance(name, str) else None
    url = chosen.get("base_url") if isinstance(chosen, dict) else None
    return [url] if isinstance(url, str) else []


def refused(data: bytes) -> list[str]:
    """The targets a call's record says its proxy refused; [] for none, for no record, or
    for a record that is not the one `record` writes (a forged one is the audit's to judge,
    by meta.json's hashes)."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return []
    found = doc.get("refused") if isinstance(doc, dict) else None
    if not isinstance(found, list) or not all(isinstance(t, str) for t in found):
        return []
    return found


def record(folder: Path, network: str, refused: Iterable[str] = ()) -> None:
    """The call's network among its exchange files: "host" (the opt-out, recorded), or
    "proxy" with every target the proxy refused, sorted; nothing of the host (no address
    it resolved, no time, no count)."""
    doc: dict[str, Any] = {"network": network}
    if network == "proxy":
        doc["refused"] = sorted(refused)
    (folder / RECORD).write_bytes(files.pretty(doc))
