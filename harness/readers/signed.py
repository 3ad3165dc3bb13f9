"""`harness attest --sign` and `--verify`: a task's Statement signed into a DSSE envelope,
and an envelope checked against a key and against the repository as it is now (a key,
the one that signs or the one that checks, is read only from outside the repository:
signing.read_key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness.base import files, signing
from harness.base.errors import InvalidInput
from harness.boundary import sshsig
from harness.readers import attest
from harness.repository import repo
from harness.repository.layout import Layout

_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def sign(layout: Layout, task_id: str, key_path: Path, passphrase: bytes | None) -> bytes:
    """The envelope's bytes: the payload is exactly what `harness attest` prints. `key_path`
    holds an Ed25519 private key, or an OpenSSH public key whose private half ssh-agent (or
    a hardware token through it) holds."""
    label = str(key_path)
    data = signing.read_key(layout.root, key_path, label)
    statement = files.pretty(attest.statement(layout, task_id))
    if signing.is_ssh_public(data):
        line = data.strip().splitlines()[0] + b"\n"
        kid = signing.ssh_keyid(line, label)
        blob = sshsig.sign(signing.pae(signing.IN_TOTO, statement), line, label)
        return files.pretty(signing.envelope(statement, [(kid, blob)]))
    return files.pretty(signing.sign(statement, signing.private_key(data, label, passphrase)))


@dataclass(frozen=True)
class Verdict:
    ok: bool
    line: str


def verify(layout: Layout, task_id: str, envelope_path: Path, key_path: Path) -> Verdict:
    """Whether the envelope at `envelope_path` is signed by the key at `key_path` and its
    Statement is the one the repository gives now, with the log on disk where it ended."""
    label = str(envelope_path)
    raw = files.read_regular(envelope_path.resolve(), label)
    if raw is None:
        raise InvalidInput(f"{label}: file not found")
    envelope = signing.read(raw, label)
    key_raw = signing.read_key(layout.root, key_path, str(key_path), signing.CHECKING)
    if b"PRIVATE KEY-----" in key_raw:
        raise InvalidInput(f"{key_path}: a private key; --key takes the public one")
    if envelope.payload_type != signing.IN_TOTO:
        return Verdict(False, f"payloadType is {envelope.payload_type!r}, not {signing.IN_TOTO}")
    ok, signer = _signer(envelope, key_raw, str(key_path))
    if not ok:
        return Verdict(False, signer)
    why = _against_repository(layout, task_id, envelope.payload)
    if why is not None:
        return Verdict(False, why)
    statement = orjson.loads(envelope.payload)
    head = statement["predicate"]["buildDefinition"]["internalParameters"]["log_head"]
    return Verdict(
        True,
        f"signed by {signer}; commit {statement['subject'][0]['digest']['gitCommit']} and "
        f"log head {head} match the repository",
    )


def _signer(envelope: signing.Envelope, key: bytes, label: str) -> tuple[bool, str]:
    """(True, who signed) when a signature verifies with `key`: a PEM or OpenSSH public key
    (an Ed25519 signature, or an ssh one by that key) or an allowed signers file (an ssh
    signature by a key it names); else (False, why not)."""
    ssh = [(kid, sig) for kid, sig in envelope.signatures if kid.startswith("ssh:")]
    pem = key.lstrip().startswith(b"-----BEGIN")
    if pem or (signing.is_ssh_public(key) and not ssh):
        public = signing.public_key(key, label)
        why = signing.check(envelope, public)
        return (True, f"keyid {signing.keyid(public)}") if why is None else (False, why)
    if not signing.is_ssh_public(key) and not signing.is_allowed_signers(key):
        raise InvalidInput(f"{label}: not a PEM or OpenSSH public key, nor an allowed signers file")
    if not ssh:
        return False, "no ssh signature to check against the allowed signers"
    allowed = b"key@harness-attest " + key if signing.is_ssh_public(key) else key
    message = signing.pae(envelope.payload_type, envelope.payload)
    why = ""
    for kid, sig in ssh:
        found = sshsig.verify(message, sig, allowed)
        if isinstance(found, str):
            why = found
            continue
        return True, f"{kid} ({', '.join(found)})"
    return False, why


def _against_repository(layout: Layout, task_id: str, payload: bytes) -> str | None:
    """None when the repository gives `payload` as the task's Statement today and the log on
    disk has not moved since; else the first difference, in one line."""
    try:
        claimed = orjson.loads(payload)
        task = claimed["predicate"]["buildDefinition"]["externalParameters"]["task_id"]
        commit = claimed["subject"][0]["digest"]["gitCommit"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return "the signed payload is not a harness Statement"
    if task != task_id:
        return f"the Statement is of task {task!r}, not {task_id!r}"
    if not isinstance(commit, str) or not _COMMIT.match(commit):
        return f"subject commit {commit!r} is not a commit id"
    git = repo.Repo(layout.root)
    try:
        if not git.exists(commit):
            return f"subject commit {commit} is not in the repository"
        try:
            now = attest.statement(layout, task_id)
        except InvalidInput as exc:
            return f"the repository's record of the task no longer reads: {exc}"
        why = _first_difference(claimed, now)
        if why is not None:
            return why
        return _log_since(layout, git, task_id, commit)
    finally:
        git.close()


def _first_difference(claimed: dict[str, Any], now: dict[str, Any]) -> str | None:
    """What differs between the signed Statement and the one the repository gives, named by
    what a reader cares about first: the commit, its tree, the log head, then any field."""
    was, is_ = _subject(claimed), _subject(now)
    if was[0] != is_[0]:
        return f"subject commit {was[0]} is not the task's newest commit {is_[0]}"
    if was[1] != is_[1]:
        return f"subject tree {was[1]} is not commit {is_[0]}'s tree {is_[1]}"
    head = _head(claimed), _head(now)
    if head[0] != head[1]:
        return f"the Statement's log head {head[0]} is not the log's {head[1]}"
    if files.pretty(claimed) != files.pretty(now):
        return f"the Statement differs from the repository's at {_where(claimed, now)}"
    return None


def _subject(statement: Any) -> tuple[Any, Any]:
    subjects = _at(statement, "subject")
    listed = subjects if isinstance(subjects, list) else []
    digests = [d for s in listed if isinstance(d := _at(s, "digest"), dict)]
    commit = next((d["gitCommit"] for d in digests if "gitCommit" in d), None)
    tree = next((d["gitTree"] for d in digests if "gitTree" in d), None)
    return commit, tree


def _head(statement: Any) -> Any:
    return _at(statement, "predicate", "buildDefinition", "internalParameters", "log_head")


def _at(doc: Any, *keys: str) -> Any:
    """What a signed payload holds at `keys`, None where it holds no object on the way: a
    payload the key signed may still have any shape."""
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _where(claimed: Any, now: Any, at: str = "") -> str:
    """The first path (a.b[2].c) at which two JSON values part."""
    if isinstance(claimed, dict) and isinstance(now, dict):
        for key in sorted(set(claimed) | set(now)):
            if claimed.get(key) != now.get(key):
                return _where(claimed.get(key), now.get(key), f"{at}.{key}" if at else key)
    if isinstance(claimed, list) and isinstance(now, list) and len(claimed) == len(now):
        for i, (a, b) in enumerate(zip(claimed, now, strict=True)):
            if a != b:
                return _where(a, b, f"{at}[{i}]")
    return at or "the top"


def _log_since(layout: Layout, git: repo.Repo, task_id: str, commit: str) -> str | None:
    """The log on disk must be the one the subject commit holds: a line appended or edited
    since is a record the signature does not cover."""
    log = layout.log(task_id)
    rel = log.relative_to(layout.root).as_posix()
    signed = git.read(commit, rel) or b""
    try:
        disk = files.read_regular(log, rel, layout.root)
    except InvalidInput as exc:  # a link or a FIFO where the log was: not what was signed
        return f"the log on disk is not the one signed: {exc}"
    if disk is None:
        return f"{rel}: gone from disk since the Statement"
    if disk == signed:
        return None
    if disk.startswith(signed):
        more = disk[len(signed) :].count(b"\n") or 1
        return f"{rel}: {more} line{'s' if more > 1 else ''} appended since the Statement"
    lines = signed.splitlines()
    edited = next(
        (
            n
            for n, line in enumerate(disk.splitlines(), 1)
            if n > len(lines) or lines[n - 1] != line
        ),
        min(len(lines), len(disk.splitlines())) + 1,
    )
    return f"{rel}: line {edited} changed since the Statement"
