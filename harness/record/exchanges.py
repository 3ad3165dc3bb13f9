"""ai/exchanges/<task>/<call_id>/: the full record of one worker call, written atomically."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import files, folders, metrics, schemas
from harness.base.errors import InvalidInput
from harness.boundary import egress
from harness.boundary.worker import Outcome
from harness.record.envelope import Call
from harness.record.ledger import Ledger, digest

META = "meta.json"
# Verification evidence is added after the worker's record is sealed, so meta.json
# does not cover it.
VERIFY = "verify"


@dataclass(frozen=True)
class Exchange:
    folder: Path
    meta: dict[str, Any]
    contents: dict[str, bytes]  # every file meta.json covers, as hashed against it

    @property
    def stdout(self) -> bytes:
        return self.contents.get("stdout.ndjson", b"")

    @property
    def refused(self) -> list[str]:
        """Where the agent's network reached and the call's proxy refused it."""
        return egress.refused(self.contents.get(egress.RECORD, b""))

    def artifacts(self) -> dict[str, str]:
        """Each artifact's text, as the worker's answer gave it and harness wrote it: UTF-8."""
        found = {}
        for name, data in sorted(self.contents.items()):
            if name.startswith("artifacts/"):
                try:
                    found[name.removeprefix("artifacts/")] = data.decode("utf-8")
                except UnicodeDecodeError:
                    label = f"exchange {self.folder.name}/{name}"
                    raise InvalidInput(f"{label}: not UTF-8 text") from None
        return found


def stage(staging: Path, call: Call) -> Path:
    """A fresh staging folder holding the worker's stdin (the two envelope lines)."""
    folders.remove(staging)
    staging.mkdir(parents=True)
    (staging / "stdin").write_bytes(call.stdin())
    return staging


def commit(
    staging: Path,
    final: Path,
    call: Call,
    outcome: Outcome,
    meta: dict[str, Any],
    ledger: Ledger,
) -> Exchange:
    """Complete the staged folder (envelope, patches, artifacts, meta) and rename it in,
    entered in the ledger first (whatever HEAD has at `final` gives way to it)."""
    (staging / "stdin").unlink()
    (staging / "context.ndjson").write_bytes(files.dumps(call.context) + b"\n")
    (staging / "prompt.ndjson").write_bytes(files.dumps(call.prompt) + b"\n")
    (staging / "patches").mkdir()
    (staging / "artifacts").mkdir()
    for i, diff in enumerate(outcome.result.get("diffs", [])):
        (staging / "patches" / f"{i:03d}.patch").write_text(diff["patch"], "utf-8")
    for art in outcome.result.get("artifacts", []):
        (staging / "artifacts" / art["name"]).write_text(art["content"], "utf-8")
    outcome_record = {"status": outcome.status}
    if outcome.kind is not None:
        outcome_record |= {"kind": outcome.kind, "message": outcome.message or ""}
    found = _contents(staging, staging.parent)  # harness's own scratch
    meta = {
        **meta,
        "call_id": call.call_id,
        "outcome": outcome_record,
        "files": _hashes(found),
        "harness_version": __version__,
    }
    schemas.validate("exchange-meta", meta, f"exchange {call.call_id}")
    sealed = files.pretty(meta)
    (staging / META).write_bytes(sealed)
    for item in folders.entries(staging, folders.COPY_DEPTH, folders.COPY_ENTRIES):
        if item.kind == "file":
            files.fsync_file(staging / item.rel)
    entries: dict[Path, str | None] = {final: None}
    entries |= {final / name: sha for name, sha in meta["files"].items()}
    ledger.note(entries | {final / META: digest(sealed)})
    final.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(final)
    files.fsync_dir(final.parent)
    return Exchange(final, meta, {n: d for n, d in found.items() if isinstance(d, bytes)})


def load(folder: Path, root: Path) -> Exchange | None:
    """The recorded exchange in `folder` below `root` (the repository), or None when there is
    none; a damaged one, or one reached through a symlink, is an error."""
    label = f"exchange {folder.name}"
    data = files.read_regular(folder / META, f"{label}/meta.json", root)
    if data is None:
        return None
    try:
        meta = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise InvalidInput(f"{label}: meta.json is not JSON") from None
    schemas.validate("exchange-meta", meta, f"{label}/meta.json")
    found = _contents(folder, root)
    if meta["call_id"] != folder.name or meta["files"] != _hashes(found):
        raise InvalidInput(f"{label}: files do not match meta.json")
    return Exchange(folder, meta, {n: d for n, d in found.items() if isinstance(d, bytes)})


def _everything(folder: Path, root: Path) -> dict[str, bytes | str]:
    """Every file of the folder by path inside it: bytes, or why not a regular file. Read
    from `root` down without following a symlink at any component: a record committed by
    someone else must not pull in files from outside it."""
    rel = folder.relative_to(root).as_posix()
    cut = len(rel) + 1
    return {path[cut:]: found for path, found in files.walk(root, rel)}


def _contents(folder: Path, root: Path) -> dict[str, bytes | str]:
    """The files meta.json covers, by path inside the folder: bytes, or why not a file."""
    return {
        name: found
        for name, found in _everything(folder, root).items()
        if name != META and name.partition("/")[0] != VERIFY
    }


def evidence(folder: Path, root: Path) -> dict[str, bytes]:
    """The verification evidence added after sealing (verify/<name>.json), regular files
    only, by name."""
    cut = len(VERIFY) + 1
    return {
        name[cut:]: found
        for name, found in _everything(folder, root).items()
        if name.startswith(f"{VERIFY}/") and isinstance(found, bytes)
    }


def _hashes(found: dict[str, bytes | str]) -> dict[str, str]:
    return {name: digest(d) if isinstance(d, bytes) else d for name, d in found.items()}


def _metrics(stdout: bytes) -> dict[str, Any] | None:
    """An answer line's result.metrics, or None."""
    try:
        answer = orjson.loads(stdout or b"")
    except orjson.JSONDecodeError:
        return None
    result = answer.get("result") if isinstance(answer, dict) else None
    metrics = result.get("metrics") if isinstance(result, dict) else None
    return metrics if isinstance(metrics, dict) else None


def session_id(stdout: bytes) -> object:
    """What an answer line names as its agent CLI's session (metrics.session_id): anything
    the answer holds, None when it names none. The caller holds it to ids.SESSION."""
    return (_metrics(stdout) or {}).get("session_id")


def reported(stdout: bytes) -> tuple[float | None, int | None]:
    """The cost (USD) and tokens an answer line reports in result.metrics, each None when
    it reports none within an answer's bounds (the record may be anyone's; see metrics), or
    is no answer at all."""
    found = metrics.figures(_metrics(stdout))
    tokens = found.get("tokens")
    return found.get("cost_usd"), (None if tokens is None else int(tokens))


def total_cost(folder: Path, root: Path) -> tuple[float, int]:
    """The cost the task's agents reported (metrics.cost_usd), over every recorded call, and
    how many calls reported none: while any did, the total is only what is known."""
    total, unknown = 0.0, 0
    for name, found in _everything(folder, root).items():
        if name.count("/") == 1 and name.endswith("/stdout.ndjson") and isinstance(found, bytes):
            cost, _ = reported(found)
            total += cost or 0.0
            unknown += cost is None
    return total, unknown
