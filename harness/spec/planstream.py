"""plan.json read as a stream: its members one at a time, each subtask alone, so a plan of
many subtasks is never held whole as Python objects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import ijson

# orjson, which reads plan.json everywhere else, refuses a value nested deeper; ijson would
# go on, naming each value by its whole path, which costs the square of the depth. It
# parses a buffer at a time, so the buffer bounds what is spent before the depth is seen
# (64 KiB of brackets took 10 s; 4 KiB, 20 ms, and reads a large plan as fast).
DEPTH = 1024
_BUFFER = 4096
_OPEN, _CLOSE = frozenset(("start_map", "start_array")), frozenset(("end_map", "end_array"))


def members(fh: IO[bytes]) -> Iterator[tuple[str | None, Any]]:
    """plan.json's top-level members as (key, value), except that each element of
    `subtasks` comes alone as (None, element): the whole plan as Python objects costs
    about 1.4 KB per subtask, which the audit of a large task must not spend at once.

    A document that is not a JSON object, or nested deeper than DEPTH, raises ValueError or
    ijson.JSONError."""
    builder: ijson.ObjectBuilder | None = None
    at = ""  # the prefix of the value being built
    depth = 0
    for prefix, event, value in ijson.parse(fh, buf_size=_BUFFER, use_float=True):
        if event in _OPEN:
            depth += 1
            if depth > DEPTH:
                raise ValueError(f"nested deeper than {DEPTH}")
        elif event in _CLOSE:
            depth -= 1
        if builder is not None:
            builder.event(event, value)
            if prefix == at and event in ("end_map", "end_array"):
                yield (None if at == "subtasks.item" else at), builder.value
                builder = None
        elif prefix == "":
            if event not in ("start_map", "end_map", "map_key"):
                raise ValueError("plan.json is not a JSON object")
        elif prefix == "subtasks" and event in ("start_array", "end_array"):
            if event == "start_array":
                yield "subtasks", []
        elif event in ("start_map", "start_array"):
            builder, at = ijson.ObjectBuilder(), prefix
            builder.event(event, value)
        else:
            yield (None if prefix == "subtasks.item" else prefix), value
