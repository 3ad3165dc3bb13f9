"""`harness audit`: check a task's record without trusting any of it.

The log is read one line at a time and never kept: what stays in memory is per subtask
(the plan's ids and scopes, which are done, the attempt in progress) and per call or token,
never per event. progress.Log is not used: it loads every event and stops at the first
problem, where here every problem is a finding and the audit goes on.

git does its share in bulk and in parallel, started before the log is read: the diff
against the last harness commit and the untracked files, the exchange files' contents (one
`git cat-file --batch`, where the working tree is proved equal to that commit: one read
per file at git's speed instead of a Python open() per file), and the task's subtask
commits, oldest first, read in step with the log that names them in the same order.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, Any

import fastjsonschema
import ijson
import orjson

from . import exchanges, files, progress, protocol, repo, schemas, scope, tokens
from .errors import InvalidInput
from .layout import Layout
from .printable import printable
from .protocol import short

_Event = dict[str, Any]

# Findings of one kind shown before the rest of that kind are only counted: a log broken
# early must not bury the other findings under thousands of lines.
_CAP = 20
_SHORT = 12
_REGULAR = (b"100644", b"100755")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_NO_DETAILS: dict[str, Any] = {}


@dataclass(frozen=True)
class Finding:
    seq: int | None  # the log line it concerns, None when not tied to a line
    reason: str


@dataclass
class Report:
    task_id: str
    events: int  # lines read
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not self.findings


def audit(layout: Layout, task_id: str) -> Report:
    """Every finding about the task's log, plan, exchanges, commits and tokens, by line.

    A finding's seq is the position of the line in the file, which is its seq in a sound log.
    """
    if not layout.task_dir(task_id).is_dir():
        raise InvalidInput(f"ai/tasks/{task_id}: no such task")
    return _Audit(layout, task_id).run()


class _Findings:
    def __init__(self) -> None:
        self.shown: list[Finding] = []
        self.counts: Counter[str] = Counter()

    def add(self, kind: str, seq: int | None, reason: str | Callable[[], str]) -> None:
        """Record a finding; `reason` may be a callable where wording it is costly."""
        self.counts[kind] += 1
        if self.counts[kind] <= _CAP:
            text = reason if isinstance(reason, str) else reason()
            # Log values are anyone's text: a finding stays one printable line.
            self.shown.append(Finding(seq, printable(text)))

    def result(self) -> list[Finding]:
        shown = sorted(self.shown, key=lambda f: (f.seq is None, f.seq or 0, f.reason))
        more = [
            Finding(None, f"{n - _CAP} more {kind} findings not shown")
            for kind, n in sorted(self.counts.items())
            if n > _CAP
        ]
        return shown + more


class _Commits:
    """The task's subtask commits reachable from HEAD, oldest first, as the log names them.

    Harness makes each commit just before the subagent_diffs_applied naming it, so the two
    come in the same order and one pass matches them; a commit met early is kept aside.
    """

    def __init__(self, git: repo.Repo) -> None:
        self.git = git
        self.head: str | None = None
        self.listing: repo.Spool | None = None
        self.records: Iterator[bytes] | None = None
        self.aside: dict[str, dict[str, str]] = {}
        self.lookups = 0

    def start(self, stack: ExitStack, task_id: str, head: str | None) -> None:
        self.head = head
        if head is not None:
            self.listing = self.git.spool(
                stack,
                "log",
                "-z",
                "--reverse",
                "--topo-order",
                "--format=%H%x00%B",
                "--all-match",
                "-F",
                "--grep=Harness-Call-Id: ",
                f"--grep=Harness-Task: {task_id}",
                head,
            )

    def trailers(self, commit: str) -> dict[str, str] | str:
        """The commit's Harness trailers, or why it is not a commit of this record."""
        if commit in self.aside:
            return self.aside.pop(commit)
        if self.records is None:
            self.records = repo.split(self.listing.result()) if self.listing else iter(())
        for sha in self.records:
            found = repo.trailers(next(self.records, b"").decode("utf-8", "replace"))
            if sha.decode() == commit:
                return found
            self.aside[sha.decode()] = found
        return self.elsewhere(commit)

    def elsewhere(self, commit: str) -> dict[str, str] | str:
        """Ask git about a commit outside the listing; a few times only, a process each."""
        self.lookups += 1
        if self.head is None:
            return "cannot be on HEAD: the repository has no commits"
        if self.lookups > _CAP:
            return f"is no commit of this task reachable from {self.head[:_SHORT]}"
        if self.git.try_git("cat-file", "-e", f"{commit}^{{commit}}")[0] != 0:
            return "does not exist"
        if self.git.try_git("merge-base", "--is-ancestor", commit, self.head)[0] != 0:
            return "is not an ancestor of HEAD"
        return repo.trailers(self.git.try_git("log", "-1", "--format=%B", commit)[1])


# -- the plan --------------------------------------------------------------------------------


def _plan_members(fh: IO[bytes]) -> Iterator[tuple[str | None, Any]]:
    """plan.json's top-level members as (key, value), except that each element of
    `subtasks` comes alone as (None, element): the whole plan as Python objects costs
    about 1.4 KB per subtask, which the audit of a large task must not spend at once."""
    builder: ijson.ObjectBuilder | None = None
    at = ""  # the prefix of the value being built
    for prefix, event, value in ijson.parse(fh, use_float=True):
        if builder is not None:
            builder.event(event, value)
            if prefix == at and event in ("end_map", "end_array"):
                yield (None if at == "subtasks.item" else at), builder.value
                builder = None
        elif prefix == "":
            if event not in ("start_map", "end_map", "map_key"):
                raise ValueError("plan.json is not a JSON object")
        elif prefix == "subtasks" and event in ("start_array", "end_array"):
            if event == "start_array":
                yield "subtasks", []
        elif event in ("start_map", "start_array"):
            builder, at = ijson.ObjectBuilder(), prefix
            builder.event(event, value)
        else:
            yield (None if prefix == "subtasks.item" else prefix), value


# -- the audit -------------------------------------------------------------------------------


class _Audit:
    def __init__(self, layout: Layout, task_id: str) -> None:
        self.layout, self.task_id = layout, task_id
        self.found = _Findings()
        self.add = self.found.add
        self.git = repo.Repo(layout.root)
        self.commits = _Commits(self.git)
        self.tasks_dir, self.exchanges_dir = (
            d.relative_to(layout.root).as_posix()
            for d in (layout.task_dir(task_id), layout.exchanges(task_id))
        )
        # Subtask id -> the globs its token must cover; None when the plan is unreadable.
        self.scopes: dict[str, tuple[str, ...]] | None = None
        self.needs: dict[str, tuple[str, ...]] | None = None  # subtask id -> its depends_on
        self.tokens: dict[str, tokens.Token] | None = None
        self.past_tokens: dict[str, tokens.Token] | None = None  # read on a first miss
        self.covered: dict[tuple[str, tuple[str, ...]], bool] = {}
        self.shots: dict[str, tuple[int, str, str]] = {}  # one-shot token: seq, call, commit
        self.model = protocol.Model()
        self.events = 0

    def run(self) -> Report:
        try:
            return self.check()
        finally:
            self.git.close()

    def check(self) -> Report:
        code, out, _ = self.git.try_git("rev-parse", "--verify", "-q", "HEAD^{commit}")
        head = out.strip() if code == 0 else None
        anchor, recorded = self.anchor(head)
        with ExitStack() as stack:
            diff = untracked = blobs = None
            if anchor is not None:
                paths = (f"{self.tasks_dir}/", f"{self.exchanges_dir}/")
                diff = self.git.spool(
                    stack, "diff", "--name-only", "-z", "--no-renames", anchor, "--", *paths
                )
                untracked = self.git.spool(stack, "ls-files", "--others", "-z", "--", *paths)
                blobs = self.exchange_blobs(stack, anchor)
            self.commits.start(stack, self.task_id, head)
            self.read_plan()
            self.read_tokens()
            # Every commit of the task names a line of the log, not only the last one: a log
            # cut and then appended to by a later run is still caught.
            for log_head in sorted(recorded.keys() - self.read_log(recorded.keys())):
                self.add(
                    "record",
                    None,
                    f"log head {log_head[:_SHORT]} recorded by commit {short(recorded[log_head])} "
                    "is no line of the log: it was truncated or rewritten",
                )
            dirty: set[str] = set()
            if diff is not None and untracked is not None and blobs is not None:
                dirty = self.differences(str(anchor), diff, "differs from")
                dirty |= self.differences(str(anchor), untracked, "is not in")
                self.exchanges_in_git(blobs.result(), dirty)
            else:
                folder = self.layout.exchanges(self.task_id)
                dirty = set(os.listdir(folder)) if folder.is_dir() else set()
            self.exchanges_on_disk(dirty)
        for call, (seq, _) in sorted(self.model.calls.items(), key=lambda kv: kv[1][0]):
            self.add("exchange", seq, f"exchange {call[:_SHORT]} is missing")
        self.check_spent()
        return Report(self.task_id, self.events, self.found.result())

    # -- the last harness commit -------------------------------------------------------------

    def anchor(self, head: str | None) -> tuple[str | None, dict[str, str]]:
        """The latest commit on HEAD carrying `Harness-Task: <task>`, and every such commit's
        log head (each must be a line of the log), with the commit that recorded it."""
        if head is None:
            if self.layout.log(self.task_id).exists():
                self.add("record", None, "the repository has no commits")
            return None, {}
        commits = self.git.task_commits(self.task_id, head)
        if not commits:
            if self.layout.log(self.task_id).exists():  # a task never run has no record yet
                self.add("record", None, f"no commit on HEAD carries Harness-Task: {self.task_id}")
            return None, {}
        sha, found = commits[0]
        if "Harness-Log-Head" not in found:
            self.add("record", None, f"commit {sha[:_SHORT]} carries no Harness-Log-Head")
        heads = {t["Harness-Log-Head"]: c for c, t in reversed(commits) if "Harness-Log-Head" in t}
        return sha, heads

    def differences(self, anchor: str, spool: repo.Spool, how: str) -> set[str]:
        """Report the files git listed as differing from the last harness commit; return
        the exchange folders they are in, whose files must be read from disk, not git."""
        prefix = self.exchanges_dir + "/"
        dirty = set()
        for raw in repo.split(spool.result()):
            path = raw.decode("utf-8", "surrogateescape")
            self.add("record", None, f"{path} {how} the last harness commit {anchor[:_SHORT]}")
            if path.startswith(prefix):
                dirty.add(path[len(prefix) :].partition("/")[0])
        return dirty

    # -- plan and tokens ---------------------------------------------------------------------

    def read_plan(self) -> None:
        path = self.layout.plan(self.task_id)
        label = f"{self.tasks_dir}/plan.json"
        if not path.exists():
            self.add("plan", None, f"{label}: file not found")
            return
        item = schemas.fast_validator("plan", "/properties/subtasks/items")
        head: dict[str, Any] = {}
        scopes: dict[str, tuple[str, ...]] = {}
        needs: dict[str, tuple[str, ...]] = {}
        shared: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple per distinct scope
        first: list[Any] = []
        try:
            with path.open("rb") as fh:
                for key, value in _plan_members(fh):
                    if key is not None:
                        head[key] = value
                        continue
                    item(value, name_prefix=f"$.subtasks[{len(scopes)}]")
                    if value["id"] in scopes:
                        self.add("plan", None, f"{label}: duplicate subtask id {value['id']!r}")
                        return
                    globs = (*scope.as_list(value["write_scope"]), *value.get("creates", ()))
                    scopes[value["id"]] = shared.setdefault(globs, globs)
                    needs[value["id"]] = tuple(value.get("depends_on", ()))
                    first = first or [value]
        except fastjsonschema.JsonSchemaValueException as exc:
            self.add("plan", None, f"{label}: {exc.message}")
            return
        except (ijson.JSONError, ValueError, UnicodeDecodeError) as exc:
            self.add("plan", None, f"{label}: invalid JSON: {exc}")
            return
        # The members besides the subtasks, checked with one subtask standing for them all.
        problem = schemas.problem(
            "plan", {**head, "subtasks": first} if "subtasks" in head else head
        )
        if problem is not None:
            self.add("plan", None, f"{label}: {problem}")
        elif head["task_id"] != self.task_id:
            self.add("plan", None, f"{label}: $.task_id: {head['task_id']!r} is not this task")
        else:
            self.scopes, self.needs = scopes, needs

    def read_tokens(self) -> None:
        try:
            known = tokens.load(self.layout.tokens, self.layout.root)
        except InvalidInput as exc:
            self.add("token", None, str(exc))
            return
        self.tokens = {t.id: t for t in known}

    # -- the log -----------------------------------------------------------------------------

    def read_log(self, heads: Collection[str]) -> set[str]:
        """Check every line; return those of `heads` (recorded log heads) that are lines."""
        found = files.open_regular(
            self.layout.log(self.task_id), f"{self.tasks_dir}/progress.ndjson"
        )
        if found is None:
            return set()
        model = self.model = protocol.Model(self.needs)
        add, index = self.add, -1
        anchored: set[str] = set()
        with found as fh:
            for line in progress.read(fh, self.task_id, model):
                index = line.index
                if line.digest in heads:
                    anchored.add(line.digest)
                for problem in line.problems:
                    at = index if problem.at is None else problem.at
                    add(problem.kind, at, problem.reason)
                if line.event is not None:
                    self.records(index, line.event)
        self.events = index + 1
        for step, att in model.unanswered():
            add(
                "order",
                model.invoked_at(att),
                f"call {short(att.call_id)} of {step} has no outcome",
            )
        return anchored

    def records(self, i: int, ev: _Event) -> None:
        """What the order does not say: each commit and token an event names, checked."""
        name, step = ev["event"], ev.get("step")
        if step is None:
            return
        details = ev.get("details", _NO_DETAILS)
        if name == "subagent_invoked" and details.get("token") is not None:
            self.use_token(i, ev, step, details["token"], "invoked")
        elif name == "subagent_diffs_applied":
            self.applied(i, ev, step, details)

    def applied(self, i: int, ev: _Event, step: str, d: dict[str, Any]) -> None:
        call, commit, token = d.get("call_id"), d.get("commit"), d.get("token")
        self.check_commit(i, ev, step, call, commit)
        invoked = self.model.attempt(step).invoked
        expected = None if invoked is None else invoked.get("details", _NO_DETAILS).get("token")
        if token != expected:
            self.add("token", i, f"token {token} is not {expected}, the call's token")
        if not isinstance(token, str):
            return
        self.use_token(i, ev, step, token, "applied")
        found = (self.tokens or {}).get(token)
        if found is not None and found.one_shot:
            first = self.shots.get(token)
            if first is not None:
                self.add(
                    "token", i, f"one-shot token {token} applied again (first at seq {first[0]})"
                )
            else:
                self.shots[token] = (i, str(call), str(commit))

    # -- commits and tokens ------------------------------------------------------------------

    def check_commit(self, i: int, ev: _Event, step: str, call: object, commit: object) -> None:
        if not isinstance(commit, str) or not _HEX40.match(commit):
            self.add("commit", i, f"details.commit {commit!r} is not a commit id")
            return
        found = self.commits.trailers(commit)
        if isinstance(found, str):
            self.add("commit", i, f"commit {commit[:_SHORT]} {found}")
            return
        wanted = {
            "Harness-Task": self.task_id,
            "Harness-Subtask": step,
            "Harness-Call-Id": call,
            "Harness-Log-Head": ev["prev"],
        }
        for key, value in wanted.items():
            if found.get(key) != value:
                self.add(
                    "commit",
                    i,
                    f"commit {commit[:_SHORT]} has {key}: {short(found.get(key, 'none'))}, "
                    f"not {short(value)}",
                )

    def use_token(self, i: int, ev: _Event, step: str, token_id: object, what: str) -> None:
        """The token existed, covered the subtask and had not expired when it was used."""
        if self.tokens is None:
            return  # the token file is unreadable, which is a finding already
        token = self.known_token(token_id) if isinstance(token_id, str) else None
        if token is None:
            self.add(
                "token", i, f"token {token_id} is not in ai/agents/write_tokens.json or its history"
            )
            return
        # Both are schema-checked timestamps of one fixed width, so text order is time order.
        if ev["ts"][:19] >= token.expires[:19]:
            self.add(
                "token",
                i,
                f"token {token.id} {what} at {ev['ts']}, after it expired at {token.expires}",
            )
        globs = None if self.scopes is None else self.scopes.get(step)
        if globs is None:
            return
        key = (token.id, globs)
        if key not in self.covered:
            self.covered[key] = token.covers(globs)
        if not self.covered[key]:
            self.add("token", i, f"token {token.id} does not cover {', '.join(globs)}")

    def known_token(self, token_id: str) -> tokens.Token | None:
        """The token as the store holds it; else as the store last held it on HEAD's history:
        a token removed after its use was what the use was judged by, as replay reads it."""
        found = (self.tokens or {}).get(token_id)
        if found is None:
            if self.past_tokens is None:
                self.past_tokens = self.read_past_tokens()
            found = self.past_tokens.get(token_id)
        return found

    def read_past_tokens(self) -> dict[str, tokens.Token]:
        path = self.layout.tokens
        rel = self.layout.rel(path)
        past: dict[str, tokens.Token] = {}
        for sha in self.git.commits_touching(rel):  # newest first: the latest form wins
            data = self.git.read(sha, rel)
            try:
                known = [] if data is None else tokens.load(path, self.layout.root, data)
            except InvalidInput:
                continue  # a version harness would have refused could not have been used
            for token in known:
                past.setdefault(token.id, token)
        return past

    def check_spent(self) -> None:
        """A one-shot token's spent mark names the call and commit that applied it here."""
        for token in sorted((self.tokens or {}).values(), key=lambda t: t.id):
            mark, used = token.spent, self.shots.get(token.id)
            if not token.one_shot or mark is None:
                continue
            if mark["task_id"] != self.task_id:
                if used is not None:
                    self.add(
                        "token",
                        used[0],
                        f"one-shot token {token.id} is marked spent by task {mark['task_id']}",
                    )
            elif used is None:
                self.add(
                    "token",
                    None,
                    f"one-shot token {token.id} is marked spent by call "
                    f"{mark['call_id'][:_SHORT]}, which this log never applied",
                )
            elif (mark["call_id"], mark["commit"]) != used[1:]:
                self.add(
                    "token",
                    used[0],
                    f"one-shot token {token.id} is marked spent by commit "
                    f"{mark['commit'][:_SHORT]}, not {used[2][:_SHORT]}",
                )

    # -- exchanges ---------------------------------------------------------------------------

    def exchange_blobs(self, stack: ExitStack, anchor: str) -> repo.Spool:
        """Every exchange file at `anchor` but the verify/ evidence (which no hash covers), as
        `<type> <size> <mode> <path>` then its content, from one `git cat-file --batch`."""
        prefix = f"{self.exchanges_dir}/"
        listing = self.git.spool(stack, "ls-tree", "-r", "-z", anchor, "--", prefix).result()
        requests = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 -- the stack closes it
        for entry in repo.split(listing):
            info, _, path = entry.partition(b"\t")
            mode, _, obj = info.split(b" ", 2)
            inner = path[len(prefix) :].split(b"/")
            if b"\n" in path:
                self.add("exchange", None, f"{path!r} is no path harness writes")
            elif len(inner) < 3 or inner[1] != exchanges.VERIFY.encode():
                requests.write(b"%s %s %s\n" % (obj, mode, path))
        requests.seek(0)
        return self.git.spool(
            stack, "cat-file", "--batch=%(objecttype) %(objectsize) %(rest)", stdin=requests
        )

    def exchanges_in_git(self, blobs: IO[bytes], dirty: set[str]) -> None:
        """Each folder git holds, but those the working tree changed, as exchanges.load
        would judge it; git lists a folder's files together, so one folder at a time."""
        prefix = len(self.exchanges_dir) + 1
        current, meta, hashes = "", None, dict[str, str]()
        for header in blobs:
            fields = header.rstrip(b"\n").split(b" ", 3)
            if len(fields) != 4:  # "<object> missing": no content follows
                self.add(
                    "exchange",
                    None,
                    f"git lacks object {fields[0][:_SHORT].decode()} of an exchange",
                )
                continue
            _, size, mode, path = fields
            data = blobs.read(int(size))
            blobs.read(1)  # the newline after the content
            name, _, inner = path.decode("utf-8", "surrogateescape")[prefix:].partition("/")
            if name != current:
                if current and current not in dirty:
                    self.exchange(current, meta, hashes)
                current, meta, hashes = name, None, {}
            if name in dirty:
                continue
            if not inner:
                self.add("exchange", None, f"{self.exchanges_dir}/{name} is not an exchange folder")
                current = ""
            elif mode not in _REGULAR:
                hashes[inner] = f"not a regular file (mode {mode.decode()})"
            elif inner == exchanges.META:
                meta = data
            elif inner.partition("/")[0] != exchanges.VERIFY:
                hashes[inner] = hashlib.sha256(data).hexdigest()
        if current and current not in dirty:
            self.exchange(current, meta, hashes)

    def exchanges_on_disk(self, names: set[str]) -> None:
        folder = self.layout.exchanges(self.task_id)
        for name in sorted(names):
            path = folder / name
            if path.is_dir():
                meta = path / exchanges.META
                data = meta.read_bytes() if meta.is_file() else None
                self.exchange(name, data, exchanges.file_hashes(path))
            elif path.exists():
                self.add("exchange", None, f"{self.exchanges_dir}/{name} is not an exchange folder")

    def exchange(self, name: str, meta: bytes | None, hashes: dict[str, str]) -> None:
        """One exchange folder against the call the log made."""
        entry = self.model.calls.pop(name, None)
        if entry is None:
            self.add(
                "exchange", None, f"exchange folder {name[:_SHORT]} is named by no subagent_invoked"
            )
            return
        seq, said = entry
        recorded = _recorded_outcome(name, meta, hashes)
        if isinstance(recorded, str):
            self.add("exchange", seq, f"exchange {name[:_SHORT]}: {recorded}")
            return
        status, kind = recorded.get("status"), recorded.get("kind")
        if said == "ok" and status != "ok":
            self.add(
                "exchange",
                seq,
                f"exchange {name[:_SHORT]} failed ({kind}), but the log says it succeeded",
            )
        elif said not in ("", "ok") and (status, kind) != ("error", said):
            outcome = "succeeded" if status == "ok" else f"failed ({kind})"
            self.add(
                "exchange",
                seq,
                f"exchange {name[:_SHORT]} {outcome}, but the log says it failed ({said})",
            )


def _recorded_outcome(
    name: str, meta: bytes | None, hashes: dict[str, str]
) -> dict[str, Any] | str:
    """The outcome meta.json records, or what is wrong with the folder (as exchanges.load
    judges it: meta.json schema-valid, naming the folder, hashing every file but itself and
    verify/)."""
    if meta is None:
        return "meta.json is missing"
    try:
        doc = orjson.loads(meta)
    except orjson.JSONDecodeError:
        return "meta.json is not JSON"
    try:
        schemas.fast_validator("exchange-meta")(doc)
    except fastjsonschema.JsonSchemaException:
        return f"meta.json: {schemas.problem('exchange-meta', doc)}"
    if doc["call_id"] != name:
        return f"meta.json names call {doc['call_id'][:_SHORT]}"
    listed: dict[str, str] = doc.get("files", {})
    if listed != hashes:
        wrong = sorted(p for p in listed.keys() | hashes.keys() if listed.get(p) != hashes.get(p))
        return f"files do not match meta.json: {', '.join(wrong[:5])}"
    outcome: dict[str, Any] = doc["outcome"]
    return outcome
