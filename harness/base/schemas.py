"""JSON Schemas shipped with the package: loading, and one validate() for every file."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

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


def python_pattern(pattern: str) -> str:
    """A schema's pattern (ECMA 262, as JSON Schema reads it) for Python's `re`: each `$`
    outside a class and not escaped is the end of the text (`\\Z`). Python's `$` also
    matches before a final newline, so an id `n1\\n` passed `^...$`."""
    out, escaped, in_class = [], False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "$" and not in_class:
            char = r"\Z"
        out.append(char)
    return "".join(out)


@cache
def _validator(name: str, pointer: str = "") -> Draft202012Validator:
    # Imported here: jsonschema is a fifth of a worker's start-up, and only a problem needs it.
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError
    from referencing import Registry, Resource

    def pattern(validator: Any, wanted: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not re.search(
            python_pattern(wanted), instance
        ):
            yield ValidationError(f"{instance!r} does not match {wanted!r}")

    docs = _documents()
    registry: Registry[Any] = Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc)) for doc in docs.values()
    )
    target = docs[name] if not pointer else {"$ref": f"{docs[name]['$id']}#{pointer}"}
    ecma = validators.extend(Draft202012Validator, {"pattern": pattern})  # type: ignore[no-untyped-call]
    found: Draft202012Validator = ecma(target, registry=registry)
    return found


@cache
def fast_check(name: str, pointer: str = "") -> Callable[[object], bool]:
    """Whether a JSON value is valid against the schema (or its part at the JSON `pointer`):
    a function, built once per process.

    jsonschema-rs builds a validator in under a millisecond (the Python code fastjsonschema
    generated took 0.15-0.4 s to make and compile in every command) and checks a value many
    times faster than jsonschema, which `harness audit` needs at a plan's every subtask. It
    only says yes or no: problem() words what it refuses. A value it cannot take as JSON (a
    NaN, an integer past 64 bits) is refused here, and so left to jsonschema's verdict.
    Formats are not asserted, as jsonschema does not by default.
    """
    import jsonschema_rs

    docs = _documents()
    registry = jsonschema_rs.Registry([(doc["$id"], doc) for doc in docs.values()])
    target = {"$ref": f"{docs[name]['$id']}#{pointer}"}
    validator = jsonschema_rs.Draft202012Validator(
        target, registry=registry, validate_formats=False
    )

    def check(instance: object) -> bool:
        try:
            return bool(validator.is_valid(instance))
        except ValueError:
            return False

    return check


def document(name: str) -> dict[str, Any]:
    """The schema itself, e.g. to hand to a CLI's structured-output flag."""
    return _documents()[name]


def problem(name: str, instance: object, pointer: str = "") -> str | None:
    """The most relevant violation as `<json path>: <message>`, or None when valid (against
    the schema's part at the JSON `pointer`, if given: the path is then from that part).

    The verdict is jsonschema's. The fast check (fast_check) answers first, as what it
    takes jsonschema takes too (both read a pattern's `$` as the end of the text), and no
    schema here puts a pattern under `not` or in `oneOf` branches one value could match
    both of (tests/test_schemas.py holds it to that). So jsonschema runs, and
    is imported, only for what the fast check refuses: to word the problem, or to take
    what only it takes. Instances are JSON values, as parsed or built to be written: the
    fast check would take a tuple for an array, which jsonschema refuses."""
    if fast_check(name, pointer)(instance):
        return None
    from jsonschema.exceptions import best_match

    err = best_match(_validator(name, pointer).iter_errors(instance))
    if err is None:
        return None
    message = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    return f"{err.json_path}: {message}"


def validate(name: str, instance: object, source: str) -> None:
    """Raise InvalidInput naming `source` and the JSON path when `instance` is invalid."""
    found = problem(name, instance)
    if found is not None:
        raise InvalidInput(f"{source}: {found}")
