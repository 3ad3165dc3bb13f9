"""Pre-flight: what must hold before a subtask's first call, checked the same way by
`harness plan validate` (every subtask), by `next`/`run` before their first call (every
subtask still to run: any problem refuses the command, all listed at once, nothing logged
and no worker called), and again just before each new call (what changed since, a one-shot
token spent, say: logged as a step_failed in phase "preflight", then a blocker).

Each problem is one line naming the subtask. What is checked: a registry agent takes the
subtask's role; that agent is present and its CLI's version in range (asked once per agent);
a usable write token covers what the subtask may write ("write_scope": "none" needs none),
and an agent whose registry `tools` hold neither write nor edit is given no subtask that does;
its inputs exist at the base; its supervisor can run; ai/policy.toml allows every
command the registry lets its agent run; and a person is at hand for a subtask a person
must approve. An input a subtask depends on another to create is checked
only once that one is done: `plan validate` checks the inputs of subtasks with no
dependencies.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.errors import HarnessError, InvalidInput
from harness.boundary import policy, registry
from harness.boundary.contain import Containment
from harness.boundary.registry import Agent
from harness.record import protocol, tokens
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec import config
from harness.spec import plan as plan_mod
from harness.spec.plan import Plan, Subtask
from harness.step import budgets, nesting, supervision

Probe = Callable[[Agent], str]  # the agent's version, or HarnessError saying why not
Hashes = Callable[[Sequence[str]], Mapping[str, str | None]]  # path -> blob sha at the base


@dataclass(frozen=True)
class Cleared:
    """A subtask cleared for its call: its agent and write token (None: it writes nothing)."""

    agent: Agent
    token: str | None


class Checker:
    """The checks, with what they read; each agent is probed at most once."""

    def __init__(
        self,
        agents: Sequence[Agent],
        store: Sequence[tokens.Token],
        now: str,
        probe: Probe | None,
        hashes: Hashes,
        rules: policy.Policy | None = None,
    ) -> None:
        self.agents, self.store, self.now = list(agents), list(store), now
        self.probe, self.hashes = probe, hashes
        self.rules = rules  # ai/policy.toml, whose refusals of registry commands are problems
        self.probed: dict[str, str | None] = {}  # agent id -> why it cannot run, or None

    def subtask(self, sub: Subtask, inputs: bool = True, fallbacks: int = 0) -> Cleared | list[str]:
        """The subtask cleared for a call of its current agent (the plan's first, or the
        one `fallbacks` later), or every problem found with it."""
        agent = registry.route(self.agents, sub.role, sub.agent_at(fallbacks))
        problems = []
        if agent is None:  # the subtask's other problems are still told with this one
            problems.append(unroutable(self.agents, sub, sub.agent_at(fallbacks)))
        else:
            problems += self.agent_problems(sub, agent)
        token, why = self.token(sub)
        if why is not None:
            problems.append(f"subtask {sub.id}: {why}")
        if inputs and sub.inputs:
            missing = [p for p, h in self.hashes(sub.inputs).items() if h is None]
            if missing:
                problems.append(f"subtask {sub.id}: input not found: {', '.join(missing)}")
        if problems or agent is None:
            return problems
        return Cleared(agent, token)

    def agent_problems(self, sub: Subtask, agent: Agent) -> list[str]:
        """Why `agent` cannot take `sub`: it cannot run, the policy refuses its commands,
        or it may not write what the subtask writes."""
        problems = []
        why = self.agent_problem(agent)
        if why is not None:
            problems.append(f"subtask {sub.id}: {why}")
        problems += self.refused_commands(agent)
        if (sub.write_scope or sub.creates) and not agent.writes:
            tools = ", ".join(agent.tools or ()) or "none"
            problems.append(
                f"subtask {sub.id}: agent {agent.id} may not write (its tools: {tools}), "
                "so it cannot be given a write scope"
            )
        return problems

    def plan(self, plan: Plan) -> list[str]:
        """Every problem of every subtask, in plan order."""
        found: list[str] = []
        for sub in plan.subtasks:
            if sub.plan is not None:  # its plan's subtasks are checked with that plan
                continue
            for k in range(max(1, len(sub.agents))):  # every fallback must be ready too
                result = self.subtask(sub, inputs=not sub.depends_on and k == 0, fallbacks=k)
                if isinstance(result, list):
                    found += [p for p in result if p not in found]
            why = self.supervisor(sub)
            if why is not None and why not in found:
                found.append(why)
        return found

    def supervisor(self, sub: Subtask) -> str | None:
        """Why the agent that gives `sub` its verdicts cannot, if it is supervised by one."""
        if sub.supervised != plan_mod.AGENT:
            return None
        agent = registry.route(self.agents, supervision.ROLE, None)
        if agent is None:
            role = supervision.ROLE
            return f"subtask {sub.id}: supervised, but no agent has the {role!r} capability"
        why = self.agent_problem(agent)
        return None if why is None else f"subtask {sub.id}: its supervisor {why}"

    def agent_problem(self, agent: Agent) -> str | None:
        if self.probe is None:  # a replay: the calls are recorded, no agent is asked
            return None
        if agent.id not in self.probed:
            try:
                self.probe(agent)
                self.probed[agent.id] = None
            except HarnessError as exc:
                self.probed[agent.id] = str(exc)
        return self.probed[agent.id]

    def refused_commands(self, agent: Agent) -> list[str]:
        """The agent's registry commands the policy, or its own `tools` without bash,
        refuses: the registry and the policy must agree before a run, rather than a worker
        finding a command gone."""
        if agent.tools is not None and "bash" not in agent.tools and agent.commands:
            return [f"agent {agent.id}: its registry tools leave out bash, yet it lists commands"]
        if self.rules is None:
            return []
        kept = self.rules.effective(agent.commands).commands
        return [
            f"agent {agent.id}: ai/policy.toml refuses its registry command {c!r}"
            for c in agent.commands
            if c not in kept
        ]

    def token(self, sub: Subtask) -> tuple[str | None, str | None]:
        """The write token for a new call of `sub`, or why there is none."""
        globs = [*sub.write_scope, *sub.creates]
        if not globs:
            return None, None
        found, why = tokens.select(self.store, sub.token, globs, self.now)
        if found is None or why is not None:
            return None, why
        return found.id, None


def remaining(plan: Plan, model: protocol.Model, checker: Checker, person: bool) -> list[str]:
    """Before a run's first call: every problem of the subtasks it may still call, in plan
    order. A subtask whose call was made needs no token or inputs again (its change is
    checked as it lands); inputs are looked up for subtasks whose dependencies are done (the
    others' inputs may be what those create)."""
    found: list[str] = []
    for sub in plan_mod.order(plan):
        if sub.plan is not None or model.resolved(sub.id):
            continue
        first = model.fallbacks(sub.id)
        if model.attempt(sub.id).invoked is None:
            ready = all(dep in model.done for dep in sub.depends_on)
            result = checker.subtask(sub, inputs=ready, fallbacks=first)
            found += result if isinstance(result, list) else []
            first += 1
        # Every agent it may still call must take it: the one whose call is taken up again,
        # and each fallback after it.
        for k in range(first, max(1, len(sub.agents))):
            agent_id = sub.agent_at(k)
            if registry.route(checker.agents, sub.role, agent_id) is None:
                found.append(unroutable(checker.agents, sub, agent_id))
        why = checker.supervisor(sub)
        if why is not None:
            found.append(why)
        if sub.supervised == plan_mod.HUMAN and not person:
            found.append(
                f"subtask {sub.id}: a person must approve it (supervised: human), "
                "but --no-human says none is at hand"
            )
    return list(dict.fromkeys(found))


def unroutable(agents: Sequence[Agent], sub: Subtask, agent_id: str | None) -> str:
    if agent_id is None:
        return f"subtask {sub.id}: no agent in the registry takes role {sub.role!r}"
    if any(a.id == agent_id for a in agents):
        return f"subtask {sub.id}: agent {agent_id!r} does not take role {sub.role!r}"
    return f"subtask {sub.id}: agent {agent_id!r} is not in the registry"


def validate(layout: Layout, task_id: str, now: str) -> tuple[dict[str, Any], int]:
    """`harness plan validate`: the task's plan read and every subtask pre-flighted; its
    run order when there is no problem. This is the document `--json` prints, and the exit
    code `run` would give the same plan: 2 for invalid input (a budget, the tree of plans),
    else 1 for pre-flight problems."""
    plan = plan_mod.load(layout.plan(task_id), layout.root, task_id)
    agents = registry.load(layout.registry, layout.root)
    # A broken ai/harness.toml is refused here, not at the first step.
    invalid, found = plan_problems(layout, plan, agents, now)
    problems = invalid + found
    order = [s.id for s in plan_mod.order(plan)] if not problems else []
    doc = {"task_id": task_id, "valid": not problems, "problems": problems, "order": order}
    return doc, 2 if invalid else 1 if found else 0


def plan_problems(
    layout: Layout, plan: Plan, agents: Sequence[Agent], now: str
) -> tuple[list[str], list[str]]:
    """`harness plan validate`'s checks: what makes the plan invalid input (its budgets,
    its tree of plans), then the pre-flight of every subtask: each agent asked for its
    version in its sandbox, as `next` asks it, inputs looked up at HEAD."""
    cfg = config.load(layout.config)
    store = tokens.load(layout.tokens, layout.root)
    contain = Containment(layout, cfg)
    git = repo.Repo(layout.root)
    layout.state.mkdir(parents=True, exist_ok=True)
    # A folder of this command's own: two validations at once never share a probe's home.
    with tempfile.TemporaryDirectory(prefix="preflight-", dir=layout.state) as scratch:
        try:
            head = git.head()
            checker = Checker(
                agents,
                store,
                now,
                lambda agent: contain.probe(agent, Path(scratch) / agent.id),
                lambda paths: git.blob_hashes(head, paths),
                policy.load(layout),
            )
            invalid, found = nested(layout, plan, cfg, checker)
            return budgets.problems(cfg, plan) + invalid, checker.plan(plan) + found
        finally:
            git.close()


def nested(
    layout: Layout, plan: Plan, cfg: config.Config, checker: Checker
) -> tuple[list[str], list[str]]:
    """The tree of plans `plan` runs (nesting.py), then each nested plan's own problems,
    named by its task: what is invalid input, and what its pre-flight finds."""
    if not any(sub.plan is not None for sub in plan.subtasks):
        return [], []
    tree = nesting.Tree(layout, plan.task_id, plan)
    try:
        problem = tree.problem(cfg)
    except InvalidInput as exc:
        return [str(exc)], []
    if problem is not None:
        return [problem], []
    below = [(t, p) for t, p in sorted(tree.plans.items()) if t != plan.task_id]
    return (
        [f"task {t}: {found}" for t, p in below for found in budgets.problems(cfg, p)],
        [f"task {t}: {found}" for t, p in below for found in checker.plan(p)],
    )


def registry_check(layout: Layout) -> Iterator[dict[str, object]]:
    """`harness registry check`: each registry agent asked for its version in its sandbox,
    one row as each answers (a probe may take seconds): its id, the range wanted, and the
    version found or why it cannot run."""
    contain = Containment(layout, config.load(layout.config))
    with tempfile.TemporaryDirectory(prefix="harness-probe-") as scratch:
        for agent in registry.load(layout.registry, layout.root):
            row: dict[str, object] = {"id": agent.id, "wanted": agent.version}
            try:
                version = contain.probe(agent, Path(scratch) / agent.id)
                row |= {"ok": True, "version": version, "error": None}
            except HarnessError as exc:
                row |= {"ok": False, "version": None, "error": str(exc)}
            yield row
