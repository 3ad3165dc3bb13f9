"""The answer phase: a call's answer recorded in its exchange (or read back from it), judged,
a lost edit told apart from a change rightly not made, and its outcome logged.
"""

from __future__ import annotations

from typing import Any

from harness.boundary import egress, proc, sessions, worker
from harness.boundary.registry import Agent
from harness.record import envelope, exchanges
from harness.record.progress import fault
from harness.spec import plan as plan_mod
from harness.step import executing
from harness.step.live import tell
from harness.step.subtask import Flight, Subtask, slot_folder

# What a call whose machine was lost ran to, as far as anyone knows: no exit, no timeout.
LOST = proc.Result(code=-1, timed_out=None, duration_s=0.0)

# Roles whose work is a judgment: their answer may rightly change nothing.
NO_CHANGE_ROLES = frozenset({"review", "audit"})


def answer(job: Subtask, flight: Flight) -> worker.Outcome:
    """The call's answer: recorded in its exchange now if it was just made."""
    task, agent, call = job.task, flight.agent, flight.call
    folder = task.layout.exchange(task.task_id, call.call_id)
    limits = (task.config.max_output_bytes, task.config.max_artifact_bytes)
    exchange = flight.recorded
    if flight.future is not None and flight.staging is not None:
        executing.waited([flight.future])
        try:
            result, lost = flight.future.result(), None
        except executing.Lost as gone:
            result, lost = LOST, gone.reason
        outcome = judged(job, flight, result) if lost is None else machine_lost(lost)
        made = {
            "task_id": task.task_id,
            "subtask": job.sub.id,
            "agent": agent.id,
            "agent_version": task.probed.get(agent.id, ""),
            "argv": [agent.cmd, *agent.args, *(agent.policy or ())],
            "exit_code": result.code,
            "timed_out": result.timed_out,
        }
        went_over = worker.over(agent, task.config.sandbox_limits, result)
        if went_over is not None:
            made["over_limit"] = went_over
        if lost is not None:
            made["lost"] = lost
        if outcome.cli_argv is not None:
            made["cli_argv"] = list(outcome.cli_argv)
        kept = (
            sessions.keep(task.scratch(slot_folder(flight.slot)), job.session_store(call.call_id))
            if agent.resume
            else None
        )
        if kept is not None:
            resumed = call.prompt["payload"].get("session", {}).get("resume")
            made["session"] = {"sha256": kept, **({"resumed": resumed} if resumed else {})}
        exchange = exchanges.commit(flight.staging, folder, call, outcome, made, task.ledger)
        fault("after:exchange")
        if exchange.refused:
            tell(
                f"{job.sub.id}: the agent reached for {', '.join(exchange.refused)}: "
                f"refused (ai/exchanges/{task.task_id}/{call.call_id}/{egress.RECORD})"
            )
    assert exchange is not None, "the exchange was recorded or just committed"
    job.account.answered(call.call_id, exchange)
    meta = exchange.meta
    found = lost_edit(
        job.sub,
        machine_lost(meta["lost"])
        if "lost" in meta
        else worker.judge(
            exchange.stdout,
            meta["exit_code"],
            meta["timed_out"],
            task.task_id,
            agent.id,
            limits,
            meta.get("over_limit"),
        ),
        call.prompt["payload"]["write_scope"],
    )
    task.trace.answered(job.sub.id, found)
    return found


def judged(job: Subtask, flight: Flight, result: proc.Result) -> worker.Outcome:
    """The verdict on a call just made, read from its staging folder (nothing recorded)."""
    task, agent = job.task, flight.agent
    assert flight.staging is not None
    limits = (task.config.max_output_bytes, task.config.max_artifact_bytes)
    stdout = (flight.staging / "stdout.ndjson").read_bytes()
    went_over = worker.over(agent, task.config.sandbox_limits, result)
    return lost_edit(
        job.sub,
        worker.judge(
            stdout, result.code, result.timed_out, task.task_id, agent.id, limits, went_over
        ),
        flight.call.prompt["payload"]["write_scope"],
    )


def machine_lost(reason: str) -> worker.Outcome:
    """A call whose machine went away before it answered (executing.Lost): the agent said
    nothing, so it is asked again."""
    return worker.Outcome("error", "retryable", f"lost the machine running the call: {reason}")


def peek(job: Subtask, flight: Flight) -> worker.Outcome | None:
    """The verdict on a call that has ended and is not taken yet, or None while it runs
    (or failed to run, or its answer is taken from the record)."""
    future = flight.future
    if future is None or flight.staging is None or not future.done():
        return None
    if future.exception() is not None:
        return None
    return judged(job, flight, future.result())


def lost_edit(sub: plan_mod.Subtask, outcome: worker.Outcome, write_scope: str) -> worker.Outcome:
    """A call that may write and answered ok without a change lost its edit (a CLI's
    edit tool failed and it said nothing, or the model never made one): a retryable
    failure, never a step done with nothing committed. A read-only call, a review, a
    loop round (which ends its loop so) and a subtask whose plan says a change is
    optional may answer without one."""
    if (
        outcome.status != "ok"
        or outcome.result.get("diffs")
        or write_scope == "none"
        or sub.role in NO_CHANGE_ROLES
        or sub.loop is not None
        or sub.no_change_ok
    ):
        return outcome
    return worker.Outcome(
        "error",
        "retryable",
        "the answer changes no file, though the subtask writes: a lost edit "
        '(a subtask that may rightly change nothing says "no_change_ok": true)',
    )


def record_outcome(
    job: Subtask, agent: Agent, call: envelope.Call, outcome: worker.Outcome
) -> None:
    details: dict[str, Any] = {"subagent": agent.id, "call_id": call.call_id}
    if outcome.status == "ok":
        details["diffs"] = len(outcome.result.get("diffs", []))
        details["artifacts"] = [a["name"] for a in outcome.result.get("artifacts", [])]
        job.log.append("subagent_succeeded", "ok", step=job.sub.id, details=details)
    else:
        details["kind"] = outcome.kind
        if outcome.retry_after_s is not None:
            details["retry_after_s"] = outcome.retry_after_s
        job.error("subagent_failed", details, outcome.message)
