"""The Agentfile's lexer: one statement's tokens (words, strings, commas, `->`), read front to
back as names, keywords and paths, each with its line and column.

A statement is one line, unless a triple-quoted string opens on it: then it runs on to the
line that closes the string, and what follows the closing quotes on that line is still the
statement's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn, Protocol

KEYWORDS = frozenset(
    {
        "NAME",
        "WORKFLOW",
        "VERSION",
        "INPUT",
        "DEFAULT",
        "AGENT",
        "FROM",
        "GOAL",
        "CONVERGE",
        "USING",
        "THEN",
        "RUN",
        "LOOP",
        "WITHIN",
        "REQUIRES",
        "SUPERVISED",
        "UNSUPERVISED",
        "HUMAN",
        "SECURITY",
    }
)
# The Agentfile project's names: a letter, then letters, digits, `_` or `-` (`fetch-all`).
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
NAME_RULE = "a letter, then letters, digits, _ or -"
_BOUND = re.compile(r"(?:[0-9]+|\$[A-Za-z][A-Za-z0-9_]*)\Z")
_TRIPLE = '"""'
# `\"` and its kin in a one-line string, as the Agentfile project reads them; any other
# backslash stays as written.
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


class Failing(Protocol):
    """Whoever reads the tokens: it words a problem at a line and column, and raises."""

    def fail(self, line: int, col: int, what: str) -> NoReturn: ...


@dataclass(frozen=True)
class Token:
    kind: str  # "word", "string", "," or "->"
    text: str
    line: int
    col: int
    end: int  # the column just after it, on `end_line`
    end_line: int = 0
    # A string's content: where its first character is, and, when escapes made it shorter
    # than written, the column of each character (one-line strings only).
    at: tuple[int, int] = (0, 0)
    cols: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Ref:
    name: str
    line: int
    col: int


@dataclass(frozen=True)
class PathToken:
    text: str
    line: int
    col: int


class Tokens:
    """One statement's tokens, read front to back; it starts at `lines[start]`, 0-based,
    and `after` is the index of the line that follows it."""

    def __init__(self, parser: Failing, lines: Sequence[str], start: int) -> None:
        self.parser = parser
        self.lines = lines
        self.line = start + 1
        self.after = start + 1
        self.items = list(self._split(start))
        self.at = 0

    def _split(self, index: int) -> Iterator[Token]:
        text, i = self.lines[index], 0
        while i < len(text):
            c, line = text[i], index + 1
            if c.isspace():
                i += 1
            elif c == "#":
                return
            elif c == ",":
                yield Token(",", ",", line, i + 1, i + 2, line)
                i += 1
            elif text.startswith("->", i):
                yield Token("->", "->", line, i + 1, i + 3, line)
                i += 2
            elif text.startswith(_TRIPLE, i):
                token, index = self._triple(index, i)
                yield token
                text, i = self.lines[index], token.end - 1
                self.after = index + 1
            elif c == '"':
                token = self._string(text, line, i)
                yield token
                i = token.end - 1
            else:
                j = i
                while j < len(text) and not text[j].isspace() and text[j] not in ',"':
                    j += 1
                yield Token("word", text[i:j], line, i + 1, j + 1, line)
                i = j

    def _string(self, text: str, line: int, start: int) -> Token:
        out: list[str] = []
        cols: list[int] = []
        escaped = False
        i = start + 1
        while i < len(text) and text[i] != '"':
            if text[i] == "\\" and i + 1 < len(text):
                escaped = True
                nxt = text[i + 1]
                decoded = _ESCAPES.get(nxt)
                out.append(decoded if decoded is not None else "\\" + nxt)
                cols.extend([i + 1] * (1 if decoded is not None else 2))
                i += 2
            else:
                out.append(text[i])
                cols.append(i + 1)
                i += 1
        if i >= len(text):
            self.parser.fail(line, start + 1, "the string has no closing quote")
        return Token(
            "string",
            "".join(out),
            line,
            start + 1,
            i + 2,
            line,
            (line, start + 2),
            tuple(cols) if escaped else None,
        )

    def _triple(self, index: int, start: int) -> tuple[Token, int]:
        """The triple-quoted string opening at `start` of line `index`, and the index of
        the line that closes it. A newline just after the opening quotes and one just
        before the closing ones are not the string's (the project's rule)."""
        line, first = index, start + 3
        chunks: list[str] = []
        at = (index + 1, first + 1)
        text = self.lines[index]
        if not text[first:].strip() and index + 1 < len(self.lines):
            # The usual form: `GOAL g """` then the text from the next line.
            line, first, at = index + 1, 0, (index + 2, 1)
        while True:
            text = self.lines[line]
            close = text.find(_TRIPLE, first)
            if close >= 0:
                chunks.append(text[first:close])
                break
            chunks.append(text[first:])
            line, first = line + 1, 0
            if line >= len(self.lines):
                self.parser.fail(index + 1, start + 1, 'the """ string has no closing """')
        if len(chunks) > 1 and not chunks[-1].strip():
            chunks.pop()
        body = "\n".join(chunks)
        token = Token("string", body, index + 1, start + 1, close + 4, line + 1, at)
        return token, line

    def peek(self) -> Token | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def next(self, wanted: str) -> Token:
        token = self.peek()
        if token is None:
            line, col = self._end()
            self.parser.fail(line, col, f"expected {wanted}")
        self.at += 1
        return token

    def _end(self) -> tuple[int, int]:
        if not self.at:
            return self.line, 1
        last = self.items[self.at - 1]
        return last.end_line, last.end

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
            self.parser.fail(token.line, token.col, f"expected {word}, found {token.text!r}")

    def end(self) -> None:
        token = self.peek()
        if token is not None:
            self.parser.fail(token.line, token.col, f"unexpected {token.text!r}")

    def name(self, wanted: str) -> Ref:
        token = self.next(wanted)
        if token.kind == "word" and token.text in KEYWORDS:
            self.parser.fail(token.line, token.col, f"expected {wanted}: {token.text} is a keyword")
        if token.kind != "word" or not NAME.match(token.text):
            self.parser.fail(
                token.line,
                token.col,
                f"expected {wanted} ({NAME_RULE}), found {token.text!r}",
            )
        return Ref(token.text, token.line, token.col)

    def names(self, wanted: str, also: str = "") -> list[Ref]:
        """`a, b, c`: one name or more, separated by commas (or by the keyword `also`)."""
        found = [self.name(wanted)]
        while True:
            token = self.peek()
            if token is None or not (
                token.kind == "," or (also and token.kind == "word" and token.text == also)
            ):
                return found
            self.at += 1
            found.append(self.name(wanted))

    def outputs(self) -> list[str]:
        """`-> a, b`, if it comes next: the fields a goal or an agent declares it produces."""
        arrow = self.peek()
        if arrow is None or arrow.kind != "->":
            return []
        self.at += 1
        return [ref.name for ref in self.names("an output name")]

    def mode(self) -> bool | str | None:
        """A statement's own `SUPERVISED [HUMAN]` (True, "human") or `UNSUPERVISED` (False),
        if it comes next."""
        if self.keyword("SUPERVISED"):
            return "human" if self.keyword("HUMAN") else True
        if self.keyword("UNSUPERVISED"):
            return False
        return None

    def within(self) -> Ref:
        """`WITHIN n` or `WITHIN $input`: the token of the bound."""
        self.expect("WITHIN")
        bound = self.next("a number or a $variable")
        if bound.kind != "word" or not _BOUND.match(bound.text):
            self.parser.fail(bound.line, bound.col, "WITHIN needs a number or a $variable")
        return Ref(bound.text, bound.line, bound.col)

    def path(self) -> PathToken:
        token = self.next("a path")
        if token.kind in (",", "->") or not token.text:
            self.parser.fail(token.line, token.col, "expected a path")
        return PathToken(token.text, token.line, token.col)
