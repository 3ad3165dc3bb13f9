"""JSON Schemas shipped with the package: loading, and one validate() for every file."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import fastjsonschema

from harness.base.errors import InvalidInput

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

NAMES = (
    "common",
    "config",
    "context-envelope",
    "exchange-meta",
    "plan",
    "policy",
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
    # Imported here: jsonschema is a fifth of a worker's start-up, and only a problem needs it.
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    docs = _documents()
    registry: Registry[Any] = Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc)) for doc in docs.values()
    )
    return Draft202012Validator(docs[name], registry=registry)


@cache
def fast_validator(name: str, pointer: str = "") -> Callable[..., Any]:
    """The schema (or its part at the JSON `pointer`) compiled to Python, for hot loops.

    About 40x faster than the jsonschema validator, which `harness audit` needs at a line
    per event; it raises fastjsonschema.JsonSchemaException, so word findings with
    problem(). References are inlined first, which saves 10-50% more: each would be a
    function call building its error path. Draft-07 is the newest draft fastjsonschema
    compiles; the shipped schemas use nothing newer than `$defs`.
    """
    part: Any = _documents()[name]
    for key in filter(None, pointer.split("/")):
        part = part[key]
    schema = {**_inlined(part), "$schema": "http://json-schema.org/draft-07/schema#"}
    validate: Callable[..., Any] = fastjsonschema.compile(schema)
    return validate


def _inlined(node: Any) -> Any:
    """`node` with every `$ref` replaced by what it points to (the schemas are not recursive)."""
    if isinstance(node, list):
        return [_inlined(item) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return {key: _inlined(value) for key, value in node.items()}
    uri, _, pointer = ref.partition("#")
    target: Any = next(d for d in _documents().values() if d["$id"] == uri)
    for key in filter(None, pointer.split("/")):
        target = target[key]
    siblings = {key: value for key, value in node.items() if key != "$ref"}
    return _inlined({**target, **siblings})


def document(name: str) -> dict[str, Any]:
    """The schema itself, e.g. to hand to a CLI's structured-output flag."""
    return _documents()[name]


def problem(name: str, instance: object) -> str | None:
    """The most relevant violation as `<json path>: <message>`, or None when valid.

    The verdict is jsonschema's. The compiled schema answers first, as what it takes
    jsonschema takes too: it is stricter only where a pattern's `$` meets a final newline,
    and no schema here puts a pattern under `not` or in `oneOf` branches one value could
    match both of (tests/test_schemas.py holds it to that). So jsonschema runs, and is
    imported, only for what the compiled schema refuses: to word the problem, or to take
    what only it takes. Instances are JSON values, as parsed or built to be written: the
    compiled schema would take a tuple for an array, which jsonschema refuses."""
    try:
        fast_validator(name)(instance)
    except fastjsonschema.JsonSchemaException:
        pass
    else:
        return None
    from jsonschema.exceptions import best_match

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
