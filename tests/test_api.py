"""The public-API extractor behind the micro-refactor rule "public API unchanged"."""

from __future__ import annotations

import ast
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checks.api import api_changes, signatures

M = "pkg/mod.py"


def sigs(source: str) -> set[str]:
    return {s.removeprefix(f"{M}: ") for s in signatures(textwrap.dedent(source), M)}


def changes(before: str, after: str) -> list[str]:
    return api_changes({M: textwrap.dedent(before)}, {M: textwrap.dedent(after)})


def test_signature_spells_every_parameter_kind() -> None:
    src = """
    async def f(a: int, /, b, c: str = "x", *args: int, d, e=2, **kw: object) -> list[int]:
        pass
    def g(a, *, b): ...
    """
    assert sigs(src) == {
        "async def f(a: int, /, b, c: str='x', *args: int, d, e=2, **kw: object) -> list[int]",
        "def g(a, *, b)",
    }


def test_module_path_is_part_of_identity() -> None:
    assert signatures("def f(): ...", "a.py") != signatures("def f(): ...", "b.py")
    assert signatures("def f(): ...", "a.py") == frozenset({"a.py: def f()"})


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("def f(a, b=1): ...", "def f(a, c=1): ..."),  # renamed parameter
        ("def f(a): ...", "def f(a, b=1): ..."),  # added parameter with a default
        ("def f(a, b=1): ...", "def f(a, b=2): ..."),  # changed default
        ("def f(a: int): ...", "def f(a: str): ..."),  # changed annotation
        ("def f(a) -> int: ...", "def f(a) -> str: ..."),  # changed return annotation
        ("def f(a, b): ...", "def f(a, *, b): ..."),  # positional -> keyword-only
        ("def f(a, b): ...", "def f(a, /, b): ..."),  # positional -> positional-only
        ("def f(*args): ...", "def f(*items): ..."),  # renamed *args
        ("def f(): ...", "async def f(): ..."),  # def -> async def
        ("class C: ...", "class C(Base): ..."),  # new base class
        ("class C(metaclass=A): ...", "class C(metaclass=B): ..."),
        ("class C:\n    def m(self): ...", "class C:\n    def m(self, x): ..."),  # method
        ("class C:\n    def x(self): ...", "class C:\n    @property\n    def x(self): ..."),
        ("class C:\n    def m(x): ...", "class C:\n    @staticmethod\n    def m(x): ..."),
        ("class C:\n    def __init__(self): ...", "class C:\n    def __init__(self, a): ..."),
    ],
)
def test_api_change_is_reported(before: str, after: str) -> None:
    found = changes(before, after)
    assert [line.split(":")[0] for line in found] == ["removed", "added"]
    assert found[0].startswith(f"removed: {M}: ")
    assert found[1].startswith(f"added: {M}: ")


def test_change_reads_as_removed_then_added() -> None:
    assert changes("def f(a, b=1): ...", "def f(a, b=2): ...") == [
        f"removed: {M}: def f(a, b=1)",
        f"added: {M}: def f(a, b=2)",
    ]


def test_removing_and_adding_functions() -> None:
    assert changes("def f(): ...\ndef g(): ...", "def g(): ...") == [f"removed: {M}: def f()"]
    assert changes("def g(): ...", "def g(): ...\ndef h(x): ...") == [f"added: {M}: def h(x)"]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("def _f(a): ...", "def _f(b): ..."),  # private function
        ("def _f(a): ...", ""),  # private function removed
        ("class C:\n    def _m(self): ...", "class C:\n    def _m(self, x): ..."),
        ("class _C:\n    def m(self): ...", "class _C:\n    def m(self, x): ..."),
        ("def f(a):\n    return a", "def f(a):\n    b = a * 2\n    return b - a"),  # body
        ("def f(a, b=1): ...", "# hello\ndef f(  a,\n   b = 1 ,  # why\n): ..."),  # format
        ("def f(a):\n    def inner(x): ...", "def f(a):\n    def inner(y, z): ..."),  # nested
        ("def f(a): ...", "@functools.cache\ndef f(a): ..."),  # non-shape decorator
        ("X = 1", "X = 2"),  # module constants are not tracked
    ],
)
def test_no_api_change(before: str, after: str) -> None:
    assert changes(before, after) == []


def test_dunder_methods_are_public() -> None:
    assert sigs("class C:\n    def __call__(self, x): ...\n    def __m(self): ...") == {
        "class C",
        "def C.__call__(self, x)",
    }


def test_dunder_all_restricts_top_level_names() -> None:
    src = """
    __all__ = ["f", "C", "_g"]
    def f(): ...
    def h(): ...
    def _g(): ...
    class C:
        def m(self): ...
        def _p(self): ...
    class D: ...
    """
    assert sigs(src) == {"def f()", "def _g()", "class C", "def C.m(self)"}
    assert changes(src, src.replace("def h(): ...", "def h(x): ...")) == []


def test_dunder_all_that_is_not_a_literal_is_ignored() -> None:
    assert sigs("__all__ = names()\ndef f(): ...\ndef _g(): ...") == {"def f()"}
    assert sigs("__all__ = ['f']\n__all__ += ['g']\ndef f(): ...\ndef g(): ...") == {
        "def f()",
        "def g()",
    }
    assert sigs("__all__: tuple[str, ...] = ('g',)\ndef f(): ...\ndef g(): ...") == {"def g()"}


def test_methods_and_nested_classes_of_public_classes() -> None:
    src = """
    class C(Base):
        @classmethod
        def make(cls, x: int) -> C: ...
        @property
        def size(self) -> int: ...
        @size.setter
        def size(self, value: int) -> None: ...
        class Inner:
            def run(self): ...
    """
    assert sigs(src) == {
        "class C(Base)",
        "@classmethod def C.make(cls, x: int) -> C",
        "@property def C.size(self) -> int",
        "@size.setter def C.size(self, value: int) -> None",
        "class C.Inner",
        "def C.Inner.run(self)",
    }


def test_property_differs_from_method() -> None:
    method = sigs("class C:\n    def x(self): ...")
    prop = sigs("class C:\n    @property\n    def x(self): ...")
    assert method != prop


def test_conditional_definitions_count() -> None:
    src = """
    try:
        import fast
    except ImportError:
        def speed(): ...
    if fast:
        def g(): ...
    else:
        def g(x=None): ...
    """
    assert sigs(src) == {"def speed()", "def g()", "def g(x=None)"}


def test_modules_added_and_removed() -> None:
    assert api_changes({}, {"a.py": "def f(): ..."}) == [
        "added: a.py: module",
        "added: a.py: def f()",
    ]
    assert api_changes({"a.py": ""}, {}) == ["removed: a.py: module"]
    assert api_changes({"a.py": "def f(): ..."}, {"a.py": "def f(): ..."}) == []


def test_unparsable_source_names_path_and_line() -> None:
    with pytest.raises(ValueError, match=r"^pkg/bad\.py:2: "):
        signatures("x = 1\ndef f(:\n", "pkg/bad.py")
    with pytest.raises(ValueError, match=r"pkg/mod\.py:1"):
        api_changes({M: "def f(): ..."}, {M: "def f(\n"})


# -- property: reformatting never changes the API ------------------------------------------

NAMES = st.sampled_from(["a", "b", "cfg", "value", "x1"])
EXPRS = st.sampled_from(["1", "None", "'s'", "(1, 2)", "[ ]", "-1.5", "{ 'k' : 2 }", "f( 3 )"])
ANNOTS = st.sampled_from(["int", "str | None", "list[ int ]", "'Fwd'", "typing.Any"])
PAD = st.sampled_from(["", " ", "  ", "\n    ", " # note\n  "])


@st.composite
def param(draw: st.DrawFn, name: str) -> str:
    text = name
    if draw(st.booleans()):
        text += f"{draw(PAD)}:{draw(PAD)}{draw(ANNOTS)}"
    if draw(st.booleans()):
        text += f"{draw(PAD)}={draw(PAD)}{draw(EXPRS)}"
    return text


@st.composite
def function(draw: st.DrawFn, name: str, indent: str) -> str:
    names = draw(st.lists(NAMES, unique=True, max_size=4))
    params = [draw(param(n)) for n in names]
    # Keep defaults legal: once one positional parameter has one, the rest need one too.
    seen_default = False
    for i, p in enumerate(params):
        seen_default = seen_default or "=" in p
        if seen_default and "=" not in p:
            params[i] = f"{p} = 0"
    star, slash, kwargs = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    if params and star:
        params.insert(draw(st.integers(0, len(params) - 1)), "*")
    elif params and slash:
        params.insert(draw(st.integers(1, len(params))), "/")
    if kwargs:
        params.append("**kw")
    pad = draw(PAD)
    sep = f",{pad}"
    ret = f" -> {draw(ANNOTS)}" if draw(st.booleans()) else ""
    head = f"{indent}{draw(st.sampled_from(['def', 'async def']))} {name}({pad}{sep.join(params)})"
    deco = f"{indent}@{draw(st.sampled_from(['staticmethod', 'property', 'cache']))}\n"
    return (deco if indent and draw(st.booleans()) else "") + f"{head}{ret}:\n{indent}    pass\n"


@st.composite
def module(draw: st.DrawFn) -> str:
    parts = [draw(function(f"f{i}", "")) for i in range(draw(st.integers(0, 3)))]
    for i in range(draw(st.integers(0, 2))):
        base = draw(st.sampled_from(["", "(Base)", "( A , metaclass = M )"]))
        methods = [draw(function(m, "    ")) for m in ["__init__", "_p", "run"][: i + 2]]
        parts.append(f"class C{i}{base}:\n" + "".join(methods))
    return "\n# comment\n\n".join(parts)


@settings(max_examples=150, deadline=None)
@given(module())
def test_reformatting_never_changes_signatures(source: str) -> None:
    canonical = ast.unparse(ast.parse(source))
    assert signatures(canonical, M) == signatures(source, M)
    assert api_changes({M: source}, {M: canonical}) == []
