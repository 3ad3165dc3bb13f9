"""`harness mcp`'s server: harness's commands as MCP tools over stdio, each tool running its
command as a child process (`python -P -m harness.cli <command> --repo ROOT`), so a tool is the
command's own code path with its exit meanings, and an MCP caller can do nothing the command
line cannot.

Only `harness mcp` imports this module: the `mcp` SDK takes over a second to import."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import orjson
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from harness import __version__
from harness.base import files
from harness.base.errors import Busy, Halted, InvalidInput
from harness.base.printable import printable
from harness.cli import located
from harness.cli.main import INTERRUPTED, MAX_SLOTS

# What a command's exit code means, said in the tool error that carries it.
MEANINGS = {
    Halted.exit_code: "halted or blocked",
    InvalidInput.exit_code: "bad input",
    Busy.exit_code: "busy: another harness holds the task's lock",
    4: "internal error: see the crash log it names",
    INTERRUPTED: "interrupted",
}
# Exit 1 of the commands that check rather than run: what they found, not a halted task.
FOUND = {"audit": "findings", "plan validate": "problems found"}
# A child asked to stop (the call was cancelled) has this long to log where it stopped.
STOP_GRACE_S = 10.0
# How long a stderr line may be (asyncio's default, 64 KiB, could refuse an error line quoting
# a long path); harness's own lines are far shorter.
LINE_LIMIT = 1 << 20

TaskId = Annotated[str, Field(description="a task id: the folder name under ai/tasks")]
SubtaskId = Annotated[str, Field(description="a subtask id of the task's plan")]
Reason = Annotated[
    str, Field(description="why: recorded with the verdict, and told to the worker on a retry")
]
READING = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITING = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
Said = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Done:
    """What a command's child process left: its exit code, stdout and stderr lines."""

    code: int
    out: str
    err: list[str]


def argv(root: Path, words: list[str], options: list[str], positionals: list[str]) -> list[str]:
    """`harness <words> --repo ROOT <options> -- <positionals>`: every option joined to its
    value with `=` and every positional after `--`, so no value the caller gives is read as
    an option; and a positional starting with `-` is refused outright, as an id never does."""
    for value in positionals:
        if value.startswith("-"):
            raise ToolError(
                f"{printable(value)!r}: an id never starts with '-' (exit 2: bad input)"
            )
    if any("\0" in value for value in (*options, *positionals)):
        # No process takes one in its arguments: refused here, in the command's words.
        raise ToolError("an argument holds a NUL character (exit 2: bad input)")
    return [
        sys.executable,
        # The server runs where its user started it, often the repository: `-m` alone would
        # put that folder first on sys.path, and a harness/ package there would run as the
        # tool, outside any sandbox.
        "-P",
        "-m",
        "harness.cli",
        *words,
        "--repo",
        str(root),
        *options,
        "--",
        *positionals,
    ]


async def run(command: list[str], said: Said) -> Done:
    """Run `command` with no stdin (the server's stdin is the JSON-RPC stream), its stdout
    collected and each stderr line handed to `said` as it comes. A cancelled call stops the
    child as Ctrl-C would, so the task's log says where it stopped."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
            # Every path in `command` is absolute; an empty entry of the user's PYTHONPATH
            # means the current folder, which is then no repository's.
            cwd="/",
        )
    except OSError as exc:
        if exc.errno != errno.E2BIG:
            raise
        # An argument past what the system passes to a program (128 KiB): a caller's, since
        # the rest are short.
        raise ToolError("an argument is too long to pass (exit 2: bad input)") from None
    assert proc.stdout is not None and proc.stderr is not None
    out = asyncio.ensure_future(proc.stdout.read())
    err: list[str] = []
    try:
        while line := await proc.stderr.readline():
            text = line.decode(errors="replace").rstrip("\n")
            err.append(text)
            await said(text)
        code = await proc.wait()
        return Done(code, (await out).decode(errors="replace"), err)
    finally:
        out.cancel()
        if proc.returncode is None:
            with anyio.CancelScope(shield=True):
                await _stop(proc)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()


def failure(done: Done, words: list[str]) -> ToolError:
    """The tool error for command `words`' non-zero exit: its last stderr line (its one-line
    error), the exit code and what it means, then what the command printed on stdout (a
    halted task's status is still its status)."""
    said = next((line for line in reversed(done.err) if line.strip()), "")
    meaning = MEANINGS.get(done.code, "failed")
    if done.code == Halted.exit_code:
        meaning = FOUND.get(" ".join(words), meaning)
    text = f"{said} (exit {done.code}: {meaning})".lstrip()
    if done.out.strip():
        text += "\n" + done.out.rstrip("\n")
    return ToolError(text)


def tasks(root: Path) -> list[str]:
    """The tasks of the repository: folders under ai/tasks holding a plan.json, by name.
    A committed symlink in place of ai/ or ai/tasks is refused, as every harness read
    refuses one; names a task id cannot take are left out."""
    folder = root / "ai" / "tasks"
    try:
        files.check_folders(root, folder / "plan.json")
    except InvalidInput as exc:
        raise ToolError(f"{exc} (exit 2: bad input)") from None
    if not folder.is_dir():
        return []
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if not (entry.is_dir(follow_symlinks=False) and located.is_task_id(entry.name)):
                continue
            plan = Path(entry.path) / "plan.json"
            if plan.is_file() and not plan.is_symlink():
                found.append(entry.name)
    return sorted(found)


class Tools:
    """The tools of one repository's server, each one command."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def command(
        self,
        ctx: Context,
        words: list[str],
        positionals: list[str],
        options: tuple[str, ...] = (),
    ) -> str:
        """The command's stdout, or its exit as a tool error; each stderr line (a live
        progress line of `next` and `run`, a notice) sent on as a progress notification
        while the command runs (MCP's log messages are deprecated since 2026-07-28)."""
        count = 0

        async def said(line: str) -> None:
            nonlocal count
            count += 1
            await ctx.report_progress(count, None, line)

        done = await run(argv(self.root, words, list(options), positionals), said)
        if done.code != 0:
            raise failure(done, words)
        return done.out

    async def document(
        self, ctx: Context, words: list[str], positionals: list[str]
    ) -> dict[str, Any]:
        """A command's `--json` document as structured content."""
        out = await self.command(ctx, words, positionals, ("--json",))
        doc: dict[str, Any] = orjson.loads(out)
        return doc


def server(root: Path) -> MCPServer:
    """The server with its tools, working on the repository at `root`."""
    mcp: MCPServer = MCPServer(
        "harness",
        version=__version__,
        instructions=(
            "harness runs a task's plan (ai/tasks/<id>/plan.json) with agents, checks each "
            "change and records everything. Each tool is the harness command it names."
        ),
    )
    tools = Tools(root)
    _reading_tools(mcp, tools)
    _running_tools(mcp, tools)
    return mcp


def _reading_tools(mcp: MCPServer, tools: Tools) -> None:
    @mcp.tool(annotations=READING)
    def list_tasks() -> dict[str, list[str]]:
        """The repository's tasks: the folders under ai/tasks that hold a plan.json."""
        return {"tasks": tasks(tools.root)}

    @mcp.tool(annotations=READING)
    async def show_plan(task_id: TaskId, ctx: Context) -> dict[str, Any]:
        """`harness plan show TASK --json`: the plan in run order."""
        return await tools.document(ctx, ["plan", "show"], [task_id])

    @mcp.tool(annotations=READING)
    async def status(task_id: TaskId, ctx: Context) -> dict[str, Any]:
        """`harness status TASK --json`: per subtask its status, commit and call; cost,
        budgets and the blocker. A halted task is an error (exit 1) carrying its status."""
        return await tools.document(ctx, ["status"], [task_id])

    @mcp.tool(annotations=READING)
    async def validate(task_id: TaskId, ctx: Context) -> dict[str, Any]:
        """`harness plan validate TASK --json`: the plan and its pre-flight checked; a plan
        with problems is an error (exit 1) listing them."""
        return await tools.document(ctx, ["plan", "validate"], [task_id])

    @mcp.tool(annotations=READING)
    async def audit(task_id: TaskId, ctx: Context) -> dict[str, Any]:
        """`harness audit TASK --json`: the task's log, exchanges, commits and tokens
        checked; findings are an error (exit 1) listing them."""
        return await tools.document(ctx, ["audit"], [task_id])

    @mcp.tool(annotations=READING)
    async def log(
        task_id: TaskId,
        ctx: Context,
        event: Annotated[str | None, Field(description="only this event")] = None,
        subtask: Annotated[str | None, Field(description="only this subtask's events")] = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """`harness log TASK --json [--event E] [--subtask S]`: the task's log events."""
        options = ["--json"]
        if event is not None:
            options.append(f"--event={event}")
        if subtask is not None:
            options.append(f"--subtask={subtask}")
        out = await tools.command(ctx, ["log"], [task_id], tuple(options))
        return {"events": [orjson.loads(line) for line in out.splitlines() if line.strip()]}


def _running_tools(mcp: MCPServer, tools: Tools) -> None:
    @mcp.tool(annotations=WRITING)
    async def next_subtask(task_id: TaskId, ctx: Context) -> str:
        """`harness next TASK`: run the next ready subtask end to end; its phases are sent
        as progress while it runs. Halted (a failed check, a blocker, a change awaiting
        approval) is an error (exit 1)."""
        return await tools.command(ctx, ["next"], [task_id])

    @mcp.tool(annotations=WRITING)
    async def run_task(
        task_id: TaskId,
        ctx: Context,
        max_parallel: Annotated[
            int, Field(ge=1, le=MAX_SLOTS, description="subtasks in flight at once")
        ] = 1,
        no_human: Annotated[
            bool, Field(description="refuse before any call if a person must approve")
        ] = False,
    ) -> str:
        """`harness run TASK`: run subtasks until the task completes or halts; phases are
        sent as progress. Halted is an error (exit 1)."""
        options = [f"--max-parallel={max_parallel}"] + (["--no-human"] if no_human else [])
        return await tools.command(ctx, ["run"], [task_id], tuple(options))

    @mcp.tool(annotations=WRITING)
    async def approve(task_id: TaskId, subtask: SubtaskId, reason: Reason, ctx: Context) -> str:
        """`harness approve TASK SUBTASK --reason R`: approve a change awaiting a person; the
        next run commits it. The approver is git's user.name and user.email."""
        return await tools.command(ctx, ["approve"], [task_id, subtask], (f"--reason={reason}",))

    @mcp.tool(annotations=WRITING)
    async def reject(task_id: TaskId, subtask: SubtaskId, reason: Reason, ctx: Context) -> str:
        """`harness reject TASK SUBTASK --reason R`: reject a change awaiting a person; it
        runs again, told the reason."""
        return await tools.command(ctx, ["reject"], [task_id, subtask], (f"--reason={reason}",))
