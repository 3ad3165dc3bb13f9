"""What every agent-CLI shim shares: the envelope, the sandbox, the launch, the answer line
(the prompt is in prompts.py, the CLI run as a process in cliprocess.py).

A shim reads the two envelope lines, copies the visible files of its working directory (a
scratch worktree of the base commit) into a throw-away git sandbox, leaving out the files by
which a repository would configure its CLI (`withheld`), lets the CLI work there, computes
the diffs itself with git, and prints exactly one result line, naming the registry
id it runs as (`--agent-id`, else the shim's own name). Its `--version` reports the version
of the CLI it drives, which is what a registry range is about.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harness.base import folders, ids, scope
from harness.boundary import policy
from harness.workers.envelopes import Envelope as Envelope
from harness.workers.envelopes import ShimError as ShimError
from harness.workers.envelopes import read_envelope

EXIT = {"ok": 0, "retryable": 1, "hard": 2}
ANSWER_FIELDS = ("plan", "risks", "notes", "metrics", "artifacts", "verdict")


# -- the sandbox ------------------------------------------------------------------------------

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "sandbox",
    "GIT_AUTHOR_EMAIL": "sandbox@localhost",
    "GIT_COMMITTER_NAME": "sandbox",
    "GIT_COMMITTER_EMAIL": "sandbox@localhost",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
}


def _git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | _GIT_ENV
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ShimError(f"sandbox git {args[0]} failed: {done.stderr.strip()[-200:]}")
    return done.stdout


def is_withheld(path: str, patterns: tuple[str, ...], folder: bool = False) -> bool:
    """Whether the repository path `path` is one of `patterns` (globs of `/`-separated
    segments, `**` any number of them) or lies below one. A `folder` (a link to one, as
    the CLI would follow it) is also withheld when something below it could match: a
    committed `cfg -> .claude`-style link must not show the CLI what its name hides."""
    parts = path.split("/")
    return any(_below(parts, pattern.split("/"), folder) for pattern in patterns)


def _below(parts: list[str], pattern: list[str], folder: bool) -> bool:
    if not pattern:
        return True  # the pattern named this path or a folder above it
    if not parts:
        return folder or all(p == "**" for p in pattern)
    if pattern[0] == "**":
        return _below(parts, pattern[1:], folder) or _below(parts[1:], pattern, folder)
    return fnmatch.fnmatchcase(parts[0], pattern[0]) and _below(parts[1:], pattern[1:], folder)


@dataclass
class Sandbox:
    """A git repository holding only the visible files; readonly ones are not writable.

    `withheld` are the paths by which a repository would configure the CLI (its settings,
    hooks, MCP servers, plugins, skills, env files): never copied in, so the CLI never reads
    them, and no diff may add one. `argv` is the command line the CLI was last started with
    there, for the answer line."""

    root: Path
    readonly: list[str] = field(default_factory=list)
    argv: list[str] | None = None
    withheld: tuple[str, ...] = ()

    @classmethod
    def create(
        cls,
        source: Path,
        visible: list[str],
        readonly: list[str],
        parent: Path,
        withheld: tuple[str, ...] = (),
    ) -> Sandbox:
        root = fresh_folder(parent, "work")
        kept = []
        for path in _files(source):
            if not scope.matches(path, visible) or path.startswith(".git"):
                continue
            # Left out, not deleted: the sandbox's base commit never has them, so the diffs
            # computed from it cannot show them removed.
            if is_withheld(path, withheld, (source / path).is_dir()):
                continue
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / path, target, follow_symlinks=False)
            kept.append(path)
        _git(root, "init", "-q", "-b", "sandbox")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "--allow-empty", "-m", "base")
        box = cls(root, [p for p in kept if scope.matches(p, readonly)], withheld=withheld)
        for path in box.readonly:
            mode = (root / path).stat().st_mode
            (root / path).chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        return box

    def diffs(self) -> list[dict[str, str]]:
        """One git-style patch per changed file (added and deleted files included). A file
        the CLI made where its configuration would be read refuses them all (hard): landed,
        it would configure the next call's CLI from the repository."""
        _git(self.root, "add", "-A")
        names = _git(self.root, "diff", "--cached", "--name-only", "-z", "--no-renames")
        changed = sorted(filter(None, names.split("\0")))
        made = [p for p in changed if is_withheld(p, self.withheld, (self.root / p).is_dir())]
        if made:
            raise ShimError(
                f"the CLI wrote {made[0][:200]}, where a repository would configure it: "
                "harness withholds those paths from every agent call (docs/agent-sandboxes.md), "
                "so no call may write one; a person changes them"
            )
        found = []
        for path in changed:
            patch = _git(
                self.root,
                "diff",
                "--cached",
                "--no-renames",
                "--no-color",
                "--src-prefix=a/",
                "--dst-prefix=b/",
                "--",
                path,
            )
            found.append({"file": path, "patch": patch})
        return found

    def remove(self) -> None:
        with suppress(OSError):
            folders.remove(self.root)


def fresh_folder(parent: Path, name: str) -> Path:
    """`parent/name`, made; a fresh name beside it when that is taken. Each call has a home
    of its own, so the name is fixed there, and the CLI's command line, which names it, is
    the same each time the same call is made."""
    wanted = parent / name
    try:
        wanted.mkdir(mode=0o700)
    except FileExistsError:
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))
    return wanted


def _files(source: Path) -> list[str]:
    """The files harness put in the shim's working copy. Not `git ls-files`: the copy has no
    .git, and git would walk up to whatever repository lies above it."""
    found = folders.entries(source, folders.COPY_DEPTH, folders.COPY_ENTRIES)
    return sorted(item.rel for item in found if item.kind in ("file", "link"))


# -- the launch -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    """What the registry put on the shim's command line: an imported agent's persona, the
    shell commands the agent may run (none unless the registry lists them), the registry
    id it runs as when that is not the shim's own name, its part of ai/policy.toml
    (which then names the commands) and the model its CLI is told to use."""

    persona: str = ""
    commands: tuple[str, ...] = ()
    agent_id: str = ""
    policy: policy.Effective | None = None
    model: str = ""

    def refusal(self, command: str) -> str | None:
        """Why a command the CLI ran is refused, or None when it may run: the policy's
        denylist first, then the allowed prefixes (its words must start with the words of
        an allowed command, with no shell syntax anywhere; the `bash -lc '...'` wrapper a
        CLI puts around a command is looked through, once)."""
        denied = self.policy.denied if self.policy is not None else ()
        return policy.refusal(command, self.commands, denied)


# A command the registry allows is a program name and fixed leading words: no shell syntax,
# so a prefix rule like `Bash(pytest:*)` cannot be widened by what the entry itself contains.
COMMAND = re.compile(r"[A-Za-z0-9_.+/=-]+(?: [A-Za-z0-9_.+/=:-]+)*")
# A model name, as schemas/registry.schema.json has it: never read as a flag of the CLI.
MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,199}")
USAGE = (
    "usage: [--agent-id ID] [--persona FILE] [--model NAME] [--allow-command CMD]... "
    "[--policy JSON]"
)


def parse_launch(args: list[str]) -> Launch:
    """`--agent-id ID`, `--persona FILE`, `--model NAME`, `--allow-command CMD` (any number
    of times) or else `--policy JSON` (once: it names the commands itself), nothing else."""
    persona, commands, agent_id, model = "", [], "", ""
    effective: policy.Effective | None = None
    flags = ("--agent-id", "--persona", "--model", "--allow-command", "--policy")
    rest = list(args)
    while rest:
        flag, value = rest.pop(0), (rest.pop(0) if rest else None)
        if value is None or flag not in flags:
            raise ShimError(f"{USAGE} (got {flag!r})")
        if flag == "--policy":
            if effective is not None:
                raise ShimError("--policy given twice")
            try:
                effective = policy.Effective.from_wire(value)
            except ValueError as exc:
                raise ShimError(f"--policy: {exc}") from None
            bad = next((c for c in effective.commands if not COMMAND.fullmatch(c)), None)
            if bad is not None:
                raise ShimError(f"--policy: command {bad!r}: only plain words, no shell syntax")
        elif flag == "--agent-id":
            if not ids.whole(ids.ID, value):
                raise ShimError(f"--agent-id {value!r}: not a registry id")
            agent_id = value
        elif flag == "--model":
            if not MODEL.fullmatch(value):
                raise ShimError(f"--model {value!r}: not a model name")
            model = value
        elif flag == "--persona":
            try:
                persona = Path(value).read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ShimError(f"--persona {value}: {exc.__class__.__name__}") from None
        elif COMMAND.fullmatch(value):
            commands.append(value)
        else:
            raise ShimError(f"--allow-command {value!r}: only plain words, no shell syntax")
    if effective is None:
        return Launch(persona, tuple(commands), agent_id, model=model)
    if commands:
        raise ShimError("--allow-command with --policy: the policy names the commands")
    return Launch(persona, effective.commands, agent_id, effective, model)


def identity(args: list[str], default: str) -> str:
    """The id to answer as: the last valid `--agent-id` on the command line, else the shim's
    own name. Read apart from parse_launch so that a launch refused for another flag still
    reports its error under the id harness expects, rather than as a mismatched agent."""
    # Paired as parse_launch pairs them: flag, value, flag, value.
    named = [v for f, v in zip(args[::2], args[1::2], strict=False) if f == "--agent-id"]
    return next((v for v in reversed(named) if ids.whole(ids.ID, v)), default)


# -- the answer -------------------------------------------------------------------------------


def answer(
    env: Envelope | None,
    agent_id: str,
    result: dict[str, Any] | None,
    error: ShimError | None,
    argv: list[str] | None = None,
) -> tuple[bytes, int]:
    """The one output line and the exit code that agrees with it; `argv`, the command line
    the CLI ran with, goes with a success and a failure alike, for the auditor."""
    out: dict[str, Any] = {
        "ts": env.ts if env else "1970-01-01T00:00:00Z",
        "task_id": env.task_id if env else "unknown",
        "agent_id": agent_id,
    }
    if argv is not None:
        out["cli_argv"] = argv
    if error is not None:
        err: dict[str, Any] = {"message": str(error)[:2000], "kind": error.kind}
        if error.retry_after_s is not None:
            err["retry_after_s"] = error.retry_after_s
        out |= {"status": "error", "error": err}
        code = EXIT[error.kind]
    else:
        out |= {"status": "ok", "result": result or {}}
        code = 0
    return orjson.dumps(out, option=orjson.OPT_SORT_KEYS) + b"\n", code


def structured(obj: object) -> dict[str, Any]:
    """Keep only the answer fields of the model's final JSON, with the types they must have."""
    if not isinstance(obj, dict):
        raise ShimError("the final answer is not a JSON object")
    found: dict[str, Any] = {}
    for key in ANSWER_FIELDS:
        if key in obj:
            found[key] = obj[key]
    return found


def over_budget(env: Envelope, result: dict[str, Any]) -> None:
    """A call's max_tokens holds for what its CLI reported: none of the CLIs can be told a
    token cap, so an answer over it is refused (hard) rather than let through."""
    cap = (env.payload.get("budgets") or {}).get("max_tokens")
    used = (result.get("metrics") or {}).get("tokens")
    if isinstance(cap, int) and isinstance(used, int) and used > cap:
        raise ShimError(f"the call used {used} tokens, over its max_tokens {cap}")


def home() -> Path:
    """The shim's home: where its sandbox is made, and what `~` means to its CLI."""
    return Path(os.environ.get("HOME") or tempfile.gettempdir())


def _stopped(signum: int, frame: object) -> None:
    # harness's soft timeout SIGTERMs the shim, whose CLI runs in a session of its own: left
    # to the default action the shim would die at once and orphan a CLI that ignores SIGTERM.
    # As an exception it unwinds through proc.run, which kills the CLI's whole group, and the
    # shim still prints its one line.
    raise ShimError("stopped by harness (SIGTERM at the soft timeout)", "retryable")


def answer_in(text: str, where: str) -> dict[str, Any]:
    """The answer fields of the JSON object in `text` (json_in), which `where` names in the
    error when there is none ("gemini's response")."""
    found = json_in(text)
    if found is None:
        raise ShimError(f"{where} holds no JSON object")
    return structured(found)


def json_in(text: str) -> dict[str, Any] | None:
    """The last ```json block that is an object, else the whole text as one object."""
    # The last block is the final answer when the model shows examples or thinks aloud first.
    candidates = [*re.findall(r"```(?:json)?[ \t]*\n(.*?)```", text, re.S)[::-1], text]
    for chunk in candidates:
        try:
            doc = orjson.loads(chunk.strip())
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            return doc
    return None


def main(
    agent_id: str,
    work: Callable[[Envelope, Sandbox, Launch], dict[str, Any]],
    version: Callable[[], str],
    argv: list[str] | None = None,
    withheld: tuple[str, ...] = (),
) -> int:
    """The shim's whole life: --version, or one envelope in and one line out. `withheld`
    are the paths its CLI would take configuration from (Sandbox.withheld)."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _stopped)
    if args == ["--version"]:
        try:
            print(version())
        except ShimError as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    agent_id = identity(args, agent_id)
    env: Envelope | None = None
    box: Sandbox | None = None
    try:
        launch = parse_launch(args)
        env = read_envelope(sys.stdin.buffer.read())
        ctx = env.context["payload"]
        box = Sandbox.create(Path.cwd(), ctx["visible"], ctx["readonly"], home(), withheld)
        result = work(env, box, launch)
        over_budget(env, result)
        if env.writable:
            result["diffs"] = box.diffs()
        line, code = answer(env, agent_id, result, None, box.argv)
    except ShimError as exc:
        line, code = answer(env, agent_id, None, exc, box.argv if box else None)
    finally:
        if box is not None:
            box.remove()
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
    return code
