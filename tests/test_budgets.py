"""Budgets end to end: each one exhausted halts the task before the call it cannot afford,
with a blocker naming it; raising it and `resume` goes on; audit and replay agree."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.record.ledger import digest
from harness.spec.config import Config, load
from harness.step import budgets

from .builders import plan_of, sub
from .conftest import CLOCK, Sample, new_file_patch, ok, subtask

IDS = ["B1", "B2", "B3"]


def creating(sid: str, metrics: dict[str, Any] | None = None, sleep: float = 0) -> dict[str, Any]:
    path = f"src/{sid.lower()}.py"
    answer = ok(sid, (path, new_file_patch(path, [f"NAME = {sid!r}"])))
    if metrics is not None:
        answer["result"]["metrics"] = metrics
    return answer | {"sleep_s": sleep}


def plan(sample: Sample, **extra: Any) -> None:
    sample.write_plan(
        [subtask(s, write_scope="src/**", creates=[f"src/{s.lower()}.py"]) for s in IDS]
    )
    if extra:
        doc = sample.read_json("ai/tasks/demo/plan.json")
        sample.write_json("ai/tasks/demo/plan.json", doc | extra)


def add_config(sample: Sample, text: str) -> None:
    with (sample.root / "ai/harness.toml").open("a") as fh:
        fh.write("\n" + text + "\n")


def run_out(sample: Sample, config: str, answers: list[dict[str, Any]]) -> str:
    """Three subtasks run under `config`'s budgets; the run's stderr (it must halt)."""
    plan(sample)
    add_config(sample, config)
    sample.write_script(answers)
    res = sample.cli("run", "demo", timeout=60)
    assert res.returncode == 1, res.stderr
    return res.stderr


def audited_and_replayed(sample: Sample) -> None:
    assert sample.cli("audit", "demo").returncode == 0
    res = sample.cli("replay", "demo")
    assert res.returncode == 0, res.stderr


def names(sample: Sample) -> list[str]:
    return sample.names()


def halted_for(sample: Sample, budget: str) -> dict[str, Any]:
    last = sample.events()[-1]
    assert last["event"] == "blocker_encountered" and last.get("step") is None
    assert last["details"]["budget"] == budget
    return last


def status(sample: Sample) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(sample.cli("status", "demo", "--json").stdout)
    return doc


def test_max_steps_stops_before_the_call_it_cannot_afford_and_resume_goes_on(
    sample: Sample,
) -> None:
    err = run_out(sample, "[budgets]\nmax_steps = 2", [creating(s) for s in IDS])
    assert "budget max_steps (task): 2 of 2 worker calls used" in err
    assert "raise it" in err and "harness resume" in err
    assert names(sample).count("subagent_invoked") == 2
    halted_for(sample, "max_steps")
    doc = status(sample)
    assert doc["budgets"]["max_steps"] == {"limit": 2, "used": 2}
    assert [row["status"] for row in doc["subtasks"]] == ["done", "done", "pending"]
    audited_and_replayed(sample)
    # Raised, then resumed: the third call is made and the task completes.
    text = (sample.root / "ai/harness.toml").read_text().replace("max_steps = 2", "max_steps = 3")
    sample.set_config(text)
    assert sample.cli("resume", "demo", "--reason", "more steps").returncode == 0
    res = sample.cli("run", "demo")
    assert res.returncode == 0, res.stderr
    audited_and_replayed(sample)


def test_cost_reported_by_the_agent_is_held_to_max_cost_usd(sample: Sample) -> None:
    answers = [creating(s, {"cost_usd": 0.6}) for s in IDS]
    err = run_out(sample, "[budgets]\nmax_cost_usd = 1.0", answers)
    assert "budget max_cost_usd (task): 1.2 of 1 USD used" in err
    assert names(sample).count("subagent_invoked") == 2
    assert halted_for(sample, "max_cost_usd")["details"]["used"] == 1.2
    assert status(sample)["budgets"]["max_cost_usd"] == {"limit": 1.0, "used": 1.2}
    audited_and_replayed(sample)


def test_tokens_times_the_price_table_when_no_cost_is_reported(sample: Sample) -> None:
    config = "[budgets]\nmax_cost_usd = 1.0\n\n[prices]\nscripted = 2.0"
    err = run_out(sample, config, [creating(s, {"tokens": 400_000}) for s in IDS])
    assert "1.6 of 1 USD used" in err  # two calls of 0.4M tokens at $2 per million
    assert names(sample).count("subagent_invoked") == 2


def test_an_unknown_cost_is_said_not_guessed(sample: Sample) -> None:
    err = run_out(
        sample, "[budgets]\nmax_cost_usd = 5.0", [creating(s, {"tokens": 10}) for s in IDS]
    )
    assert "the cost of call" in err and "is unknown: it reported none" in err
    assert "[prices] has no price for it" in err
    assert names(sample).count("subagent_invoked") == 1


def test_max_tokens_counts_what_calls_reported(sample: Sample) -> None:
    err = run_out(
        sample, "[budgets]\nmax_tokens = 1000", [creating(s, {"tokens": 600}) for s in IDS]
    )
    assert "1200 of 1000 tokens used" in err


def test_max_runtime_stops_a_hanging_call_at_the_deadline(sample: Sample) -> None:
    err = run_out(sample, "[budgets]\nmax_runtime_s = 2", [creating("B1", sleep=60)])
    assert "budget max_runtime_s" in err
    failed = next(e for e in sample.events() if e["event"] == "subagent_failed")
    assert failed["details"]["kind"] == "timeout"
    halted_for(sample, "max_runtime_s")
    audited_and_replayed(sample)


def test_the_max_parallel_budget_caps_the_command(sample: Sample) -> None:
    plan(sample)
    add_config(sample, "[budgets]\nmax_parallel = 1")
    sample.write_script([creating(s) for s in IDS])
    assert sample.cli("run", "demo", "--max-parallel", "3").returncode == 0
    got = names(sample)
    assert got.index("subagent_invoked", 2) > got.index("step_completed")


def test_a_subtask_budget_bounds_its_own_calls(sample: Sample) -> None:
    sample.write_plan([subtask("B1", budgets={"max_steps": 1})])
    sample.write_script([{"subtask": "B1", "error": {"message": "busy", "kind": "retryable"}}])
    res = sample.cli("run", "demo")
    assert res.returncode == 1 and "max_steps (subtask B1): 1 of 1" in res.stderr
    assert names(sample).count("subagent_retried") == 1
    assert names(sample).count("subagent_invoked") == 1


@pytest.mark.parametrize(
    ("config", "extra", "problem"),
    [
        ("[budgets]\nmax_steps = 2", {"budgets": {"max_steps": 5}}, "budgets.max_steps 5 exceeds"),
        ("", {"budgets": {"max_cost_usd": 1}}, None),
    ],
)
def test_a_plan_may_only_lower_the_config_budget(
    sample: Sample, config: str, extra: dict[str, Any], problem: str | None
) -> None:
    plan(sample, **extra)
    add_config(sample, config)
    res = sample.cli("plan", "validate", "demo")
    if problem is None:
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 2 and problem in res.stderr
    res = sample.cli("run", "demo")
    assert res.returncode == 2 and problem in res.stderr
    assert not (sample.root / "ai/tasks/demo/progress.ndjson").exists()


# -- reported spending is an untrusted worker's word ------------------------------------------

COST, TOKENS = "[budgets]\nmax_cost_usd = 1.0", "[budgets]\nmax_tokens = 1000"


def verbatim(sid: str, name: str, text: bytes) -> dict[str, Any]:
    """`creating(sid)`'s answer with metrics.`name` the JSON text `text`, printed as is (JSON
    has no NaN or infinity; a worker may still print them)."""
    line = {"ts": CLOCK, "task_id": "demo", "agent_id": "scripted", "status": "ok"}
    line["result"] = creating(sid, {name: "@"})["result"]
    return {"subtask": sid, "raw": orjson.dumps(line).replace(b'"@"', text).decode() + "\n"}


@pytest.mark.parametrize(
    ("config", "name", "text"),
    [
        (COST, "cost_usd", b"-100"),
        (COST, "cost_usd", b"NaN"),
        (COST, "cost_usd", b"Infinity"),
        (COST, "cost_usd", b"1e400"),  # what parses as infinity where anything does
        (COST, "cost_usd", b"1e308"),
        (COST, "cost_usd", b"true"),
        (COST, "cost_usd", b'"0.6"'),
        (TOKENS, "tokens", b"-1000000000"),
        (TOKENS, "tokens", b"NaN"),
        (TOKENS, "tokens", b"1e400"),
        (TOKENS, "tokens", b"1000000000000"),
        (TOKENS, "tokens", b"600.5"),
    ],
)
def test_an_answer_reporting_spending_out_of_bounds_is_refused_as_malformed(
    sample: Sample, config: str, name: str, text: bytes
) -> None:
    answers = [verbatim("B1", name, text)] + [verbatim(s, name, b"0.6") for s in IDS[1:]]
    err = run_out(sample, config, answers)
    failed = next(e for e in sample.events() if e["event"] == "subagent_failed")
    assert failed["details"]["kind"] == "format", failed
    assert names(sample).count("subagent_invoked") == 1 and "B1" in err
    doc = status(sample)
    assert doc["cost_usd"] == 0 and all(b["used"] == 0 for b in doc["budgets"].values())
    audited_and_replayed(sample)


@pytest.mark.parametrize(
    ("config", "name", "text", "stop"),
    [
        (COST, "cost_usd", b"0.6", "budget max_cost_usd (task): 1.2 of 1 USD used"),
        (TOKENS, "tokens", b"600", "budget max_tokens (task): 1200 of 1000 tokens used"),
    ],
)
def test_the_honest_twin_stops_where_the_budget_says(
    sample: Sample, config: str, name: str, text: bytes, stop: str
) -> None:
    err = run_out(sample, config, [verbatim(s, name, text) for s in IDS])
    assert stop in err
    assert names(sample).count("subagent_invoked") == 2
    audited_and_replayed(sample)


def forge(sample: Sample, call_id: str, name: str, text: bytes) -> None:
    """Rewrite a recorded answer's metrics.`name` to the JSON text `text`, with meta.json's
    hash to match, as a pull request can: the hashes prove nothing against their writer."""
    folder = sample.root / "ai/exchanges/demo" / call_id
    line = orjson.loads((folder / "stdout.ndjson").read_bytes())
    line["result"]["metrics"][name] = "@"
    data = orjson.dumps(line).replace(b'"@"', text) + b"\n"
    (folder / "stdout.ndjson").write_bytes(data)
    meta = orjson.loads((folder / "meta.json").read_bytes())
    meta["files"]["stdout.ndjson"] = digest(data)
    (folder / "meta.json").write_bytes(orjson.dumps(meta))


@pytest.mark.parametrize(
    ("config", "name", "text", "honest"),
    [
        (COST, "cost_usd", b"-100", b"0.6"),
        (COST, "cost_usd", b"NaN", b"0.6"),
        (COST, "cost_usd", b"1e308", b"0.6"),
        (COST, "cost_usd", b"-1e-9", b"0.6"),
        (TOKENS, "tokens", b"-1000000000", b"600"),
        (TOKENS, "tokens", b"1e400", b"600"),
    ],
)
def test_a_recorded_figure_out_of_bounds_counts_as_unknown_never_as_a_credit(
    sample: Sample, config: str, name: str, text: bytes, honest: bytes
) -> None:
    """A committed record whose first answer says it spent -100 (what a hostile pull
    request can commit): status, report and the next run count that call's spending as
    unknown. Summed, it would have bought every later call."""
    run_out(sample, config, [verbatim(s, name, honest) for s in IDS])
    first = next(e for e in sample.events() if e["event"] == "subagent_invoked")
    call_id = first["details"]["call_id"]
    forge(sample, call_id, name, text)
    doc = status(sample)
    kept = 0.6 if name == "cost_usd" else 0  # the second call's alone
    assert doc["cost_usd"] == kept
    assert list(doc["budgets"].values()) == [
        {"limit": 1.0 if name == "cost_usd" else 1000, "used": 0.6 if kept else 600}
    ]
    shown = sample.cli("status", "demo").stdout
    assert "$-" not in shown and "nan" not in shown.lower() and "inf" not in shown.lower()
    # The forged cost is unknown: the total says it is only part of the cost.
    partial = "(partial: 1 call(s) reported no cost)"
    assert (f"cost: $0.6000 {partial}" in shown) == bool(kept)
    page = sample.cli("report", "demo").stdout
    summed = (
        f"<dt>Total cost</dt><dd>$0.6000 {partial}<" if kept else "<dt>Tokens used</dt><dd>600<"
    )
    assert summed in page
    assert "$-" not in page and "-100" not in page and "1e+308" not in page
    assert sample.cli("resume", "demo", "--reason", "go on").returncode == 0
    res = sample.cli("run", "demo")
    what = "cost" if name == "cost_usd" else "token count"
    assert res.returncode == 1
    assert f"the {what} of call {call_id[:12]} by scripted is unknown" in res.stderr
    assert names(sample).count("subagent_invoked") == 2  # no third call was bought


@pytest.mark.parametrize(
    "config",
    ["[budgets]\nmax_cost_usd = nan", "[budgets]\nmax_cost_usd = 5.0\n\n[prices]\nscripted = inf"],
)
def test_a_limit_or_price_that_is_no_number_is_refused(sample: Sample, config: str) -> None:
    """TOML has inf and nan, which pass a schema's `minimum`: as a limit nan would turn the
    budget off, as a price make every cost unknown. The config is refused in one line, before
    any call; its twin, a finite price, is test_the_honest_twin_stops_where_the_budget_says."""
    plan(sample)
    add_config(sample, config)
    res = sample.cli("run", "demo", timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"harness: ai/harness.toml: invalid TOML: {config.rsplit(' ', 1)[1]} is not a finite number"
    ]
    assert names(sample) == []


# -- the pure parts ----------------------------------------------------------------------------


def config_of(**limits: float) -> Config:
    return replace(load(Path("/nonexistent"), b""), limits=limits)


def test_limits_take_the_lower_of_config_and_plan() -> None:
    plan_ = replace(plan_of(sub("T1")), limits=(("max_steps", 4.0), ("max_tokens", 9.0)))
    found = budgets.limits(config_of(max_steps=10, max_cost_usd=2.0), plan_)
    assert found == {"max_steps": 4, "max_cost_usd": 2.0, "max_tokens": 9}


def test_a_subtask_may_not_raise_its_plan_budget() -> None:
    cfg = config_of(max_steps=3)
    raised = plan_of(sub("T1", limits=(("max_steps", 5.0),)))
    assert budgets.problems(cfg, raised) == [
        "subtask T1: budgets.max_steps 5.0 exceeds the plan's 3"
    ]
    assert budgets.problems(cfg, plan_of(sub("T1", limits=(("max_steps", 2.0),)))) == []


def test_an_unknown_cost_names_what_is_missing() -> None:
    priced = budgets.Spent({"codex": 2.0})
    unpriced = budgets.Spent({})
    for spent in (priced, unpriced):
        spent.invoked("c" * 64, "T1", "codex")
        spent.calls["c" * 64].answered = True
    found = [
        budgets.refusal({"max_cost_usd": 1.0}, sub("T1"), spent, 0.0)
        for spent in (priced, unpriced)
    ]
    assert [f.why.split("an answer's bounds")[1] for f in found if f is not None] == [
        ", nor tokens to price",
        ", and ai/harness.toml [prices] has no price for it",
    ]
    assert budgets.refusal({"max_steps": 2}, sub("T1"), priced, 0.0) is None


def test_each_call_is_told_the_cost_left_as_its_max_usd(sample: Sample) -> None:
    """claude's --max-budget-usd comes from max_usd: what is left of the task's cost budget
    when the call is made, so the CLI stops there itself."""
    with (sample.root / "ai" / "harness.toml").open("a") as fh:
        fh.write("\n[budgets]\nmax_cost_usd = 1.0\n")
    sample.write_plan(
        [subtask("T1", no_change_ok=True), subtask("T2", depends_on=["T1"], no_change_ok=True)]
    )
    paid = [ok("T1"), ok("T2")]
    paid[0]["result"]["metrics"] = {"cost_usd": 0.25}
    paid[1]["result"]["metrics"] = {"cost_usd": 0.5}
    sample.write_script(paid)
    assert sample.cli("run", "demo").returncode == 0
    told = []
    for ev in sample.events():
        if ev["event"] == "subagent_invoked":
            folder = sample.root / "ai/exchanges/demo" / ev["details"]["call_id"]
            told.append(orjson.loads((folder / "prompt.ndjson").read_bytes())["payload"])
    assert [p["budgets"].get("max_usd") for p in told] == [1.0, 0.75]
