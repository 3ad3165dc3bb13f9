"""One line of the log checked against schemas/progress-event.schema.json by hand.

`harness audit` checks every event of a log against the schema, and a validator was its
largest share of time. This is the same check written out: its names, enums and
patterns are read from the schema documents, so only the structure is hand-written, and
tests/test_event_schema.py proves with hypothesis that it gives schemas.fast_check's
verdict on any event, valid or not, and jsonschema's but for one case: Python's `$`
matches before a final newline, so jsonschema takes an id or a timestamp that ends in one,
which the fast check (and so the audit) has always refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from harness.base import schemas

KNOWN_IDS = 1024


@cache
def checker() -> Callable[[Any], bool]:
    """Whether an event (as orjson parsed it) is a progress event: a function, built once."""
    doc = schemas.document("progress-event")
    defs = schemas.document("common")["$defs"]
    props = doc["properties"]
    allowed, required = frozenset(props), frozenset(doc["required"])
    events, statuses = frozenset(props["event"]["enum"]), frozenset(props["status"]["enum"])
    # As the fast check reads a pattern: searched, each `$` the end of the text.
    sha256, timestamp, pattern_id = (
        re.compile(schemas.python_pattern(defs[name]["pattern"])).search
        for name in ("sha256", "timestamp", "id")
    )
    # The ids that passed: a log names its task on every line and a subtask on several in a
    # row, and a set lookup is a tenth of a search. Emptied when full, so it stays small.
    known: set[str] = set()

    def ident(text: str) -> bool:
        if text in known:
            return True
        if not pattern_id(text):
            return False
        if len(known) >= KNOWN_IDS:
            known.clear()
        known.add(text)
        return True

    def valid(event: Any) -> bool:
        if not isinstance(event, dict):
            return False
        keys = event.keys()
        if not (keys >= required and keys <= allowed):
            return False
        seq, prev, ts = event["seq"], event["prev"], event["ts"]
        task, agent = event["task_id"], event["agent"]
        if not (
            _integer(seq)
            and seq >= 0
            and isinstance(prev, str)
            and sha256(prev)
            and isinstance(ts, str)
            and timestamp(ts)
            and isinstance(task, str)
            and ident(task)
            and isinstance(event["event"], str)
            and event["event"] in events
            and isinstance(event["status"], str)
            and event["status"] in statuses
            and isinstance(agent, str)
            and agent
        ):
            return False
        if "step" in event and not (isinstance(event["step"], str) and ident(event["step"])):
            return False
        return (
            _optional(event, "phase", str)
            and _optional(event, "error", str)
            and _optional(event, "details", dict)
        )

    return valid


def _integer(value: object) -> bool:
    """JSON Schema's integer: not a boolean; a float only if it has no fraction."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _optional(event: dict[str, Any], key: str, kind: type) -> bool:
    return key not in event or isinstance(event[key], kind)
