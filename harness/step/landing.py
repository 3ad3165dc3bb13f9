"""The apply, commit and land phases: the gated changes applied to a tree of harness's own,
that tree committed and the branch moved, the user's files brought to the commit, and the
landing logged with its write token spent.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.base import folders
from harness.base.errors import Halted
from harness.gate import diffgate
from harness.record import envelope, tokens
from harness.record.progress import fault
from harness.repository import repo
from harness.step.live import tell
from harness.step.subtask import Subtask, token_of
from harness.step.task import Task


def apply_patches(job: Subtask, head: str, changes: list[diffgate.Change]) -> str | None:
    """The tree of `head` with every patch applied (`git apply --check` first, no fuzz),
    or None when git refuses one, in `diffgate.apply_order`."""
    tree, problem = applied(job.task, head, changes)
    if not job.phase("apply", tree is not None):
        job.fail(problem, "apply")
    return tree


def applied(
    task: Task, head: str, changes: list[diffgate.Change], name: str = "patches"
) -> tuple[str | None, str]:
    """The tree of `head` (a commit or tree) with the changes applied, or None and why git
    refused one; nothing logged. `name` names the scratch it uses."""
    patches = task.scratch(name)
    folders.remove(patches)
    patches.mkdir(parents=True)
    written = []
    for i, change in enumerate(diffgate.apply_order(changes)):
        patch = patches / f"{i:03d}.patch"
        patch.write_text(change.patch, "utf-8")
        written.append((change.path, patch))
    return task.git.apply_tree(head, written, task.scratch(f"{name}.index"))


def commit(
    job: Subtask, call: envelope.Call, changes: list[diffgate.Change], head: str, tree: str
) -> str:
    """Commit the checked `tree` on `head` and move the branch to it."""
    task, sub, git = job.task, job.sub, job.task.git
    message = (
        f"{sub.role}: {sub.goal}\n\n"
        f"Harness-Task: {task.task_id}\n"
        f"Harness-Subtask: {sub.id}\n"
        f"Harness-Call-Id: {call.call_id}\n"
        f"Harness-Log-Head: {task.log.head}\n"
    )
    who = (task.config.name, task.config.email)
    # What would stop update_files once the branch moved stops the step before it does.
    refuse_in_the_way(git, changes)
    git.index_free()
    made = git.commit(tree, head, message, who, call.prompt["ts"])
    fault("before:advance")
    git.advance(git.branch(), made, head)
    fault("after:advance")
    job.phase("commit", True)
    return made


def landed(job: Subtask, call: envelope.Call, made: str) -> str:
    """Bring the user's files to the commit `made`, spend the call's write token and log
    the landing; `made` back."""
    task = job.task
    paths = task.git.changed(made)
    update_files(task, made, paths)
    fault("after:sync")
    token_id = str(token_of(call))
    tokens.spend(
        task.ledger,
        task.layout.tokens,
        task.layout.root,
        token_id,
        task.task_id,
        call.call_id,
        made,
    )
    details = {"commit": made, "files": paths, "call_id": call.call_id, "token": token_id}
    job.log.append("subagent_diffs_applied", "ok", step=job.sub.id, details=details)
    return made


def refuse_in_the_way(git: repo.Repo, changes: list[diffgate.Change]) -> None:
    """Refuse, before the branch moves, a commit the user's files cannot take: a folder it
    writes into is a symlink or a file in the working tree, put there by the user (a tracked
    symlink the diff gate refuses; a tracked file the commit would have to delete). Syncing
    would write through the link or replace the file.

    Halted (exit 1), not a step failure: the worker's answer is sound and is reused once the
    user has moved the thing away; nothing is committed or written until then."""
    deleted = {c.path for c in changes if c.kind == "delete"}
    deleted |= {c.old_path for c in changes if c.kind == "rename" and c.old_path}
    for change in changes:
        if change.kind == "delete":
            continue
        found = git.in_the_way(change.path)
        # A file the commit deletes may become a folder (deletions are synced first).
        if found is not None and found not in deleted:
            what = "symlink" if (git.root / found).is_symlink() else "file"
            raise Halted(
                f"{found} is a {what} in your working tree, where the commit writes "
                f"{change.path}; harness writes neither through nor over it: move it away, "
                "then run again"
            )


def update_files(task: Task, made: str, paths: Sequence[str]) -> None:
    """Bring the user's index and files to the commit `made` for `paths`, each only where
    both still hold the parent's version (or already the commit's). A worker call takes
    minutes: what the user changed or created meanwhile is kept as it is, one line each on
    stderr, and the commit stands."""
    git = task.git
    theirs = git.unmatched(paths, (f"{made}^", made))
    blocked = git.sync(made, [p for p in paths if p not in theirs])
    for path in theirs:
        tell(f"kept your change to {path}; the commit holds the task's version")
    for path in blocked:
        tell(
            f"did not write {path}: a symlink, file or folder of yours is in its way; "
            "the commit holds the task's version"
        )
