"""How git, python and pytest read their words, for the command rules (commands.py): where a
program's subcommand lies behind the options it reads first, which of those options only
change how it shows its output (COSMETIC), which of its options or subcommands run another
program, load code or settings from elsewhere, or are unknown to harness (a Hazard), and what
else it may run (a git alias, a `-c core.pager=...` value, `git submodule foreach`'s words).
Any other program either only reads its words (DATA) or, unknown, may run any of them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import PurePosixPath


def split(text: str) -> list[str] | None:
    """A line's words as the shell splits them; None when its quotes do not close."""
    try:
        return shlex.split(text)
    except ValueError:
        return None


_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Programs that only read their words: none of them begins a command (but ripgrep's after
# `--pre`, which names a program it runs on each file).
DATA = _names(
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


@dataclass(frozen=True)
class Hazard:
    """An option or subcommand only a prefix that holds it allows."""

    at: int  # the word it starts at
    text: str  # as written
    why: str


@dataclass(frozen=True)
class Command:
    """One command's words as its program reads them."""

    program: str
    options: tuple[tuple[str, ...], ...] = ()  # each read before the subcommand, in its forms
    rest: tuple[str, ...] = ()  # the subcommand and its words; pytest's other words
    hazards: tuple[Hazard, ...] = ()
    cosmetic: frozenset[int] = frozenset()  # words of options that only change its output
    runs: tuple[tuple[str, ...] | str, ...] = ()  # commands (words) and lines it may run
    any_from: int | None = None  # from this word on, any word may begin a command

    def forms(self) -> list[str]:
        """The forms a denylist pattern is held against, but for the one as written."""
        base = [self.program, *self.rest]
        return [" ".join(base)] + [" ".join([self.program, *o, *self.rest]) for o in self.options]


@dataclass
class _Found:
    options: list[tuple[str, ...]] = field(default_factory=list)
    hazards: list[Hazard] = field(default_factory=list)
    cosmetic: set[int] = field(default_factory=set)
    runs: list[tuple[str, ...] | str] = field(default_factory=list)
    any_from: int | None = None

    def option(self, at: int, written: Sequence[str], cosmetic: bool = False) -> None:
        """An option as written; one of `--name=value` is also read as `--name value`."""
        self.options.append(tuple(written))
        name, eq, value = written[0].partition("=")
        if eq and len(written) == 1 and name.startswith("--"):
            self.options.append((name, value))
        if cosmetic:
            self.cosmetic.update(range(at, at + len(written)))

    def hazard(self, at: int, text: str, why: str, runs: str | None = None) -> None:
        self.hazards.append(Hazard(at, text, why))
        if runs:
            self.runs.append(runs)

    def command(self, name: str, rest: Sequence[str]) -> Command:
        return Command(
            name,
            tuple(self.options),
            tuple(rest),
            tuple(self.hazards),
            frozenset(self.cosmetic),
            tuple(self.runs),
            self.any_from,
        )


RUNS = "runs another program"
SETTING = "sets a git setting that may run a program"
UNKNOWN = "is an option of {} harness does not know"
ELSEWHERE = "names a path outside the workspace"


def parse(words: Sequence[str]) -> Command:
    """A command's words (its program first) as its program reads them."""
    if not words:
        return Command("")
    name = program(words[0])
    base = words[0].rsplit("/", 1)[-1]
    if name == "git":
        return _git(words, base[4:] if base.startswith("git-") else None)
    if name == "python":
        return _python(words)
    if name == "pytest":
        found = _Found()
        return found.command(name, _pytest(words, 1, found))
    if name in DATA and not (name == "rg" and any(w.startswith("--pre") for w in words)):
        return Command(name, rest=tuple(words[1:]))
    return Command(name, rest=tuple(words[1:]), any_from=1)


# -- git ----------------------------------------------------------------------------------------

# git's own options before its subcommand (git.c, handle_options): those taking the next word,
# those taking `=value`, and the flags. It matches each name whole: no abbreviation, no bundle.
_GIT_NEXT = _names(
    "-c -C --git-dir --work-tree --namespace --config-env --super-prefix --shallow-file "
    "--attr-source"
)
_GIT_EQUALS = _names(
    "--git-dir --work-tree --namespace --config-env --super-prefix --attr-source --exec-path "
    "--list-cmds"
)
# COSMETIC: they change how git shows what it does, not what it does, nor where.
_GIT_COSMETIC = _names(
    "--no-pager -P --no-optional-locks --no-advice --literal-pathspecs --no-literal-pathspecs "
    "--glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-replace-objects "
    "--no-lazy-fetch"
)
_GIT_FLAGS = _GIT_COSMETIC | {
    "-p",
    "--paginate",
    "--bare",
    "--exec-path",
    "--html-path",
    "--man-path",
    "--info-path",
}
_GIT_STOP = frozenset({"-h", "--help", "-v", "--version"})  # git reads these as a subcommand

# Settings that change what git shows or records, never what it runs: `-c` may set them.
_SAFE_SETTINGS = (
    *("advice.*", "color.*", "column.*", "i18n.*", "pretty.*", "status.*", "safe.directory"),
    *("user.name", "user.email", "author.name", "author.email", "committer.name"),
    *("committer.email", "init.defaultbranch", "core.quotepath", "core.abbrev"),
    *("core.autocrlf", "core.safecrlf", "core.eol", "core.filemode", "core.ignorecase"),
    *("core.precomposeunicode", "core.whitespace", "core.commentchar", "log.date"),
    *("log.decorate", "log.abbrevcommit", "log.follow", "log.showroot", "log.mailmap"),
    *("diff.noprefix", "diff.mnemonicprefix", "diff.renames", "diff.relative", "diff.context"),
    *("diff.interhunkcontext", "diff.algorithm", "diff.indentheuristic", "diff.colormoved"),
    *("diff.statgraphwidth", "diff.suppressblankempty", "merge.conflictstyle", "merge.ff"),
    *("pull.rebase", "pull.ff", "fetch.prune", "grep.linenumber", "grep.patterntype"),
    *("grep.extendedregexp", "grep.column", "grep.fullname", "format.pretty", "blame.date"),
    *("branch.sort", "tag.sort", "commit.verbose", "commit.status"),
)
# A pager setting that names one of the usual pagers (or says on or off) runs nothing else.
_PAGER = re.compile(r"(?:cat|less|more)(?: -[A-Za-z]+)*|true|false|yes|no|on|off|1|0|")

# Subcommands that run programs they are given or configured with, or serve others.
_GIT_RUNNERS = _names(
    "difftool mergetool filter-branch instaweb daemon web--browse send-email credential "
    "credential-cache credential-cache--daemon credential-store remote-ext remote-fd hook "
    "maintenance upload-pack receive-pack shell http-backend fsmonitor--daemon p4 svn "
    "cvsimport cvsserver archimport for-each-repo"
)
# Options of git's subcommands: why each is a hazard, whether it takes a value, and the
# subcommands it is one of (None: any that has it). git takes any unambiguous start of a long
# option's name for it, so any start is held the same.
_GIT_LONG: dict[str, tuple[str, bool, frozenset[str] | None]] = {
    "--exec": (RUNS, True, None),
    "--upload-pack": (RUNS, True, None),
    "--receive-pack": (RUNS, True, None),
    "--extcmd": (RUNS, True, None),
    "--open-files-in-pager": (RUNS, False, None),  # its program only ever `=`-attached
    "--ext-diff": ("runs the diff program git is configured with", False, None),
    "--output": ("writes to the file it names", True, None),
    "--template": ("copies hooks from the folder it names", True, frozenset({"clone", "init"})),
    "--config": (SETTING, True, frozenset({"clone"})),
}
# Short options, by subcommand: the hazards (letter: why) and the letters taking a value.
_GIT_SHORT: dict[str, tuple[dict[str, str], str]] = {
    "grep": ({"O": RUNS}, "efABCm"),
    "rebase": ({"x": RUNS}, "sXCx"),
    "clone": ({"u": RUNS, "c": SETTING}, "obucj"),
}
# `git config` actions that only read or remove, and its options that take the next word.
_CONFIG_READS = _names(
    "--get --get-all --get-regexp --get-urlmatch --get-color --get-colorbool -l --list --unset "
    "--unset-all --rename-section --remove-section get list unset rename-section "
    "remove-section"
)
_CONFIG_NEXT = _names("-f --file --blob --type --default --comment --value")


def _setting_hazard(item: str) -> str | None:
    """Why `-c name=value` is a hazard, or None for a setting that runs nothing."""
    name, _, value = item.partition("=")
    name = name.lower()
    if any(fnmatchcase(name, p) for p in _SAFE_SETTINGS):
        return None
    if (name == "core.pager" or name.startswith("pager.")) and _PAGER.fullmatch(value.lower()):
        return None
    return SETTING


def _git(words: Sequence[str], dashed: str | None) -> Command:
    found = _Found()
    aliases: dict[str, str] = {}
    i = 1
    while dashed is None and i < len(words) and words[i][:1] == "-" and words[i] not in _GIT_STOP:
        word = words[i]
        name, eq, value = word.partition("=")
        if word in _GIT_FLAGS:
            found.option(i, [word], word in _GIT_COSMETIC)
            i += 1
            continue
        if eq and name in _GIT_EQUALS:
            written = [word]
        elif word in _GIT_NEXT and i + 1 < len(words):
            name, value, written = word, words[i + 1], [word, words[i + 1]]
        else:  # git refuses it, or takes its missing value for one: it runs nothing
            found.option(i, [word])
            if word not in _GIT_NEXT:
                found.hazard(i, word, UNKNOWN.format("git"))
            i += 1
            continue
        why = {"-c": _setting_hazard(value), "--config-env": SETTING}.get(name)
        if name == "--exec-path":
            why = "runs git's commands from the folder it names"
        found.option(i, written, cosmetic=name == "-c" and why is None)
        alias = name == "-c" and value.lower().startswith("alias.")
        if alias:  # run only when its subcommand is the alias (below)
            key, _, meaning = value[6:].partition("=")
            aliases[key.lower()] = meaning
        if why is not None:  # a setting's value may be the line git runs
            runs = value.partition("=")[2] if name == "-c" and not alias else None
            found.hazard(i, " ".join(written), why, runs)
        i += len(written)
    if dashed is not None:
        sub, at, start = dashed, 0, 1
    elif i < len(words):
        sub, at, start = words[i], i, i + 1
    else:
        return found.command("git", ())
    _git_subcommand(words, sub, at, start, found)
    args = tuple(words[start:])
    expansion = aliases.get(sub.lower())
    if expansion is not None:  # `-c alias.x=...` then `git x`: git runs what it expands to
        found.runs.append(
            expansion[1:] + " " + shlex.join(args)
            if expansion.startswith("!")
            else ("git", *(split(expansion) or expansion.split()), *args)
        )
    return found.command("git", (sub, *args))


def _git_subcommand(words: Sequence[str], sub: str, at: int, start: int, found: _Found) -> None:
    """The hazards of a git subcommand at `at` whose words start at `start`."""
    first = next((j for j in range(start, len(words)) if words[j][:1] != "-"), len(words))
    if sub in _GIT_RUNNERS:
        found.hazard(at, sub, RUNS)
        found.any_from = start
        if sub == "for-each-repo":  # runs `git <its words>` in each repository it lists
            found.runs.append(("git", *(w for w in words[start:] if not w.startswith("--"))))
    elif (sub, words[first] if first < len(words) else "") in (
        ("submodule", "foreach"),
        ("bisect", "run"),
    ):
        found.hazard(first, f"{sub} {words[first]}", RUNS)
        found.any_from = first + 1
    elif sub == "config":
        _git_config(words, start, found)
    shorts, takes = _GIT_SHORT.get(sub, ({}, ""))
    for j in range(start, len(words)):
        word, after = words[j], (words[j + 1] if j + 1 < len(words) else "")
        if word == "--":
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            hit = next((h for h in _GIT_LONG if len(name) > 3 and h.startswith(name)), None)
            if hit is None or sub not in (_GIT_LONG[hit][2] or {sub}):
                continue
            why, valued, _ = _GIT_LONG[hit]
            value = value if eq or not valued else after
            if why == SETTING and _setting_hazard(value) is None:
                continue
            runs = value.partition("=")[2] if why == SETTING else value
            found.hazard(j, word, why, runs if why in (RUNS, SETTING) else None)
        elif word[:1] == "-":
            for k, letter in enumerate(word[1:], 2):
                if letter in shorts:
                    value = word[k:] or (after if letter in takes else "")
                    if shorts[letter] == SETTING and _setting_hazard(value) is None:
                        break
                    runs = value.partition("=")[2] if shorts[letter] == SETTING else value
                    text = word if word[k:] or not value else f"{word} {value}"
                    found.hazard(j, text, shorts[letter], runs)
                    break
                if letter in takes:
                    break


def _git_config(words: Sequence[str], start: int, found: _Found) -> None:
    """`git config` that opens an editor, or sets a setting that may run a program."""
    places: list[int] = []
    j = start
    while j < len(words):
        word = words[j]
        if word in ("-e", "--edit") or (not places and word == "edit"):
            found.hazard(j, word, "opens an editor")
            return
        if word in _CONFIG_READS and (word.startswith("-") or not places):
            return
        if word in _CONFIG_NEXT:
            j += 1
        elif word[:1] != "-":
            places.append(j)
        j += 1
    if places and words[places[0]] == "set":
        places = places[1:]
    if len(places) >= 2 or (places and {"--add", "--replace-all"} & set(words[start:])):
        item = words[places[0]] + "=" + (words[places[1]] if len(places) > 1 else "")
        why = _setting_hazard(item)
        if why is not None:
            found.hazard(places[0], words[places[0]], why, item.partition("=")[2])


# -- python and pytest --------------------------------------------------------------------------

_PYTHON_FLAGS = "bBdEhiIOPqsSuvVx"
_PYTHON_COSMETIC = "bBdquv"
# Modules run with `python -m` whose words are only read.
_PYTHON_DATA = _names(
    "pip venv mypy ruff black isort flake8 pylint compileall py_compile json.tool unittest "
    "doctest pydoc build"
)


def _python(words: Sequence[str]) -> Command:
    found = _Found()
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


def _python_module(words: Sequence[str], module: str, start: int, found: _Found) -> Command:
    """`python ... -m module words...`: pytest's words read as pytest reads them."""
    if family(module) == "pytest":
        inner = _Found()
        _pytest(words, start, inner)
        found.hazards += inner.hazards
        found.runs.append(("pytest", *words[start:]))
    elif module not in _PYTHON_DATA:
        found.any_from = start
    return found.command("python", ("-m", *([module] if module else []), *words[start:]))


# pytest's options that take the next word (argparse, no abbreviation: allow_abbrev=False).
_PYTEST_NEXT = _names(
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


def _pytest(words: Sequence[str], start: int, found: _Found) -> list[str]:
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
