"""Path globs: `*` matches within one segment, `**` any number of segments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from wcmatch import glob

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.NEGATE | glob.NODIR


def matches(path: str, patterns: Iterable[str]) -> bool:
    """True when the repository-relative POSIX `path` matches any of `patterns`."""
    pats = list(patterns)
    return bool(pats) and glob.globmatch(path, pats, flags=_FLAGS)


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
