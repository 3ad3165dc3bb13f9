"""The Agentfile's lexer: one statement line's tokens (words, quoted strings, commas), read
front to back as names, keywords and paths, each with its line and column."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn, Protocol

KEYWORDS = frozenset(
    {
        "NAME",
        "INPUT",
        "DEFAULT",
        "AGENT",
        "FROM",
        "GOAL",
        "USING",
        "RUN",
        "LOOP",
        "WITHIN",
        "SUPERVISED",
        "HUMAN",
    }
)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


class Failing(Protocol):
    """Whoever reads the tokens: it words a problem at a line and column, and raises."""

    def fail(self, line: int, col: int, what: str) -> NoReturn: ...


@dataclass(frozen=True)
class Token:
    kind: str  # "word", "string" or ","
    text: str
    col: int
    end: int  # the column just after it


@dataclass(frozen=True)
class Ref:
    name: str
    line: int
    col: int


class Tokens:
    """One statement line's tokens, read front to back."""

    def __init__(self, parser: Failing, line: int, text: str) -> None:
        self.parser = parser
        self.line = line
        self.items = list(self._split(text))
        self.at = 0

    def _split(self, text: str) -> Iterator[Token]:
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c.isspace():
                i += 1
            elif c == "#":
                return
            elif c == ",":
                yield Token(",", ",", i + 1, i + 2)
                i += 1
            elif c == '"':
                close = text.find('"', i + 1)
                if close < 0:
                    self.parser.fail(self.line, i + 1, "the string has no closing quote")
                yield Token("string", text[i + 1 : close], i + 1, close + 2)
                i = close + 1
            else:
                j = i
                while j < n and not text[j].isspace() and text[j] not in ',"':
                    j += 1
                yield Token("word", text[i:j], i + 1, j + 1)
                i = j

    def peek(self) -> Token | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def next(self, wanted: str) -> Token:
        token = self.peek()
        if token is None:
            self.parser.fail(self.line, self._end(), f"expected {wanted}")
        self.at += 1
        return token

    def _end(self) -> int:
        return self.items[self.at - 1].end if self.at else 1

    def keyword(self, word: str) -> bool:
        """Take the keyword `word` if it comes next."""
        token = self.peek()
        if token is not None and token.kind == "word" and token.text == word:
            self.at += 1
            return True
        return False

    def expect(self, word: str) -> None:
        token = self.next(word)
        if token.kind != "word" or token.text != word:
            self.parser.fail(self.line, token.col, f"expected {word}, found {token.text!r}")

    def end(self) -> None:
        token = self.peek()
        if token is not None:
            self.parser.fail(self.line, token.col, f"unexpected {token.text!r}")

    def name(self, wanted: str) -> Ref:
        token = self.next(wanted)
        if token.kind == "word" and token.text in KEYWORDS:
            self.parser.fail(self.line, token.col, f"expected {wanted}: {token.text} is a keyword")
        if token.kind != "word" or not _NAME.match(token.text):
            self.parser.fail(
                self.line,
                token.col,
                f"expected {wanted} (a letter, then letters, digits or _), found {token.text!r}",
            )
        return Ref(token.text, self.line, token.col)

    def names(self, wanted: str) -> list[Ref]:
        """`a, b, c`: one name or more, separated by commas."""
        found = [self.name(wanted)]
        while True:
            token = self.peek()
            if token is None or token.kind != ",":
                return found
            self.at += 1
            found.append(self.name(wanted))

    def path(self) -> PathToken:
        token = self.next("a path")
        if token.kind == "," or not token.text:
            self.parser.fail(self.line, token.col, "expected a path")
        return PathToken(token.text, self.line, token.col)


@dataclass(frozen=True)
class PathToken:
    text: str
    line: int
    col: int
