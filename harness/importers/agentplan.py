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
    cols: tuple[int, ...] | None = None  # each character's column, when escapes moved them


Supervision = bool | str | None  # True, "human", False (UNSUPERVISED) or not said


@dataclass
class Input:
    ref: Ref
    default: str | None


@dataclass
class Agent:
    ref: Ref
    path: str | None  # the repository path of its file; None for an inline prompt
    prompt: Part | None = None  # an inline prompt
    outputs: list[str] = field(default_factory=list)
    requires: str | None = None  # the registry agent its REQUIRES names
    supervised: Supervision = None
    text: str = ""  # the inline prompt, interpolated


@dataclass
class Goal:
    key: str  # its name, or #<n> when unnamed: no name can clash with it
    named: bool
    line: int
    col: int
    parts: list[Part]
    using: list[Ref]
    supervised: Supervision
    outputs: list[str] = field(default_factory=list)
    converge: Ref | None = None  # CONVERGE's WITHIN token
    text: str = ""
    agents: list[Agent] = field(default_factory=list)
    base: str = ""  # its subtasks' id: the name, or goal-<n> (seed 001)


@dataclass
class Step:
    kind: str  # RUN or LOOP
    ref: Ref
    goals: list[Ref]
    within: Ref | None  # the number or $variable's token, LOOP only
    supervised: Supervision = None


@dataclass
class Clauses:
    """What a GOAL or CONVERGE line says after its outcome."""

    outputs: list[str] = field(default_factory=list)
    using: list[Ref] = field(default_factory=list)
    within: Ref | None = None
    mode: Supervision = None


@dataclass(frozen=True)
class Placed:
    """A goal where the plan runs it: its LOOP or CONVERGE bound, its RUN's supervision."""

    goal: Goal
    bound: int | None
    supervised: Supervision = None


class Builder:
    """Subtasks from the goals in order: ids made unique, each chained to what precedes it."""

    def __init__(self, role: str, write_scope: str | list[str], plan_wide: Supervision) -> None:
        self.role = role
        self.write_scope = write_scope
        self.plan_wide: Supervision = plan_wide
        self.taken: set[str] = set()
        self.tried: dict[str, int] = {}
        self.made: list[dict[str, Any]] = []

    def subtasks(self, order: list[Placed]) -> list[dict[str, Any]]:
        last: list[str] = []
        for placed in order:
            last = [self.group(placed, last)]
        return self.made

    def group(self, placed: Placed, after: list[str]) -> str:
        """The goal's subtasks, depending on `after`; the id of the one that ends it."""
        goal = placed.goal
        own = self.unique(goal.base)
        if len(goal.agents) <= 1:
            persona = goal.agents[0] if goal.agents else None
            text = goal.text if persona is None else _as_persona(persona, goal.text)
            self.add(own, text, _persona_inputs(persona), after, placed, persona)
            return own
        ids = [self.unique(f"{goal.base}-{agent.ref.name}") for agent in goal.agents]
        for sid, agent in zip(ids, goal.agents, strict=True):
            text = _as_persona(agent, goal.text)
            self.add(sid, text, _persona_inputs(agent), after, placed, agent)
        text = f"Reconcile into one result what {', '.join(ids)} did, each as its persona: "
        self.add(own, text + goal.text, [], ids, placed, None)
        return own

    def add(
        self,
        sid: str,
        text: str,
        inputs: list[str],
        after: list[str],
        placed: Placed,
        persona: Agent | None,
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
        if persona is not None and persona.requires is not None:
            subtask["agent"] = persona.requires
        if placed.bound is not None:
            subtask["loop"] = {"max": placed.bound, "until": "no_diff"}
        # The nearest word wins: the agent's, the goal's, its RUN's, the workflow's.
        said = (persona.supervised if persona else None, placed.goal.supervised)
        supervised = next(
            (s for s in (*said, placed.supervised, self.plan_wide) if s is not None), None
        )
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


def _persona_inputs(agent: Agent | None) -> list[str]:
    return [] if agent is None or agent.path is None else [agent.path]


def _as_persona(agent: Agent, text: str) -> str:
    said = f"; report its results as: {', '.join(agent.outputs)}" if agent.outputs else ""
    if agent.path is None:
        persona = f'Work as agent {agent.ref.name}, whose persona is "{agent.text}"'
        return f"{persona}. Your goal: {text}{said}"
    return f"Work as the persona in {agent.path} (agent {agent.ref.name}): {text}{said}"
