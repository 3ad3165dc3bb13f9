"""The checks and acceptance phases: a change's checks (format, lint, license, build, tests
twice, acceptance), each on a scratch copy of its tree; an answer without a change judged by
the acceptance it can meet (a review's citations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.checks import acceptance
from harness.checks.sequence import Work, run, runner, sequence
from harness.checks.suite import ONCE
from harness.gate import diffgate
from harness.record import envelope, protocol
from harness.step.subtask import Subtask


def work(
    job: Subtask,
    att: protocol.Attempt,
    changes: list[diffgate.Change],
    result: dict[str, Any],
    head: str,
    tree: str,
) -> Work:
    """The change's checks as data, as the log says the attempt stands now."""
    loop, rounds = job.sub.loop, job.task.model.rounds(job.sub.id)
    # Criteria a round leaves unmet are the next round's to meet, until the last.
    lenient = loop is not None and loop.until == "acceptance" and rounds < loop.rounds
    logged = tuple(e for e in att.events if e["event"] in ONCE)
    return Work(job.sub, logged, job.task.config, tuple(changes), result, head, tree, lenient)


def check(
    job: Subtask,
    att: protocol.Attempt,
    call: envelope.Call,
    changes: list[diffgate.Change],
    result: dict[str, Any],
    head: str,
    tree: str,
) -> bool:
    """Every check of the change, each on a scratch copy of `tree`: True when all pass.
    They run now, or ran ahead of their turn (job.ahead); either way what they say is
    logged here, at the change's turn."""
    task = job.task
    todo = work(job, att, changes, result, head, tree)
    recorded = task.recording.checks(job.sub.id) if task.recording is not None else None
    if recorded is not None:
        ran = runner(todo.config, task.scratch("runs"), task.contain.box)
        return sequence(todo, task.git, recorded, job.phase, ran, task.scratch, _cache(job))
    if job.ahead is not None:
        verdict = job.ahead.checked(todo)
    else:
        verdict = run(todo, task.git, task.contain.box, task.scratch("checks"), _cache(job))
    evidence = task.layout.exchange(task.task_id, call.call_id)
    verdict.said.give(task.log, task.ledger, evidence, job.phase)
    return verdict.passed


def _cache(job: Subtask) -> Path:
    return job.task.layout.state / "coverage"


def review(job: Subtask, call: envelope.Call, result: dict[str, Any]) -> bool:
    """An answer without a change, held to the acceptance it can meet (a review's notes cite
    its inputs); False once acceptance_failed is logged."""
    problems = acceptance.review_problems(
        job.sub, result, job.task.git, call.context["payload"]["base"]
    )
    if not job.phase("acceptance", not problems):
        failures = {"check": "acceptance", "failures": problems}
        job.error("acceptance_failed", failures, "; ".join(problems))
        return False
    return True
