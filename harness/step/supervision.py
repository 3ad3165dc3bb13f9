"""What a supervisor is shown of a checked change, and what its answer means (DESIGN §10).

A supervised subtask's change counts only once a verdict approves it: the registry agent
with the `audit` capability, called like any worker, or a person (`harness approve`). The
supervisor sees the pre-checkpoint (its copy is the worker's base) and the post-checkpoint
in its blobs: the subtask, the diff, the checks as logged, the worker's own account, and
the flags a reviewer should reconcile. Everything here is pure, and built only from what
the log and the recorded answer hold, so the request (and its call_id) comes out the same
when a killed run goes on and when CI replays it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.base import files
from harness.checks import citations
from harness.gate.diffgate import Change
from harness.spec.plan import Subtask

ROLE = "audit"
CONTINUE, REORIENT, PAUSE = "CONTINUE", "REORIENT", "PAUSE"
EVENTS = {CONTINUE: "step_approved", REORIENT: "step_reoriented", PAUSE: "step_paused"}
EXPECTED = ["verdict", "notes", "risks"]
GOAL = (
    "Judge subtask {sid}'s change before it is committed. Its goal was: {goal}\n"
    "The blobs hold the subtask, the diff against the base (your working copy), the checks "
    "it passed and the worker's own notes and risks, and flags to reconcile. Answer "
    "verdict.action CONTINUE (commit it), REORIENT (run it again; say how in "
    "verdict.correction) or PAUSE (stop the task for a person), with verdict.reason."
)
# A diff this close to a limit of the gate is worth a second look.
NEAR_LIMIT = 0.8


@dataclass(frozen=True)
class Verdict:
    action: str
    reason: str
    correction: str

    def details(self) -> dict[str, str]:
        found = {"reason": self.reason}
        if self.action == REORIENT:
            found["correction"] = self.correction
        return found


def verdict(result: dict[str, Any]) -> Verdict | str:
    """The supervisor's verdict, or why its answer gives none: a supervisor never writes."""
    if result.get("diffs"):
        return "a supervisor never writes, but its answer holds diffs"
    found = result.get("verdict")
    if not isinstance(found, dict):
        return "the answer holds no verdict"
    reason = str(found["reason"])
    # A correction left out is the reason itself: the worker must hear why.
    return Verdict(str(found["action"]), reason, str(found.get("correction") or reason))


def request(
    sub: Subtask,
    of: str,
    base: str,
    result: dict[str, Any],
    changes: Sequence[Change],
    checks: Sequence[dict[str, Any]],
    flags: Sequence[str],
) -> list[dict[str, str]]:
    """The blobs of the supervisor's call on call `of`'s change."""
    subtask = {
        "id": sub.id,
        "role": sub.role,
        "goal": sub.goal,
        "inputs": list(sub.inputs),
        "acceptance": list(sub.acceptance),
        "write_scope": list(sub.write_scope),
        "creates": list(sub.creates),
        "base": base,
        "call_id": of,
    }
    account: dict[str, Any] = {
        k: result[k] for k in ("plan", "notes", "risks", "metrics") if k in result
    }
    account["artifacts"] = [a["name"] for a in result.get("artifacts", [])]
    diff = "".join(c.patch if c.patch.endswith("\n") else c.patch + "\n" for c in changes)
    return [
        {"name": "checkpoint/subtask.json", "text": _json(subtask)},
        {"name": "checkpoint/diff.patch", "text": diff or "(no change)\n"},
        {"name": "checkpoint/checks.json", "text": _json(list(checks))},
        {"name": "checkpoint/answer.json", "text": _json(account)},
        {"name": "checkpoint/flags.json", "text": _json(list(flags))},
    ]


def flags(
    sub: Subtask,
    result: dict[str, Any],
    changes: Sequence[Change],
    checks: Sequence[dict[str, Any]],
    limits: tuple[int, int],
) -> list[str]:
    """What a reviewer should reconcile before trusting the checks: a pass that warned, a
    coverage claim, a risk citing no input, a diff near its scope's edge (a file added,
    deleted or renamed, or the gate's size limits nearly reached)."""
    found: list[str] = []
    for ev in checks:
        details = ev.get("details", {})
        if details.get("warnings"):
            found.append(
                f"check {details.get('check')} passed with {details['warnings']} warning line(s)"
            )
    claimed = result.get("metrics", {}).get("coverage_delta")
    if claimed is not None:
        found.append(f"the worker claims coverage_delta {claimed}")
    cited = {p: 1 << 30 for p in sub.inputs}  # any line: only whether an input is cited
    for risk in result.get("risks", []):
        if citations.check_findings([risk], cited):
            found.append(f"risk cites no input: {risk[:200]}")
    for change in changes:
        if change.kind != "modify":
            found.append(f"the diff {_KINDS.get(change.kind, change.kind)} {change.path}")
    max_bytes, max_files = limits
    size = sum(len(c.patch.encode()) for c in changes)
    if changes and (size >= NEAR_LIMIT * max_bytes or len(changes) >= NEAR_LIMIT * max_files):
        found.append(
            f"the diff is near the gate's limits: {len(changes)} of {max_files} files, "
            f"{size} of {max_bytes} bytes"
        )
    return found


_KINDS = {"add": "adds", "delete": "deletes", "rename": "renames"}


def _json(value: object) -> str:
    return files.pretty(value).decode()
