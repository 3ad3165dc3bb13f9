"""A subtask's life as the sequence of its phases, read here in one place:

    next_flight  the retry rule, then the call (calling: pre-flight, envelope, call made)
    take         the answer (answering: recorded, judged, a lost edit told apart)
    settle       a change landed (land), or an answer without one judged (checking.review)
                 and supervised; then a loop's round (rounds), and step_completed
    land         gate (gating), apply, checks and acceptance (checking), supervision
                 (supervising), commit, and the user's files brought to it (landing)

Every phase first asks the log whether it already happened, so a step killed at any point
is finished by the next `harness next` without a second call, commit or event. The run's
scheduler (orchestrator.py) calls next_flight, take and settle.
"""

from __future__ import annotations

from typing import Any

from harness.boundary import worker
from harness.gate import diffgate
from harness.record import envelope, protocol
from harness.step import (
    answering,
    calling,
    checking,
    executors,
    gating,
    landing,
    rounds,
    supervising,
)
from harness.step.subtask import Event, Flight, Subtask

# What follows a failed attempt (after_failure).
PAUSED, RETRY, FALLBACK, FAIL = "paused", "retry", "fallback", "fail"


def next_flight(job: Subtask, executor: executors.Executor, slot: int) -> Flight | None:
    """The subtask's next call, launched; None once it has ended this epoch (its
    step_failed, or step_skipped, logged)."""
    while True:
        mine = job.task.model.step(job.sub.id)
        if mine is not None and (mine.failed or mine.skipped) is not None:
            return None
        att = job.task.model.attempt(job.sub.id)
        failed = att.failure
        if failed is not None:
            model, sid = job.task.model, job.sub.id
            agents = len(job.sub.agents)
            then = after_failure(failed, model.may_retry(sid), model.fallbacks(sid), agents)
            if then == PAUSED:  # for a person, whatever on_error says
                job.error("step_failed", {"phase": "supervisor"}, str(failed.get("error")))
                continue
            if then == RETRY:
                job.log.append(
                    "subagent_retried",
                    "pending",
                    step=sid,
                    details={"call_id": att.call_id, "after": failed["event"]},
                )
                continue
            if then == FALLBACK:
                given_up = job.agent_id()
                details = {"call_id": att.call_id, "after": failed["event"]}
                details |= {"from": given_up, "to": job.sub.agent_at(model.fallbacks(sid) + 1)}
                job.log.append("subagent_fallback", "pending", step=sid, details=details)
                continue
            job.fail(str(failed.get("error", failed["event"])), failed["event"])
            continue
        flight = calling.launch(job, att, executor, slot)
        if flight is not None:
            return flight


def after_failure(failed: Event, may_retry: bool, fallbacks: int, agents: int) -> str:
    """What follows a failed attempt: PAUSED (a supervisor's pause: the step fails for a
    person), RETRY (a retryable failure, with an attempt left), FALLBACK (the plan's next
    of its `agents`), else FAIL."""
    if failed["event"] == "step_paused":
        return PAUSED
    if protocol.retryable(failed) and may_retry:
        return RETRY
    if fallbacks + 1 < agents:
        return FALLBACK
    return FAIL


def take(job: Subtask, flight: Flight) -> worker.Outcome | None:
    """The call's answer, its outcome logged; None when the call failed."""
    att, agent, call = flight.att, flight.agent, flight.call
    outcome = answering.answer(job, flight)
    job.phase("call", outcome.status == "ok")
    if not (att.has("subagent_succeeded") or att.has("subagent_failed")):
        answering.record_outcome(job, agent, call, outcome)
    return outcome if outcome.status == "ok" else None


def settle(job: Subtask, flight: Flight, outcome: worker.Outcome) -> bool:
    """Land a successful answer's change (or judge an answer without one); True when
    the step completed, False after a failure."""
    task, sub, call = job.task, job.sub, flight.call
    att = task.model.attempt(sub.id)  # as logged now: the flight's may predate its call
    if att.awaiting:  # asked before, and no person answered yet
        raise supervising.awaiting(job, att)
    diffs = outcome.result.get("diffs", [])
    commit = None
    if diffs:
        applied = att.last("subagent_diffs_applied")
        commit = (
            applied["details"]["commit"]
            if applied
            else land(job, att, call, outcome.result, flight.new)
        )
        if commit is None:
            return False
    else:
        if not checking.review(job, call, outcome.result):
            return False
        if not supervising.supervise(job, att, call, outcome.result, [], None):
            return False
    details: dict[str, Any] = {"call_id": call.call_id, "commit": commit}
    if sub.loop is not None:
        stopped = rounds.round_ended(job, att, call, commit)
        if stopped is None:
            return False  # the next round's call comes next, in its slot
        details["loop"] = {"rounds": task.model.rounds(sub.id), "stopped": stopped}
    job.log.append("step_completed", "ok", step=sub.id, details=details)
    return True


def land(
    job: Subtask,
    att: protocol.Attempt,
    call: envelope.Call,
    result: dict[str, Any],
    new: bool,
) -> str | None:
    """Gate the diffs, verify them in scratch copies, commit, bring the user's files to the
    commit and log it; None after a failure. `new`: the call was made by this process."""
    base = call.context["payload"]["base"]
    # A run killed after committing this call left the commit: finish its work instead.
    # A call this process made, or the branch still at the base, rules that out without
    # a git log (the call is logged before it starts, so a killed run's is never new).
    git = job.task.git
    made = (
        None
        if new or git.head() == base
        else git.find_commit("Harness-Call-Id", call.call_id, base)
    )
    if made is None:
        changes = gating.gate(job, call, result)
        if changes is None:
            return None
        made = verify_and_commit(job, att, call, changes, result)
        if made is None:
            return None
    return landing.landed(job, call, made)


def verify_and_commit(
    job: Subtask,
    att: protocol.Attempt,
    call: envelope.Call,
    changes: list[diffgate.Change],
    result: dict[str, Any],
) -> str | None:
    """Compute the new tree, run every check on scratch copies of it, then commit.

    The tree is made by harness's own git before any untrusted code runs, and only
    that tree is committed: nothing a check does to its copy can reach the commit.
    """
    task = job.task
    if task.recording is not None:
        task.recording.landing(task, call.call_id)
    head = task.git.head()
    tree = landing.apply_patches(job, head, changes)
    if tree is None:
        return None
    # Approved before a kill, on this very tree: the checks it passed stand.
    approved = att.has("step_approved") and att.judged == tree
    if not approved and not checking.check(job, att, call, changes, result, head, tree):
        return None
    if not supervising.supervise(job, att, call, result, changes, tree):
        return None
    return landing.commit(job, call, changes, head, tree)
