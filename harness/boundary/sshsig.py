"""SSHSIG signatures made and checked by the system's ssh-keygen (`-Y sign`, `-Y verify`), so a
key that ssh-agent or a hardware token holds signs without harness ever seeing it.

Signing is given only the public key (copied into a scratch folder): ssh-keygen must find
the private half in the agent, never in a file beside the public one.
"""

from __future__ import annotations

import base64
import shutil
import tempfile
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.printable import printable
from harness.boundary import proc

NAMESPACE = "harness-attest"  # a signature made for another use (git, a file) never passes
_ARMOR = ("-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----")
_TIMEOUT_S = 120.0  # a hardware token waits for a touch


def _keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise InvalidInput("ssh-keygen not found on PATH: an ssh key signs through it")
    return found


def _run(argv: list[str], scratch: Path, stdin: Path | None = None) -> tuple[int, str, str]:
    out, err = scratch / "stdout", scratch / "stderr"
    # The agent's socket is all ssh-keygen needs of the caller's environment.
    env = proc.base_env(scratch, ("SSH_AUTH_SOCK",))
    res = proc.run(
        argv, cwd=scratch, env=env, stdin=stdin, stdout=out, stderr=err, hard_s=_TIMEOUT_S
    )
    said = err.read_bytes().decode("utf-8", "replace").strip().splitlines()
    return res.code, out.read_bytes().decode("utf-8", "replace"), said[-1] if said else ""


def sign(message: bytes, public_line: bytes, label: str) -> bytes:
    """The SSHSIG blob (the armor's bytes) of `message` by the key whose public line is
    given (read from `label`), signed by ssh-agent."""
    with tempfile.TemporaryDirectory(prefix="harness-sshsig-") as tmp:
        scratch = Path(tmp)
        (scratch / "key.pub").write_bytes(public_line)
        (scratch / "key.pub").chmod(0o600)
        (scratch / "message").write_bytes(message)
        argv = [_keygen(), "-Y", "sign", "-f", "key.pub", "-n", NAMESPACE, "message"]
        code, _, said = _run(argv, scratch, stdin=Path("/dev/null"))
        if code != 0:
            raise InvalidInput(
                f"{label}: ssh-keygen -Y sign failed (ssh-agent must hold its private half): "
                f"{printable(said)}"
            )
        return unarmor((scratch / "message.sig").read_text())


def verify(message: bytes, blob: bytes, allowed_signers: bytes) -> str | tuple[str, ...]:
    """The principals for whom the signature verifies over `message`, or why none does."""
    with tempfile.TemporaryDirectory(prefix="harness-sshsig-") as tmp:
        scratch = Path(tmp)
        (scratch / "allowed").write_bytes(allowed_signers)
        (scratch / "message").write_bytes(message)
        (scratch / "sig").write_text(armor(blob))
        keygen = _keygen()
        find = [keygen, "-Y", "find-principals", "-s", "sig", "-f", "allowed"]
        code, out, said = _run(find, scratch, stdin=Path("/dev/null"))
        if code != 0:
            return f"no allowed signer holds the ssh signature's key ({printable(said)})"
        principals = tuple(line for line in out.splitlines() if line)
        check = [keygen, "-Y", "verify", "-f", "allowed", "-n", NAMESPACE, "-s", "sig", "-I"]
        passed = tuple(
            who
            for who in principals
            if _run([*check, who], scratch, stdin=scratch / "message")[0] == 0
        )
        if not passed:
            return (
                "the ssh signature does not verify: the payload, its type or the signature "
                "was changed"
            )
        return passed


def armor(blob: bytes) -> str:
    text = base64.b64encode(blob).decode()
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join([_ARMOR[0], *lines, _ARMOR[1]]) + "\n"


def unarmor(text: str) -> bytes:
    lines = text.strip().splitlines()
    if len(lines) < 3 or (lines[0], lines[-1]) != _ARMOR:
        raise InvalidInput("ssh-keygen -Y sign wrote no SSH signature")
    return base64.b64decode("".join(lines[1:-1]))
