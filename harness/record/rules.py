"""The legal order of each of a subtask's events: one rule per event name (RULES), which
protocol.Model.feed applies to the State it keeps (the words are defined in protocol.py)."""

from __future__ import annotations

from typing import Any

from harness.record.attempts import (
    CHECK_FAILED,
    CHECK_PASSED,
    FAILURES,
    HUMAN,
    MAX_ATTEMPTS,
    NO_VERDICT,
    SKIP_DEPENDENTS,
    VERDICTS,
    Attempt,
    Event,
    Findings,
    Step,
    detail,
    retryable,
    short,
)
from harness.record.state import State
from harness.record.tables import compact

# Each takes (model, seq, event, step, its state, details, findings) and appends findings.


def _invoked(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att = st.attempt
    call = d.get("call_id")
    if not isinstance(call, str):
        out.order("subagent_invoked names no details.call_id")
        return
    if att.unit is not None:
        out.order(f"subagent_invoked for {step}, which runs a plan")
    elif att.open:
        out.order(f"subagent_invoked while call {short(att.call_id)} has no outcome")
    elif att.invoked is not None:
        out.order(f"a second subagent_invoked in attempt {att.number}")
    if d.get("attempt") != att.number:
        out.order(f"details.attempt is {d.get('attempt')!r}, not {att.number}")
    waiting = [dep for dep in (m.subtasks or {}).get(step, ()) if not m.goes_on(dep)]
    if waiting:
        out.order(f"subagent_invoked for {step} before {', '.join(waiting)} completed")
    if att.events:  # what came before the call is the attempt's no longer
        att = st.attempt = m.new_attempt(step, att.number)
    att.add(ev)
    att.key = _call(m, seq, call, out)


def _call(m: State, seq: int, call: str, out: Findings) -> str | bytes:
    """A call made (a worker's or a supervisor's): its id is never made twice. Returns the
    id as the calls table keeps it (compact), for what else keeps it to share."""
    key: str | bytes = compact(call)
    if key in m.calls:
        out.order(f"call {short(call)} was invoked before (seq {m.calls[key][0]})")
    else:
        m.calls[key] = (seq, "")
    return key


def _unit(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    """A subtask starts running another task's plan: one unit, ended by its step_completed
    or step_failed, which name the nested log's head."""
    att = st.attempt
    if not isinstance(d.get("plan"), str):
        out.order("plan_started names no details.plan")
    elif att.unit is not None or att.invoked is not None:
        out.order(f"plan_started for {step} in an attempt that began already")
    waiting = [dep for dep in (m.subtasks or {}).get(step, ()) if not m.goes_on(dep)]
    if waiting:
        out.order(f"plan_started for {step} before {', '.join(waiting)} completed")
    att.add(ev)


def _outcome(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att, name = st.attempt, ev["event"]
    if not att.open or d.get("call_id") != att.call_id:
        out.order(f"{name} for call {short(d.get('call_id'))}, which awaits no outcome")
        return
    _after_call(st, ev)
    said = "ok" if name == "subagent_succeeded" else str(d.get("kind"))
    key = compact(str(att.call_id))
    m.calls[key] = (m.calls[key][0], said)


def _after_call(st: Step, ev: Event) -> None:
    st.attempt.add(ev)
    if ev["event"] in FAILURES:
        st.last_failure = ev


def _legal_after_success(name: str, att: Attempt, out: Findings) -> bool:
    """Checks, commits and completion need the attempt's call to have succeeded."""
    if not att.has("subagent_succeeded"):
        out.order(f"{name} before a subagent_succeeded in attempt {att.number}")
        return False
    failed = att.failure
    if failed is not None:
        what = failed["event"]
        if what == "subagent_failed":
            what += f" ({detail(failed, 'kind')})"
        out.order(f"{name} after {what} in the same attempt")
        return False
    return True


def _check(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att, name = st.attempt, ev["event"]
    _legal_after_success(name, att, out)
    # the scan only when the attempt logged the name before (`has` is one lookup)
    if att.has(name) and any(e["event"] == name and e.get("details") == d for e in att.events):
        # harness logs a check's result once per attempt (checks.py)
        out.order(f"{name} repeats an earlier one in attempt {att.number}")
    _after_call(st, ev)


def _retried(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att = st.attempt
    previous = att.events[-1] if att.events else None
    if not m.may_retry(step):
        out.order(
            "a second subagent_retried for one agent since the last blocker_resolved "
            f"(attempt {MAX_ATTEMPTS} is its last)"
        )
    elif previous is None or previous["event"] not in FAILURES or not retryable(previous):
        after = "nothing" if previous is None else _failure_words(previous)
        out.order(f"subagent_retried after {after}, not a retryable failure")
    att.add(ev)
    st.attempt = m.new_attempt(step, att.number + 1)


def _fallback(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att = st.attempt
    previous = att.events[-1] if att.events else None
    if previous is None or previous["event"] not in FAILURES:
        after = "nothing" if previous is None else str(previous["event"])
        out.order(f"subagent_fallback after {after}, not a failure")
    elif previous["event"] == "step_paused":
        out.order("subagent_fallback after step_paused, which stops the task for a person")
    elif retryable(previous) and m.may_retry(step):
        out.order(f"subagent_fallback after {_failure_words(previous)}, which had a retry left")
    att.add(ev)
    st.fallbacks += 1
    st.attempt = m.new_attempt(step, att.number + 1)
    st.first = st.attempt.number


def _failure_words(failed: Event) -> str:
    if failed["event"] in ("subagent_failed", "supervisor_failed"):
        return f"{failed['event']} ({detail(failed, 'kind')})"
    return str(failed["event"])


def _applied(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att = st.attempt
    if d.get("call_id") != att.call_id or not att.has("subagent_succeeded"):
        out.order(
            f"subagent_diffs_applied without subagent_succeeded of call {short(d.get('call_id'))}"
        )
    elif _legal_after_success("subagent_diffs_applied", att, out):
        _unapproved("subagent_diffs_applied", att, out)
    if att.has("subagent_diffs_applied"):
        out.order(f"a second subagent_diffs_applied in attempt {att.number}")
    att.add(ev)


def _completed(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att = st.attempt
    if "plan" in d or att.unit is not None:
        if _other_plan(att, d):
            out.order(f"step_completed for {step} names a plan its plan_started does not")
    elif att.open:
        out.order(f"step_completed while call {short(att.call_id)} has no outcome")
    elif _legal_after_success("step_completed", att, out):
        _unapproved("step_completed", att, out)
        if d.get("call_id") != att.call_id:
            out.order(
                f"step_completed names call {short(d.get('call_id'))}, not {short(att.call_id)}"
            )
        applied = detail(att.last("subagent_diffs_applied"), "commit")
        if d.get("commit") != applied:
            out.order(
                f"step_completed names commit {short(d.get('commit'))}, "
                f"but the attempt applied {short(applied)}"
            )
    att.add(ev)
    call = d.get("call_id")
    # The id as the calls table keeps it when they agree: compact already, not made again.
    m.done.add(step, att.key if call == att.call_id else call, d.get("commit"), seq)
    del m.steps[step]
    del m.seen[step]  # a done subtask's status is "done" whatever else was seen


def _failed(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    if st.attempt.open:
        call = short(st.attempt.call_id)
        out.order(f"step_failed while call {call} has no outcome")
    if _other_plan(st.attempt, d):
        out.order(f"step_failed for {step} names a plan its plan_started does not")
    paused = st.attempt.failure is not None and st.attempt.failure["event"] == "step_paused"
    if paused and d.get("on_error", "stop") != "stop":
        out.order(f"step_failed for {step} under on_error {d['on_error']} after step_paused")
    st.attempt.add(ev)
    st.failed, st.failed_at = ev, seq
    m.seen[step] = ("failed", str(ev.get("error", "see the log")))


def _unapproved(name: str, att: Attempt, out: Findings) -> None:
    """A change a verdict was asked for counts only once it was approved."""
    if att.asked is not None and not att.has("step_approved"):
        out.order(f"{name} before step_approved in attempt {att.number}, which asked a verdict")


def _ask(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    """A verdict asked of the supervisor (supervisor_invoked, its call) or of a person
    (approval_requested): once per attempt, on a checked change not yet counted."""
    att, name = st.attempt, ev["event"]
    _legal_after_success(name, att, out)
    if att.asked is not None:
        out.order(f"{name} in attempt {att.number}, which asked a verdict already")
    if att.has("subagent_diffs_applied"):
        out.order(f"{name} after the attempt's change was committed")
    judged = d.get("of") if name == "supervisor_invoked" else d.get("call_id")
    if att.call_id is not None and judged != att.call_id:
        out.order(f"{name} judges call {short(judged)}, not the attempt's {short(att.call_id)}")
    att.add(ev)
    if name == "supervisor_invoked":
        call = d.get("call_id")
        if not isinstance(call, str):
            out.order("supervisor_invoked names no details.call_id")
        else:
            _call(m, seq, call, out)


def _verdict(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    """A verdict: a person's on a change that awaits one, or the supervisor's answer to
    its call (a pause never comes from a person, who rejects instead)."""
    att, name = st.attempt, ev["event"]
    if att.verdict is not None:
        out.order(f"{name} after {att.verdict['event']} in attempt {att.number}")
    elif d.get("by") == HUMAN:
        if not att.has("approval_requested"):
            out.order(f"{name} by a person for {step}, which awaits no approval")
        elif name == "step_paused":
            out.order("step_paused by a person: a person approves or rejects")
        elif not isinstance(d.get("who"), str) or not d["who"]:
            out.order(f"{name} by a person names nobody (details.who)")
        elif d.get("call_id") != att.call_id:
            out.order(f"{name} by a person for call {short(d.get('call_id'))}, not the attempt's")
    elif not att.judging or d.get("call_id") != detail(att.last("supervisor_invoked"), "call_id"):
        out.order(f"{name} for call {short(d.get('call_id'))}, which awaits no verdict")
    else:
        key = compact(str(d["call_id"]))
        m.calls[key] = (m.calls[key][0], "ok")
    _after_call(st, ev)


def _supervisor_failed(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    att = st.attempt
    call = detail(att.last("supervisor_invoked"), "call_id")
    if not att.judging or d.get("call_id") != call:
        out.order(f"supervisor_failed for call {short(d.get('call_id'))}, which awaits no verdict")
    else:
        said = "ok" if d.get("kind") == NO_VERDICT else str(d.get("kind"))
        key = compact(str(call))
        m.calls[key] = (m.calls[key][0], said)
    _after_call(st, ev)


def _round(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    """A looped subtask's round ended and the next one starts: after a successful call whose
    change (if any) was committed, with its verdict if one was asked."""
    att = st.attempt
    if _legal_after_success("loop_continued", att, out):
        _unapproved("loop_continued", att, out)
        applied = detail(att.last("subagent_diffs_applied"), "commit")
        if d.get("call_id") != att.call_id or d.get("commit") != applied:
            out.order(
                f"loop_continued names call {short(d.get('call_id'))} and commit "
                f"{short(d.get('commit'))}, not the round's"
            )
    if d.get("round") != st.rounds:
        out.order(f"loop_continued names round {d.get('round')!r}, not {st.rounds}")
    files = detail(att.last("subagent_diffs_applied"), "files")
    if isinstance(files, list):
        st.made |= {f for f in files if isinstance(f, str)}
    att.add(ev)
    st.rounds += 1
    st.attempt = m.new_attempt(step, att.number + 1)
    st.first = st.attempt.number


def _other_plan(att: Attempt, d: dict[str, Any]) -> bool:
    """An end naming a plan the attempt did not start (or none, when it started one)."""
    return ("plan" in d or att.unit is not None) and detail(att.unit, "plan") != d.get("plan")


def _skipped(
    m: State, seq: int, ev: Event, step: str, st: Step, d: dict[str, Any], out: Findings
) -> None:
    cause = d.get("cause")
    if st.attempt.events:
        out.order(f"step_skipped for {step}, which ran in this epoch")
    if m.subtasks is not None and cause not in m.subtasks.get(step, ()):
        out.order(f"step_skipped for {step} names {cause!r}, none of its dependencies")
    found = m.steps.get(cause) if isinstance(cause, str) else None
    if found is None or not (
        found.skipped is not None or detail(found.failed, "on_error") == SKIP_DEPENDENTS
    ):
        out.order(f"step_skipped for {step}: {cause!r} neither failed to skip its dependents")
    st.skipped = ev
    why = "skipped" if found is not None and found.skipped is not None else "failed"
    m.seen[step] = ("skipped", f"{cause} {why}")


RULES = {
    "subagent_invoked": _invoked,
    "subagent_succeeded": _outcome,
    "subagent_failed": _outcome,
    "subagent_retried": _retried,
    "subagent_fallback": _fallback,
    "subagent_diffs_applied": _applied,
    "step_completed": _completed,
    "step_failed": _failed,
    "step_skipped": _skipped,
    "plan_started": _unit,
    "supervisor_invoked": _ask,
    "approval_requested": _ask,
    "supervisor_failed": _supervisor_failed,
    "loop_continued": _round,
    **dict.fromkeys(VERDICTS, _verdict),
    **dict.fromkeys(CHECK_PASSED | CHECK_FAILED, _check),
}
