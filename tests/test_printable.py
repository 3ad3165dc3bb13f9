"""`printable`: recorded text a terminal shows but never acts on."""

from __future__ import annotations

import subprocess
import unicodedata

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.printable import printable

from .conftest import Sample, err, subtask

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, é and 中文", "plain text, é and 中文"),
        ("\x1b[2Jcleared", "\\x1b[2Jcleared"),
        ("a\rb\bc\x07", "a\\x0db\\x08c\\x07"),
        ("one\nline\ttab", "one\\x0aline\\x09tab"),
        ("\x7f\x85\x9b", "\\x7f\\x85\\x9b"),
        ("txt.\u202eexe", "txt.\\u202eexe"),
        ("\u2066isolate\u2069", "\\u2066isolate\\u2069"),
        ("C:\\x1b", "C:\\\\x1b"),  # a backslash written out is doubled, not read as an escape
    ],
)
def test_escapes(text: str, shown: str) -> None:
    assert printable(text) == shown


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) == "Cc" or char in BIDI


# Mostly the characters that matter, so collisions have a chance to show up.
_TEXT = st.text(
    st.one_of(
        st.sampled_from(["\\", "x", "u", "1", "b", "2", "e", "\x1b", "\n", "\u202e", "\x9b"]),
        st.characters(),
    ),
    max_size=30,
)


@given(_TEXT)
def test_never_shows_a_control_or_bidi_character(text: str) -> None:
    assert not any(_unsafe(char) for char in printable(text))


@given(_TEXT)
def test_safe_text_is_kept_as_it_is(text: str) -> None:
    if not any(_unsafe(char) or char == "\\" for char in text):
        assert printable(text) == text


@given(st.lists(_TEXT, min_size=2, max_size=20, unique=True))
def test_different_texts_are_shown_differently(texts: list[str]) -> None:
    assert len({printable(text) for text in texts}) == len(texts)


# -- through the CLI -------------------------------------------------------------------------

HOSTILE = "red \x1b[31m and \u202eflipped"
SHOWN = "red \\x1b[31m and \\u202eflipped"


def _blocked_by(sample: Sample, message: str) -> subprocess.CompletedProcess[str]:
    sample.write_plan([subtask("T1")])
    sample.write_script([err("T1", "hard", message)])
    return sample.cli("next", "demo")


def test_a_worker_error_is_shown_escaped(sample: Sample) -> None:
    ran = _blocked_by(sample, HOSTILE)
    assert ran.returncode == 1
    assert sample.events()[-1]["error"].endswith(HOSTILE)  # recorded as the worker said it
    status, log = sample.cli("status", "demo"), sample.cli("log", "demo")
    for res, where in ((ran, ran.stderr), (status, status.stdout), (log, log.stdout)):
        assert "\x1b" not in res.stdout + res.stderr and "\u202e" not in res.stdout + res.stderr
        assert SHOWN in where
    assert f"blocked at T1: {SHOWN}" in status.stdout


def test_an_audit_finding_quoting_the_log_is_shown_escaped(sample: Sample) -> None:
    _blocked_by(sample, "boom")
    path = sample.root / "ai" / "tasks" / "demo" / "progress.ndjson"
    lines = path.read_bytes().splitlines()
    lines[-1] = lines[-1].replace(b'"step":"T1"', orjson.dumps({"step": "T1\u202e\x1b[2J"})[1:-1])
    path.write_bytes(b"\n".join(lines) + b"\n")
    res = sample.cli("audit", "demo")
    assert res.returncode == 1
    assert "\x1b" not in res.stdout and "\u202e" not in res.stdout
    assert "seq 4: not a progress event: $.step:" in res.stdout and "\\u202e" in res.stdout
