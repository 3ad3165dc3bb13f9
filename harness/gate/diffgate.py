"""The diff gate: accept a worker's per-file patches only when every rule holds; never repair."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from harness.base.errors import Halted
from harness.base.printable import one_line
from harness.base.scope import matches
from harness.gate import patchbody, patchnames
from harness.gate.collisions import Spellings, fold
from harness.gate.patchnames import has_bad_char

OWNED_PREFIX = "ai/"

# Dependency manifests and lock files of the common ecosystems, at any depth.
_MANIFEST_NAMES = (
    "pyproject.toml setup.py setup.cfg requirements*.txt requirements*.in constraints*.txt"
    " Pipfile Pipfile.lock poetry.lock uv.lock environment.yml package.json package-lock.json"
    " yarn.lock pnpm-lock.yaml Cargo.toml Cargo.lock go.mod go.sum Gemfile Gemfile.lock pom.xml"
    " build.gradle build.gradle.kts composer.json"
)
DEFAULT_MANIFESTS: tuple[str, ...] = tuple(f"**/{name}" for name in _MANIFEST_NAMES.split())

# What every common file system holds: 255 bytes a name (ext4, APFS, NTFS in UTF-16 units),
# 1024 a path (macOS's PATH_MAX; harness also writes the tree beneath folders of its own).
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024

Kind = Literal["add", "modify", "delete", "rename"]


@dataclass(frozen=True)
class Rules:
    write_scope: tuple[str, ...]
    token_paths: tuple[str, ...]
    readonly: tuple[str, ...]
    creates: tuple[str, ...]
    cited: frozenset[str]
    manifests: tuple[str, ...]
    no_new_deps: bool
    special: frozenset[str] = frozenset()
    allow_mode_change: bool = False
    max_bytes: int = 1_000_000
    max_files: int = 100
    tree: frozenset[str] = frozenset()  # the files the answer applies to, for name clashes


@dataclass(frozen=True)
class Change:
    kind: Kind
    path: str
    old_path: str | None
    patch: str


class DiffRefused(Halted):
    """A worker diff broke a rule, so none of the batch may be applied."""

    def __init__(self, reason: str, file: str | None = None, index: int | None = None) -> None:
        self.reason = reason
        self.file = file
        self.index = index
        # One line, its backslashes as they are: whoever shows it escapes it (printable).
        shown = "" if file is None else f" ({one_line(file[:120])})"
        super().__init__(reason if index is None else f"diff {index}{shown}: {reason}")


@dataclass
class _Header:
    git: list[tuple[str, str]] | None = None  # the a/ b/ splits of `diff --git` vouched for
    old: str | None = None  # `---` path without prefix; None for /dev/null
    new: str | None = None
    has_files: bool = False  # saw a complete ---/+++ pair
    modes: dict[str, str] = field(default_factory=dict)
    rename: dict[str, str] = field(default_factory=dict)
    similarity: int | None = None

    def bare(self) -> bool:
        """No ---/+++ pair and no rename: only an empty file's creation or deletion."""
        return not self.rename and not self.has_files

    def paths(self) -> list[str]:
        pairs = self.git or []
        found = [p for pair in pairs for p in pair] + list(self.rename.values())
        return found + [p for p in (self.old, self.new) if p is not None]


_MODE = re.compile(r"(old mode|new mode|new file mode|deleted file mode) (\d{6})")
_INDEX = re.compile(r"index [0-9a-f]{4,64}\.\.[0-9a-f]{4,64}(?: (\d{6}))?")
_SIMILARITY = re.compile(r"similarity index (\d{1,3})%")
_RENAME = re.compile(r"rename (from|to) (.+)")
_SPECIAL_MODE = re.compile(r"(?:(?:old|new|new file|deleted file) mode|index \S+) (1[26]0000)")
_DRIVE = re.compile(r"[A-Za-z]:")
_REGULAR, _EXECUTABLE = "100644", "100755"
_EMPTY: dict[str, Kind] = {"new file mode": "add", "deleted file mode": "delete"}


def check(diffs: Sequence[Mapping[str, object]], rules: Rules) -> list[Change]:
    """Return the changes in input order, or raise DiffRefused for the first problem."""
    if diffs and not rules.token_paths:
        raise DiffRefused("no write token")
    if len(diffs) > rules.max_files:
        raise DiffRefused(f"too many files ({len(diffs)} > {rules.max_files})")
    entries = [_fields(index, entry) for index, entry in enumerate(diffs)]
    size = sum(len(patch.encode("utf-8", "surrogatepass")) for _, patch in entries)
    if size > rules.max_bytes:
        raise DiffRefused(f"diff too large ({size} > {rules.max_bytes} bytes)")
    changes: list[Change] = []
    # Sections apply in order, so one path may be in several: each is gated on its own.
    spellings = Spellings(rules.tree)
    made: set[str] = set()  # an earlier section's new path needs no citation
    for index, (file, patch) in enumerate(entries):
        try:
            change = _check_one(file, patch, rules, frozenset(made), spellings)
            clash = spellings.take(change.kind, change.path, change.old_path)
            if clash is not None:
                shown = repr(clash)[1:-1][:120]
                raise DiffRefused(
                    f"same file as {shown} on a case-insensitive, normalising or Windows"
                    " file system"
                )
            if change.kind in ("add", "rename"):
                made.add(change.path)
        except DiffRefused as bad:
            # helpers refuse without context; attach which entry it was
            raise DiffRefused(bad.reason, file, index) from None
        changes.append(change)
    return changes


def apply_order(changes: Sequence[Change]) -> list[Change]:
    """The order harness applies the sections in: as given, but deletions of paths no
    earlier section touched first, so a deleted file's path may become a folder."""
    touched: set[str] = set()
    early: list[int] = []
    for n, change in enumerate(changes):
        if change.kind == "delete" and change.path not in touched:
            early.append(n)
        touched.update(_ends(change))
    first = set(early)
    return [changes[n] for n in early + [n for n in range(len(changes)) if n not in first]]


def _fields(index: int, entry: object) -> tuple[str, str]:
    if not isinstance(entry, Mapping):
        raise DiffRefused("entry is not an object", None, index)
    file, patch = entry.get("file"), entry.get("patch")
    shown = file if isinstance(file, str) else None
    if file is None or patch is None:
        raise DiffRefused("missing file or patch field", shown, index)
    if not isinstance(file, str) or not isinstance(patch, str):
        raise DiffRefused("file or patch is not a string", shown, index)
    return file, patch


def _check_one(
    file: str, patch: str, rules: Rules, made: frozenset[str], tree: Spellings
) -> Change:
    if "\0" in patch:
        raise DiffRefused("NUL byte in patch")
    # lone surrogates (left by a lossy decode) cannot be written back out as UTF-8
    if any("\ud800" <= char <= "\udfff" for char in patch):
        raise DiffRefused("patch is not valid UTF-8 text")
    if not patch.strip():
        raise DiffRefused("empty patch")
    if not patch.endswith("\n"):
        raise DiffRefused("truncated patch (no final newline)")
    lines = patch[:-1].split("\n")
    start = next((n for n, line in enumerate(lines) if line.startswith("@@")), len(lines))
    head, body = lines[:start], lines[start:]
    _scan_dangerous(head)
    try:
        header = _parse_header(head)
    except patchnames.Unreadable as bad:
        raise DiffRefused(str(bad)) from None
    _check_modes(header.modes, rules.allow_mode_change)
    change = _resolve(header, file, patch, has_body=bool(body))
    try:
        hunks = patchbody.count_hunks(body)
    except patchbody.Malformed as bad:
        raise DiffRefused(str(bad)) from None
    pure_rename = change.kind == "rename" and header.similarity == 100
    if hunks == 0 and not (pure_rename or header.bare()):
        raise DiffRefused("no hunks")
    # From `--- ` on when there is one: unidiff splits a `diff --git` line at its last " b/",
    # so a name holding " b/" (git reads it by the other headers) would fail it.
    minus = next((n for n, line in enumerate(head) if line.startswith("--- ")), 0)
    try:
        patchbody.cross_check("".join(line + "\n" for line in lines[minus:]), hunks)
    except patchbody.Malformed as bad:
        raise DiffRefused(str(bad)) from None
    # git takes a traditional patch of one hunk with no old lines, for a path it does
    # not find, as that path's creation: so does the gate, and holds it to `creates`.
    top = patchbody.HUNK.fullmatch(body[0]) if hunks == 1 and header.git is None else None
    if change.kind == "modify" and top and top[1] == "0" and not tree.holds(change.path):
        change = Change("add", change.path, None, patch)
    _check_policy(change, rules, made)
    return change


def _scan_dangerous(head: list[str]) -> None:
    # Runs before structural parsing so these get their own reason wherever they sit.
    for line in head:
        if line.startswith(("GIT binary patch", "Binary files ", "Binary file ")):
            raise DiffRefused("binary patch")
        special = _SPECIAL_MODE.match(line)
        if special:
            raise DiffRefused("symlink mode" if special[1] == "120000" else "gitlink mode")
        if line.startswith(("copy from ", "copy to ")):
            raise DiffRefused("copy header")


def _parse_header(head: list[str]) -> _Header:
    header = _Header()
    git: str | None = None
    quoted: tuple[str, str] | None = None
    sides: list[str] = []
    stage = 0  # 0: extended headers, 1: after ---, 2: after +++
    for n, line in enumerate(head):
        if line.startswith("diff --git "):
            if n:
                raise DiffRefused("more than one file in entry")
            _no_control(line)
            git = line[len("diff --git ") :]
            quoted = patchnames.git_line(git)
            if quoted is None:
                patchnames.check_git_prefixes(git)
        elif n == 0 and line.startswith("diff -"):
            _no_control(line)  # the command `diff -ruN` writes first: git reads past it
        elif line.startswith("--- ") and stage == 0:
            sides, stage = [line[4:]], 1
        elif line.startswith("+++ ") and stage == 1:
            sides, stage = [*sides, line[4:]], 2
        elif line.startswith("--- "):
            raise DiffRefused("more than one file in entry")
        elif stage or git is None:
            _no_control(line)
            raise DiffRefused("unknown header line")
        else:
            _extended(header, line)
    if stage == 1:
        raise DiffRefused("--- without +++ header")
    header.has_files = stage == 2
    if header.has_files:
        header.old, header.new = patchnames.sides(sides[0], sides[1], traditional=git is None)
    if quoted is not None:
        header.git = [(patchnames.unprefix(quoted[0]), patchnames.unprefix(quoted[1]))]
    elif git is not None:
        header.git = patchnames.git_pairs(git, [header.old, header.new, *header.rename.values()])
    return header


def _extended(header: _Header, line: str) -> None:
    _no_control(line)
    if mode := _MODE.fullmatch(line):
        header.modes[mode[1]] = mode[2]
    elif index := _INDEX.fullmatch(line):
        if index[1]:
            header.modes.setdefault("index", index[1])
    elif similarity := _SIMILARITY.fullmatch(line):
        header.similarity = int(similarity[1])
    elif rename := _RENAME.fullmatch(line):
        name = rename[2]
        if name.startswith('"'):
            name, rest = patchnames.unquote(name)
            if rest:
                raise DiffRefused("bad rename header")
        header.rename[rename[1]] = name
    else:
        raise DiffRefused("unknown header line")


def _no_control(text: str) -> None:
    if has_bad_char(text):
        raise DiffRefused("control character in header")


def _safe_path(path: str) -> None:
    if not path:
        raise DiffRefused("empty path")
    if has_bad_char(path):
        raise DiffRefused("control character in path")
    if "\\" in path:
        raise DiffRefused("backslash in path")
    if path.startswith("/") or _DRIVE.match(path):
        raise DiffRefused("absolute path")
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise DiffRefused(f"path too long for the file system ({size} > {MAX_PATH_BYTES} bytes)")
    for segment in path.split("/"):
        if not segment:
            raise DiffRefused("empty path segment")
        size = len(segment.encode("utf-8", "surrogatepass"))
        if size > MAX_NAME_BYTES:
            raise DiffRefused(
                f"name too long for the file system ({size} > {MAX_NAME_BYTES} bytes)"
            )
        if segment == ".":
            raise DiffRefused("dot segment")
        # Windows drops trailing dots and spaces, so "... " may still mean ".."
        if not segment.rstrip(" ."):
            raise DiffRefused("path traversal")
        if _is_dotgit(segment):
            raise DiffRefused(".git path")


def _is_dotgit(segment: str) -> bool:
    # The spellings git itself refuses: any case, NTFS trailing dots/spaces,
    # alternate data streams (".git::$INDEX_ALLOCATION") and the 8.3 short name.
    name = segment.casefold().split(":", 1)[0].rstrip(" .")
    return name in {".git", "git~1"}


def _resolve(header: _Header, file: str, patch: str, *, has_body: bool) -> Change:
    for path in [*header.paths(), file]:
        _safe_path(path)
    if header.bare():
        if has_body:
            raise DiffRefused("missing ---/+++ header")
        kind, path, old_path = _empty_side(header)
    else:
        kind, path, old_path = _sides(header)
    wanted = {"add": "new file mode", "delete": "deleted file mode"}.get(kind)
    if ({"new file mode", "deleted file mode"} - {wanted}) & header.modes.keys():
        raise DiffRefused("conflicting file mode headers")
    if header.git is not None and (old_path or path, path) not in header.git:
        raise DiffRefused("diff --git paths disagree with ---/+++")
    if file != path:
        shown = repr(path)[1:-1][:120]
        raise DiffRefused(f"file field does not match patch path {shown} (as git reads it)")
    return Change(kind, path, old_path, patch)


def _sides(header: _Header) -> tuple[Kind, str, str | None]:
    old, new = header.old, header.new
    if header.rename:
        source, target = header.rename.get("from"), header.rename.get("to")
        if source is None or target is None or source == target:
            raise DiffRefused("bad rename header")
        if header.has_files and (old, new) != (source, target):
            raise DiffRefused("---/+++ paths disagree with rename header")
        return "rename", target, source
    if new is None:
        if old is None:
            raise DiffRefused("both sides are /dev/null")
        return "delete", old, None
    if old is None:
        return "add", new, None
    if old != new:
        raise DiffRefused("---/+++ paths disagree")
    return "modify", new, None


def _empty_side(header: _Header) -> tuple[Kind, str, None]:
    """git writes the creation or deletion of an empty file with no ---/+++ and no hunk:
    its path is then the one `diff --git a/P b/P` names twice."""
    kinds = [kind for mode, kind in _EMPTY.items() if mode in header.modes]
    if len(kinds) > 1:
        raise DiffRefused("conflicting file mode headers")
    if not kinds or not header.git or len(header.git) != 1:
        raise DiffRefused("no hunks")
    return kinds[0], header.git[0][1], None


def _check_modes(modes: Mapping[str, str], allow: bool) -> None:
    if any(mode not in (_REGULAR, _EXECUTABLE) for mode in modes.values()):
        raise DiffRefused("unsupported file mode")
    changing = {"old mode", "new mode"} & modes.keys()
    if changing and not allow:
        raise DiffRefused("mode change")
    if changing and (len(changing) < 2 or modes["old mode"] == modes["new mode"]):
        raise DiffRefused("incomplete mode change")
    if modes.get("new file mode", _REGULAR) != _REGULAR and not allow:
        raise DiffRefused("mode change (new executable file)")


def _check_policy(change: Change, rules: Rules, made: frozenset[str]) -> None:
    for path in _ends(change):
        # A rename has two ends, and the entry names one: the refusal names the end at fault.
        end = "" if change.old_path is None else f": {one_line(path)}"
        if _beneath(path, OWNED_PREFIX[:-1]):
            raise DiffRefused(f"harness state under ai/{end}")
        if any(_beneath(path, special) for special in rules.special):
            raise DiffRefused(f"symlink or gitlink path{end}")
        if _denied(path, rules.readonly):
            raise DiffRefused(f"readonly path{end}")
        if not matches(path, rules.token_paths):
            raise DiffRefused(f"outside write token{end}")
        if not matches(path, rules.write_scope):
            raise DiffRefused(f"outside write scope{end}")
        if rules.no_new_deps and _denied(path, rules.manifests):
            raise DiffRefused(f"dependency manifest under no-new-deps{end}")
    if change.kind in ("add", "rename") and not matches(change.path, rules.creates):
        raise DiffRefused("new file not in creates")
    source = change.old_path or change.path
    if change.kind != "add" and source not in rules.cited | made:
        raise DiffRefused("uncited path")


def _ends(change: Change) -> list[str]:
    return [change.path] if change.old_path is None else [change.old_path, change.path]


def _beneath(path: str, top: str) -> bool:
    path, top = fold(path), fold(top)
    return path == top or path.startswith(top + "/")


def _denied(path: str, globs: Iterable[str]) -> bool:
    # Deny lists match the folded spelling too, so "Vendor/x" cannot dodge "vendor/**".
    patterns = list(globs)
    return matches(path, patterns) or matches(fold(path), [fold(p) for p in patterns])
