"""How git reads its words: its own options before the subcommand, which of them only change
how it shows its output, and the subcommands, options and settings that run another program
(a Hazard), with what else they may run (an alias, a `-c core.pager=...` value, `git submodule
foreach`'s words)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from fnmatch import fnmatchcase

from harness.boundary.reading import RUNS, SETTING, UNKNOWN, Command, Found, names, split

# git's own options before its subcommand (git.c, handle_options): those taking the next word,
# those taking `=value`, and the flags. It matches each name whole: no abbreviation, no bundle.
_GIT_NEXT = names(
    "-c -C --git-dir --work-tree --namespace --config-env --super-prefix --shallow-file "
    "--attr-source"
)
_GIT_EQUALS = names(
    "--git-dir --work-tree --namespace --config-env --super-prefix --attr-source --exec-path "
    "--list-cmds"
)
# COSMETIC: they change how git shows what it does, not what it does, nor where.
_GIT_COSMETIC = names(
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
_GIT_RUNNERS = names(
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
_CONFIG_READS = names(
    "--get --get-all --get-regexp --get-urlmatch --get-color --get-colorbool -l --list --unset "
    "--unset-all --rename-section --remove-section get list unset rename-section "
    "remove-section"
)
_CONFIG_NEXT = names("-f --file --blob --type --default --comment --value")


def _setting_hazard(item: str) -> str | None:
    """Why `-c name=value` is a hazard, or None for a setting that runs nothing."""
    name, _, value = item.partition("=")
    name = name.lower()
    if any(fnmatchcase(name, p) for p in _SAFE_SETTINGS):
        return None
    if (name == "core.pager" or name.startswith("pager.")) and _PAGER.fullmatch(value.lower()):
        return None
    return SETTING


def read(words: Sequence[str], dashed: str | None) -> Command:
    """git's words (or a dashed `git-<sub>` command's) as git reads them."""
    found = Found()
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


def _git_subcommand(words: Sequence[str], sub: str, at: int, start: int, found: Found) -> None:
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


def _git_config(words: Sequence[str], start: int, found: Found) -> None:
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
