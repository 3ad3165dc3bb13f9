"""`harness next` and `harness run`: subtasks run, one or until the task completes or halts."""

from __future__ import annotations

import argparse

from harness.base import clock, files
from harness.cli import extras, located
from harness.cli.output import short
from harness.cli.recorded import record
from harness.repository.locks import locked
from harness.step import live, orchestrator, tracing
from harness.step.task import Task


def step(args: argparse.Namespace) -> int:
    layout, task_id = located.task(args)
    if getattr(args, "executor", "local") == "ray":
        connected()  # before anything is written: a cluster that is not there is bad input
    with locked(layout, task_id, args.wait):
        task = Task.load(layout, task_id, clock.from_env())
        checked = task.config.verify
        if not (checked.builds or checked.test or args.quiet or args.json):
            # The user may think their tests ran: say they did not, before any call.
            live.tell("build: none configured, test: none configured ([verify] in ai/harness.toml)")
        # Around the record commit too; its spans leave, in bounded time, on the way out.
        complete = lambda: task.model.completed is not None  # noqa: E731
        with tracing.traced(task_id, task.model.status, complete) as trace:
            task.trace = trace
            try:
                # Left before anything else is printed (the record's notices, an error's line),
                # so a board on the terminal is closed under its last drawing first.
                with live.shown(args.quiet, args.json) as (progress, say):
                    task.live = progress
                    task.person = not getattr(args, "no_human", False)
                    task.ahead = not getattr(args, "serial_checks", False)
                    task.executor = getattr(args, "executor", "local")
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
                            text = f"{sid}\tdone\t{short(made)}\t{short(done.call_id)}"
                        # At once, and with --json a JSON line like the progress lines around it.
                        say(files.dumps(doc).decode() if args.json else text, sid)
            finally:
                # Also when nothing new was logged: a run killed after its last event left
                # that event unrecorded.
                record(task)
    return 0


def connected() -> None:
    """Join the Ray cluster RAY_ADDRESS names (harness[ray] installed)."""
    try:
        from harness.step import rayexec  # imports ray: only for --executor ray
    except ModuleNotFoundError as exc:
        raise extras.missing(exc, "ray", "--executor ray") from None
    rayexec.connect()
