"""The paths a patch header names, read as `git apply` reads them (its apply.c), so the gate
holds to its rules the very path git then writes: C-quoted names decoded, GNU timestamps cut
off, the a/ b/ prefixes and traditional naming (`--- a/file.orig` / `+++ b/file`) resolved."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

# Categories that never belong in a path: controls, format chars (bidi overrides,
# zero-width joiners that HFS+ ignores), surrogates, private/unassigned, line separators.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, "\\": 92, '"': 34}
_OCTAL = re.compile(r"[0-3][0-7]{2}")
# The zone and time that end a GNU or POSIX timestamp (diff_timestamp_len's pieces).
_ZONE = re.compile(r" [+-](?:\d{4}|\d\d:\d\d)$")
_TIME = re.compile(r" \d\d:\d\d:\d\d(?:\.\d+)?$")
_DATE = re.compile(r"(?:\d\d)?\d\d-\d\d-\d\d$")
_EPOCH = re.compile(
    r"(1969-12-31|1970-01-01) ([0-2]\d):([0-5]\d):00(?:\.0+)? ([-+])([0-2]\d):?([0-5]\d)"
)
DEV_NULL = "/dev/null"
# The folder git strips from each name of a `diff --git` patch: one part, no blank in it.
_PREFIX = re.compile(r"[^/ \t]+/")
_SECOND_PREFIX = re.compile(r" [^/ \t]+/")


class Unreadable(ValueError):
    """A header name git would read differently from its face, or not at all."""


def has_bad_char(text: str) -> bool:
    return any(unicodedata.category(char) in _BAD_CATEGORIES for char in text)


def unquote(text: str) -> tuple[str, str]:
    """The C-quoted name `text` starts with (git's core.quotePath form), decoded, and the
    text after its closing quote."""
    out, at = bytearray(), 1
    while at < len(text):
        char = text[at]
        if char == '"':
            try:
                return bytes(out).decode("utf-8"), text[at + 1 :]
            except UnicodeDecodeError:
                raise Unreadable("quoted path is not UTF-8") from None
        if char != "\\":
            out += char.encode("utf-8", "surrogatepass")
            at += 1
            continue
        code = text[at + 1 : at + 2]
        if octal := _OCTAL.match(text, at + 1):
            out.append(int(octal[0], 8))
            at += 4
        elif code in _ESCAPES:
            out.append(_ESCAPES[code])
            at += 2
        else:
            raise Unreadable("bad escape in quoted path")
    raise Unreadable("unterminated quoted path")


def timestamp_len(line: str) -> int:
    """How many characters at the end of a ---/+++ name are a timestamp with the blank before
    it (git's diff_timestamp_len: date, time and zone optional but in this order)."""
    end = len(line)
    if not line[-1:].isdigit():
        return 0
    zone = _ZONE.search(line, 0, end)
    end = zone.start() if zone else end
    time = _TIME.search(line, 0, end)
    end = time.start() if time else end
    date = _DATE.search(line, 0, end)
    if date is None or date.start() == 0:
        return 0
    end = date.start()
    if line[end - 1] == "\t":
        return len(line) - end + 1
    if line[end - 1] != " ":
        return 0
    return len(line) - len(line[:end].rstrip(" "))


def is_epoch(line: str) -> bool:
    """Whether the timestamp after a ---/+++ line's last TAB is the epoch, which GNU diff
    writes for a side that does not exist (git's has_epoch_timestamp)."""
    stamp = _EPOCH.fullmatch(line.rpartition("\t")[2]) if "\t" in line else None
    if stamp is None:
        return False
    zone = int(stamp[5]) * 60 + int(stamp[6])
    minutes = int(stamp[2]) * 60 + int(stamp[3]) - (zone if stamp[4] == "+" else -zone)
    return minutes == (24 * 60 if stamp[1] == "1969-12-31" else 0)


def side(text: str, *, traditional: bool) -> str | None:
    """The name after `--- ` or `+++ `, prefix still on; None for /dev/null."""
    if text.startswith('"'):
        name, rest = unquote(text)
        _tail(rest)
        return name
    if traditional:
        cut = timestamp_len(text)
        name, rest = (text[: len(text) - cut], "") if cut else _at_tab(text)
    else:
        name, rest = _at_tab(text)
    _tail(rest)
    if has_bad_char(name):
        raise Unreadable("control character in header")
    return None if name == DEV_NULL else name


def _at_tab(text: str) -> tuple[str, str]:
    # git ends a name at its first TAB: one it writes after a name holding a space so
    # patch(1) can find the end, or one before a timestamp
    name, tab, rest = text.partition("\t")
    return name, tab + rest


def _tail(rest: str) -> None:
    """What follows a name: nothing, git's lone TAB, or a TAB and a timestamp; git ignores
    anything else there, so a name cannot hide behind it."""
    if rest not in ("", "\t") and not (rest[:1] == "\t" and timestamp_len(rest) == len(rest)):
        raise Unreadable("control character in header")


def guess_strip(old: str | None, new: str | None) -> int:
    """How many leading folders git strips from a traditional patch's names (guess_p_value:
    none when a name holds no slash, else one)."""
    guesses = [-1 if name is None or "/" in name else 0 for name in (old, new)]
    first = guesses[0] if guesses[0] >= 0 else guesses[1]
    return first if 0 <= first == guesses[1] else 1


def traditional_name(old: str, new: str) -> str:
    """The one path git patches when a traditional header names two: the shorter when one
    is the other with something tacked on (`file.orig`, `file~`), else the new one."""
    return old if len(old) < len(new) and new.startswith(old) else new


def git_line(rest: str) -> tuple[str, str] | None:
    """The two names of a `diff --git` line when either is C-quoted; None when neither is."""
    if rest.startswith('"'):
        first, after = unquote(rest)
        if not after.startswith(" "):
            raise Unreadable("bad diff --git line")
        after = after[1:]
        if after.startswith('"'):
            second, tail = unquote(after)
            if tail:
                raise Unreadable("bad diff --git line")
            return first, second
        return first, after
    # With the first name bare, git takes the first quote as the second name's start.
    at = rest.find('"')
    if at < 0:
        return None
    second, tail = unquote(rest[at:])
    if at == 0 or rest[at - 1] != " " or tail:
        raise Unreadable("bad diff --git line")
    return rest[: at - 1], second


def sides(minus: str, plus: str, *, traditional: bool) -> tuple[str | None, str | None]:
    """The old and new paths of a ---/+++ pair as `git apply` reads them (None: no such side),
    from the text after `--- ` and `+++ `; `traditional` when no `diff --git` line leads."""
    old_name, new_name = side(minus, traditional=traditional), side(plus, traditional=traditional)
    # the first folder is stripped whatever it is (`diff -urN old/ new/`, git's `i/ w/`)
    strip = guess_strip(old_name, new_name) if traditional else 1
    old, new = _strip(old_name, strip), _strip(new_name, strip)
    if not traditional or old is None or new is None:
        return old, new
    # git reads a traditional pair as one path, created or deleted when GNU diff gives a
    # side the epoch as its time; two unrelated names it would take the new of are refused.
    if old != new and (new.startswith(old) or old.startswith(new)):
        old = new = traditional_name(old, new)
    if is_epoch(minus):
        return None, new
    if is_epoch(plus):
        return new, None
    return old, new


def check_git_prefixes(rest: str) -> None:
    if not _PREFIX.match(rest) or not _SECOND_PREFIX.search(rest):
        raise Unreadable("missing a/ b/ prefix")


def git_pairs(rest: str, known: Iterable[str | None]) -> list[tuple[str, str]]:
    """The splits of `P/OLD Q/NEW` that a name from another header, or equal halves, vouch
    for; P and Q are stripped whatever they are, as git does (`a/ b/`, or `i/ w/` with
    diff.mnemonicPrefix).

    Names may hold " x/", so the line alone can split many ways; keeping every split is
    quadratic in a header built to split thousands of ways. Each name fixes a split by its
    length, so at most two per name are tried. With no other name the entry is refused
    later anyway; equal halves (`a/P b/P`, as git reads it) are taken only so that a bad
    name there is reported as such.
    """
    names = [name for name in known if name is not None]
    cuts = set() if names else {len(rest) // 2}
    for name in names:
        cuts.add(rest.find("/") + 1 + len(name))  # the old name after the first prefix
        slash = len(rest) - len(name) - 1  # the new name after the second prefix
        if slash > 0 and rest[slash] == "/":
            cuts.add(rest.rfind(" ", 0, slash))
    pairs = []
    for k in sorted(cuts):
        old, new = rest[:k], rest[k + 1 :]
        if 0 < k < len(rest) and rest[k] == " " and _PREFIX.match(old) and _PREFIX.match(new):
            pairs.append((old.split("/", 1)[1], new.split("/", 1)[1]))
    return [pair for pair in pairs if names or pair[0] == pair[1]]


def _strip(name: str | None, strip: int) -> str | None:
    """`name` without the first folder, which git strips from it (none when `strip` is 0)."""
    return name if name is None or strip == 0 else unprefix(name)


def unprefix(name: str) -> str:
    """`name` without its first folder (`a/`, `b/`, or whatever it is)."""
    if not name.startswith("/") and "/" in name:
        return name.split("/", 1)[1]
    raise Unreadable("absolute path" if name.startswith("/") else "missing a/ b/ prefix")
