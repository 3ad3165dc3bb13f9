"""The YAML of a Glee workflow, read strictly: the safe composer's nodes (anchors and aliases
refused, nesting bounded), keys as plain text and once each, scalars that hold text, and the
line and column of each problem."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode

from harness.base.errors import InvalidInput

if TYPE_CHECKING:  # the marks' types: the C loader's module exists only with libyaml
    from yaml._yaml import Mark as CMark
    from yaml.error import Mark

MAX_NESTING = 64

_NULL = "tag:yaml.org,2002:null"
_SURROGATE = re.compile("[\ud800-\udfff]")

Pos = tuple[int, int]


def pos(node: Node) -> Pos:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Loader(yaml.SafeLoader):
    """The safe composer, refusing anchors and aliases and bounding nesting."""

    depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise Refused(event.start_mark, "anchors and aliases (& and *) are not accepted")
        if isinstance(event, CollectionStartEvent):
            if self.depth >= MAX_NESTING:
                raise Refused(event.start_mark, f"nested deeper than {MAX_NESTING} levels")
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1
        return super().compose_node(parent, index)


class Refused(Exception):
    def __init__(self, mark: Mark | CMark | None, what: str) -> None:
        super().__init__(what)
        self.where = (1, 1) if mark is None else (mark.line + 1, mark.column + 1)
        self.what = what


class _Values(_Loader):
    """As _Loader, for values given on as Python's: a text holding a lone surrogate (a
    double-quoted "\\ud800") is refused, as no file can hold it once written."""

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
        if isinstance(event, ScalarEvent) and (found := _SURROGATE.search(event.value)):
            raise Refused(event.start_mark, f"a lone surrogate {found.group()!r}")
        return super().compose_node(parent, index)


def load(text: str) -> object:
    """A YAML text's value as yaml.safe_load gives it, but with anchors and aliases refused
    (an alias is a reference, so a few lines can stand for a value of any size once it is
    written out), nesting bounded (the composer recurses) and no lone surrogate: else
    yaml.YAMLError, or Refused with the line and column."""
    return yaml.load(text, Loader=_Values)  # the safe loader's, stricter


class Document:
    """A workflow file's text and label, read as YAML: every problem is one InvalidInput line
    `<label>:<line>:<column>: <what>`."""

    def __init__(self, text: str, label: str) -> None:
        self.text, self.label = text, label

    def fail(self, pos: Pos, what: str) -> NoReturn:
        raise InvalidInput(f"{self.label}:{pos[0]}:{pos[1]}: {what}") from None

    def parse(self) -> Node:
        bad = yaml.reader.Reader.NON_PRINTABLE.search(self.text)
        if bad is not None:
            where = _text_pos(self.text, bad.start())
            self.fail(where, f"invalid YAML: character {bad.group()!r} is not accepted")
        loader = _Loader(self.text)
        try:
            node = loader.get_single_node()
        except Refused as exc:
            self.fail(exc.where, exc.what)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = (1, 1) if mark is None else (mark.line + 1, mark.column + 1)
            what = " ".join(filter(None, (exc.context, exc.problem))) or "unreadable"
            self.fail(where, f"invalid YAML: {what}")
        except yaml.YAMLError as exc:
            self.fail((1, 1), f"invalid YAML: {exc}")
        finally:
            loader.dispose()
        if node is None:
            self.fail((1, 1), "empty: a workflow is a mapping (steps:, execution:, ...)")
        return node

    def mapping(
        self, node: MappingNode, allowed: tuple[str, ...], what: str
    ) -> dict[str, tuple[Node, Node]]:
        """Its entries by key: plain text keys, each once, each one `allowed`."""
        found: dict[str, tuple[Node, Node]] = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _NULL:
                self.fail(pos(key), f"a key in {what} is plain text")
            name = self.scalar(key, "a key")
            if name in found:
                self.fail(pos(key), f"{name!r} appears twice in {what}")
            if name not in allowed:
                self.fail(pos(key), f"unknown key {name!r} in {what} ({', '.join(allowed)})")
            found[name] = (key, value)
        return found

    def scalar(self, node: Node, what: str) -> str:
        """The text of a scalar that has some."""
        if not isinstance(node, ScalarNode):
            self.fail(pos(node), f"{what} is text, not a list or a mapping")
        if node.tag == _NULL or not node.value.strip():
            self.fail(pos(node), f"{what} has no value")
        surrogate = _SURROGATE.search(node.value)
        if surrogate is not None:
            self.fail(pos(node), f"{what} holds a lone surrogate {surrogate.group()!r}")
        return str(node.value)

    def choice(self, node: Node, what: str, allowed: tuple[str, ...]) -> str:
        value = self.scalar(node, what)
        if value not in allowed:
            self.fail(pos(node), f"unknown {what} {value!r} ({', '.join(allowed)})")
        return value

    def inner(self, node: ScalarNode, offset: int) -> Pos:
        """Where character `offset` of the scalar's value is, when its source is that value
        as written (plain or quoted on one line, no escapes); else where the scalar starts."""
        start, end = node.start_mark, node.end_mark
        raw = self.text[start.index : end.index]
        if node.style is None and raw == node.value:
            return start.line + 1, start.column + 1 + offset
        if node.style in ("'", '"') and raw[1:-1] == node.value and "\n" not in raw:
            return start.line + 1, start.column + 2 + offset
        return pos(node)


def keys(node: MappingNode) -> Iterator[str]:
    """Every key an inputs mapping has: any name is allowed there."""
    for key, _ in node.value:
        if isinstance(key, ScalarNode):
            yield key.value


def _text_pos(text: str, index: int) -> Pos:
    before = text[:index].replace("\r\n", "\n")
    lines = re.split("[\n\r\x85\u2028\u2029]", before)
    return len(lines), len(lines[-1]) + 1
