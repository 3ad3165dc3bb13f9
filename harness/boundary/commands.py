"""Shell commands as ai/policy.toml and the registry's `commands` read them: which commands a
command line may run, each read as its program reads it (programs.py).

A pattern of the policy is a glob over a command's words joined by single spaces, and names
every command starting with the words it names (`matches`). A denylist pattern is held
against every command a line may run (`denial`), each in every form that runs the same:
- each command the shell runs (`a; b`, `a && b`, `$(b)`), and each line inside another
  (`bash -lc '...'`, `env -S '...'`, `watch '...'`, a `git -c core.pager=...` value);
- as written, and by its program's name (`/usr/bin/git` is `git`, `python3.12` is `python`,
  `py.test` is `pytest`, `git-push` is `git push`) with the options its program reads before
  the subcommand (git's global options; python's flags before `-m`, `-c` or the script; all of
  pytest's, with its other words kept in order) taken out, and with each one kept alone;
- behind any program harness does not know (`env`, `timeout 5`, `xargs`, `find -exec`, `nice`,
  `sudo`, `VAR=x`): any of its words may begin a command, so each does; so may the words after
  what a known program runs (`git submodule foreach`, `git bisect run`, a python script), never
  those of one that only reads them (programs.DATA: `grep sudo` names no `sudo`).

An allowed command is a prefix (`allowance`): the command's words start with its words, or
do once the options that change only how the program shows its output (a Command's
`cosmetic` words) are taken out of both. The words after the prefix are the program's to
read, but for a reading.Hazard (an option or subcommand of git, python or pytest that runs
another program, loads code or settings from elsewhere, or that harness does not know), which
only a prefix holding it allows, wherever it lies in the command (`env git -c core.pager=x`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from fnmatch import fnmatchcase

from harness.boundary.programs import GRAMMARS, family, parse, program
from harness.boundary.reading import Command, split

# Shell syntax that could chain, substitute or redirect past an allowed prefix.
_SHELL_SYNTAX = re.compile(r"[;&|<>`$(){}\n\\]")
_WRAPPER = re.compile(r"^(?:/(?:usr/)?bin/)?(?:ba|z)?sh -l?c ")
# Where one command of a shell line ends and another may begin.
_OPERATORS = re.compile(r"[;&|\n(){}`]|\$\(")
# How many lines deep (a line inside a word of a line) commands are looked for.
_DEPTH = 4
# The most words a command may hold to be checked at all (a CLI's plain commands hold tens).
MAX_WORDS = 1000


def _unwrapped(command: str) -> str | None:
    """The command inside the `bash -lc '...'` wrapper a CLI puts around it (looked through
    once), or the command itself; None for a wrapper that does not hold exactly one."""
    text = command.strip()
    if not _WRAPPER.match(text):
        return text
    inner = split(text)
    return inner[2].strip() if inner is not None and len(inner) == 3 else None


def plain(command: str) -> list[str] | None:
    """The words of a command a CLI ran, or None when it holds shell syntax or does not
    parse: only a plain command can be held to a list of allowed prefixes."""
    text = _unwrapped(command)
    if text is None or _SHELL_SYNTAX.search(text):
        return None
    return split(text)


def matches(text: str, pattern: str) -> bool:
    """Whether a command (words joined by single spaces) is one the pattern names."""
    words = pattern.split()
    while words and words[-1] == "*":  # `ls *` names `ls` too, as `Bash(ls:*)` does
        words.pop()
    stem = " ".join(words)
    return not stem or fnmatchcase(text, stem) or fnmatchcase(text, stem + " *")


# -- what a line runs ---------------------------------------------------------------------------


def _lines(text: str) -> list[list[str]]:
    """A shell line, and each command its operators separate, as words."""
    found = [text, *_OPERATORS.split(text)]
    return [split(p) or p.split() for p in found if p.strip()]


def _walk(
    words: Sequence[str], want: Callable[[str], bool], depth: int = 0, held: int | None = None
) -> Iterator[tuple[int, int | None, Command, Sequence[str]]]:
    """Each command the words may run: where it starts, the word of `words` that holds it
    when it lies inside one (None: it is `words` from where it starts), the command as its
    program reads it, and its words. A command at a word that is neither the first, nor a
    known program's, nor one `want`s, is not read: it cannot be named, and the words after
    it are looked at already (they follow a program harness does not know)."""
    region = len(words)
    for s, word in enumerate(words):
        if s and s < region:
            continue
        where = s if held is None else held
        if s and any(c.isspace() for c in word):
            if depth < _DEPTH:
                for line in _lines(word):
                    yield from _walk(line, want, depth + 1, where)
            continue
        if s and program(word) not in GRAMMARS and not want(word):
            continue
        command = parse(words[s:])
        yield s, held, command, words[s:]
        if command.any_from is not None:
            region = min(region, s + command.any_from)
        for run in command.runs if depth < _DEPTH else ():
            for line in _lines(run) if isinstance(run, str) else [list(run)]:
                yield from _walk(line, want, depth + 1, where)


def denial(command: str, patterns: Iterable[str]) -> str | None:
    """The first denylist pattern naming a command the line may run, in any of its forms."""
    named = []
    for pattern in patterns:
        words = pattern.split()
        if words and "/" not in words[0]:
            words[0] = family(words[0])
        named.append((pattern, " ".join(words)))
    if not named:
        return None
    firsts = [n.split()[0] if n.split() else "*" for _, n in named]

    def want(word: str) -> bool:
        return any(fnmatchcase(word, f) or fnmatchcase(program(word), f) for f in firsts)

    forms: dict[str, None] = {}
    for words in _lines(command.strip()):
        for _, _, parsed, own in _walk(words, want):
            forms.update(dict.fromkeys([" ".join(own), *parsed.forms()]))
    return next((p for p, n in named if any(matches(f, n) for f in forms)), None)


def _bound(words: Sequence[str], prefix: Sequence[str], command: Command) -> int | None:
    """How many of the command's words the prefix names (the COSMETIC options the command
    holds among them), or None when it does not name the command."""
    bounds = [len(prefix)] if list(words[: len(prefix)]) == list(prefix) else []
    kept = [(i, w) for i, w in enumerate(words) if i not in command.cosmetic]
    theirs = [w for i, w in enumerate(prefix) if i not in parse(prefix).cosmetic]
    if [w for _, w in kept[: len(theirs)]] == theirs:
        bounds.append(kept[len(theirs)][0] if len(kept) > len(theirs) else len(words))
    return max(bounds, default=None)


def allowance(words: Sequence[str], allowed: Iterable[str]) -> str | None:
    """Why a plain command is not on the allowlist, or None when an allowed prefix names it
    and every hazard in it lies within that prefix."""
    top = parse(words)
    hazards = [
        (s + h.at if held is None else held, h)
        for s, held, command, _ in _walk(words, lambda _: False)
        for h in command.hazards
    ]
    outside = None
    for prefix in allowed:
        bound = _bound(words, prefix.split(), top)
        if bound is None:
            continue
        hit = next((h for at, h in hazards if at >= bound), None)
        if hit is None:
            return None
        outside = outside or hit
    # Named for a hazard past a prefix that names the command, else for any in it.
    outside = outside or next((h for _, h in hazards), None)
    if outside is None:
        return "not on the allowlist"
    return f"not on the allowlist: {outside.text} {outside.why}, and no allowed command names it"
