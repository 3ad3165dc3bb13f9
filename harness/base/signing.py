"""DSSE envelopes signed with Ed25519: keys read from their bytes, the keyid harness gives a
key, an envelope signed, an envelope read back (refusing what is not one) and checked.

The keyid of an Ed25519 key is the sha256 of its 32 raw public bytes, in hex: anyone with the
public key computes it, whatever file format holds the key.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from securesystemslib import dsse
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from harness.base import files
from harness.base.errors import InvalidInput

IN_TOTO = "application/vnd.in-toto+json"
KEY_LIMIT = 64 << 10  # far above any Ed25519 key file, PEM or OpenSSH
# Their KDF is bcrypt, a library harness does not install; ssh-agent holds such keys anyway.
_ENCRYPTED_OPENSSH = (
    "{}: an encrypted OpenSSH key: harness reads only unencrypted ones "
    "(or give its public key and let ssh-agent sign)"
)


def keyid(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


# Why a key inside the repository is refused: a signing key there is within a worker's and
# the record's reach; a key that checks a record there is one the record's author chose.
SIGNING = "keep signing keys outside it, where no worker and no record can reach them"
CHECKING = "whoever writes the record could have put it there: give the key you trust from outside"


def read_key(root: Path, path: Path, label: str, why: str = SIGNING) -> bytes:
    """The bytes of a key file that lies outside the repository at `root`, whichever way it
    is named: nothing under the root (a worker's copy, the record) may ever hold a key, so a
    key there, or a link to one there, is refused before it is read, saying `why`."""
    top = root.resolve()
    named = Path(os.path.abspath(path))  # `..` taken away as written; links, next line
    real = named.resolve()
    if named.is_relative_to(top) or real.is_relative_to(top):
        raise InvalidInput(f"{label}: inside the repository; {why}")
    data = files.read_regular(real, label, limit=KEY_LIMIT)
    if data is None:
        raise InvalidInput(f"{label}: file not found")
    return data


def private_key(data: bytes, label: str, passphrase: bytes | None) -> Ed25519PrivateKey:
    """An Ed25519 private key from PKCS#8 PEM or OpenSSH bytes; anything else, a key of
    another type, an encrypted key without `passphrase` (or an encrypted OpenSSH key, whose
    KDF needs bcrypt, which harness does not install) is one line naming `label`."""
    if b"-----BEGIN" not in data:
        raise InvalidInput(f"{label}: not a PEM or OpenSSH private key")
    kind = "OpenSSH" if b"-----BEGIN OPENSSH PRIVATE KEY-----" in data else "PEM"
    try:
        key: object = (
            serialization.load_ssh_private_key(data, passphrase)
            if kind == "OpenSSH"
            else serialization.load_pem_private_key(data, passphrase)
        )
    except TypeError:  # what cryptography raises for a passphrase missing or one too many
        if passphrase is not None:
            raise InvalidInput(
                f"{label}: the key is not encrypted: unset HARNESS_SIGNING_PASSPHRASE"
            ) from None
        if kind == "PEM":
            raise InvalidInput(
                f"{label}: the key is encrypted: set HARNESS_SIGNING_PASSPHRASE"
            ) from None
        raise InvalidInput(_ENCRYPTED_OPENSSH.format(label)) from None
    except UnsupportedAlgorithm:
        raise InvalidInput(_ENCRYPTED_OPENSSH.format(label)) from None
    except ValueError as exc:
        raise InvalidInput(f"{label}: not a usable {kind} private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidInput(f"{label}: a {type(key).__name__} key; harness signs with Ed25519")
    return key


def public_key(data: bytes, label: str) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file or an OpenSSH public key line."""
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            key: object = serialization.load_pem_public_key(data)
        else:
            key = serialization.load_ssh_public_key(data.strip())
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InvalidInput(f"{label}: not a PEM or OpenSSH public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInput(f"{label}: a {type(key).__name__} key; harness signs with Ed25519")
    return key


# The first word of an OpenSSH public key line: the key's type.
_SSH_TYPES = (b"ssh-", b"ecdsa-sha2-", b"sk-ssh-", b"sk-ecdsa-")


def is_ssh_public(data: bytes) -> bool:
    """Whether `data` is an OpenSSH public key line (not a private key, not an allowed
    signers line, which starts with a principal)."""
    return data.lstrip().startswith(_SSH_TYPES)


def is_allowed_signers(data: bytes) -> bool:
    """Whether `data` reads as ssh-keygen's allowed signers file: each line that is not a
    comment names principals, then a key (ssh-keygen itself judges the rest)."""
    lines = [ln.split() for ln in data.splitlines() if ln.strip() and not ln.startswith(b"#")]
    return bool(lines) and all(
        len(words) >= 3 and any(w.startswith(_SSH_TYPES) for w in words[1:]) for words in lines
    )


def ssh_keyid(public_line: bytes, label: str) -> str:
    """`ssh:` and the key's fingerprint as `ssh-keygen -l` prints it (SHA256:...)."""
    words = public_line.split()
    try:
        blob = base64.b64decode(words[1], validate=True)
    except (IndexError, ValueError):  # binascii.Error, or a text that is not ASCII
        raise InvalidInput(f"{label}: not an OpenSSH public key line") from None
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"ssh:SHA256:{digest}"


def envelope(payload: bytes, signatures: list[tuple[str, bytes]]) -> dict[str, Any]:
    """An in-toto DSSE envelope of signatures made elsewhere, shaped as securesystemslib's."""
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": IN_TOTO,
        "signatures": [
            {"keyid": kid, "sig": base64.b64encode(sig).decode()} for kid, sig in signatures
        ],
    }


def load_public(root: Path, path: Path) -> Ed25519PublicKey:
    """The Ed25519 public key in the file at `path` (PEM or an OpenSSH line), which must lie
    outside the repository at `root` whose record it checks."""
    return public_key(read_key(root, path, str(path), CHECKING), str(path))


def sshsig(key: Ed25519PrivateKey, namespace: str, message: bytes) -> str:
    """The armored SSHSIG signature of `message` (OpenSSH's PROTOCOL.sshsig, sha512), as
    `ssh-keygen -Y sign -n namespace` makes it and git's ssh signing carries it; made here,
    it needs no agent, and Ed25519 makes it the same every time."""
    digest = hashlib.sha512(message).digest()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    fields = (namespace.encode(), b"", b"sha512")
    signed = b"SSHSIG" + b"".join(_ssh_string(f) for f in (*fields, digest))
    public = _ssh_string(b"ssh-ed25519") + _ssh_string(raw)
    signature = _ssh_string(b"ssh-ed25519") + _ssh_string(key.sign(signed))
    blob = b"SSHSIG" + (1).to_bytes(4, "big") + _ssh_string(public)
    blob += b"".join(_ssh_string(f) for f in (*fields, signature))
    text = base64.b64encode(blob).decode()
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join(["-----BEGIN SSH SIGNATURE-----", *lines, "-----END SSH SIGNATURE-----"])


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: the bytes a signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def sign(payload: bytes, key: Ed25519PrivateKey) -> dict[str, Any]:
    """An in-toto DSSE envelope of `payload`, signed by `key`. Ed25519 is deterministic:
    the same payload and key give the same envelope."""
    public = SSlibKey.from_crypto(key.public_key(), keyid(key.public_key()), "ed25519")
    envelope = dsse.Envelope(payload, IN_TOTO, {})
    envelope.sign(CryptoSigner(key, public))
    doc: dict[str, Any] = envelope.to_dict()
    return doc


@dataclass(frozen=True)
class Envelope:
    """An envelope as read: its payload decoded, its signatures' keyids and bytes."""

    doc: dict[str, Any]  # as it was read, for securesystemslib
    payload: bytes
    payload_type: str
    signatures: tuple[tuple[str, bytes], ...]


def read(raw: bytes, label: str) -> Envelope:
    """A DSSE envelope from JSON bytes; what is not JSON, not DSSE's shape or not base64 is
    one line naming `label` (input nobody can check, not a failed check)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{label}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or set(doc) != {"payload", "payloadType", "signatures"}:
        raise InvalidInput(f"{label}: not a DSSE envelope (payload, payloadType, signatures)")
    sigs = doc["signatures"]
    if not isinstance(doc["payloadType"], str) or not isinstance(sigs, list) or not sigs:
        raise InvalidInput(f"{label}: not a DSSE envelope: payloadType or signatures")
    found = []
    for sig in sigs:
        if not (isinstance(sig, dict) and isinstance(sig.get("keyid"), str)):
            raise InvalidInput(f"{label}: a signature without a keyid")
        found.append((sig["keyid"], _b64(sig.get("sig"), label, "a signature")))
    if len({k for k, _ in found}) != len(found):
        raise InvalidInput(f"{label}: two signatures with one keyid")
    payload = _b64(doc["payload"], label, "the payload")
    return Envelope(doc, payload, doc["payloadType"], tuple(found))


def _b64(value: object, label: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidInput(f"{label}: {what} is not a string")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error, or a text that is not ASCII
        raise InvalidInput(f"{label}: {what} is not base64") from None


def check(envelope: Envelope, public: Ed25519PublicKey) -> str | None:
    """None when a signature of `envelope` by `public` covers its type and payload, else why
    not, in one line."""
    kid = keyid(public)
    if kid not in {k for k, _ in envelope.signatures}:
        signers = ", ".join(k[:80] for k, _ in envelope.signatures[:4])
        return f"signed by keyid {signers}, not by this key (keyid {kid})"
    key = SSlibKey.from_crypto(public, kid, "ed25519")
    # from_dict rewrites the signatures it is given: it gets a copy.
    try:
        dsse.Envelope.from_dict(copy.deepcopy(envelope.doc)).verify([key], 1)
    except VerificationError:
        return (
            f"the signature of keyid {kid} does not verify: the payload, its type or the "
            "signature was changed"
        )
    return None
