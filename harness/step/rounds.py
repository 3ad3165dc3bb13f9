"""The loop round phase: a looped subtask's round ended, whether its loop stops (and why) or
goes on to a next round on the head this one left.
"""

from __future__ import annotations

from harness.record import envelope, protocol
from harness.spec import plan as plan_mod
from harness.step.subtask import Event, Subtask

# What `stop` says of an acceptance loop that got no change while criteria stay unmet.
UNMET = "unmet"


def round_ended(
    job: Subtask, att: protocol.Attempt, call: envelope.Call, commit: str | None
) -> str | None:
    """A looped subtask's round is done: why the loop stops ("no_diff", "acceptance",
    "max"), or None when it goes on: loop_continued is logged and the next round runs on
    the head this one left, or, for an acceptance loop whose last change left criteria
    unmet and which now got no change, acceptance_failed is (it never stops unmet)."""
    sub, model = job.sub, job.task.model
    loop, rounds = sub.loop, model.rounds(sub.id)
    assert loop is not None
    if commit is None:
        earlier = earlier_round(job)
        unmet = [] if earlier is None else _unmet(earlier)
    else:
        unmet = _unmet(att.last("phase_completed"))
    stopped = stop(loop, rounds, commit is not None, unmet)
    if stopped == UNMET:
        failures = {"check": "acceptance", "failures": unmet}
        job.phase("acceptance", False)
        job.error("acceptance_failed", failures, "the loop ended unmet: " + "; ".join(unmet))
        return None
    if stopped is not None:
        return stopped
    why = "; ".join(unmet) if unmet else "the round changed files"
    details = {"round": rounds, "call_id": call.call_id, "commit": commit, "why": why}
    if unmet:
        details["unmet"] = unmet
    job.log.append("loop_continued", "ok", step=sub.id, details=details)
    job.base = None  # the next round works on the head this one left
    return None


def stop(loop: plan_mod.Loop, rounds: int, changed: bool, unmet: list[str]) -> str | None:
    """Why the loop stops after round `rounds`: "no_diff", "acceptance", "max", or UNMET;
    None when it goes on. `unmet`: the criteria the round left unmet, or, when it `changed`
    nothing, those the round before it left."""
    if not changed:
        return UNMET if loop.until == "acceptance" and unmet else "no_diff"
    if loop.until == "acceptance" and not unmet:
        return "acceptance"
    if rounds >= loop.rounds:
        return "max"
    return None


def earlier_round(job: Subtask) -> Event | None:
    """The loop_continued that ended the round before this one (None in round 1)."""
    if job.task.model.rounds(job.sub.id) == 1:
        return None
    found: Event = next(
        e
        for e in reversed(job.task.log.events)
        if e["event"] == "loop_continued" and e.get("step") == job.sub.id
    )
    return found


def _unmet(ev: Event | None) -> list[str]:
    """The acceptance criteria a lenient loop round left unmet, as its event says."""
    found = None if ev is None else ev.get("details", {}).get("unmet")
    return [str(x) for x in found] if isinstance(found, list) else []
