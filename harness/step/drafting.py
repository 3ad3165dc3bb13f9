"""`harness plan draft` / `accept`: a planning agent proposes plan.json; a person promotes it.

The draft is written beside the plan as plan.draft.json and never runs: `harness next` reads
only plan.json, which `accept` writes. The planning call is kept like any exchange, in
ai/tasks/<id>/drafts/<call_id>/: no line of the task's log names it, since the log begins
when the task first runs.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from harness.base import files
from harness.base.clock import Clock
from harness.base.errors import Halted, InvalidInput
from harness.boundary import policy, registry, worker
from harness.boundary.contain import Containment
from harness.record import envelope, exchanges
from harness.record.ledger import Ledger
from harness.repository import repo
from harness.repository.layout import Layout
from harness.spec import config
from harness.spec import plan as plan_mod

DRAFT = "plan.draft.json"


def draft_path(layout: Layout, task_id: str) -> Path:
    return layout.task_dir(task_id) / DRAFT


def draft(layout: Layout, task_id: str, goal: str, clock: Clock) -> Path:
    """Ask the first agent able to `plan` (read-only) for a plan; validate it; write the draft."""
    root = layout.root
    cfg = config.load(layout.config)
    agents = policy.apply(registry.load(layout.registry, root), policy.load(layout), root)
    agent = registry.route(agents, "plan", None)
    if agent is None:
        raise InvalidInput("ai/agents/registry.json: no agent takes role 'plan'")
    git = repo.Repo(root)
    base, branch = git.head(), git.branch()
    sub = plan_mod.Subtask(
        id="draft",
        role="plan",
        goal=goal,
        inputs=(),
        acceptance=(),
        write_scope=(),
        depends_on=(),
        creates=(),
        agents=(agent.id,),
        token=None,
        allow_new_deps=False,
        allow_mode_change=False,
        allow_api_change=False,
    )
    call = envelope.build(
        task_id=task_id,
        sub=sub,
        ts=clock.now(0),
        branch=branch,
        base=base,
        readonly=list(cfg.readonly),
        visible=list(cfg.visible),
        token_id=None,
        input_hashes={},
        blobs=[],
        retry=False,
        timeouts=dict(agent.timeouts or cfg.timeouts),
        budgets=dict(cfg.budgets),
        epoch=0,
    )
    ledger = Ledger(layout, task_id)
    outcome = answer(layout, cfg, agent, git, base, call, task_id, ledger)
    if outcome.status != "ok":
        raise Halted(f"agent {agent.id} could not draft a plan: {outcome.message}")
    proposed = next(
        (a["content"] for a in outcome.result.get("artifacts", []) if a["name"] == "plan.json"),
        None,
    )
    if proposed is None:
        raise Halted(f"agent {agent.id} returned no plan.json artifact")
    target = draft_path(layout, task_id)
    plan = plan_mod.load(target, root, task_id, proposed.encode())  # `plan validate`'s checks
    nests = [sub.id for sub in plan.subtasks if sub.plan is not None]
    if nests:
        raise Halted(
            f"agent {agent.id} drafted a plan whose subtask {nests[0]} runs another task's "
            "plan: a drafted plan may not nest"
        )
    doc = orjson.loads(proposed)
    doc["budgets"] = capped(doc.get("budgets", {}), cfg.drafted, cfg.limits)
    data = files.pretty(doc)
    plan_mod.load(target, root, task_id, data)
    ledger.write(target, data)
    return target


def answer(
    layout: Layout,
    cfg: config.Config,
    agent: registry.Agent,
    git: repo.Repo,
    base: str,
    call: envelope.Call,
    task_id: str,
    ledger: Ledger,
) -> worker.Outcome:
    """The planning agent's judged answer: from the kept exchange when the same call was
    asked before, else from running the agent (and the exchange is kept)."""
    root = layout.root
    limits = (cfg.max_output_bytes, cfg.max_artifact_bytes)
    final = layout.draft_exchange(task_id, call.call_id)
    # The same goal asked at the same HEAD and instant is the same call: its record answers.
    recorded = exchanges.load(final, layout.root)
    if recorded is None:
        scratch = layout.state / "drafts" / task_id
        contain = Containment(layout, cfg)
        version = contain.probe(agent, scratch / "probe")
        staging = exchanges.stage(scratch / "staging", call)
        timeouts = call.prompt["payload"]["timeouts"]
        ran = contain.call(agent, git, base, staging, timeouts, scratch / "worker")
        stdout = (staging / "stdout.ndjson").read_bytes()
        went_over = worker.over(agent, cfg.sandbox_limits, ran)
        outcome = worker.judge(
            stdout, ran.code, ran.timed_out, task_id, agent.id, limits, went_over
        )
        meta = {
            "task_id": task_id,
            "subtask": "draft",
            "agent": agent.id,
            "agent_version": version,
            "argv": agent.argv(root),
            "exit_code": ran.code,
            "timed_out": ran.timed_out,
            **({"over_limit": went_over} if went_over is not None else {}),
        }
        exchanges.commit(staging, final, call, outcome, meta, ledger)
    else:
        found = recorded.meta
        outcome = worker.judge(
            recorded.stdout,
            found["exit_code"],
            found["timed_out"],
            task_id,
            agent.id,
            limits,
            found.get("over_limit"),
        )
    return outcome


def capped(
    proposed: dict[str, float], caps: dict[str, float], ceiling: dict[str, float]
) -> dict[str, float]:
    """A drafted plan's budgets: what the agent proposed, each lowered to the caps for
    drafted plans ([drafted_budgets] in ai/harness.toml, never above its [budgets]), which
    it gets where it proposed none. A person raises them by editing the plan."""
    found = dict(proposed)
    for name, cap in caps.items():
        cap = min(cap, ceiling.get(name, cap))
        found[name] = min(found.get(name, cap), cap)
    return dict(sorted(found.items()))


def accept(layout: Layout, task_id: str) -> bytes:
    """Promote the draft to plan.json; refused once the task has started or if it is invalid."""
    source = draft_path(layout, task_id)
    if not source.exists():
        raise InvalidInput(
            f"{source.relative_to(layout.root)}: no draft (run `harness plan draft`)"
        )
    if layout.log(task_id).exists():
        raise InvalidInput(f"task {task_id} has started: its plan.json is no longer replaced")
    data = files.read_regular(source, layout.rel(source)) or b""
    plan_mod.load(source, layout.root, task_id, data)
    ledger = Ledger(layout, task_id)
    ledger.write(layout.plan(task_id), data)
    ledger.remove(source)
    return data
