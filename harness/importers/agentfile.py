r"""An Agentfile read into a plan.json document: the seeds' forms (001, 003) and the Agentfile
project's language as its repository writes it today; `harness plan import` writes it.

Pure: the text and a `read` callable in, a dict out; every problem is one InvalidInput
line `<label>:<line>:<column>: <what>`, 1-based, columns counted in characters. The lexer
is agenttokens.py; names bound and texts made, agentbind.py; the subtasks, agentplan.py.

The language, as read here:

- One statement a line: `NAME n` (or `WORKFLOW n`), `VERSION v`, `INPUT a[, b ...]
  [DEFAULT value]` (or `INPUT a="value"`, or `INPUT a "value"`), `AGENT a (FROM path |
  "prompt") [-> f, g] [REQUIRES "profile"] [mode]`, `GOAL [name] ("outcome" | FROM path)
  [-> f, g] [USING a, b ...] [mode]`, `CONVERGE name (...as GOAL...) WITHIN (n | $input)
  [mode]`, `RUN name USING g, h [THEN k ...] [mode]`, `LOOP name USING g, h ... WITHIN
  (n | $input)`, `SUPERVISED [HUMAN]`, `SECURITY default`; a mode is `SUPERVISED [HUMAN]`
  or `UNSUPERVISED`. A GOAL's or CONVERGE's clauses may come in any order, `->` also before
  the outcome (the project's files write all these orders). Keywords are upper case and
  reserved; names are a letter then letters, digits, `_` or `-`, except NAME's, which is
  any one word. A string is `"..."` on one line (backslash escapes: quote, n, t, r,
  backslash; any other backslash stays) or, between triple quotes, over lines, unescaped,
  without the newline just after its opening quotes nor the line of its closing ones when
  they stand alone. A `#` that starts a line or a token begins a comment. A path or a
  DEFAULT value is one word, or a string.
- Refused, naming the construct and why: `SECURITY paranoid` and `SECURITY research`
  (modes of the project's own tool-call checks, which harness does not have), an AGENT
  FROM a skill name searched in the project's skills.paths (it names no repository file),
  UNSUPERVISED under a workflow-wide SUPERVISED HUMAN (the project refuses it too).
- Seed 001's older form: an unnamed `GOAL "..."` takes the id `goal-<n>`, n its place among
  all GOAL lines. Indented lines after any GOAL belong to it (blank and comment lines do not
  end them) and join its text; an indented line after anything else is an ordinary statement.
- `SUPERVISED` (`true`, the audit agent's verdict) or `SUPERVISED HUMAN` (`"human"`) on its
  own line: before the first GOAL it holds for every subtask; after one, for the next GOAL
  only (seed 001's step-level override). One left with no GOAL after it, or given twice for
  the same scope, is refused. A mode at the end of an AGENT, GOAL, CONVERGE or RUN line is
  that statement's; UNSUPERVISED is `false`. The nearest wins: agent, goal, RUN, workflow.
- Definitions come before use (seed 003: RUN and LOOP "must reference already-defined
  goals"; the same is asked of the agents a GOAL's USING names); INPUTs may come anywhere,
  being bound before anything is built. A name is defined once per kind.
- Interpolation in goal and inline agent text (and the files GOAL ... FROM names): `$name`
  and `${name}` are an INPUT's value (given by `--input`, else its DEFAULT), else, for a
  GOAL's name, "the result of goal <name>" (seed 003: "prior goal outputs"; that result is
  the goal's commits, which every later subtask sees), else, for a field some goal or agent
  declares with `->`, "the <field> from goal <name>"; anything else is an error. `{name}`
  (seed 001) is an INPUT's value and left as it is otherwise. `$$` is a literal `$`; a `$`
  before no name stays as it is. Paths, NAME and DEFAULT values are not interpolated.
- Every INPUT needs a value; an `--input` the Agentfile does not declare is refused (a
  misspelt one would otherwise be dropped in silence behind a DEFAULT). It, and a file
  with no GOAL, are placed at 1:1, the file as a whole.
- Arguments the plan cannot hold (a task id that is no id, an empty role) are refused as
  plan.schema.json words it: `<label>: <json path>: <problem>`; the text never causes that.

The plan:

- Subtasks follow RUN and LOOP statements in file order, each of their goals in turn (a goal
  used twice becomes two groups of subtasks; THEN orders as a comma does); each depends on
  the one before, across statements. Goals no RUN or LOOP uses come after, in file order, on
  the same chain: an import is for a person to review, and a goal shown at the end is easier
  to delete than one dropped without a trace is to notice. With no RUN or LOOP, goals run in
  file order.
- A goal's text is one line: its parts joined with spaces and every run of whitespace made
  one space. A GOAL ... FROM file's text is the goal (interpolated); the file is not an
  input besides. `-> f, g` adds "; report its results as: f, g" (harness passes no values
  between subtasks: a later one sees the earlier ones' commits).
- AGENTs are personas: a goal USING one agent is one subtask with the agent's file among its
  inputs (an inline prompt goes in its text instead) and a text telling the worker to work
  as it; USING several, one such subtask per agent (`<goal>-<agent>`, side by side, each
  depending on what precedes the goal) and a synthesis subtask with the goal's own id that
  depends on them all and asks to reconcile their work; what follows depends on the
  synthesis. An agent's FROM path is resolved against the Agentfile's folder into a
  repository path; one that leaves the repository is refused. A path whose last part has
  no `.` is a skill folder: its SKILL.md is the persona's file. `REQUIRES "p"` makes the
  agent's subtasks `"agent": "p"`: the registry agent named p is called, as the project's
  profile p names a model (pre-flight refuses the plan if the registry has none). Every
  AGENT and GOAL file is read once, when its line is met.
- A LOOP's goals get `"loop": {"max": n, "until": "no_diff"}` each (1 <= n <= 1000), and so
  does a CONVERGE goal with its own WITHIN: harness repeats a subtask, not a sequence, and
  the Agentfile's convergence ("nothing left to do", `CONVERGED`) is a round with no diff;
  an imported goal has no acceptance criteria to wait for.
- Ids are names, cut to 64 characters and made unique with `-2`, `-3`, ... as they are
  made (a goal's own id before its agents' ones, so a synthesis keeps the goal's name).
  Every subtask has the given role and write scope, `acceptance: []` and `depends_on`.
  NAME, VERSION and `SECURITY default` have no place in plan.json: checked, then dropped.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from harness.base import ids
from harness.base.errors import InvalidInput
from harness.importers.agentbind import Binder
from harness.importers.agentplan import Agent, Clauses, Goal, Input, Part, Step, Supervision
from harness.importers.agenttokens import KEYWORDS, NAME, NAME_RULE, PathToken, Ref, Token, Tokens

# The keywords that start a statement; the others only continue one.
_CLAUSES = {"DEFAULT", "FROM", "USING", "THEN", "WITHIN", "REQUIRES", "UNSUPERVISED", "HUMAN"}
_STATEMENTS = KEYWORDS - _CLAUSES
# A registry agent's id (common.schema.json), which REQUIRES names.
# The project's modes that tighten or loosen its own checks of each tool call.
_SECURITY_WHY = {
    "paranoid": "SECURITY paranoid: harness has no per-tool-call verification to make "
    "stricter (its workers run sandboxed, and every diff is gated, in every plan)",
    "research": "SECURITY research: harness has no mode that lets security research through "
    "within a declared scope; its workers run contained whatever the scope says",
}


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
    binder = Binder(parsed.fail, label, parsed.inputs, parsed.agents, parsed.goals, parsed.steps)
    return binder.build(
        task_id=task_id,
        created=created,
        given=inputs,
        role=role,
        write_scope=write_scope,
        plan_wide=parsed.plan_wide,
    )


class _Parser:
    def __init__(self, label: str, read: Callable[[str], str]) -> None:
        self.label = label
        self.read = read
        self.folder = posixpath.dirname(label)
        self.files: dict[str, str] = {}
        self.name: Ref | None = None
        self.version: Ref | None = None
        self.inputs: dict[str, Input] = {}
        self.agents: dict[str, Agent] = {}
        self.goals: dict[str, Goal] = {}
        self.steps: list[Step] = []
        self.step_names: dict[str, Ref] = {}
        self.plan_wide: Supervision = None
        self.pending: tuple[bool | str, int, int] | None = None  # SUPERVISED for the next GOAL
        self.goal_count = 0

    def fail(self, line: int, col: int, what: str) -> NoReturn:
        one_line = " ".join(what.splitlines())
        raise InvalidInput(f"{self.label}:{line}:{col}: {one_line}")

    # Pass one: the statements, in order; syntax, definitions and the files they name.

    def parse(self, text: str) -> None:
        lines = [raw[:-1] if raw.endswith("\r") else raw for raw in text.split("\n")]
        open_goal: Goal | None = None
        index = 0
        while index < len(lines):
            line = lines[index]
            body = line.lstrip()
            if not body or body.startswith("#"):
                index += 1
                continue
            indent = len(line) - len(body)
            if indent and open_goal is not None:
                open_goal.parts.append(Part(body.rstrip(), index + 1, indent + 1))
                index += 1
                continue
            tokens = Tokens(self, lines, index)
            open_goal = self.statement(index + 1, tokens)
            index = tokens.after
        if self.pending is not None:
            _, line_no, col = self.pending
            self.fail(line_no, col, "SUPERVISED applies to the next GOAL, and none follows")

    def statement(self, line: int, tokens: Tokens) -> Goal | None:
        """Parse one statement; the GOAL it defines, which indented lines may continue."""
        head = tokens.next("a keyword")
        if head.kind != "word":
            found = f'"{head.text}"' if head.kind == "string" else repr(head.text)
            self.fail(line, head.col, f"expected a keyword, found {found}")
        if head.text not in _STATEMENTS:
            if head.text in KEYWORDS:
                self.fail(line, head.col, f"{head.text} does not start a statement")
            if head.text.upper() in _STATEMENTS:
                self.fail(
                    line, head.col, f"unknown keyword {head.text!r} (keywords are upper case)"
                )
            self.fail(line, head.col, f"unknown keyword {head.text!r}")
        if head.text in ("GOAL", "CONVERGE"):
            return self._goal(line, head, tokens)
        if head.text in ("RUN", "LOOP"):
            self._step(line, head.text, tokens)
        elif head.text == "SUPERVISED":
            self._supervised(line, head, tokens)
        else:
            {
                "NAME": self._name,
                "WORKFLOW": self._name,
                "VERSION": self._version,
                "INPUT": self._input,
                "AGENT": self._agent,
                "SECURITY": self._security,
            }[head.text](head, tokens)
        return None

    def _name(self, head: Token, tokens: Tokens) -> None:
        token = tokens.next("the workflow's name")
        if token.kind in (",", "->") or not token.text.strip():
            self.fail(token.line, token.col, "expected the workflow's name")
        tokens.end()
        if self.name is not None:
            self.fail(
                token.line, token.col, f"{head.text} is already given at line {self.name.line}"
            )
        self.name = Ref(token.text, token.line, token.col)

    def _version(self, head: Token, tokens: Tokens) -> None:
        token = tokens.next("the workflow's version")
        if token.kind in (",", "->") or not token.text.strip():
            self.fail(token.line, token.col, "expected the workflow's version")
        tokens.end()
        if self.version is not None:
            self.fail(
                token.line, token.col, f"VERSION is already given at line {self.version.line}"
            )
        self.version = Ref(token.text, token.line, token.col)

    def _security(self, head: Token, tokens: Tokens) -> None:
        token = tokens.next("a security mode")
        if token.kind != "word" or token.text not in ("default", *_SECURITY_WHY):
            self.fail(
                token.line, token.col, "SECURITY needs default, paranoid or research (a mode)"
            )
        if token.text in _SECURITY_WHY:
            self.fail(head.line, head.col, _SECURITY_WHY[token.text])
        tokens.end()

    def _input(self, head: Token, tokens: Tokens) -> None:
        first = tokens.peek()
        default: str | None = None
        if first is not None and first.kind == "word" and "=" in first.text:
            # `INPUT name="value"` (or name=value): the default written as an assignment.
            tokens.at += 1
            name, _, default = first.text.partition("=")
            if not NAME.match(name) or name in KEYWORDS:
                self.fail(
                    first.line, first.col, f"expected an input name ({NAME_RULE}), found {name!r}"
                )
            names = [Ref(name, first.line, first.col)]
            if not default:
                default = self._value(tokens, "a value after =").text
        else:
            names = tokens.names("an input name")
            after = tokens.peek()
            if tokens.keyword("DEFAULT") or (after is not None and after.kind == "string"):
                value = self._value(tokens, "a DEFAULT value")
                if len(names) > 1:
                    self.fail(value.line, value.col, "DEFAULT needs a single INPUT on its line")
                default = value.text
        tokens.end()
        for ref in names:
            if ref.name in self.inputs:
                first_line = self.inputs[ref.name].ref.line
                self.fail(
                    ref.line, ref.col, f"INPUT {ref.name} is already declared at line {first_line}"
                )
            self.inputs[ref.name] = Input(ref, default)

    def _value(self, tokens: Tokens, wanted: str) -> Token:
        value = tokens.next(wanted)
        if value.kind in (",", "->"):
            self.fail(value.line, value.col, f"expected {wanted}")
        return value

    def _agent(self, head: Token, tokens: Tokens) -> None:
        ref = tokens.name("an agent name")
        source = tokens.next("FROM <path> or a quoted prompt")
        agent = Agent(ref, None)
        if source.kind == "string":
            agent.prompt = Part(source.text, *source.at, cols=source.cols)
        elif source.kind == "word" and source.text == "FROM":
            agent.path = self._persona_file(ref, tokens.path())
        else:
            self.fail(source.line, source.col, f"expected FROM, found {source.text!r}")
        agent.outputs = tokens.outputs()
        if tokens.keyword("REQUIRES"):
            profile = tokens.next("a quoted capability profile")
            if profile.kind != "string" or not ids.whole(ids.ID, profile.text):
                self.fail(
                    profile.line,
                    profile.col,
                    "REQUIRES needs a quoted profile that can name a registry agent "
                    "(a letter or digit, then letters, digits, ., _ or -)",
                )
            agent.requires = profile.text
        agent.supervised = tokens.mode()
        tokens.end()
        if ref.name in self.agents:
            first = self.agents[ref.name].ref.line
            self.fail(ref.line, ref.col, f"AGENT {ref.name} is already defined at line {first}")
        self.agents[ref.name] = agent

    def _persona_file(self, ref: Ref, path: PathToken) -> str:
        """The repository path of an agent's persona: the file named, or a skill folder's
        SKILL.md when the last part of the path has no `.`."""
        named = self.resolve(path)
        if "." in posixpath.basename(path.text):
            self.load(path)
            return named
        skill = posixpath.join(path.text, "SKILL.md")
        if skill not in self.files:
            try:
                self.files[skill] = self.read(skill)
            except (InvalidInput, OSError, ValueError) as exc:
                self.fail(
                    path.line,
                    path.col,
                    f"AGENT {ref.name} FROM {path.text}: {exc or 'cannot be read'} (a skill is "
                    "its folder's SKILL.md; harness searches no skills.paths for one by name)",
                )
        return posixpath.join(named, "SKILL.md")

    def _goal(self, line: int, head: Token, tokens: Tokens) -> Goal:
        self.goal_count += 1
        first = tokens.peek()
        named = head.text == "CONVERGE" or (
            first is not None and first.kind == "word" and first.text != "FROM"
        )
        if named:
            ref = tokens.name("a goal name")
            key, base, col = ref.name, ref.name, ref.col
        else:
            key, base, col = f"#{self.goal_count}", f"goal-{self.goal_count}", head.col
        outputs = tokens.outputs()  # some of the project's files name them first
        parts = [] if named and self._text_follows(tokens) else [self._outcome(tokens)]
        clauses = self._clauses(tokens, head.text == "CONVERGE", bool(outputs))
        outputs += clauses.outputs
        if key in self.goals:
            before = self.goals[key].line
            self.fail(line, col, f"GOAL {key} is already defined at line {before}")
        supervised: Supervision = clauses.mode
        if self.pending is not None:
            # Seed 001's SUPERVISED line before the goal; a mode on the goal's own line wins.
            supervised = self.pending[0] if clauses.mode is None else clauses.mode
            self.pending = None
        goal = Goal(key, named, line, col, parts, clauses.using, supervised, outputs)
        goal.converge, goal.base = clauses.within, base
        self.goals[key] = goal
        return goal

    def _text_follows(self, tokens: Tokens) -> bool:
        """`GOAL name` alone on its line, its text on the indented lines below (seed 001's
        form, with a name)."""
        if tokens.peek() is not None:
            return False
        for index in range(tokens.after, len(tokens.lines)):  # no copy of the rest
            line = tokens.lines[index]
            body = line.lstrip()
            if body and not body.startswith("#"):
                return len(body) < len(line)
        return False

    def _outcome(self, tokens: Tokens) -> Part:
        outcome = tokens.next("a quoted outcome or FROM <path>")
        if outcome.kind == "string":
            return Part(outcome.text, *outcome.at, cols=outcome.cols)
        if outcome.kind == "word" and outcome.text == "FROM":
            path = tokens.path()
            return Part(self.load(path), path.line, path.col, path.text)
        self.fail(outcome.line, outcome.col, "expected a quoted outcome or FROM <path>")

    def _clauses(self, tokens: Tokens, converge: bool, has_outputs: bool) -> Clauses:
        """What follows a goal's outcome: `-> fields`, `USING agents`, CONVERGE's `WITHIN`
        and a mode, each at most once, in any order (the project's files use several)."""
        found = Clauses()
        while (token := tokens.peek()) is not None:
            if token.kind == "->" and not (found.outputs or has_outputs):
                found.outputs = tokens.outputs()
            elif token.kind == "word" and token.text == "USING" and not found.using:
                tokens.at += 1
                found.using = tokens.names("an agent name")
                seen: set[str] = set()
                for agent in found.using:
                    if agent.name in seen:
                        self.fail(agent.line, agent.col, f"agent {agent.name} is named twice")
                    seen.add(agent.name)
            elif token.kind == "word" and token.text == "WITHIN" and converge and not found.within:
                found.within = tokens.within()
            elif (
                token.kind == "word"
                and token.text in ("SUPERVISED", "UNSUPERVISED")
                and found.mode is None
            ):
                found.mode = tokens.mode()
            else:
                break
        if converge and found.within is None:
            tokens.expect("WITHIN")
        tokens.end()
        return found

    def _step(self, line: int, kind: str, tokens: Tokens) -> None:
        ref = tokens.name(f"the {kind}'s name")
        tokens.expect("USING")
        goals = tokens.names("a goal name", also="THEN" if kind == "RUN" else "")
        within = tokens.within() if kind == "LOOP" else None
        supervised = tokens.mode() if kind == "RUN" else None
        tokens.end()
        if ref.name in self.step_names:
            before = self.step_names[ref.name].line
            self.fail(line, ref.col, f"RUN or LOOP {ref.name} is already at line {before}")
        self.step_names[ref.name] = ref
        self.steps.append(Step(kind, ref, goals, within, supervised))

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
