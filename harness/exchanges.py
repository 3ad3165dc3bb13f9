"""ai/exchanges/<task>/<call_id>/: the full record of one worker call, written atomically."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from . import __version__, files, schemas
from .envelope import Call
from .errors import InvalidInput
from .worker import Outcome

META = "meta.json"
# Verification evidence is added after the worker's record is sealed, so meta.json
# does not cover it.
VERIFY = "verify"


@dataclass(frozen=True)
class Exchange:
    folder: Path
    meta: dict[str, Any]
    stdout: bytes

    def artifacts(self) -> dict[str, str]:
        folder = self.folder / "artifacts"
        if not folder.is_dir():
            return {}
        return {p.name: p.read_text("utf-8") for p in sorted(folder.iterdir())}


def stage(staging: Path, call: Call) -> Path:
    """A fresh staging folder holding the worker's stdin (the two envelope lines)."""
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "stdin").write_bytes(call.stdin())
    return staging


def commit(
    staging: Path, final: Path, call: Call, outcome: Outcome, meta: dict[str, Any]
) -> Exchange:
    """Complete the staged folder (envelope, patches, artifacts, meta) and rename it in."""
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
    meta = {
        **meta,
        "call_id": call.call_id,
        "outcome": outcome_record,
        "files": file_hashes(staging),
        "harness_version": __version__,
    }
    schemas.validate("exchange-meta", meta, f"exchange {call.call_id}")
    (staging / META).write_bytes(files.pretty(meta))
    for path in staging.rglob("*"):
        if path.is_file():
            files.fsync_file(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(final)
    files.fsync_dir(final.parent)
    return Exchange(final, meta, (final / "stdout.ndjson").read_bytes())


def load(folder: Path) -> Exchange | None:
    """The recorded exchange, or None when there is none; a damaged one is an error."""
    meta_path = folder / META
    if not meta_path.exists():
        return None
    label = f"exchange {folder.name}"
    try:
        meta = orjson.loads(meta_path.read_bytes())
    except orjson.JSONDecodeError:
        raise InvalidInput(f"{label}: meta.json is not JSON") from None
    schemas.validate("exchange-meta", meta, f"{label}/meta.json")
    if meta["call_id"] != folder.name or meta["files"] != file_hashes(folder):
        raise InvalidInput(f"{label}: files do not match meta.json")
    return Exchange(folder, meta, (folder / "stdout.ndjson").read_bytes())


def file_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file meta.json covers: all but meta.json itself and verify/."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != META and p.relative_to(folder).parts[0] != VERIFY
    }


def total_cost(folder: Path) -> float:
    """The cost the task's agents reported (metrics.cost_usd), over every recorded call."""
    total = 0.0
    for stdout in sorted(folder.glob("*/stdout.ndjson")):
        try:
            answer = orjson.loads(stdout.read_bytes())
        except orjson.JSONDecodeError:
            continue  # a malformed answer reported no cost
        metrics = answer.get("result", {}).get("metrics", {}) if isinstance(answer, dict) else {}
        cost = metrics.get("cost_usd") if isinstance(metrics, dict) else None
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            total += float(cost)
    return total
