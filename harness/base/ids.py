"""The ids harness reads from files, answers and the command line, each a pattern matched
whole (`fullmatch`): `re.match` with `$` also takes a final newline, and an id ending in one
broke commit trailers and the log's own readers.

An id reaches argv, paths and trailers; so each starts with a letter or digit (never `-`,
which a program reads as its own option) and holds no separator, space or control character."""

from __future__ import annotations

import re

# A task, subtask, agent or token id: common.schema.json's `id`.
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
CALL_ID = re.compile(r"[0-9a-f]{64}")  # sha256 hex, lower case
COMMIT = re.compile(r"[0-9a-f]{40}")  # a SHA-1 commit id, lower case, as git prints it
# An agent CLI's session, as its answer names it and its CLI takes it back (`--resume ID`):
# claude's, codex's and copilot's are UUIDs, opencode's `ses_` and letters. No dot: never a
# path's `..`.
SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def whole(pattern: re.Pattern[str], value: object) -> bool:
    """Whether `value` is a string `pattern` matches as a whole."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None
