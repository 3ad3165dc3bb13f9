"""The attributes of a traced run's spans: the GenAI semantic conventions' (as string
literals: the semconv package's `gen_ai` constants are deprecated) and harness's own, under
`harness.`. Pure: spans.py gives them to the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.base import metrics
from harness.boundary import worker
from harness.boundary.registry import Agent

Attributes = dict[str, str | int | float | bool]

# The conventions' provider names, by the agent CLI a registry entry drives.
PROVIDERS = {"claude": "anthropic", "codex": "openai", "gemini": "gcp.gemini"}


def call_attributes(task_id: str, subtask: str, agent: Agent, call_id: str) -> Attributes:
    """An agent call's attributes known as it starts."""
    found: Attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": PROVIDERS.get(agent.cli or "", agent.id),
        "gen_ai.agent.name": agent.id,
        "harness.task.id": task_id,
        "harness.subtask.id": subtask,
        "harness.call.id": call_id,
    }
    if agent.model:
        found["gen_ai.request.model"] = agent.model
    return found


def outcome_attributes(outcome: worker.Outcome) -> Attributes:
    """An agent call's attributes once its answer is judged: its status, and on failure
    `error.type` (its kind); its spending as the answer's metrics report it, each figure
    held to the bounds the budgets hold it to (metrics.py), or left out."""
    found: Attributes = {"harness.status": outcome.status}
    if outcome.status != "ok":
        found["error.type"] = outcome.kind or "error"
    reported = outcome.result.get("metrics")
    spent = metrics.figures(reported)
    if "cost_usd" in spent:
        found["harness.cost_usd"] = spent["cost_usd"]
    if "tokens" in spent:
        found["harness.usage.tokens"] = int(spent["tokens"])
    if isinstance(reported, Mapping):
        for key in ("input_tokens", "output_tokens"):
            count = metrics.figure("tokens", reported.get(key))
            if count is not None:
                found[f"gen_ai.usage.{key}"] = int(count)
    return found


def phase_attributes(
    task_id: str, subtask: str, name: str, ok: bool, outcome: str | None
) -> Attributes:
    return {
        "harness.task.id": task_id,
        "harness.subtask.id": subtask,
        "harness.phase": name,
        "harness.verdict": outcome or ("ok" if ok else "failed"),
    }
