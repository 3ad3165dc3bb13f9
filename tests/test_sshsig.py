"""`harness attest --sign` with a key ssh-agent holds (through `ssh-keygen -Y sign`) and its
`--verify` against the key's line or an allowed signers file, through the real CLI on the
completed demo, with a real ssh-agent of the test's own."""

from __future__ import annotations

import base64
import copy
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.base import signing
from harness.boundary import sshsig

from .conftest import Sample, completed_demo

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("ssh-agent") is None, reason="no ssh-agent"),
]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return completed_demo(tmp_path_factory.mktemp("sshsig"))


class Agent:
    """An ssh-agent holding one key (`key`, public line `key.pub`); `other.pub` it holds not."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.env = {"SSH_AUTH_SOCK": str(where / "agent.sock")}

    def keygen(self, *args: str) -> None:
        subprocess.run(["ssh-keygen", "-q", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    where = tmp_path_factory.mktemp("agent")
    found = Agent(where)
    for name in ("key", "other"):
        found.keygen("-t", "ed25519", "-N", "", "-C", f"{name}@host", "-f", str(where / name))
    started = subprocess.Popen(
        ["ssh-agent", "-D", "-a", found.env["SSH_AUTH_SOCK"]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            added = subprocess.run(
                ["ssh-add", "-q", str(where / "key")],
                env={"SSH_AUTH_SOCK": found.env["SSH_AUTH_SOCK"], "PATH": "/usr/bin:/bin"},
                capture_output=True,
                check=False,
            )
            if added.returncode == 0:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert added.returncode == 0, added.stderr
        yield found
    finally:
        started.terminate()
        started.wait(timeout=10)


def sign(ran: Sample, agent: Agent, key: str = "key.pub") -> tuple[int, str]:
    res = ran.cli("attest", "demo", "--sign", str(agent.where / key), env=agent.env)
    return res.returncode, res.stdout if res.returncode == 0 else res.stderr


@pytest.fixture(scope="module")
def envelope(ran: Sample, agent: Agent) -> dict[str, Any]:
    code, out = sign(ran, agent)
    assert code == 0, out
    doc: dict[str, Any] = orjson.loads(out)
    return doc


def verify(ran: Sample, where: Path, doc: dict[str, Any], key: Path) -> tuple[int, str]:
    path = where / "envelope.json"
    path.write_bytes(orjson.dumps(doc))
    res = ran.cli("attest", "demo", "--verify", str(path), "--key", str(key))
    lines = (res.stdout + res.stderr).splitlines()
    assert len(lines) == 1, lines
    return res.returncode, lines[0]


def test_the_agent_signs_the_statement_the_same_every_time(
    ran: Sample, agent: Agent, envelope: dict[str, Any]
) -> None:
    assert base64.b64decode(envelope["payload"]) == ran.cli("attest", "demo").stdout.encode()
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(agent.where / "key.pub")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert [s["keyid"] for s in envelope["signatures"]] == [f"ssh:{printed}"]
    assert orjson.loads(sign(ran, agent)[1]) == envelope


def test_without_the_agent_or_its_key_signing_is_refused(ran: Sample, agent: Agent) -> None:
    code, err = sign(ran, agent, "other.pub")
    assert code == 2
    assert err.splitlines() == [
        f"harness: {agent.where / 'other.pub'}: ssh-keygen -Y sign failed (ssh-agent must "
        'hold its private half): No private key found for public key "key.pub"'
    ]
    res = ran.cli(
        "attest", "demo", "--sign", str(agent.where / "key.pub"), env={"SSH_AUTH_SOCK": ""}
    )
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1


def test_an_ssh_signature_verifies_with_the_key_line_or_allowed_signers(
    ran: Sample, agent: Agent, envelope: dict[str, Any], tmp_path: Path
) -> None:
    code, line = verify(ran, tmp_path, envelope, agent.where / "key.pub")
    assert code == 0, line
    assert line.startswith("attest demo: verified: signed by ssh:SHA256:")
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(b"alice@example.org " + (agent.where / "key.pub").read_bytes())
    code, line = verify(ran, tmp_path, envelope, allowed)
    assert code == 0 and "(alice@example.org)" in line, line


def test_an_ssh_signature_by_a_key_not_allowed_is_refused(
    ran: Sample, agent: Agent, envelope: dict[str, Any], tmp_path: Path
) -> None:
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(b"bob@example.org " + (agent.where / "other.pub").read_bytes())
    code, line = verify(ran, tmp_path, envelope, allowed)
    assert code == 1
    assert line.startswith("attest demo: REFUSED: no allowed signer holds the ssh signature's")
    code, line = verify(ran, tmp_path, envelope, agent.where / "other.pub")
    assert code == 1 and "no allowed signer" in line


@pytest.mark.parametrize("field", ["payload", "sig"])
def test_a_tampered_ssh_envelope_is_refused(
    ran: Sample, agent: Agent, envelope: dict[str, Any], tmp_path: Path, field: str
) -> None:
    changed = copy.deepcopy(envelope)
    holder = changed["signatures"][0] if field == "sig" else changed
    raw = bytearray(base64.b64decode(holder[field]))
    raw[-10] ^= 1  # in the payload's JSON, or in the signature's last bytes: the signature
    holder[field] = base64.b64encode(bytes(raw)).decode()
    code, line = verify(ran, tmp_path, changed, agent.where / "key.pub")
    assert code == 1
    assert line == (
        "attest demo: REFUSED: the ssh signature does not verify: the payload, its type or "
        "the signature was changed"
    )


def test_a_signature_made_for_another_namespace_is_refused(
    ran: Sample, agent: Agent, envelope: dict[str, Any], tmp_path: Path
) -> None:
    """The same key's signature over the same bytes, made for git: not an attestation."""
    payload = base64.b64decode(envelope["payload"])
    message = tmp_path / "message"
    message.write_bytes(signing.pae(signing.IN_TOTO, payload))
    for namespace in ("git", sshsig.NAMESPACE):
        subprocess.run(
            [
                "ssh-keygen",
                "-Y",
                "sign",
                "-f",
                str(agent.where / "key"),
                "-n",
                namespace,
                str(message),
            ],
            check=True,
            capture_output=True,
        )
        blob = sshsig.unarmor((tmp_path / "message.sig").read_text())
        (tmp_path / "message.sig").unlink()
        doc = signing.envelope(payload, [(envelope["signatures"][0]["keyid"], blob)])
        code, line = verify(ran, tmp_path, doc, agent.where / "key.pub")
        assert (code == 0) == (namespace == sshsig.NAMESPACE), line


def test_a_private_key_or_an_envelope_without_ssh_signatures_is_refused(
    ran: Sample, agent: Agent, envelope: dict[str, Any], tmp_path: Path
) -> None:
    code, line = verify(ran, tmp_path, envelope, agent.where / "key")
    assert code == 2 and line.endswith("a private key; --key takes the public one")
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(b"alice@example.org " + (agent.where / "key.pub").read_bytes())
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    plain = signing.sign(base64.b64decode(envelope["payload"]), key)
    code, line = verify(ran, tmp_path, plain, allowed)
    assert (code, line) == (
        1,
        "attest demo: REFUSED: no ssh signature to check against the allowed signers",
    )
