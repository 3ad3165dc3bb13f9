"""A scripted model API on 127.0.0.1 that the real claude, codex, gemini, opencode and copilot
CLIs accept.

A test gives a list of steps; each main-conversation request the CLI makes consumes the next
one, rendered in the API the request came in on: Anthropic Messages (`POST /v1/messages`,
claude), OpenAI Responses (`POST /v1/responses`, codex), Gemini (`POST /v1beta/models/M:
generateContent` / `:streamGenerateContent`, gemini), OpenAI Chat Completions (`POST
/v1/chat/completions`, opencode and copilot). Side requests (gemini's router and
next-speaker checks, codex's model list or WebSocket attempt, any tool-less claude or
opencode request such as a title or token count) get a harmless answer and consume nothing,
so a script reads as what the model does, not as what each CLI happens to ask.

    with ModelAPI([edit("src/calc.py", "return 1", "return 2"), answer({"notes": []})]) as api:
        run the CLI against api.url ...
        assert api.remaining() == [] and api.problems == []

What each step becomes (observed with claude-code 2.1.332, codex 0.169.0, gemini-cli 0.61.0,
opencode 1.18.33, copilot 1.0.102):
- edit    claude: `Read` of the absolute path, then (next request) `Edit`; codex: the custom
          tool `exec` running `await tools.apply_patch("*** Begin Patch ...")` with the path
          relative to the cwd and whole lines (read from the file, so indentation is kept);
          gemini: `replace` with an absolute `file_path` (it needs no read_file first);
          opencode: `read` of the absolute path, then (next request) `edit` with
          `filePath`, `oldString`, `newString`; copilot (told apart by its `view` tool):
          `edit` with an absolute `path`, `old_str`, `new_str`.
          The cwd is the one the CLI tells the model in the request.
- answer  claude: a `StructuredOutput` tool call (the run ends there; should the CLI ask
          once more, a plain closing turn follows, unscripted); codex: an assistant message,
          json.dumps(obj); gemini: the JSON in a ```json block; opencode and copilot:
          json.dumps(obj) as the reply's text.
- call    a raw tool call; for codex a str input makes a freeform (custom) tool call, e.g.
          `call("exec", "<javascript>")`, a dict a function call.
- error   the API's own error body and status, `times` requests in a row ("always": all).
- cut     a stream broken mid-answer (a chunked body without its end), or for a request
          that is not streamed, half a JSON body.
- hang    no answer until the server stops; `hang(headers=True)` sends 200 and the stream's
          headers first (codex's idle timeout only counts from there).

Every answer reports fixed usage (MAIN_USAGE, or SIDE_USAGE for side calls) in the API's own
fields. Standard library only, so it runs wherever the tests run.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import re
import socket
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

# Fixed usage per answer, so a test can check what a CLI reports back: a main-conversation
# answer reports MAIN_USAGE, a side call SIDE_USAGE (different, to tell them apart in a sum).
MAIN_USAGE = (1000, 100)  # (input tokens, output tokens)
SIDE_USAGE = (10, 5)
# "Upgrade Required": codex (with supports_websockets) then falls back to HTTP at once and
# silently; a 404 or 400 instead ends its turn.
_WS_REFUSAL = 426


# -- steps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    path: str  # relative to the CLI's working directory
    old: str
    new: str


@dataclass(frozen=True)
class Answer:
    obj: Any


@dataclass(frozen=True)
class Call:
    name: str
    input: Any  # a dict; for codex a str means a freeform (custom) tool such as `exec`


@dataclass(frozen=True)
class Error:
    status: int
    retry_after: float | None = None
    times: int | Literal["always"] = 1
    body: Any = None  # verbatim body (dict -> JSON, str/bytes as is) instead of the API's shape


@dataclass(frozen=True)
class Cut:
    pass


@dataclass(frozen=True)
class Hang:
    headers: bool = False  # send 200 and the stream's headers first, then nothing


Step = Edit | Answer | Call | Error | Cut | Hang


def edit(path: str, old: str, new: str) -> Edit:
    return Edit(path, old, new)


def answer(obj: Any) -> Answer:
    return Answer(obj)


def call(name: str, input: Any) -> Call:
    return Call(name, input)


def error(
    status: int,
    retry_after: float | None = None,
    times: int | Literal["always"] = 1,
    body: Any = None,
) -> Error:
    if times != "always" and (not isinstance(times, int) or times < 1):
        raise ValueError(f"times must be a positive int or 'always', not {times!r}")
    return Error(status, retry_after, times, body)


def cut() -> Cut:
    return Cut()


def hang(headers: bool = False) -> Hang:
    return Hang(headers)


# -- what a model turn holds, before an API renders it ---------------------------------------


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: Any
    id: str


@dataclass(frozen=True)
class Turn:
    text: str = ""
    tools: tuple[ToolUse, ...] = ()


class ScriptError(Exception):
    """A request the script cannot answer: the server replies 500 with this message."""


# Error type words per status, in each API's own vocabulary.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_CODES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_CWD_PATTERNS = (
    re.compile(r"Primary working directory: *(\S[^\n]*)"),  # claude, system text
    re.compile(r"<cwd>([^<]+)</cwd>"),  # codex, environment context
    re.compile(r"\*\*Workspace Directories:\*\*\s*\n\s*- *(\S[^\n]*)"),  # gemini
    re.compile(r"<env>\s*Working directory: *(\S[^\n]*)"),  # opencode, system text
    re.compile(r"\* Current working directory: *(\S[^\n]*)"),  # copilot, system text
)


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a parsed JSON value, depth first, in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def find_cwd(body: Any) -> str:
    """The CLI's working directory, as the CLI told the model in its prompt."""
    for text in _strings(body):
        for pattern in _CWD_PATTERNS:
            found = pattern.search(text)
            if found:
                return found.group(1).strip()
    raise ScriptError("modelapi: no working directory in the request (cannot place an edit)")


def codex_patch(cwd: str, step: Edit) -> str:
    """An apply_patch envelope for the edit, in whole lines as apply_patch needs them.

    apply_patch replaces whole lines: `-return 1` would match `    return 1` loosely but put
    back `return 2` unindented. So, as a model that has read the file would, it reads the
    file to widen `old` to the lines holding it; unreadable, it uses old/new as given.
    """
    try:
        text = (Path(cwd) / step.path).read_text()
    except OSError:
        text = ""
    at = text.find(step.old) if step.old else -1
    if at < 0:
        old_lines, new_lines = step.old.splitlines(), step.new.splitlines()
    else:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at + len(step.old))
        end = len(text) if end < 0 else end
        block = text[start:end]
        old_lines = block.splitlines()
        new_lines = block.replace(step.old, step.new, 1).splitlines()
    body = "".join(f"-{line}\n" for line in old_lines) + "".join(f"+{line}\n" for line in new_lines)
    return f"*** Begin Patch\n*** Update File: {step.path}\n@@\n{body}*** End Patch\n"


# -- the APIs ----------------------------------------------------------------------------------


class _API:
    """What differs between the three wire protocols; the server holds the script."""

    name = ""

    def is_main(self, method: str, path: str, body: Any) -> bool:
        raise NotImplementedError

    def tools(self, body: Any) -> list[str]:
        raise NotImplementedError

    def phases(self, step: Step, body: Any, ids: Iterator[str]) -> list[Turn]:
        """The model turns a step takes in this API, one per request."""
        if isinstance(step, Call):
            return [Turn(tools=(ToolUse(step.name, step.input, next(ids)),))]
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def side(self, h: _Handler, path: str, body: Any) -> None:
        raise NotImplementedError

    def reply(self, h: _Handler, body: Any, turn: Turn, usage: tuple[int, int]) -> None:
        raise NotImplementedError

    def cut(self, h: _Handler, body: Any) -> None:
        raise NotImplementedError

    def streamed(self, h: _Handler, body: Any) -> bool:
        return isinstance(body, dict) and bool(body.get("stream"))


class _Anthropic(_API):
    name = "anthropic"

    def is_main(self, method: str, path: str, body: Any) -> bool:
        # Title, quota and summary calls come without tools; the agent loop always has them.
        return path == "/v1/messages" and isinstance(body, dict) and bool(body.get("tools"))

    def tools(self, body: Any) -> list[str]:
        return sorted(t.get("name", "") for t in body.get("tools") or [])

    def phases(self, step: Step, body: Any, ids: Iterator[str]) -> list[Turn]:
        if isinstance(step, Edit):
            path = str(Path(find_cwd(body)) / step.path)
            # Claude Code refuses an Edit of a file it has not Read in this session.
            read = ToolUse("Read", {"file_path": path}, next(ids))
            change = {
                "file_path": path,
                "old_string": step.old,
                "new_string": step.new,
                "replace_all": False,
            }
            return [Turn(tools=(read,)), Turn(tools=(ToolUse("Edit", change, next(ids)),))]
        if isinstance(step, Answer):
            return [Turn(tools=(ToolUse("StructuredOutput", step.obj, next(ids)),))]
        return super().phases(step, body, ids)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def side(self, h: _Handler, path: str, body: Any) -> None:
        if path.endswith("/count_tokens"):
            h.send_json(200, {"input_tokens": SIDE_USAGE[0]})
        elif path == "/v1/messages":
            self.reply(h, body, Turn(text="Scripted side answer"), SIDE_USAGE)
        else:
            h.send_json(404, self.error_body(404, f"modelapi: no such endpoint {path}"))

    def _message(self, body: Any) -> dict[str, Any]:
        return {
            "id": f"msg_modelapi_{next(_COUNTER):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
        }

    @staticmethod
    def _usage(inp: int, out: int) -> dict[str, Any]:
        return {
            "input_tokens": inp,
            "output_tokens": out,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }

    def reply(self, h: _Handler, body: Any, turn: Turn, usage: tuple[int, int]) -> None:
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for tool in turn.tools:
            blocks.append(
                {"type": "tool_use", "id": tool.id, "name": tool.name, "input": tool.input}
            )
        stop = "tool_use" if turn.tools else "end_turn"
        message = self._message(body)
        if not body.get("stream"):
            h.send_json(
                200,
                {**message, "content": blocks, "stop_reason": stop, "usage": self._usage(*usage)},
            )
            return
        with h.stream("text/event-stream") as send:
            send(
                _sse(
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {**message, "usage": self._usage(usage[0], 1)},
                    },
                )
            )
            for i, block in enumerate(blocks):
                start: dict[str, Any]
                if block["type"] == "text":
                    start = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": block["text"]}
                else:
                    start = {**block, "input": {}}
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                send(
                    _sse(
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": start},
                    )
                )
                send(
                    _sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": delta},
                    )
                )
                send(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
            send(
                _sse(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": self._usage(*usage),
                    },
                )
            )
            send(_sse("message_stop", {"type": "message_stop"}))

    def cut(self, h: _Handler, body: Any) -> None:
        message = self._message(body)
        send = h.open_stream("text/event-stream")
        send(
            _sse(
                "message_start",
                {"type": "message_start", "message": {**message, "usage": self._usage(1000, 1)}},
            )
        )
        send(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        send(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "I will now cha"},
                },
            )
        )
        h.drop()


class _OpenAI(_API):
    name = "openai"

    def is_main(self, method: str, path: str, body: Any) -> bool:
        return method == "POST" and path == "/v1/responses"

    def tools(self, body: Any) -> list[str]:
        names: list[str] = []

        def walk(tools: list[Any], namespace: str) -> None:
            for tool in tools:
                if not isinstance(tool, dict):
                    continue
                if tool.get("type") == "namespace":
                    inner = tool.get("name", "")
                    walk(tool.get("tools") or [], "" if inner == "functions" else f"{inner}.")
                    continue
                name = tool.get("name") or tool.get("type", "")
                names.append(namespace + name)
                # `exec` is a JavaScript tool whose description declares the nested tools
                # the script may call (`tools.apply_patch(...)`): those are offered too.
                for nested in re.findall(
                    r"declare const tools: \{\s*(\w+)\(", tool.get("description") or ""
                ):
                    names.append(f"tools.{nested}")

        walk(body.get("tools") or [], "")
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "additional_tools":
                walk(item.get("tools") or [], "")
        return sorted(set(names))

    def phases(self, step: Step, body: Any, ids: Iterator[str]) -> list[Turn]:
        if isinstance(step, Edit):
            patch = codex_patch(find_cwd(body), step)
            script = f"const r = await tools.apply_patch({json.dumps(patch)});\ntext(r);\n"
            return [Turn(tools=(ToolUse("exec", script, next(ids)),))]
        if isinstance(step, Answer):
            return [Turn(text=json.dumps(step.obj))]
        return super().phases(step, body, ids)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = _OPENAI_CODES.get(status, ("server_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def side(self, h: _Handler, path: str, body: Any) -> None:
        if path == "/v1/models":
            # Both shapes: OpenAI's `data` list and the `models` list codex's own catalogue
            # uses; empty, so codex keeps its built-in model metadata.
            h.send_json(200, {"object": "list", "data": [], "models": []})
        elif h.headers.get("upgrade", "").lower() == "websocket":
            # Refused plainly, so codex drops to HTTP streaming at once.
            h.send_json(_WS_REFUSAL, self.error_body(_WS_REFUSAL, "modelapi: no WebSocket here"))
        else:
            h.send_json(404, self.error_body(404, f"modelapi: no such endpoint {path}"))

    @staticmethod
    def _usage(inp: int, out: int) -> dict[str, Any]:
        return {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + out,
        }

    def _response(self, body: Any, status: str) -> dict[str, Any]:
        return {
            "id": f"resp_modelapi_{next(_COUNTER):04d}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": body.get("model", "gpt"),
            "output": [],
        }

    def _items(self, turn: Turn) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if turn.text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_modelapi_{next(_COUNTER):04d}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        for tool in turn.tools:
            if isinstance(tool.input, str):  # freeform tool such as codex's `exec`
                items.append(
                    {
                        "type": "custom_tool_call",
                        "id": f"ctc_{tool.id}",
                        "call_id": tool.id,
                        "name": tool.name,
                        "input": tool.input,
                        "status": "completed",
                    }
                )
            else:
                items.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{tool.id}",
                        "call_id": tool.id,
                        "name": tool.name,
                        "arguments": json.dumps(tool.input),
                        "status": "completed",
                    }
                )
        return items

    def reply(self, h: _Handler, body: Any, turn: Turn, usage: tuple[int, int]) -> None:
        items = self._items(turn)
        response = self._response(body, "in_progress")
        done = {**response, "status": "completed", "output": items, "usage": self._usage(*usage)}
        if not body.get("stream"):
            h.send_json(200, done)
            return
        seq = itertools.count()

        def event(kind: str, **data: Any) -> bytes:
            return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

        with h.stream("text/event-stream") as send:
            send(event("response.created", response=response))
            for index, item in enumerate(items):
                if item["type"] == "message":
                    text = item["content"][0]["text"]
                    empty = {**item, "status": "in_progress", "content": []}
                    send(event("response.output_item.added", output_index=index, item=empty))
                    part = {"type": "output_text", "text": "", "annotations": []}
                    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
                    send(event("response.content_part.added", **where, part=part))
                    send(event("response.output_text.delta", **where, delta=text))
                    send(event("response.output_text.done", **where, text=text))
                    send(event("response.content_part.done", **where, part={**part, "text": text}))
                else:
                    send(event("response.output_item.added", output_index=index, item=item))
                send(event("response.output_item.done", output_index=index, item=item))
            send(event("response.completed", response=done))

    def cut(self, h: _Handler, body: Any) -> None:
        send = h.open_stream("text/event-stream")
        send(
            _sse(
                "response.created",
                {"type": "response.created", "response": self._response(body, "in_progress")},
            )
        )
        item = {
            "type": "message",
            "id": "msg_modelapi_cut",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        send(
            _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            )
        )
        send(
            _sse(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_modelapi_cut",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "I will now cha",
                },
            )
        )
        h.drop()


class _Gemini(_API):
    name = "gemini"

    def is_main(self, method: str, path: str, body: Any) -> bool:
        # The router and next-speaker checks are tool-less generateContent calls.
        return (
            isinstance(body, dict)
            and any(t.get("functionDeclarations") for t in body.get("tools") or [])
            and (path.endswith(":generateContent") or path.endswith(":streamGenerateContent"))
        )

    def tools(self, body: Any) -> list[str]:
        return sorted(
            d.get("name", "")
            for t in body.get("tools") or []
            for d in t.get("functionDeclarations") or []
        )

    def phases(self, step: Step, body: Any, ids: Iterator[str]) -> list[Turn]:
        if isinstance(step, Edit):
            change = {
                "file_path": str(Path(find_cwd(body)) / step.path),
                "old_string": step.old,
                "new_string": step.new,
                "instruction": f"Replace {step.old!r} with {step.new!r} in {step.path}.",
            }
            return [Turn(tools=(ToolUse("replace", change, next(ids)),))]
        if isinstance(step, Answer):
            return [Turn(text="```json\n" + json.dumps(step.obj) + "\n```")]
        return super().phases(step, body, ids)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _GOOGLE_STATUS.get(status, "UNKNOWN"),
            }
        }

    def streamed(self, h: _Handler, body: Any) -> bool:
        return ":streamGenerateContent" in h.bare_path

    @staticmethod
    def _model(path: str) -> str:
        return path.rsplit("/", 1)[-1].split(":", 1)[0]

    def side(self, h: _Handler, path: str, body: Any) -> None:
        if ":generateContent" in path or ":streamGenerateContent" in path:
            config = (body or {}).get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            text = json.dumps(_fill(schema)) if schema else "Scripted side answer"
            self.reply(h, body, Turn(text=text), SIDE_USAGE, model=self._model(path))
        elif path.endswith(":countTokens"):
            h.send_json(200, {"totalTokens": SIDE_USAGE[0]})
        else:
            h.send_json(404, self.error_body(404, f"modelapi: no such endpoint {path}"))

    @staticmethod
    def _usage(inp: int, out: int) -> dict[str, Any]:
        return {"promptTokenCount": inp, "candidatesTokenCount": out, "totalTokenCount": inp + out}

    def reply(
        self,
        h: _Handler,
        body: Any,
        turn: Turn,
        usage: tuple[int, int],
        model: str | None = None,
    ) -> None:
        model = model or self._model(h.bare_path)
        parts: list[dict[str, Any]] = []
        if turn.text:
            parts.append({"text": turn.text})
        for tool in turn.tools:
            parts.append({"functionCall": {"name": tool.name, "args": tool.input, "id": tool.id}})
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": self._usage(*usage),
            "modelVersion": model,
            "responseId": f"modelapi-{next(_COUNTER):04d}",
        }
        if ":streamGenerateContent" not in h.bare_path:
            h.send_json(200, chunk)
            return
        with h.stream("text/event-stream") as send:
            send(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n")

    def cut(self, h: _Handler, body: Any) -> None:
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "I will now cha"}]}, "index": 0}
            ],
            "modelVersion": self._model(h.bare_path),
        }
        send = h.open_stream("text/event-stream")
        send(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n")
        h.drop()


class _Chat(_API):
    """OpenAI Chat Completions (`POST /v1/chat/completions`), as opencode speaks it through
    its OpenAI-compatible provider and copilot through its own (BYOK): streamed
    `chat.completion.chunk`s, each a `choices[0].delta` of content or tool_calls, a final
    chunk with `usage` when the request asks for it (`stream_options.include_usage`), then
    `data: [DONE]`."""

    name = "chat"

    def is_main(self, method: str, path: str, body: Any) -> bool:
        # opencode's title request is tool-less: a side call.
        return (
            method == "POST"
            and path == "/v1/chat/completions"
            and isinstance(body, dict)
            and bool(body.get("tools"))
        )

    def tools(self, body: Any) -> list[str]:
        return sorted(
            str((t.get("function") or {}).get("name", ""))
            for t in body.get("tools") or []
            if isinstance(t, dict)
        )

    def phases(self, step: Step, body: Any, ids: Iterator[str]) -> list[Turn]:
        if isinstance(step, Edit) and "view" in self.tools(body):
            # copilot: `edit` with an absolute path, no view needed first.
            path = str(Path(find_cwd(body)) / step.path)
            change = {"path": path, "old_str": step.old, "new_str": step.new}
            return [Turn(tools=(ToolUse("edit", change, next(ids)),))]
        if isinstance(step, Edit):
            # opencode's edit refuses a file not read first in the session.
            path = str(Path(find_cwd(body)) / step.path)
            change = {"filePath": path, "oldString": step.old, "newString": step.new}
            return [
                Turn(tools=(ToolUse("read", {"filePath": path}, next(ids)),)),
                Turn(tools=(ToolUse("edit", change, next(ids)),)),
            ]
        if isinstance(step, Answer):
            return [Turn(text=json.dumps(step.obj))]
        return super().phases(step, body, ids)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return _APIS["openai"].error_body(status, message)

    def side(self, h: _Handler, path: str, body: Any) -> None:
        if path == "/v1/chat/completions":
            self.reply(h, body, Turn(text="Scripted side answer"), SIDE_USAGE)
        elif path == "/v1/models":
            h.send_json(200, {"object": "list", "data": []})
        else:
            h.send_json(404, self.error_body(404, f"modelapi: no such endpoint {path}"))

    @staticmethod
    def _usage(inp: int, out: int) -> dict[str, Any]:
        return {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}

    @staticmethod
    def _chunk(body: Any, choices: list[dict[str, Any]], **more: Any) -> bytes:
        doc = {
            "id": "chatcmpl-modelapi",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": (body or {}).get("model", "gpt"),
            "choices": choices,
            **more,
        }
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    def reply(self, h: _Handler, body: Any, turn: Turn, usage: tuple[int, int]) -> None:
        calls = [
            {
                "id": tool.id,
                "type": "function",
                "function": {"name": tool.name, "arguments": json.dumps(tool.input)},
            }
            for tool in turn.tools
        ]
        finish = "tool_calls" if calls else "stop"
        if not self.streamed(h, body):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if calls:
                message["tool_calls"] = calls
            h.send_json(
                200,
                {
                    "id": "chatcmpl-modelapi",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "gpt"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": self._usage(*usage),
                },
            )
            return
        with h.stream("text/event-stream") as send:
            first = (
                {"role": "assistant", "content": turn.text} if turn.text else {"role": "assistant"}
            )
            send(self._chunk(body, [{"index": 0, "delta": first, "finish_reason": None}]))
            for index, tool in enumerate(calls):
                delta = {"tool_calls": [{"index": index, **tool}]}
                send(self._chunk(body, [{"index": 0, "delta": delta, "finish_reason": None}]))
            send(self._chunk(body, [{"index": 0, "delta": {}, "finish_reason": finish}]))
            if (body.get("stream_options") or {}).get("include_usage"):
                send(self._chunk(body, [], usage=self._usage(*usage)))
            send(b"data: [DONE]\n\n")

    def cut(self, h: _Handler, body: Any) -> None:
        send = h.open_stream("text/event-stream")
        delta = {"role": "assistant", "content": "I will now cha"}
        send(self._chunk(body, [{"index": 0, "delta": delta, "finish_reason": None}]))
        h.drop()


def _fill(schema: Any) -> Any:
    """A value of a side call's response schema: the first enum value, 1, "scripted", ...

    Gemini's side calls (router, next-speaker check) each ask for JSON of a schema; the first
    enum value and score 1 are their harmless answers ("user" speaks next, trivial task).
    """
    if not isinstance(schema, dict):
        return "scripted"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {k: _fill(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return False
    return "scripted"


_COUNTER = itertools.count(1)
_APIS: dict[str, _API] = {
    "anthropic": _Anthropic(),
    "openai": _OpenAI(),
    "gemini": _Gemini(),
    "chat": _Chat(),
}


def _api_for(path: str) -> _API | None:
    if path.startswith("/v1/messages"):
        return _APIS["anthropic"]
    if path.startswith("/v1beta/"):
        return _APIS["gemini"]
    if path.startswith("/v1/chat/"):
        return _APIS["chat"]
    if path.startswith("/v1/"):
        return _APIS["openai"]
    return None


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


# -- the server --------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a hung handler must never keep the test process alive
    allow_reuse_address = True
    api: ModelAPI


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams a cut can break
    server: _Server
    bare_path = ""

    def setup(self) -> None:
        super().setup()
        self.server.api._opened(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.api._closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the requests are logged in api.requests; stderr stays quiet for pytest

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("content-length") or 0))
        coding = self.headers.get("content-encoding", "").lower()
        if coding == "gzip":
            data = gzip.decompress(data)
        elif coding == "deflate":
            data = zlib.decompress(data)
        return data

    def _serve(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.bare_path = urlsplit(self.path).path
        self.server.api._handle(self, body)

    # -- replies, used by the API renderers --

    def send_json(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        data = (
            doc
            if isinstance(doc, bytes)
            else (doc.encode() if isinstance(doc, str) else json.dumps(doc).encode())
        )
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def open_stream(self, content_type: str) -> Any:
        """Start a chunked 200 reply; the returned function sends one chunk."""
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def send(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        return send

    @contextlib.contextmanager
    def stream(self, content_type: str) -> Iterator[Any]:
        send = self.open_stream(content_type)
        yield send
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def partial_json(self) -> None:
        """Half of a JSON body promised whole by its content-length, then a closed socket."""
        data = json.dumps({"id": "cut", "content": [{"type": "text", "text": "I will now"}]})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2].encode())
        self.drop()

    def drop(self) -> None:
        """Close the connection mid-reply: no final chunk, so the client sees a broken body."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)


@dataclass
class _State:
    index: int = 0  # the step being played
    phase: int = 0  # how many of its requests were answered
    plan: list[Turn] | None = None  # its turns in the API playing it
    error_left: int | None = None
    followup: str | None = None  # claude: a StructuredOutput id awaiting its closing turn
    ids: Iterator[str] = field(
        default_factory=lambda: (f"call_{n:03d}" for n in itertools.count(1))
    )


class ModelAPI:
    """The scripted server; a context manager that starts and stops it."""

    def __init__(self, steps: Sequence[Step], host: str = "127.0.0.1") -> None:
        self.steps: list[Step] = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.problems: list[str] = []  # script errors the server answered with a 500
        self.url = ""
        self._host = host
        self._lock = threading.Lock()
        self._state = _State()
        self._mains: list[int] = []  # indexes in self.requests of main-conversation turns
        self._last_main: dict[str, Any] | None = None
        self._last_api: _API | None = None
        self._stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> ModelAPI:
        self._server = _Server((self._host, 0), _Handler)
        self._server.api = self
        port = self._server.server_address[1]
        self.url = f"http://{self._host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hung handlers
        if self._server is None:
            return
        self._server.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # idle keep-alive connections would otherwise linger
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> ModelAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.add(conn)

    def _closed(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)

    # -- what tests look at --

    def remaining(self) -> list[Step]:
        with self._lock:
            return self.steps[self._state.index :]

    def tools_offered(self) -> list[str]:
        with self._lock:
            if self._last_main is None or self._last_api is None:
                return []
            return self._last_api.tools(self._last_main)

    def main_requests(self) -> list[dict[str, Any]]:
        """The logged requests that were main-conversation turns, the ones the script plays."""
        with self._lock:
            return [self.requests[i] for i in self._mains]

    # -- serving --

    def _handle(self, h: _Handler, body: Any) -> None:
        path = h.bare_path
        api = _api_for(path)
        main = api is not None and api.is_main(h.command, path, body)
        entry = {
            "method": h.command,
            "path": h.path,
            "headers": {k.lower(): v for k, v in h.headers.items()},
            "body": body,
        }
        with self._lock:
            self.requests.append(entry)
            if main:
                self._mains.append(len(self.requests) - 1)
        if api is None:
            h.send_json(404, {"error": {"message": f"modelapi: no API at {path}"}})
            return
        if not main:
            api.side(h, path, body)
            return
        try:
            with self._lock:
                self._last_main, self._last_api = body, api
                action = self._next(api, body)
        except ScriptError as e:
            with self._lock:
                self.problems.append(str(e))
            h.send_json(500, api.error_body(500, str(e)))
            return
        if isinstance(action, Turn):
            api.reply(h, body, action, MAIN_USAGE)
        elif isinstance(action, Error):
            self._error(h, api, action)
        elif isinstance(action, Cut):
            if api.streamed(h, body):
                api.cut(h, body)
            else:
                h.partial_json()
        elif isinstance(action, Hang):
            if action.headers:
                h.open_stream("text/event-stream")
            self._stopping.wait()
            h.drop()

    def _next(self, api: _API, body: Any) -> Turn | Error | Cut | Hang:
        """What this main request gets; advances the script. Called under the lock."""
        s = self._state
        if s.followup is not None:
            answered = s.followup in json.dumps((body.get("messages") or [])[-1:])
            s.followup = None
            if answered:
                # Claude took the StructuredOutput; a plain closing turn ends its loop.
                return Turn(text="Done.")
        if s.index >= len(self.steps):
            raise ScriptError(
                f"modelapi: script exhausted: main request {len(self._mains)}"
                f" ({api.name}) after all {len(self.steps)} steps were used"
            )
        step = self.steps[s.index]
        if isinstance(step, Error):
            if s.error_left is None:
                s.error_left = -1 if step.times == "always" else int(step.times)
            if s.error_left > 0:
                s.error_left -= 1
            if s.error_left == 0:
                self._advance()
            return step
        if isinstance(step, Cut | Hang):
            self._advance()
            return step
        if s.plan is None:
            s.plan = api.phases(step, body, s.ids)
        turn = s.plan[s.phase]
        s.phase += 1
        if s.phase >= len(s.plan):
            if isinstance(api, _Anthropic) and isinstance(step, Answer):
                s.followup = turn.tools[0].id
            self._advance()
        return turn

    def _advance(self) -> None:
        s = self._state
        s.index += 1
        s.phase = 0
        s.plan = None
        s.error_left = None

    def _error(self, h: _Handler, api: _API, step: Error) -> None:
        headers = {}
        if step.retry_after is not None:
            ra = step.retry_after
            headers["retry-after"] = str(int(ra)) if float(ra).is_integer() else str(ra)
        doc = (
            step.body
            if step.body is not None
            else api.error_body(step.status, f"modelapi: scripted error {step.status}")
        )
        h.send_json(step.status, doc, headers)
