"""An Agentfile's second pass: its INPUTs bound, its names checked, its texts interpolated,
its goals put in the order they run, and the plan.json document they make."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from harness.base import schemas
from harness.importers.agentplan import Agent, Builder, Goal, Input, Part, Placed, Step, Supervision
from harness.importers.agenttokens import Ref

MAX_LOOP = 1000  # a bound past this is a typo, not a plan; it also keeps int() small
_NUMBER = re.compile(r"[0-9]+\Z")
_VARIABLE = re.compile(
    r"\$\$|\$\{([A-Za-z][A-Za-z0-9_]*)\}|\$([A-Za-z][A-Za-z0-9_]*)|\{([A-Za-z][A-Za-z0-9_]*)\}"
)


class Binder:
    """The definitions pass one read, made into a plan."""

    def __init__(
        self,
        fail: Callable[[int, int, str], NoReturn],
        label: str,
        inputs: Mapping[str, Input],
        agents: Mapping[str, Agent],
        goals: Mapping[str, Goal],
        steps: list[Step],
    ) -> None:
        self.fail = fail
        self.label = label
        self.inputs = inputs
        self.agents = agents
        self.goals = goals
        self.steps = steps
        # Each `->` field, as later text names it: the first goal or agent declaring it.
        self.fields: dict[str, str] = {}
        for agent in agents.values():
            for name in agent.outputs:
                self.fields.setdefault(name, f"the {name} from agent {agent.ref.name}")
        for goal in goals.values():
            for name in goal.outputs:
                self.fields.setdefault(name, f"the {name} from goal {goal.base}")

    def build(
        self,
        *,
        task_id: str,
        created: str,
        given: Mapping[str, str],
        role: str,
        write_scope: str | list[str],
        plan_wide: Supervision,
    ) -> dict[str, Any]:
        self.lowered(plan_wide)
        values = self.bind(given)
        for agent in self.agents.values():
            if agent.prompt is not None:
                agent.text = " ".join(self.interpolate(agent.prompt, values).split())
        for goal in self.goals.values():
            goal.agents = [self.agent(ref, goal.line) for ref in goal.using]
            pieces = [self.interpolate(part, values) for part in goal.parts]
            goal.text = " ".join(" ".join(pieces).split())
            if not goal.text:
                self.fail(goal.line, goal.col, f"GOAL {goal.base} has no outcome")
            if goal.outputs:
                goal.text += f"; report its results as: {', '.join(goal.outputs)}"
        order = self.sequence(values)
        if not order:
            self.fail(1, 1, "no GOAL: there is nothing to import")
        subtasks = Builder(role, write_scope, plan_wide).subtasks(order)
        doc: dict[str, Any] = {"task_id": task_id, "created": created, "subtasks": subtasks}
        schemas.validate("plan", doc, self.label)
        return doc

    def lowered(self, plan_wide: Supervision) -> None:
        """UNSUPERVISED is refused under a workflow-wide SUPERVISED HUMAN, as the project
        refuses it: a person asked to see every change."""
        if plan_wide != "human":
            return
        lowered = [
            (a.ref.line, a.ref.col, f"AGENT {n}")
            for n, a in self.agents.items()
            if a.supervised is False
        ]
        lowered += [
            (g.line, g.col, f"GOAL {g.base}") for g in self.goals.values() if g.supervised is False
        ]
        lowered += [
            (s.ref.line, s.ref.col, f"RUN {s.ref.name}")
            for s in self.steps
            if s.supervised is False
        ]
        if lowered:
            line, col, what = min(lowered)
            self.fail(
                line,
                col,
                f"UNSUPERVISED: {what} cannot be unsupervised when the workflow is "
                "SUPERVISED HUMAN",
            )

    def bind(self, given: Mapping[str, str]) -> dict[str, str]:
        values: dict[str, str] = {}
        for name, declared in self.inputs.items():
            value = given.get(name, declared.default)
            if value is None:
                ref = declared.ref
                self.fail(
                    ref.line, ref.col, f"INPUT {name} has no value: give --input {name}=VALUE"
                )
            values[name] = value
        for name in given:
            if name not in self.inputs:
                self.fail(1, 1, f"--input {name}: the Agentfile declares no INPUT {name}")
        return values

    def agent(self, ref: Ref, used_at: int) -> Agent:
        found = self.agents.get(ref.name)
        if found is None:
            self.fail(ref.line, ref.col, f"AGENT {ref.name} is never defined")
        if found.ref.line > used_at:
            self.fail(
                ref.line,
                ref.col,
                f"AGENT {ref.name} is defined only later, at line {found.ref.line}",
            )
        return found

    def interpolate(self, part: Part, values: Mapping[str, str]) -> str:
        def value(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            braced = match.group(3)
            if braced is not None:
                return values.get(braced, match.group(0))
            name = match.group(1) or match.group(2)
            if name in values:
                return values[name]
            if name in self.goals and self.goals[name].named:
                return f"the result of goal {name}"
            if name in self.fields:
                return self.fields[name]
            line, col, inner = self.where(part, match.start())
            self.fail(line, col, f"{inner}undefined variable ${name}")

        return _VARIABLE.sub(value, part.text)

    def where(self, part: Part, index: int) -> tuple[int, int, str]:
        """Where a goal text's character is: the Agentfile's place, and the file's if read."""
        before = part.text[:index]
        lines = before.count("\n")
        col = index - (before.rfind("\n") + 1) + 1
        if part.file is not None:
            return part.line, part.col, f"{part.file}:{lines + 1}:{col}: "
        if part.cols is not None:
            return part.line, part.cols[index], ""
        if lines:  # in a triple-quoted string, past its first line
            return part.line + lines, col, ""
        return part.line, part.col + index, ""

    def sequence(self, values: Mapping[str, str]) -> list[Placed]:
        """The goals in the order they run, each with its bound and its RUN's mode."""
        order: list[Placed] = []
        used: set[str] = set()
        for step in self.steps:
            bound = None if step.within is None else self.bound(step.within, values)
            for ref in step.goals:
                goal = self.goals.get(ref.name)
                if goal is None or not goal.named:
                    self.fail(ref.line, ref.col, f"GOAL {ref.name} is never defined")
                if goal.line > ref.line:
                    self.fail(
                        ref.line,
                        ref.col,
                        f"GOAL {ref.name} is defined only later, at line {goal.line}",
                    )
                used.add(goal.key)
                order.append(Placed(goal, self.own_bound(goal, values, bound), step.supervised))
        order.extend(
            Placed(g, self.own_bound(g, values, None))
            for g in self.goals.values()
            if g.key not in used
        )
        return order

    def own_bound(self, goal: Goal, values: Mapping[str, str], bound: int | None) -> int | None:
        """A CONVERGE goal's own WITHIN, which wins over its LOOP's."""
        return bound if goal.converge is None else self.bound(goal.converge, values)

    def bound(self, within: Ref, values: Mapping[str, str]) -> int:
        text = within.name
        if text.startswith("$"):
            name = text[1:]
            if name not in values:
                self.fail(within.line, within.col, f"undefined variable {text}")
            text = values[name].strip()
            shown = f"{within.name} is {values[name]!r}, not"
        else:
            shown = "WITHIN needs"
        digits = text.lstrip("0") or "0"
        if not _NUMBER.match(text) or len(digits) > 4 or not 1 <= int(digits) <= MAX_LOOP:
            self.fail(within.line, within.col, f"{shown} a whole number from 1 to {MAX_LOOP}")
        return int(digits)
