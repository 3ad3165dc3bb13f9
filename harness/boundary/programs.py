"""How git (its grammar in gitgrammar.py), python and pytest read their words, for the
command rules (commands.py): where a program's subcommand lies behind the options it reads
first, which of those options only change how it shows its output (COSMETIC), which of its
options or subcommands run another program, load code or settings from elsewhere, or are
unknown to harness (a Hazard), and what else it may run (a git alias, a `-c core.pager=...`
value, `git submodule foreach`'s words). Any other program either only reads its words (DATA)
or, unknown, may run any of them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from harness.boundary import gitgrammar
from harness.boundary.reading import ELSEWHERE, RUNS, UNKNOWN, Command, Found, names

_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")


# Programs that only read their words: none of them begins a command (but ripgrep's after
# `--pre`, which names a program it runs on each file).
DATA = names(
    "cat head tail less more ls echo printf wc uniq cut tr diff cmp file stat du df tree "
    "pwd basename dirname realpath readlink touch mkdir rmdir rm cp mv ln chmod grep egrep "
    "fgrep rg ag ack jq nl tac od hexdump xxd md5sum sha1sum sha256sum column true false test "
    "which whoami id date uname ruff mypy black isort flake8 pylint"
)
GRAMMARS = frozenset({"git", "python", "pytest"})


def family(name: str) -> str:
    """One name for the names a program goes by: a pattern's `python` names `python3.12`."""
    if _PYTHON.fullmatch(name):
        return "python"
    return "pytest" if name == "py.test" else name


def program(word: str) -> str:
    """The program a command's first word runs, by its name: `/usr/bin/git` and `git-push`
    are git."""
    base = word.rsplit("/", 1)[-1]
    return "git" if base.startswith("git-") and len(base) > 4 else family(base)


def parse(words: Sequence[str]) -> Command:
    """A command's words (its program first) as its program reads them."""
    if not words:
        return Command("")
    name = program(words[0])
    base = words[0].rsplit("/", 1)[-1]
    if name == "git":
        return gitgrammar.read(words, base[4:] if base.startswith("git-") else None)
    if name == "python":
        return _python(words)
    if name == "pytest":
        found = Found()
        return found.command(name, _pytest(words, 1, found))
    if name in DATA and not (name == "rg" and any(w.startswith("--pre") for w in words)):
        return Command(name, rest=tuple(words[1:]))
    return Command(name, rest=tuple(words[1:]), any_from=1)


# -- python and pytest --------------------------------------------------------------------------

_PYTHON_FLAGS = "bBdEhiIOPqsSuvVx"
_PYTHON_COSMETIC = "bBdquv"
# Modules run with `python -m` whose words are only read.
_PYTHON_DATA = names(
    "pip venv mypy ruff black isort flake8 pylint compileall py_compile json.tool unittest "
    "doctest pydoc build"
)


def _python(words: Sequence[str]) -> Command:
    found = Found()
    i = 1
    while i < len(words) and words[i][:1] == "-" and words[i] not in ("-", "--"):
        word = words[i]
        if word.startswith("--"):
            name, eq, _ = word.partition("=")
            written = words[i : i + 2] if name == "--check-hash-based-pycs" and not eq else [word]
            found.option(i, written)
            if not name.startswith(("--help", "--version", "--check-hash-based-pycs")):
                found.hazard(i, word, UNKNOWN.format("python"))
            i += len(written)
            continue
        for k, letter in enumerate(word[1:], 2):
            if letter not in "cmWX":
                found.options.append(("-" + letter,))
                if letter not in _PYTHON_FLAGS:
                    found.hazard(i, word, UNKNOWN.format("python"))
                continue
            value = word[k:] or (words[i + 1] if i + 1 < len(words) else "")
            nxt = i + (1 if word[k:] or i + 1 == len(words) else 2)
            if letter in "WX":
                found.options.append(("-" + letter, value))
                i = nxt - 1
                break
            if letter == "m":
                return _python_module(words, value, nxt, found)
            found.hazard(i, word, "runs the code it is given")
            return found.command("python", ("-c", value, *words[nxt:]))
        else:
            if all(letter in _PYTHON_COSMETIC for letter in word[1:]):
                found.cosmetic.add(i)
        i += 1
    i += 1 if i < len(words) and words[i] == "--" else 0
    if i < len(words):
        found.any_from = i + 1  # a script may run its words
    return found.command("python", tuple(words[i:]))


def _python_module(words: Sequence[str], module: str, start: int, found: Found) -> Command:
    """`python ... -m module words...`: pytest's words read as pytest reads them."""
    if family(module) == "pytest":
        inner = Found()
        _pytest(words, start, inner)
        found.hazards += inner.hazards
        found.runs.append(("pytest", *words[start:]))
    elif module not in _PYTHON_DATA:
        found.any_from = start
    return found.command("python", ("-m", *([module] if module else []), *words[start:]))


# pytest's options that take the next word (argparse, no abbreviation: allow_abbrev=False).
_PYTEST_NEXT = names(
    "--maxfail --pdbcls --capture --lfnf --last-failed-no-failures --durations --durations-min "
    "--verbosity --tb --show-capture --color --code-highlight --pastebin --junit-xml --junitxml "
    "--junit-prefix --max-warnings --ignore --ignore-glob --deselect --confcutdir --import-mode "
    "--doctest-report --doctest-glob --rootdir --basetemp --assert --log-level --log-format "
    "--log-date-format --log-cli-level --log-cli-format --log-cli-date-format --log-file "
    "--log-file-mode --log-file-level --log-file-format --log-file-date-format "
    "--log-auto-indent --log-disable --report-chars --pythonwarnings --config-file "
    "--override-ini --numprocesses --maxprocesses --max-worker-restart --dist --tx --px "
    "--rsyncdir --rsyncignore --cov --cov-report --cov-config --timeout --reruns"
)
_PYTEST_SHORT = "kmcpoWrn"  # the short options that take a value
_PYTEST_PATHS = frozenset({"-c", "--config-file", "--rootdir", "--confcutdir", "--basetemp"})
# `-o name=value` settings that load code, or read or write where they point.
_PYTEST_INI_PATHS = frozenset({"pythonpath", "cache_dir", "testpaths", "confcutdir"})


def _elsewhere(path: str) -> bool:
    return path.startswith(("/", "~")) or ".." in PurePosixPath(path).parts


def _pytest_hazard(name: str, value: str) -> str | None:
    if name == "-p" and not value.startswith("no:"):
        return "loads the plugin it names"
    if name == "--pdbcls":
        return "loads the module it names"
    if name in ("--tx", "--px", "--rsyncdir"):
        return RUNS
    if name in _PYTEST_PATHS and _elsewhere(value):
        return ELSEWHERE
    if name in ("-o", "--override-ini"):
        key, _, setting = value.partition("=")
        if key.strip() == "addopts":
            return "sets the options pytest runs with"
        if key.strip() in _PYTEST_INI_PATHS and any(map(_elsewhere, setting.split())):
            return ELSEWHERE
    return None


def _pytest(words: Sequence[str], start: int, found: Found) -> list[str]:
    """pytest's options (anywhere) read into `found`; its other words, in order."""
    others: list[str] = []
    i = start
    while i < len(words):
        word = words[i]
        if word == "--":
            return others + list(words[i + 1 :])
        if word.startswith("@"):
            found.hazard(i, word, "reads more options from the file it names")
            others.append(word)
        elif word.startswith("--"):
            name, eq, value = word.partition("=")
            written = words[i : i + 2] if name in _PYTEST_NEXT and not eq else [word]
            value = written[-1] if len(written) == 2 else value
            found.option(i, written)
            why = _pytest_hazard(name, value)
            if why is not None:
                found.hazard(i, " ".join(written), why)
            i += len(written) - 1
        elif word[:1] == "-" and word != "-":
            for k, letter in enumerate(word[1:], 2):
                if letter not in _PYTEST_SHORT:
                    found.options.append(("-" + letter,))
                    continue
                value = word[k:] or (words[i + 1] if i + 1 < len(words) else "")
                found.options.append(("-" + letter, value))
                why = _pytest_hazard("-" + letter, value)
                if why is not None:
                    found.hazard(i, word if word[k:] else f"{word} {value}", why)
                i += 0 if word[k:] else 1
                break
        else:
            others.append(word)
        i += 1
    return others
