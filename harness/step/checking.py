"""The checks and acceptance phases: a change's checks (format, lint, license, build, tests
twice, acceptance), each on a scratch copy of its tree; an answer without a change judged by
the acceptance it can meet (a review's citations).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from harness.checks import acceptance, verify
from harness.checks.suite import Checks
from harness.gate import diffgate
from harness.record import envelope, exchanges, protocol
from harness.step.subtask import Subtask


def check(
    job: Subtask,
    att: protocol.Attempt,
    call: envelope.Call,
    changes: list[diffgate.Change],
    result: dict[str, Any],
    head: str,
    tree: str,
) -> bool:
    """Every check of the change, each on a scratch copy of `tree`: True when all pass."""
    task, sub, git = job.task, job.sub, job.task.git
    cfg = task.config.verify
    # Uncontained, a command has the host's network whatever isolate_network says.
    network = "none" if cfg.isolate_network and task.config.contained else "host"
    runner = verify.Runner(
        task.scratch("runs"), task.config.verify_timeout_s, task.contain.box, network
    )
    evidence = task.layout.exchange(task.task_id, call.call_id) / exchanges.VERIFY
    recorded = task.recording.checks(sub.id) if task.recording is not None else None
    checks = recorded or Checks(
        job.log,
        sub.id,
        att,
        cfg,
        runner,
        evidence,
        task.ledger,
        task.scratch,
        lambda p: git.show(tree, p),
    )
    with ExitStack() as stack:
        wt = task.scratch("verify")
        if runs_commands(job):
            stack.enter_context(git.scratch(tree, wt, git_dir=True))
        built = checks.build(wt, changes)  # nothing configured: no line says "build ok"
        if not (job.phase("build", built) if cfg.builds else built):
            return False
        if cfg.test and not job.phase("test", checks.test(wt, cfg.test)):
            return False
        base: list[Path] = []

        def base_copy() -> Path:
            if not base:
                base.append(stack.enter_context(git.scratch(head, task.scratch("base"), True)))
            return base[0]

        judge = acceptance.Judge(
            sub,
            result,
            changes,
            git=git,
            head=head,
            tree=tree,
            worktree=wt,
            runner=runner,
            verify=cfg,
            cache=task.layout.state / "coverage",
            base=base_copy,
        )
        loop, rounds = sub.loop, task.model.rounds(sub.id)
        # Criteria a round leaves unmet are the next round's to meet, until the last.
        lenient = loop is not None and loop.until == "acceptance" and rounds < loop.rounds
        if not job.phase("acceptance", checks.accept(judge, lenient)):
            return False
    return True


def runs_commands(job: Subtask) -> bool:
    """Whether any check of this subtask runs a command, and so needs a scratch copy."""
    cfg, sub = job.task.config.verify, job.sub
    names = ("format", "lint", "license", "build", "test", "docs", "api_extract")
    return (
        any(getattr(cfg, n) for n in names) or bool(sub.acceptance) or (sub.role == "test-author")
    )


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
