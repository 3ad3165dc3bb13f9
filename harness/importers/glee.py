"""Glee workflows (seed 000) as harness plans: what `harness plan import` makes of a
`.glee/workflows/<name>.yml` file.

Pure: the workflow's text in, plan.json documents out; the caller reads files (a nested
workflow through `read`) and writes the plans. Every problem is one InvalidInput line
`<label>:<line>:<column>: <what>`, 1-based, at the YAML node (or the `${` inside a scalar)
it concerns. A nested workflow's label is `<name>` (its name in angle brackets), since
only the caller knows which file `read` took it from. The caller's own arguments (task_id,
created, role, write_scope) are checked by the plan schema, whose message names the label
and the JSON path instead. What `read` raises (an unreadable file, say) is the caller's and
passes through.

The format, as seed 000 gives it, read strictly (an unknown key is refused, never ignored):

- a workflow: `steps` (required, at least one), `execution` (`sequential`, the default,
  `parallel` or `dag`), `on_error`, and `name` and `description`, which are informational:
  the plan's task id is the caller's `task_id`, or a nested workflow's name;
- a step: exactly one of `agent: <name>` and `workflow: <name>`, then `name`,
  `description`, `parallel_group`, `on_error`, and for agent steps `prompt` and `inputs`
  (a mapping of names to scalar values).

Decisions where the seed and the issue are silent:

- **Agent steps.** The subtask's role is the caller's `role`, and it names no registry
  `agent`: Glee agents live in .glee/agents, not in harness's registry, and a plan naming
  an agent the registry lacks fails pre-flight. The Glee agent's name goes in the goal,
  `Glee agent <name>: <description> <prompt>; inputs: k=v, ...`, every line break joined
  into one line. Its `inputs` are free values (`channel: drive-thru`), not repository
  paths that harness must find at the base, so they go in the goal too: the subtask's
  `inputs` and `acceptance` are empty, for a person to fill in. Every subtask gets the
  caller's `write_scope` ("none" by default: nothing imported writes until a person says
  where).
- **Workflow steps** become `{"id", "plan": <name>, "goal", "depends_on"}` subtasks, and the
  named workflow (read through `read`) its own plan under task id `<name>`, which must be a
  valid id. Each nested workflow is converted once, however often it is named, with the
  same command-line inputs (so a workflow step takes no `inputs` and no `prompt`: one task
  id has one plan). The result lists this file's plan first, then the nested ones in the
  order a depth-first walk first reaches them.
- **Cycles** are refused here, with their path of task ids (`review -> lint -> review`) at
  the `workflow:` that closes them, rather than left to harness's plan validation: the
  walk must stop anyway, and a refused import writes nothing. This file's task id stands
  for it in the path, so a nested workflow named like the task being imported closes a
  cycle. The depth limit is left to harness (`[limits] max_depth`, checked at every run):
  only the config knows it.
- **Step ids** come from a step's `name` (characters outside `[A-Za-z0-9._-]` become `-`,
  leading punctuation and trailing dashes dropped, cut to 64), else `step-<i>` with `i`
  as in `${steps[i]}` (0-based); a taken id gets `-2`, `-3`, ... .
- **Edges.** `sequential`: each step depends on the step (or parallel group) before it.
  `parallel` and `dag`: no step depends on another by position. In every mode a reference
  `${steps[i].output}` (or `.status`, `.error`) makes the step depend on step i, directly,
  since harness hands a subtask only its direct dependencies' artifacts (as blobs named
  `<id>/<artifact>`); `${parallel_group.G.outputs}` (or `.succeeded`, `.failed`,
  `.status`) makes it depend on every step of group G. This is how seed 000's parallel-scan
  has its aggregator run after the scanners. A `dag` step depends on nothing else. (A
  `workflow:` step's unit leaves commits, not artifacts: its dependents see its work in
  their base, harness's rule for nested plans.)
- **Parallel groups** are runs of consecutive steps with the same `parallel_group` (a group
  split by another step is refused). Its steps never depend on one another (a reference
  between them is refused); in `sequential` execution they all depend on the step or group
  before, and the next step on all of them.
- **References in text** (step `inputs` values, `description` and `prompt`): `${name}` is
  the command-line input `name`; `${expr ?? default}` is the default (quoted or bare) when
  the input is not given. A step reference is kept in the goal as `<output of step-0>`
  (`, or "<default>" if there is none` with `??`, which is what a dependent of a failed
  `continue` step gets: no artifacts). A reference past the steps, to the step itself, or
  in `sequential` to a later step is refused; in `parallel` and `dag` a cycle of references
  is refused with its path. `$` not followed by `{` is plain text. Values are not
  interpolated twice: an input's value is used as given.
- **on_error**: Glee's names are harness's (`stop`, `continue`, `skip_dependents`); others
  are refused. A step's own goes on its subtask. The plan's is the workflow's, else the
  default of seed 000's failure table for its mode: `stop` for sequential, `continue` for
  parallel, `skip_dependents` for dag; it is always written out.
- **max_parallel** is left out: harness caps `--max-parallel` by the plan's value, never
  raises it, so the runner's choice stands and the plan's edges say what may run at once.
- **YAML** (gleeyaml.py): one document whose top is a mapping, read with the safe loader's
  composer only (nothing is constructed). Anchors and aliases are refused at the first one,
  so no alias bomb expands; nesting deeper than 64 collections is refused before the
  composer's recursion could fail; keys must be plain text and appear once; lone surrogates
  (from `\\ud800` escapes) are refused, as no JSON writer could write them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from harness.base import ids, schemas
from harness.base.errors import InvalidInput
from harness.importers.gleeyaml import Document, Pos, keys, pos
from harness.spec import plan as plan_mod

MODES = ("sequential", "parallel", "dag")
ON_ERROR = ("stop", "continue", "skip_dependents")
# Seed 000's failure table: what a failed step does when neither it nor its workflow says.
MODE_ON_ERROR = {"sequential": "stop", "parallel": "continue", "dag": "skip_dependents"}
WORKFLOW_KEYS = ("name", "description", "steps", "execution", "on_error")
STEP_KEYS = (
    "agent",
    "workflow",
    "name",
    "description",
    "prompt",
    "inputs",
    "parallel_group",
    "on_error",
)
_REF = re.compile(
    r"""\$\{\s*(?P<expr>[^{}?\s]+)\s*(?:\?\?(?P<default>\s*"[^"]*"\s*|\s*'[^']*'\s*|[^}]*))?\}"""
)
_STEP_REF = re.compile(r"steps\[(\d+)\]\.(output|status|error)")
_GROUP_REF = re.compile(r"parallel_group\.([^.]+)\.(outputs|succeeded|failed|status)")
_INPUT_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_NOT_ID = re.compile(r"[^A-Za-z0-9._-]+")
_BREAKS = re.compile(r"\s*[\r\n]+\s*")
_GROUP_WORDS = {
    "outputs": "outputs of",
    "succeeded": "outputs that succeeded of",
    "failed": "failures of",
    "status": "status of",
}


def to_plans(
    text: str,
    label: str,
    *,
    task_id: str,
    created: str,
    inputs: Mapping[str, str],
    role: str,
    write_scope: str | list[str],
    read: Callable[[str], str | None],
) -> dict[str, dict[str, Any]]:
    """task_id -> plan.json document: this file's plan first, then one per nested workflow.

    `read(name)` is the text of the workflow a `workflow: name` step runs, None when there
    is none; it is called at most once per name. Raises InvalidInput, one line, naming the
    file, line and column."""
    common = _Common(created, inputs, role, write_scope)
    first = _Workflow(text, label, task_id, common).convert()
    plans = {task_id: first.doc}
    labels = {task_id: label}
    # Depth-first without recursion: a long chain of nested workflows is only data.
    path = [task_id]
    walk: list[tuple[str, Iterator[tuple[str, Pos]]]] = [(label, iter(first.nested))]
    while walk:
        owner, children = walk[-1]
        child = next(children, None)
        if child is None:
            walk.pop()
            path.pop()
            continue
        name, (line, column) = child
        if name in path:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise InvalidInput(f"{owner}:{line}:{column}: workflows run in a cycle: {cycle}")
        if name in plans:
            continue
        nested_text = read(name)
        if nested_text is None:
            raise InvalidInput(f"{owner}:{line}:{column}: no workflow named {name!r}")
        labels[name] = f"<{name}>"
        converted = _Workflow(nested_text, labels[name], name, common).convert()
        plans[name] = converted.doc
        path.append(name)
        walk.append((labels[name], iter(converted.nested)))
    for tid, doc in plans.items():
        schemas.validate("plan", doc, labels[tid])
    return plans


@dataclass(frozen=True)
class _Common:
    created: str
    inputs: Mapping[str, str]
    role: str
    write_scope: str | list[str]


@dataclass(frozen=True)
class _Converted:
    doc: dict[str, Any]
    nested: list[tuple[str, Pos]]  # workflow names, in step order, where each is named


@dataclass
class _Step:
    index: int
    fields: dict[str, tuple[Node, Node]]
    id: str
    agent: str | None
    workflow: str | None
    group: str | None


class _Workflow(Document):
    """One workflow file converted into one plan, and the workflows it nests."""

    def __init__(self, text: str, label: str, task_id: str, common: _Common) -> None:
        super().__init__(text, label)
        self.task_id, self.common = task_id, common
        self.steps: list[_Step] = []
        self.stage: list[int] = []  # each step's, counted in runs of one group or one step
        self.stages: list[list[int]] = []  # each stage's steps
        self.groups: dict[str, list[int]] = {}  # each parallel group's steps
        self.mode = "sequential"

    def convert(self) -> _Converted:
        top = self.parse()
        if not isinstance(top, MappingNode):
            self.fail(pos(top), "a workflow is a mapping (steps:, execution:, ...)")
        fields = self.mapping(top, WORKFLOW_KEYS, "a workflow")
        for key in ("name", "description"):
            if key in fields:
                self.scalar(fields[key][1], key)
        if "steps" not in fields:
            self.fail(pos(top), "a workflow needs steps:")
        if "execution" in fields:
            self.mode = self.choice(fields["execution"][1], "execution", MODES)
        on_error = MODE_ON_ERROR[self.mode]
        if "on_error" in fields:
            on_error = self.choice(fields["on_error"][1], "on_error", ON_ERROR)
        steps = fields["steps"][1]
        if not isinstance(steps, SequenceNode) or not steps.value:
            self.fail(pos(steps), "steps: is a list of at least one step")
        self.read_steps(steps.value)
        subtasks = [self.subtask(step) for step in self.steps]
        self.refuse_cycles(subtasks)
        nested = [
            (step.workflow, pos(step.fields["workflow"][1]))
            for step in self.steps
            if step.workflow is not None
        ]
        doc = {
            "task_id": self.task_id,
            "created": self.common.created,
            "on_error": on_error,
            "subtasks": [sub for sub, _ in subtasks],
        }
        return _Converted(doc, nested)

    def read_steps(self, nodes: list[Node]) -> None:
        """Each step's kind, id and group; the stage it runs in when sequential."""
        taken: set[str] = set()
        closed: set[str] = set()
        for index, node in enumerate(nodes):
            if not isinstance(node, MappingNode):
                self.fail(pos(node), "a step is a mapping (agent: or workflow:, ...)")
            fields = self.mapping(node, STEP_KEYS, "a step")
            if ("agent" in fields) == ("workflow" in fields):
                which = "both" if "agent" in fields else "neither"
                self.fail(pos(node), f"a step has {which} agent: and workflow: (one of them)")
            agent = workflow = None
            if "agent" in fields:
                agent = self.scalar(fields["agent"][1], "agent").strip()
            else:
                for key in ("inputs", "prompt"):
                    if key in fields:
                        self.fail(
                            pos(fields[key][0]),
                            f"a workflow step takes no {key}: (nested workflows use the "
                            "command-line inputs)",
                        )
                value = fields["workflow"][1]
                workflow = self.scalar(value, "workflow")
                if not ids.whole(ids.ID, workflow):
                    self.fail(
                        pos(value), f"workflow {workflow!r} is not a task id ({ids.ID.pattern})"
                    )
            group = None
            if "parallel_group" in fields:
                value = fields["parallel_group"][1]
                group = self.scalar(value, "parallel_group")
                before = self.steps[-1].group if self.steps else None
                if group != before and group in closed:
                    self.fail(
                        pos(value),
                        f"parallel group {group!r} is split: its steps follow one another",
                    )
                closed.add(group)
            name = self.scalar(fields["name"][1], "name") if "name" in fields else ""
            sid = _unique(_slug(name) or f"step-{index}", taken)
            taken.add(sid)
            if not self.steps or group is None or self.steps[-1].group != group:
                self.stages.append([])
            self.stage.append(len(self.stages) - 1)
            self.stages[-1].append(index)
            if group is not None:
                self.groups.setdefault(group, []).append(index)
            self.steps.append(_Step(index, fields, sid, agent, workflow, group))

    def subtask(self, step: _Step) -> tuple[dict[str, Any], dict[int, Pos]]:
        """The step's subtask, and the steps it refers to (where it first does)."""
        refs: dict[int, Pos] = {}
        texts = [
            self.interpolate(step.fields[key][1], key, step, refs)
            for key in ("description", "prompt")
            if key in step.fields
        ]
        values: list[str] = []
        if "inputs" in step.fields:
            node = step.fields["inputs"][1]
            if not isinstance(node, MappingNode):
                self.fail(pos(node), "inputs: is a mapping of names to values")
            for key, (_, value) in self.mapping(node, tuple(keys(node)), "inputs").items():
                values.append(f"{key}={self.interpolate(value, f'input {key!r}', step, refs)}")
        deps = set(refs)
        if self.mode == "sequential" and self.stage[step.index] > 0:
            deps.update(self.stages[self.stage[step.index] - 1])
        text = _one_line(" ".join(texts))
        sub: dict[str, Any] = {"id": step.id}
        if step.workflow is not None:
            sub["plan"] = step.workflow
            sub["goal"] = f"Glee workflow {step.workflow}" + (f": {text}" if text else "")
        else:
            goal = f"Glee agent {step.agent}" + (f": {text}" if text else "")
            if values:
                goal += "; inputs: " + ", ".join(values)
            scope = self.common.write_scope
            sub.update(
                role=self.common.role,
                goal=_one_line(goal),
                inputs=[],
                acceptance=[],
                write_scope=scope if isinstance(scope, str) else list(scope),
            )
        sub["depends_on"] = [self.steps[j].id for j in sorted(deps)]
        if "on_error" in step.fields:
            sub["on_error"] = self.choice(step.fields["on_error"][1], "on_error", ON_ERROR)
        return sub, refs

    def interpolate(self, node: Node, what: str, step: _Step, refs: dict[int, Pos]) -> str:
        """The text with every `${...}` replaced; step references recorded in `refs`."""
        value = self.scalar(node, what)
        assert isinstance(node, ScalarNode)
        out: list[str] = []
        start = 0
        while (at := value.find("${", start)) >= 0:
            out.append(value[start:at])
            where = self.inner(node, at)
            match = _REF.match(value, at)
            if match is None:
                self.fail(where, f"unclosed or malformed reference {value[at : at + 40]!r}")
            out.append(self.resolve(match, where, step, refs))
            start = match.end()
        out.append(value[start:])
        return "".join(out)

    def resolve(self, match: re.Match[str], where: Pos, step: _Step, refs: dict[int, Pos]) -> str:
        expr, default = match["expr"], match["default"]
        if default is not None:
            default = default.strip()
            if len(default) >= 2 and default[0] == default[-1] and default[0] in "\"'":
                default = default[1:-1]
        whole = match.group()
        if (found := _STEP_REF.fullmatch(expr)) is not None:
            digits, field = found.groups()
            last = len(self.steps) - 1
            target = int(digits) if len(digits) <= 9 else last + 1
            if target > last:
                self.fail(where, f"{whole} is past the last step, steps[{last}]")
            self.refer(target, whole, where, step, refs)
            text = f"{field} of {self.steps[target].id}"
            return f"<{text}>" if default is None else f'<{text}, or "{default}" if there is none>'
        if (found := _GROUP_REF.fullmatch(expr)) is not None:
            group, field = found.groups()
            members = self.groups.get(group, [])
            if not members:
                self.fail(where, f"{whole}: there is no parallel group {group!r}")
            if group == step.group:
                self.fail(where, f"{whole} is this step's own parallel group, running beside it")
            for target in members:
                self.refer(target, whole, where, step, refs)
            ids = ", ".join(self.steps[j].id for j in members)
            return f"<{_GROUP_WORDS[field]} parallel group {group} ({ids})>"
        if _INPUT_REF.fullmatch(expr) is None:
            self.fail(
                where,
                f"unknown reference {whole}: an input name, steps[i].output|status|error or "
                "parallel_group.NAME.outputs|succeeded|failed|status",
            )
        if expr in self.common.inputs:
            return self.common.inputs[expr]
        if default is None:
            self.fail(
                where, f"input {expr!r} has no value: --input {expr}=VALUE, or ${{... ?? default}}"
            )
        return default

    def refer(self, target: int, whole: str, where: Pos, step: _Step, refs: dict[int, Pos]) -> None:
        if target == step.index:
            self.fail(where, f"{whole} is this step's own")
        if step.group is not None and self.steps[target].group == step.group:
            self.fail(where, f"{whole} is in this step's parallel group {step.group!r}, beside it")
        if self.mode == "sequential" and target > step.index:
            self.fail(where, f"{whole} runs later: sequential steps use only the steps before")
        refs.setdefault(target, where)

    def refuse_cycles(self, subtasks: list[tuple[dict[str, Any], dict[int, Pos]]]) -> None:
        """References in parallel or dag execution may go forward, so they may go round."""
        cycle = plan_mod.closed_path({i: sorted(refs) for i, (_, refs) in enumerate(subtasks)})
        if cycle:
            where = subtasks[cycle[0]][1][cycle[1]]
            ids = " -> ".join(self.steps[i].id for i in cycle)
            self.fail(where, f"steps refer to each other in a cycle: {ids}")


def _slug(name: str) -> str:
    return _NOT_ID.sub("-", name).lstrip("._-")[:64].rstrip("-")


def _unique(wanted: str, taken: set[str]) -> str:
    found, n = wanted, 1
    while found in taken:
        n += 1
        found = f"{wanted[: 63 - len(str(n))]}-{n}"
    return found


def _one_line(text: str) -> str:
    return _BREAKS.sub(" ", text).strip()
