"""`harness attest`: an in-toto SLSA provenance statement for a task's commit, unsigned,
signed into a DSSE envelope (`--sign`), or an envelope checked (`--verify`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.base import files
from harness.base.errors import InvalidInput
from harness.base.printable import printable
from harness.cli import extras, located
from harness.cli.output import emit
from harness.readers import attest as provenance

PASSPHRASE = "HARNESS_SIGNING_PASSPHRASE"


def attest(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    if args.key is not None and args.verify is None:
        raise InvalidInput("attest --key goes with --verify")
    if args.sign is None and args.verify is None:
        emit(files.pretty(provenance.statement(layout, task_id)), args.output)
        return 0
    try:
        # The `sign` extra's libraries: plain `attest` neither needs nor pays for them.
        from harness.readers import signed
    except ModuleNotFoundError as exc:
        raise extras.missing(exc, "sign", "attest --sign/--verify") from None
    if args.verify is not None:
        if args.key is None:
            raise InvalidInput("attest --verify needs --key: the signer's public key")
        if args.output is not None:
            raise InvalidInput("attest --verify writes no file: leave out --output")
        verdict = signed.verify(layout, task_id, Path(args.verify), Path(args.key))
        # The reason may quote the envelope (a keyid, a field's name): shown, never acted on.
        said = printable(verdict.line)
        print(f"attest {task_id}: {'verified' if verdict.ok else 'REFUSED'}: {said}")
        return 0 if verdict.ok else 1
    passphrase = os.environ.get(PASSPHRASE)
    envelope = signed.sign(
        layout, task_id, Path(args.sign), None if passphrase is None else passphrase.encode()
    )
    emit(envelope, args.output)
    return 0
