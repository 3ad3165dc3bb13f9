"""The command line: the only place that prints or chooses an exit code."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from . import (
    __version__,
    clock,
    config,
    drafting,
    exchanges,
    files,
    logview,
    orchestrator,
    personas,
    recordset,
    registry,
    replay,
    repo,
    sandbox,
    state,
    tokens,
)
from . import plan as plan_mod
from .contain import Containment
from .errors import Busy, HarnessError, InvalidInput
from .layout import Layout
from .printable import printable
from .progress import Log
from .workers import launcher

_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


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
        print("harness: interrupted", file=sys.stderr)
        return 4
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


def _task_id(value: str) -> str:
    if not _TASK_ID.match(value):
        raise InvalidInput(f"task id {value!r}: use letters, digits, '.', '_' and '-'")
    return value


@contextmanager
def _locked(layout: Layout, task_id: str, wait: bool) -> Iterator[None]:
    """One harness per task, and one writing harness per repository (they share the index
    and the branch): the second one is busy (exit 3) unless it waits."""
    locks = layout.state / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    held = []
    try:
        for path, what in (
            (locks / f"{task_id}.lock", f"task {task_id}"),
            (locks / "repository.lock", "the repository"),
        ):
            lock = FileLock(str(path), timeout=-1 if wait else 0)
            try:
                lock.acquire()
            except Timeout:
                raise Busy(f"{what} is busy: another harness holds {path}") from None
            held.append(lock)
        yield
    finally:
        for lock in reversed(held):
            lock.release()


def _record(task: orchestrator.Task) -> None:
    """Commit the task's state (plan, checklist, log, exchanges) so a clone holds it all:
    the bytes harness wrote or read there, each checked, and nothing else (see recordset)."""
    if not task.events:
        return
    message = (
        f"harness: record {task.task_id}\n\n"
        f"Harness-Task: {task.task_id}\n"
        f"Harness-Log-Head: {task.log.head}\n"
    )
    who = (task.config.name, task.config.email)
    head = task.git.head()
    found = recordset.collect(
        task.layout,
        task.task_id,
        task.ledger.entries,
        {task.layout.rel(task.log.path): task.log.data()},
        lambda paths: task.git.blob_hashes(head, paths),
    )
    for line in found.refused:
        print(f"harness: not recorded: {printable(line)}", file=sys.stderr)
    task.git.record(
        found.taken,
        found.dropped,
        message,
        who,
        task.events[-1]["ts"],
        task.scratch("record.index"),
    )
    task.ledger.clear()


def _short(value: str | None) -> str:
    return value[:12] if value else "-"


# -- commands ------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    layout = _layout(args)
    shims = ["claude", "codex", *(["gemini"] if args.gemini else [])]
    made = []
    wanted = [
        (layout.config, config.DEFAULT_TEXT.encode()),
        (layout.registry, files.pretty(registry.default(shims))),
        (layout.tokens, files.pretty(tokens.DEFAULT)),
    ]
    wanted += [
        (layout.ai / "agents" / "bin" / f"{name}-cli", launcher(name).encode()) for name in shims
    ]
    for path, data in wanted:
        if not path.exists():
            files.atomic_write(path, data)
            if path.parent.name == "bin":
                path.chmod(0o755)
            made.append(path.relative_to(layout.root).as_posix())
    print("created " + ", ".join(made) if made else "nothing to do: ai/ is already set up")
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
    for token in tokens.load(layout.tokens, layout.root):
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
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    agents = registry.load(layout.registry, layout.root)
    config.load(layout.config)  # a broken ai/harness.toml is refused here, not at the first step
    known = tokens.load(layout.tokens, layout.root)
    now = clock.from_env().now(0)
    problems = []
    for sub in plan.subtasks:
        if registry.route(agents, sub.role, sub.agent) is None:
            problems.append(orchestrator.unroutable(sub))
        globs = [*sub.write_scope, *sub.creates]
        _, why = tokens.select(known, sub.token, globs, now) if globs else (None, None)
        if why is not None:
            problems.append(f"subtask {sub.id}: {why}")
    for line in problems:
        print(
            f"{layout.plan(task_id).relative_to(layout.root)}: {printable(line)}", file=sys.stderr
        )
    if problems:
        return 2
    order = " -> ".join(s.id for s in plan_mod.order(plan))
    print(f"plan {task_id} is valid: {len(plan.subtasks)} subtasks, order {order}")
    return 0


def cmd_plan_show(args: argparse.Namespace) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    for sub in plan_mod.order(plan):
        deps = f" after {', '.join(sub.depends_on)}" if sub.depends_on else ""
        print(f"{sub.id}\t{sub.role}\t{printable(sub.goal)}{deps}")
    return 0


def cmd_plan_draft(args: argparse.Namespace) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    with _locked(layout, task_id, wait=False):
        path = drafting.draft(layout, task_id, args.goal, clock.from_env())
    print(
        f"draft written to {path.relative_to(layout.root)}; review it, then `harness plan accept`"
    )
    return 0


def cmd_plan_accept(args: argparse.Namespace) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    with _locked(layout, task_id, wait=False):
        data = drafting.accept(layout, task_id)
    sys.stdout.write(data.decode())
    print(f"accepted as {layout.plan(task_id).relative_to(layout.root)}")
    return 0


def _step(args: argparse.Namespace, loop: bool) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    with _locked(layout, task_id, args.wait):
        task = orchestrator.Task.load(layout, task_id, clock.from_env())
        try:
            while True:
                done = orchestrator.step(task)
                if done is None:
                    print(f"task {task_id} complete")
                    return 0
                finished = state.done(task.events)[done]["details"]
                print(f"{done}\tdone\t{_short(finished['commit'])}\t{_short(finished['call_id'])}")
                if not loop:
                    return 0
                sys.stdout.flush()
        finally:
            # Also when nothing new was logged: a run killed after its last event left
            # that event unrecorded.
            _record(task)


def cmd_next(args: argparse.Namespace) -> int:
    return _step(args, loop=False)


def cmd_run(args: argparse.Namespace) -> int:
    return _step(args, loop=True)


def cmd_status(args: argparse.Namespace) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    log = Log(layout.log(task_id), task_id, clock.from_env())
    rows = []
    for sub in plan_mod.order(plan):
        mine = [ev for ev in log.events if ev.get("step") == sub.id]
        invoked = [ev for ev in mine if ev["event"] == "subagent_invoked"]
        applied = [ev for ev in mine if ev["event"] == "subagent_diffs_applied"]
        judged = [ev for ev in mine if ev["event"] in ("phase_completed", "acceptance_failed")]
        rows.append(
            {
                "id": sub.id,
                "role": sub.role,
                "status": state.subtask_status(log.events, sub.id),
                "commit": applied[-1]["details"]["commit"] if applied else None,
                "call_id": invoked[-1]["details"]["call_id"] if invoked else None,
                "unverified": judged[-1]["details"].get("unverified", []) if judged else [],
            }
        )
    block = state.blocker(log.events)
    cost = round(exchanges.total_cost(layout.exchanges(task_id)), 6)
    if args.json:
        blocked = block and {"step": block.get("step"), "error": block.get("error")}
        doc = {
            "task_id": task_id,
            "blocked": blocked,
            "subtasks": rows,
            "complete": state.has(log.events, "task_completed"),
            "cost_usd": cost,
            "uncontained_events": state.uncontained(log.events),
        }
        sys.stdout.write(files.pretty(doc).decode())
        return 0
    for row in rows:
        print(
            f"{row['id']}\t{row['role']}\t{row['status']}\t{_short(row['commit'])}"
            f"\t{_short(row['call_id'])}"
        )
        for text in row["unverified"]:
            print(f"\t{row['id']} unverified: {printable(text)}")
    if cost:
        print(f"cost: ${cost:.4f}")
    if state.uncontained(log.events):
        print(f"NOT CONTAINED: {state.uncontained(log.events)} event(s) ran with the sandbox off")
    if block is not None:
        print(f"blocked at {block.get('step')}: {printable(str(block.get('error')))}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    with _locked(layout, task_id, args.wait):
        task = orchestrator.Task.load(layout, task_id, clock.from_env())
        block = state.blocker(task.events)
        if block is None:
            raise InvalidInput(f"task {task_id} is not blocked")
        task.log.append(
            "blocker_resolved", "ok", step=block.get("step"), details={"reason": args.reason}
        )
        _record(task)
    print(f"task {task_id} resumed at {block.get('step')}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Whether untrusted commands can be contained on this machine, and why not."""
    found = sandbox.diagnose()
    for name, value in found.items():
        print(f"{name}: {printable(value)}")
    return 0 if found["sandbox"] == "works" else 1


def cmd_registry_check(args: argparse.Namespace) -> int:
    layout = _layout(args)
    failed = 0
    contain = Containment(layout, config.load(layout.config))
    with tempfile.TemporaryDirectory(prefix="harness-probe-") as scratch:
        for agent in registry.load(layout.registry, layout.root):
            try:
                version = contain.probe(agent, Path(scratch) / agent.id)
                print(f"{agent.id}\tok\t{printable(version)}\t{agent.version}")
            except HarnessError as exc:
                failed += 1
                print(f"{agent.id}\tFAIL\t{printable(str(exc))}")
    return 1 if failed else 0


def cmd_agents_import(args: argparse.Namespace) -> int:
    layout = _layout(args)
    ids = personas.run(layout.root, args.source, clock.from_env().now(0))
    print(f"imported {len(ids)} agent(s) from {personas.SOURCES[args.source]}: {', '.join(ids)}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
    done = replay.replay(layout, task_id, args.verify)
    checks = "checks re-run" if done.verified else "checks from the record"
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
    from . import report  # imported here: it pulls in the auditor, which other commands skip

    layout = _layout(args)
    _emit(report.render(layout, _task_id(args.task_id)), args.output)
    return 0


def cmd_attest(args: argparse.Namespace) -> int:
    from . import attest

    layout = _layout(args)
    _emit(files.pretty(attest.statement(layout, _task_id(args.task_id))), args.output)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from . import audit  # imported here: its compiled validators are for this command only

    layout = _layout(args)
    task_id = _task_id(args.task_id)
    found = audit.audit(layout, task_id)
    if args.json:
        doc = {
            "task_id": task_id,
            "events": found.events,
            "ok": found.ok,
            "findings": [{"seq": f.seq, "reason": f.reason} for f in found.findings],
        }
        sys.stdout.buffer.write(files.dumps(doc) + b"\n")
        return 0 if found.ok else 1
    for finding in found.findings:
        print(f"{'-' if finding.seq is None else f'seq {finding.seq}'}: {finding.reason}")
    n = len(found.findings)
    verdict = "clean" if found.ok else f"{n} finding{'s' if n > 1 else ''}"
    print(f"audit {task_id}: {found.events} events, {verdict}")
    return 0 if found.ok else 1


def cmd_log(args: argparse.Namespace) -> int:
    layout = _layout(args)
    task_id = _task_id(args.task_id)
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
    from . import demo

    return demo.run(Path(args.dir) if args.dir else None, main)


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
        name: str,
        func: Callable[[argparse.Namespace], int],
        helptext: str,
        into: argparse._SubParsersAction[argparse.ArgumentParser] = sub,
    ) -> argparse.ArgumentParser:
        p = into.add_parser(name, parents=[common], help=helptext, description=helptext)
        p.set_defaults(func=func)
        return p

    p = add("init", cmd_init, "create ai/harness.toml, the registry and the token store if missing")
    p.add_argument("--gemini", action="store_true", help="also register the Gemini CLI shim")

    tok = sub.add_parser("tokens", help="write tokens").add_subparsers(dest="sub", required=True)
    p = add("issue", cmd_tokens_issue, "issue a write token for path globs", tok)
    p.add_argument("--paths", nargs="+", required=True)
    p.add_argument("--ttl", required=True, help="lifetime, e.g. 30m, 2h, 1d")
    p.add_argument("--one-shot", action="store_true")
    add("list", cmd_tokens_list, "list write tokens", tok)
    add("revoke", cmd_tokens_revoke, "revoke a write token", tok).add_argument("token_id")

    pl = sub.add_parser("plan", help="plans").add_subparsers(dest="sub", required=True)
    add("validate", cmd_plan_validate, "check a plan", pl).add_argument("task_id")
    add("show", cmd_plan_show, "print a plan in run order", pl).add_argument("task_id")
    p = add("draft", cmd_plan_draft, "ask the planning agent for plan.draft.json", pl)
    p.add_argument("task_id")
    p.add_argument("--goal", required=True)
    add("accept", cmd_plan_accept, "print the draft and promote it to plan.json", pl).add_argument(
        "task_id"
    )

    for name, func, helptext in (
        ("next", cmd_next, "run the next ready subtask, end to end"),
        ("run", cmd_run, "run subtasks until the task completes or halts"),
    ):
        p = add(name, func, helptext)
        p.add_argument("task_id")
        p.add_argument("--wait", action="store_true", help="wait for the task's lock")
    p = add("status", cmd_status, "per subtask: status, commit, call_id")
    p.add_argument("task_id")
    p.add_argument("--json", action="store_true")
    p = add("resume", cmd_resume, "record that a human resolved the task's blocker")
    p.add_argument("task_id")
    p.add_argument("--reason", required=True)
    p.add_argument("--wait", action="store_true")

    reg = sub.add_parser("registry", help="agents").add_subparsers(dest="sub", required=True)
    add("check", cmd_registry_check, "check each agent's launcher and version", reg)

    ag = sub.add_parser("agents", help="agents").add_subparsers(dest="sub", required=True)
    p = add("import", cmd_agents_import, "import .claude/agents or .gemini/agents files", ag)
    p.add_argument("--from", dest="source", choices=sorted(personas.SOURCES), required=True)

    p = add("replay", cmd_replay, "re-run a task from its record; name the first divergence")
    p.add_argument("task_id")
    p.add_argument("--verify", action="store_true", help="also re-run builds, tests, acceptance")

    p = add("report", cmd_report, "one self-contained HTML page of a task's record and audit")
    p.add_argument("task_id")
    p.add_argument("-o", "--output", help="write the page here (default: stdout)")
    p = add("attest", cmd_attest, "an in-toto SLSA provenance statement for a task's commit")
    p.add_argument("task_id")
    p.add_argument("-o", "--output", help="write the statement here (default: stdout)")

    p = add("audit", cmd_audit, "check a task's log, exchanges, commits and tokens")
    p.add_argument("task_id")
    p.add_argument("--json", action="store_true")
    p = add("log", cmd_log, "the task's log, one line per event")
    p.add_argument("task_id")
    p.add_argument("--event", choices=logview.EVENTS, help="only this event")
    p.add_argument("--subtask", help="only this subtask's events")
    p.add_argument("--json", action="store_true", help="the events as JSON lines")

    add("doctor", cmd_doctor, "whether the sandbox works on this machine, and why not")
    p = add("demo", cmd_demo, "run a sample task offline with the scripted worker")
    p.add_argument("--dir", help="where to build the sample repository (default: a temp dir)")
    return parser


if __name__ == "__main__":
    sys.exit(main())
