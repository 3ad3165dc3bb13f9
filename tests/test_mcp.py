"""`harness mcp` (harness/cli/mcpserver.py): through the SDK's own client over stdio against
real repositories, each tool and its refusal twin; the argv and error building in process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver.exceptions import ToolError

from harness.cli import mcpserver
from harness.importers import demo

from .conftest import (
    CLOCK,
    Sample,
    calc_patch,
    completed_demo,
    new_file_patch,
    ok,
    scripted,
    subtask,
)

TOOLS = {
    "list_tasks",
    "show_plan",
    "status",
    "validate",
    "audit",
    "log",
    "next_subtask",
    "run_task",
    "approve",
    "reject",
}
# A second subtask after T1, as tests/test_supervision.py has it.
T2 = subtask("T2", depends_on=["T1"], creates=["src/extra.py"])
T2_OK = ok("T2", ("src/extra.py", new_file_patch("src/extra.py", ["B = 2"])))


@asynccontextmanager
async def connected(root: Path, cwd: Path | None = None) -> AsyncIterator[Client]:
    """The SDK's client on `harness mcp --repo ROOT`, started as a user's agent starts it;
    with `cwd`, as the `harness` command in that folder."""
    command, args = sys.executable, ["-m", "harness.cli", "mcp", "--repo", str(root)]
    if cwd is not None:
        command, args = str(Path(sys.executable).parent / "harness"), args[2:]
    params = StdioServerParameters(
        command=command, args=args, env={**os.environ, "HARNESS_CLOCK": CLOCK}, cwd=cwd
    )
    async with Client(params) as client:
        yield client


def talk(root: Path, body: Callable[[Client], Awaitable[None]], cwd: Path | None = None) -> None:
    async def whole() -> None:
        async with connected(root, cwd) as client:
            await body(client)

    asyncio.run(whole())


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The demo task run to completion: what the reading tools read."""
    return completed_demo(tmp_path_factory.mktemp("done"))


# -- through the SDK's client -----------------------------------------------------------------


@pytest.mark.e2e
def test_tools_are_listed_with_their_arguments(done: Sample) -> None:
    async def body(client: Client) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        assert listed["list_tasks"].input_schema["properties"] == {}
        for name in TOOLS - {"list_tasks"}:
            assert listed[name].input_schema["required"][0] == "task_id"
        assert listed["approve"].input_schema["required"] == ["task_id", "subtask", "reason"]
        assert listed["reject"].input_schema["required"] == ["task_id", "subtask", "reason"]
        run = listed["run_task"].input_schema["properties"]
        assert run["max_parallel"]["minimum"] == 1 and run["max_parallel"]["maximum"] == 1024
        assert run["no_human"]["type"] == "boolean"
        assert listed["status"].annotations is not None
        assert listed["status"].annotations.read_only_hint is True
        assert listed["run_task"].annotations is not None
        assert listed["run_task"].annotations.read_only_hint is False

    talk(done.root, body)


@pytest.mark.e2e
def test_reading_tools_answer_what_their_commands_print(done: Sample) -> None:
    async def body(client: Client) -> None:
        tasks = await client.call_tool("list_tasks", {})
        assert tasks.structured_content == {"tasks": ["demo"]}
        status = await client.call_tool("status", {"task_id": "demo"})
        assert not status.is_error
        assert status.structured_content is not None
        assert status.structured_content["complete"] is True
        assert [r["status"] for r in status.structured_content["subtasks"]] == ["done"] * 3
        plan = await client.call_tool("show_plan", {"task_id": "demo"})
        assert plan.structured_content is not None
        assert [s["id"] for s in plan.structured_content["subtasks"]] == ["T1", "T2", "T3"]
        valid = await client.call_tool("validate", {"task_id": "demo"})
        assert valid.structured_content == {
            "order": ["T1", "T2", "T3"],
            "problems": [],
            "task_id": "demo",
            "valid": True,
        }
        audit = await client.call_tool("audit", {"task_id": "demo"})
        assert audit.structured_content is not None
        assert audit.structured_content["ok"] is True
        assert audit.structured_content["findings"] == []
        log = await client.call_tool("log", {"task_id": "demo", "subtask": "T3"})
        assert log.structured_content is not None
        events = log.structured_content["events"]
        assert events and {e["step"] for e in events} == {"T3"}
        assert events == [e for e in done.events() if e.get("step") == "T3"]
        only = await client.call_tool("log", {"task_id": "demo", "event": "task_completed"})
        assert only.structured_content is not None
        assert [e["event"] for e in only.structured_content["events"]] == ["task_completed"]

    before = done.git("status", "--porcelain", "--untracked-files=all")
    talk(done.root, body)
    assert done.git("status", "--porcelain", "--untracked-files=all") == before


@pytest.mark.e2e
@pytest.mark.parametrize("shadowing", [True, False], ids=["shadowing", "the-projects-own"])
def test_a_tool_runs_harness_own_code_whatever_the_repository_holds(
    tmp_path: Path, shadowing: bool
) -> None:
    s = completed_demo(tmp_path)
    ran = tmp_path / "the repository's harness ran"
    package = s.root / "harness"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("WHOSE = 'the project'\n")
    if shadowing:
        # What a pull request could commit: run on the host, outside any sandbox, by every tool.
        (package / "cli" / "__init__.py").write_text("")
        (package / "cli" / "__main__.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    s.commit_all("the repository's own harness package")

    async def body(client: Client) -> None:
        status = await client.call_tool("status", {"task_id": "demo"})
        assert not status.is_error, text(status)
        assert status.structured_content is not None
        assert status.structured_content["complete"] is True

    talk(s.root, body, cwd=s.root)
    assert not ran.exists()


@pytest.mark.e2e
def test_reading_refusals_carry_the_commands_error_and_exit_meaning(done: Sample) -> None:
    async def body(client: Client) -> None:
        unknown = await client.call_tool("status", {"task_id": "nosuch"})
        assert unknown.is_error
        assert "ai/tasks/nosuch/plan.json: file not found (exit 2: bad input)" in text(unknown)
        dash = await client.call_tool("audit", {"task_id": "-h"})
        assert dash.is_error and "an id never starts with '-' (exit 2: bad input)" in text(dash)
        bad = await client.call_tool("log", {"task_id": "demo", "event": "--json"})
        assert bad.is_error and "invalid choice: '--json'" in text(bad)
        assert "(exit 2: bad input)" in text(bad)
        loose = await client.call_tool("show_plan", {"task_id": "demo/../demo"})
        assert loose.is_error and "task id 'demo/../demo'" in text(loose)

    talk(done.root, body)


@pytest.mark.e2e
def test_next_on_a_fresh_plan_runs_one_subtask_with_progress(tmp_path: Path) -> None:
    fresh = scripted(tmp_path)
    fresh.write_script([ok("T1", ("src/calc.py", calc_patch("A = 1"))), T2_OK])
    fresh.write_plan([subtask("T1"), T2])
    fresh.write_plan([subtask("X1", agent="nobody")], task="broken")
    base = fresh.head()
    seen: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async def body(client: Client) -> None:
        tasks = await client.call_tool("list_tasks", {})
        assert tasks.structured_content == {"tasks": ["broken", "demo"]}
        broken = await client.call_tool("validate", {"task_id": "broken"})
        assert broken.is_error and "(exit 1: problems found)" in text(broken)
        assert '"valid": false' in text(broken) and "nobody" in text(broken)
        result = await client.call_tool("next_subtask", {"task_id": "demo"}, None, progress)
        assert not result.is_error, text(result)
        assert text(result).startswith("T1\tdone\t")
        status = await client.call_tool("status", {"task_id": "demo"})
        assert status.structured_content is not None
        rows = status.structured_content["subtasks"]
        assert [r["status"] for r in rows] == ["done", "pending"]

    talk(fresh.root, body)
    assert "T1: scripted working as localized-impl" in seen
    assert any(line.startswith("T1: call ok") for line in seen)
    assert any(line.startswith("T1: commit ok") for line in seen)
    assert "A = 1" in (fresh.root / "src" / "calc.py").read_text()
    assert fresh.head() != base


@pytest.mark.e2e
def test_stdout_is_the_json_rpc_stream_alone_and_the_commit_is_the_demos(tmp_path: Path) -> None:
    """Without the SDK: newline-delimited JSON-RPC by hand. Every line the server writes is
    a JSON-RPC message while a step runs (its progress lines included); the commit it makes
    is the one `harness demo` makes for T1, as a step run from the command line would."""
    root = tmp_path / "repo"
    root.mkdir()
    demo.build(root)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "by-hand", "version": "1"}
    call = {"name": "next_subtask", "arguments": {"task_id": "demo"}}
    call["_meta"] = {"progressToken": "p1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "mcp", "--repo", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HARNESS_CLOCK": CLOCK},
    )
    assert server.stdin is not None and server.stdout is not None

    def send(doc: dict[str, Any]) -> None:
        assert server.stdin is not None
        server.stdin.write(orjson.dumps({"jsonrpc": "2.0", **doc}) + b"\n")
        server.stdin.flush()

    try:
        send({"id": 1, "method": "initialize", "params": hello})
        lines = [server.stdout.readline()]
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": call})
        while not lines[-1].startswith(b'{"jsonrpc":"2.0","id":2,'):
            lines.append(server.stdout.readline())
            assert lines[-1], "the server closed its stdout"
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        server.stdout.close()
        assert server.stderr is not None
        server.stderr.close()
    docs = [orjson.loads(line) for line in lines]
    assert all(doc["jsonrpc"] == "2.0" for doc in docs)
    progress = [d["params"]["message"] for d in docs if d.get("method") == "notifications/progress"]
    assert progress[0] == "T1: scripted working as localized-impl"
    assert progress[-1].startswith("T1: commit ok")
    made = docs[-1]["result"]["content"][0]["text"]
    assert made.startswith("T1\tdone\teff0c30a20cf\t")  # T1's commit in `harness demo`


@pytest.mark.e2e
def test_a_cancelled_run_stops_its_command_and_a_busy_task_is_refused(tmp_path: Path) -> None:
    slow = scripted(tmp_path)
    slow.write_plan([subtask("T1")])
    slow.write_script([{**ok("T1", ("src/calc.py", calc_patch())), "sleep_s": 120}])

    async def body(client: Client) -> None:
        working = anyio.Event()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            if message is not None and "working as" in message:
                working.set()

        async with anyio.create_task_group() as calls:

            async def calling() -> None:
                await client.call_tool("next_subtask", {"task_id": "demo"}, None, progress)

            calls.start_soon(calling)
            await working.wait()
            # Meanwhile the task is busy: a second run is refused, as the command refuses it.
            busy = await client.call_tool("next_subtask", {"task_id": "demo"})
            assert busy.is_error and "(exit 3: busy: another harness holds" in text(busy)
            calls.cancel_scope.cancel()
        # The command was stopped, not left running: its lock is free at once.
        with anyio.fail_after(60):
            while True:
                status = await client.call_tool("status", {"task_id": "demo"})
                if "(exit 3: busy" not in text(status):
                    break
                await anyio.sleep(0.2)

    talk(slow.root, body)
    # Stopped where a kill would stop it: the call invoked, no outcome, nothing committed.
    assert slow.names() == ["task_started", "subagent_invoked"]


@pytest.mark.e2e
def test_a_supervised_subtask_halts_and_takes_a_verdict_only_with_a_reason(
    tmp_path: Path,
) -> None:
    s = scripted(tmp_path)
    s.git("config", "user.name", "Ada Reviewer")
    s.git("config", "user.email", "ada@example.org")
    s.write_plan([subtask("T1", supervised="human"), T2])
    s.write_script([ok("T1", ("src/calc.py", calc_patch("A = 1"))), T2_OK])

    async def body(client: Client) -> None:
        halted = await client.call_tool("run_task", {"task_id": "demo"})
        assert halted.is_error
        assert "T1 awaits approval" in text(halted)
        assert "(exit 1: halted or blocked)" in text(halted)
        status = await client.call_tool("status", {"task_id": "demo"})
        assert status.is_error and "(exit 1: halted or blocked)" in text(status)
        assert '"awaiting approval"' in text(status)
        refused = await client.call_tool("run_task", {"task_id": "demo", "no_human": True})
        assert refused.is_error and "(exit 1: halted or blocked)" in text(refused)
        bare = await client.call_tool("approve", {"task_id": "demo", "subtask": "T1"})
        assert bare.is_error and "reason" in text(bare)
        bare = await client.call_tool("reject", {"task_id": "demo", "subtask": "T1"})
        assert bare.is_error and "reason" in text(bare)
        blank = {"task_id": "demo", "subtask": "T1", "reason": " "}
        empty = await client.call_tool("approve", blank)
        assert empty.is_error and "--reason: say why (exit 2: bad input)" in text(empty)
        dash = {"task_id": "demo", "subtask": "-T1", "reason": "fine"}
        dashed = await client.call_tool("approve", dash)
        assert dashed.is_error and "(exit 2: bad input)" in text(dashed)
        huge = {"task_id": "demo", "subtask": "T1", "reason": "why " * 50_000}
        too_long = await client.call_tool("approve", huge)
        assert too_long.is_error and "too long to pass (exit 2: bad input)" in text(too_long)
        other = {"task_id": "demo", "subtask": "T9", "reason": "fine"}
        unknown = await client.call_tool("approve", other)
        assert unknown.is_error and "task demo has no subtask T9 (exit 2" in text(unknown)
        # A reason that looks like an option is a reason still.
        said = {"task_id": "demo", "subtask": "T1", "reason": "--wait looks right"}
        approved = await client.call_tool("approve", said)
        assert not approved.is_error, text(approved)
        assert "T1 approved by Ada Reviewer <ada@example.org>" in text(approved)
        again = await client.call_tool("reject", {**said, "reason": "late"})
        assert again.is_error and "awaits no approval" in text(again)
        finished = await client.call_tool("run_task", {"task_id": "demo", "max_parallel": 2})
        assert not finished.is_error, text(finished)
        assert "task demo complete" in text(finished)

    talk(s.root, body)
    verdict = [e for e in s.events() if e["event"] == "step_approved"]
    assert [e["details"]["reason"] for e in verdict] == ["--wait looks right"]
    assert s.cli("audit", "demo").returncode == 0
    # The audit's twin: a log line added by hand is a finding.
    with (s.root / "ai" / "tasks" / "demo" / "progress.ndjson").open("a") as log:
        log.write("{}\n")

    async def audited(client: Client) -> None:
        found = await client.call_tool("audit", {"task_id": "demo"})
        assert found.is_error and "(exit 1: findings)" in text(found)
        report = orjson.loads(text(found).split("\n", 1)[1])  # what `audit --json` printed
        assert report["ok"] is False and report["findings"]

    talk(s.root, audited)


@pytest.mark.e2e
def test_a_wrong_repository_is_refused_before_serving(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "harness.cli", "mcp", "--repo", str(tmp_path)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"harness: {tmp_path}: not inside a git repository (use --repo DIR)\n"


@pytest.mark.e2e
def test_a_committed_symlink_for_the_tasks_folder_is_refused(done: Sample, tmp_path: Path) -> None:
    s = scripted(tmp_path)
    (s.root / "ai" / "tasks").rename(s.root / "ai" / "elsewhere")
    (s.root / "ai" / "tasks").symlink_to(done.root / "ai" / "tasks")

    async def body(client: Client) -> None:
        listed = await client.call_tool("list_tasks", {})
        assert listed.is_error and "plain folders" in text(listed)

    talk(s.root, body)


# -- in process -------------------------------------------------------------------------------


def test_argv_puts_every_value_where_no_option_is_read() -> None:
    got = mcpserver.argv(Path("/r"), ["approve"], ["--reason=-x"], ["demo", "T1"])
    assert got == [
        sys.executable,
        "-P",
        "-m",
        "harness.cli",
        "approve",
        "--repo",
        "/r",
        "--reason=-x",
        "--",
        "demo",
        "T1",
    ]
    for bad in ("-h", "--repo", "-"):
        with pytest.raises(ToolError, match="never starts with '-'"):
            mcpserver.argv(Path("/r"), ["status"], [], [bad])
    with pytest.raises(ToolError, match="NUL character"):
        mcpserver.argv(Path("/r"), ["approve"], ["--reason=a\0b"], ["demo", "T1"])
    with pytest.raises(ToolError, match="NUL character"):
        mcpserver.argv(Path("/r"), ["status"], [], ["de\0mo"])


def test_a_failure_says_the_last_error_line_the_exit_and_what_was_printed() -> None:
    done = mcpserver.Done(2, "", ["T1: call ok 0.1s", "harness: boom", ""])
    assert str(mcpserver.failure(done, ["next"])) == "harness: boom (exit 2: bad input)"
    halted = mcpserver.Done(1, '{"a": 1}\n', [])
    assert str(mcpserver.failure(halted, ["status"])) == '(exit 1: halted or blocked)\n{"a": 1}'
    assert str(mcpserver.failure(halted, ["audit"])) == '(exit 1: findings)\n{"a": 1}'
    found = str(mcpserver.failure(halted, ["plan", "validate"]))
    assert found.startswith("(exit 1: problems found)")
    busy = mcpserver.Done(3, "", ["harness: held"])
    assert "(exit 3: busy" in str(mcpserver.failure(busy, ["run"]))
    assert "(exit 9: failed)" in str(mcpserver.failure(mcpserver.Done(9, "", []), ["run"]))


def test_tasks_lists_task_folders_with_a_plan(tmp_path: Path) -> None:
    root = tmp_path
    for name, plan in (("a", True), ("b", False), ("-x", True), ("c d", True)):
        (root / "ai" / "tasks" / name).mkdir(parents=True)
        if plan:
            (root / "ai" / "tasks" / name / "plan.json").write_text("{}")
    (root / "ai" / "tasks" / "e").symlink_to(root / "ai" / "tasks" / "a")
    (root / "ai" / "tasks" / "f").mkdir()
    (root / "ai" / "tasks" / "f" / "plan.json").symlink_to(
        root / "ai" / "tasks" / "a" / "plan.json"
    )
    assert mcpserver.tasks(root) == ["a"]
    (tmp_path / "bare").mkdir()
    assert mcpserver.tasks(tmp_path / "bare") == []
