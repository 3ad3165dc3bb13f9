"""DSSE envelopes signed with Ed25519: keys read in each format (and refused in every other),
the keyid, deterministic signing, an envelope read back and checked, and `cryptography` alone
verifying what securesystemslib signed."""

from __future__ import annotations

import base64
import copy
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.base import signing
from harness.base.errors import InvalidInput

PAYLOAD = b'{"_type": "https://in-toto.io/Statement/v1"}\n'
# `ssh-keygen -t ed25519 -N pw`: its KDF is bcrypt, which harness does not install.
ENCRYPTED_OPENSSH = b"""-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABC9NAWPsm
dUPI7Izx978JI+AAAAEAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAIMsuJsCLv9Tzj2us
8vSxWQfVcTsoGLE6eSNL8iZ+HI8WAAAAkKuh50wkC8kmHpcBakyLFnxUvkSVumplYPbyp/
bpvzzHZ/8nIPB4RcMp/f0ZBrgV6/4lULzRZ44DGAfr1agIquYc7sN9fGYPH37mj2v5NZk6
xvqWyISlUS9PGCyV5Eigyg14a/AWuXv7JU9KPW4ZfFIWrv+iCzphnk1ln1+cmvNnaROPZe
98scUh/SOcu49AhA==
-----END OPENSSH PRIVATE KEY-----
"""

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


def pem(key: Any, password: bytes | None = None) -> bytes:
    crypt: serialization.KeySerializationEncryption = (
        serialization.NoEncryption()
        if password is None
        else serialization.BestAvailableEncryption(password)
    )
    data: bytes = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, crypt
    )
    return data


def openssh(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )


def public_pem(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def public_line(key: Ed25519PrivateKey) -> bytes:
    line = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return line + b" someone@host\n"


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(InvalidInput) as caught:
        call(*args)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- keys ----------------------------------------------------------------------------------


def test_a_key_reads_the_same_from_pem_and_openssh_and_its_keyid_is_sha256_of_raw() -> None:
    raw = KEY.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    expected = hashlib.sha256(raw).hexdigest()
    for data in (pem(KEY), openssh(KEY)):
        assert signing.keyid(signing.private_key(data, "k", None).public_key()) == expected
    for data in (public_pem(KEY), public_line(KEY)):
        assert signing.keyid(signing.public_key(data, "k.pub")) == expected


def test_an_encrypted_pem_key_needs_its_passphrase_and_an_open_one_refuses_one() -> None:
    locked = pem(KEY, b"pw")
    assert "set HARNESS_SIGNING_PASSPHRASE" in refused(signing.private_key, locked, "k", None)
    assert "not a usable PEM" in refused(signing.private_key, locked, "k", b"wrong")
    opened = signing.private_key(locked, "k", b"pw")
    assert signing.keyid(opened.public_key()) == signing.keyid(KEY.public_key())
    assert "unset HARNESS_SIGNING_PASSPHRASE" in refused(signing.private_key, pem(KEY), "k", b"pw")


def test_an_encrypted_openssh_key_is_refused_naming_the_agent_instead() -> None:
    for passphrase in (None, b"pw"):
        message = refused(signing.private_key, ENCRYPTED_OPENSSH, "k", passphrase)
        assert message.startswith("k: an encrypted OpenSSH key")


@pytest.mark.parametrize(
    "data",
    [
        pem(rsa.generate_private_key(public_exponent=65537, key_size=1024)),
        pem(ec.generate_private_key(ec.SECP256R1())),
    ],
    ids=["rsa", "ecdsa"],
)
def test_a_key_of_another_type_is_refused(data: bytes) -> None:
    assert "harness signs with Ed25519" in refused(signing.private_key, data, "k", None)


@pytest.mark.parametrize(
    "data", [b"", b"hello", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"]
)
def test_what_is_no_private_key_is_refused(data: bytes) -> None:
    assert refused(signing.private_key, data, "k", None).startswith("k: not a")


def test_a_public_key_of_another_type_or_no_key_is_refused() -> None:
    rsa_pub = (
        rsa.generate_private_key(public_exponent=65537, key_size=1024)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert "harness signs with Ed25519" in refused(signing.public_key, rsa_pub, "p")
    assert refused(signing.public_key, b"ssh-ed25519 nonsense", "p").startswith("p: not a")
    assert refused(signing.public_key, pem(KEY), "p").startswith("p: not a")


# -- signing and checking ------------------------------------------------------------------


def envelope(key: Ed25519PrivateKey = KEY, payload: bytes = PAYLOAD) -> dict[str, Any]:
    return signing.sign(payload, key)


def read(doc: dict[str, Any]) -> signing.Envelope:
    return signing.read(orjson.dumps(doc), "env")


def test_signing_is_deterministic_and_the_envelope_is_in_toto_dsse() -> None:
    first = envelope()
    assert envelope() == first
    assert first["payloadType"] == "application/vnd.in-toto+json"
    assert base64.b64decode(first["payload"]) == PAYLOAD
    assert [s["keyid"] for s in first["signatures"]] == [signing.keyid(KEY.public_key())]


def test_cryptography_alone_verifies_the_signature_over_the_pae() -> None:
    doc = envelope()
    kind = doc["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(PAYLOAD), PAYLOAD)
    assert signing.pae(doc["payloadType"], PAYLOAD) == pae
    sig = base64.b64decode(doc["signatures"][0]["sig"])
    KEY.public_key().verify(sig, pae)  # raises InvalidSignature otherwise


def test_a_good_envelope_checks_and_reading_it_changes_nothing() -> None:
    doc = envelope()
    kept = copy.deepcopy(doc)
    read_back = read(doc)
    assert signing.check(read_back, KEY.public_key()) is None
    assert signing.check(read_back, KEY.public_key()) is None  # twice: nothing was consumed
    assert doc == kept
    assert read_back.payload == PAYLOAD


def with_field(doc: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(doc)
    if field == "sig":
        changed["signatures"][0]["sig"] = value
    else:
        changed[field] = value
    return changed


def test_every_change_to_a_signed_envelope_fails_its_check() -> None:
    doc = envelope()
    sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
    sig[0] ^= 1
    for changed in (
        with_field(doc, "payload", base64.b64encode(PAYLOAD + b" ").decode()),
        with_field(doc, "payloadType", "application/json"),
        with_field(doc, "sig", base64.b64encode(bytes(sig)).decode()),
        with_field(doc, "sig", base64.b64encode(b"short").decode()),
    ):
        why = signing.check(read(changed), KEY.public_key())
        assert why is not None and "does not verify" in why


def test_another_key_is_named_as_not_the_signer() -> None:
    why = signing.check(read(envelope()), OTHER.public_key())
    assert why == (
        f"signed by keyid {signing.keyid(KEY.public_key())}, not by this key "
        f"(keyid {signing.keyid(OTHER.public_key())})"
    )
    assert signing.check(read(envelope(OTHER)), OTHER.public_key()) is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a DSSE envelope"),
        (b'{"payload": "", "payloadType": "x"}', "not a DSSE envelope"),
        (b'{"payload": "", "payloadType": "x", "signatures": [], "extra": 1}', "not a DSSE"),
        (b'{"payload": "", "payloadType": "x", "signatures": []}', "payloadType or signatures"),
        (b'{"payload": "", "payloadType": 1, "signatures": [{}]}', "payloadType or signatures"),
        (b'{"payload": "", "payloadType": "x", "signatures": [{}]}', "without a keyid"),
        (b'{"payload": "", "payloadType": "x", "signatures": [1]}', "without a keyid"),
        (b'{"payload": "", "payloadType": "x", "signatures": [{"keyid": "a"}]}', "not a string"),
        (
            b'{"payload": "", "payloadType": "x", "signatures": [{"keyid": "a", "sig": "%%"}]}',
            "a signature is not base64",
        ),
        (
            b'{"payload": "!", "payloadType": "x", "signatures": [{"keyid": "a", "sig": ""}]}',
            "the payload is not base64",
        ),
        # Not ASCII: base64 raised a ValueError of its own, not binascii.Error (exit 4).
        (
            b'{"payload": "\xc3\xa9", "payloadType": "x", '
            b'"signatures": [{"keyid": "a", "sig": ""}]}',
            "the payload is not base64",
        ),
        (
            b'{"payload": "", "payloadType": "x", '
            b'"signatures": [{"keyid": "a", "sig": "\xc3\xa9"}]}',
            "a signature is not base64",
        ),
        (
            b'{"payload": "", "payloadType": "x", "signatures": '
            b'[{"keyid": "a", "sig": ""}, {"keyid": "a", "sig": ""}]}',
            "two signatures with one keyid",
        ),
    ],
)
def test_what_is_not_a_dsse_envelope_is_refused_as_input(raw: bytes, reason: str) -> None:
    message = refused(signing.read, raw, "env")
    assert message.startswith("env: ") and reason in message


def test_the_smallest_dsse_envelope_reads() -> None:
    raw = b'{"payload": "", "payloadType": "x", "signatures": [{"keyid": "a", "sig": ""}]}'
    found = signing.read(raw, "env")
    assert (found.payload, found.payload_type, found.signatures) == (b"", "x", (("a", b""),))


def test_an_allowed_signers_file_is_told_from_a_key_line_and_from_junk() -> None:
    line = public_line(KEY)
    assert signing.is_ssh_public(line) and not signing.is_allowed_signers(line)
    allowed = b"# team\nalice@example.org " + line + b'bob,carol namespaces="x" ' + line
    assert signing.is_allowed_signers(allowed) and not signing.is_ssh_public(allowed)
    for junk in (b"", b"# only a comment\n", b"alice@example.org\n", b"a b c\n", pem(KEY)):
        assert not signing.is_allowed_signers(junk)
        assert not signing.is_ssh_public(junk)


def test_an_ssh_keyid_is_the_fingerprint_ssh_keygen_prints() -> None:
    blob = base64.b64decode(public_line(KEY).split()[1])
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert signing.ssh_keyid(public_line(KEY), "k") == f"ssh:SHA256:{digest}"
    assert refused(signing.ssh_keyid, b"ssh-ed25519 !!", "k") == "k: not an OpenSSH public key line"
    assert refused(signing.ssh_keyid, b"ssh-ed25519", "k") == "k: not an OpenSSH public key line"


def test_sshsig_is_what_ssh_keygen_makes_and_verifies(tmp_path: Path) -> None:
    """The same bytes `ssh-keygen -Y sign` writes for the key, and its `-Y verify` passes."""
    (tmp_path / "key").write_bytes(openssh(KEY))
    (tmp_path / "key").chmod(0o600)
    message = tmp_path / "message"
    message.write_bytes(b"tree t\n\ncommit\n")
    subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-f", "key", "-n", "git", "message"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    made = signing.sshsig(KEY, "git", message.read_bytes())
    assert (tmp_path / "message.sig").read_text().strip() == made
    (tmp_path / "allowed").write_bytes(b"me " + public_line(KEY))
    for namespace, passes in (("git", True), ("file", False)):
        done = subprocess.run(
            [
                "ssh-keygen",
                "-Y",
                "verify",
                "-f",
                "allowed",
                "-I",
                "me",
                "-n",
                namespace,
                "-s",
                "message.sig",
            ],
            cwd=tmp_path,
            input=message.read_bytes(),
            capture_output=True,
            check=False,
        )
        assert (done.returncode == 0) == passes
