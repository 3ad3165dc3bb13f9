"""Where a harness-driven repository keeps its files (DESIGN §2)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.base import files
from harness.repository.repo import common_dir


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def ai(self) -> Path:
        return self.root / "ai"

    @property
    def config(self) -> Path:
        return self.ai / "harness.toml"

    @property
    def registry(self) -> Path:
        return self.ai / "agents" / "registry.json"

    @property
    def policy(self) -> Path:
        return self.ai / "policy.toml"

    @property
    def tokens(self) -> Path:
        return self.ai / "agents" / "write_tokens.json"

    @cached_property
    def state(self) -> Path:
        """harness's own files — scratch copies, private homes, staging, locks — in the git
        directory: outside the working tree, where no sandbox mounts anything."""
        return common_dir(self.root) / "harness"

    def task_dir(self, task_id: str) -> Path:
        return self.ai / "tasks" / task_id

    def plan(self, task_id: str) -> Path:
        return self.task_dir(task_id) / "plan.json"

    def checklist(self, task_id: str) -> Path:
        return self.task_dir(task_id) / "checklist.md"

    def log(self, task_id: str) -> Path:
        return self.task_dir(task_id) / "progress.ndjson"

    def exchanges(self, task_id: str) -> Path:
        return self.ai / "exchanges" / task_id

    def exchange(self, task_id: str, call_id: str) -> Path:
        return self.exchanges(task_id) / call_id

    def draft_exchange(self, task_id: str, call_id: str) -> Path:
        """A `plan draft` call: beside the plan, not among the exchanges the log names (a
        draft is made before the task's log begins, and never runs)."""
        return self.task_dir(task_id) / "drafts" / call_id

    def ledger(self, task_id: str) -> Path:
        """What harness wrote or read under ai/ for the task's next record commit."""
        return self.state / "tasks" / task_id / "ledger.ndjson"

    def check_writable(self, task_id: str) -> None:
        """Refuse (one line) a task whose record harness could only write through a
        committed symlink or a file in a folder's place, before anything is written."""
        for path in (self.config, self.registry, self.tokens, self.log(task_id)):
            files.check_folders(self.root, path)
        files.check_folders(self.root, self.exchange(task_id, "call"))

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def record_paths(self, task_id: str) -> list[str]:
        """Repository-relative files and folders a record commit carries for this task."""
        paths = [self.config, self.registry, self.tokens, self.task_dir(task_id)]
        return [self.rel(p) for p in (*paths, self.exchanges(task_id))]
