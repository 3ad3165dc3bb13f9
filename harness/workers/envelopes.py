"""What every worker reads first: the envelope's two lines, checked; and the error a worker
reports as its one result line. Apart from shim.py so a worker that needs no more (the
scripted one) starts without the policy and registry code a CLI's shim needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from harness.base import schemas


class ShimError(Exception):
    """A failure to report as the one result line: retryable or hard. A retryable one
    whose words say how long the model API asked to wait carries that wait too."""

    def __init__(self, message: str, kind: str = "hard") -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after(message) if kind == "retryable" else None


# How CLIs pass on a model API's wait: "Please try again in 20s", "retry in 3.5s", a
# RetryInfo `"retryDelay": "7s"`, a `retry-after: 30` header quoted.
_RETRY_AFTER = re.compile(
    r"(?:try again in|retry in|retryDelay\W{0,4}|retry-after\W{0,3})\s*(\d+(?:\.\d+)?)\s*(ms|s)?",
    re.I,
)


def retry_after(text: str) -> float | None:
    """The wait a failure's words ask for, in seconds, or None."""
    found = _RETRY_AFTER.search(text)
    if found is None:
        return None
    value = float(found.group(1))
    return value / 1000 if (found.group(2) or "").lower() == "ms" else value


@dataclass(frozen=True)
class Envelope:
    context: dict[str, Any]
    prompt: dict[str, Any]

    @property
    def task_id(self) -> str:
        return str(self.context["task_id"])

    @property
    def ts(self) -> str:
        return str(self.context["ts"])

    @property
    def payload(self) -> dict[str, Any]:
        return dict(self.prompt["payload"])

    @property
    def writable(self) -> bool:
        return str(self.payload["write_scope"]) != "none"

    @property
    def keeps_session(self) -> bool:
        """The agent resumes: its CLI must keep the session for a retry (sessions.py)."""
        return bool((self.payload.get("session") or {}).get("keep"))

    @property
    def resumes(self) -> str | None:
        """The CLI session this call continues: the one of the call it retries."""
        found = (self.payload.get("session") or {}).get("resume")
        return found if isinstance(found, str) else None


def read_envelope(data: bytes) -> Envelope:
    """Exactly two schema-valid lines naming the same task, or ShimError (hard)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != 2:
        raise ShimError(f"expected two envelope lines, got {len(lines)}")
    try:
        context, prompt = orjson.loads(lines[0]), orjson.loads(lines[1])
    except orjson.JSONDecodeError as exc:
        raise ShimError(f"envelope is not JSON: {exc}") from None
    for name, doc in (("context-envelope", context), ("prompt-envelope", prompt)):
        problem = schemas.problem(name, doc)
        if problem is not None:
            raise ShimError(f"{name}: {problem}")
    if context["task_id"] != prompt["task_id"]:
        raise ShimError("context and prompt name different tasks")
    return Envelope(context, prompt)
