"""plan.json read as a stream: its members one at a time, each subtask alone, so a plan of
many subtasks is never held whole as Python objects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import ijson


def members(fh: IO[bytes]) -> Iterator[tuple[str | None, Any]]:
    """plan.json's top-level members as (key, value), except that each element of
    `subtasks` comes alone as (None, element): the whole plan as Python objects costs
    about 1.4 KB per subtask, which the audit of a large task must not spend at once.

    A document that is not a JSON object raises ValueError or ijson.JSONError."""
    builder: ijson.ObjectBuilder | None = None
    at = ""  # the prefix of the value being built
    for prefix, event, value in ijson.parse(fh, use_float=True):
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
