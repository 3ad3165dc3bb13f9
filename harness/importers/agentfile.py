"""An Agentfile (seeds 001 and 003) read into a plan.json document; `harness plan import` writes it.

Pure: the text and a `read` callable in, a dict out; every problem is one InvalidInput
line `<label>:<line>:<column>: <what>`, 1-based, columns counted in characters. The lexer
is agenttokens.py; the definitions, and the subtasks they become, are agentplan.py.

The language, as read here:

- One statement a line: `NAME`, `INPUT a[, b ...] [DEFAULT value]`, `AGENT a FROM path`,
  `GOAL [name] ("outcome" | FROM path) [USING a, b ...]`, `RUN name USING g, h ...`,
  `LOOP name USING g, h ... WITHIN (n | $input)`, `SUPERVISED [HUMAN]`. Keywords are upper
  case and reserved; names are a letter then letters, digits or `_` (seed 003's grammar),
  except NAME's, which is any one word (seed 001 writes `deploy-service`). A string is
  `"..."` on one line, without escapes. A `#` that starts a line or a token begins a
  comment. A path or a DEFAULT value is one word, or a string when it holds spaces.
- Seed 001's older form: an unnamed `GOAL "..."` takes the name `goal-<n>`, n its place
  among all GOAL lines (a hyphen no written name can hold, so no clash). Indented lines after
  any GOAL belong to it (blank and comment lines do not end them) and join its text; an
  indented line after anything else is an ordinary statement.
- `SUPERVISED` (`true`, the audit agent's verdict) or `SUPERVISED HUMAN` (`"human"`) on its
  own line: before the first GOAL it holds for every subtask; after one, for the next GOAL
  only, whose own word wins over the plan-wide one (seed 001's step-level override). One
  left with no GOAL after it, or given twice for the same scope, is refused.
- Definitions come before use (seed 003: RUN and LOOP "must reference already-defined
  goals"; the same is asked of the agents a GOAL's USING names); INPUTs may come anywhere,
  being bound before anything is built. A name is defined once per kind.
- Interpolation in goal text (inline, indented lines and the files GOAL ... FROM names):
  `$name` and `${name}` are an INPUT's value (given by `--input`, else its DEFAULT), else,
  for a GOAL's name, the words "the result of goal <name>" (seed 003: "prior goal outputs";
  that result is the goal's commits, which every later subtask sees); anything else is an
  error. `{name}` (seed 001) is an INPUT's value and left as it is otherwise, since braces
  are common in prose and code. `$$` is a literal `$`; a `$` before no name stays as it is.
  Paths, NAME and DEFAULT values are not interpolated.
- Every INPUT needs a value; an `--input` the Agentfile does not declare is refused (a
  misspelt one would otherwise be dropped in silence behind a DEFAULT). It, and a file
  with no GOAL, are placed at 1:1, the file as a whole.
- Arguments the plan cannot hold (a task id that is no id, an empty role) are refused as
  plan.schema.json words it: `<label>: <json path>: <problem>`; the text never causes that.

The plan:

- Subtasks follow RUN and LOOP statements in file order, each of their goals in turn (a goal
  used twice becomes two groups of subtasks); each depends on the one before, across
  statements. Goals no RUN or LOOP uses come after, in file order, on the same chain: an
  import is for a person to review, and a goal shown at the end is easier to delete than one
  dropped without a trace is to notice. With no RUN or LOOP, goals run in file order.
- A goal's text is one line: its parts joined with spaces and every run of whitespace made
  one space. A GOAL ... FROM file's text is the goal (interpolated); the file is not an
  input besides.
- AGENT files are personas: a goal USING one agent is one subtask with the agent's file among
  its inputs and a text telling the worker to work as it; USING several, one such subtask per
  agent (`<goal>-<agent>`, side by side, each depending on what precedes the goal) and a
  synthesis subtask with the goal's own id that depends on them all and asks to reconcile
  their work; what follows depends on the synthesis. An agent's FROM path is resolved
  against the Agentfile's folder (`label`'s parent) into a repository path; one that leaves
  the repository is refused. Every AGENT and GOAL file is read once, when its line is met.
- A LOOP's goals get `"loop": {"max": n, "until": "no_diff"}` each (1 <= n <= 1000):
  harness repeats a subtask, not a sequence, and the Agentfile's convergence ("nothing left
  to do", "state unchanged") is a round with no diff; an imported goal has no acceptance
  criteria to wait for.
- Ids are names, cut to 64 characters and made unique with `-2`, `-3`, ... as they are
  made (a goal's own id before its agents' ones, so a synthesis keeps the goal's name).
  Every subtask has the given role and write scope, `acceptance: []` and `depends_on`.
  NAME has no place in plan.json: it is checked, then dropped.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from harness.base import schemas
from harness.base.errors import InvalidInput
from harness.importers.agentplan import Agent, Builder, Goal, Input, Part, Step
from harness.importers.agenttokens import KEYWORDS, PathToken, Ref, Token, Tokens

_STATEMENTS = frozenset({"NAME", "INPUT", "AGENT", "GOAL", "RUN", "LOOP", "SUPERVISED"})
MAX_LOOP = 1000  # a bound past this is a typo, not a plan; it also keeps int() small
_NUMBER = re.compile(r"[0-9]+\Z")
_WITHIN_VAR = re.compile(r"\$([A-Za-z][A-Za-z0-9_]*)\Z")
_VARIABLE = re.compile(
    r"\$\$|\$\{([A-Za-z][A-Za-z0-9_]*)\}|\$([A-Za-z][A-Za-z0-9_]*)|\{([A-Za-z][A-Za-z0-9_]*)\}"
)


def to_plan(
    text: str,
    label: str,
    *,
    task_id: str,
    created: str,
    inputs: Mapping[str, str],
    role: str,
    write_scope: str | list[str],
    read: Callable[[str], str],
) -> dict[str, Any]:
    """The plan.json document for the Agentfile `text`, named `label` in errors."""
    parsed = _Parser(label, read)
    parsed.parse(text)
    return parsed.build(
        task_id=task_id, created=created, given=inputs, role=role, write_scope=write_scope
    )


class _Parser:
    def __init__(self, label: str, read: Callable[[str], str]) -> None:
        self.label = label
        self.read = read
        self.folder = posixpath.dirname(label)
        self.files: dict[str, str] = {}
        self.name: Ref | None = None
        self.inputs: dict[str, Input] = {}
        self.agents: dict[str, Agent] = {}
        self.goals: dict[str, Goal] = {}
        self.steps: list[Step] = []
        self.step_names: dict[str, Ref] = {}
        self.plan_wide: bool | str | None = None
        self.pending: tuple[bool | str, int, int] | None = None  # SUPERVISED for the next GOAL
        self.goal_count = 0

    def fail(self, line: int, col: int, what: str) -> NoReturn:
        one_line = " ".join(what.splitlines())
        raise InvalidInput(f"{self.label}:{line}:{col}: {one_line}")

    # Pass one: the lines, in order; syntax, definitions and the files they name.

    def parse(self, text: str) -> None:
        open_goal: Goal | None = None
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw[:-1] if raw.endswith("\r") else raw
            body = line.lstrip()
            if not body or body.startswith("#"):
                continue
            indent = len(line) - len(body)
            if indent and open_goal is not None:
                open_goal.parts.append(Part(body.rstrip(), number, indent + 1))
                continue
            open_goal = self.statement(number, Tokens(self, number, line))
        if self.pending is not None:
            _, line_no, col = self.pending
            self.fail(line_no, col, "SUPERVISED applies to the next GOAL, and none follows")

    def statement(self, line: int, tokens: Tokens) -> Goal | None:
        """Parse one statement; the GOAL it defines, which indented lines may continue."""
        head = tokens.next("a keyword")
        if head.kind != "word":
            found = f'"{head.text}"' if head.kind == "string" else "','"
            self.fail(line, head.col, f"expected a keyword, found {found}")
        if head.text not in _STATEMENTS:
            if head.text in KEYWORDS:
                self.fail(line, head.col, f"{head.text} does not start a statement")
            if head.text.upper() in _STATEMENTS:
                self.fail(
                    line, head.col, f"unknown keyword {head.text!r} (keywords are upper case)"
                )
            self.fail(line, head.col, f"unknown keyword {head.text!r}")
        if head.text == "NAME":
            self._name(line, tokens)
        elif head.text == "INPUT":
            self._input(line, tokens)
        elif head.text == "AGENT":
            self._agent(line, tokens)
        elif head.text == "GOAL":
            return self._goal(line, head, tokens)
        elif head.text in ("RUN", "LOOP"):
            self._step(line, head.text, tokens)
        else:
            self._supervised(line, head, tokens)
        return None

    def _name(self, line: int, tokens: Tokens) -> None:
        token = tokens.next("the workflow's name")
        if token.kind == "," or not token.text.strip():
            self.fail(line, token.col, "expected the workflow's name")
        tokens.end()
        if self.name is not None:
            self.fail(line, token.col, f"NAME is already given at line {self.name.line}")
        self.name = Ref(token.text, line, token.col)

    def _input(self, line: int, tokens: Tokens) -> None:
        names = tokens.names("an input name")
        default: str | None = None
        if tokens.keyword("DEFAULT"):
            value = tokens.next("a DEFAULT value")
            if value.kind == ",":
                self.fail(line, value.col, "expected a DEFAULT value")
            if len(names) > 1:
                self.fail(line, value.col, "DEFAULT needs a single INPUT on its line")
            default = value.text
        tokens.end()
        for ref in names:
            if ref.name in self.inputs:
                first = self.inputs[ref.name].ref.line
                self.fail(line, ref.col, f"INPUT {ref.name} is already declared at line {first}")
            self.inputs[ref.name] = Input(ref, default)

    def _agent(self, line: int, tokens: Tokens) -> None:
        ref = tokens.name("an agent name")
        tokens.expect("FROM")
        path = tokens.path()
        tokens.end()
        if ref.name in self.agents:
            first = self.agents[ref.name].ref.line
            self.fail(line, ref.col, f"AGENT {ref.name} is already defined at line {first}")
        self.agents[ref.name] = Agent(ref, self.resolve(path))
        self.load(path)

    def _goal(self, line: int, head: Token, tokens: Tokens) -> Goal:
        self.goal_count += 1
        first = tokens.peek()
        if first is not None and first.kind == "word" and first.text != "FROM":
            ref = tokens.name("a goal name")
            key, named, col = ref.name, True, ref.col
        else:
            key, named, col = f"goal-{self.goal_count}", False, head.col
        outcome = tokens.next("a quoted outcome or FROM <path>")
        if outcome.kind == "string":
            part = Part(outcome.text, line, outcome.col + 1)
        elif outcome.kind == "word" and outcome.text == "FROM":
            path = tokens.path()
            part = Part(self.load(path), line, path.col, path.text)
        else:
            self.fail(line, outcome.col, "expected a quoted outcome or FROM <path>")
        using: list[Ref] = []
        if tokens.keyword("USING"):
            using = tokens.names("an agent name")
            seen: set[str] = set()
            for agent in using:
                if agent.name in seen:
                    self.fail(line, agent.col, f"agent {agent.name} is named twice")
                seen.add(agent.name)
        tokens.end()
        if key in self.goals:
            before = self.goals[key].line
            self.fail(line, col, f"GOAL {key} is already defined at line {before}")
        supervised = None
        if self.pending is not None:
            supervised, self.pending = self.pending[0], None
        goal = Goal(key, named, line, col, [part], using, supervised)
        self.goals[key] = goal
        return goal

    def _step(self, line: int, kind: str, tokens: Tokens) -> None:
        ref = tokens.name(f"the {kind}'s name")
        tokens.expect("USING")
        goals = tokens.names("a goal name")
        within: Ref | None = None
        if kind == "LOOP":
            tokens.expect("WITHIN")
            bound = tokens.next("a number or a $variable")
            if bound.kind != "word" or not (
                _NUMBER.match(bound.text) or _WITHIN_VAR.match(bound.text)
            ):
                self.fail(line, bound.col, "WITHIN needs a number or a $variable")
            within = Ref(bound.text, line, bound.col)
        tokens.end()
        if ref.name in self.step_names:
            before = self.step_names[ref.name].line
            self.fail(line, ref.col, f"RUN or LOOP {ref.name} is already at line {before}")
        self.step_names[ref.name] = ref
        self.steps.append(Step(kind, ref, goals, within))

    def _supervised(self, line: int, head: Token, tokens: Tokens) -> None:
        value: bool | str = "human" if tokens.keyword("HUMAN") else True
        tokens.end()
        if self.goal_count == 0:
            if self.plan_wide is not None:
                self.fail(line, head.col, "SUPERVISED is already given for the whole workflow")
            self.plan_wide = value
        elif self.pending is not None:
            self.fail(line, head.col, f"SUPERVISED is already given at line {self.pending[1]}")
        else:
            self.pending = (value, line, head.col)

    def resolve(self, path: PathToken) -> str:
        """The repository path of a file named relative to the Agentfile."""
        if path.text.startswith("/"):
            self.fail(path.line, path.col, f"{path.text}: a path must be relative to the Agentfile")
        joined = posixpath.normpath(posixpath.join(self.folder, path.text))
        if joined == ".." or joined.startswith("../"):
            self.fail(path.line, path.col, f"{path.text}: leaves the repository")
        return joined

    def load(self, path: PathToken) -> str:
        self.resolve(path)
        if path.text not in self.files:
            try:
                self.files[path.text] = self.read(path.text)
            except (InvalidInput, OSError, ValueError) as exc:
                self.fail(path.line, path.col, str(exc) or f"{path.text}: cannot be read")
        return self.files[path.text]

    # Pass two: names bound and checked, texts interpolated, subtasks made.

    def build(
        self,
        *,
        task_id: str,
        created: str,
        given: Mapping[str, str],
        role: str,
        write_scope: str | list[str],
    ) -> dict[str, Any]:
        values = self.bind(given)
        for goal in self.goals.values():
            goal.agents = [self.agent(ref, goal.line) for ref in goal.using]
            pieces = [self.interpolate(part, values) for part in goal.parts]
            goal.text = " ".join(" ".join(pieces).split())
            if not goal.text:
                self.fail(goal.line, goal.col, f"GOAL {goal.key} has no outcome")
        order = self.sequence(values)
        if not order:
            self.fail(1, 1, "no GOAL: there is nothing to import")
        subtasks = Builder(role, write_scope, self.plan_wide).subtasks(order)
        doc: dict[str, Any] = {"task_id": task_id, "created": created, "subtasks": subtasks}
        schemas.validate("plan", doc, self.label)
        return doc

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
            line, col, inner = self.where(part, match.start())
            self.fail(line, col, f"{inner}undefined variable ${name}")

        return _VARIABLE.sub(value, part.text)

    def where(self, part: Part, index: int) -> tuple[int, int, str]:
        """Where a goal text's character is: the Agentfile's place, and the file's if read."""
        if part.file is None:
            return part.line, part.col + index, ""
        before = part.text[:index]
        line = before.count("\n") + 1
        col = index - (before.rfind("\n") + 1) + 1
        return part.line, part.col, f"{part.file}:{line}:{col}: "

    def sequence(self, values: Mapping[str, str]) -> list[tuple[Goal, int | None]]:
        """The goals in the order they run, each with its LOOP bound."""
        order: list[tuple[Goal, int | None]] = []
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
                order.append((goal, bound))
        order.extend((g, None) for g in self.goals.values() if g.key not in used)
        return order

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
