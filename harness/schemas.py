"""JSON Schemas shipped with the package: loading, and one validate() for every file."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

from .errors import InvalidInput

NAMES = (
    "common",
    "config",
    "context-envelope",
    "exchange-meta",
    "plan",
    "progress-event",
    "prompt-envelope",
    "registry",
    "worker-output",
    "write-tokens",
)


@cache
def _documents() -> dict[str, dict[str, Any]]:
    root = resources.files("harness._schemas")
    return {n: json.loads((root / f"{n}.schema.json").read_text("utf-8")) for n in NAMES}


@cache
def _validator(name: str) -> Draft202012Validator:
    docs = _documents()
    registry: Registry[Any] = Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc)) for doc in docs.values()
    )
    return Draft202012Validator(docs[name], registry=registry)


def document(name: str) -> dict[str, Any]:
    """The schema itself, e.g. to hand to a CLI's structured-output flag."""
    return _documents()[name]


def problem(name: str, instance: object) -> str | None:
    """The most relevant violation as `<json path>: <message>`, or None when valid."""
    err = best_match(_validator(name).iter_errors(instance))
    if err is None:
        return None
    message = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    return f"{err.json_path}: {message}"


def validate(name: str, instance: object, source: str) -> None:
    """Raise InvalidInput naming `source` and the JSON path when `instance` is invalid."""
    found = problem(name, instance)
    if found is not None:
        raise InvalidInput(f"{source}: {found}")
