"""A task as one command's step sees it (§9): its plan, config, registry, log and ledger,
re-read from disk at the start and checked before anything is written; and what may stand in
for the live step: a replay's record (Recording) and who answers its calls (Worker).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, Protocol

from harness.base import files
from harness.base.clock import Clock
from harness.base.errors import InvalidInput
from harness.boundary import policy, proc, registry
from harness.boundary.contain import Containment
from harness.boundary.registry import Agent
from harness.checks.suite import Steps
from harness.record import checkpoint, protocol, tokens
from harness.record.ledger import EMPTY, Ledger
from harness.record.progress import Log
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec import checklist
from harness.spec import config as config_mod
from harness.spec import plan as plan_mod
from harness.step import budgets, nesting, preflight, supervision
from harness.step.live import Live, Silent
from harness.step.tracing import Off, Trace


class Recording(Protocol):
    """Where a replay takes what a live step would make: answers, bases and check results."""

    def unrecorded(self, call_id: str) -> NoReturn:
        """A call the record does not hold was about to be made."""

    def base(self, task: Task) -> str:
        """The base the record's next call, or nested plan, began on (HEAD moved over
        human commits)."""

    def launches(self, flying: set[str]) -> bool:
        """Whether the record's next line is a launch (of a subtask not in `flying`)."""

    def exhausted(self) -> budgets.Exhausted | None:
        """The budget the record's next line halts the task for, if it does."""

    def checks(self, step: str) -> Steps | None:
        """The step's check results as recorded, or None to run the checks again."""

    def nested(self, task: Task, sub: plan_mod.Subtask) -> nesting.Unit:
        """How the nested plan `sub` runs ended, as recorded, with HEAD moved to its end."""

    def landing(self, task: Task, call_id: str) -> None:
        """HEAD moved to the parent of the recorded commit of `call_id`, before it lands."""


class Worker(Protocol):
    """What answers a call: Containment runs the agent in its sandbox; tests script it."""

    def probe(self, agent: Agent, scratch: Path) -> str:
        """The agent's version, asked before its first call."""

    def call(
        self,
        agent: Agent,
        git: repo.Repo,
        base: str,
        staging: Path,
        timeouts: dict[str, float],
        scratch: Path,
    ) -> proc.Result:
        """Answer the envelope staged in `staging` (its `stdin`), writing `stdout.ndjson`."""


@dataclass
class Task:
    """Everything one step needs, re-read from disk at its start (§9)."""

    layout: Layout
    task_id: str
    git: repo.Repo
    config: config_mod.Config
    plan: plan_mod.Plan
    agents: list[Agent]
    log: Log
    ledger: Ledger
    probed: dict[str, str] = field(default_factory=dict)
    recording: Recording | None = None
    worker: Worker | None = None  # who answers calls: the sandboxed agent unless a test says
    live: Live = field(default_factory=Silent)  # progress for people, never recorded
    trace: Trace = field(default_factory=Off)  # OpenTelemetry spans, never recorded either
    depth: int = 0  # how deep in plans running plans this task runs (nesting.py)
    person: bool = True  # someone may approve a change now (`run --no-human`: nobody)
    rules: policy.Policy | None = None  # ai/policy.toml as this command read it
    signer: checkpoint.Signer | None = None  # signs record commits' log heads (live only)
    executor: str = "local"  # where calls and checks run (executors.py): local, ray
    ahead: bool = True  # with several slots, check changes ahead of their turn (ahead.py)

    @classmethod
    def load(
        cls, layout: Layout, task_id: str, clock: Clock, log: Log | None = None, depth: int = 0
    ) -> Task:
        root = layout.root
        plan_path = layout.plan(task_id)
        if not plan_path.exists():
            raise InvalidInput(f"{plan_path.relative_to(root)}: file not found")
        # What is validated is what the ledger enters: the record holds these very bytes.
        ledger = Ledger(layout, task_id)
        task = cls(
            layout=layout,
            task_id=task_id,
            git=repo.Repo(root),
            config=config_mod.load(layout.config, ledger.read(layout.config)),
            plan=plan_mod.load(plan_path, root, task_id, ledger.read(plan_path)),
            agents=registry.load(layout.registry, root, ledger.read(layout.registry)),
            log=log or Log(layout.log(task_id), task_id, clock),
            ledger=ledger,
            depth=depth,
        )
        if log is None:  # a replay makes no call; each exchange's argv holds its policy
            task.rules = policy.load(layout)
            task.agents = policy.apply(task.agents, task.rules, root)
            task.signer = checkpoint.signer(root)  # a replay takes record commits as made
            if task.signer is not None:
                task.git.sign = task.signer.commit_signature
        task.log.uncontained = not task.config.contained
        over = budgets.problems(task.config, task.plan)
        if over:
            raise InvalidInput(f"{layout.rel(plan_path)}: {over[0]}")
        # Refuse what a step would trip over later, before it writes anything.
        layout.check_writable(task_id)
        head = task.git.head()
        task.git.branch()
        task.token_store()
        # A run's pre-flight tells these with every other problem (preflight.remaining); a
        # replay has none, and its record must route as it did.
        unrouted = [
            preflight.unroutable(task.agents, sub, agent_id)
            for sub in task.plan.subtasks
            if sub.plan is None and log is not None  # a nested plan's subtasks route there
            for agent_id in sub.agents or (None,)
            if registry.route(task.agents, sub.role, agent_id) is None
        ] + [
            f"subtask {sub.id}: supervised, but no agent has the {supervision.ROLE!r} capability"
            for sub in task.plan.subtasks
            if log is not None and sub.supervised == plan_mod.AGENT and task.supervisor is None
        ]
        if unrouted:
            raise InvalidInput(f"ai/agents/registry.json: {'; '.join(unrouted)}")
        if log is None:  # a replay's own log is held to the record line by line instead
            nesting.check(layout, task_id, task.plan, task.config)  # (it replays each alone)
            rel = layout.rel(task.log.path)
            task.log.follow(ledger, task.git.blob_hashes(head, [rel])[rel] or EMPTY)
            task.refuse_cut_log(head)
        task.refuse_added_after_completion()
        return task

    def slots(self, asked: int) -> int:
        """Subtasks in flight at once: what the command asks, capped by the plan's and by
        the max_parallel budget."""
        cap = budgets.limits(self.config, self.plan).get("max_parallel", asked)
        return int(min(asked, self.plan.max_parallel or asked, cap))

    @property
    def model(self) -> protocol.Model:
        """What the log says so far: the protocol's reading of every line."""
        return self.log.model

    def refuse_added_after_completion(self) -> None:
        """A completed task is closed: a subtask added to its plan since would run after
        task_completed, which no log may hold."""
        completed = self.model.completed
        added = [s.id for s in self.plan.subtasks if s.id not in self.model.done]
        if completed is not None and added:
            raise InvalidInput(
                f"task {self.task_id} completed (seq {completed}); subtask {added[0]} was "
                "added to its plan since: put new work in a new task"
            )

    def refuse_cut_log(self, head: str) -> None:
        """The line the task's last commit recorded as the log's head must still be in the
        log: a log cut back (and committed so) would otherwise go on as if sound."""
        last = self.git.last_task_commit(self.task_id, head)
        recorded = None if last is None else last[1].get("Harness-Log-Head")
        events = self.log.events
        lines = {self.log.head, *(ev["prev"] for ev in events[1:])} if events else set()
        if recorded is not None and recorded not in lines:
            assert last is not None
            rel = self.layout.rel(self.log.path)
            raise InvalidInput(
                f"{rel}: lost the line commit {last[0][:12]} recorded as its head: restore it "
                f"(git checkout {last[0][:12]} -- {rel}) and commit it"
            )

    def scratch(self, name: str) -> Path:
        """A path of harness's own for this task, out of every sandbox's reach."""
        folder = self.layout.state / "tasks" / self.task_id
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name

    @property
    def contain(self) -> Containment:
        return Containment(self.layout, self.config)

    @property
    def answering(self) -> Worker:
        """Who answers this task's calls."""
        return self.worker or self.contain

    @property
    def supervisor(self) -> Agent | None:
        """The registry agent that gives supervised subtasks their verdicts."""
        return registry.route(self.agents, supervision.ROLE, None)

    def probe(self, agent: Agent) -> str:
        """The agent's version (present, in range), asked once per agent per command."""
        if agent.id not in self.probed:
            self.probed[agent.id] = self.answering.probe(agent, self.scratch("probe"))
        return self.probed[agent.id]

    def token_store(self) -> list[tokens.Token]:
        """The token store as it is now: a person may revoke a token while a task runs."""
        path = self.layout.tokens
        return tokens.load(path, self.layout.root, self.ledger.read(path))

    def sync_checklist(self) -> None:
        data = checklist.render(self.plan, self.model.done).encode()
        path = self.layout.checklist(self.task_id)
        if not (self.ledger.holds(path, data) and files.read_untrusted(path, -1) == data):
            self.ledger.write(path, data)
