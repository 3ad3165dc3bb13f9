"""Docstrings may only document parameters the function has: Google, NumPy and Sphinx styles."""

from __future__ import annotations

import textwrap

import pytest

from harness.checks.docstrings import (
    changed_docstring_mismatches,
    documented,
    undocumented_mismatches,
)

GOOGLE = '''
def f(path, *args, retries=3, **kwargs):
    """Fetch a thing.

    Args:
        path (str): Where to look.
            timeout: not an entry, just a continuation line.
        {name}: How often to try.
        *args: Passed on.
        **kwargs: Passed on too.

    Returns:
        value: the thing (not a parameter).
    """
'''

NUMPY = '''
def f(path, *args, retries=3, **kwargs):
    """Fetch a thing.

    Parameters
    ----------
    path : str
        Where to look.
        timeout : this is a description line, not an entry
    {name} : int, optional
        How often to try.
    \\*args, \\*\\*kwargs
        Passed on.

    Returns
    -------
    value : object
        The thing (not a parameter).
    """
'''

SPHINX = '''
def f(path, *args, retries=3, **kwargs):
    """Fetch a thing.

    :param str path: Where to look.
    :param {name}: How often to try.
    :type {name}: int
    :param dict[str, int] args: Passed on.
    :keyword kwargs: Passed on too.
    :returns: the thing; ``:rtype:`` is not a parameter.
    """
'''


@pytest.mark.parametrize("template", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_styles_pass_when_names_match(template: str) -> None:
    assert undocumented_mismatches(template.replace("{name}", "retries")) == []


@pytest.mark.parametrize("template", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_styles_flag_a_stale_name(template: str) -> None:
    assert undocumented_mismatches(template.replace("{name}", "tries")) == [
        "f: documents 'tries', not a parameter"
    ]


def test_documented_names_per_style() -> None:
    def names(template: str) -> list[str]:
        doc = template.replace("{name}", "retries").split('"""')[1]
        return documented(textwrap.dedent(doc))

    assert names(GOOGLE) == ["path", "retries", "*args", "**kwargs"]
    assert names(NUMPY) == ["path", "retries", "*args", "**kwargs"]
    assert names(SPHINX) == ["path", "retries", "args", "kwargs"]


def test_methods_self_cls_and_star_names() -> None:
    src = '''
    class C:
        def m(self, x, *rest, **options):
            """Do it.

            Args:
                self: the instance, documented for some reason.
                x: a value.
                args: the rest, under the generic name.
                rest: the rest, under its own name.
                kwargs: options, under the generic name.
                **options: under its own name.
                y: gone.
            """

        @classmethod
        def make(cls, a):
            """:param cls: the class.
            :param a: a value.
            :param b: gone.
            """
    '''
    assert undocumented_mismatches(textwrap.dedent(src)) == [
        "C.m: documents 'y', not a parameter",
        "C.make: documents 'b', not a parameter",
    ]


def test_generic_star_names_need_a_star_parameter() -> None:
    src = '''
    def f(a):
        """Args:
            a: yes.
            *args: no such thing.
            kwargs: nor this.
        """
    '''
    assert undocumented_mismatches(textwrap.dedent(src)) == [
        "f: documents '*args', not a parameter",
        "f: documents 'kwargs', not a parameter",
    ]


def test_positional_and_keyword_only_and_async_and_nested() -> None:
    src = '''
    async def f(a, /, b, *, c):
        """:param a: x
        :param b: x
        :param c: x
        """
        def inner(z):
            """:param q: gone"""
    '''
    assert undocumented_mismatches(textwrap.dedent(src)) == [
        "f.inner: documents 'q', not a parameter"
    ]


def test_functions_without_docstrings_or_sections_are_fine() -> None:
    src = '''
    def f(a): pass
    def g(a):
        """Just prose mentioning x: and y : nothing structured."""
    def h(a):
        """Args:"""
    '''
    assert undocumented_mismatches(textwrap.dedent(src)) == []


def test_google_section_ends_at_dedent() -> None:
    src = '''
    def f(a):
        """Summary.

        Args:
            a: fine.

        Note: this is not inside Args.
        Example:
            b: neither is this.
        """
    '''
    assert undocumented_mismatches(textwrap.dedent(src)) == []


def test_numpy_combined_entries() -> None:
    src = '''
    def f(x1, x2):
        """Summary.

        Parameters
        ----------
        x1, x3 : array_like
            Inputs.
        """
    '''
    assert undocumented_mismatches(textwrap.dedent(src)) == ["f: documents 'x3', not a parameter"]


def test_changed_only_reports_changed_or_new_docstrings() -> None:
    before = textwrap.dedent(
        '''
        def old(a):
            """:param stale: already wrong before, untouched."""
        def edited(a):
            """:param a: fine."""
        '''
    )
    after = before.replace(":param a: fine.", ":param b: now wrong.") + textwrap.dedent(
        '''
        def added(a):
            """:param c: wrong from the start."""
        '''
    )
    assert changed_docstring_mismatches(before, after) == [
        "edited: documents 'b', not a parameter",
        "added: documents 'c', not a parameter",
    ]
    assert changed_docstring_mismatches(before, before) == []
    assert changed_docstring_mismatches(None, before) == ["old: documents 'stale', not a parameter"]


def test_reindenting_a_docstring_is_not_a_change() -> None:
    before = 'def f(a):\n    """:param z: stale."""\n'
    after = 'class_ = 1\ndef f(a):\n    """:param z: stale."""\n'
    assert changed_docstring_mismatches(before, after) == []


def test_unparsable_source_raises() -> None:
    with pytest.raises(ValueError, match=r"<after>:1: cannot parse"):
        changed_docstring_mismatches(None, "def f(:\n")
