"""Path globs: `*` matches within one segment, `**` any number of segments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache


def matches(path: str, patterns: Iterable[str]) -> bool:
    """True when the repository-relative POSIX `path` matches any of `patterns`."""
    pats = tuple(patterns)
    if not _clean(path) or any(p.startswith("!") for p in pats):
        return bool(pats) and _wcmatch(path, pats)  # an exclusion is judged with the list
    rest = []
    for pattern in pats:
        form = _simple(pattern)
        if form is None:
            rest.append(pattern)
        elif _simple_match(path, form):
            return True
    return bool(rest) and _wcmatch(path, rest)


def _wcmatch(path: str, patterns: Sequence[str]) -> bool:
    # Imported here: compiling its patterns and the import itself cost a command ~40 ms,
    # and nearly every pattern harness meets takes the plain forms below.
    from wcmatch import glob

    flags = glob.GLOBSTAR | glob.DOTGLOB | glob.NEGATE | glob.NODIR
    return glob.globmatch(path, list(patterns), flags=flags)


# What wcmatch may read as more than the character itself, with or without its flags,
# but `*`, which the plain forms take within a segment.
_SPECIAL = frozenset("?[]\\!{}()@+|~^$")


def _literal(segment: str) -> bool:
    return _starred(segment) and "*" not in segment


def _starred(segment: str) -> bool:
    """A segment whose only wildcard is `*` (never `**`, which is more than one segment)."""
    return segment not in ("", ".", "..") and "**" not in segment and not (_SPECIAL & set(segment))


Form = tuple[str, str | tuple[str, ...]]


@lru_cache(maxsize=1024)
def _simple(pattern: str) -> Form | None:
    """A pattern of one of the forms write scopes, tokens and the policy's lists are made of:
    ("all", "") for `**`, ("under", "a/b/") for `a/b/**`, ("named", "x*.y") for `**/x*.y`,
    ("exact", ("a", "*.py")) for `a/*.py`, where a and b hold no wildcard and the others no
    wildcard but `*`; None for any other pattern, which wcmatch judges."""
    parts = pattern.split("/")
    if parts == ["**"]:
        return ("all", "")
    if len(parts) == 2 and parts[0] == "**" and _starred(parts[1]):
        return ("named", parts[1])
    if len(parts) > 1 and parts[-1] == "**" and all(_literal(s) for s in parts[:-1]):
        return ("under", pattern[:-2])
    if all(_starred(s) for s in parts):
        return ("exact", tuple(parts))
    return None


def _clean(path: str) -> bool:
    """A path as git names a file: no `.`, `..` or empty segment, which wcmatch treats in
    ways of its own."""
    return all(s not in ("", ".", "..") for s in path.split("/"))


def _simple_match(path: str, form: Form) -> bool:
    kind, text = form
    if kind == "all":
        return True
    if kind == "under":
        return path.startswith(str(text))
    if kind == "named":
        return _segment(path.rpartition("/")[2], str(text))
    names = path.split("/")
    return len(names) == len(text) and all(map(_segment, names, text))


def _segment(name: str, pattern: str) -> bool:
    """Whether one path segment matches a segment pattern whose only wildcard is `*`: its
    pieces found in order, the first at the start and the last at the end."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return name == pattern
    head, tail = pieces[0], pieces[-1]
    if len(name) < len(head) + len(tail) or not (name.startswith(head) and name.endswith(tail)):
        return False
    at, end = len(head), len(name) - len(tail)
    for piece in pieces[1:-1]:
        found = name.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def as_list(scope: str | Sequence[str]) -> list[str]:
    """A plan's `write_scope` is one glob or a list of them."""
    return [scope] if isinstance(scope, str) else list(scope)


_WILD = frozenset("*?[")


def covers(outer: str, inner: str) -> bool:
    """True when every path matched by glob `inner` is also matched by glob `outer`.

    Conservative: a wildcard segment of `inner` is covered only by `**` or by the same
    segment, so an answer of True is always sound; False may be a false negative.
    """
    return _covers(outer.split("/"), inner.split("/"))


def _covers(outer: list[str], inner: list[str]) -> bool:
    if not outer:
        return not inner
    head, rest = outer[0], outer[1:]
    if head == "**":  # a trailing ** matches one segment or more, never none
        return bool(rest or inner) and any(_covers(rest, inner[i:]) for i in range(len(inner) + 1))
    if not inner or inner[0] == "**":
        return False
    seg = inner[0]
    if seg == head or (not (_WILD & set(seg)) and fnmatchcase(seg, head)):
        return _covers(rest, inner[1:])
    return False
