"""checks/deferred.py: what a run of checks says (log lines, evidence written and removed,
phase ends), held back and said later, in order, as if said at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checks.deferred import Deferred

from .builders import FAST

EVIDENCE = Path("/repo/ai/exchanges/demo/c1")  # where the landing keeps the call's evidence


class Heard:
    """A log, a ledger and a live view in one: every call, in the order made."""

    def __init__(self) -> None:
        self.heard: list[tuple[Any, ...]] = []

    def append(
        self,
        event: str,
        status: str,
        *,
        step: str | None = None,
        details: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        self.heard.append(("event", event, status, step, details, error))

    def write(self, path: Path, data: bytes) -> None:
        self.heard.append(("write", path, data))

    def remove(self, path: Path) -> None:
        self.heard.append(("remove", path))

    def phase(self, name: str, ok: bool) -> bool:
        self.heard.append(("phase", name, ok))
        return ok


names = st.text("abz_-.0", min_size=1, max_size=4).filter(lambda n: n not in (".", ".."))
paths = st.lists(names, min_size=1, max_size=3).map("/".join)
texts = st.none() | st.text(max_size=8)
details = st.none() | st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4))
said = st.lists(
    st.tuples(st.just("event"), st.sampled_from(["test_passed", "test_failed"]), texts, texts)
    | st.tuples(st.just("details"), st.text(max_size=6), details)
    | st.tuples(st.just("write"), paths, st.binary(max_size=8))
    | st.tuples(st.just("remove"), paths)
    | st.tuples(st.just("phase"), st.sampled_from(["build", "test", "acceptance"]), st.booleans()),
    max_size=12,
)


def say(what: list[tuple[Any, ...]], log: Any, ledger: Any, phase: Any, folder: Path) -> list[Any]:
    """Say `what` as checks do, evidence under `folder`; what each phase end gave back."""
    back = []
    for kind, *rest in what:
        if kind == "event":
            event, step, error = rest
            log.append(event, "error" if error else "ok", step=step, error=error)
        elif kind == "details":
            log.append("build_succeeded", "ok", step=rest[0], details=rest[1])
        elif kind == "write":
            ledger.write(folder / rest[0], rest[1])
        elif kind == "remove":
            ledger.remove(folder / rest[0])
        else:
            back.append(phase(*rest))
    return back


@settings(FAST, max_examples=40)
@given(said)
def test_given_later_it_says_exactly_what_saying_it_at_once_would(what: list[Any]) -> None:
    now = Heard()
    at_once = say(what, now, now, now.phase, EVIDENCE)
    later, held = Heard(), Deferred()
    # Checks name their evidence relative to a folder only the landing knows.
    assert say(what, held, held, held.phase, Path()) == at_once  # a phase end says how it went
    assert later.heard == []
    held.give(later, later, EVIDENCE, later.phase)
    assert later.heard == now.heard


def test_it_keeps_the_order_of_lines_evidence_and_phase_ends() -> None:
    held = Deferred()
    held.remove(Path("verify"))
    held.write(Path("verify/00-test.json"), b"{}")
    held.append("test_passed", "ok", step="P1", details={"check": "test"})
    assert held.phase("test", True) and not held.phase("acceptance", False)
    assert held.said == [
        ("remove", "verify"),
        ("write", ("verify/00-test.json", b"{}")),
        ("event", ("test_passed", "ok", "P1", {"check": "test"}, None)),
        ("phase", ("test", True)),
        ("phase", ("acceptance", False)),
    ]
    heard = Heard()
    held.give(heard, heard, Path("/e"), heard.phase)
    assert [h[0] for h in heard.heard] == ["remove", "write", "event", "phase", "phase"]
    assert heard.heard[1] == ("write", Path("/e/verify/00-test.json"), b"{}")
