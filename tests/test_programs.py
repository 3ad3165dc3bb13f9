"""How git, python and pytest read their words: the subcommand behind the options read first,
each option in its forms, the options that only change output, and the hazards, each with a
harmless twin (the command rules built on them: test_commands.py)."""

from __future__ import annotations

import pytest

from harness.boundary import programs
from harness.boundary.programs import parse


@pytest.mark.parametrize(
    ("word", "name"),
    [
        ("git", "git"),
        ("/usr/bin/git", "git"),
        ("git-push", "git"),
        ("git-", "git-"),
        ("python3.12", "python"),
        ("/usr/bin/python3", "python"),
        ("python3-config", "python3-config"),
        ("py.test", "pytest"),
        ("gitx", "gitx"),
    ],
)
def test_a_program_is_known_by_its_name(word: str, name: str) -> None:
    assert programs.program(word) == name


@pytest.mark.parametrize(
    ("command", "rest", "options"),
    [
        ("git -C . --no-pager push origin", ["push", "origin"], [["-C", "."], ["--no-pager"]]),
        ("git --git-dir=.git log", ["log"], [["--git-dir=.git"], ["--git-dir", ".git"]]),
        ("git -c x=y", [], [["-c", "x=y"]]),
        ("git --version", ["--version"], []),
        ("/usr/lib/git-core/git-push origin", ["push", "origin"], []),
        ("python -BIm pip install", ["-m", "pip", "install"], [["-B"], ["-I"]]),
        ("python -W ignore x.py -v", ["x.py", "-v"], [["-W", "ignore"]]),
        ("python -c code -m x", ["-c", "code", "-m", "x"], []),
        ("python -- -x.py", ["-x.py"], []),
        ("pytest -q -p no:x tests -k a", ["tests"], [["-q"], ["-p", "no:x"], ["-k", "a"]]),
        ("pytest -qx tests -- -p", ["tests", "-p"], [["-q"], ["-x"]]),
        ("pytest --tb short t", ["t"], [["--tb", "short"]]),
    ],
)
def test_the_subcommand_lies_behind_the_options_read_first(
    command: str, rest: list[str], options: list[list[str]]
) -> None:
    parsed = parse(command.split())
    assert list(parsed.rest) == rest
    assert [list(o) for o in parsed.options] == options


@pytest.mark.parametrize(
    ("command", "cosmetic"),
    [
        ("git --no-pager -c color.ui=never -C . status", {1, 2, 3}),
        ("git -c core.pager=x --no-pager status", {3}),
        ("python -Bu -I -m pytest", {1}),
        ("python -Bm pytest", set()),
        ("pytest -q", set()),
    ],
)
def test_only_options_that_change_output_are_cosmetic(command: str, cosmetic: set[int]) -> None:
    assert parse(command.split()).cosmetic == cosmetic


@pytest.mark.parametrize(
    ("command", "at"),
    [
        ("git -c core.pager=x log", [1]),
        ("git -c core.pager=cat log", []),
        ("git --no-pager --frob log", [2]),
        ("git -C x --exec-path=/x log", [3]),
        ("git log --oneline --output=x", [3]),
        ("git log --oneline", []),
        ("git clone -c core.sshCommand=x u", [2]),
        ("git clone -c user.name=x u", []),
        ("git submodule --quiet foreach make", [3]),
        ("git submodule update", []),
        ("git config core.pager x", [2]),
        ("git config core.pager", []),
        ("python -B -c x", [2]),
        ("python -B x.py -c", []),
        ("python -m pytest -q -p evil", [4]),
        ("python -m pytest -q -p no:evil", []),
        ("pytest -q --rootdir /x", [2]),
        ("pytest -q --rootdir x", []),
    ],
)
def test_hazards_are_found_where_they_lie(command: str, at: list[int]) -> None:
    assert [h.at for h in parse(command.split()).hazards] == at


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        (["git", "-c", "alias.p=push", "p", "x"], [("git", "push", "x")]),
        (["git", "-c", "alias.p=!make it", "p"], ["make it "]),
        (["git", "-c", "alias.p=!make it", "log"], []),
        (["git", "-c", "core.pager=less -R", "log"], []),
        (["git", "-c", "core.pager=evil -x", "log"], ["evil -x"]),
        (["git", "rebase", "--exec", "make t", "main"], ["make t"]),
        (["git", "for-each-repo", "--config=k", "push"], [("git", "push")]),
        (["python", "-m", "pytest", "-q"], [("pytest", "-q")]),
    ],
)
def test_what_a_program_runs_is_found(command: list[str], runs: list[object]) -> None:
    assert list(parse(command).runs) == runs


@pytest.mark.parametrize(
    ("command", "any_from"),
    [
        ("env git push", 1),
        ("echo git push", None),
        ("rg -n git", None),
        ("rg --pre git x", 1),
        ("git submodule foreach git push", 3),
        ("git log", None),
        ("python x.py git push", 2),
        ("python -m pip install x", None),
        ("python -m tool x", 3),
    ],
)
def test_where_any_word_may_begin_a_command(command: str, any_from: int | None) -> None:
    assert parse(command.split()).any_from == any_from
