"""Globs: which paths a pattern matches (the same answers as wcmatch), and which globs a
write scope and a token cover."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from wcmatch import glob as wcglob

from harness.base import scope

from .builders import FAST

SEGMENTS = ["src", "a", "*", "**", "*.py"]
GLOBS = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4).map("/".join)
NAMES = st.sampled_from(["src", "a", "b", "x.py", ".hidden", "m.py.txt"])


@st.composite
def instance(draw: st.DrawFn, glob: str) -> str:
    """A concrete path matched by `glob`, wildcards filled in at random."""
    parts: list[str] = []
    for seg in glob.split("/"):
        if seg == "**":
            parts += draw(st.lists(NAMES, max_size=3))
        elif seg == "*":
            parts.append(draw(NAMES))
        elif seg == "*.py":
            parts.append(draw(st.sampled_from(["", "x", "a.b", ".t"])) + ".py")
        else:
            parts.append(seg)
    return "/".join(parts)


@st.composite
def narrower(draw: st.DrawFn, outer: str) -> str:
    """A glob that is often, but not always, covered by `outer`."""
    parts: list[str] = []
    for seg in outer.split("/"):
        if seg == "**":
            parts += draw(st.lists(st.sampled_from(SEGMENTS), max_size=2))
        elif seg == "*":
            parts.append(draw(st.sampled_from(["*", "src", "a", "*.py", "x.py"])))
        elif seg == "*.py":
            parts.append(draw(st.sampled_from(["*.py", "x.py", "x.pyc"])))
        else:
            parts.append(seg)
    return "/".join(parts)


@FAST
@given(GLOBS, st.data())
def test_covers_is_sound(outer: str, data: st.DataObject) -> None:
    inner = data.draw(st.one_of(GLOBS, narrower(outer)), label="inner")
    assume(inner and scope.covers(outer, inner))
    for _ in range(5):
        path = data.draw(instance(inner), label="path")
        if path and scope.matches(path, [inner]):
            assert scope.matches(path, [outer]), f"{outer} covers {inner} but not {path}"


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        ("src/**", "src/**", True),
        ("src/**", "src/a/*.py", True),
        ("**", "src/*.py", True),
        ("src/*", "src/calc.py", True),
        ("src/*.py", "src/calc.py", True),
        ("src/**", "tests/**", False),
        ("src/*", "src/**", False),  # * is one segment, ** any depth
        ("src/*", "src/a/b.py", False),
        ("src/*.py", "src/*", False),
        ("src/a", "src/*", False),
        ("src/**", "src", False),  # src/** matches nothing named exactly src
    ],
)
def test_covers_hand_cases(outer: str, inner: str, expected: bool) -> None:
    assert scope.covers(outer, inner) is expected


@pytest.mark.parametrize(
    ("path", "globs", "expected"),
    [
        ("src/calc.py", ["src/**"], True),
        ("src/a/b/c.py", ["src/**"], True),
        ("src/a/b.py", ["src/*"], False),
        ("src/.env", ["src/*"], True),
        ("docs/x.md", ["src/**", "docs/*.md"], True),
        ("src/calc.py", [], False),
    ],
)
def test_matches_hand_cases(path: str, globs: list[str], expected: bool) -> None:
    assert scope.matches(path, globs) is expected


# Names and patterns from characters that matter to a glob: separators, dots, wildcards,
# classes, escapes, negation, braces, case.
PATH_CHARS = st.sampled_from(["a", "B", "b", ".", "/", "\\", "*", "!", "-", "é"])
PATTERN_PARTS = st.sampled_from(
    ["a", "B", "b", ".", "..", "/", "\\", "*", "**", "?", "[a]", "[!a]", "!", "{a,b}", "é"]
)
WC_FLAGS = wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.NEGATE | wcglob.NODIR


def _wc(path: str, patterns: list[str]) -> bool:
    return bool(patterns) and wcglob.globmatch(path, patterns, flags=WC_FLAGS)


@FAST
@given(
    st.lists(PATH_CHARS, max_size=12).map("".join),
    st.lists(st.lists(PATTERN_PARTS, min_size=1, max_size=6).map("".join), max_size=3),
)
def test_matches_is_wcmatch(path: str, patterns: list[str]) -> None:
    assert scope.matches(path, patterns) is _wc(path, patterns)


SIMPLE = st.lists(st.sampled_from(["a", "b", ".x", "a.b", "B"]), min_size=1, max_size=3).map(
    "/".join
)
STARRED = st.lists(st.sampled_from(["a", "b", ".", "*"]), min_size=1, max_size=6).map("".join)
NAMES_FOR_STARS = st.lists(
    st.sampled_from(["a", "b", ".", "ab", "aab"]), min_size=1, max_size=5
).map("".join)


@FAST
@given(
    st.lists(st.sampled_from(["a", "b", ".x", "a.b", "B", "c"]), min_size=1, max_size=4).map(
        "/".join
    ),
    st.lists(
        st.one_of(
            SIMPLE,
            SIMPLE.map(lambda s: s + "/**"),
            SIMPLE.map(lambda s: "**/" + s.rpartition("/")[2]),
            st.just("**"),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_plain_forms_are_wcmatch(path: str, patterns: list[str]) -> None:
    """The forms matched without wcmatch, on paths as git names files: the same answers."""
    assert scope.matches(path, patterns) is _wc(path, patterns)


@pytest.mark.parametrize(
    ("path", "globs"),
    [
        ("", ["**"]),
        ("/src/a.py", ["**/a.py"]),
        ("./src/a.py", ["src/**"]),
        ("src//a.py", ["src/a.py"]),
        ("src/", ["src/**"]),
        ("src", ["src/**"]),
        ("src/..", ["**"]),
        ("src\\a.py", ["**/a.py"]),
        ("Src/a.py", ["src/**"]),
        ("!a", ["!a"]),
        ("b", ["!a"]),
        ("src/a.py", ["src/**", "!src/a.py"]),
        ("a/b", ["a//b"]),
        ("a/b", ["a//**"]),
        ("a/b", ["a/./b"]),
        ("b", ["a/../b"]),
        ("a", ["a/"]),
        ("a", ["./a"]),
        ("a", ["/a"]),
        ("a", ["**/"]),
        ("a\\b", ["a\\b"]),
        ("a\\b", ["**/b"]),
    ],
)
def test_odd_paths_and_patterns_are_wcmatch(path: str, globs: list[str]) -> None:
    assert scope.matches(path, globs) is _wc(path, globs)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(NAMES_FOR_STARS, min_size=1, max_size=3).map("/".join),
    st.lists(
        st.one_of(
            STARRED.map(lambda s: "**/" + s),
            st.lists(STARRED, min_size=1, max_size=3).map("/".join),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_segments_with_stars_are_wcmatch(path: str, patterns: list[str]) -> None:
    """`*` within a segment (`**/requirements*.txt`, `src/*.py`) matched without wcmatch:
    the same answers, leading dots, empty runs and repeated pieces included."""
    assert scope.matches(path, patterns) is _wc(path, patterns)


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("ab", "**/a*b*b"),  # a piece may not reach into the last one's place
        ("ab", "*b*b*"),  # each piece is found after the one before
        ("a", "a*a"),  # the first and last pieces do not share a character
        ("aa", "a*a"),
        ("x/.env", "**/.*"),
        ("requirements-dev.txt", "**/requirements*.txt"),
        ("src/a/requirements.txt", "**/requirements*.txt"),
        ("src/calc.py", "src/*.py"),
        ("src/a/calc.py", "src/*.py"),
    ],
)
def test_star_segments_hand_cases(path: str, pattern: str) -> None:
    assert scope.matches(path, [pattern]) is _wc(path, [pattern])
