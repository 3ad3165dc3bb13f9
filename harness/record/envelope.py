"""The two-line call envelope (context, prompt) and the call_id that names it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import rfc8785

from harness.base import files
from harness.spec.plan import Subtask

DEFAULT_CONSTRAINTS = ("ground-in-provided-files-only", "no-new-deps", "no-speculation")
RETRY_CONSTRAINT = "constrained-retry"
# A retry after a supervisor's REORIENT: harness/correction.txt says what to do differently.
CORRECTION_CONSTRAINT = "supervisor-correction"
EXPECTED = ["plan", "diffs", "artifacts", "risks", "notes", "metrics"]


@dataclass(frozen=True)
class Call:
    call_id: str
    context: dict[str, Any]
    prompt: dict[str, Any]

    def stdin(self) -> bytes:
        """Exactly two lines: context then prompt."""
        return files.dumps(self.context) + b"\n" + files.dumps(self.prompt) + b"\n"


def constraints(sub: Subtask, retry: bool, corrected: bool = False) -> list[str]:
    found = [c for c in DEFAULT_CONSTRAINTS if not (c == "no-new-deps" and sub.allow_new_deps)]
    found += [RETRY_CONSTRAINT] if retry else []
    return [*found, CORRECTION_CONSTRAINT] if corrected else found


def call_id(
    task_id: str,
    sub: Subtask,
    constraint_list: list[str],
    write_scope: str,
    input_hashes: dict[str, str],
    blobs: list[dict[str, str]],
    epoch: int,
    fallback: str | None = None,
) -> str:
    """sha256 of the canonical JSON (RFC 8785) of everything that shapes the answer."""
    material: dict[str, Any] = {
        "task_id": task_id,
        "subtask": sub.id,
        "role": sub.role,
        "goal": sub.goal,
        "constraints": constraint_list,
        "write_scope": write_scope,
        "scope": list(sub.write_scope),
        "inputs": {
            "paths": input_hashes,
            "blobs": {b["name"]: hashlib.sha256(b["text"].encode()).hexdigest() for b in blobs},
        },
        # A human's resume starts a new epoch, so a failed call is never answered from record.
        "epoch": epoch,
    }
    if fallback is not None:  # another agent's answer: never the given-up one's from record
        material["fallback"] = fallback
    return hashlib.sha256(rfc8785.dumps(material)).hexdigest()


def build(
    *,
    task_id: str,
    sub: Subtask,
    ts: str,
    branch: str,
    base: str,
    readonly: list[str],
    visible: list[str],
    token_id: str | None,
    input_hashes: dict[str, str],
    blobs: list[dict[str, str]],
    retry: bool,
    timeouts: dict[str, float],
    budgets: dict[str, Any],
    epoch: int,
    fallback: str | None = None,
    corrected: bool = False,
    expected: list[str] = EXPECTED,
    session: dict[str, Any] | None = None,
) -> Call:
    write_scope = f"token:{token_id}" if token_id else "none"
    cons = constraints(sub, retry, corrected)
    cid = call_id(task_id, sub, cons, write_scope, input_hashes, blobs, epoch, fallback)
    context = {
        "ts": ts,
        "task_id": task_id,
        "type": "context",
        "payload": {
            "repo_root": ".",
            "branch": branch,
            "base": base,
            "readonly": readonly,
            "visible": visible,
            "call_id": cid,
        },
    }
    prompt: dict[str, Any] = {
        "ts": ts,
        "task_id": task_id,
        "type": "prompt",
        "payload": {
            "subtask": sub.id,
            "role": sub.role,
            "goal": sub.goal,
            "constraints": cons,
            "inputs": {"paths": list(sub.inputs), "blobs": blobs},
            "expected": {"schema": "json", "fields": expected},
            "write_scope": write_scope,
            "scope": list(sub.write_scope),
            "creates": list(sub.creates),
            "timeouts": timeouts,
            "budgets": budgets,
        },
    }
    if session is not None:
        prompt["payload"]["session"] = session
    return Call(cid, context, prompt)
