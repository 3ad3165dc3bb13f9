"""The command line: the only place that prints or chooses an exit code."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from harness import __version__
from harness.base import clock, files
from harness.base.errors import HarnessError, InvalidInput
from harness.base.printable import printable
from harness.boundary import sandbox
from harness.importers import importing, personas, scaffold
from harness.readers import logview, replay, status
from harness.record import tokens
from harness.record.progress import Log
from harness.repository import repo
from harness.repository.layout import Layout
from harness.repository.locks import locked
from harness.spec import plan as plan_mod
from harness.step import drafting, live, orchestrator, preflight, recording, supervision
from harness.workers import preview

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
Command = Callable[[argparse.Namespace], int]
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    repo.env_without_git()
    try:
        code: int = args.func(args)
        return code
    except HarnessError as exc:
        # One line, always: a message quoting a parser may carry newlines.
        print("harness: " + printable(" ".join(str(exc).splitlines())), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        # Each phase is logged before the next starts, so stopping anywhere leaves what a
        # kill would: the next run goes on from there. A second Ctrl-C must not cut this line.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("harness: interrupted; run the command again to go on", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader (`harness log | head`) has all it wanted; nothing more is to be said,
        # and Python must not try to flush into the closed pipe again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:
        with tempfile.NamedTemporaryFile(
            "w", prefix="harness-crash-", suffix=".log", delete=False
        ) as fh:
            traceback.print_exc(file=fh)
        print(f"harness: internal error; crash log: {fh.name}", file=sys.stderr)
        return 4


# -- helpers -------------------------------------------------------------------------------


def _layout(args: argparse.Namespace) -> Layout:
    start = Path(args.repo) if args.repo else Path.cwd()
    return Layout(repo.find_root(start.resolve()))


def _task(args: argparse.Namespace) -> tuple[Layout, str]:
    """The repository, found first, and the task id the command names."""
    layout = _layout(args)
    if not _TASK_ID.match(args.task_id):
        raise InvalidInput(f"task id {args.task_id!r}: use letters, digits, '.', '_' and '-'")
    return layout, args.task_id


def _positive(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < 1:  # "²" is a digit too
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return int(value)


def _record(task: orchestrator.Task) -> None:
    for line in recording.record(task):
        print(f"harness: not recorded: {printable(line)}", file=sys.stderr)


def _print_json(doc: object) -> None:
    """One JSON document on stdout, keys sorted, so scripts and diffs see it the same."""
    sys.stdout.write(files.pretty(doc).decode())


def _short(value: str | None) -> str:
    return value[:12] if value else "-"


# -- commands ------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    made = scaffold.init(_layout(args), args.gemini)
    print("created " + ", ".join(made) if made else "nothing to do: ai/ is already set up")
    for note in scaffold.missing(args.gemini):
        print(note, file=sys.stderr)
    return 0


def cmd_tokens_issue(args: argparse.Namespace) -> int:
    layout = _layout(args)
    token_id = tokens.issue(
        layout.tokens, layout.root, args.paths, args.ttl, args.one_shot, clock.from_env().now(0)
    )
    print(token_id)
    return 0


def cmd_tokens_list(args: argparse.Namespace) -> int:
    layout = _layout(args)
    now = clock.from_env().now(0)
    known = tokens.load(layout.tokens, layout.root)
    if args.json:
        _print_json({"tokens": [t.row(now) for t in known]})
        return 0
    for token in known:
        why = token.usable_at(now)
        shot = "one-shot" if token.one_shot else "reusable"
        print(f"{token.id}\t{' '.join(token.paths)}\t{token.expires}\t{shot}\t{why or 'usable'}")
    return 0


def cmd_tokens_revoke(args: argparse.Namespace) -> int:
    layout = _layout(args)
    tokens.revoke(layout.tokens, layout.root, args.token_id)
    print(f"revoked {args.token_id}")
    return 0


def cmd_plan_validate(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    doc, code = preflight.validate(layout, task_id, clock.from_env().now(0))
    if args.json:
        _print_json(doc)
    else:
        where = layout.plan(task_id).relative_to(layout.root)
        for line in doc["problems"]:
            print(f"{where}: {printable(line)}", file=sys.stderr)
        if doc["valid"]:
            order = doc["order"]
            print(f"plan {task_id} is valid: {len(order)} subtasks, order {' -> '.join(order)}")
    return code


def cmd_plan_show(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    ordered = plan_mod.order(plan)
    if args.json:
        rows = [
            {
                "id": s.id,
                "role": s.role,
                "goal": s.goal,
                "depends_on": list(s.depends_on),
                "agents": list(s.agents),
                "on_error": s.on_error,
                "budgets": dict(s.limits),
                "plan": s.plan,
            }
            for s in ordered
        ]
        doc = {"task_id": task_id, "subtasks": rows, "max_parallel": plan.max_parallel}
        _print_json(doc | {"budgets": dict(plan.limits)})
        return 0
    for sub in ordered:
        deps = f" after {', '.join(sub.depends_on)}" if sub.depends_on else ""
        print(f"{sub.id}\t{sub.role}\t{printable(sub.goal)}{deps}")
    return 0


def cmd_plan_draft(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    with locked(layout, task_id, wait=False):
        path = drafting.draft(layout, task_id, args.goal, clock.from_env())
    print(
        f"draft written to {path.relative_to(layout.root)}; review it, then `harness plan accept`"
    )
    return 0


def cmd_plan_accept(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    with locked(layout, task_id, wait=False):
        data = drafting.accept(layout, task_id)
    sys.stdout.write(data.decode())
    print(f"accepted as {layout.plan(task_id).relative_to(layout.root)}")
    return 0


def cmd_plan_import(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    given = dict(_pair(item) for item in args.input)
    scope = args.write_scope or "none"
    created = clock.from_env().now(0)
    with locked(layout, task_id, wait=False):
        found = importing.convert(
            layout, Path(args.file), task_id, created, given, args.role, scope
        )
        written = importing.write(layout, found, args.force)
    for path in written:
        print(f"wrote {layout.rel(path)}")
    return 0


def _pair(item: str) -> tuple[str, str]:
    """--input K=V."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InvalidInput(f"--input {item!r}: give it as NAME=VALUE")
    return key, value


def cmd_step(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    with locked(layout, task_id, args.wait):
        task = orchestrator.Task.load(layout, task_id, clock.from_env())
        checked = task.config.verify
        if not (checked.builds or checked.test or args.quiet or args.json):
            # The user may think their tests ran: say they did not, before any call.
            orchestrator.tell(
                "build: none configured, test: none configured ([verify] in ai/harness.toml)"
            )
        try:
            # Left before anything else is printed (the record's notices, an error's line),
            # so a board on the terminal is closed under its last drawing first.
            with live.shown(args.quiet, args.json) as (progress, say):
                task.live = progress
                task.person = not getattr(args, "no_human", False)
                slots = task.slots(getattr(args, "max_parallel", 1))
                for done in orchestrator.steps(task, once=not args.loop, slots=slots):
                    if done is None:
                        doc = {"event": "task_complete", "task_id": task_id}
                        sid, text = None, f"task {task_id} complete"
                    else:
                        doc = {"event": "subtask_done", **done._asdict()}
                        sid = done.subtask
                        # A loop whose last round changed nothing ends on its rounds' commit.
                        made = done.commit or task.model.summary(sid)["commit"]
                        text = f"{sid}\tdone\t{_short(made)}\t{_short(done.call_id)}"
                    # At once, and with --json a JSON line like the progress lines around it.
                    say(files.dumps(doc).decode() if args.json else text, sid)
        finally:
            # Also when nothing new was logged: a run killed after its last event left
            # that event unrecorded.
            _record(task)
    return 0


# `status`'s exit code when the task stands halted, as `run` would leave it.
HALTED = frozenset({"blocked", "failed", "skipped", "awaiting approval"})


def cmd_status(args: argparse.Namespace) -> int:
    doc = status.status(*_task(args), clock.from_env())
    halted = doc["blocked"] is not None or any(r["status"] in HALTED for r in doc["subtasks"])
    code = 1 if halted else 0
    if args.json:
        _print_json(doc)
        return code
    for row in doc["subtasks"]:
        print(
            f"{row['id']}\t{row['role']}\t{row['status']}\t{_short(row['commit'])}"
            f"\t{_short(row['call_id'])}"
        )
        if row["reason"] is not None:
            print(f"\t{row['id']} {row['status']}: {printable(row['reason'])}")
        for text in row["unverified"]:
            print(f"\t{row['id']} unverified: {printable(text)}")
    if doc["cost_usd"]:
        unknown = doc["cost_unknown_calls"]
        partial = f" (partial: {unknown} call(s) reported no cost)" if unknown else ""
        print(f"cost: ${doc['cost_usd']:.4f}{partial}")
    for name, use in doc["budgets"].items():
        used = "" if use["used"] is None else f"{use['used']:g} of "
        print(f"budget {name}: {used}{use['limit']:g}")
    if doc["uncontained_events"]:
        print(f"NOT CONTAINED: {doc['uncontained_events']} event(s) ran with the sandbox off")
    block = doc["blocked"]
    if block is not None:
        where = block.get("step") or "the task's end"  # no step: failures that went on, a budget
        print(f"blocked at {where}: {printable(str(block.get('error')))}")
    return code


def cmd_resume(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    with locked(layout, task_id, args.wait):
        task = orchestrator.Task.load(layout, task_id, clock.from_env())
        step = orchestrator.resume(task, args.reason)
        _record(task)
    # No step: the blocker was the task's end (failures that went on, a budget).
    print(f"task {task_id} resumed at {step or 'its end'}")
    return 0


def cmd_verdict(args: argparse.Namespace) -> int:
    """`approve` / `reject`: a person's verdict on a change awaiting approval."""
    layout, task_id = _task(args)
    approve = args.command == "approve"
    reason = args.reason or "approved"
    if not reason.strip():
        raise InvalidInput("--reason: say why")
    with locked(layout, task_id, args.wait):
        task = orchestrator.Task.load(layout, task_id, clock.from_env())
        who = task.git.identity()
        if who is None:
            raise InvalidInput("git knows no user.name and user.email here: set them first")
        action = supervision.CONTINUE if approve else supervision.REORIENT
        verdict = supervision.Verdict(action, reason, reason)
        orchestrator.decide(task, args.subtask, verdict, who)
        _record(task)
    then = "it is committed by the next `harness run`" if approve else "it runs again"
    print(f"{args.subtask} {'approved' if approve else 'rejected'} by {printable(who)}; {then}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Whether untrusted commands can be contained on this machine, and why not; inside a
    repository with a registry, whether each agent starts in its sandbox, and why not."""
    found: dict[str, Any] = dict(sandbox.diagnose())
    rows = _doctor_agents(args) if found["sandbox"] == "works" else []
    if args.json:
        _print_json(found | {"agents": rows})
    else:
        for name, value in found.items():
            print(f"{name}: {printable(value)}")
        for row in rows:
            why = str(row["error"]).removeprefix(f"agent {row['id']}: ")
            state = f"ok {row['version']}" if row["ok"] else why
            print(f"agent {row['id']}: {printable(state)}")
    return 0 if found["sandbox"] == "works" and all(r["ok"] for r in rows) else 1


def _doctor_agents(args: argparse.Namespace) -> list[dict[str, object]]:
    """Each registry agent asked for its version in its sandbox; none outside a repository
    or without a registry."""
    try:
        layout = _layout(args)
    except HarnessError:
        return []
    if not layout.registry.is_file():
        return []
    return list(preflight.registry_check(layout))


def cmd_registry_check(args: argparse.Namespace) -> int:
    rows = []
    for row in preflight.registry_check(_layout(args)):
        rows.append(row)
        if args.json:
            continue
        if row["ok"]:
            print(f"{row['id']}\tok\t{printable(str(row['version']))}\t{row['wanted']}")
        else:
            print(f"{row['id']}\tFAIL\t{printable(str(row['error']))}")
    failed = not all(row["ok"] for row in rows)
    if args.json:
        _print_json({"agents": rows, "ok": not failed})
    return 1 if failed else 0


def cmd_policy_show(args: argparse.Namespace) -> int:
    shown = preview.show(_layout(args), args.agent)
    if args.json:
        _print_json(shown)
        return 0
    where = shown["policy"] or "none (no ai/policy.toml: flags as without one)"
    print(f"agent: {printable(shown['agent'])}\ncli: {shown['cli'] or '-'}\npolicy: {where}")
    if shown["tools"] is not None:
        print(f"tools: {', '.join(shown['tools']) or 'none'} (its registry entry's: no other)")
    if shown["model"] is not None:
        print(f"model: {printable(shown['model'])}")
    print(f"launch: {printable(shlex.join(shown['launch']))}")
    if shown["cli"] is None:
        print("(no claude, codex or gemini shim: of the policy it gets the commands it keeps)")
        return 0
    for key, label in (("writable", "writable"), ("read_only", "read-only")):
        print(f"{label}: {printable(shlex.join(shown[key]))}")
    copy, home = shown["workspace"], shown["home"]
    print(f"($WORKSPACE is each call's throw-away copy, shown as {copy}; ~ is {home})")
    return 0


def cmd_agents_import(args: argparse.Namespace) -> int:
    layout = _layout(args)
    ids = personas.run(layout.root, args.source, clock.from_env().now(0))
    print(f"imported {len(ids)} agent(s) from {personas.SOURCES[args.source]}: {', '.join(ids)}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    done = replay.replay(layout, task_id, args.verify, trusted=args.trust_config)
    checks = "checks re-run in the sandbox" if done.verified else "checks from the record"
    if done.loosened:
        checks = f"checks re-run as the record's config says: {', '.join(done.loosened)}"
    print(
        f"replay {task_id}: {done.events} events and {len(done.commits)} commits reproduced "
        f"from base {done.base[:12]} ({checks})"
    )
    for commit in done.commits:
        print(f"  {commit}")
    return 0


def _emit(data: bytes, output: str | None) -> None:
    """To stdout, or atomically to a file, so a failed run never leaves half a file."""
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    files.atomic_write(Path(output), data)
    print(f"wrote {output}")


def cmd_report(args: argparse.Namespace) -> int:
    from harness.readers import report

    _emit(report.render(*_task(args)), args.output)
    return 0


def cmd_attest(args: argparse.Namespace) -> int:
    from harness.readers import attest

    _emit(files.pretty(attest.statement(*_task(args))), args.output)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from harness.readers import audit

    layout, task_id = _task(args)
    found = audit.audit(layout, task_id)
    if args.json:
        sys.stdout.buffer.write(files.dumps(found.doc()) + b"\n")
        return 0 if found.ok else 1
    for finding in found.findings:
        print(f"{'-' if finding.seq is None else f'seq {finding.seq}'}: {finding.reason}")
    n = len(found.findings)
    verdict = "clean" if found.ok else f"{n} finding{'s' if n > 1 else ''}"
    print(f"audit {task_id}: {found.events} events, {verdict}")
    return 0 if found.ok else 1


def cmd_log(args: argparse.Namespace) -> int:
    layout, task_id = _task(args)
    if not layout.task_dir(task_id).is_dir():
        raise InvalidInput(f"ai/tasks/{task_id}: no such task")
    events = Log(layout.log(task_id), task_id, clock.from_env()).events
    if args.json:
        for ev in events:
            if logview.selected(ev, args.event, args.subtask):
                sys.stdout.buffer.write(files.dumps(ev) + b"\n")
        return 0
    color = sys.stdout.isatty()
    for row in logview.rows(events):
        if logview.selected(row.event, args.event, args.subtask):
            print(logview.render(row, color))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from harness.importers import demo

    if args.dir and args.repo and Path(args.dir).resolve() != Path(args.repo).resolve():
        raise InvalidInput(f"--dir {args.dir} and --repo {args.repo}: give one folder")
    where = args.dir or args.repo  # --repo, as every command takes it: the repository to make
    return demo.run(Path(where) if where else None, main)


# -- parser ---------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness", description="Deterministic orchestrator for AI coding agents."
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repo", help="repository root (default: the enclosing git repository)")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(
        name: str, func: Command, helptext: str, into: Commands = sub
    ) -> argparse.ArgumentParser:
        p = into.add_parser(name, parents=[common], help=helptext, description=helptext)
        p.set_defaults(func=func)
        return p

    def on_task(
        name: str, func: Command, helptext: str, into: Commands = sub
    ) -> argparse.ArgumentParser:
        p = add(name, func, helptext, into)
        p.add_argument("task_id")
        return p

    p = add("init", cmd_init, "create ai/harness.toml, the registry and the token store if missing")
    p.add_argument("--gemini", action="store_true", help="also register the Gemini CLI shim")

    tok = sub.add_parser("tokens", help="write tokens").add_subparsers(dest="sub", required=True)
    p = add("issue", cmd_tokens_issue, "issue a write token for path globs", tok)
    p.add_argument("--paths", nargs="+", required=True)
    p.add_argument("--ttl", required=True, help="lifetime, e.g. 30m, 2h, 1d")
    p.add_argument("--one-shot", action="store_true")
    p = add("list", cmd_tokens_list, "list write tokens", tok)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    add("revoke", cmd_tokens_revoke, "revoke a write token", tok).add_argument("token_id")

    pl = sub.add_parser("plan", help="plans").add_subparsers(dest="sub", required=True)
    p = on_task("validate", cmd_plan_validate, "check a plan and its pre-flight", pl)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p = on_task("show", cmd_plan_show, "print a plan in run order", pl)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p = on_task("draft", cmd_plan_draft, "ask the planning agent for plan.draft.json", pl)
    p.add_argument("--goal", required=True)
    on_task("accept", cmd_plan_accept, "print the draft and promote it to plan.json", pl)
    p = add("import", cmd_plan_import, "write plan.json from an Agentfile or a Glee workflow", pl)
    p.add_argument("file", help="an Agentfile, or a Glee workflow (.yml/.yaml)")
    p.add_argument(
        "--task", dest="task_id", required=True, help="the task whose plan.json is written"
    )
    p.add_argument("--input", action="append", default=[], metavar="K=V")
    p.add_argument("--role", default="localized-impl", help="the role each goal runs as")
    p.add_argument(
        "--write-scope",
        action="append",
        metavar="GLOB",
        help="where each subtask may write (default: nowhere, until a person says)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing plan.json")

    for name, helptext in (
        ("next", "run the next ready subtask, end to end"),
        ("run", "run subtasks until the task completes or halts"),
    ):
        p = on_task(name, cmd_step, helptext)
        p.set_defaults(loop=name == "run")
        p.add_argument("--wait", action="store_true", help="wait for the task's lock")
        p.add_argument("--quiet", action="store_true", help="no progress lines")
        p.add_argument(
            "--json", action="store_true", help="progress and result as JSON lines on stdout"
        )
        if name == "run":
            p.add_argument(
                "--max-parallel",
                type=_positive,
                default=1,
                metavar="N",
                help="subtasks in flight at once (default 1; plan.json's max_parallel caps it)",
            )
            p.add_argument(
                "--no-human",
                action="store_true",
                help="nobody is at hand (CI): refuse before any call if a person must approve",
            )
    p = on_task("status", cmd_status, "per subtask: status, commit, call_id")
    p.add_argument("--json", action="store_true")
    p = on_task("resume", cmd_resume, "record that a human resolved the task's blocker")
    p.add_argument("--reason", required=True)
    p.add_argument("--wait", action="store_true")
    for name, helptext in (
        ("approve", "approve a change awaiting a person: the next run commits it"),
        ("reject", "reject a change awaiting a person: it runs again, told the reason"),
    ):
        p = on_task(name, cmd_verdict, helptext)
        p.add_argument("subtask")
        p.add_argument("--reason", required=name == "reject")
        p.add_argument("--wait", action="store_true")

    reg = sub.add_parser("registry", help="agents").add_subparsers(dest="sub", required=True)
    p = add("check", cmd_registry_check, "check each agent's launcher and version", reg)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")

    po = sub.add_parser("policy", help="ai/policy.toml").add_subparsers(dest="sub", required=True)
    p = add("show", cmd_policy_show, "the flags an agent's CLI gets under ai/policy.toml", po)
    p.add_argument("agent", help="a registry agent id")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")

    ag = sub.add_parser("agents", help="agents").add_subparsers(dest="sub", required=True)
    p = add("import", cmd_agents_import, "import .claude/agents or .gemini/agents files", ag)
    p.add_argument("--from", dest="source", choices=sorted(personas.SOURCES), required=True)

    p = on_task("replay", cmd_replay, "re-run a task from its record; name the first divergence")
    p.add_argument("--verify", action="store_true", help="also re-run builds, tests, acceptance")
    p.add_argument(
        "--trust-config",
        action="store_true",
        help="re-run checks with the recorded [sandbox] and network, even uncontained "
        "(default: always in the sandbox, no network): only for a record you trust",
    )

    p = on_task("report", cmd_report, "one self-contained HTML page of a task's record and audit")
    p.add_argument("-o", "--output", help="write the page here (default: stdout)")
    p = on_task("attest", cmd_attest, "an in-toto SLSA provenance statement for a task's commit")
    p.add_argument("-o", "--output", help="write the statement here (default: stdout)")

    p = on_task("audit", cmd_audit, "check a task's log, exchanges, commits and tokens")
    p.add_argument("--json", action="store_true")
    p = on_task("log", cmd_log, "the task's log, one line per event")
    p.add_argument("--event", choices=logview.EVENTS, help="only this event")
    p.add_argument("--subtask", help="only this subtask's events")
    p.add_argument("--json", action="store_true", help="the events as JSON lines")

    p = add("doctor", cmd_doctor, "whether the sandbox works on this machine, and why not")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p = add("demo", cmd_demo, "run a sample task offline with the scripted worker")
    p.add_argument("--dir", help="where to build the sample repository, like --repo")
    return parser


if __name__ == "__main__":
    sys.exit(main())
