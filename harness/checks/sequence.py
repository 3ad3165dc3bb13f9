"""The checks of one change, in order (format, lint, license, build, tests twice, acceptance),
each on a scratch copy of its tree: as data in (Work) and data out (Verdict), so that they
can run anywhere a git holds the change's trees, ahead of their turn, and be said at it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks import acceptance, verify
from harness.checks.deferred import Deferred
from harness.checks.suite import Checks, Steps
from harness.gate import diffgate
from harness.record import exchanges
from harness.repository import repo
from harness.spec import config as config_mod
from harness.spec import plan as plan_mod


@dataclass(frozen=True)
class Work:
    """One change's checks as data, all they need but a git holding both trees: what a
    pool thread, or another machine, runs (`run`) with no task at hand."""

    sub: plan_mod.Subtask
    logged: tuple[dict[str, Any], ...]  # what a killed run of the attempt already logged
    config: config_mod.Config
    changes: tuple[diffgate.Change, ...]
    result: dict[str, Any]
    head: str  # the tree (or commit) the change applies to
    tree: str  # the tree with the change applied: what would be committed
    lenient: bool  # a loop's round: criteria not met yet pass, for later rounds


@dataclass(frozen=True)
class Verdict:
    """How a change's checks ended, and what they said, for its landing to say."""

    passed: bool
    said: Deferred


def run(work: Work, git: repo.Repo, boxes: verify.Boxes, scratch: Path, cache: Path) -> Verdict:
    """Run the change's checks in `scratch`, a folder of harness's own for them alone,
    holding back what they say."""
    said = Deferred()
    ran = runner(work.config, scratch / "runs", boxes)
    checks = Checks(
        said,
        work.sub.id,
        list(work.logged),
        work.config.verify,
        ran,
        Path(exchanges.VERIFY),
        said,
        lambda name: scratch / name,
        lambda p: git.show(work.tree, p),
    )
    passed = sequence(work, git, checks, said.phase, ran, lambda name: scratch / name, cache)
    return Verdict(passed, said)


def sequence(
    work: Work,
    git: repo.Repo,
    checks: Steps,
    phase: Callable[[str, bool], bool],
    runner: verify.Runner,
    scratch: Callable[[str], Path],
    cache: Path,
) -> bool:
    """Build, test and acceptance, in order, as `checks` runs (or recalls) them."""
    cfg, changes = work.config.verify, list(work.changes)
    with ExitStack() as stack:
        wt = scratch("verify")
        if runs_commands(cfg, work.sub):
            stack.enter_context(git.scratch(work.tree, wt, git_dir=True))
        built = checks.build(wt, changes)  # nothing configured: no line says "build ok"
        if not (phase("build", built) if cfg.builds else built):
            return False
        if cfg.test and not phase("test", checks.test(wt, cfg.test)):
            return False
        base: list[Path] = []

        def base_copy() -> Path:
            if not base:
                base.append(stack.enter_context(git.scratch(work.head, scratch("base"), True)))
            return base[0]

        judge = acceptance.Judge(
            work.sub,
            work.result,
            changes,
            git=git,
            head=work.head,
            tree=work.tree,
            worktree=wt,
            runner=runner,
            verify=cfg,
            cache=cache,
            base=base_copy,
        )
        if not phase("acceptance", checks.accept(judge, work.lenient)):
            return False
    return True


def runner(config: config_mod.Config, scratch: Path, boxes: verify.Boxes) -> verify.Runner:
    """The runner of verify commands the config asks for, in `scratch`."""
    # Uncontained, a command has the host's network whatever isolate_network says.
    network = "none" if config.verify.isolate_network and config.contained else "host"
    return verify.Runner(scratch, config.verify_timeout_s, boxes, network)


def runs_commands(cfg: config_mod.Verify, sub: plan_mod.Subtask) -> bool:
    """Whether any check of this subtask runs a command, and so needs a scratch copy."""
    names = ("format", "lint", "license", "build", "test", "docs", "api_extract")
    return (
        any(getattr(cfg, n) for n in names) or bool(sub.acceptance) or (sub.role == "test-author")
    )
