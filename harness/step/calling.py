"""The call phase: the pre-flight before a new call, the call's envelope (its base, inputs,
the blobs of what it depends on, a retry's reason, a loop round's text), and the call made
in a pool thread (or taken from the exchange that holds its answer already).
"""

from __future__ import annotations

from typing import Any

from harness.base import ids
from harness.base.errors import InvalidInput
from harness.boundary import registry, sessions
from harness.boundary.registry import Agent
from harness.record import envelope, exchanges, protocol
from harness.spec import plan as plan_mod
from harness.step import executors, preflight
from harness.step.subtask import Event, Flight, Subtask, slot_folder, token_of


def launch(
    job: Subtask, att: protocol.Attempt, executor: executors.Executor, slot: int
) -> Flight | None:
    """Make the attempt's call (logged before it starts), or take it up again after a
    kill; None when it failed before any call."""
    task, sub = job.task, job.sub
    invoked = att.invoked
    agent = registry.route(task.agents, sub.role, job.agent_id())
    assert agent is not None, "the pre-flight checked every subtask routes"
    if invoked is None:
        job.account.check(sub)
    call = build_call(job, att, invoked, agent)
    if call is None:
        return None
    if invoked is None:
        details = {
            "subagent": agent.id,
            "role": sub.role,
            "call_id": call.call_id,
            "base": call.context["payload"]["base"],
            "attempt": att.number,
            "token": token_of(call),
        }
        job.log.append(
            "subagent_invoked", "pending", step=sub.id, details=details, ts=call.prompt["ts"]
        )
        job.account.invoked(call.call_id, sub.id, agent.id)
    elif invoked["details"]["call_id"] != call.call_id:
        raise InvalidInput(
            f"subtask {sub.id} changed since call {invoked['details']['call_id'][:12]} "
            "was made: restore its plan, inputs and config, or resolve a blocker first"
        )
    folder = slot_folder(slot)
    # With several in flight, say when each answer is in: it is taken in plan order.
    told = (lambda: task.live.returned(sub.id)) if job.several else None
    told = task.trace.returning(sub.id, told)
    flight = Flight(att, agent, call, slot, new=invoked is None)
    making = start(job, flight, folder)
    if making is not None:
        flight.future = executor.call(making)
        if told is not None:
            flight.future.add_done_callback(lambda _: told())
    return flight


def start(job: Subtask, flight: Flight, folder: str) -> executors.Call | None:
    """The flight's call, ready to run in the scratch `folder`; None when its exchange
    holds the answer already (flight.recorded)."""
    task, agent, call = job.task, flight.agent, flight.call
    flight.recorded = exchanges.load(
        task.layout.exchange(task.task_id, call.call_id), task.layout.root
    )
    if flight.recorded is not None:
        return None
    if task.recording is not None:
        task.recording.unrecorded(call.call_id)
    task.probe(agent)  # also for a call resumed after a kill: its meta names the version
    flight.staging = exchanges.stage(task.scratch("staging") / call.call_id, call)
    retried = job.retried_call(flight.att) if agent.resume else None
    sessions.prepare(task.scratch(folder), None if retried is None else job.session_store(retried))
    timeouts = dict(call.prompt["payload"]["timeouts"])
    left = job.account.remaining_s()
    if left is not None:  # max_runtime_s: a call running at the deadline is stopped
        timeouts["hard_s"] = min(timeouts["hard_s"], left)
        timeouts["soft_s"] = min(timeouts["soft_s"], left)
    base = call.context["payload"]["base"]
    retry = envelope.RETRY_CONSTRAINT in call.prompt["payload"]["constraints"]
    task.live.started(job.sub.id, agent.id, call.prompt["payload"]["role"], retry)
    task.trace.called(job.sub.id, agent, call.call_id, retry)
    return executors.Call(
        agent,
        base,
        flight.staging,
        timeouts,
        task.scratch(folder),
        job.backoff(flight.att),
    )


def pre_flight(job: Subtask, ts: str, base: str) -> preflight.Cleared | None:
    """The pre-flight before a new call (preflight.py); its problems fail the step,
    logged with their reasons, and no call is made."""
    task = job.task
    checker = preflight.Checker(
        task.agents,
        task.token_store(),
        ts,
        None if task.recording is not None else task.probe,  # a replay asks no agent
        lambda paths: task.git.blob_hashes(base, paths),
    )
    found = checker.subtask(job.sub, fallbacks=task.model.fallbacks(job.sub.id))
    if isinstance(found, list):
        job.fail("; ".join(found), "preflight")
        return None
    return found


def build_call(
    job: Subtask, att: protocol.Attempt, invoked: Event | None, agent: Agent
) -> envelope.Call | None:
    """The call for this attempt; rebuilt from the log's record when resuming one."""
    task, sub = job.task, job.sub
    if invoked is not None:
        ts, base = invoked["ts"], invoked["details"]["base"]
        token_id = invoked["details"]["token"]
    else:
        if task.recording is not None:
            base = task.recording.base(task)
        else:
            base = job.base or task.git.head()
        ts = task.log.now()
        cleared = pre_flight(job, ts, base)
        if cleared is None:
            return None
        token_id = cleared.token
    hashes = task.git.blob_hashes(base, sub.inputs)
    missing = [p for p, h in hashes.items() if h is None]
    if missing:
        job.fail(f"input not found at {base[:12]}: {', '.join(missing)}", "inputs")
        return None
    failed = job.previous_failure(att)
    retry_of = None if failed is None else str(failed.get("error", failed["event"]))
    correction = _detail(failed, "correction") if failed is not None else None
    return envelope.build(
        task_id=task.task_id,
        sub=sub,
        ts=ts,
        branch=task.git.branch(),
        base=base,
        readonly=list(task.config.readonly),
        visible=list(task.config.visible),
        token_id=token_id,
        input_hashes={p: h for p, h in hashes.items() if h is not None},
        blobs=blobs(job, retry_of, correction),
        retry=retry_of is not None,
        corrected=correction is not None,
        timeouts=dict(agent.timeouts or task.config.timeouts),
        budgets=call_budgets(job),
        epoch=task.model.epoch,
        fallback=agent.id if task.model.fallbacks(sub.id) else None,
        session=session_for(job, agent, att),
    )


def session_for(job: Subtask, agent: Agent, att: protocol.Attempt) -> dict[str, Any] | None:
    """For an agent that resumes: keep the CLI's session, and resume the one of the call
    this attempt retries, as that call's answer named it (from the record, so a resumed
    or replayed run builds the same envelope)."""
    if not agent.resume:
        return None
    found: dict[str, Any] = {"keep": True}
    retried = job.retried_call(att)
    if retried is not None:
        exchange = exchanges.load(
            job.task.layout.exchange(job.task.task_id, retried), job.task.layout.root
        )
        named = exchanges.session_id(exchange.stdout) if exchange is not None else None
        if ids.whole(ids.SESSION, named):
            found["resume"] = named
        elif named is not None:
            # The answer is the worker's: what it names goes to the CLI's argv (`--resume
            # ID`), where `--dangerously-skip-permissions` would be read as a flag. Recorded
            # in the envelope, and the retry starts a new session.
            found["dropped"] = "the retried call's answer named no session id"
    return found


def call_budgets(job: Subtask) -> dict[str, Any]:
    """The call's own limits: the config's, with max_usd lowered to what is left of the
    cost budgets, so a CLI that can be told stops there itself."""
    found = dict(job.task.config.budgets)
    left = job.account.cost_left(job.sub)
    if left is not None and left > 0:
        found["max_usd"] = min(float(found.get("max_usd", left)), left)
    return found


def blobs(
    job: Subtask, retry_of: str | None, correction: str | None = None
) -> list[dict[str, str]]:
    """Artifacts of the subtasks this one depends on, the reason for a retry, and the
    supervisor's correction it must follow."""
    found: list[dict[str, str]] = []
    completed = job.task.model.done
    for dep in job.sub.depends_on:
        call_id = completed[dep].call_id if dep in completed else None
        if call_id is None:  # failed under "continue", or ran a plan: no answer to see
            continue
        exchange = exchanges.load(
            job.task.layout.exchange(job.task.task_id, call_id), job.task.layout.root
        )
        if exchange is None:
            raise InvalidInput(f"the exchange of {dep} ({call_id[:12]}) is missing")
        for name, text in exchange.artifacts().items():
            found.append({"name": f"{dep}/{name}", "text": text})
    if retry_of is not None:
        found.append({"name": "harness/previous-failure.txt", "text": retry_of})
    if correction is not None:
        found.append({"name": "harness/correction.txt", "text": correction})
    loop, rounds = job.sub.loop, job.task.model.rounds(job.sub.id)
    if loop is not None and rounds > 1:
        found.append({"name": "harness/loop.txt", "text": _round_text(rounds, loop)})
    return found


def _round_text(rounds: int, loop: plan_mod.Loop) -> str:
    # The text is part of the call's envelope, hence of its call_id: a word changed here
    # makes every recorded loop round replay as a different call.
    until = {
        "no_diff": "answer with no diffs once nothing is left to do",
        "acceptance": "it ends once the acceptance criteria hold",
    }[loop.until]
    return (
        f"Round {rounds} of at most {loop.rounds}: the base holds the earlier rounds' "
        f"changes; {until}.\n"
    )


def _detail(ev: Event, key: str) -> str | None:
    found = ev.get("details", {}).get(key)
    return found if isinstance(found, str) else None
