"""The fake CLIs of tests/fakes refuse what the real ones refuse, and accept what they accept.

For each CLI a table of argvs: every flag the shims give it, and bogus flags and bad values.
Each argv runs through the real CLI as pinned in tests/clis and through its fake, stdin
empty, and the two verdicts must be the same: accepted, or refused with the same exit code,
the same first line on stderr and nothing on stdout. No argv reaches a model: claude -p and
codex exec with an empty stdin and no prompt stop at "no prompt" once they have taken their
argv (the fakes do the same), and gemini runs without a key, so an argv it takes ends at
"no auth method" (its fake, not checking auth, acts the call out instead); the env also
points each CLI's model API at a closed local port, in case one got further.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIS = ROOT / "tests" / "clis" / "node_modules" / ".bin"
FAKES = ROOT / "tests" / "fakes"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not CLIS.is_dir() and os.environ.get("HARNESS_REQUIRE_CLIS") != "1",
        reason="the agent CLIs are not installed (npm ci --prefix tests/clis)",
    ),
]

ACCEPT = "accepted"
REFUSE = "refused"
# What each real CLI says once it has taken an argv and found no prompt (claude, codex) or
# no way to authenticate (gemini): the argv was accepted.
TAKEN = {
    "claude": (
        1,
        "Error: Input must be provided either through stdin or as a prompt argument when"
        " using --print",
    ),
    "codex": (1, "No prompt provided via stdin."),
    "gemini": (41, "Please set an Auth method in your "),
}
# Lines a CLI prints on its way that are not its verdict: warnings, and gemini's notes about
# the terminal, the machine and its own start-up timing (which differ from run to run).
NOTES = (
    "Warning:",
    "[STARTUP]",
    "Ripgrep is not available",
    "Approval mode overridden",
    "YOLO mode is enabled",
    "Ignore file not found",
)

SCHEMA = json.dumps(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["plan"],
        "properties": {"plan": {"type": "array", "items": {"type": "string"}}},
    }
)
SETTINGS = json.dumps({"sandbox": {"enabled": True, "network": {"allowedDomains": []}}})

# (argv, what the real CLI does with it). {dir} is a scratch directory, {schema} a JSON
# Schema file in it and {out} a file to write there.
CLAUDE: list[tuple[list[str], str]] = [
    # The shim's argv, whole, then flag by flag and in the forms it may take.
    (
        [
            *("-p", "--output-format", "json", "--json-schema", SCHEMA),
            *("--append-system-prompt", "You are the implementer.", "--max-turns", "12"),
            *("--max-budget-usd", "0.5", "--settings", SETTINGS),
            *("--disallowedTools", "Bash(rm:*),Edit(/etc/**)", "--tools", "Read,Edit,Bash"),
            *("--verbose", "--no-session-persistence", "--permission-mode", "acceptEdits"),
            *("--allowedTools", "Read({dir}/**),Bash(ls:*)", "--add-dir", "{dir}"),
        ],
        ACCEPT,
    ),
    (["-p", "--permission-mode", "plan", "--tools", "Read,Grep,Glob"], ACCEPT),
    (["-p", "--tools", "", "--allowed-tools", "Read", "Edit"], ACCEPT),
    (["-p", "--output-format=json", "--max-turns", "1,000"], ACCEPT),
    (["-p", "--permission-mode", "default"], ACCEPT),
    (["-p", "--effort", "extreme"], ACCEPT),  # warned about, not refused
    (["-p", "--output-format", "stream-json", "--verbose"], ACCEPT),
    # Unknown options, with and without a "Did you mean".
    (["-p", "--bogus"], REFUSE),
    (["-p", "--verbos"], REFUSE),
    (["-p", "--permision-mode", "plan"], REFUSE),
    (["-p", "--allowedTool", "Read"], REFUSE),
    (["-p", "--verbose=1"], REFUSE),
    # Values missing or not taken.
    (["-p", "--output-format"], REFUSE),
    (["-p", "--output-format", "yaml"], REFUSE),
    (["-p", "--permission-mode", "readonly"], REFUSE),
    (["-p", "--permission-mode", "Plan"], REFUSE),
    (["-p", "--max-turns", "many"], REFUSE),
    (["-p", "--max-budget-usd", "0"], REFUSE),
    # Checked after parsing, before a prompt is read.
    (["-p", "--json-schema", "notjson"], REFUSE),
    (["-p", "--json-schema", '{"type":'], REFUSE),
    (["-p", "--json-schema", "[1]"], REFUSE),
    (["-p", "--settings", "{dir}/missing.json"], REFUSE),
    (["-p", "--settings", "{bad json}"], REFUSE),
    (["-p", "--session-id", "not-a-uuid"], REFUSE),
    (["-p", "--include-partial-messages"], REFUSE),
    (["-p", "--version"], ACCEPT),  # prints the version: exit 0, no stderr
]
CODEX: list[tuple[list[str], str]] = [
    # The shim's argv, whole (with a gateway's provider), then its parts.
    (
        [
            *("exec", "-c", "features.shell_tool=false", "-c", 'model_provider="harness"'),
            *("-c", 'model_providers.harness.name="harness"'),
            *("-c", 'model_providers.harness.base_url="http://127.0.0.1:9/v1"'),
            *("-c", 'model_providers.harness.wire_api="responses"'),
            *("-c", 'model_providers.harness.env_key="CODEX_API_KEY"'),
            *("-c", "model_providers.harness.request_max_retries=1"),
            *("-c", "model_providers.harness.stream_max_retries=1"),
            *("-c", "model_providers.harness.stream_idle_timeout_ms=600000"),
            *("-c", 'web_search="disabled"', "-c", "features.multi_agent=false"),
            *("-c", "features.apps=false", "--json", "--skip-git-repo-check", "--ephemeral"),
            *("-s", "workspace-write", "-C", "{dir}", "--output-schema", "{schema}"),
            *("-o", "{out}", "-"),
        ],
        ACCEPT,
    ),
    (["exec", "--json", "-s", "read-only", "-C", "{dir}", "-"], ACCEPT),
    (["exec", "--sandbox=read-only", "-o{out}", "-"], ACCEPT),
    (["exec", "-c", "web_search=disabled", "-c", "features.not_a_feature=false", "-"], ACCEPT),
    (["exec", "--experimental-json", "--yolo", "-"], ACCEPT),
    (["-c", "features.shell_tool=false", "exec", "-"], ACCEPT),
    (["e", "-"], ACCEPT),
    # Unknown arguments, with clap's tips.
    (["exec", "--bogus", "-"], REFUSE),
    (["exec", "-x", "-"], REFUSE),
    (["exec", "--jsn", "-"], REFUSE),
    (["exec", "--full-auto", "-"], REFUSE),
    (["exec", "-a", "never", "-"], REFUSE),
    (["exec", "-", "extra"], REFUSE),
    (["--bogus", "exec", "-"], REFUSE),
    (["--jsonn", "exec", "-"], REFUSE),
    # Values missing, not taken, repeated or in conflict.
    (["exec", "-s", "bad", "-"], REFUSE),
    (["exec", "-s", "read-onl", "-"], REFUSE),
    (["exec", "-s", "", "-"], REFUSE),
    (["exec", "-s"], REFUSE),
    (["exec", "-o", "--json", "-"], REFUSE),
    (["exec", "-C", "", "-"], REFUSE),
    (["exec", "--color", "sometimes", "-"], REFUSE),
    (["exec", "-p", "a.b", "-"], REFUSE),
    (["exec", "--json=true", "-"], REFUSE),
    (["exec", "--json", "--json", "-"], REFUSE),
    (["exec", "-s", "read-only", "-s", "workspace-write", "-"], REFUSE),
    (["exec", "--yolo", "--approve-for-me", "-"], REFUSE),
    # Checked after parsing: -c, features, -C, the config the overrides make, the provider.
    (["exec", "-c", "features.shell_tool", "-"], REFUSE),
    (["exec", "-c", "=false", "-"], REFUSE),
    (["exec", "-c", "features.shell_tool=off", "-"], REFUSE),
    (["exec", "-c", 'web_search="sometimes"', "-"], REFUSE),
    (["exec", "-c", 'sandbox_mode="none"', "-"], REFUSE),
    (["exec", "-c", 'model_providers.harness.wire_api="chat"', "-"], REFUSE),
    (["exec", "-c", "model_providers.harness.stream_max_retries=-1", "-"], REFUSE),
    (["exec", "-c", 'model_providers.harness.base_url="http://x"', "-"], REFUSE),  # no name
    (["exec", "-c", 'model_provider="harness"', "-"], REFUSE),  # not defined
    (["exec", "--enable", "no_such_feature", "-"], REFUSE),
    (["exec", "-C", "{dir}/missing", "-"], REFUSE),
    (["exec", "--version"], ACCEPT),  # prints the version: exit 0, no stderr
]
GEMINI: list[tuple[list[str], str]] = [
    # The shim's argvs, one per approval mode, then the other forms yargs takes.
    (["-p", "Do it.", "--output-format", "json", "--approval-mode", "auto_edit"], ACCEPT),
    (["-p", "Do it.", "-o", "json", "--approval-mode", "plan", "--skip-trust"], ACCEPT),
    (
        [
            *("-p", "Do it.", "--output-format", "json", "--approval-mode", "default"),
            *("--skip-trust", "--allowed-tools", "write_file,run_shell_command(ls)"),
        ],
        ACCEPT,
    ),
    (["-p", "Do it.", "--approvalMode=plan", "--skipTrust"], ACCEPT),
    (["-p", "Do it.", "--skip-trust", "false", "-yd"], ACCEPT),
    # Unknown arguments, in each spelling.
    (["-p", "Do it.", "--bogus"], REFUSE),
    (["--no-bogus", "-p", "Do it."], REFUSE),
    (["-p", "Do it.", "-yZ"], REFUSE),
    # Values missing or not taken.
    (["-p"], REFUSE),
    (["-p", "Do it.", "--approval-mode"], REFUSE),
    (["-p", "Do it.", "--allowed-tools", "--skip-trust"], REFUSE),
    (["-p", "Do it.", "--approval-mode", "auto"], REFUSE),
    (["-p", "Do it.", "--output-format", "yaml"], REFUSE),
    (["-p", "Do it.", "--session-id", "not a uuid"], REFUSE),
    # gemini's own checks.
    (["-p", "Do it.", "and more"], REFUSE),
    (["-p", "Do it.", "-y", "--approval-mode", "plan"], REFUSE),
]
TABLES = {"claude": CLAUDE, "codex": CODEX, "gemini": GEMINI}


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


def environment(name: str, scratch: Path) -> dict[str, str]:
    """A throw-away home and dummy keys; each model API pointed at a closed port."""
    own = ("ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_", "GEMINI_", "GOOGLE_", "FAKE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    env |= {"HOME": str(scratch / "home"), "NO_COLOR": "1"}
    if name == "claude":
        env |= {
            "ANTHROPIC_API_KEY": "sk-ant-dummy",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
    if name == "codex":
        # codex will not make its helper links in a CODEX_HOME under TMPDIR, and says so
        # first on stderr: TMPDIR goes elsewhere.
        env |= {
            "CODEX_API_KEY": "sk-dummy",
            "CODEX_HOME": str(scratch / "codex-home"),
            "TMPDIR": str(scratch / "tmp"),
        }
    if name == "gemini":
        env["GEMINI_CLI_NO_RELAUNCH"] = "1"  # one node process instead of two: faster
    return env


def scratch_dir(tmp: Path) -> Path:
    for sub in ("home", "tmp", "work", "codex-home"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    (tmp / "work" / "schema.json").write_text(SCHEMA)
    # The default provider a stray codex call would use: nothing listens there.
    (tmp / "codex-home" / "config.toml").write_text(
        'model_provider = "closed"\n[model_providers.closed]\nname = "closed"\n'
        'base_url = "http://127.0.0.1:9/v1"\nrequest_max_retries = 0\n'
    )
    return tmp


def run(exe: Path, argv: list[str], env: dict[str, str], cwd: Path) -> Ran:
    done = subprocess.run(
        [str(exe), *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def verdict(name: str, ran: Ran, fake: bool) -> tuple[object, ...]:
    """ACCEPT, or (exit code, first line of the error, whether stdout had anything)."""
    lines = [line for line in ran.stderr.splitlines() if line and not line.startswith(NOTES)]
    code, said = TAKEN[name]
    if fake and name == "gemini" and ran.code == 0 and '"session_id"' in ran.stdout:
        return (ACCEPT,)  # the fake acted the call out: gemini would have made it
    if ran.code == code and said in ran.stderr:
        return (ACCEPT,)  # (gemini -o json says it inside a JSON error document)
    if ran.code == 0 and not lines:
        return (ACCEPT,)  # --version: printed, exit 0
    return (ran.code, lines[0] if lines else "", bool(ran.stdout))


def expand(argv: list[str], work: Path) -> list[str]:
    paths = {"{dir}": str(work), "{schema}": str(work / "schema.json"), "{out}": str(work / "o")}
    out = []
    for arg in argv:
        for mark, path in paths.items():
            arg = arg.replace(mark, path)
        out.append(arg)
    return out


@pytest.mark.parametrize("name", ["claude", "codex", "gemini"])
def test_each_fake_takes_and_refuses_what_the_real_cli_does(name: str, tmp_path: Path) -> None:
    scratch = scratch_dir(tmp_path)
    env = environment(name, scratch)
    work = scratch / "work"
    rows = [(expand(argv, work), expect) for argv, expect in TABLES[name]]
    # All runs at once: the real CLIs take a second or so each to start.
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        real = list(pool.map(lambda row: run(CLIS / name, row[0], env, work), rows))
        fake = list(pool.map(lambda row: run(FAKES / name, row[0], env, work), rows))
    wrong: list[tuple[object, ...]] = []
    for (argv, expect), got, mine in zip(rows, real, fake, strict=True):
        truth = verdict(name, got, fake=False)
        if (truth == (ACCEPT,)) != (expect == ACCEPT):
            wrong.append(("the table is wrong about the real CLI", argv, truth))
        if verdict(name, mine, fake=True) != truth:
            wrong.append(("the fake differs", argv, truth, verdict(name, mine, fake=True)))
        # Where the fake mirrors the parser whole (claude's commander, codex's clap), its
        # refusal is the real one to the byte: "Did you mean", clap's tip and usage.
        parse_error = got.stderr.startswith("error:") and name in ("claude", "codex")
        if parse_error and mine.stderr != got.stderr:
            wrong.append(("the fake's error text differs", argv, got.stderr, mine.stderr))
    assert wrong == []


def test_gemini_without_any_prompt_is_refused_as_gemini_does(tmp_path: Path) -> None:
    # With a key gemini gets past auth to find nothing to do; the call stops there (exit 42).
    scratch = scratch_dir(tmp_path)
    env = environment("gemini", scratch) | {"GEMINI_API_KEY": "dummy-key"}
    argv = ["-p", "", "--output-format", "json", "--skip-trust"]
    real = run(CLIS / "gemini", argv, env, scratch / "work")
    fake = run(FAKES / "gemini", argv, env, scratch / "work")
    assert verdict("gemini", real, fake=False) == (
        42,
        "No input provided via stdin. Input can be provided by piping data into gemini or"
        " using the --prompt option.",
        False,
    )
    assert verdict("gemini", fake, fake=True) == verdict("gemini", real, fake=False)
