"""JUnit XML reports reduced to per-test outcomes, and the tests whose result flipped."""

from __future__ import annotations

from collections.abc import Mapping

OUTCOMES = ("passed", "skipped", "failed", "error")  # in rising severity
FAILING = frozenset({"failed", "error"})
_CHILD_OUTCOME = {"skipped": "skipped", "failure": "failed", "error": "error"}


class _Refused(Exception):
    pass


def _refuse(*_args: object) -> None:
    raise _Refused


def _refuse_declarations(xml_text: str) -> None:
    # A stdlib-only guard against entity expansion ("billion laughs") and external entities:
    # expat reports the DOCTYPE before expanding anything, so refusing it there is safe.
    # Test reports never need a DOCTYPE. The XML modules are imported only here and in
    # `outcomes`: most runs have no report, and every run imports this module.
    from xml.parsers import expat

    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse
    try:
        parser.Parse(xml_text, True)
    except _Refused:
        raise ValueError("JUnit report has a DOCTYPE or ENTITY declaration; refused") from None
    except expat.ExpatError as exc:
        raise ValueError(f"JUnit report is not well-formed XML: {exc}") from None


def outcomes(xml_text: str) -> dict[str, str]:
    """Map "classname::name" to "passed" | "failed" | "error" | "skipped".

    The root may be <testsuites> or a single <testsuite>, nested suites included. A test
    listed more than once (pytest lists a failed call and a teardown error separately) gets
    its most severe outcome.
    """
    import xml.etree.ElementTree as ET

    _refuse_declarations(xml_text)
    root = ET.fromstring(xml_text)
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"JUnit report root is <{root.tag}>, expected <testsuites> or <testsuite>")
    result: dict[str, str] = {}
    for case in root.iter("testcase"):
        name = case.get("name")
        if not name:
            raise ValueError("JUnit report has a <testcase> without a name")
        classname = case.get("classname", "")
        test_id = f"{classname}::{name}" if classname else name
        outcome = "passed"
        for child in case:
            found = _CHILD_OUTCOME.get(child.tag)
            if found is not None and _severity(found) > _severity(outcome):
                outcome = found
        previous = result.get(test_id)
        if previous is None or _severity(outcome) > _severity(previous):
            result[test_id] = outcome
    return result


def _severity(outcome: str) -> int:
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown test outcome {outcome!r}; expected one of {OUTCOMES}")
    return OUTCOMES.index(outcome)


def _failing(outcome: str) -> bool:
    _severity(outcome)  # rejects outcome strings this module never produces
    return outcome in FAILING


def flipped(first: Mapping[str, str], second: Mapping[str, str]) -> list[str]:
    """Sorted ids of tests failing (failed or error) in exactly one of two runs.

    A test absent from a run counts as not failing there, so it flips only when it failed in
    the other run; passed vs skipped is not a flip (neither is a failure).
    """
    flips = []
    for test_id in first.keys() | second.keys():
        a, b = first.get(test_id, "passed"), second.get(test_id, "passed")
        if _failing(a) != _failing(b):
            flips.append(test_id)
    return sorted(flips)
