"""tests/modelapi.py against plain HTTP, and the real agent CLIs run bare against it.

Bare means no harness: each CLI runs in a throw-away HOME (and TMPDIR) under the test's
tmp_path, in a git-free folder holding `src/calc.py`, pointed at the scripted server:

- claude  `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, `CLAUDE_CODE_MAX_RETRIES=0`;
          `claude -p --output-format json --json-schema S --permission-mode acceptEdits
          --allowedTools Read,Edit`, prompt on stdin.
- codex   `$CODEX_HOME/config.toml` with a `local` provider (`request_max_retries = 0`,
          `stream_max_retries = 0`, `stream_idle_timeout_ms`); `codex exec --json
          --skip-git-repo-check -s workspace-write -c features.shell_tool=false -C DIR
          --output-schema FILE -`. CODEX_HOME may sit under /tmp only if TMPDIR points
          elsewhere: codex refuses "helper binaries under temporary dir" (a warning), and then
          its sandbox cannot write — the edit's `file_change` item ends `failed`, exit 0.
          Here TMPDIR is tmp_path/tmp and CODEX_HOME tmp_path/codex-home, and the edit lands.
- gemini  `GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY`, `~/.gemini/settings.json`
          `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "general":
          {"maxAttempts": 1}}`; `gemini -p NUDGE --skip-trust --output-format json
          --approval-mode auto_edit`, prompt on stdin. `general.maxAttempts` (1..10, default
          10; 10 tries on 500s took 4.5 min) is gemini's only retry knob; it caps the main
          chat's tries (its router side call, without the setting, tried 5 times on 500s).

Observed (claude-code 2.1.332, codex 0.169.0, gemini-cli 0.61.0; as root, bare; retry knobs
at 0 / maxAttempts 1). "Line" is claude's result `result` (stdout is its one JSON object, with
`is_error: true`, `subtype: "success"`, `terminal_reason: "api_error"`, usage 0), codex's
`turn.failed` `error.message` (stdout JSONL; the same text also as an `error` event), gemini's
error object printed last on stderr as pretty JSON `{session_id, error: {type, message, code}}`
after a stack trace (stdout empty). test_failure pins every row that ends by itself.

| cli    | case | exit | line                                                                 |
|--------|------|------|----------------------------------------------------------------------|
| claude | 429  | 1    | "API Error: Request rejected (429) · <message>"; api_error_status 429,|
|        |      |      | api_error_type "rate_limit_error"                                    |
| claude | 500  | 1    | "API Error: 500 <message>. This is a server-side issue, usually      |
|        |      |      | temporary — try again in a moment. If it persists, check your        |
|        |      |      | inference gateway (127.0.0.1:PORT)."; api_error_status 500           |
| claude | 401  | 1    | "Failed to authenticate. API Error: 401 <message>"; api_error_status |
|        |      |      | 401, api_error_type "authentication_error"                           |
| claude | cut  | 1    | "API Error: Connection to the API was lost (ECONNRESET). This is     |
|        |      |      | usually temporary — try again."; api_error "connection_failed".      |
|        |      |      | Two requests even at MAX_RETRIES=0: the stream, then the same turn   |
|        |      |      | NOT streamed (max_tokens 64000); a good step there and the run goes  |
|        |      |      | on (CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1: one request)        |
| claude | hang | -    | waits for headers API_TIMEOUT_MS (it sends x-stainless-timeout: 600, |
|        |      |      | not waited out); with API_TIMEOUT_MS=2000, after 2 s:                |
|        |      | 1    | "Request timed out. If the API is slow to answer, or a proxy or      |
|        |      |      | gateway holds responses, set API_TIMEOUT_MS above 2000."             |
|        |      |      | After headers API_TIMEOUT_MS no longer counts (killed at 60 s);      |
|        |      |      | CLAUDE_BYTE_STREAM_IDLE_TIMEOUT_MS=10000 (its minimum; 180 s default |
|        |      |      | per its code) ends the wait, then the non-streamed retry as for a cut|
| codex  | 429  | 1    | "exceeded retry limit, last status: 429 Too Many Requests"           |
| codex  | 500  | 1    | "We<U+2019>re currently experiencing high demand, which may cause    |
|        |      |      | temporary errors." (no status number anywhere)                       |
| codex  | 401  | 1    | "unexpected status 401 Unauthorized: <message>, url: <base>/responses"|
| codex  | cut  | 1    | "stream disconnected before completion: Transport error: network     |
|        |      |      | error: error decoding response body"                                 |
| codex  | hang | -    | before headers: nothing after `turn.started`, still so after 420 s   |
|        |      | 1    | after headers: "stream disconnected before completion: idle timeout  |
|        |      |      | waiting for SSE" once stream_idle_timeout_ms passes                  |
| gemini | 429  | 173  | "<message>", code 429 (stderr: "Attempt 1 failed: <message>. Max     |
|        |      |      | attempts reached", RetryableQuotaError)                              |
| gemini | 500  | 244  | the whole JSON error body as message, code 500                       |
| gemini | 401  | 145  | the whole JSON error body as message, code 401                       |
| gemini | cut  | 1    | "terminated", code 1 (stderr: TypeError: terminated; cause           |
|        |      |      | SocketError: other side closed)                                      |
| gemini | hang | 1    | before headers: after undici's fixed 60 s headers timeout, "exception|
|        |      |      | TypeError: fetch failed sending request", code 1; after headers:     |
|        |      |      | after its fixed 300 s body timeout, "terminated", code 1             |
|        |      |      | (UND_ERR_BODY_TIMEOUT)                                               |

Every failure above makes exactly one main request, except claude's cut and its post-header
hang (the non-streamed retry). Gemini has no setting for its request timeouts (only a
server-side experiment flag sets them); `general.maxAttempts` is its only retry knob.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.modelapi import (
    MAIN_USAGE,
    SIDE_USAGE,
    ModelAPI,
    Step,
    answer,
    call,
    cut,
    edit,
    error,
    hang,
)

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "tests" / "clis" / "node_modules" / ".bin"
CLIS = ("claude", "codex", "gemini")

SCHEMA = {
    "type": "object",
    "properties": {"notes": {"type": "array", "items": {"type": "string"}}},
    "required": ["notes"],
    "additionalProperties": False,
}
ANSWER = {"notes": ["done"]}
PROMPT = "Change f in src/calc.py to return 2, then give the final answer.\n"
CALC = "def f():\n    return 1\n"


# -- running a CLI bare ------------------------------------------------------------------------


@dataclass
class Ran:
    code: int | None  # None: still running at the timeout, killed
    stdout: str
    stderr: str
    seconds: float


class Bare:
    """A folder with src/calc.py and a throw-away HOME/TMPDIR, for one CLI run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.home = root / "home"
        self.tmp = root / "tmp"  # gemini writes error reports to os.tmpdir(); keep them here
        for d in (self.work / "src", self.home, self.tmp):
            d.mkdir(parents=True)
        self.calc = self.work / "src" / "calc.py"
        self.calc.write_text(CALC)

    def run(
        self,
        cli: str,
        api: ModelAPI,
        *,
        timeout: float = 60,
        env: dict[str, str] | None = None,
        idle_ms: int = 10000,
        hold: float | None = None,
    ) -> Ran:
        """Run `cli` against `api`; with `hold`, kill it that many seconds after its first
        main request (for hangs: long enough to show it waits, no longer)."""
        base = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "LANG": "C.UTF-8",
        }
        argv, extra = getattr(self, f"_{cli}")(api, idle_ms)
        return _run(argv, {**base, **extra, **(env or {})}, self.work, timeout, api, hold)

    def _claude(self, api: ModelAPI, idle_ms: int) -> tuple[list[str], dict[str, str]]:
        argv = [
            str(BIN / "claude"),
            "-p",
            "--output-format",
            "json",
            "--json-schema",
            json.dumps(SCHEMA),
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Read,Edit",
        ]
        env = {
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "sk-ant-modelapi",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        return argv, env

    def _codex(self, api: ModelAPI, idle_ms: int) -> tuple[list[str], dict[str, str]]:
        home = self.root / "codex-home"  # not under TMPDIR, or codex's sandbox breaks
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text(
            'model_provider = "local"\n'
            "[model_providers.local]\n"
            'name = "local"\n'
            f'base_url = "{api.url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "CODEX_API_KEY"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
            f"stream_idle_timeout_ms = {idle_ms}\n"
        )
        schema = self.root / "schema.json"
        schema.write_text(json.dumps(SCHEMA))
        argv = [
            str(BIN / "codex"),
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "-c",
            "features.shell_tool=false",
            "-C",
            str(self.work),
            "--output-schema",
            str(schema),
            "-",
        ]
        return argv, {"CODEX_HOME": str(home), "CODEX_API_KEY": "sk-modelapi"}

    def _gemini(self, api: ModelAPI, idle_ms: int) -> tuple[list[str], dict[str, str]]:
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"maxAttempts": 1},
        }
        (self.home / ".gemini").mkdir(exist_ok=True)
        (self.home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        argv = [
            str(BIN / "gemini"),
            "-p",
            "Carry out the task above.",
            "--skip-trust",
            "--output-format",
            "json",
            "--approval-mode",
            "auto_edit",
        ]
        return argv, {"GOOGLE_GEMINI_BASE_URL": api.url, "GEMINI_API_KEY": "modelapi"}


def _run(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    api: ModelAPI,
    hold: float | None,
) -> Ran:
    """Run to the end or to the timeout; a timeout kills the whole process group, since the
    node launchers start native children (codex) that a plain kill would leave running."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    killed = threading.Event()
    if hold is not None:
        threading.Thread(target=_kill_after, args=(proc, api, hold, killed), daemon=True).start()
    try:
        out, err = proc.communicate(PROMPT, timeout=timeout)
        code: int | None = None if killed.is_set() else proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return Ran(code, out, err, time.monotonic() - start)


def _kill_after(
    proc: subprocess.Popen[str], api: ModelAPI, hold: float, killed: threading.Event
) -> None:
    """Kill the process group `hold` seconds after the CLI's first main request."""
    while not api.main_requests() and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(hold)
    if proc.poll() is None:
        killed.set()
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def bare(tmp_path: Path) -> Bare:
    missing = [c for c in CLIS if not (BIN / c).exists()]
    if shutil.which("node") is None:
        missing.append("node")
    if missing:
        why = f"agent CLIs not installed ({', '.join(missing)}); see tests/clis/package.json"
        if os.environ.get("HARNESS_REQUIRE_CLIS") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return Bare(tmp_path)


# -- reading what each CLI printed -------------------------------------------------------------


def claude_result(ran: Ran) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ran.stdout)
    assert doc["type"] == "result", ran.stdout
    return doc


def codex_events(ran: Ran) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]


def gemini_error(ran: Ran) -> dict[str, Any]:
    """The `{session_id, error}` object gemini pretty-prints last on stderr when it fails."""
    at = ran.stderr.rfind("\n{\n")
    assert at >= 0, ran.stderr[-2000:]
    err: dict[str, Any] = json.loads(ran.stderr[at:])["error"]
    return err


def failure_line(cli: str, ran: Ran) -> str:
    """The one line each CLI gives for a failed run."""
    if cli == "claude":
        doc = claude_result(ran)
        assert doc["is_error"] is True
        return str(doc["result"])
    if cli == "codex":
        failed = [e for e in codex_events(ran) if e["type"] == "turn.failed"]
        assert failed, ran.stdout
        return str(failed[-1]["error"]["message"])
    assert ran.stdout == ""
    err = gemini_error(ran)
    return f"{err['message']} (code {err['code']})"


# -- the real CLIs: an edit and an answer ------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("cli", CLIS)
def test_edit_then_answer(bare: Bare, cli: str) -> None:
    script: list[Step] = [edit("src/calc.py", "return 1", "return 2"), answer(ANSWER)]
    with ModelAPI(script) as api:
        ran = bare.run(cli, api)
    assert ran.code == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert bare.calc.read_text() == "def f():\n    return 2\n"
    assert api.remaining() == []
    assert api.problems == []
    mains = api.main_requests()
    served = len(mains) * MAIN_USAGE[0], len(mains) * MAIN_USAGE[1]
    side = [r for r in api.requests if r not in mains]
    offered = api.tools_offered()

    if cli == "claude":
        # Read, Edit, StructuredOutput: three turns, and the run ends at StructuredOutput.
        assert len(mains) == 3 and side == []
        doc = claude_result(ran)
        assert doc["is_error"] is False and doc["subtype"] == "success"
        assert doc["structured_output"] == ANSWER
        assert (doc["usage"]["input_tokens"], doc["usage"]["output_tokens"]) == served
        assert {"Read", "Edit", "StructuredOutput"} <= set(offered)
    elif cli == "codex":
        # One `exec` running apply_patch, then the message; no side calls at all.
        assert len(mains) == 2 and side == []
        events = codex_events(ran)
        changes = [e["item"] for e in events if e["type"] == "item.completed"]
        assert [c["status"] for c in changes if c["type"] == "file_change"] == ["completed"]
        said = [c["text"] for c in changes if c["type"] == "agent_message"]
        assert [json.loads(t) for t in said] == [ANSWER]
        usage = next(e["usage"] for e in events if e["type"] == "turn.completed")
        assert (usage["input_tokens"], usage["output_tokens"]) == served
        assert {"exec", "tools.apply_patch"} <= set(offered)
        assert "tools.exec_command" not in offered  # features.shell_tool=false took it away
    else:
        # The router's generateContent is a side call; the replace and the answer are main.
        assert len(mains) == 2
        assert [r["path"].split(":")[-1] for r in side] == ["generateContent"]
        doc = json.loads(ran.stdout)
        text = doc["response"]
        assert json.loads(text[text.index("{") : text.rindex("}") + 1]) == ANSWER
        main_model = mains[0]["path"].split("/")[-1].split(":")[0]
        side_model = side[0]["path"].split("/")[-1].split(":")[0]
        tokens = {m: v["tokens"] for m, v in doc["stats"]["models"].items()}
        assert (tokens[main_model]["prompt"], tokens[main_model]["candidates"]) == served
        assert (tokens[side_model]["prompt"], tokens[side_model]["candidates"]) == SIDE_USAGE
        assert {"replace", "read_file"} <= set(offered)


# -- the real CLIs: failures, as the table in the docstring says --------------------------------

# (cli, case) -> (exit code, pattern the failure line matches); hang cases are run with the
# CLI's own timeout knob where it has one.
FAILURES: dict[tuple[str, str], tuple[int, str]] = {
    ("claude", "429"): (1, r"^API Error: Request rejected \(429\) · modelapi: scripted error 429"),
    ("claude", "500"): (1, r"^API Error: 500 modelapi: scripted error 500\. This is a server"),
    ("claude", "401"): (1, r"^Failed to authenticate\. API Error: 401 modelapi"),
    ("claude", "cut"): (1, r"^API Error: Connection to the API was lost \(ECONNRESET\)"),
    ("claude", "hang"): (1, r"^Request timed out\. .*set API_TIMEOUT_MS above 2000"),
    ("codex", "429"): (1, r"^exceeded retry limit, last status: 429 Too Many Requests$"),
    ("codex", "500"): (1, r"^We\u2019re currently experiencing high demand"),
    ("codex", "401"): (1, r"^unexpected status 401 Unauthorized: modelapi: scripted error 401"),
    ("codex", "cut"): (1, r"^stream disconnected before completion: Transport error"),
    ("codex", "hang"): (1, r"^stream disconnected before completion: idle timeout waiting"),
    ("gemini", "429"): (173, r"^modelapi: scripted error 429 \(code 429\)$"),
    ("gemini", "500"): (244, r'"code":500,"message":"modelapi: scripted error 500".*\(code 500\)$'),
    ("gemini", "401"): (145, r'"code":401,"message":"modelapi: scripted error 401".*\(code 401\)$'),
    ("gemini", "cut"): (1, r"^terminated \(code 1\)$"),
}
CASES: dict[str, list[Step]] = {
    "429": [error(429, retry_after=1, times="always")],
    "500": [error(500, times="always")],
    "401": [error(401, times="always")],
    "cut": [cut(), cut()],
}
# Each CLI's timeout covers a different wait: claude's API_TIMEOUT_MS the wait for headers,
# codex's stream_idle_timeout_ms only the wait after them.
HANGS: dict[str, list[Step]] = {"claude": [hang()], "codex": [hang(headers=True)]}


@pytest.mark.e2e
@pytest.mark.parametrize(("cli", "case"), sorted(FAILURES))
def test_failure(bare: Bare, cli: str, case: str) -> None:
    env = {"API_TIMEOUT_MS": "2000"} if cli == "claude" else {}
    with ModelAPI(HANGS[cli] if case == "hang" else CASES[case]) as api:
        ran = bare.run(cli, api, timeout=45, env=env, idle_ms=2000)
    code, pattern = FAILURES[cli, case]
    line = failure_line(cli, ran)
    assert (ran.code, re.search(pattern, line) is not None) == (code, True), line
    assert bare.calc.read_text() == CALC
    assert ran.seconds < 30  # quick: no retries, no backoff
    retried = cli == "claude" and case == "cut"  # it retries once without streaming
    assert len(api.main_requests()) == (2 if retried else 1)
    if retried:
        assert [r["body"]["stream"] for r in api.main_requests()] == [True, False]


@pytest.mark.e2e
def test_claude_survives_one_cut(bare: Bare) -> None:
    """Claude's non-streamed retry after a cut is an ordinary request: the script goes on."""
    script: list[Step] = [cut(), edit("src/calc.py", "return 1", "return 2"), answer(ANSWER)]
    with ModelAPI(script) as api:
        ran = bare.run("claude", api)
    assert ran.code == 0 and claude_result(ran)["structured_output"] == ANSWER
    assert bare.calc.read_text() == "def f():\n    return 2\n"
    assert api.remaining() == []


@pytest.mark.e2e
@pytest.mark.parametrize("cli", CLIS)
def test_hang_without_a_timeout_knob(bare: Bare, cli: str) -> None:
    """A request never answered: no CLI gives up on its own within seconds. The server
    still stops at once with the connection open."""
    with ModelAPI([hang()]) as api:
        ran = bare.run(cli, api, timeout=30, hold=3)
        assert len(api.main_requests()) == 1
    assert ran.code is None  # killed at the timeout
    if cli == "codex":
        assert [e["type"] for e in codex_events(ran)] == ["thread.started", "turn.started"]
    else:
        assert ran.stdout == ""


# -- the server alone, over plain HTTP ---------------------------------------------------------


def post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers, e.read()


def sse(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in data.decode().splitlines() if line.startswith("data:")]


CLAUDE_BODY = {
    "model": "claude-test",
    "system": [{"type": "text", "text": "x"}],
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "system",
            "content": [{"type": "text", "text": " - Primary working directory: /w"}],
        },
    ],
    "tools": [{"name": "Read"}, {"name": "Edit"}, {"name": "StructuredOutput"}],
}
CODEX_BODY = {
    "model": "gpt-test",
    "stream": True,
    "input": [
        {
            "type": "additional_tools",
            "tools": [
                {
                    "type": "namespace",
                    "name": "functions",
                    "tools": [
                        {
                            "type": "custom",
                            "name": "exec",
                            "description": "declare const tools: { apply_patch(input: string)",
                        },
                        {"type": "function", "name": "wait"},
                    ],
                },
                {"type": "namespace", "name": "collaboration", "tools": [{"name": "spawn_agent"}]},
            ],
        },
        {"type": "message", "role": "user", "content": [{"text": "<cwd>/w</cwd>"}]},
    ],
}
GEMINI_BODY = {
    "contents": [{"role": "user", "parts": [{"text": "- **Workspace Directories:**\n  - /w\n"}]}],
    "tools": [{"functionDeclarations": [{"name": "replace"}, {"name": "read_file"}]}],
}


def test_anthropic_shape() -> None:
    script: list[Step] = [
        edit("src/a.py", "1", "2"),
        answer({"ok": True}),
        error(429, retry_after=3),
    ]
    with ModelAPI(script) as api:
        url = api.url + "/v1/messages?beta=true"
        # A tool-less request (a title, a quota check) is a side call: no step spent.
        status, _, data = post(url, {"model": "m", "messages": [], "max_tokens": 1})
        assert status == 200 and json.loads(data)["content"][0]["type"] == "text"
        assert len(api.remaining()) == 3
        status, _, data = post(url, CLAUDE_BODY)
        message = json.loads(data)
        assert message["stop_reason"] == "tool_use"
        assert message["usage"]["input_tokens"] == MAIN_USAGE[0]
        (read,) = message["content"]
        assert (read["name"], read["input"]) == ("Read", {"file_path": "/w/src/a.py"})
        assert len(api.remaining()) == 3  # the Edit is still to come
        status, _, data = post(url, {**CLAUDE_BODY, "stream": True})
        events = sse(data)
        assert [e["type"] for e in events] == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        assert events[1]["content_block"]["name"] == "Edit"
        assert json.loads(events[2]["delta"]["partial_json"]) == {
            "file_path": "/w/src/a.py",
            "old_string": "1",
            "new_string": "2",
            "replace_all": False,
        }
        assert events[4]["usage"]["output_tokens"] == MAIN_USAGE[1]
        status, _, data = post(url, CLAUDE_BODY)
        (out,) = json.loads(data)["content"]
        assert (out["name"], out["input"]) == ("StructuredOutput", {"ok": True})
        # Should claude ask again after taking the answer (2.1.332 does not), it gets a plain
        # closing turn, and no step is spent on it.
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": out["id"]}]}
        _, _, data = post(url, {**CLAUDE_BODY, "messages": [*CLAUDE_BODY["messages"], result]})
        assert json.loads(data)["content"] == [{"type": "text", "text": "Done."}]
        assert len(api.remaining()) == 1
        status, headers, data = post(url, CLAUDE_BODY)
        assert (status, headers["retry-after"]) == (429, "3")
        assert json.loads(data)["error"]["type"] == "rate_limit_error"
        assert json.loads(data)["type"] == "error"
        status, _, data = post(url, CLAUDE_BODY)
        assert status == 500 and "script exhausted" in json.loads(data)["error"]["message"]
        assert api.tools_offered() == ["Edit", "Read", "StructuredOutput"]
        assert len(api.requests) == 7 and len(api.main_requests()) == 6
        assert api.requests[0]["headers"]["content-type"] == "application/json"


def test_openai_shape(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def f():\n    return 1\n")
    body = json.loads(json.dumps(CODEX_BODY).replace("/w", str(tmp_path)))
    script: list[Step] = [
        edit("src/a.py", "return 1", "return 2"),
        call("shell", {"cmd": "ls"}),
        answer([1]),
    ]
    with ModelAPI([*script, error(500, times=2)]) as api:
        with urllib.request.urlopen(api.url + "/v1/models", timeout=5) as resp:
            assert json.loads(resp.read())["object"] == "list"
        req = urllib.request.Request(api.url + "/v1/responses", headers={"upgrade": "websocket"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=5)
        refused.value.close()
        assert refused.value.code == 426  # codex then falls back to HTTP silently
        status, _, data = post(api.url + "/v1/responses", body)
        events = sse(data)
        assert events[0]["type"] == "response.created"
        item = events[-2]["item"]
        assert item["type"] == "custom_tool_call" and item["name"] == "exec"
        # Whole lines, indentation kept: apply_patch replaces lines, not substrings.
        assert json.dumps("-    return 1\n+    return 2\n")[1:-1] in item["input"]
        assert "*** Update File: src/a.py" in item["input"]
        done = events[-1]
        assert done["type"] == "response.completed"
        assert done["response"]["usage"] == {
            "input_tokens": MAIN_USAGE[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": MAIN_USAGE[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(MAIN_USAGE),
        }
        _, _, data = post(api.url + "/v1/responses", {**body, "stream": False})
        (fc,) = json.loads(data)["output"]
        assert (fc["type"], fc["name"], json.loads(fc["arguments"])) == (
            "function_call",
            "shell",
            {"cmd": "ls"},
        )
        _, _, data = post(api.url + "/v1/responses", body)
        events = sse(data)
        assert "".join(e.get("delta", "") for e in events) == "[1]"
        assert events[-2]["item"]["content"][0]["text"] == "[1]"
        for _ in range(2):
            status, _, data = post(api.url + "/v1/responses", body)
            err = json.loads(data)["error"]
            assert (status, err["type"]) == (500, "server_error") and "message" in err
        assert api.remaining() == []
        assert api.tools_offered() == [
            "collaboration.spawn_agent",
            "exec",
            "tools.apply_patch",
            "wait",
        ]


def test_gemini_shape() -> None:
    router = {
        "contents": [{"role": "user", "parts": [{"text": "read it"}]}],
        "generationConfig": {
            "responseJsonSchema": {
                "type": "object",
                "properties": {
                    "complexity_reasoning": {"type": "string"},
                    "complexity_score": {"type": "integer"},
                    "next_speaker": {"type": "string", "enum": ["user", "model"]},
                },
            }
        },
    }
    script: list[Step] = [edit("src/a.py", "1", "2"), answer({"n": 1}), error(429, times="always")]
    with ModelAPI(script) as api:
        base = api.url + "/v1beta/models/"
        _, _, data = post(base + "flash-lite:generateContent", router)
        doc = json.loads(data)
        assert json.loads(doc["candidates"][0]["content"]["parts"][0]["text"]) == {
            "complexity_reasoning": "scripted",
            "complexity_score": 1,
            "next_speaker": "user",
        }
        assert doc["usageMetadata"]["promptTokenCount"] == SIDE_USAGE[0]
        status, _, data = post(base + "pro:streamGenerateContent?alt=sse", GEMINI_BODY)
        (chunk,) = sse(data)
        (part,) = chunk["candidates"][0]["content"]["parts"]
        assert part["functionCall"]["name"] == "replace"
        assert part["functionCall"]["args"]["file_path"] == "/w/src/a.py"
        assert chunk["candidates"][0]["finishReason"] == "STOP"
        assert chunk["usageMetadata"] == {
            "promptTokenCount": MAIN_USAGE[0],
            "candidatesTokenCount": MAIN_USAGE[1],
            "totalTokenCount": sum(MAIN_USAGE),
        }
        _, _, data = post(base + "pro:generateContent", GEMINI_BODY)  # main, not streamed
        text = json.loads(data)["candidates"][0]["content"]["parts"][0]["text"]
        assert text == '```json\n{"n": 1}\n```'
        for _ in range(3):
            status, _, data = post(base + "pro:streamGenerateContent?alt=sse", GEMINI_BODY)
            assert (status, json.loads(data)["error"]["status"]) == (429, "RESOURCE_EXHAUSTED")
        assert len(api.remaining()) == 1  # "always" never runs out
        assert api.tools_offered() == ["read_file", "replace"]


def test_cut_breaks_the_stream_and_the_body() -> None:
    with ModelAPI([cut(), cut(), cut()]) as api:
        host = api.url.removeprefix("http://")
        for path, body in (
            ("/v1/messages", {**CLAUDE_BODY, "stream": True}),
            ("/v1/messages", CLAUDE_BODY),  # claude's non-streamed retry: a truncated body
            ("/v1beta/models/m:streamGenerateContent?alt=sse", GEMINI_BODY),
        ):
            conn = http.client.HTTPConnection(host, timeout=5)
            conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            with pytest.raises(http.client.IncompleteRead):
                resp.read()
            conn.close()
        assert api.remaining() == []


def test_hang_then_stop_promptly() -> None:
    outcome: list[BaseException | int] = []

    def client(url: str) -> None:
        try:
            outcome.append(post(url + "/v1/messages", CLAUDE_BODY)[0])
        except Exception as e:  # the point: the client sees its connection end
            outcome.append(e)

    with ModelAPI([hang(), hang(headers=True)]) as api:
        threads = [threading.Thread(target=client, args=(api.url,)) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 5
        while len(api.main_requests()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(api.main_requests()) == 2
        # An idle keep-alive connection must not hold the stop up either.
        idle = http.client.HTTPConnection(api.url.removeprefix("http://"), timeout=5)
        idle.request("GET", "/v1/models")
        idle.getresponse().read()
    for t in threads:
        t.join(timeout=5)
        assert not t.is_alive()
    assert len(outcome) == 2 and all(isinstance(o, Exception) for o in outcome)
    idle.close()
