"""Optional extras (harness/cli/extras.py): with an extra's libraries missing, as a plain
`pip install` leaves them, every module but the extra's own imports, every command still
works or says in one line which extra it needs (exit 2), and an `OTEL_*` variable set
machine-wide leaves a run untraced, never stopped."""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from packaging.requirements import Requirement

import harness
from harness.cli import extras
from harness.importers import demo

from .conftest import CLOCK, Sample, completed_demo

EXTRAS = ("mcp", "otel", "sign", "ray")
# harness's modules that import an extra's libraries at their top, and the extra.
OWN = {
    "harness.cli.mcpserver": "mcp",
    "harness.step.spans": "otel",
    "harness.step.rayexec": "ray",
    "harness.base.signing": "sign",
    "harness.readers.signed": "sign",
}


def _closure(requirements: list[Requirement], extra: str = "") -> set[str]:
    """The distributions `requirements` bring, transitively, as installed here."""
    found: set[str] = set()
    todo = list(requirements)
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = req.name.lower().replace("_", "-")
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.add(name)
        for text in dist.requires or []:
            sub = Requirement(text)
            for wanted in sorted(req.extras) or [""]:
                if sub.marker is None or sub.marker.evaluate({"extra": wanted}):
                    todo.append(Requirement(str(sub).split(";")[0]))
                    break
    return found


@functools.cache
def brought(extra: str) -> frozenset[str]:
    """The top-level modules only `extra` installs: what a plain install lacks."""
    own = [Requirement(text) for text in metadata.requires("harness") or []]
    core = _closure([r for r in own if r.marker is None])
    wanted = [r for r in own if r.marker is not None and r.marker.evaluate({"extra": extra})]
    only = _closure([Requirement(str(r).split(";")[0]) for r in wanted]) - core
    modules = metadata.packages_distributions()
    return frozenset(
        module
        for module, dists in modules.items()
        if dists
        and all(d.lower().replace("_", "-") in only for d in dists)
        and module.isidentifier()
    )


def without(tmp: Path, names: tuple[str, ...]) -> dict[str, str]:
    """An environment whose Python lacks the extras `names`: a module of each, first on the
    path, that says it is not there, as a plain install would."""
    shadow = tmp / ("no-" + "-".join(names))
    if not shadow.exists():
        for module in sorted(set().union(*(brought(name) for name in names))):
            (shadow / module).mkdir(parents=True)
            (shadow / module / "__init__.py").write_text(
                f"raise ModuleNotFoundError({f'No module named {module!r}'!r}, name={module!r})\n"
            )
    return {**os.environ, "PYTHONPATH": str(shadow), "HARNESS_CLOCK": CLOCK}


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return completed_demo(tmp_path_factory.mktemp("extras"))


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Ed25519 key pair outside any repository."""
    where = tmp_path_factory.mktemp("key")
    private = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    enc, none = serialization.Encoding, serialization.NoEncryption()
    (where / "key").write_bytes(
        private.private_bytes(enc.PEM, serialization.PrivateFormat.OpenSSH, none)
    )
    (where / "key.pub").write_bytes(
        private.public_key().public_bytes(enc.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return where


def harness_cli(
    root: Path, env: dict[str, str], *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args, "--repo", str(root)],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=120,
        check=False,
    )


def test_each_extra_brings_modules_a_plain_install_lacks() -> None:
    # The shadows below stand for real absences only if these are the extras' own.
    assert {"mcp", "anyio", "pydantic"} <= brought("mcp")
    assert "opentelemetry" in brought("otel")
    assert "securesystemslib" in brought("sign")
    assert "ray" in brought("ray")
    assert not ({"orjson", "jsonschema", "yaml", "coverage"} & set().union(*map(brought, EXTRAS)))


@pytest.mark.e2e
def test_every_module_but_the_extras_own_imports_without_them(tmp_path: Path) -> None:
    every = pkgutil.walk_packages(harness.__path__, "harness.")
    # Each __main__ runs a command when imported: the commands have tests of their own below.
    names = sorted(m.name for m in every if not m.name.endswith(".__main__"))
    probe = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        print(name, exc.name)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe, *names],
        capture_output=True,
        text=True,
        env=without(tmp_path, EXTRAS),
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    failed = dict(line.split() for line in res.stdout.splitlines())
    assert set(failed) == set(OWN)
    for module, missing in failed.items():
        assert missing.split(".")[0] in brought(OWN[module]), (module, missing)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "args",
    [
        ("status", "demo"),
        ("log", "demo"),
        ("audit", "demo"),
        ("replay", "demo"),
        ("attest", "demo"),
        ("plan", "show", "demo"),
        ("plan", "validate", "demo"),
        ("tokens", "list"),
        ("registry", "check"),
        ("next", "demo"),
        ("run", "demo"),
    ],
    ids=" ".join,
)
def test_commands_that_need_no_extra_work_without_all_of_them(
    done: Sample, tmp_path: Path, args: tuple[str, ...]
) -> None:
    env = without(tmp_path, EXTRAS)
    res = harness_cli(done.root, env, *args)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "needs" not in res.stderr


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("extra", "args", "what"),
    [
        ("mcp", ("mcp",), "harness mcp"),
        ("sign", ("audit", "demo", "--key", "{key}/key.pub"), "audit --key"),
        ("sign", ("attest", "demo", "--sign", "{key}/key"), "attest --sign/--verify"),
        ("ray", ("run", "demo", "--executor", "ray"), "--executor ray"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_command_that_needs_a_missing_extra_says_which_in_one_line(
    done: Sample, key: Path, tmp_path: Path, extra: str, args: tuple[str, ...], what: str
) -> None:
    env = {**without(tmp_path, (extra,)), "RAY_ADDRESS": "127.0.0.1:1"}
    res = harness_cli(done.root, env, *(arg.format(key=key) for arg in args))
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    line = res.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"harness: {what} needs ")
    assert line.endswith(f": pip install 'harness[{extra}]'")
    assert line.removeprefix(f"harness: {what} needs ").split(":")[0].split(".")[0] in brought(
        extra
    )


@pytest.mark.e2e
@pytest.mark.parametrize("installed", [False, True], ids=["without-otel", "with-otel"])
def test_otel_variables_without_the_extra_leave_the_run_untraced(
    tmp_path: Path, installed: bool
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    demo.build(root)
    env = os.environ | {"HARNESS_CLOCK": CLOCK} if installed else without(tmp_path, ("otel",))
    # Set machine-wide, as on many company machines; nothing listens there.
    env = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    res = harness_cli(root, env, "run", "demo", "--quiet")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    said = [line for line in res.stderr.splitlines() if "pip install 'harness[otel]'" in line]
    assert len(said) == (0 if installed else 1), res.stderr
    assert all(line.startswith("harness: traces off: ") for line in said)


@pytest.mark.e2e
def test_a_signing_key_without_the_extra_is_one_line_before_anything_runs(
    key: Path, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    demo.build(root)
    env = {**without(tmp_path, ("sign",)), "HARNESS_SIGNING_KEY": str(key / "key")}
    res = harness_cli(root, env, "run", "demo", "--quiet")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().endswith(": pip install 'harness[sign]'")
    assert "\n" not in res.stderr.strip()
    assert not (root / "ai" / "tasks" / "demo" / "progress.ndjson").exists()


def test_a_missing_module_of_harness_itself_is_not_an_extras() -> None:
    own = ModuleNotFoundError("no", name="harness.step.spans")
    assert extras.missing(own, "otel", "x") is own
    other = extras.missing(ModuleNotFoundError("no", name="anyio"), "mcp", "harness mcp")
    assert str(other) == "harness mcp needs anyio: pip install 'harness[mcp]'"
