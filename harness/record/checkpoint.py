"""A signed checkpoint of a task's log head: the `Harness-Log-Signature` trailer a record
commit carries when HARNESS_SIGNING_KEY names an Ed25519 key, and its check.

The key comes from the environment of the person running harness, never from the
repository (whose committed config an attacker may write: naming a key there would make
harness sign what the repository chose). The signature covers the DSSE PAE of a payload type
of its own, so no attestation signature passes for a checkpoint, nor the other way round;
Ed25519 is deterministic, so a key gives a record commit the same id on every machine.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.base.errors import InvalidInput

if TYPE_CHECKING:  # the `sign` extra, imported only when a key is named
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

ENV = "HARNESS_SIGNING_KEY"
PASSPHRASE = "HARNESS_SIGNING_PASSPHRASE"
TRAILER = "Harness-Log-Signature"
PAYLOAD_TYPE = "application/vnd.harness.log-head+text"


def payload(task_id: str, head: str) -> bytes:
    return f"harness log head v1\ntask {task_id}\nhead {head}\n".encode()


@dataclass(frozen=True)
class Signer:
    key: Ed25519PrivateKey

    def trailer(self, task_id: str, head: str) -> str:
        """`Harness-Log-Signature: <keyid> <base64 signature>`, one line."""
        from harness.base import signing

        sig = self.key.sign(signing.pae(PAYLOAD_TYPE, payload(task_id, head)))
        kid = signing.keyid(self.key.public_key())
        return f"{TRAILER}: {kid} {base64.b64encode(sig).decode()}"

    def commit_signature(self, raw: bytes) -> str:
        """git's ssh signature of a commit object (namespace "git"), which `git
        verify-commit` checks against an allowed signers file."""
        from harness.base import signing

        return signing.sshsig(self.key, "git", raw)


def signer(root: Path, environ: Mapping[str, str] = os.environ) -> Signer | None:
    """The signer HARNESS_SIGNING_KEY names (None when it is unset or empty); a key that is
    missing, not Ed25519, locked without HARNESS_SIGNING_PASSPHRASE or inside the repository
    is one line, before anything is written. The key's path is never printed."""
    named = environ.get(ENV)
    if not named:
        return None
    try:
        from harness.base import signing
    except ModuleNotFoundError as exc:
        raise InvalidInput(
            f"{ENV} is set: signing needs {exc.name}: pip install 'harness[sign]'"
        ) from None
    data = signing.read_key(root, Path(named), ENV)
    phrase = environ.get(PASSPHRASE)
    return Signer(signing.private_key(data, ENV, None if phrase is None else phrase.encode()))


def check(value: str | None, public: Ed25519PublicKey, task_id: str, head: str) -> str | None:
    """None when `value` (a commit's trailer) is a signature by `public` of the log head
    `head` of `task_id`; else why not, in one line."""
    from cryptography.exceptions import InvalidSignature

    from harness.base import signing

    if value is None:
        return f"carries no {TRAILER}"
    kid, _, sig = value.partition(" ")
    if kid != signing.keyid(public):
        return f"carries a {TRAILER} by keyid {kid[:16]}, not by the key given"
    try:
        public.verify(
            base64.b64decode(sig, validate=True),
            signing.pae(PAYLOAD_TYPE, payload(task_id, head)),
        )
    except (ValueError, InvalidSignature):  # binascii.Error, or a text that is not ASCII
        return f"carries a {TRAILER} that does not verify over log head {head[:12]}"
    return None


def audit(
    commits: Sequence[tuple[str, Mapping[str, str]]],
    newest: str,
    public: Ed25519PublicKey,
    task_id: str,
) -> list[str]:
    """What is wrong with the signatures of a task's record commits (`commits`, oldest
    first, with their Harness trailers; `newest` the task's newest commit): the newest must
    carry one by `public` over its log head, which the hash chain makes cover every line
    before; any other that carries one must verify too; and once one has, every later one
    must (signing may start mid-task, never stop: a record commit left unsigned between two
    signed ones says what no key vouched for). One "commit X: why" line each."""
    found, started = [], False
    for sha, trailers in dict(commits).items():
        value = trailers.get(TRAILER)
        if value is None and sha != newest and not started:
            continue
        why = check(value, public, task_id, trailers.get("Harness-Log-Head", ""))
        if why is not None:
            found.append(f"commit {sha[:12]} {why}")
        started = True
    return found
