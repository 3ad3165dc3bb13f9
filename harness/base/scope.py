"""Path globs: `*` matches within one segment, `**` any number of segments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache


def matches(path: str, patterns: Iterable[str]) -> bool:
    """True when the repository-relative POSIX `path` matches any of `patterns`."""
    pats = tuple(patterns)
    if not pats:
        return False
    simple = [_simple(p) for p in pats]
    if _clean(path) and all(form is not None for form in simple):
        return any(_simple_match(path, form) for form in simple if form is not None)
    return _wcmatch(path, pats)


def _wcmatch(path: str, patterns: tuple[str, ...]) -> bool:
    # Imported here: compiling its patterns and the import itself cost a command ~40 ms,
    # and nearly every pattern harness meets takes the plain forms below.
    from wcmatch import glob

    flags = glob.GLOBSTAR | glob.DOTGLOB | glob.NEGATE | glob.NODIR
    return glob.globmatch(path, list(patterns), flags=flags)


# What wcmatch may read as more than the character itself, with or without its flags.
_SPECIAL = frozenset("*?[]\\!{}()@+|~^$")


def _literal(segment: str) -> bool:
    return segment not in ("", ".", "..") and not (_SPECIAL & set(segment))


@lru_cache(maxsize=1024)
def _simple(pattern: str) -> tuple[str, str] | None:
    """A pattern of one of the forms every write scope and policy list is made of, as
    (form, text): ("all", "") for `**`, ("under", "a/b/") for `a/b/**`, ("named", "x")
    for `**/x`, ("exact", "a/x") for `a/x`, where a, b and x hold no wildcard; None for
    any other pattern, which wcmatch judges."""
    parts = pattern.split("/")
    if parts == ["**"]:
        return ("all", "")
    if len(parts) == 2 and parts[0] == "**" and _literal(parts[1]):
        return ("named", parts[1])
    if len(parts) > 1 and parts[-1] == "**" and all(_literal(s) for s in parts[:-1]):
        return ("under", pattern[:-2])
    if all(_literal(s) for s in parts):
        return ("exact", pattern)
    return None


def _clean(path: str) -> bool:
    """A path as git names a file: no `.`, `..` or empty segment, which wcmatch treats in
    ways of its own."""
    return all(s not in ("", ".", "..") for s in path.split("/"))


def _simple_match(path: str, form: tuple[str, str]) -> bool:
    kind, text = form
    if kind == "all":
        return True
    if kind == "under":
        return path.startswith(text)
    if kind == "named":
        return path.rpartition("/")[2] == text
    return path == text


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
