"""Docstrings that document parameters a function does not have (Google, NumPy, Sphinx)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from harness.checks.api import parse

_Func = ast.FunctionDef | ast.AsyncFunctionDef

_GOOGLE_HEADER = re.compile(
    r"^(\s*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments"
    r"|Other Parameters):\s*$"
)
_GOOGLE_ENTRY = re.compile(r"^((?:\\?\*){0,2}\w+)\s*(?:\([^)]*\))?\s*:(?:\s|$)")
_NUMPY_HEADER = re.compile(r"^\s*(?:Parameters|Other Parameters|Keyword Arguments)\s*$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^((?:\\?\*){0,2}\w+(?:\s*,\s*(?:\\?\*){0,2}\w+)*)\s*(?::.*)?$")
_SPHINX_FIELD = re.compile(r":(?:param|parameter|arg|argument|key|keyword|type)\s+([^:\n]+?)\s*:")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google(lines: list[str]) -> Iterator[str]:
    for i, line in enumerate(lines):
        header = _GOOGLE_HEADER.match(line)
        if header is None:
            continue
        # Cleaning dedents every line after the first, so a header on the docstring's first
        # line has its entries at its own indentation: such a section runs to the end.
        level = len(header.group(1)) if i else -1
        entry_indent: int | None = None
        for item in lines[i + 1 :]:
            if not item.strip():
                continue
            if _indent(item) <= level:
                break  # dedented back to the header's level: the section is over
            entry_indent = _indent(item) if entry_indent is None else entry_indent
            # Deeper lines continue an entry's description and never name a parameter.
            if _indent(item) == entry_indent and (m := _GOOGLE_ENTRY.match(item.strip())):
                yield m.group(1)


def _numpy(lines: list[str]) -> Iterator[str]:
    for i in range(len(lines) - 1):
        if not (_NUMPY_HEADER.match(lines[i]) and _NUMPY_RULE.match(lines[i + 1])):
            continue
        level = _indent(lines[i])
        body = lines[i + 2 :]
        for j, item in enumerate(body):
            if not item.strip() or _indent(item) != level:
                continue
            if j + 1 < len(body) and _NUMPY_RULE.match(body[j + 1]):
                break  # the next underlined header starts another section
            if m := _NUMPY_ENTRY.match(item.strip()):
                yield from (name.strip() for name in m.group(1).split(","))


def _sphinx(doc: str) -> Iterator[str]:
    for m in _SPHINX_FIELD.finditer(doc):
        # `:param int x:` / `:param dict[str, int] x:`: the name is the last word.
        yield m.group(1).split()[-1]


def documented(doc: str) -> list[str]:
    """Parameter names documented in `doc`, in order, without duplicates or rST escapes."""
    lines = doc.splitlines()
    names = [n.replace("\\", "") for n in (*_google(lines), *_numpy(lines), *_sphinx(doc))]
    return list(dict.fromkeys(names))


def _accepts(node: _Func, name: str) -> bool:
    args = node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    bare = name.lstrip("*")
    if bare in params or bare in {"self", "cls"}:
        return True
    # `*rest`/`**options` are commonly documented under the generic names too.
    if args.vararg is not None and bare in {args.vararg.arg, "args"}:
        return True
    return args.kwarg is not None and bare in {args.kwarg.arg, "kwargs"}


def _functions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, _Func]]:
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            yield from _functions(stmt.body, f"{prefix}{stmt.name}.")
        elif isinstance(stmt, _Func):
            yield f"{prefix}{stmt.name}", stmt
            yield from _functions(stmt.body, f"{prefix}{stmt.name}.")
        else:
            # Definitions under if/try/with/for still are functions with docstrings.
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    yield from _functions(inner, prefix)


def _documented(source: str, label: str) -> list[tuple[str, _Func, str]]:
    found: list[tuple[str, _Func, str]] = []
    for qualname, node in _functions(parse(source, label).body):
        doc = ast.get_docstring(node)
        if doc is not None:
            found.append((qualname, node, doc))
    return found


def _problems(qualname: str, node: _Func, doc: str) -> list[str]:
    return [
        f"{qualname}: documents '{name}', not a parameter"
        for name in documented(doc)
        if not _accepts(node, name)
    ]


def undocumented_mismatches(source: str) -> list[str]:
    """For every function/method with a docstring in `source`, parameters documented in the
    docstring that are not in the signature: one line each, in source order."""
    return [line for entry in _documented(source, "<source>") for line in _problems(*entry)]


def changed_docstring_mismatches(before: str | None, after: str) -> list[str]:
    """Like `undocumented_mismatches(after)`, but only for functions whose docstring differs
    from `before` (or is new there); `before` None means the file is new."""
    old = (
        {(q, doc) for q, _, doc in _documented(before, "<before>")} if before is not None else set()
    )
    return [
        line
        for qualname, node, doc in _documented(after, "<after>")
        if (qualname, doc) not in old
        for line in _problems(qualname, node, doc)
    ]
