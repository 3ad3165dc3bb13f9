"""Shell commands as the policy reads them: a denylist pattern holds against every placement
of a program's own options, every spelling of the program and every wrapper around it; an
allowed prefix allows no option that runs another program unless it names it; each refused
command has an allowed twin of the same shape."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.boundary import commands, policy

from .builders import FAST

DENIES = "the policy denies"

# git's own options before its subcommand, each as it may be written (git.c, handle_options).
GIT_OPTIONS = [
    "-c core.pager=x",
    "-c x.y=z",
    "-c color.ui=never",
    "--no-pager",
    "-P",
    "-p",
    "--paginate",
    "-C .",
    "-C /tmp",
    "--git-dir=.git",
    "--git-dir .git",
    "--work-tree=.",
    "--work-tree .",
    "--namespace=n",
    "--namespace n",
    "--bare",
    "--exec-path=/usr/lib/git-core",
    "--config-env=core.pager=HOME",
    "--config-env core.pager=HOME",
    "--super-prefix=x/",
    "--shallow-file f",
    "--attr-source=HEAD",
    "--attr-source HEAD",
    "--literal-pathspecs",
    "--no-literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--no-replace-objects",
    "--no-lazy-fetch",
    "-c core.pager=x --no-pager -C . --git-dir=.git",
]
# How a command may be started: its program by another name, or behind a wrapper.
GIT_SPELLINGS = [
    "/usr/bin/git",
    "./bin/git",
    "env git",
    "env -i FOO=1 git",
    "/usr/bin/env git",
    "command git",
    "exec git",
    "nice -n 5 git",
    "timeout 5 git",
    "nohup git",
    "time git",
    "stdbuf -oL git",
    "xargs git",
    "xargs -n 1 git",
    "sudo -u root git",
    "GIT_DIR=.git git",
    "find . -maxdepth 0 -exec git",
    "uv run git",
]
PYTEST_OPTIONS = [
    "-q",
    "-x",
    "-qx",
    "-p no:cacheprovider",
    "-pno:cacheprovider",
    "-p evil",
    "--rootdir=.",
    "--rootdir .",
    "--rootdir=/",
    "-c pytest.ini",
    "--config-file=pytest.ini",
    "--config-file pytest.ini",
    "-o xfail_strict=true",
    "--override-ini=xfail_strict=true",
    "--override-ini xfail_strict=true",
    "--confcutdir=.",
    "--confcutdir .",
    "-k add",
    "-kadd",
    "-m slow",
    "-W error",
    "--tb short",
    "--tb=short",
    "--maxfail 1",
    "--basetemp=/tmp/b",
    "-n 4",
    "-q -p no:cacheprovider --rootdir . -o xfail_strict=true",
]
PYTHON_OPTIONS = [
    "-B",
    "-I",
    "-E",
    "-s",
    "-S",
    "-u",
    "-O",
    "-OO",
    "-q",
    "-v",
    "-b",
    "-d",
    "-P",
    "-BIu",
    "-W ignore",
    "-Wignore",
    "-X importtime",
    "-Ximporttime",
    "--check-hash-based-pycs never",
    "-B -X dev -W ignore",
]
PYTHONS = ["python", "python3", "python3.11", "/usr/bin/python3"]


def refused(command: str, allowed: list[str], denied: list[str]) -> str | None:
    return policy.refusal(command, allowed, denied)


# -- deny wins over any placement ---------------------------------------------------------------


@pytest.mark.parametrize("options", GIT_OPTIONS)
def test_a_git_deny_rule_holds_wherever_gits_options_go(options: str) -> None:
    why = refused(f"git {options} push origin main", ["git"], ["git push *"])
    assert why == f"{DENIES} (git push *)"
    # Its twin: another subcommand, allowed by a rule that names the options.
    assert refused(f"git {options} status", [f"git {options}"], ["git push *"]) is None


@pytest.mark.parametrize("spelling", GIT_SPELLINGS)
def test_a_git_deny_rule_holds_however_git_is_started(spelling: str) -> None:
    allowed = [spelling]  # even a rule that allows the wrapper outright
    assert refused(f"{spelling} push origin", allowed, ["git push *"]) == f"{DENIES} (git push *)"
    assert refused(f"{spelling} status", allowed, ["git push *"]) is None


@pytest.mark.parametrize(
    "command",
    [
        "bash -lc 'git --no-pager push'",
        "bash -c 'env git push'",
        "sh -c \"bash -c 'git push'\"",
        "env -S 'git push origin'",
        "watch 'git push'",
        "git status; git -C . push",
        "git status && /usr/bin/git push",
        "echo $(git -c x=y push)",
        "/usr/lib/git-core/git-push origin",
        "git -c alias.p=push p origin",
        "git -c 'alias.p=!git push' p",
        "git -c core.pager='git push' log",
        "git -c core.sshCommand='git push' fetch",
        "git submodule foreach git push",
        "git bisect run git push",
        "git rebase --exec 'git push' main",
        "git for-each-repo --config=maintenance.repo push",
        "python tools/run.py git push",
        "python -m tool git push",
    ],
)
def test_a_deny_rule_holds_through_every_line_a_command_runs(command: str) -> None:
    allowed = ["bash", "sh", "env", "watch", "git", "echo", "python"]
    assert refused(command, allowed, ["git push *"]) == f"{DENIES} (git push *)"


@pytest.mark.parametrize(
    "command",
    [
        "echo git push",
        "grep -rn 'git push' .",
        "grep -rn git push .",
        "git log --grep push",
        "git commit -m 'git push later'",
        "git log --format=git push",
        "python -m pip install git push",
    ],
)
def test_a_program_that_only_reads_its_words_runs_none_of_them(command: str) -> None:
    """The twins: a program harness knows reads these words, and runs no `git push`."""
    allowed = ["echo", "grep", "git", "python"]
    assert commands.denial(command, ["git push *"]) is None
    assert refused(command, allowed, ["git push *"]) is None


@pytest.mark.parametrize("options", PYTEST_OPTIONS)
@pytest.mark.parametrize(
    "pytest_is", ["pytest", "py.test", "python -m pytest", "python3 -B -m pytest"]
)
def test_a_pytest_deny_rule_holds_wherever_pytests_options_go(options: str, pytest_is: str) -> None:
    denied = ["pytest tests/slow *", "pytest -x *"]
    for command in (f"{pytest_is} {options} tests/slow", f"{pytest_is} tests/slow {options}"):
        assert refused(command, [pytest_is], denied) == f"{DENIES} (pytest tests/slow *)"
    if "-x" not in options.split() and "-qx" not in options.split():
        twin = f"{pytest_is} {options} tests/fast"
        assert refused(twin, [f"{pytest_is} {options}"], denied) is None
        assert refused(f"{pytest_is} {options} -x tests/fast", [pytest_is], denied) == (
            f"{DENIES} (pytest -x *)"
        )


@pytest.mark.parametrize("options", PYTHON_OPTIONS)
@pytest.mark.parametrize("python", PYTHONS)
def test_a_python_deny_rule_holds_wherever_pythons_flags_go(options: str, python: str) -> None:
    denied = ["python -m pip *", "python -c *"]
    for module in ("-m pip", "-mpip"):
        why = refused(f"{python} {options} {module} install x", [python], denied)
        assert why == f"{DENIES} (python -m pip *)"
    assert refused(f"{python} {options} -c x", [python], denied) == f"{DENIES} (python -c *)"
    assert refused(f"{python} {options} -m venv v", [f"{python} {options}"], denied) is None


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("git -c core.pager=x log", "git -c *"),
        ("git --no-pager -C . --git-dir=.git log", "git --git-dir *"),
        ("git --no-pager --exec-path=/x log", "git --exec-path=*"),
        ("pytest -q -x -p evil tests", "pytest -p *"),
        ("python -m pytest --rootdir=/ -q", "pytest --rootdir *"),
        ("python3 -B -X dev -c x", "python -X *"),
        ("/usr/bin/python3 -Bc x", "python -c *"),
    ],
)
def test_a_deny_rule_naming_an_option_holds_among_others(command: str, pattern: str) -> None:
    assert refused(command, [command.split()[0]], [pattern]) == f"{DENIES} ({pattern})"


# Strategies for the property: git's options, a subcommand and its words, and wrappers.
GIT_OPTION = st.sampled_from(GIT_OPTIONS)
SUBCOMMAND = st.sampled_from(["push", "reset --hard", "clean -fdx", "branch -D", "tag -d"])
ARGS = st.lists(st.sampled_from(["origin", "main", "-f", "--tags", "x"]), max_size=3)
WRAPPER = st.sampled_from(["", "env ", "timeout 5 ", "xargs ", "nice -n 5 ", "FOO=1 ", "/usr/bin/"])


@FAST
@given(st.lists(GIT_OPTION, max_size=4), SUBCOMMAND, ARGS, WRAPPER)
def test_no_placement_of_gits_options_escapes_a_deny_rule(
    options: list[str], subcommand: str, args: list[str], wrapper: str
) -> None:
    rule = f"git {subcommand} *"
    command = " ".join([f"{wrapper}git", *options, subcommand, *args])
    allowed = [f"{wrapper}git".split()[0]]
    assert refused(command, allowed, [rule]) == f"{DENIES} ({rule})"
    # Its twin, another subcommand in the same place, is no command the rule names.
    assert commands.denial(" ".join([f"{wrapper}git", *options, "log", *args]), [rule]) is None


@FAST
@given(
    st.lists(st.sampled_from(PYTEST_OPTIONS), max_size=4),
    st.sampled_from(["pytest", "python -m pytest", "python3 -I -m pytest"]),
    st.booleans(),
)
def test_no_placement_of_pytests_options_escapes_a_deny_rule(
    options: list[str], pytest_is: str, after: bool
) -> None:
    rule = "pytest tests/slow *"
    words = [*options, "tests/slow"] if not after else ["tests/slow", *options]
    assert refused(" ".join([pytest_is, *words]), ["pytest", "python"], [rule]) == (
        f"{DENIES} ({rule})"
    )


@FAST
@given(st.lists(st.sampled_from(PYTHON_OPTIONS), max_size=4), st.sampled_from(PYTHONS))
def test_no_placement_of_pythons_flags_escapes_a_deny_rule(options: list[str], python: str) -> None:
    rule = "python -m pip *"
    command = " ".join([python, *options, "-m", "pip", "install", "x"])
    assert refused(command, [python], [rule]) == f"{DENIES} ({rule})"


# -- what a prefix allows -----------------------------------------------------------------------

# (command, the plain rule it is refused under, the rule naming its option that allows it)
HAZARDS = [
    ("git -c core.pager=x log", "git", "git -c core.pager=x"),
    ("git -c core.sshCommand=x fetch", "git", "git -c core.sshCommand=x"),
    ("git -c core.editor=x commit", "git", "git -c core.editor=x"),
    ("git -c core.hooksPath=h commit -m m", "git", "git -c core.hooksPath=h"),
    ("git -c core.fsmonitor=x status", "git status", "git -c core.fsmonitor=x status"),
    ("git -c credential.helper=x fetch", "git", "git -c credential.helper=x"),
    ("git -c protocol.ext.allow=always fetch", "git", "git -c protocol.ext.allow=always"),
    ("git -c diff.external=x diff", "git", "git -c diff.external=x"),
    ("git -c alias.st=status st", "git", "git -c alias.st=status"),
    ("git -c include.path=/x log", "git", "git -c include.path=/x"),
    ("git --config-env=core.pager=E log", "git", "git --config-env=core.pager=E"),
    ("git --exec-path=/tmp log", "git", "git --exec-path=/tmp"),
    ("git --frob status", "git", "git --frob"),
    ("git diff --ext-diff", "git diff", "git diff --ext-diff"),
    ("git log -p --ext-d", "git log", "git log -p --ext-d"),
    ("git log --output=/tmp/x", "git log", "git log --output=/tmp/x"),
    ("git grep -Ocat x", "git grep", "git grep -Ocat"),
    ("git grep -nO x", "git grep", "git grep -nO"),
    ("git grep --open-files-in-pager=cat x", "git grep", "git grep --open-files-in-pager=cat"),
    ("git rebase -x make main", "git rebase", "git rebase -x make"),
    ("git rebase --exec=make main", "git rebase", "git rebase --exec=make"),
    ("git fetch --upload-pack=x origin", "git fetch", "git fetch --upload-pack=x"),
    ("git push --receive-pack=x origin", "git push", "git push --receive-pack=x"),
    ("git clone -u x url", "git clone", "git clone -u x"),
    ("git clone --template=t url", "git clone", "git clone --template=t"),
    ("git clone -c core.sshCommand=x url", "git clone", "git clone -c core.sshCommand=x"),
    ("git submodule foreach make", "git submodule", "git submodule foreach"),
    ("git bisect run make", "git bisect", "git bisect run"),
    ("git difftool HEAD", "git", "git difftool"),
    ("git config core.pager x", "git config", "git config core.pager"),
    ("git config set core.hooksPath h", "git config", "git config set core.hooksPath"),
    ("git config -e", "git config", "git config -e"),
    ("pytest -q -p evil", "pytest -q", "pytest -q -p evil"),
    ("pytest -q -pevil", "pytest -q", "pytest -q -pevil"),
    ("pytest -q --rootdir=/", "pytest -q", "pytest -q --rootdir=/"),
    ("pytest -q --rootdir ../other", "pytest -q", "pytest -q --rootdir ../other"),
    ("pytest -q -c /etc/p.ini", "pytest -q", "pytest -q -c /etc/p.ini"),
    ("pytest -q --confcutdir=/", "pytest -q", "pytest -q --confcutdir=/"),
    ("pytest -q --basetemp=/", "pytest -q", "pytest -q --basetemp=/"),
    ("pytest -q -o addopts=-pevil", "pytest -q", "pytest -q -o addopts=-pevil"),
    ("pytest -q -o pythonpath=/x", "pytest -q", "pytest -q -o pythonpath=/x"),
    ("pytest -q --pdbcls=m:C", "pytest -q", "pytest -q --pdbcls=m:C"),
    ("pytest -q --tx popen//python=x", "pytest -q", "pytest -q --tx popen//python=x"),
    ("pytest -q @args.txt", "pytest -q", "pytest -q @args.txt"),
    ("python -m pytest -p evil", "python -m pytest", "python -m pytest -p evil"),
    ("python -c print", "python", "python -c"),
    ("python3 -Bc print", "python3", "python3 -Bc"),
    ("python --frob x.py", "python", "python --frob"),
    ("env git -c core.pager=x log", "env", "env git -c core.pager=x"),
    ("timeout 5 pytest -q -p evil", "timeout 5 pytest -q", "timeout 5 pytest -q -p evil"),
]


@pytest.mark.parametrize(("command", "plain", "naming"), HAZARDS)
def test_an_option_that_runs_another_program_needs_a_rule_naming_it(
    command: str, plain: str, naming: str
) -> None:
    why = refused(command, [plain], [])
    assert why is not None and why.startswith("not on the allowlist: ")
    assert why.endswith(", and no allowed command names it")
    assert refused(command, [naming], []) is None


# (command, the rule it is allowed under): the harmless twins of HAZARDS.
HARMLESS = [
    ("git -c color.ui=never log", "git"),
    ("git -c core.pager=cat log", "git"),
    ("git -c core.pager='less -R' log", "git"),
    ("git -c pager.log=false log", "git"),
    ("git -c core.quotepath=off status", "git"),
    ("git -c user.name=x -c user.email=y commit -m m", "git"),
    ("git -C . status", "git"),
    ("git --git-dir=.git --work-tree=. status", "git"),
    ("git --exec-path", "git"),
    ("git status --short", "git status"),
    ("git diff --no-ext-diff", "git diff"),
    ("git diff --exit-code", "git diff"),
    ("git log --oneline -3", "git log"),
    ("git log --output-indicator-new=+", "git log"),
    ("git grep -n x", "git grep"),
    ("git grep -e O", "git grep"),
    ("git rebase main", "git rebase"),
    ("git fetch origin", "git fetch"),
    ("git clone -c user.name=x url", "git clone"),
    ("git commit --template=msg.txt", "git commit"),
    ("git submodule update", "git submodule"),
    ("git bisect start", "git bisect"),
    ("git config user.email a@b", "git config"),
    ("git config --get core.pager", "git config"),
    ("git config core.pager", "git config"),
    ("pytest -q", "pytest -q"),
    ("pytest -q -p no:cacheprovider", "pytest -q"),
    ("pytest -q --rootdir=.", "pytest -q"),
    ("pytest -q --rootdir sub", "pytest -q"),
    ("pytest -q -c pytest.ini", "pytest -q"),
    ("pytest -q --basetemp=tmp", "pytest -q"),
    ("pytest -q -o xfail_strict=true", "pytest -q"),
    ("pytest -q -o pythonpath=src", "pytest -q"),
    ("pytest -q -k 'add or sub' tests", "pytest -q"),
    ("pytest -q -kp tests", "pytest -q"),
    ("python -m pytest -q", "python -m pytest"),
    ("python script.py", "python"),
    ("python -m venv v", "python"),
]


@pytest.mark.parametrize(("command", "rule"), HARMLESS)
def test_a_harmless_option_is_allowed_where_the_rule_allows_it(command: str, rule: str) -> None:
    assert refused(command, [rule], []) is None


@pytest.mark.parametrize(
    ("command", "rule", "allowed"),
    [
        ("git --no-pager status --short", "git status", True),
        ("git -P -c color.ui=never --no-optional-locks status", "git status", True),
        ("git --no-pager push", "git status", False),
        ("git -C . status", "git status", False),  # another repository is no cosmetic matter
        ("git -c core.pager=x status", "git status", False),
        ("git --no-pager diff --ext-diff", "git diff", False),
        ("git diff", "git --no-pager diff", True),
        ("python -B -u -m pytest -q", "python -m pytest", True),
        ("python -I -m pytest -q", "python -m pytest", False),
        ("python -Bc x", "python -m pytest", False),
        ("/usr/bin/git status", "git status", False),  # the path picks another program
        ("env git status", "git status", False),  # a wrapper is allowed only when named
    ],
)
def test_options_that_only_change_output_may_come_before_an_allowed_subcommand(
    command: str, rule: str, allowed: bool
) -> None:
    assert (refused(command, [rule], []) is None) is allowed


def test_a_rule_ending_at_an_option_names_it_with_any_value() -> None:
    assert refused("git -c core.pager=x log", ["git -c"], []) is None
    assert refused("git -C . -c core.pager=x log", ["git -c"], []) is not None


def test_any_word_after_a_program_harness_does_not_know_may_begin_a_command() -> None:
    assert refused("nice echo git push", ["nice"], ["git push *"]) == f"{DENIES} (git push *)"
    assert refused("nice echo git status", ["nice"], ["git push *"]) is None


def test_a_pattern_takes_a_subcommands_own_words_in_their_order() -> None:
    """As the README says: deny `git push *` to refuse a push whatever its words."""
    assert commands.denial("git push --force origin", ["git push --force *"]) is not None
    assert commands.denial("git push origin --force", ["git push --force *"]) is None
    assert commands.denial("git push origin --force", ["git push *"]) is not None


def test_a_command_too_long_to_check_is_refused() -> None:
    words = ["git", "add", *(f"f{i}" for i in range(commands.MAX_WORDS - 2))]
    assert refused(" ".join(words), ["git add"], ["git push *"]) is None
    why = refused(" ".join([*words, "g"]), ["git add"], ["git push *"])
    assert why == f"over {commands.MAX_WORDS} words, more than harness checks"


@FAST
@given(st.text(max_size=80))
def test_any_command_is_checked_without_error(command: str) -> None:
    """Whatever a CLI reports, the check answers: a reason or None, never an exception."""
    why = refused(command, ["git", "pytest -q", "python", "env"], ["git push *", "sudo *"])
    assert why is None or isinstance(why, str)


# -- patterns -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pattern", "hit"),
    [
        ("ls", "ls *", True),
        ("ls -la", "ls *", True),
        ("lsof", "ls *", False),
        ("git log", "git log", True),
        ("git log -3", "git log", True),
        ("git logs", "git log", False),
        ("git push origin main", "git * main", True),
        ("anything at all", "*", True),
        ("rm -rf /tmp", "rm -rf /", False),
        ("rm -rf /tmp", "rm -rf /*", True),
    ],
)
def test_a_pattern_names_the_commands_starting_with_its_words(
    text: str, pattern: str, hit: bool
) -> None:
    assert commands.matches(text, pattern) is hit
