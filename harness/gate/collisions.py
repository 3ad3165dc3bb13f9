"""Names that are one file on another file system: macOS and Windows checkouts fold case,
macOS normalises Unicode (NFD and NFC spell one name) and Windows drops a name's trailing dots
and spaces. Two such spellings are two files on Linux and one elsewhere, so the gate refuses a
new path spelled like another of the tree."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator


def fold(path: str) -> str:
    """The spelling a case-insensitive, normalising filesystem (macOS, Windows) sees."""
    return unicodedata.normalize("NFC", path).casefold()


def key(path: str) -> str:
    """What every such file system sees: folded, each part without trailing dots and spaces."""
    return "/".join(part.rstrip(" .") or part for part in fold(path).split("/"))


class Spellings:
    """The files of a tree and the folders holding them, each by the spelling it has, under
    the key another file system sees it by; changed as an answer's sections apply in order."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._files: set[str] = set()
        self._spelling: dict[str, str] = {}
        self._uses: Counter[str] = Counter()
        for path in paths:
            self.add(path)

    def take(self, kind: str, path: str, old_path: str | None) -> str | None:
        """Count a change in, as its section applies; the other spelling a new path would be
        the same file as, if any (a case-only rename of one file frees its old one first)."""
        if kind in ("delete", "rename"):
            self.remove(old_path or path)
        if kind in ("add", "rename"):
            clash = self.clash(path)
            if clash is not None:
                return clash
            self.add(path)
        return None

    def holds(self, path: str) -> bool:
        return path in self._files

    def clash(self, path: str) -> str | None:
        """The other spelling that `path`, or a folder on its way, would be the same file as."""
        for prefix in _prefixes(path):
            known = self._spelling.get(key(prefix))
            if known is not None and known != prefix:
                return known
        return None

    def add(self, path: str) -> None:
        if path in self._files:
            return
        self._files.add(path)
        for prefix in _prefixes(path):
            self._spelling.setdefault(key(prefix), prefix)
            self._uses[key(prefix)] += 1

    def remove(self, path: str) -> None:
        if path not in self._files:
            return
        self._files.discard(path)
        for prefix in _prefixes(path):
            self._uses[key(prefix)] -= 1
            if not self._uses[key(prefix)]:
                del self._uses[key(prefix)], self._spelling[key(prefix)]


def _prefixes(path: str) -> Iterator[str]:
    """`a`, `a/b`, `a/b/c` for `a/b/c`."""
    parts = path.split("/")
    return ("/".join(parts[: n + 1]) for n in range(len(parts)))
