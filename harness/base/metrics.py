"""A call's spending as its answer reports it (result.metrics: cost_usd, tokens, turns).

What a worker says it spent is data from an untrusted worker, and budgets add it up: a
negative cost would be a credit, a NaN or infinite one would make every comparison with a
limit false. So each figure must lie within the worker-output schema's bounds for one call,
written there once: a cost from 0 to 1000 USD, whole tokens up to a billion, whole turns up to
a million, far above any real call. An answer with a figure out of bounds is malformed (the
schema refuses it when the answer is judged); a figure read back from a recorded answer (a
record may come from an untrusted pull request), or read by a shim from its CLI's own
events, that is out of bounds counts as unknown, like one never reported: never summed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from harness.base import schemas

SPENDING = ("cost_usd", "tokens", "turns")
_AT = "/properties/result/properties/metrics/properties/"


def figure(name: str, value: object) -> float | None:
    """`value` as the spending figure `name` (one of SPENDING), or None when it is none the
    schema allows: absent, not a number (a bool is none either), negative, non-finite, over
    its bound, or a fraction where a count is meant. Counts come back as ints."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):
        return None  # JSON Schema's bounds let NaN through: every comparison with it is false
    if not schemas.fast_check("worker-output", _AT + name)(value):
        return None
    # `or 0.0`: a cost of -0.0 passes `minimum: 0` and would print as $-0.0000.
    return (float(value) or 0.0) if name == "cost_usd" else int(value)


def total(counts: Iterable[object]) -> int | None:
    """The tokens a CLI's usage counts add up to (None stands for a count not given); None
    when none is given, any given is no count (a negative part would hide the others), or
    the sum is out of bounds."""
    found = [figure("tokens", c) for c in counts if c is not None]
    if not found or None in found:
        return None
    summed = figure("tokens", sum(c for c in found if c is not None))
    return None if summed is None else int(summed)


def usage(read: Iterable[object], written: Iterable[object]) -> dict[str, int]:
    """A CLI's token counts as a result's metrics report them: `tokens`, all of them (what
    the budgets count), `input_tokens`, those the model read (the prompt cache's included,
    as OpenTelemetry's GenAI conventions count them), and `output_tokens`, those it wrote
    (reasoning included); each left out when its counts do not add up (total)."""
    read, written = list(read), list(written)
    found = {}
    for name, counts in (
        ("tokens", read + written),
        ("input_tokens", read),
        ("output_tokens", written),
    ):
        summed = total(counts)
        if summed is not None:
            found[name] = summed
    return found


def figures(metrics: object) -> dict[str, float]:
    """The spending figures of a result's `metrics` that count; the others are unknown."""
    if not isinstance(metrics, Mapping):
        return {}
    found = {name: figure(name, metrics.get(name)) for name in SPENDING}
    return {name: value for name, value in found.items() if value is not None}


def measured(claimed: object, meter: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics a shim answers with: the model's own (`claimed`), but what was spent only
    as its CLI's events say (`meter`), where a figure out of bounds is left out (unknown).
    The model is no meter: its word on spending would let it price its own call."""
    kept = {
        k: v
        for k, v in (claimed if isinstance(claimed, Mapping) else {}).items()
        if k not in SPENDING
    }
    rest = {k: v for k, v in meter.items() if k not in SPENDING}
    return kept | rest | figures(meter)
