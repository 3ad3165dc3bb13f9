"""Tests for JUnit reports: real pytest runs, hand-written XML, refused declarations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checks.junit import flipped, outcomes

SUITE = """\
import os

import pytest


def test_env():
    assert not os.environ.get("HARNESS_FLIP")


def test_stable():
    assert True


@pytest.mark.skip
def test_skipped():
    pass


class TestGroup:
    @pytest.mark.parametrize("x", [1, "a b"])
    def test_param(self, x):
        assert x
"""


def _run_pytest(root: Path, report: str, flip: bool) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HARNESS_FLIP"))}
    if flip:
        env["HARNESS_FLIP"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == (1 if flip else 0), proc.stdout + proc.stderr
    return (root / report).read_text()


def test_real_reports_flip(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_flaky.py").write_text(SUITE)
    calm = outcomes(_run_pytest(tmp_path, "calm.xml", flip=False))
    flip = outcomes(_run_pytest(tmp_path, "flip.xml", flip=True))
    assert calm == {
        "test_flaky::test_env": "passed",
        "test_flaky::test_stable": "passed",
        "test_flaky::test_skipped": "skipped",
        "test_flaky.TestGroup::test_param[1]": "passed",
        "test_flaky.TestGroup::test_param[a b]": "passed",
    }
    assert flip == calm | {"test_flaky::test_env": "failed"}
    assert flipped(calm, flip) == ["test_flaky::test_env"]
    assert flipped(flip, calm) == ["test_flaky::test_env"]
    assert flipped(calm, calm) == []


def test_single_testsuite_root_and_outcomes() -> None:
    xml = """<?xml version="1.0" encoding="utf-8"?>
<testsuite name="s">
  <testcase classname="pkg.mod" name="ok" />
  <testcase classname="pkg.mod" name="bad"><failure message="x">trace</failure></testcase>
  <testcase classname="pkg.mod" name="boom"><error message="y" /></testcase>
  <testcase classname="pkg.mod" name="skip"><skipped /></testcase>
  <testcase classname="pkg.mod" name="noisy"><system-out>&lt;b&gt;</system-out></testcase>
  <testcase name="bare" />
</testsuite>"""
    assert outcomes(xml) == {
        "pkg.mod::ok": "passed",
        "pkg.mod::bad": "failed",
        "pkg.mod::boom": "error",
        "pkg.mod::skip": "skipped",
        "pkg.mod::noisy": "passed",
        "bare": "passed",
    }


def test_nested_suites_and_duplicates_take_worst() -> None:
    # pytest lists a failing call and a teardown error as two entries with one name.
    xml = """<testsuites><testsuite name="outer"><testsuite name="inner">
  <testcase classname="m" name="t"><failure /></testcase>
  <testcase classname="m" name="t"><error /></testcase>
  <testcase classname="m" name="u"><skipped /></testcase>
  <testcase classname="m" name="u" />
  <testcase classname="m" name="v"><skipped /><failure /></testcase>
</testsuite></testsuite></testsuites>"""
    assert outcomes(xml) == {"m::t": "error", "m::u": "skipped", "m::v": "failed"}


def test_empty_suites() -> None:
    assert outcomes("<testsuites />") == {}
    assert outcomes("<testsuite name='x'></testsuite>") == {}


@pytest.mark.parametrize(
    "xml",
    [
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        "<testsuites><testcase name='t'>&b;</testcase></testsuites>",
        '<!DOCTYPE testsuites SYSTEM "file:///etc/passwd"><testsuites />',
        "<!-- a comment first -->\n<!DOCTYPE testsuites><testsuites />",
    ],
)
def test_declarations_refused(xml: str) -> None:
    with pytest.raises(ValueError, match="DOCTYPE or ENTITY"):
        outcomes(xml)


@pytest.mark.parametrize(
    ("xml", "needle"),
    [
        ("<testsuites>", "not well-formed"),
        ("", "not well-formed"),
        ("<!doctype testsuites><testsuites />", "not well-formed"),  # XML keywords are upper
        ("<html><testcase name='t'/></html>", "root is <html>"),
        ("<testsuite><testcase classname='c'/></testsuite>", "without a name"),
    ],
)
def test_bad_reports(xml: str, needle: str) -> None:
    with pytest.raises(ValueError, match="JUnit report") as info:
        outcomes(xml)
    assert needle in str(info.value)


def test_flipped_rules() -> None:
    first = {
        "a": "passed",
        "b": "failed",
        "c": "skipped",
        "d": "error",
        "e": "failed",
        "f": "passed",
    }
    second = {
        "a": "failed",
        "b": "error",
        "c": "passed",
        "d": "passed",
        "g": "error",
        "f": "skipped",
    }
    # a, d: pass/fail differs; e: failed then missing; g: missing then failed.
    # b: failed vs error is still failing; c, f: skip vs pass is not a failure either way.
    assert flipped(first, second) == ["a", "d", "e", "g"]
    assert flipped(first, {}) == ["b", "d", "e"]
    assert flipped({}, {"x": "passed"}) == []


def test_flipped_rejects_unknown_outcome() -> None:
    with pytest.raises(ValueError, match="unknown test outcome"):
        flipped({"a": "PASS"}, {"a": "passed"})
