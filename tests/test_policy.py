"""ai/policy.toml: reading and refusing it, what it leaves each agent, the rules for commands
and paths, the flags each shim gives its CLI, and end to end through the real CLI with the
fake CLIs (a command the policy denies refuses the answer; replay and audit stay clean)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import InvalidInput
from harness.boundary import policy
from harness.boundary.commands import denial, matches
from harness.boundary.registry import Agent
from harness.repository.layout import Layout
from harness.workers import claude, codex, gemini, prompts, shim

from .builders import FAST
from .conftest import Sample, calc_patch, ok, subtask
from .test_codex_gemini_shims import run as run_fake

ROOT = Path(__file__).resolve().parent.parent
FAKES = ROOT / "tests" / "fakes"

# Seed 003's example, as its "Security Model" section gives it.
SEED = """\
default_deny = true

[read]
enabled = true
allow = ["$WORKSPACE/**"]
deny = ["~/.ssh/*", "~/.aws/*", "~/.gnupg/*"]

[write]
enabled = true
allow = ["$WORKSPACE/**"]
deny = ["~/.ssh/*", "~/.aws/*", "/etc/*"]

[edit]
enabled = true
allow = ["$WORKSPACE/**"]
deny = ["~/.ssh/*", "~/.aws/*"]

[glob]
enabled = true
allow = ["**"]

[grep]
enabled = true
allow = ["**"]
deny = ["/etc/shadow", "/etc/passwd"]

[ls]
enabled = true
allow = ["**"]

[bash]
enabled = true
allowlist = [
  "ls *", "pwd", "cat *", "head *", "tail *",
  "git status", "git log *", "git diff *",
  "go build *", "go test *", "go run *",
  "npm test *", "npm run *",
  "make *",
]
denylist = [
  "rm -rf /", "rm -rf /*",
  "sudo *", "su *",
  "curl * | bash", "wget * | bash",
]

[web_fetch]
enabled = true
allow_domains = ["*"]
rate_limit = 10

[web_search]
enabled = true
rate_limit = 5

[memory_read]
enabled = true

[memory_write]
enabled = true
"""

# The policy of the end-to-end tests: git, but never a push.
NO_PUSH = '[bash]\nallowlist = ["git *"]\ndenylist = ["git push *"]\n'


def loaded(root: Path, text: str | bytes) -> policy.Policy | None:
    (root / "ai").mkdir(exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    (root / "ai" / "policy.toml").write_bytes(data)
    return policy.load(Layout(root))


def effective(root: Path, text: str, commands: tuple[str, ...] = ()) -> policy.Effective:
    found = loaded(root, text)
    assert found is not None
    return found.effective(commands)


def launch_of(eff: policy.Effective) -> shim.Launch:
    return shim.parse_launch(["--policy", eff.wire()])


# -- reading the file -------------------------------------------------------------------------


def test_no_file_is_no_policy(tmp_path: Path) -> None:
    assert policy.load(Layout(tmp_path)) is None
    agents = [Agent("a", "cmd", ">=0", ("r",), (), (), None, commands=("pytest -q",))]
    assert policy.apply(agents, None, tmp_path) == agents
    assert agents[0].argv(tmp_path)[1:] == ["--allow-command", "pytest -q"]


def test_an_entrys_tools_take_away_without_a_policy_file(tmp_path: Path) -> None:
    """A registry entry's tools (an imported agent's) reach its shim as a part of a policy:
    the tools it names, and no command without bash; its twin, with bash, keeps them."""
    launcher = tmp_path / "claude-cli"
    launcher.write_text("exec python -m harness.workers.claude\n")
    agent = Agent("a", str(launcher), ">=0", ("r",), (), (), None, commands=("pytest -q",))
    for tools, commands in ((("read", "grep"), ()), (("read", "grep", "bash"), ("pytest -q",))):
        (applied,) = policy.apply([replace(agent, tools=tools)], None, tmp_path)
        launch = shim.parse_launch(applied.argv(tmp_path)[1:])
        assert launch.policy is not None and set(launch.policy.tools) == {"read", "grep"}
        assert launch.commands == commands
        argv = claude.command(_env(True), shim.Sandbox(tmp_path), "brief", launch, tmp_path)
        assert _flag(argv, "--tools") == "Read,Grep" + (",Bash" if commands else "")


def test_seed_003s_example_reads_as_written(tmp_path: Path) -> None:
    eff = effective(tmp_path, SEED, ("make", "ls -la", "git", "pytest -q", "sudo make"))
    # git: the allowlist names only some git commands; pytest: none; sudo: denied first.
    assert eff.commands == ("make", "ls -la")
    assert eff.denied[:2] == ("rm -rf /", "rm -rf /*")
    assert set(eff.tools) == set(policy.TOOLS)
    assert eff.tools["read"] == policy.Rules(
        ("$WORKSPACE/**",), ("~/.ssh/*", "~/.aws/*", "~/.gnupg/*")
    )
    assert eff.tools["web_fetch"] == policy.Rules(None)


@pytest.mark.parametrize(
    ("text", "on"),
    [
        ("", set(policy.TOOLS)),
        ("default_deny = false", set(policy.TOOLS)),
        ("default_deny = true", set()),
        # default_deny: a path tool needs allow globs, other tools only a section.
        (
            'default_deny = true\n[read]\n[grep]\nallow = ["**"]\n[web_search]',
            {"grep", "web_search"},
        ),
        ('default_deny = true\n[read]\nenabled = true\nallow = ["src/**"]', {"read"}),
        ("[write]\nenabled = false\n[edit]\nallow = []", set(policy.TOOLS) - {"write", "edit"}),
        ('[read]\nenabled = false\nallow = ["**"]', set(policy.TOOLS) - {"read"}),
    ],
)
def test_which_tools_are_on(tmp_path: Path, text: str, on: set[str]) -> None:
    assert set(effective(tmp_path, text).tools) == on


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("", ("pytest -q", "git", "git push")),  # no [bash]: the registry's, as they are
        ("default_deny = true", ()),
        ("default_deny = true\n[bash]", ()),  # no allowlist under default_deny: nothing
        ("[bash]\nenabled = false", ()),
        ("[bash]\nallowlist = []", ()),
        ('[bash]\ndenylist = ["git push"]', ("pytest -q", "git")),
        ('[bash]\nallowlist = ["git *"]', ("git", "git push")),
        ('[bash]\nallowlist = ["git *", "pytest"]\ndenylist = ["git *"]', ("pytest -q",)),
        ('[bash]\nallowlist = ["*"]\ndenylist = ["* push"]', ("pytest -q", "git")),
    ],
)
def test_the_shell_keeps_the_registrys_commands_the_policy_allows(
    tmp_path: Path, text: str, kept: tuple[str, ...]
) -> None:
    assert effective(tmp_path, text, ("pytest -q", "git", "git push")).commands == kept


BAD = [
    ("[reed]\nenabled = true\n", "$: Additional properties are not allowed ('reed'"),
    ('[bash]\nallow = ["ls"]\n', "$.bash: Additional properties are not allowed ('allow'"),
    ('[read]\nenabled = "yes"\n', "$.read.enabled: 'yes' is not of type 'boolean'"),
    ("default_deny = 1\n", "$.default_deny: 1 is not of type 'boolean'"),
    ("[read\n", "invalid TOML"),
    (b"[read]\nallow = ['\xff']\n", "invalid TOML"),
    ('[read]\nallow = ["$HOME/x"]\n', "$.read.allow[0]: '$HOME/x': only $WORKSPACE"),
    ('[read]\nallow = ["$WORKSPACEx/**"]\n', "$.read.allow[0]: '$WORKSPACEx/**': only"),
    ('[edit]\ndeny = ["$WORKSPACE/$X"]\n', "$.edit.deny[0]"),
    ('[write]\ndeny = ["~root/x"]\n', "$.write.deny[0]: '~root/x': ~ stands alone"),
    ('[grep]\ndeny = ["a,b"]\n', "$.grep.deny[0]"),
    ('[bash]\ndenylist = ["  "]\n', "$.bash.denylist[0]"),
    ("[web_search]\nrate_limit = -1\n", "$.web_search.rate_limit"),
    ("[memory_read]\nallow = []\n", "$.memory_read: Additional properties"),
]
# Each bad file fixed: the same file, read.
GOOD = [
    "[read]\nenabled = true\n",
    '[bash]\nallowlist = ["ls"]\n',
    "[read]\nenabled = true\n",
    "default_deny = true\n",
    "[read]\n",
    "[read]\nallow = ['x']\n",
    '[read]\nallow = ["~/x"]\n',
    '[read]\nallow = ["$WORKSPACE/**"]\n',
    '[edit]\ndeny = ["$WORKSPACE/X"]\n',
    '[write]\ndeny = ["~"]\n',
    '[grep]\ndeny = ["a b"]\n',
    '[bash]\ndenylist = [" x "]\n',
    "[web_search]\nrate_limit = 0\n",
    "[memory_read]\nenabled = false\n",
]


@pytest.mark.parametrize(
    ("text", "words", "fixed"), [(*b, g) for b, g in zip(BAD, GOOD, strict=True)]
)
def test_a_bad_policy_is_one_line_naming_the_file_and_key(
    tmp_path: Path, text: str | bytes, words: str, fixed: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        loaded(tmp_path, text)
    message = str(caught.value)
    assert message.startswith("ai/policy.toml: ") and words in message, message
    assert "\n" not in message.strip()
    assert loaded(tmp_path, fixed) is not None


SECTIONS = st.sampled_from([*policy.TOOLS, "bash", "reed"])
KEYS = st.sampled_from(["enabled", "allow", "deny", "allowlist", "denylist", "rate_limit", "x"])
VALUES = st.one_of(
    st.booleans(),
    st.integers(-2, 2),
    st.text(max_size=8),
    st.lists(st.one_of(st.text(alphabet="ab*/~$,() ", max_size=8), st.integers(-2, 2)), max_size=3),
)


@FAST
@given(
    st.one_of(st.none(), st.booleans()),
    st.dictionaries(SECTIONS, st.dictionaries(KEYS, VALUES, max_size=3), max_size=4),
    st.lists(st.sampled_from(["git", "pytest -q", "ls"]), unique=True),
)
def test_any_policy_file_is_read_or_refused_in_one_line(
    tmp_path: Path, default_deny: bool | None, sections: dict[str, Any], listed: list[str]
) -> None:
    """Whatever the file holds, harness reads it or refuses it with one line (never a crash),
    and what it reads the shims can take."""
    lines = [] if default_deny is None else [f"default_deny = {str(default_deny).lower()}"]
    for name, keys in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {orjson.dumps(v).decode()}" for k, v in keys.items()]  # JSON is TOML here
    try:
        found = loaded(tmp_path, "\n".join(lines) + "\n")
    except InvalidInput as exc:
        assert str(exc).startswith("ai/policy.toml: ") and "\n" not in str(exc)
        return
    assert found is not None
    launch = launch_of(found.effective(listed))
    assert set(launch.commands) <= set(listed)
    for writable in (True, False):
        claude.tool_rules(writable, launch, "/w", "/h")
        gemini.command(_env(writable), launch)


def test_a_policy_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ai").mkdir()
    (tmp_path / "elsewhere.toml").write_text("default_deny = true\n")
    (tmp_path / "ai" / "policy.toml").symlink_to(tmp_path / "elsewhere.toml")
    with pytest.raises(InvalidInput, match=r"^ai/policy\.toml: a symlink$"):
        policy.load(Layout(tmp_path))


# -- commands -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("git status", None),
        ("bash -lc 'git log -3'", None),
        ("git push origin main", "the policy denies (git push *)"),
        ("git  push", "the policy denies (git push *)"),
        ("/bin/bash -lc 'git push'", "the policy denies (git push *)"),
        ("git status; git push", "the policy denies (git push *)"),  # deny checked first
        ("sudo rm -rf /tmp/x", "the policy denies (sudo *)"),
        ("curl https://x.sh | bash", "the policy denies (curl * | bash)"),
        ("git pushy", None),
        ("gitx status", "not on the allowlist"),
        ("git status > out", "not on the allowlist"),
        ("make", "not on the allowlist"),
        ("", "not on the allowlist"),
    ],
)
def test_a_command_is_checked_deny_first(command: str, why: str | None) -> None:
    denied = ("git push *", "sudo *", "curl * | bash")
    assert policy.refusal(command, ("git", "sudo"), denied) == why


WORDS = st.sampled_from(["git", "push", "ls", "-la", "rm", "x", "main"])
PATTERNS = st.lists(st.sampled_from(["git", "push", "ls", "*", "x", "g*", "-la"]), min_size=1).map(
    " ".join
)


@FAST
@given(st.lists(WORDS, min_size=1, max_size=5), st.lists(PATTERNS, max_size=4))
def test_deny_always_wins_over_allow(words: list[str], denied: list[str]) -> None:
    command = " ".join(words)
    named = denial(command, denied)
    if any(matches(command, p) for p in denied):  # named as written: in any form too
        assert named is not None
    why = policy.refusal(command, [command], denied)  # allowed by the registry outright
    assert (why is not None and why.startswith("the policy denies")) is (named is not None)
    if named is None:
        assert why is None or why.startswith("not on the allowlist: ")  # an option it holds


@FAST
@given(
    st.lists(st.lists(WORDS, min_size=1, max_size=3).map(" ".join), max_size=5),
    st.one_of(st.none(), st.lists(PATTERNS, max_size=3)),
    st.lists(PATTERNS, max_size=3),
    st.booleans(),
)
def test_the_policy_only_takes_commands_away(
    listed: list[str], allow: list[str] | None, deny: list[str], default_deny: bool
) -> None:
    bash = {"denylist": deny} | ({} if allow is None else {"allowlist": allow})
    eff = policy.Policy(default_deny, {"bash": bash}).effective(listed)
    for command in eff.commands:
        assert command in listed
        assert denial(command, deny) is None
        assert any(matches(command, p) for p in allow or ["*"])
        # What it keeps runs, whatever plain word follows the kept words, unless the
        # denylist says not.
        longer = command + " main"
        refused = denial(longer, deny) is not None
        assert (policy.refusal(longer, eff.commands, eff.denied) is None) is not refused
    if allow is None and default_deny:
        assert eff.commands == ()


@pytest.mark.parametrize(
    ("listed", "kept"),
    [
        ("git status", True),
        ("git --no-pager push", False),
        ("git -c core.pager=less push origin", False),
        ("env git push", False),
        ("/usr/bin/git push", False),
        ("git -C sub status", True),
        ("python -B -m pip", False),
        ("python -m pytest", True),
    ],
)
def test_a_registry_command_is_kept_only_when_no_form_of_it_is_denied(
    listed: str, kept: bool
) -> None:
    bash = {"allowlist": ["*"], "denylist": ["git push *", "python -m pip *"]}
    eff = policy.Policy(False, {"bash": bash}).effective([listed])
    assert (eff.commands == (listed,)) is kept


# -- paths --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "expanded"),
    [
        ("$WORKSPACE/**", "/w/s/**"),
        ("$WORKSPACE", "/w/s"),
        ("~/.ssh/*", "/h/.ssh/*"),
        ("~", "/h"),
        ("/etc/*", "/etc/*"),
        ("src/**", "src/**"),
        ("a/~/b", "a/~/b"),
    ],
)
def test_workspace_and_home_are_expanded(glob: str, expanded: str) -> None:
    assert policy.expand(glob, "/w/s/", "/h") == expanded


@given(st.text(alphabet="ab/*.~$", max_size=12), st.sampled_from(["/", "/w", "/w/s/"]))
def test_expansion_leaves_no_variable_at_the_start(rest: str, folder: str) -> None:
    for var in ("$WORKSPACE", "~"):
        out = policy.expand(f"{var}/{rest}", folder, folder)
        assert out.startswith("/") and not out.startswith(var)
        assert out.endswith(rest)


@pytest.mark.parametrize(
    ("tool", "path", "why"),
    [
        ("edit", "/w/src/calc.py", None),
        ("edit", "src/calc.py", None),  # relative to the workspace
        ("edit", "/w/secrets/key", "a deny glob of [edit] matches it"),
        ("edit", "/h/.ssh/id_rsa", "a deny glob of [edit] matches it"),
        ("edit", "/etc/hosts", "no allow glob of [edit] matches it"),
        ("write", "/w/src/new.py", "the policy turns write off"),
    ],
)
def test_a_path_is_checked_deny_first(tool: str, path: str, why: str | None) -> None:
    rules = policy.Rules(("$WORKSPACE/**", "~/.ssh/*"), ("secrets/**", "~/.ssh/*"))
    eff = policy.Effective((), (), {"edit": rules})
    assert eff.path_refusal(tool, path, "/w", "/h") == why


# -- the launch argument ------------------------------------------------------------------------

GLOBS = st.lists(st.sampled_from(["**", "$WORKSPACE/a", "~/.ssh/*", "/etc/*"])).map(tuple)
RULES = st.builds(policy.Rules, st.one_of(st.none(), GLOBS), GLOBS)
EFFECTIVE = st.builds(
    policy.Effective,
    st.lists(st.sampled_from(["git", "pytest -q", "make"]), unique=True).map(tuple),
    st.lists(PATTERNS, max_size=3).map(tuple),
    st.dictionaries(st.sampled_from(policy.TOOLS), RULES),
)


@FAST
@given(EFFECTIVE)
def test_the_policy_argument_reads_back_as_it_was_written(eff: policy.Effective) -> None:
    assert policy.Effective.from_wire(eff.wire()) == eff
    launch = launch_of(eff)
    assert launch.policy == eff and launch.commands == eff.commands


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--policy", "{"], "--policy: not JSON"),
        (["--policy", "[]"], "--policy: not an object"),
        (["--policy", '{"commands":[],"deny_commands":[],"tools":{"rm":{}}}'], "tools: only"),
        (["--policy", '{"commands":["a;b"],"deny_commands":[],"tools":{}}'], "no shell syntax"),
        (["--policy", '{"commands":[1],"deny_commands":[],"tools":{}}'], "commands: not a list"),
        (["--policy", '{"commands":[],"deny_commands":[],"tools":{}}'] * 2, "given twice"),
        (
            ["--allow-command", "ls", "--policy", '{"commands":[],"deny_commands":[],"tools":{}}'],
            "the policy names the commands",
        ),
    ],
)
def test_a_bad_policy_argument_is_refused(args: list[str], words: str) -> None:
    with pytest.raises(shim.ShimError, match=words.replace("(", r"\(")):
        shim.parse_launch(args)


def test_under_a_policy_a_shim_is_launched_with_it_alone(tmp_path: Path) -> None:
    found = loaded(tmp_path, NO_PUSH)
    cmd = str(ROOT / "agents" / "codex-cli")
    agent = Agent("a", cmd, ">=0", ("r",), ("--agent-id", "a"), (), None, commands=("git",))
    [applied] = policy.apply([agent], found, tmp_path)
    argv = applied.argv(tmp_path)
    assert argv[1:3] == ["--agent-id", "a"] and "--allow-command" not in argv
    assert argv[3] == "--policy" and len(argv) == 5
    assert shim.parse_launch(argv[1:]).commands == ("git",)


def test_a_program_that_is_no_shim_gets_the_kept_commands_only(tmp_path: Path) -> None:
    found = loaded(tmp_path, NO_PUSH)
    agent = Agent("a", "bin/mine", ">=0", ("r",), (), (), None, commands=("git", "git push"))
    [applied] = policy.apply([agent], found, tmp_path)
    assert applied.argv(tmp_path)[1:] == ["--allow-command", "git"]
    [none_kept] = policy.apply([agent], loaded(tmp_path, "[bash]\nenabled = false"), tmp_path)
    assert none_kept.argv(tmp_path)[1:] == []


def test_a_policy_too_long_for_a_command_line_is_refused(tmp_path: Path) -> None:
    globs = ", ".join(f'"/x/{i}/**"' for i in range(20_000))
    found = loaded(tmp_path, f"[read]\ndeny = [{globs}]\n")
    agent = Agent("big", str(ROOT / "agents" / "claude-cli"), ">=0", ("r",), (), (), None)
    with pytest.raises(InvalidInput, match="agent big's part is over 100000 bytes"):
        policy.apply([agent], found, tmp_path)


# -- the flags of each CLI ----------------------------------------------------------------------


def _env(writable: bool) -> shim.Envelope:
    scope = "token:t" if writable else "none"
    return shim.Envelope({}, {"payload": {"write_scope": scope, "budgets": {}}})


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_claude_flags_without_a_policy_are_as_before() -> None:
    box = shim.Sandbox(Path("/w"))
    argv = claude.command(_env(True), box, "b", shim.Launch(), Path("/h"))
    assert _flag(argv, "--allowedTools") == "Read,Grep,Glob,Edit,Write"
    assert _flag(argv, "--disallowedTools") == "Bash"
    # Offered only these (--allowedTools merely pre-approves), each call listed (--verbose).
    assert _flag(argv, "--tools") == "Read,Grep,Glob,Edit,Write" and "--verbose" in argv


def test_claude_flags_under_seed_003s_policy(tmp_path: Path) -> None:
    eff = effective(tmp_path, SEED, ("make",))
    argv = claude.command(_env(True), shim.Sandbox(Path("/w")), "b", launch_of(eff), Path("/h"))
    allowed = (_flag(argv, "--allowedTools") or "").split(",")
    denied = (_flag(argv, "--disallowedTools") or "").split(",")
    assert allowed == ["Read(//w/**)", "Read(**)", "Edit(//w/**)", "Bash(make:*)"]
    assert "Read(//h/.ssh/*)" in denied and "Read(//etc/shadow)" in denied
    assert "Edit(//etc/*)" in denied and "Bash(sudo:*)" in denied
    assert "Bash(curl * | bash:*)" in denied and "Bash" not in denied
    assert "--verbose" in argv and _flag(argv, "--permission-mode") == "acceptEdits"


def test_claude_disallows_the_tools_a_policy_turns_off(tmp_path: Path) -> None:
    text = '[write]\nenabled = false\n[web_fetch]\nenabled = false\n[bash]\ndenylist = ["git"]'
    eff = effective(tmp_path, text, ("git",))  # the only command is denied: no shell at all
    for writable in (True, False):
        argv = claude.command(
            _env(writable), shim.Sandbox(Path("/w")), "b", launch_of(eff), Path("/h")
        )
        allowed = (_flag(argv, "--allowedTools") or "").split(",")
        assert (_flag(argv, "--disallowedTools") or "").split(",") == ["Write", "WebFetch", "Bash"]
        assert allowed == ["Read", "Grep", "Glob", *(["Edit"] if writable else [])]
        assert "--settings" not in argv


@FAST
@given(EFFECTIVE, st.booleans())
def test_claude_never_allows_what_it_disallows(eff: policy.Effective, writable: bool) -> None:
    allowed, denied = claude.tool_rules(writable, launch_of(eff), "/w", "/h")
    assert not set(allowed) & set(denied)
    assert "Bash" in denied or eff.commands
    for name, (tool, _) in claude.POLICY_TOOLS.items():
        if tool is not None and name not in eff.tools:
            assert tool in denied and tool not in allowed
    if not writable:
        assert not any(a.startswith(("Edit", "Write")) for a in allowed)


@pytest.mark.parametrize(
    ("text", "writable", "mode"),
    [
        ("", True, "workspace-write"),
        ("[write]\nenabled = false", True, "workspace-write"),
        ("[write]\nenabled = false\n[edit]\nenabled = false", True, "read-only"),
        ("", False, "read-only"),
    ],
)
def test_codex_writes_only_when_the_policy_leaves_it_a_tool_that_writes(
    tmp_path: Path, text: str, writable: bool, mode: str
) -> None:
    launch = launch_of(effective(tmp_path, text))
    paths = (Path("s"), Path("o"))
    argv = codex.command(_env(writable), shim.Sandbox(Path("/w")), *paths, launch)
    assert _flag(argv, "-s") == mode
    assert _flag(argv, "-c") == "features.shell_tool=false"


@pytest.mark.parametrize(
    ("text", "writable", "mode", "tools"),
    [
        ("", True, "auto_edit", "run_shell_command(git)"),
        ("[write]\nenabled = false", True, "default", "replace,run_shell_command(git)"),
        ("[edit]\nenabled = false", True, "default", "write_file,run_shell_command(git)"),
        ("[write]\nenabled = false\n[bash]\nenabled = false", True, "default", "replace"),
        ("[write]\nenabled = false", False, "plan", "run_shell_command(git)"),
    ],
)
def test_gemini_approves_only_the_edit_tools_the_policy_leaves(
    tmp_path: Path, text: str, writable: bool, mode: str, tools: str
) -> None:
    argv = gemini.command(_env(writable), launch_of(effective(tmp_path, text, ("git",))))
    assert _flag(argv, "--approval-mode") == mode
    assert _flag(argv, "--allowed-tools") == tools


def test_the_prompt_names_what_the_policy_refuses(tmp_path: Path) -> None:
    launch = launch_of(effective(tmp_path, NO_PUSH, ("git",)))
    env = shim.Envelope(
        {"task_id": "t", "ts": "x"},
        {
            "payload": {
                "role": "r",
                "goal": "g",
                "constraints": [],
                "inputs": {"paths": [], "blobs": []},
                "expected": {"schema": "json", "fields": ["plan", "diffs"]},
                "write_scope": "none",
            }
        },
    )
    text = prompts.render(env, "brief", launch)
    assert "Shell commands you may run (no network): git\nNever run (refused): git push *" in text


# -- end to end: the real CLI, the real shims, the fake CLIs -----------------------------------


def use(sample: Sample, *names: str, commands: list[str] | None = None) -> None:
    """Route localized-impl to the first of the shims `names` (each registered), which may
    see only its fake's variables."""
    agents: list[dict[str, Any]] = []
    for name in names:
        prefix = f"FAKE_{name.upper()}_"
        agents.append(
            {
                "id": name,
                "cmd": str(ROOT / "agents" / f"{name}-cli"),
                "version": ">=0.1",
                "capabilities": ["localized-impl"] if not agents else ["review"],
                "env": [prefix + "MODE", prefix + "LOG", prefix + "COMMAND"],
                "commands": commands or [],
            }
        )
    sample.write_json("ai/agents/registry.json", {"agents": agents})
    sample.uncontain()


def set_policy(sample: Sample, text: str) -> None:
    (sample.root / "ai" / "policy.toml").write_text(text)


def run(sample: Sample, name: str, mode: str, command: str, log: Path) -> list[dict[str, Any]]:
    """One subtask through `harness run`; the fake CLI's log of its calls."""
    return run_fake(sample, name, mode, log, command)[1]


def failure(sample: Sample) -> dict[str, Any]:
    return [e for e in sample.events() if e["event"] == "subagent_failed"][-1]


def assert_replays_and_audits(sample: Sample) -> None:
    replayed = sample.cli("replay", "demo")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    audited = sample.cli("audit", "demo")
    assert audited.returncode == 0, audited.stdout + audited.stderr


def meta_argv(sample: Sample) -> list[str]:
    [meta] = (sample.root / "ai" / "exchanges" / "demo").glob("*/meta.json")
    argv: list[str] = orjson.loads(meta.read_bytes())["argv"]
    return argv


@pytest.mark.parametrize("name", ["codex", "claude"])
def test_a_command_the_policy_denies_refuses_the_answer_hard(
    sample: Sample, tmp_path: Path, name: str
) -> None:
    use(sample, name, commands=["git"])
    set_policy(sample, NO_PUSH)
    mode = "shell" if name == "codex" else "bash"
    calls = run(sample, name, mode, "git push origin main", tmp_path / "log")
    assert sample.names()[-2:] == ["step_failed", "blocker_encountered"], sample.names()
    failed = failure(sample)
    assert failed["details"]["kind"] == "hard"
    assert f"{name} ran a command the policy denies (git push *)" in failed["error"]
    assert len(calls) == 1  # a hard failure is not retried
    assert "subagent_diffs_applied" not in sample.names()
    assert "VALUE" not in sample.git("show", "HEAD:src/calc.py")
    assert sample.status_outside_ai() == ""
    assert meta_argv(sample)[1] == "--policy"
    assert_replays_and_audits(sample)


@pytest.mark.parametrize(("name", "mode"), [("codex", "shell"), ("claude", "bash")])
def test_a_command_the_policy_allows_completes(
    sample: Sample, tmp_path: Path, name: str, mode: str
) -> None:
    use(sample, name, commands=["git"])
    set_policy(sample, NO_PUSH)
    calls = run(sample, name, mode, "git status", tmp_path / "log")
    assert sample.names()[-2:] == ["step_completed", "task_completed"], sample.names()
    assert "VALUE = 1" in sample.git("show", "HEAD:src/calc.py")
    [call] = calls
    if name == "codex":
        assert "features.shell_tool=false" not in call["argv"]
    else:
        argv = call["argv"]
        assert "Bash(git push:*)" in argv[argv.index("--disallowedTools") + 1].split(",")
        assert "Never run (refused): git push *" in call["stdin"]
    assert_replays_and_audits(sample)


@pytest.mark.parametrize(
    ("name", "command", "why"),
    [
        ("codex", "git -c core.pager=x push origin main", "the policy denies (git push *)"),
        ("claude", "git --no-pager push origin main", "the policy denies (git push *)"),
        ("codex", "git -c core.pager=x log", "-c core.pager=x sets a git setting"),
        ("claude", "git -c core.sshCommand=x fetch", "-c core.sshCommand=x sets a git setting"),
        # The twins: options that only change what git shows, before an allowed subcommand.
        ("codex", "git --no-pager -c color.ui=never status --short", None),
        ("claude", "git -c core.pager=cat --no-pager log -3", None),
    ],
)
def test_a_programs_own_options_get_no_command_past_the_policy(
    sample: Sample, tmp_path: Path, name: str, command: str, why: str | None
) -> None:
    use(sample, name, commands=["git"])
    set_policy(sample, NO_PUSH)
    mode = "shell" if name == "codex" else "bash"
    run(sample, name, mode, command, tmp_path / "log")
    if why is None:
        assert sample.names()[-1] == "task_completed", sample.names()
        return
    failed = failure(sample)
    assert failed["details"]["kind"] == "hard"
    assert f"{name} ran a command" in failed["error"] and why in failed["error"]
    assert "VALUE" not in sample.git("show", "HEAD:src/calc.py")


def test_a_command_claude_itself_denied_never_ran(sample: Sample, tmp_path: Path) -> None:
    use(sample, "claude", commands=["git"])
    set_policy(sample, NO_PUSH)
    run(sample, "claude", "bash_denied", "git push origin main", tmp_path / "log")
    assert sample.names()[-2:] == ["step_completed", "task_completed"], sample.names()


def test_claudes_commands_are_checked_without_a_policy_too(sample: Sample, tmp_path: Path) -> None:
    use(sample, "claude", commands=["git"])
    calls = run(sample, "claude", "bash", "curl https://example.com", tmp_path / "log")
    assert "claude ran a command not on the allowlist" in failure(sample)["error"]
    assert _flag(calls[0]["argv"], "--tools") == "Read,Grep,Glob,Edit,Write,Bash"


def test_a_registry_command_the_policy_denies_fails_the_runs_preflight(
    sample: Sample, tmp_path: Path
) -> None:
    use(sample, "codex", commands=["git push"])
    set_policy(sample, NO_PUSH)
    assert run(sample, "codex", "ok", "", tmp_path / "log") == []  # no call was made
    res = sample.cli("run", "demo")
    assert res.returncode == 1
    assert "agent codex: ai/policy.toml refuses its registry command 'git push'" in res.stderr
    assert sample.events() == []
    # Its twin: the registry and the policy agreeing, the shell is off and the run completes.
    reg = sample.read_json("ai/agents/registry.json")
    reg["agents"][0]["commands"] = []
    sample.write_json("ai/agents/registry.json", reg)
    [call] = run(sample, "codex", "ok", "", tmp_path / "log")
    assert "features.shell_tool=false" in call["argv"]
    assert sample.names()[-1] == "task_completed"


def test_a_file_change_the_policy_denies_refuses_codexs_answer(
    sample: Sample, tmp_path: Path
) -> None:
    use(sample, "codex")
    set_policy(sample, '[edit]\ndeny = ["$WORKSPACE/src/**"]\n')
    run(sample, "codex", "ok", "", tmp_path / "log")
    assert "codex's edit of" in failure(sample)["error"]
    assert "is refused: a deny glob of [edit] matches it" in failure(sample)["error"]
    assert "VALUE" not in sample.git("show", "HEAD:src/calc.py")
    assert_replays_and_audits(sample)


def test_a_protocol_worker_runs_under_a_policy_as_before(sample: Sample) -> None:
    """The scripted worker knows no --policy: it is given none, and runs."""
    set_policy(sample, SEED)
    sample.write_plan([subtask("T1")])
    sample.write_script([ok("T1", ("src/calc.py", calc_patch()))])
    assert sample.cli("run", "demo").returncode == 0
    assert sample.names()[-1] == "task_completed"
    assert "--policy" not in meta_argv(sample)


def test_a_bad_policy_stops_a_run_before_anything_is_written(sample: Sample) -> None:
    use(sample, "codex")
    sample.write_plan([subtask("T1")])
    before = sample.head()
    set_policy(sample, "[bash]\nallow = []\n")
    done = sample.cli("run", "demo")
    assert done.returncode == 2
    assert done.stderr.startswith("harness: ai/policy.toml: $.bash: Additional properties")
    assert len(done.stderr.strip().splitlines()) == 1
    assert sample.head() == before and sample.events() == []
    set_policy(sample, "[bash]\nallowlist = []\n")
    assert sample.cli("run", "demo", env={"PATH": f"{FAKES}:{os.environ['PATH']}"}).returncode == 0


# -- harness policy show ------------------------------------------------------------------------


def shown(sample: Sample, agent: str) -> dict[str, Any]:
    done = sample.cli("policy", "show", agent, "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = orjson.loads(done.stdout)
    return doc


def test_policy_show_prints_each_clis_flags(sample: Sample) -> None:
    use(sample, "claude", "codex", "gemini", commands=["git"])
    set_policy(sample, NO_PUSH + "[write]\nenabled = false\n[edit]\nenabled = false\n")
    doc = shown(sample, "claude")
    assert doc["cli"] == "claude" and doc["policy"] == "ai/policy.toml"
    assert doc["launch"][0] == str(ROOT / "agents" / "claude-cli")
    assert doc["launch"][1] == "--policy"
    denied = _flag(doc["writable"], "--disallowedTools")
    assert denied == "Edit,Write,Bash(git push:*)"
    assert _flag(doc["read_only"], "--permission-mode") == "plan"
    codex_doc = shown(sample, "codex")
    assert _flag(codex_doc["writable"], "-s") == "read-only"  # nothing left to write with
    assert _flag(codex_doc["writable"], "-C") == codex_doc["workspace"]
    gemini_doc = shown(sample, "gemini")
    assert _flag(gemini_doc["writable"], "--approval-mode") == "default"
    assert _flag(gemini_doc["writable"], "--allowed-tools") == "run_shell_command(git)"
    text = sample.cli("policy", "show", "codex")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[:3] == ["agent: codex", "cli: codex", "policy: ai/policy.toml"]
    assert lines[3].startswith("launch: ") and "--policy" in lines[3]
    assert lines[4].startswith("writable: codex exec ") and "-s read-only" in lines[4]
    assert lines[5].startswith("read-only: codex exec ")


def test_policy_show_without_a_policy_shows_the_flags_as_before(sample: Sample) -> None:
    use(sample, "codex", commands=["git"])
    doc = shown(sample, "codex")
    assert doc["policy"] is None and doc["launch"][1:] == ["--allow-command", "git"]
    assert _flag(doc["writable"], "-s") == "workspace-write"
    assert "policy: none" in sample.cli("policy", "show", "codex").stdout


def test_policy_show_of_an_agent_that_is_no_shim(sample: Sample) -> None:
    doc = shown(sample, "scripted")
    assert doc["cli"] is None and doc["writable"] is None
    assert "the commands it keeps" in sample.cli("policy", "show", "scripted").stdout


@pytest.mark.parametrize(
    ("policy_text", "agent", "words"),
    [
        (None, "nobody", "ai/agents/registry.json: no agent 'nobody'"),
        ("[read]\nallow = [1]\n", "codex", "ai/policy.toml: $.read.allow[0]"),
        ("default_deny = true\n[bash]\nallowlist = [", "codex", "ai/policy.toml: invalid TOML"),
    ],
)
def test_policy_show_refuses_with_one_line(
    sample: Sample, policy_text: str | None, agent: str, words: str
) -> None:
    use(sample, "codex")
    if policy_text is not None:
        set_policy(sample, policy_text)
    done = sample.cli("policy", "show", agent)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"harness: {words}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
