"""`harness demo`: a sample repository, a three-subtask plan and the scripted worker, offline."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.base import files
from harness.boundary.launchers import launcher
from harness.repository import repo
from harness.repository.layout import Layout

START = "2026-01-01T00:00:00Z"
WHO = ("Demo Author", "demo@example.invalid")

SAMPLE = {
    "README.md": "# calc\n\nA tiny calculator, changed by harness in the demo.\n",
    "src/__init__.py": "",
    "src/calc.py": '"""A tiny calculator."""\n\n\ndef add(a, b):\n    return a + b\n',
    "tests/__init__.py": "",
    "tests/test_calc.py": (
        "import unittest\n\nfrom src.calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n"
    ),
}

SUBTRACT = (
    "diff --git a/src/calc.py b/src/calc.py\n--- a/src/calc.py\n+++ b/src/calc.py\n"
    "@@ -3,3 +3,7 @@\n \n def add(a, b):\n     return a + b\n"
    "+\n+\n+def subtract(a, b):\n+    return a - b\n"
)

TEST_SUBTRACT = """\
diff --git a/tests/test_subtract.py b/tests/test_subtract.py
new file mode 100644
--- /dev/null
+++ b/tests/test_subtract.py
@@ -0,0 +1,8 @@
+import unittest
+
+from src.calc import subtract
+
+
+class SubtractTest(unittest.TestCase):
+    def test_subtract(self):
+        self.assertEqual(subtract(5, 3), 2)
"""

DOCS = """\
diff --git a/docs/calc.md b/docs/calc.md
new file mode 100644
--- /dev/null
+++ b/docs/calc.md
@@ -0,0 +1,4 @@
+# calc
+
+- `add(a, b)` returns the sum of `a` and `b`.
+- `subtract(a, b)` returns `a` minus `b`.
"""

PLAN = {
    "task_id": "demo",
    "created": START,
    "subtasks": [
        {
            "id": "T1",
            "role": "localized-impl",
            "goal": "Add a subtract function to src/calc.py",
            "inputs": ["src/calc.py"],
            "acceptance": [
                # A criterion with a machine form is checked: this one is verified.
                'cmd: "$HARNESS_PYTHON" -c "from src.calc import subtract; '
                'assert subtract(5, 3) == 2"'
            ],
            "write_scope": "src/**",
        },
        {
            "id": "T2",
            "role": "test-author",
            "goal": "Add tests for subtract",
            "inputs": ["src/calc.py", "tests/test_calc.py"],
            "acceptance": ["line>=0.9", "coverage_delta>=0"],
            "write_scope": "tests/**",
            "creates": ["tests/test_*.py"],
            "depends_on": ["T1"],
        },
        {
            "id": "T3",
            "role": "doc-writer",
            "goal": "Document the calculator",
            "inputs": ["src/calc.py"],
            "acceptance": ["docs/calc.md names every function"],
            "write_scope": "docs/**",
            "creates": ["docs/*.md"],
        },
    ],
}


def _answer(subtask: str, patch: str, path: str, why: str) -> dict[str, object]:
    return {
        "subtask": subtask,
        "result": {
            "plan": [{"step": f"change {path}", "why": why}],
            "diffs": [{"file": path, "patch": patch}],
            "artifacts": [],
            "risks": [],
            "notes": [f"{subtask}: {why}"],
            "metrics": {"files_touched": 1},
        },
    }


SCRIPT = {
    "answers": [
        _answer("T1", SUBTRACT, "src/calc.py", "the goal asks for subtract"),
        _answer("T2", TEST_SUBTRACT, "tests/test_subtract.py", "subtract needs a test"),
        _answer("T3", DOCS, "docs/calc.md", "the module has no docs"),
    ]
}


def build(root: Path) -> None:
    """Write the sample repository, its harness files and the worker script, and commit."""
    for rel, text in SAMPLE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    layout = Layout(root)
    agent = root / "agents" / "scripted-cli"
    agent.parent.mkdir(parents=True)
    agent.write_text(launcher("scripted"))
    agent.chmod(0o755)
    files.atomic_write(root / "agents" / "script.json", files.pretty(SCRIPT))
    # $HARNESS_PYTHON, not this machine's path: the config is committed, and the demo's
    # commit ids must not depend on where harness is installed.
    build = '"$HARNESS_PYTHON" -m compileall -q src'
    test = '"$HARNESS_PYTHON" -m unittest discover -s tests -t . -q'
    coverage = '"$HARNESS_PYTHON" -m coverage run --branch -m unittest discover -s tests -t . -q'
    files.atomic_write(
        layout.config,
        (
            '[identity]\nname = "harness"\nemail = "harness@example.invalid"\n\n'
            f"[verify]\nbuild = {_toml(build)}\n"
            f"test = {_toml(test)}\n\n"
            f"[coverage]\ncommand = {_toml(coverage)}\n\n"
            "[defaults]\ntimeouts = { soft_s = 60, hard_s = 90 }\n"
        ).encode(),
    )
    registry = {
        "agents": [
            {
                "id": "scripted",
                "cmd": "agents/scripted-cli",
                "version": ">=0.1",
                "capabilities": ["localized-impl", "test-author", "doc-writer"],
                "args": ["--script", "agents/script.json"],
            }
        ]
    }
    files.atomic_write(layout.registry, files.pretty(registry))
    tokens = {
        "tokens": [
            {
                "id": "W1",
                "paths": ["src/**", "tests/**", "docs/**"],
                "expires": "2026-01-02T00:00:00Z",
                "one_shot": False,
            }
        ]
    }
    files.atomic_write(layout.tokens, files.pretty(tokens))
    files.atomic_write(layout.plan("demo"), files.pretty(PLAN))
    repo.create(root, "main", "Sample calculator", WHO, START)


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run(where: Path | None, cli: Callable[[list[str]], int]) -> int:
    """Build the sample in `where` (or a temp dir), run the plan, print what happened."""
    root = Path(tempfile.mkdtemp(prefix="harness-demo-")) if where is None else where
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        print(f"harness: {root} is not empty", file=sys.stderr)
        return 2
    os.environ.setdefault("HARNESS_CLOCK", START)
    build(root)
    print(f"sample repository: {root}\n")
    code = cli(["run", "demo", "--repo", str(root)])
    print("\ncommits:")
    git = repo.Repo(root)
    print(git.summary("main").rstrip())
    git.close()
    print(f"\nlog: {Layout(root).log('demo')}")
    print(f"exchanges: {Layout(root).exchanges('demo')}\n")
    cli(["status", "demo", "--repo", str(root)])
    if code != 0:
        return code
    # What the task's other two users do with it: an auditor checks the record, CI replays it.
    print()
    return cli(["audit", "demo", "--repo", str(root)]) or cli(
        ["replay", "demo", "--repo", str(root)]
    )
