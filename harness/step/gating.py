"""The gate phase: the call's write token checked again as its change lands, and every diff
held to the subtask's rules (diffgate) before anything is applied.
"""

from __future__ import annotations

from typing import Any

from harness.gate import diffgate
from harness.record import envelope, tokens
from harness.step.subtask import Subtask, token_of


def gate(job: Subtask, call: envelope.Call, result: dict[str, Any]) -> list[diffgate.Change] | None:
    """The answer's diffs as changes the gate let through; None after a refusal, logged."""
    token = token_for_apply(job, call)
    if token is None:
        job.phase("gate", False)
        return None
    try:
        changes = diffgate.check(result["diffs"], rules(job, token, job.task.git.head()))
    except diffgate.DiffRefused as refused:
        job.phase("gate", False)
        job.fail(str(refused), "gate")
        return None
    job.phase("gate", True)
    return changes


def token_for_apply(job: Subtask, call: envelope.Call) -> tokens.Token | None:
    """The invocation's token, checked again now (expiry, revocation, one-shot)."""
    token_id = token_of(call)
    if token_id is None:
        job.fail("diffs returned but the call had no write token (write_scope none)", "gate")
        return None
    known = job.task.token_store()
    found = next((t for t in known if t.id == token_id), None)
    why = "it no longer exists" if found is None else found.usable_at(job.task.log.now())
    if why is not None:
        job.fail(f"write token {token_id}: {why}", "gate")
        return None
    return found


def ahead(
    job: Subtask, call: envelope.Call, result: dict[str, Any], head: str
) -> list[diffgate.Change] | None:
    """The changes the gate would let through were `head` the branch's head, or None if it
    would refuse them; nothing logged. For checks run ahead: the gate itself runs again,
    with the token checked, when the change lands."""
    token_id = token_of(call)
    token = next((t for t in job.task.token_store() if t.id == token_id), None)
    if token is None:
        return None
    try:
        return diffgate.check(result["diffs"], rules(job, token, head))
    except diffgate.DiffRefused:
        return None


def rules(job: Subtask, token: tokens.Token, head: str) -> diffgate.Rules:
    """The subtask's rules for a change to `head` made with `token`."""
    cfg, sub = job.task.config, job.sub
    tree, special = job.task.git.files(head)
    return diffgate.Rules(
        write_scope=sub.write_scope,
        token_paths=token.paths,
        readonly=cfg.readonly,
        creates=sub.creates,
        cited=frozenset(sub.inputs) | job.task.model.made(sub.id),
        manifests=cfg.manifests,
        no_new_deps=not sub.allow_new_deps,
        special=special,
        tree=tree,
        allow_mode_change=sub.allow_mode_change,
        max_bytes=cfg.max_diff_bytes,
        max_files=cfg.max_files,
    )
