"""Budgets (DESIGN §10): what a task may spend, what it has spent, and whether a call fits.

ai/harness.toml's [budgets] bound every task; a plan's `budgets` may only lower those, and a
subtask's only its plan's. What was spent is read from the record: worker calls are the
log's subagent_invoked lines (and supervisors' supervisor_invoked); cost and tokens are what
each answer reported (metrics.cost_usd, metrics.tokens), or, for a CLI that reports tokens
only, its tokens times the agent's price in [prices] (USD per million tokens). A cost
neither reported nor priced is unknown, and a cost budget then says so rather than guess.
A figure out of an answer's bounds (negative, non-finite, absurd: see metrics) counts as
unknown too, and so does a priced cost out of them: what is summed is never a credit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base import metrics
from harness.record import exchanges
from harness.repository.layout import Layout
from harness.spec.config import Config
from harness.spec.plan import Plan, Subtask

# What the task spends; max_parallel and max_runtime_s bound one `run` instead.
UNITS = {"max_steps": "worker calls", "max_cost_usd": "USD", "max_tokens": "tokens"}


def limits(config: Config, plan: Plan) -> dict[str, float]:
    """The task's budgets: the config's, each lowered by the plan's."""
    found = dict(config.limits)
    for name, value in plan.limits:
        found[name] = min(value, found.get(name, value))
    return found


def problems(config: Config, plan: Plan) -> list[str]:
    """Each budget a level sets above what the level over it allows."""
    found = [
        f"budgets.{name} {value} exceeds ai/harness.toml's {config.limits[name]}"
        for name, value in plan.limits
        if name in config.limits and value > config.limits[name]
    ]
    task = limits(config, plan)
    found += [
        f"subtask {sub.id}: budgets.{name} {value} exceeds the plan's {task[name]}"
        for sub in plan.subtasks
        for name, value in sub.limits
        if name in task and value > task[name]
    ]
    return found


@dataclass
class Call:
    step: str
    agent: str
    answered: bool = False
    cost: float | None = None  # None: unknown (or not answered yet)
    tokens: int | None = None


@dataclass
class Spent:
    """The task's calls and what each cost, as far as the record says."""

    prices: Mapping[str, float]
    calls: dict[str, Call] = field(default_factory=dict)  # call_id -> its spending

    def invoked(self, call_id: str, step: str, agent: str) -> None:
        self.calls.setdefault(call_id, Call(step, agent))

    def answered(self, call_id: str, exchange: exchanges.Exchange | None) -> None:
        """Note what the call's answer reported (nothing, when it has no answer)."""
        call = self.calls.get(call_id)
        if call is None or exchange is None:
            return
        cost, tokens = exchanges.reported(exchange.stdout)
        if cost is None and tokens is not None and call.agent in self.prices:
            # A price of inf or nan (TOML has both) must not make an unknown cost a number.
            cost = metrics.figure("cost_usd", tokens * self.prices[call.agent] / 1_000_000)
        call.answered, call.cost, call.tokens = True, cost, tokens

    def of(self, step: str | None) -> list[tuple[str, Call]]:
        return [(c, call) for c, call in self.calls.items() if step is None or call.step == step]

    def used(self, name: str, step: str | None = None) -> float:
        calls = [call for _, call in self.of(step)]
        if name == "max_steps":
            return len(calls)
        if name == "max_cost_usd":
            return round(sum(c.cost for c in calls if c.cost is not None), 6)
        return sum(c.tokens for c in calls if c.tokens is not None)  # max_tokens

    def unknown(self, name: str, step: str | None = None) -> tuple[str, Call] | None:
        """The first answered call whose cost (or tokens) nobody can tell."""
        attr = {"max_cost_usd": "cost", "max_tokens": "tokens"}.get(name)
        if attr is None:
            return None
        return next(
            (
                (c, call)
                for c, call in self.of(step)
                if call.answered and getattr(call, attr) is None
            ),
            None,
        )


def spent(
    layout: Layout,
    task_id: str,
    events: Iterable[Mapping[str, Any]],
    config: Config,
    metered: bool,
    into: Spent | None = None,
    step: str | None = None,
) -> Spent:
    """What the task's logged calls spent (added `into` a Spent, each as a call of `step`
    when given: a nested plan's calls are its parent subtask's); with `metered` (a cost or
    token budget is set), what their recorded answers reported too, each exchange checked
    against its hashes."""
    found = Spent(config.prices) if into is None else into
    for ev in events:
        if ev["event"] not in ("subagent_invoked", "supervisor_invoked"):
            continue
        details = ev.get("details", {})
        call_id = str(details.get("call_id"))
        found.invoked(call_id, step or str(ev.get("step")), str(details.get("subagent")))
        if metered:
            found.answered(call_id, exchanges.load(layout.exchange(task_id, call_id), layout.root))
    return found


def metered(limits: Mapping[str, float], subtasks: Iterable[Subtask] = ()) -> bool:
    """Whether any budget is about what calls reported (cost, tokens)."""
    names = set(limits) | {name for sub in subtasks for name, _ in sub.limits}
    return bool(names & {"max_cost_usd", "max_tokens"})


@dataclass(frozen=True)
class Exhausted:
    """A budget a launch cannot afford: which, its limit, what was used, in words."""

    name: str
    limit: float
    used: float
    why: str

    def details(self) -> dict[str, Any]:
        return {"budget": self.name, "limit": self.limit, "used": self.used}


def refusal(
    task: Mapping[str, float], sub: Subtask, spent: Spent, elapsed_s: float
) -> Exhausted | None:
    """Why one more call of `sub` cannot be made, or None when every budget affords it."""
    for owner, bounds, step in (
        ("task", task, None),
        (f"subtask {sub.id}", dict(sub.limits), sub.id),
    ):
        for name in sorted(bounds):
            limit = bounds[name]
            if name == "max_runtime_s":
                if elapsed_s >= limit:
                    return Exhausted(
                        name,
                        limit,
                        round(elapsed_s, 3),
                        f"{name}: the run took {elapsed_s:.0f}s of {limit:g}s",
                    )
                continue
            if name not in UNITS:  # max_parallel bounds the slots, not what is spent
                continue
            unknown = spent.unknown(name, step)
            if unknown is not None:
                call_id, call = unknown
                what, why = "token count", ""
                if name == "max_cost_usd":
                    what = "cost"
                    if call.agent not in spent.prices:
                        why = ", and ai/harness.toml [prices] has no price for it"
                    elif call.tokens is None:
                        why = ", nor tokens to price"
                    else:
                        price = spent.prices[call.agent]
                        why = f", and its tokens at [prices]' {price:g} make none either"
                return Exhausted(
                    name,
                    limit,
                    spent.used(name, step),
                    f"{name} ({owner}): the {what} of call {call_id[:12]} by {call.agent} is "
                    f"unknown: it reported none within an answer's bounds{why}",
                )
            used = spent.used(name, step)
            # One more call is one more step; any call costs something, so a cost or token
            # budget reached affords none.
            over = used + 1 > limit if name == "max_steps" else used >= limit
            if over:
                return Exhausted(
                    name, limit, used, f"{name} ({owner}): {used:g} of {limit:g} {UNITS[name]} used"
                )
    return None


class OverBudget(Exception):
    """A call was about to be made that a budget cannot afford: it is not made."""

    def __init__(self, exhausted: Exhausted) -> None:
        super().__init__(exhausted.why)
        self.exhausted = exhausted


@dataclass
class Account:
    """A run's budgets and spending, asked before each call is made. A nested plan's run
    has its parent's account `up`, with the subtask running it: each call is checked, and
    counted, at every level above too."""

    limits: dict[str, float]
    spent: Spent
    started: float  # when the run began, on `clock`
    clock: Callable[[], float] = time.monotonic
    # A replay measures nothing: where the recorded run ran out, its record says so.
    recorded: Callable[[], Exhausted | None] | None = None
    up: tuple[Account, Subtask] | None = None

    def check(self, sub: Subtask) -> None:
        if self.recorded is not None:
            found = self.recorded()
        else:
            found = refusal(self.limits, sub, self.spent, self.clock() - self.started)
        if found is not None:
            raise OverBudget(found)
        if self.up is not None:
            self.up[0].check(self.up[1])

    def invoked(self, call_id: str, step: str, agent: str) -> None:
        self.spent.invoked(call_id, step, agent)
        if self.up is not None:
            self.up[0].invoked(call_id, self.up[1].id, agent)

    def answered(self, call_id: str, exchange: exchanges.Exchange | None) -> None:
        self.spent.answered(call_id, exchange)
        if self.up is not None:
            self.up[0].answered(call_id, exchange)

    def cost_left(self, sub: Subtask) -> float | None:
        """USD left of max_cost_usd for one more call of `sub`, the least of the task's,
        the subtask's and every level's above; None when no level bounds cost. An agent
        CLI that can be told (claude's --max-budget-usd) stops at it itself."""
        found = []
        for bounds, step in ((self.limits, None), (dict(sub.limits), sub.id)):
            if "max_cost_usd" in bounds:
                left = bounds["max_cost_usd"] - self.spent.used("max_cost_usd", step)
                found.append(round(max(left, 0.0), 6))
        if self.up is not None:
            above = self.up[0].cost_left(self.up[1])
            found += [above] if above is not None else []
        return min(found) if found else None

    def remaining_s(self) -> float | None:
        """Seconds left of max_runtime_s, at this level or any above: calls running at the
        deadline are stopped."""
        above = None if self.up is None else self.up[0].remaining_s()
        if "max_runtime_s" not in self.limits or self.recorded is not None:
            return above
        left = max(0.0, self.started + self.limits["max_runtime_s"] - self.clock())
        return left if above is None else min(left, above)
