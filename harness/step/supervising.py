"""The supervision phase: a supervised subtask's checked change asked of its supervisor (or
of a person, the run stopping for them), and the verdict logged as what follows from it.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from harness.base.errors import AwaitingApproval, InvalidInput
from harness.gate import diffgate
from harness.record import envelope, protocol
from harness.record.progress import Log
from harness.spec import plan as plan_mod
from harness.step import answering, calling, executors, supervision
from harness.step.subtask import Flight, Subtask
from harness.step.task import Task

_VERDICT_WORDS = {"step_reoriented": "reoriented", "step_paused": "paused"}


def supervise(
    job: Subtask,
    att: protocol.Attempt,
    call: envelope.Call,
    result: dict[str, Any],
    changes: list[diffgate.Change],
    tree: str | None,
) -> bool:
    """A supervised subtask's checked change counts once a verdict approves it: the
    supervisor is asked (or a person, and the run stops for them) unless the attempt
    holds a verdict already. False once another verdict, or the supervisor's failure,
    is logged: its retry or end comes next, as after any failure."""
    sub = job.sub
    if sub.supervised is None:
        return True
    if att.verdict is None:
        if sub.supervised == plan_mod.HUMAN:
            if not att.has("approval_requested"):
                base = call.context["payload"]["base"]
                details = {"call_id": call.call_id, "base": base, "tree": tree}
                job.log.append("approval_requested", "pending", step=sub.id, details=details)
            raise awaiting(job, att)
        ask(job, att, call, result, changes, tree)
    # A REORIENT or PAUSE is the supervisor's word, not a failure: shown as what it is.
    said = att.verdict
    outcome = None if said is None else _VERDICT_WORDS.get(said["event"])
    return job.phase("supervise", att.has("step_approved"), outcome)


def ask(
    job: Subtask,
    att: protocol.Attempt,
    call: envelope.Call,
    result: dict[str, Any],
    changes: list[diffgate.Change],
    tree: str | None,
) -> None:
    """Call the supervisor on the change (or take its recorded answer) and log its verdict."""
    task, sub, cfg = job.task, job.sub, job.task.config
    agent = task.supervisor
    assert agent is not None, "the pre-flight checked a supervised plan has a supervisor"
    base = call.context["payload"]["base"]
    checks = [
        {"event": e["event"], "details": e.get("details", {})}
        for e in att.events
        if e["event"] in protocol.CHECK_PASSED
    ]
    flags = supervision.flags(sub, result, changes, checks, (cfg.max_diff_bytes, cfg.max_files))
    asked = att.last("supervisor_invoked")
    ts = task.log.now() if asked is None else asked["ts"]
    judge = replace(
        sub,
        role=supervision.ROLE,
        goal=supervision.GOAL.format(sid=sub.id, goal=sub.goal),
        acceptance=(),
        write_scope=(),
        creates=(),
    )
    hashes = task.git.blob_hashes(base, sub.inputs)
    request = envelope.build(
        task_id=task.task_id,
        sub=judge,
        ts=ts,
        branch=task.git.branch(),
        base=base,
        readonly=list(cfg.readonly),
        visible=list(cfg.visible),
        token_id=None,
        input_hashes={p: h for p, h in hashes.items() if h is not None},
        blobs=supervision.request(sub, call.call_id, base, result, changes, checks, flags),
        # A second look, at a retry's change, says so as the retry itself does.
        retry=envelope.RETRY_CONSTRAINT in call.prompt["payload"]["constraints"],
        timeouts=dict(agent.timeouts or cfg.timeouts),
        budgets=dict(cfg.budgets),
        epoch=task.model.epoch,
        expected=supervision.EXPECTED,
    )
    details: dict[str, Any] = {"call_id": request.call_id, "by": agent.id}
    if asked is None:
        invoked: dict[str, Any] = {"call_id": request.call_id, "subagent": agent.id}
        invoked |= {"of": call.call_id, "base": base, "tree": tree}
        job.log.append("supervisor_invoked", "pending", step=sub.id, details=invoked, ts=ts)
        job.account.invoked(request.call_id, sub.id, agent.id)
    elif asked["details"]["call_id"] != request.call_id:
        raise InvalidInput(
            f"subtask {sub.id}'s supervision changed since call "
            f"{asked['details']['call_id'][:12]} was made: restore its plan and config"
        )
    flight = Flight(att, agent, request, 0)
    making = calling.start(job, flight, "supervisor")
    if making is not None:
        flight.future = Future()
        flight.future.set_result(executors.answer(job.task.answering, job.task.git, making))
    outcome = answering.answer(job, flight)
    found = supervision.verdict(outcome.result) if outcome.status == "ok" else None
    if found is None or isinstance(found, str):
        kind = outcome.kind if found is None else protocol.NO_VERDICT
        why = outcome.message if found is None else found
        job.error("supervisor_failed", details | {"kind": kind}, f"supervisor: {why}")
        return
    log_verdict(job.log, sub.id, found, details)


def awaiting(job: Subtask, att: protocol.Attempt) -> AwaitingApproval:
    """The halt of a subtask whose change waits for a person, saying what to look at."""
    task, sid = job.task, job.sub.id
    asked = att.last("approval_requested")
    assert asked is not None
    d = asked["details"]
    folder = task.layout.rel(task.layout.exchange(task.task_id, d["call_id"]))
    change = f"`git diff {d['base'][:12]} {d['tree'][:12]}`" if d.get("tree") else folder
    return AwaitingApproval(
        f"{sid} awaits approval: review {change} (the answer is in {folder}), then "
        f"`harness approve {task.task_id} {sid}` or "
        f"`harness reject {task.task_id} {sid} --reason WHY`"
    )


def decide(task: Task, sid: str, verdict: supervision.Verdict, who: str) -> None:
    """Log a person's verdict on the change `sid` awaits approval for: CONTINUE (it is
    committed by the next `run`) or REORIENT (it runs again with the reason to follow)."""
    if sid not in task.plan.by_id:
        raise InvalidInput(f"task {task.task_id} has no subtask {sid}")
    att = task.model.attempt(sid)
    if not att.awaiting:
        raise InvalidInput(f"{sid} awaits no approval (status: {task.model.status(sid)})")
    log_verdict(task.log, sid, verdict, {"call_id": att.call_id, "by": protocol.HUMAN, "who": who})


def log_verdict(log: Log, sid: str, verdict: supervision.Verdict, details: dict[str, Any]) -> None:
    """A verdict, the supervisor's or a person's: its event says what follows (a commit, a
    retry with the correction, a stop for a person)."""
    details = details | verdict.details()
    event, status, error = verdict_event(verdict, details.get("who") or details["by"])
    log.append(event, status, step=sid, details=details, error=error)


def verdict_event(verdict: supervision.Verdict, by: str) -> tuple[str, str, str | None]:
    """The event a verdict logs, its status and its error: a CONTINUE is ok; a REORIENT or
    PAUSE is an error saying who gave it, and why."""
    event = supervision.EVENTS[verdict.action]
    if verdict.action == supervision.CONTINUE:
        return event, "ok", None
    words = "reoriented" if verdict.action == supervision.REORIENT else "paused"
    return event, "error", f"{words} by {by}: {verdict.reason}"
