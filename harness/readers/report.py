"""`harness report`: one self-contained HTML page of a task's record, for a human auditor.

Everything the page shows from the log and the exchanges was written, directly or not, by
an agent, so every such string goes through html.escape; the page loads nothing, runs no
script, and is the same bytes for the same record (no wall clock, everything sorted).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.base import files, ids, metrics
from harness.base.errors import InvalidInput
from harness.readers.audit import Report as Audit
from harness.readers.audit import audit
from harness.readers.markup import (
    CSP,
    STYLE,
    diff,
    duration,
    epoch_seconds,
    esc,
    figure,
    pre,
    table,
    total_cost,
)
from harness.record import exchanges, progress, protocol
from harness.repository.layout import Layout
from harness.spec import plan as plan_mod

Event = dict[str, Any]

# A call_id from the log becomes a path: only a real one may (no ../ from a forged log).
METRICS = ("cost_usd", "tokens", "turns")


def render(layout: Layout, task_id: str) -> bytes:
    """The report page of a task; InvalidInput when the task has no plan."""
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    events = _events(layout, task_id)
    verdict = audit(layout, task_id)
    subtasks = plan_mod.order(plan)
    model = protocol.Model(history=True)
    for ev in events:
        model.feed(ev["seq"], ev)  # what is out of order is the audit's to say, above
    attempts = {sub.id: model.attempts(sub.id) for sub in subtasks}
    used = [
        _metrics(layout, task_id, _call_id(att.events)) for s in subtasks for att in attempts[s.id]
    ]
    body = [
        f"<h1>Task {esc(task_id)}</h1>",
        _audit(verdict),
        _summary(layout, task_id, plan, events, model, used),
        _timeline(subtasks, events, model),
        "<h2>Subtasks</h2>",
        *(_subtask(layout, task_id, sub, model) for sub in subtasks),
        f"<footer><p>harness {esc(__version__)}</p></footer>",
    ]
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>harness report: {esc(task_id)}</title>\n<style>{STYLE}</style>\n</head>\n"
        "<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )
    # A lone surrogate from a damaged record must not stop the page from being written.
    return page.encode("utf-8", "replace")


# -- reading the record --------------------------------------------------------------------


def _events(layout: Layout, task_id: str) -> list[Event]:
    """The log's well-formed events; the rest are the audit's business, not the page's."""
    found = files.open_regular(layout.log(task_id), layout.rel(layout.log(task_id)), layout.root)
    if found is None:
        return []
    with found as fh:
        lines = progress.read(files.lines(fh), task_id)
        return [ln.event for ln in lines if ln.event is not None]


def _detail(ev: Event | None, key: str) -> Any:
    return None if ev is None else ev.get("details", {}).get(key)


def _call_id(events: Sequence[Event]) -> str | None:
    found = _detail(protocol.Attempt(0, 0, list(events)).invoked, "call_id")
    return found if ids.whole(ids.CALL_ID, found) else None


def _result(folder: Path, root: Path) -> dict[str, Any]:
    """The `result` of the worker's answer line, or {} when there is none to read (a forged
    record's symlink or FIFO in its place is not read)."""
    try:
        data = files.read_regular(folder / "stdout.ndjson", "stdout.ndjson", root)
        answer = orjson.loads(data or b"")
    except (InvalidInput, orjson.JSONDecodeError):
        return {}
    result = answer.get("result") if isinstance(answer, dict) else None
    return result if isinstance(result, dict) else {}


def _metrics(layout: Layout, task_id: str, call_id: str | None) -> dict[str, float]:
    """cost_usd, tokens and turns as the worker reported them; a figure out of an answer's
    bounds (a record may be anyone's; see metrics) is left out, as unknown."""
    if call_id is None:
        return {}
    return metrics.figures(_result(layout.exchange(task_id, call_id), layout.root).get("metrics"))


# -- sections ------------------------------------------------------------------------------


def _audit(verdict: Audit) -> str:
    if verdict.ok:
        return (
            '<section id="audit" class="audit clean" data-audit="clean"><h2>Audit: clean</h2>'
            f"<p>{verdict.events} events checked; no findings.</p></section>"
        )
    items = "".join(
        f"<li>seq {esc(f.seq)}: {esc(f.reason)}</li>"
        for f in sorted(verdict.findings, key=lambda f: (f.seq is None, f.seq or 0, f.reason))
    )
    return (
        '<section id="audit" class="audit findings" data-audit="findings">'
        f"<h2>Audit: {len(verdict.findings)} finding(s)</h2>"
        f"<p>{verdict.events} events checked.</p><ul>{items}</ul></section>"
    )


def _summary(
    layout: Layout,
    task_id: str,
    plan: plan_mod.Plan,
    events: Sequence[Event],
    model: protocol.Model,
    used: Sequence[dict[str, float]],
) -> str:
    done = sum(1 for s in plan.subtasks if s.id in model.done)
    complete = model.completed is not None
    rows = [
        ("Subtasks done", f"{done}/{len(plan.subtasks)}"),
        ("Task", "complete" if complete else "not complete"),
        ("Events", str(len(events))),
        ("Total cost", total_cost(*exchanges.total_cost(layout.exchanges(task_id), layout.root))),
        ("Tokens used", figure(sum(m.get("tokens", 0.0) for m in used))),
        ("Turns", figure(sum(m.get("turns", 0.0) for m in used))),
        ("Plan created", esc(plan.created)),
    ]
    if events:
        rows.append(("Log", f"{esc(events[0]['ts'])} to {esc(events[-1]['ts'])}"))
    bare = model.uncontained
    rows.append(
        ("Contained", "yes" if not bare else f"NO: {bare} event(s) ran with the sandbox off")
    )
    out = ['<section id="summary"><h2>Summary</h2><dl>']
    out += [f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows]
    out.append("</dl>")
    block = model.blocker
    if block is not None:
        where = block.get("step") or "the task's end"  # no step: failures that went on
        out.append(
            f'<p class="blocked" id="blocker">Blocked at {esc(where)}: '
            f"{esc(block.get('error', 'see the log'))}</p>"
        )
    out.append("</section>")
    return "".join(out)


def _timeline(
    subtasks: Sequence[plan_mod.Subtask],
    events: Sequence[Event],
    model: protocol.Model,
) -> str:
    """Per subtask: attempts, status, first and last logged instant, as bars on one scale."""
    t0 = epoch_seconds(events[0]["ts"]) if events else 0.0
    span = max((epoch_seconds(events[-1]["ts"]) - t0) if events else 0.0, 1.0)
    rows = []
    for sub in subtasks:
        mine = [ev for ev in events if ev.get("step") == sub.id]
        status = model.status(sub.id)
        cells = [esc(sub.id), str(len(model.attempts(sub.id))), _status(status)]
        if mine:
            start, end = epoch_seconds(mine[0]["ts"]), epoch_seconds(mine[-1]["ts"])
            # A forged log may run backwards: keep the bar inside its track.
            left = min(max((start - t0) / span * 100, 0.0), 99.5)
            width = max((end - start) / span * 100, 0.5)
            bar = (
                f'<div class="track"><div class="bar" '
                f'style="left:{left:.2f}%;width:{min(width, 100 - left):.2f}%"></div></div>'
            )
            cells += [esc(mine[0]["ts"]), esc(mine[-1]["ts"]), duration(end - start), bar]
        else:
            cells += ["-", "-", "-", '<div class="track"></div>']
        rows.append(cells)
    head = ["Subtask", "Attempts", "Status", "Start", "End", "Duration", "Timeline"]
    return f'<section id="timeline"><h2>Timeline</h2>{table(head, rows)}</section>'


def _status(status: str) -> str:
    return f'<span class="status-{esc(status)}">{esc(status)}</span>'


def _subtask(
    layout: Layout,
    task_id: str,
    sub: plan_mod.Subtask,
    model: protocol.Model,
) -> str:
    sid = esc(sub.id)
    status = model.status(sub.id)
    completed = model.done.get(sub.id)
    commit = None if completed is None else completed.commit
    attempts = model.attempts(sub.id)
    facts = [
        ("Role", esc(sub.role)),
        ("Goal", esc(sub.goal)),
        ("Status", _status(status)),
        ("Commit", f"<code>{esc(commit)}</code>"),
        ("Inputs", esc(", ".join(sub.inputs)) or "-"),
        ("Write scope", esc(", ".join(sub.write_scope)) or "-"),
        ("Acceptance", esc("; ".join(sub.acceptance)) or "-"),
    ]
    if sub.depends_on:
        facts.append(("Depends on", esc(", ".join(sub.depends_on))))
    out = [
        f'<section class="subtask" id="subtask-{sid}" data-subtask="{sid}">',
        f"<h3>{sid}: {esc(sub.goal)}</h3><dl>",
        *(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts),
        "</dl>",
    ]
    if not attempts:
        out.append("<p>Not started.</p>")
    out += [_attempt(layout, task_id, att) for att in attempts]
    out.append("</section>")
    return "\n".join(out)


def _attempt(layout: Layout, task_id: str, att: protocol.Attempt) -> str:
    invoked = att.last("subagent_invoked")
    call_id = _call_id(att.events)
    outcome, error = att.outcome()
    kind = outcome.split(" ", 1)[0]
    facts = [
        ("Call", f"<code>{esc(_detail(invoked, 'call_id'))}</code>"),
        ("Agent", esc(_detail(invoked, "subagent"))),
        ("Base", f"<code>{esc(_detail(invoked, 'base'))}</code>"),
        ("Write token", esc(_detail(invoked, "token"))),
        ("Outcome", f'<span class="outcome-{esc(kind)}">{esc(outcome)}</span>'),
    ]
    if error is not None:
        facts.append(("Error", f'<span class="error">{esc(error)}</span>'))
    metrics = _metrics(layout, task_id, call_id)
    facts.append(
        ("Metrics", esc(", ".join(f"{k} {figure(metrics[k])}" for k in METRICS if k in metrics)))
    )
    out = [
        f'<div class="attempt" data-attempt="{att.number}">',
        f"<h4>Attempt {att.number}</h4><dl>",
        *(f"<dt>{k}</dt><dd>{v or '-'}</dd>" for k, v in facts),
        "</dl>",
    ]
    if call_id is not None:
        out.append(_exchange(layout.exchange(task_id, call_id), layout.root))
    out.append(_log_table(att.events))
    out.append("</div>")
    return "\n".join(out)


def _exchange(folder: Path, root: Path) -> str:
    """The worker's answer: its notes, risks, patches, and the checks run on them, read only
    from the exchange's own regular files."""
    try:
        found = exchanges.load(folder, root)
    except InvalidInput as exc:
        return f'<p class="error">Exchange damaged: {esc(exc)}</p>'
    if found is None:
        return "<p>No exchange recorded for this call.</p>"
    out = []
    outcome = found.meta["outcome"]
    if outcome.get("message"):
        out.append(
            f'<p class="error">Worker error ({esc(outcome.get("kind"))}): '
            f"{esc(outcome['message'])}</p>"
        )
    result = _result(folder, root)
    for key, label in (("notes", "Notes"), ("risks", "Risks")):
        items = result.get(key)
        if isinstance(items, list) and items:
            listed = "".join(f"<li>{esc(i)}</li>" for i in items)
            out.append(f"<h5>{label}</h5><ul>{listed}</ul>")
    patches = sorted(n for n in found.contents if re.fullmatch(r"patches/[^/]+\.patch", n))
    for name in patches:
        out.append(
            f"<details open><summary>Diff {esc(name.removeprefix('patches/'))}</summary>"
            f"{diff(found.contents[name].decode('utf-8', 'replace'))}</details>"
        )
    if not patches:
        out.append("<p>No diffs.</p>")
    evidence = exchanges.evidence(folder, root)
    out.append(_checks({n: d for n, d in sorted(evidence.items()) if n.endswith(".json")}))
    if found.refused:
        out.append(
            '<p class="error">Network refused (the call\'s proxy): '
            f"{esc(', '.join(found.refused))}</p>"
        )
    stderr = found.contents.get("stderr.log", b"")
    if stderr:
        out.append(
            "<details><summary>Worker stderr</summary>"
            f"{pre(stderr.decode('utf-8', 'replace'))}</details>"
        )
    return "\n".join(out)


def _checks(evidence: dict[str, bytes]) -> str:
    """Each check's evidence file: command, exit codes, and per run duration and tail."""
    if not evidence:
        return "<p>No checks ran.</p>"
    rows = []
    for name, data in evidence.items():
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict):
            rows.append([esc(name), "unreadable", "-", "-", "-"])
            continue
        runs = doc.get("runs")
        listed = runs if isinstance(runs, list) else []
        shown = "".join(_run(i, run) for i, run in enumerate(listed, start=1))
        rows.append(
            [
                esc(doc.get("check", name)),
                f"<code>{esc(doc.get('command'))}</code>",
                esc(doc.get("exit_codes")),
                esc(doc.get("network")),
                shown or "-",
            ]
        )
    return "<h5>Checks</h5>" + table(["Check", "Command", "Exit codes", "Network", "Runs"], rows)


def _run(number: int, run: object) -> str:
    if not isinstance(run, dict):
        return f"<div>run {number}: unreadable</div>"
    flags = [k for k in ("timed_out", "leaked", "over_limit") if run.get(k)]
    head = f"run {number}: exit {esc(run.get('exit_code'))}" + (
        f", {esc(', '.join(flags))}" if flags else ""
    )
    tail = run.get("tail")
    return f"<div>{head}{pre(str(tail), 'tail') if tail else ''}</div>"


def _log_table(events: Sequence[Event]) -> str:
    rows = [
        [
            esc(ev["seq"]),
            esc(ev["ts"]),
            esc(ev["event"]),
            esc(ev["status"]),
            esc(ev.get("error", "")),
            f"<code>{esc(files.dumps(ev['details']).decode())}</code>" if ev.get("details") else "",
        ]
        for ev in events
    ]
    return (
        f"<details><summary>Log ({len(rows)} events)</summary>"
        + table(["Seq", "Time", "Event", "Status", "Error", "Details"], rows)
        + "</details>"
    )
