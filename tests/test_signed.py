"""`harness attest --sign` and `--verify` through the real CLI on the completed demo: the
envelope wraps exactly the unsigned Statement, the same key gives the same bytes, every
tampering (envelope, key, subject, log) is refused with one line and exit 1, its twin passes,
and a key is refused where a worker or the record could reach it."""

from __future__ import annotations

import base64
import copy
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.base import signing
from harness.boundary import proc

from .conftest import Sample, completed_demo, scripted
from .test_cli_imports import loaded
from .test_tracing import worker_environment

LOG = "ai/tasks/demo/progress.ndjson"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return completed_demo(tmp_path_factory.mktemp("signed"))


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Ed25519 key as OpenSSH and as PEM (with its public halves), outside any repository."""
    where = tmp_path_factory.mktemp("keys")
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    other = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    none = serialization.NoEncryption()
    pem, ssh = serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.OpenSSH
    enc = serialization.Encoding
    (where / "key").write_bytes(key.private_bytes(enc.PEM, ssh, none))
    (where / "key.pem").write_bytes(key.private_bytes(enc.PEM, pem, none))
    (where / "locked.pem").write_bytes(
        key.private_bytes(enc.PEM, pem, serialization.BestAvailableEncryption(b"s3cret"))
    )
    public = key.public_key()
    (where / "key.pub").write_bytes(
        public.public_bytes(enc.OpenSSH, serialization.PublicFormat.OpenSSH) + b" me@host\n"
    )
    (where / "pub.pem").write_bytes(
        public.public_bytes(enc.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (where / "other.pem").write_bytes(other.private_bytes(enc.PEM, pem, none))
    (where / "other.pub").write_bytes(
        other.public_key().public_bytes(enc.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    (where / "rsa.pem").write_bytes(rsa_key.private_bytes(enc.PEM, pem, none))
    return where


def copy_of(sample: Sample, where: Path) -> Sample:
    shutil.copytree(sample.root, where / "copy", symlinks=True)
    return Sample(where / "copy", sample.script)


def signed(sample: Sample, key: Path, *args: str, env: dict[str, str] | None = None) -> bytes:
    res = sample.cli("attest", "demo", "--sign", str(key), *args, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout.encode()


def verify(sample: Sample, envelope: Path, key: Path, task: str = "demo") -> tuple[int, str]:
    res = sample.cli("attest", task, "--verify", str(envelope), "--key", str(key))
    assert res.stderr == "" or res.returncode == 2, res.stderr
    lines = (res.stdout + res.stderr).splitlines()
    assert len(lines) == 1, lines
    return res.returncode, lines[0]


def written(where: Path, doc: dict[str, Any] | bytes) -> Path:
    path = where / "envelope.json"
    path.write_bytes(doc if isinstance(doc, bytes) else orjson.dumps(doc))
    return path


# -- signing -------------------------------------------------------------------------------


def test_the_envelope_wraps_the_unsigned_statement_and_verifies(ran: Sample, keys: Path) -> None:
    statement = ran.cli("attest", "demo").stdout.encode()
    envelope = orjson.loads(signed(ran, keys / "key"))
    assert base64.b64decode(envelope["payload"]) == statement
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    pub = serialization.load_ssh_public_key((keys / "key.pub").read_bytes())
    assert isinstance(pub, signing.Ed25519PublicKey)
    assert [s["keyid"] for s in envelope["signatures"]] == [signing.keyid(pub)]


def test_the_same_task_and_key_give_the_same_bytes_in_either_format(
    ran: Sample, keys: Path, tmp_path: Path
) -> None:
    first = signed(ran, keys / "key")
    assert signed(ran, keys / "key.pem") == first
    out = tmp_path / "env.json"
    res = ran.cli("attest", "demo", "--sign", str(keys / "key"), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == first


def test_an_encrypted_pem_key_signs_with_its_passphrase_only(ran: Sample, keys: Path) -> None:
    res = ran.cli("attest", "demo", "--sign", str(keys / "locked.pem"))
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines() == [
        f"harness: {keys / 'locked.pem'}: the key is encrypted: set HARNESS_SIGNING_PASSPHRASE"
    ]
    unlocked = signed(ran, keys / "locked.pem", env={"HARNESS_SIGNING_PASSPHRASE": "s3cret"})
    assert unlocked == signed(ran, keys / "key")


def test_signing_leaves_the_repository_as_it_was(ran: Sample, keys: Path) -> None:
    objects = ran.git("count-objects", "-v")
    signed(ran, keys / "locked.pem", env={"HARNESS_SIGNING_PASSPHRASE": "s3cret"})
    assert ran.git("status", "--porcelain", "--ignored") == ""
    assert ran.git("count-objects", "-v") == objects


def refused_key(sample: Sample, key: Path, out: Path) -> str:
    res = sample.cli("attest", "demo", "--sign", str(key), "-o", str(out))
    assert (res.returncode, res.stdout) == (2, ""), res.stderr
    assert not out.exists()
    lines = res.stderr.splitlines()
    assert len(lines) == 1
    return lines[0]


def test_a_key_that_is_missing_or_not_ed25519_is_refused(
    ran: Sample, keys: Path, tmp_path: Path
) -> None:
    out = tmp_path / "env.json"
    assert refused_key(ran, keys / "nosuch", out).endswith("nosuch: file not found")
    assert "harness signs with Ed25519" in refused_key(ran, keys / "rsa.pem", out)
    assert "not a usable PEM private key" in refused_key(ran, keys / "pub.pem", out)
    (tmp_path / "folder").mkdir()
    assert refused_key(ran, tmp_path / "folder", out).endswith("folder: not a regular file")


def test_a_key_inside_the_repository_or_linked_into_it_is_refused(
    ran: Sample, keys: Path, tmp_path: Path
) -> None:
    copy = copy_of(ran, tmp_path)
    out = tmp_path / "env.json"
    for rel in ("ai/key", "key"):
        shutil.copy(keys / "key", copy.root / rel)
        line = refused_key(copy, copy.root / rel, out)
        assert line.endswith(
            f"{rel}: inside the repository; keep signing keys outside it, "
            "where no worker and no record can reach them"
        )
    link = tmp_path / "link"
    link.symlink_to(copy.root / "ai/key")
    assert "inside the repository" in refused_key(copy, link, out)
    # The twin: the same key outside, reached through a link that lies outside too.
    outside = tmp_path / "outside-link"
    outside.symlink_to(keys / "key")
    assert signed(copy, outside) == signed(ran, keys / "key")


def test_a_signing_key_and_passphrase_the_registry_allowlists_never_reach_a_worker(
    tmp_path: Path, keys: Path
) -> None:
    """Through a real run signed with a locked key: a worker that reports its environment,
    allowed the signing variables' names and a token's; the token reaches it, the key's
    path and passphrase reach neither it nor the record (whose commits it signed)."""
    s = scripted(tmp_path)
    env = {
        "HARNESS_SIGNING_KEY": str(keys / "locked.pem"),
        "HARNESS_SIGNING_PASSPHRASE": "s3cret",
        "MY_TOKEN": "t",
    }
    seen = worker_environment(s, [*env], env)
    assert "MY_TOKEN" in seen
    assert not {name for name in seen if name.startswith("HARNESS_SIGNING_")}
    assert "gpgsig" in s.git("cat-file", "commit", "HEAD")  # the run was signed
    for path in (s.root / "ai").rglob("*"):
        data = path.read_bytes() if path.is_file() else b""
        assert b"s3cret" not in data and str(keys).encode() not in data, path
    assert str(keys) not in s.git("log", "--format=%B")


def test_a_signing_passphrase_never_reaches_a_worker_even_allowlisted(tmp_path: Path) -> None:
    source = {"HARNESS_SIGNING_PASSPHRASE": "s3cret", "MY_TOKEN": "t"}
    env = proc.base_env(tmp_path, ["HARNESS_SIGNING_PASSPHRASE", "MY_TOKEN"], source)
    assert "HARNESS_SIGNING_PASSPHRASE" not in env
    assert env["MY_TOKEN"] == "t"  # the twin: an allowlisted name passes


# -- verifying -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def envelope(ran: Sample, keys: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(signed(ran, keys / "key"))
    return doc


def test_a_signed_statement_verifies_with_either_public_key_format(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    path = written(tmp_path, envelope)
    head = ran.git("rev-parse", "HEAD").strip()
    for pub in ("key.pub", "pub.pem"):
        code, line = verify(ran, path, keys / pub)
        assert code == 0
        assert line.startswith("attest demo: verified: signed by keyid ")
        assert f"commit {head} and log head " in line


def resigned(doc: dict[str, Any], keys: Path, change: Any) -> dict[str, Any]:
    """The envelope's Statement changed by `change` and signed again with the same key: what
    the key's holder could forge, which only the repository can refute."""
    statement = orjson.loads(base64.b64decode(doc["payload"]))
    change(statement)
    key = serialization.load_pem_private_key((keys / "key.pem").read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    return signing.sign(orjson.dumps(statement), key)


def flipped(doc: dict[str, Any], field: str) -> dict[str, Any]:
    changed = copy.deepcopy(doc)
    holder = changed["signatures"][0] if field == "sig" else changed
    raw = bytearray(base64.b64decode(holder[field]))
    raw[len(raw) // 2] ^= 1
    holder[field] = base64.b64encode(bytes(raw)).decode()
    return changed


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        ("payload", "does not verify: the payload, its type or the signature was changed"),
        ("sig", "does not verify: the payload, its type or the signature was changed"),
        ("payloadType", "payloadType is 'application/json'"),
        ("wrong key", "not by this key"),
    ],
)
def test_a_tampered_envelope_is_refused(
    ran: Sample,
    keys: Path,
    envelope: dict[str, Any],
    tmp_path: Path,
    tamper: str,
    reason: str,
) -> None:
    pub = keys / "key.pub"
    if tamper == "payloadType":
        doc = {**envelope, "payloadType": "application/json"}
    elif tamper == "wrong key":
        doc, pub = envelope, keys / "other.pub"
    else:
        doc = flipped(envelope, tamper)
    code, line = verify(ran, written(tmp_path, doc), pub)
    assert code == 1
    assert line.startswith("attest demo: REFUSED: ") and reason in line


def test_what_an_envelope_says_is_shown_escaped(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    forged = copy.deepcopy(envelope)
    forged["signatures"][0]["keyid"] = "\x1b[2J" + "k" * 1000
    code, line = verify(ran, written(tmp_path, forged), keys / "key.pub")
    assert code == 1
    assert "\x1b" not in line and "\\x1b[2J" in line and len(line) < 300


def test_a_statement_the_key_signed_but_the_repository_refutes_is_refused(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    pub = keys / "key.pub"
    parent = ran.git("rev-parse", "HEAD~1").strip()

    def subject(value: str) -> Any:
        return lambda s: s["subject"][0]["digest"].update(gitCommit=value)

    def tree(s: dict[str, Any]) -> None:
        s["subject"][1]["digest"]["gitTree"] = "0" * 40

    def head(s: dict[str, Any]) -> None:
        s["predicate"]["buildDefinition"]["internalParameters"]["log_head"] = "0" * 64

    def plan(s: dict[str, Any]) -> None:
        s["predicate"]["buildDefinition"]["externalParameters"]["plan"]["title"] = "other"

    cases = [
        (subject("0" * 40), f"subject commit {'0' * 40} is not in the repository"),
        (subject("--all"), "subject commit '--all' is not a commit id"),
        (subject(parent), f"subject commit {parent} is not the task's newest commit"),
        (tree, "subject tree 0000000000000000000000000000000000000000 is not commit"),
        (head, "the Statement's log head 0000"),
        (plan, "differs from the repository's at predicate.buildDefinition.externalParameters"),
    ]
    for change, reason in cases:
        code, line = verify(ran, written(tmp_path, resigned(envelope, keys, change)), pub)
        assert (code, reason in line) == (1, True), line
    # The twin: the same Statement signed again as it was verifies.
    code, _ = verify(ran, written(tmp_path, resigned(envelope, keys, lambda s: None)), pub)
    assert code == 0
    code, line = verify(ran, written(tmp_path, envelope), pub, task="other")
    assert (code, line) == (
        1,
        "attest other: REFUSED: the Statement is of task 'demo', not 'other'",
    )


@pytest.mark.parametrize(
    "payload",
    [
        b"[]",
        b"not json",
        b'{"predicate": [], "subject": "x"}',
        b'{"predicate": {"buildDefinition": {"externalParameters": {"task_id": "demo"}}}, '
        b'"subject": [{"digest": {"gitCommit": 7}}]}',
    ],
)
def test_a_signed_payload_of_any_shape_is_refused_not_a_crash(
    ran: Sample, keys: Path, tmp_path: Path, payload: bytes
) -> None:
    key = serialization.load_pem_private_key((keys / "key.pem").read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    code, line = verify(ran, written(tmp_path, signing.sign(payload, key)), keys / "key.pub")
    assert code == 1, line
    assert "not a harness Statement" in line or "is not a commit id" in line


def test_odd_shapes_in_a_signed_statement_are_named_not_crashed_on(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    def odd(s: dict[str, Any]) -> None:
        s["subject"].append("not a descriptor")
        s["subject"].append({"digest": "not a digest"})
        s["predicate"]["runDetails"] = []

    code, line = verify(ran, written(tmp_path, resigned(envelope, keys, odd)), keys / "key.pub")
    assert (code, line) == (
        1,
        "attest demo: REFUSED: the Statement differs from the repository's at predicate.runDetails",
    )


def test_a_log_moved_since_the_signature_is_refused(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    copy = copy_of(ran, tmp_path)
    path, pub = written(tmp_path, envelope), keys / "key.pub"
    log = copy.root / LOG
    signed_log = log.read_bytes()
    lines = signed_log.splitlines(keepends=True)
    log.write_bytes(signed_log + lines[-1])
    assert verify(copy, path, pub) == (
        1,
        f"attest demo: REFUSED: {LOG}: 1 line appended since the Statement",
    )
    log.write_bytes(b"".join([*lines[:2], lines[2].replace(b'"ts"', b'"ts" '), *lines[3:]]))
    assert verify(copy, path, pub) == (
        1,
        f"attest demo: REFUSED: {LOG}: line 3 changed since the Statement",
    )
    # Committed, the edit is still refuted: the signed commit is still the task's newest.
    copy.commit_all("edit the log")
    assert verify(copy, path, pub)[1].endswith("line 3 changed since the Statement")
    log.write_bytes(signed_log)
    assert verify(copy, path, pub)[0] == 0


def test_a_log_moved_out_of_the_repository_is_refused_unread(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    """The log replaced by a link to a copy outside, which a secret joins: refused as a log
    that is not the one signed, and the secret is never shown."""
    copy = copy_of(ran, tmp_path)
    path, pub = written(tmp_path, envelope), keys / "key.pub"
    log, outside = copy.root / LOG, tmp_path / "outside.ndjson"
    outside.write_bytes(log.read_bytes() + b"S3CRET\n")
    log.unlink()
    log.symlink_to(outside)
    code, line = verify(copy, path, pub)
    assert (code, "S3CRET" in line) == (1, False)
    assert line.endswith(f"the log on disk is not the one signed: {LOG}: a symlink")
    log.unlink()
    log.write_bytes(outside.read_bytes()[: -len(b"S3CRET\n")])  # the twin: the log as signed
    assert verify(copy, path, pub)[0] == 0
    log.unlink()
    assert verify(copy, path, pub) == (
        1,
        f"attest demo: REFUSED: {LOG}: gone from disk since the Statement",
    )


def test_the_task_going_on_after_the_signature_is_refused(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    copy = copy_of(ran, tmp_path)
    path, pub = written(tmp_path, envelope), keys / "key.pub"
    old = copy.git("rev-parse", "HEAD").strip()
    (copy.root / "NOTES.md").write_text("later\n")
    copy.git("add", "NOTES.md")
    copy.git(
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "-m",
        "later\n\nHarness-Task: demo",
    )
    new = copy.git("rev-parse", "HEAD").strip()
    code, line = verify(copy, path, pub)
    assert code == 1
    assert line.endswith(f"subject commit {old} is not the task's newest commit {new}")
    # The twin: a commit that is not the task's leaves the signature standing.
    copy.git("reset", "-q", "--hard", old)
    (copy.root / "NOTES.md").write_text("not the task's\n")
    copy.commit_all("unrelated")
    assert verify(copy, path, pub)[0] == 0


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "not JSON"),
        (b'{"payload": "", "payloadType": "x"}', "not a DSSE envelope"),
        (
            b'{"payload": "!!", "payloadType": "x", "signatures": [{"keyid": "k", "sig": ""}]}',
            "the payload is not base64",
        ),
    ],
)
def test_an_envelope_nobody_can_read_is_invalid_input(
    ran: Sample, keys: Path, tmp_path: Path, raw: bytes, reason: str
) -> None:
    code, line = verify(ran, written(tmp_path, raw), keys / "key.pub")
    assert code == 2
    assert line.startswith("harness: ") and reason in line


def test_verify_needs_a_readable_public_key_and_no_output(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    path = written(tmp_path, envelope)
    for args, reason in [
        (("--verify", str(path)), "needs --key"),
        (("--verify", str(path), "--key", str(keys / "nosuch")), "nosuch: file not found"),
        (("--verify", str(path), "--key", str(keys / "key.pem")), "a private key; --key takes"),
        (("--verify", str(path), "--key", str(path)), "nor an allowed signers file"),
        (("--verify", str(tmp_path / "none"), "--key", str(keys / "pub.pem")), "not found"),
        (("--verify", str(path), "--key", str(keys / "pub.pem"), "-o", "x"), "no file"),
        (("--key", str(keys / "pub.pem")), "--key goes with --verify"),
    ]:
        res = ran.cli("attest", "demo", *args)
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.splitlines()) == 1 and reason in res.stderr, res.stderr
    assert not (ran.root / "x").exists() and not Path("x").exists()
    assert os.path.exists(path)


def test_only_signing_and_verifying_import_the_sign_extra(
    ran: Sample, keys: Path, tmp_path: Path
) -> None:
    extra = {"cryptography", "securesystemslib"}
    repo = ("--repo", str(ran.root))
    out = str(tmp_path / "out.json")
    for args in (("attest", "demo", "-o", out), ("audit", "demo")):
        assert not {m.partition(".")[0] for m in loaded(*args, *repo)} & extra, args
    signing_run = loaded("attest", "demo", "--sign", str(keys / "key"), "-o", out, *repo)
    assert extra <= {m.partition(".")[0] for m in signing_run}


def test_verify_refuses_a_key_inside_the_repository(
    ran: Sample, keys: Path, envelope: dict[str, Any], tmp_path: Path
) -> None:
    """A pull request may commit a key (or an allowed signers file) of its own beside the
    record it forged: the key that checks comes from outside, as the one that signs does."""
    copy = copy_of(ran, tmp_path)
    path = written(tmp_path, envelope)
    for name in ("key.pub", "pub.pem"):
        inside = copy.root / "ai" / name
        shutil.copy(keys / name, inside)
        res = copy.cli("attest", "demo", "--verify", str(path), "--key", str(inside))
        assert res.returncode == 2, res.stdout
        assert res.stderr == (
            f"harness: {inside}: inside the repository; whoever writes the record could have "
            "put it there: give the key you trust from outside\n"
        )
        assert verify(copy, path, keys / name)[0] == 0  # the twin: the same key, outside
