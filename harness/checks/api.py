"""The public API of Python source as a set of signature strings, for "public API unchanged"."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator, Mapping

# Decorators that change how a callable is reached or called; others (caching, logging,
# `functools.wraps`, ...) are implementation detail and may change in a refactor.
_SHAPE_DECORATORS = frozenset(
    {"staticmethod", "classmethod", "property", "cached_property", "abstractproperty"}
)
_ACCESSORS = frozenset({"setter", "getter", "deleter"})

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def parse(source: str, module: str) -> ast.Module:
    """Parse `source`, naming `module` and the line in the ValueError when it is not Python."""
    try:
        # An invalid escape (`\*args` in a plain docstring) only warns; under a strict warning
        # filter it would become an error, yet the signatures do not depend on it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            return ast.parse(source, filename=module)
    except SyntaxError as exc:
        # A module that does not parse has no comparable API; the caller must not guess.
        raise ValueError(f"{module}:{exc.lineno or 0}: cannot parse: {exc.msg}") from None


def _is_public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _flat(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of `body`, descending into if/try so conditional definitions count too."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _flat(stmt.body)
            yield from _flat(stmt.orelse)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            for part in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from _flat(part)
            for handler in stmt.handlers:
                yield from _flat(handler.body)
        else:
            yield stmt


def _dunder_all(tree: ast.Module) -> frozenset[str] | None:
    """`__all__` when it is a literal list/tuple of strings; otherwise None (not knowable)."""
    found: frozenset[str] | None = None
    for stmt in _flat(tree.body):
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        elif isinstance(stmt, ast.AugAssign):
            target = stmt.target
        if not (isinstance(target, ast.Name) and target.id == "__all__"):
            continue
        if not isinstance(value, ast.List | ast.Tuple):
            return None
        names = [elt.value for elt in value.elts if isinstance(elt, ast.Constant)]
        if len(names) != len(value.elts) or not all(isinstance(n, str) for n in names):
            return None
        found = frozenset(str(n) for n in names)
    return found


def _shape_decorators(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    kept: list[str] = []
    for deco in node.decorator_list:
        last = deco.attr if isinstance(deco, ast.Attribute) else getattr(deco, "id", None)
        accessor = isinstance(deco, ast.Attribute) and deco.attr in _ACCESSORS
        if last in _SHAPE_DECORATORS or accessor:
            kept.append(f"@{ast.unparse(deco)} ")
    return "".join(kept)


def _signature(node: _Def, qualname: str) -> str:
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
        return f"class {qualname}({', '.join(bases)})" if bases else f"class {qualname}"
    kind = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    # ast.unparse of `arguments` spells every kind: `/`, `*args`, bare `*`, defaults, `**kw`.
    text = f"{_shape_decorators(node)}{kind} {qualname}({ast.unparse(node.args)})"
    return f"{text} -> {ast.unparse(node.returns)}" if node.returns is not None else text


def _walk(
    body: list[ast.stmt], prefix: str, wanted: frozenset[str] | None
) -> Iterator[tuple[str, str]]:
    for stmt in _flat(body):
        if not isinstance(stmt, _Def):
            continue
        public = stmt.name in wanted if wanted is not None else _is_public(stmt.name)
        if not public:
            continue
        qualname = f"{prefix}{stmt.name}"
        yield qualname, _signature(stmt, qualname)
        # Only class bodies hold API; functions nested in functions are implementation.
        if isinstance(stmt, ast.ClassDef):
            yield from _walk(stmt.body, f"{qualname}.", None)


def _qualified(source: str, module: str) -> dict[str, str]:
    """{signature: qualified name} of the public definitions in `source`."""
    tree = parse(source, module)
    return {f"{module}: {sig}": name for name, sig in _walk(tree.body, "", _dunder_all(tree))}


def signatures(source: str, module: str) -> frozenset[str]:
    """The public signature set of one Python module's source text."""
    return frozenset(_qualified(source, module))


def api_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """One line per public signature removed or added between `before` and `after`.

    Both map path to source; a path on one side only is a module removed or added.
    Sorted by path, then qualified name, removed before added, so a changed definition
    reads as a removed line followed by its added replacement.
    """
    lines: list[tuple[str, str, int, str]] = []
    for path in sorted(set(before) | set(after)):
        # A module's own appearance or disappearance is an API change even when it is empty.
        old = _qualified(before[path], path) if path in before else {}
        new = _qualified(after[path], path) if path in after else {}
        if path not in after:
            old[f"{path}: module"] = ""
        if path not in before:
            new[f"{path}: module"] = ""
        lines += [(path, old[sig], 0, sig) for sig in old.keys() - new.keys()]
        lines += [(path, new[sig], 1, sig) for sig in new.keys() - old.keys()]
    return [f"{('removed', 'added')[status]}: {sig}" for _, _, status, sig in sorted(lines)]
