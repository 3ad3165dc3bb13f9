"""Review findings must cite lines inside the input files."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.checks.citations import CITE, check_findings

INPUTS = {"src/x.py": 40, "README.md": 10, "Makefile": 5, "empty.txt": 0}


def test_good_findings_pass() -> None:
    findings = [
        "src/x.py:3 shadows a builtin",
        "README.md:1-10 is out of date, see also src/x.py:40.",
        "(src/x.py:12-12) and ./src/x.py:7, rule E501",
    ]
    assert check_findings(findings, INPUTS) == []
    assert check_findings([], INPUTS) == []


def test_each_problem_kind() -> None:
    findings = [
        "src/other.py:3 is wrong",
        "no citation at all, only prose: 3 things",
        "src/x.py:99 is past the end",
        "src/x.py:0 is before the start",
        "src/x.py:9-3 is backwards",
        "src/x.py:30-41 runs past the end",
        "empty.txt:1 has nothing",
        "README.md:1 fine but src/x.py:41 and src/x.py:41 and nope.py:1 not",
    ]
    assert check_findings(findings, INPUTS) == [
        "finding 1: cites src/other.py:3, not an input",
        "finding 2: no path:line citation",
        "finding 3: cites src/x.py:99 but it has 40 lines",
        "finding 4: cites src/x.py:0 but it has 40 lines",
        "finding 5: cites src/x.py:9-3, an empty range",
        "finding 6: cites src/x.py:30-41 but it has 40 lines",
        "finding 7: cites empty.txt:1 but it has 0 lines",
        "finding 8: cites src/x.py:41 but it has 40 lines; cites nope.py:1, not an input",
    ]
    assert check_findings(["a.py:2"], {"a.py": 1}) == ["finding 1: cites a.py:2 but it has 1 line"]


@pytest.mark.parametrize(
    "text",
    [
        "Makefile:3",  # a path needs a '.' or '/'
        "note:3",
        "https://example.com:8080/x",  # a URL's port is not a line
        "x.py:",
        "x.py:abc",
        "time 10:30",
    ],
)
def test_not_a_citation(text: str) -> None:
    assert CITE.search(text) is None


@pytest.mark.parametrize(
    ("text", "path", "start", "end"),
    [
        ("see src/x.py:3.", "src/x.py", "3", None),
        ("at `a/b-c_d.txt:10-20`,", "a/b-c_d.txt", "10", "20"),
        ("x.py:3:5 col", "x.py", "3", None),
        ("[.github/ci.yml:7]", ".github/ci.yml", "7", None),
        ("docs/Makefile:2", "docs/Makefile", "2", None),
    ],
)
def test_citation_parts(text: str, path: str, start: str, end: str | None) -> None:
    m = CITE.search(text)
    assert m is not None
    assert (m["path"], m["start"], m["end"]) == (path, start, end)


PATHS = st.from_regex(r"[a-z_]{1,8}(/[a-z0-9_-]{1,8}){0,3}\.[a-z]{1,4}", fullmatch=True)
PROSE = st.text(alphabet=st.sampled_from("abc ,;()!?\n"), max_size=20)


@st.composite
def cited(draw: st.DrawFn, in_range: bool) -> tuple[str, dict[str, int]]:
    paths = draw(st.lists(PATHS, min_size=1, max_size=4, unique=True))
    inputs = {p: draw(st.integers(0, 500)) for p in paths}
    path = draw(st.sampled_from(paths))
    n = inputs[path]
    if in_range:
        inputs[path] = n = max(n, 1)
        start = draw(st.integers(1, n))
        end = draw(st.integers(start, n))
    else:
        # Out of range: line 0, past the end, or a backwards range.
        start = draw(st.integers(0, n + 5))
        end = draw(st.integers(n + 1, n + 50)) if start >= 1 else draw(st.integers(0, n + 5))
    cite = f"{path}:{start}" if start == end and draw(st.booleans()) else f"{path}:{start}-{end}"
    return f"{draw(PROSE)} {cite} {draw(PROSE)}", inputs


@given(cited(in_range=True))
def test_in_range_citation_always_passes(case: tuple[str, dict[str, int]]) -> None:
    finding, inputs = case
    assert check_findings([finding], inputs) == []


@given(cited(in_range=False))
def test_out_of_range_citation_always_fails(case: tuple[str, dict[str, int]]) -> None:
    finding, inputs = case
    [problem] = check_findings([finding], inputs)
    assert problem.startswith("finding 1: cites ")


@given(PATHS, st.integers(1, 50), st.dictionaries(PATHS, st.integers(1, 100), max_size=3))
def test_unknown_path_always_fails(path: str, line: int, inputs: dict[str, int]) -> None:
    inputs.pop(path, None)
    assert check_findings([f"{path}:{line}"], inputs) == [
        f"finding 1: cites {path}:{line}, not an input"
    ]
