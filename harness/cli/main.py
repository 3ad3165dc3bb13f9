"""The command line: the parser, the dispatch to the command's module in
harness/cli/commands/, and the one place that turns an error into its line and exit code."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from harness import __version__
from harness.base.errors import HarnessError, InvalidInput
from harness.base.printable import printable

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
MAX_SLOTS = 1024  # --max-parallel's most
Command = Callable[[argparse.Namespace], int]
Arguments = Callable[[argparse.ArgumentParser], None]


def main(argv: list[str] | None = None) -> int:
    # Linux hands over bytes; Python turns those that are not UTF-8 into lone surrogates,
    # which no record can hold (a --reason is logged as JSON).
    for number, given in enumerate(sys.argv[1:] if argv is None else argv, 1):
        try:
            given.encode("utf-8")
        except UnicodeEncodeError:
            print(f"harness: argument {number} is not UTF-8 text", file=sys.stderr)
            return InvalidInput.exit_code
    parser = _parser()
    args = parser.parse_args(argv)
    # Imported once a command is given: `--version` and `--help` need no git.
    from harness.repository import repo

    repo.env_without_git()
    try:
        code: int = _command(args.run)(args)
        return code
    except HarnessError as exc:
        # One line, always: a message quoting a parser may carry newlines.
        print("harness: " + printable(" ".join(str(exc).splitlines())), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        # Each phase is logged before the next starts, so stopping anywhere leaves what a
        # kill would: the next run goes on from there. A second Ctrl-C must not cut this line.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("harness: interrupted; run the command again to go on", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader (`harness log | head`) has all it wanted; nothing more is to be said,
        # and Python must not try to flush into the closed pipe again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:
        with tempfile.NamedTemporaryFile(
            "w", prefix="harness-crash-", suffix=".log", delete=False
        ) as fh:
            traceback.print_exc(file=fh)
        print(f"harness: internal error; crash log: {fh.name}", file=sys.stderr)
        return 4


def _command(target: str) -> Command:
    """The function behind "module:function" of harness/cli/commands/, its module imported
    only now: start-up pays for the command given, not for every command."""
    module, _, name = target.partition(":")
    found: Command = getattr(importlib.import_module(f"harness.cli.commands.{module}"), name)
    return found


# -- parser ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """A command's parser, its arguments added only when that command is the one given:
    some choices come from modules only that command needs (`log --event`: the events of the
    log's schema), which `--version` and every other command need not import."""

    arguments: Arguments | None = None

    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        if self.arguments is not None:
            add, self.arguments = self.arguments, None
            add(self)
        return super().parse_known_args(args, namespace)


class _Commands:
    """One level of commands (`harness X`, `harness plan X`), each taking --repo."""

    def __init__(self, into: argparse._SubParsersAction[_Parser], common: _Parser) -> None:
        self.into = into
        self.common = common

    def add(self, name: str, run: str, helptext: str, arguments: Arguments | None = None) -> None:
        """`run`: "module:function" of harness/cli/commands/."""
        p = self.into.add_parser(name, parents=[self.common], help=helptext, description=helptext)
        p.set_defaults(run=run)
        p.arguments = arguments

    def on_task(
        self, name: str, run: str, helptext: str, arguments: Arguments | None = None
    ) -> None:
        def with_task(p: argparse.ArgumentParser) -> None:
            p.add_argument("task_id")
            if arguments is not None:
                arguments(p)

        self.add(name, run, helptext, with_task)

    def group(self, name: str, helptext: str) -> _Commands:
        into = self.into.add_parser(name, help=helptext).add_subparsers(dest="sub", required=True)
        return _Commands(into, self.common)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness", description="Deterministic orchestrator for AI coding agents."
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    common = _Parser(add_help=False)
    common.add_argument("--repo", help="repository root (default: the enclosing git repository)")
    top = _Commands(
        parser.add_subparsers(dest="command", required=True, parser_class=_Parser), common
    )
    top.add(
        "init",
        "init:init",
        "create ai/harness.toml, the registry and the token store if missing",
        _init,
    )
    _tokens(top.group("tokens", "write tokens"))
    _plan(top.group("plan", "plans"))
    _steps(top)
    reg = top.group("registry", "agents")
    reg.add("check", "registry:check", "check each agent's launcher and version", _json)
    po = top.group("policy", "ai/policy.toml")
    po.add(
        "show", "policy:show", "the flags an agent's CLI gets under ai/policy.toml", _policy_show
    )
    ag = top.group("agents", "agents")
    ag.add(
        "import",
        "agents:import_agents",
        "import .claude/agents or .gemini/agents files",
        _agents_import,
    )
    _readers(top)
    top.add(
        "doctor", "doctor:doctor", "whether the sandbox works on this machine, and why not", _json
    )
    top.add("demo", "demo:demo", "run a sample task offline with the scripted worker", _demo)
    top.add("mcp", "mcp:serve", "serve harness's commands as MCP tools on stdin/stdout")
    return parser


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")


# `status --json` and `audit --json` have no help line: kept so, their --help stays the same.
def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


def _init(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gemini", action="store_true", help="also register the Gemini CLI shim")
    p.add_argument("--opencode", action="store_true", help="also register the OpenCode shim")
    p.add_argument("--copilot", action="store_true", help="also register the Copilot CLI shim")


def _tokens(tok: _Commands) -> None:
    def issue(p: argparse.ArgumentParser) -> None:
        p.add_argument("--paths", nargs="+", required=True)
        p.add_argument("--ttl", required=True, help="lifetime, e.g. 30m, 2h, 1d")
        p.add_argument("--one-shot", action="store_true")

    tok.add("issue", "tokens:issue", "issue a write token for path globs", issue)
    tok.add("list", "tokens:listing", "list write tokens", _json)
    tok.add("revoke", "tokens:revoke", "revoke a write token", lambda p: _positional(p, "token_id"))


def _positional(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(name)


def _plan(pl: _Commands) -> None:
    pl.on_task("validate", "plan_validate:validate", "check a plan and its pre-flight", _json)
    pl.on_task("show", "plan_show:show", "print a plan in run order", _json)
    pl.on_task(
        "draft",
        "plan_draft:draft",
        "ask the planning agent for plan.draft.json",
        lambda p: _required(p, "--goal"),
    )
    pl.on_task("accept", "plan_draft:accept", "print the draft and promote it to plan.json")
    pl.add(
        "import",
        "plan_import:import_plan",
        "write plan.json from an Agentfile or a Glee workflow",
        _plan_import,
    )


def _required(p: argparse.ArgumentParser, option: str) -> None:
    p.add_argument(option, required=True)


def _plan_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="an Agentfile, or a Glee workflow (.yml/.yaml)")
    p.add_argument(
        "--task", dest="task_id", required=True, help="the task whose plan.json is written"
    )
    p.add_argument("--input", action="append", default=[], metavar="K=V")
    p.add_argument("--role", default="localized-impl", help="the role each goal runs as")
    p.add_argument(
        "--write-scope",
        action="append",
        metavar="GLOB",
        help="where each subtask may write (default: nowhere, until a person says)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing plan.json")


def _steps(top: _Commands) -> None:
    """next, run, status, resume, approve, reject: a task's subtasks run and judged."""
    top.on_task("next", "run:step", "run the next ready subtask, end to end", _next)
    top.on_task("run", "run:step", "run subtasks until the task completes or halts", _run)
    top.on_task("status", "status:status", "per subtask: status, commit, call_id", _json_flag)
    top.on_task(
        "resume", "resume:resume", "record that a human resolved the task's blocker", _resume
    )
    top.on_task(
        "approve",
        "resume:verdict",
        "approve a change awaiting a person: the next run commits it",
        lambda p: _verdict(p, reason_required=False),
    )
    top.on_task(
        "reject",
        "resume:verdict",
        "reject a change awaiting a person: it runs again, told the reason",
        lambda p: _verdict(p, reason_required=True),
    )


def _next(p: argparse.ArgumentParser) -> None:
    p.set_defaults(loop=False)
    p.add_argument("--wait", action="store_true", help="wait for the task's lock")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--json", action="store_true", help="progress and result as JSON lines on stdout"
    )


def _run(p: argparse.ArgumentParser) -> None:
    _next(p)
    p.set_defaults(loop=True)
    p.add_argument(
        "--max-parallel",
        type=_slots,
        default=1,
        metavar="N",
        help="subtasks in flight at once (default 1; plan.json's max_parallel caps it)",
    )
    p.add_argument(
        "--no-human",
        action="store_true",
        help="nobody is at hand (CI): refuse before any call if a person must approve",
    )
    p.add_argument(
        "--serial-checks",
        action="store_true",
        help="check each change only at its turn, never ahead of it on the trees before it",
    )
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where calls and checks run: threads here (default), or the Ray cluster "
        "RAY_ADDRESS names (pip install 'harness[ray]')",
    )


def _slots(value: str) -> int:
    # "²" is a digit too; a slot is a worker folder and a thread, so there is a most.
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_SLOTS:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1 to {MAX_SLOTS}")
    return int(value)


def _resume(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reason", required=True)
    p.add_argument("--wait", action="store_true")


def _verdict(p: argparse.ArgumentParser, reason_required: bool) -> None:
    p.add_argument("subtask")
    p.add_argument("--reason", required=reason_required)
    p.add_argument("--wait", action="store_true")


def _policy_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("agent", help="a registry agent id")
    _json(p)


def _agents_import(p: argparse.ArgumentParser) -> None:
    from harness.importers import personas  # its sources, for `agents import` alone

    p.add_argument("--from", dest="source", choices=sorted(personas.SOURCES), required=True)


def _readers(top: _Commands) -> None:
    """replay, report, attest, audit, log: what reads a task's record."""
    top.on_task(
        "replay",
        "replay:replay",
        "re-run a task from its record; name the first divergence",
        _replay,
    )
    top.on_task(
        "report",
        "report:report",
        "one self-contained HTML page of a task's record and audit",
        lambda p: _output(p, "write the page here (default: stdout)"),
    )
    top.on_task(
        "attest",
        "attest:attest",
        "an in-toto SLSA provenance statement for a task's commit",
        _attest,
    )
    top.on_task("audit", "audit:audit", "check a task's log, exchanges, commits and tokens", _audit)
    top.on_task("log", "log:log", "the task's log, one line per event", _log)


def _replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verify", action="store_true", help="also re-run builds, tests, acceptance")
    p.add_argument(
        "--trust-config",
        action="store_true",
        help="re-run checks with the recorded [sandbox] and network, even uncontained "
        "(default: always in the sandbox, no network): only for a record you trust",
    )


def _audit(p: argparse.ArgumentParser) -> None:
    _json_flag(p)
    p.add_argument(
        "--key",
        metavar="PUB",
        help="also check the log head signatures of record commits against this Ed25519 "
        "public key (PEM or OpenSSH): the newest commit must carry one",
    )


def _attest(p: argparse.ArgumentParser) -> None:
    _output(p, "write the statement (or envelope) here (default: stdout)")
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--sign",
        metavar="KEY",
        help="sign into a DSSE envelope with this Ed25519 private key (PEM or OpenSSH; "
        "HARNESS_SIGNING_PASSPHRASE for an encrypted PEM), or with ssh-agent given an "
        "OpenSSH public key; the file lies outside the repository",
    )
    how.add_argument("--verify", metavar="FILE", help="check this envelope (with --key)")
    p.add_argument(
        "--key",
        metavar="PUB",
        help="the signer's public key (PEM or OpenSSH), or an ssh allowed signers file",
    )


def _output(p: argparse.ArgumentParser, helptext: str) -> None:
    p.add_argument("-o", "--output", help=helptext)


def _log(p: argparse.ArgumentParser) -> None:
    from harness.readers import logview  # the log schema's events, for `log` alone

    p.add_argument("--event", choices=logview.EVENTS, help="only this event")
    p.add_argument("--subtask", help="only this subtask's events")
    p.add_argument("--json", action="store_true", help="the events as JSON lines")


def _demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", help="where to build the sample repository, like --repo")


if __name__ == "__main__":
    sys.exit(main())
