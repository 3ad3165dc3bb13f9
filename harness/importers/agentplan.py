"""What an Agentfile defines (inputs, agents, goals, RUN and LOOP steps) and the plan's
subtasks its goals become: ids made unique, each chained to what precedes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.importers.agenttokens import Ref

_ID_MAX = 64


@dataclass(frozen=True)
class Part:
    """A piece of a goal's text and where it came from, to place an interpolation error."""

    text: str
    line: int
    col: int
    file: str | None = None  # the GOAL ... FROM path it was read from; line/col are the path's


@dataclass
class Input:
    ref: Ref
    default: str | None


@dataclass
class Agent:
    ref: Ref
    path: str  # the repository path of its file


@dataclass
class Goal:
    key: str  # its name, or goal-<n> when unnamed
    named: bool
    line: int
    col: int
    parts: list[Part]
    using: list[Ref]
    supervised: bool | str | None
    text: str = ""
    agents: list[Agent] = field(default_factory=list)


@dataclass
class Step:
    kind: str  # RUN or LOOP
    ref: Ref
    goals: list[Ref]
    within: Ref | None  # the number or $variable's token, LOOP only


class Builder:
    """Subtasks from the goals in order: ids made unique, each chained to what precedes it."""

    def __init__(
        self, role: str, write_scope: str | list[str], plan_wide: bool | str | None
    ) -> None:
        self.role = role
        self.write_scope = write_scope
        self.plan_wide = plan_wide
        self.taken: set[str] = set()
        self.tried: dict[str, int] = {}
        self.made: list[dict[str, Any]] = []

    def subtasks(self, order: list[tuple[Goal, int | None]]) -> list[dict[str, Any]]:
        last: list[str] = []
        for goal, bound in order:
            last = [self.group(goal, bound, last)]
        return self.made

    def group(self, goal: Goal, bound: int | None, after: list[str]) -> str:
        """The goal's subtasks, depending on `after`; the id of the one that ends it."""
        own = self.unique(goal.key)
        if len(goal.agents) <= 1:
            persona = goal.agents[0] if goal.agents else None
            text = goal.text if persona is None else _as_persona(persona, goal.text)
            inputs = [] if persona is None else [persona.path]
            self.add(own, text, inputs, after, goal, bound)
            return own
        ids = [self.unique(f"{goal.key}-{agent.ref.name}") for agent in goal.agents]
        for sid, agent in zip(ids, goal.agents, strict=True):
            self.add(sid, _as_persona(agent, goal.text), [agent.path], after, goal, bound)
        text = f"Reconcile into one result what {', '.join(ids)} did, each as its persona: "
        self.add(own, text + goal.text, [], ids, goal, bound)
        return own

    def add(
        self,
        sid: str,
        text: str,
        inputs: list[str],
        after: list[str],
        goal: Goal,
        bound: int | None,
    ) -> None:
        subtask: dict[str, Any] = {
            "id": sid,
            "role": self.role,
            "goal": text,
            "inputs": inputs,
            "acceptance": [],
            "write_scope": list(self.write_scope)
            if isinstance(self.write_scope, list)
            else self.write_scope,
            "depends_on": list(after),
        }
        if bound is not None:
            subtask["loop"] = {"max": bound, "until": "no_diff"}
        supervised = goal.supervised if goal.supervised is not None else self.plan_wide
        if supervised is not None:
            subtask["supervised"] = supervised
        self.made.append(subtask)

    def unique(self, base: str) -> str:
        candidate = base[:_ID_MAX]
        # Where the search for `base` stopped last time: a goal run thousands of times
        # should not make its ids one scan of all before them each.
        n = self.tried.get(base, 1)
        while candidate in self.taken:
            n += 1
            suffix = f"-{n}"
            candidate = base[: _ID_MAX - len(suffix)] + suffix
        self.tried[base] = n
        self.taken.add(candidate)
        return candidate


def _as_persona(agent: Agent, text: str) -> str:
    return f"Work as the persona in {agent.path} (agent {agent.ref.name}): {text}"
