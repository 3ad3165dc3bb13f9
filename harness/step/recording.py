"""The record commit of a task: what recordset collects, committed on the task's branch."""

from __future__ import annotations

from harness.record import recordset
from harness.step.task import Task


def record(task: Task) -> list[str]:
    """Commit the task's state (plan, checklist, log, exchanges) so a clone holds it all,
    then clear the ledger; the "path: why" of each file refused (see collect)."""
    if not task.log.events:
        return []
    message = (
        f"harness: record {task.task_id}\n\n"
        f"Harness-Task: {task.task_id}\n"
        f"Harness-Log-Head: {task.log.head}\n"
    )
    if task.signer is not None:
        message += task.signer.trailer(task.task_id, task.log.head) + "\n"
    who = (task.config.name, task.config.email)
    head = task.git.head()
    found = recordset.collect(
        task.layout,
        task.task_id,
        task.ledger.entries,
        {task.layout.rel(task.log.path): task.log.data()},
        lambda paths: task.git.blob_hashes(head, paths),
    )
    task.git.record(
        found.taken,
        found.dropped,
        message,
        who,
        task.log.events[-1]["ts"],
        task.scratch("record.index"),
    )
    task.ledger.clear()
    return found.refused
