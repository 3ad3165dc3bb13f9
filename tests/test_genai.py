"""The attributes of an agent call's span (harness/step/genai.py): the GenAI conventions'
and harness's own, and an answer's spending held to the budgets' bounds."""

from __future__ import annotations

import pytest

from harness.boundary import worker
from harness.boundary.registry import Agent
from harness.step import genai


def agent(cli: str | None = None, model: str | None = None) -> Agent:
    return Agent("a1", "agents/x", ">=0", ("localized-impl",), (), (), None, cli=cli, model=model)


@pytest.mark.parametrize(
    ("cli", "provider"),
    [("claude", "anthropic"), ("codex", "openai"), ("gemini", "gcp.gemini"), (None, "a1")],
)
def test_the_provider_is_the_agent_clis_and_else_the_agents_own_id(
    cli: str | None, provider: str
) -> None:
    found = genai.call_attributes("demo", "T1", agent(cli), "c" * 64)
    assert found["gen_ai.provider.name"] == provider
    assert found["gen_ai.agent.name"] == "a1"
    assert found["gen_ai.operation.name"] == "invoke_agent"
    assert "gen_ai.request.model" not in found
    named = genai.call_attributes("demo", "T1", agent(model="m-1"), "c")
    assert named["gen_ai.request.model"] == "m-1"


def test_an_answers_spending_is_reported_only_within_the_budgets_bounds() -> None:
    reported = {"cost_usd": 0.25, "tokens": 30, "input_tokens": 10, "output_tokens": 20}
    found = genai.outcome_attributes(worker.Outcome("ok", result={"metrics": reported}))
    assert found == {
        "harness.status": "ok",
        "harness.cost_usd": 0.25,
        "harness.usage.tokens": 30,
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 20,
    }
    # A worker's word out of bounds, or no number, is left out, as the budgets leave it.
    wild = {"cost_usd": -1, "tokens": float("nan"), "input_tokens": True, "output_tokens": 1.5}
    found = genai.outcome_attributes(worker.Outcome("ok", result={"metrics": wild}))
    assert found == {"harness.status": "ok"}
    failed = genai.outcome_attributes(worker.Outcome("error", "retryable", "rate limit"))
    assert failed == {"harness.status": "error", "error.type": "retryable"}
