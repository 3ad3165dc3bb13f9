"""installed.py: an agent CLI followed from PATH to what its sandbox must show, on package
trees laid out as npm, nvm and Claude's installer lay them out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.base.errors import Halted
from harness.boundary import installed, registry

NODE_SCRIPT = "#!/usr/bin/env node\nrequire('./lib')\n"


def package(folder: Path, name: str, deps: dict[str, str] | None = None, **more: object) -> Path:
    """A package folder with its package.json."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"name": name, "version": "1.0.0", "dependencies": deps or {}, **more}
    (folder / "package.json").write_text(json.dumps(doc))
    return folder


def npm_global(prefix: Path) -> Path:
    """`npm install -g --prefix PREFIX @openai/codex`: bin/codex -> the package's script,
    one dependency nested in it, one hoisted beside it, another platform's binary absent."""
    modules = prefix / "lib" / "node_modules"
    pkg = package(
        modules / "@openai" / "codex",
        "@openai/codex",
        {"nested-dep": "1"},
        optionalDependencies={"@openai/codex-linux-x64": "1", "@openai/codex-darwin-arm64": "1"},
    )
    (pkg / "bin").mkdir()
    (pkg / "bin" / "codex.js").write_text(NODE_SCRIPT)
    (pkg / "bin" / "codex.js").chmod(0o755)
    package(pkg / "node_modules" / "nested-dep", "nested-dep", {"hoisted-dep": "1"})
    package(modules / "hoisted-dep", "hoisted-dep")
    package(modules / "@openai" / "codex-linux-x64", "@openai/codex-linux-x64")
    package(modules / "unrelated", "unrelated")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "codex").symlink_to("../lib/node_modules/@openai/codex/bin/codex.js")
    return prefix / "bin"


def node_at(folder: Path) -> Path:
    """A node of its own (nvm's layout: versions/node/vX/bin/node), a binary, not a script."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "node").write_bytes(b"\x7fELF fake node")
    (bin_dir / "node").chmod(0o755)
    return bin_dir


def test_an_npm_prefix_in_the_home_binds_the_package_its_dependencies_and_node(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    bin_dir = npm_global(home / ".npm-global")
    node_bin = node_at(home / ".nvm" / "versions" / "node" / "v22")
    found = installed.find("codex", f"{bin_dir}:{node_bin}:/usr/bin", home)
    modules = home / ".npm-global" / "lib" / "node_modules"
    trees = {host for host, _ in found.binds}
    assert trees == {
        modules / "@openai" / "codex",
        modules / "@openai" / "codex" / "node_modules" / "nested-dep",
        modules / "hoisted-dep",
        modules / "@openai" / "codex-linux-x64",
        home / ".nvm" / "versions" / "node" / "v22",
    }
    assert all(host == inside for host, inside in found.binds)  # seen where they are
    assert dict(found.programs) == {
        "codex": modules / "@openai" / "codex" / "bin" / "codex.js",
        "node": node_bin / "node",
    }
    assert found.settings == ((".codex/config.toml", ".codex/config.toml"),)


def test_a_native_binary_binds_only_itself(tmp_path: Path) -> None:
    """Claude's installer: ~/.local/bin/claude -> ~/.local/share/claude/versions/X."""
    home = tmp_path / "home"
    versions = home / ".local" / "share" / "claude" / "versions"
    versions.mkdir(parents=True)
    (versions / "2.1.332").write_bytes(b"\x7fELF")
    (versions / "2.1.332").chmod(0o755)
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "claude").symlink_to(versions / "2.1.332")
    found = installed.find("claude", str(home / ".local" / "bin"), home)
    assert found.binds == ((versions / "2.1.332", versions / "2.1.332"),)
    assert found.programs == (("claude", versions / "2.1.332"),)


def test_a_cli_not_on_path_is_named_with_its_package(tmp_path: Path) -> None:
    with pytest.raises(installed.NotInstalled, match=r"gemini not found on PATH \(npm install"):
        installed.find("gemini", str(tmp_path), tmp_path)


def test_a_runtime_under_usr_is_not_bound_again_and_a_shim_runtime_is_left_to_path(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    bin_dir = npm_global(home / "prefix")
    shims = home / ".pyenv" / "shims"
    shims.mkdir(parents=True)
    (shims / "node").write_text('#!/usr/bin/env bash\nexec pyenv exec node "$@"\n')
    (shims / "node").chmod(0o755)
    found = installed.find("codex", f"{bin_dir}:{shims}", home)
    assert not any(".pyenv" in str(host) for host, _ in found.binds)
    assert [name for name, _ in found.programs] == ["codex"]  # the sandbox PATH finds node
    if Path("/usr/bin/node").is_file():
        system = installed.find("codex", f"{bin_dir}:/usr/bin", home)
        assert not any(str(host).startswith("/usr/") for host, _ in system.binds)


def test_hostile_package_files_reach_nothing_outside(tmp_path: Path) -> None:
    """Dependency names that walk out of node_modules, a cycle, a package.json that is not
    JSON: followed no further than node would."""
    home = tmp_path / "home"
    bin_dir = npm_global(home / "prefix")
    node_bin = node_at(home / "nvm")
    modules = home / "prefix" / "lib" / "node_modules"
    package(modules / "hoisted-dep", "hoisted-dep", {"../../../../etc": "1", "@openai/codex": "1"})
    (modules / "@openai" / "codex-linux-x64" / "package.json").write_text("{not json")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "package.json").write_text("{}")
    found = installed.find("codex", f"{bin_dir}:{node_bin}", home)
    for host, _ in found.binds:
        assert modules in host.parents or host == node_bin / "node", host


def test_a_runtime_whose_install_is_the_home_itself_is_refused(tmp_path: Path) -> None:
    """node in ~/bin: its install would be the home, which no sandbox may show."""
    home = tmp_path / "home"
    bin_dir = npm_global(home / "prefix")
    node_bin = node_at(home)
    with pytest.raises(installed.NotInstalled, match="would show the whole home"):
        installed.find("codex", f"{bin_dir}:{node_bin}", home)


def agent(cli: str) -> registry.Agent:
    return registry.Agent(
        id="a", cmd="/bin/true", version=">=0", capabilities=("x",), args=(), env=(),
        timeouts=None, cli=cli,
    )  # fmt: skip


def test_a_cli_installed_in_the_repositorys_ai_or_git_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    for inside in ("ai", ".git"):
        bin_dir = npm_global(root / inside / "prefix")
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.defpath}")
        with pytest.raises(Halted, match="inside what no sandbox may show"):
            agent("codex").install(root)


def test_a_project_local_install_is_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """node_modules/.bin of the repository itself: read-only, like any other install."""
    root = tmp_path / "repo"
    bin_dir = npm_global(root / "tools")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.defpath}")
    found = agent("codex").install(root)
    assert found is not None and found.program.name == "codex.js"


def test_a_missing_cli_halts_with_the_agent_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Halted, match=r"agent a: codex not found on PATH \(npm install -g"):
        agent("codex").install(tmp_path)


def test_a_runtime_in_a_folder_of_the_home_binds_only_itself(tmp_path: Path) -> None:
    """node in ~/.local/bin: its install would be ~/.local, with everything else kept there."""
    home = tmp_path / "home"
    bin_dir = npm_global(home / ".npm-global")
    node_bin = node_at(home / ".local")
    (home / ".local" / "share" / "keyrings").mkdir(parents=True)
    found = installed.find("codex", f"{bin_dir}:{node_bin}", home)
    assert (node_bin / "node", node_bin / "node") in found.binds
    assert not any(host == home / ".local" for host, _ in found.binds)


def test_an_absolute_interpreter_line_resolves_inside_where_it_points(tmp_path: Path) -> None:
    """`#!/abs/link/to/node`: the link's path must reach the real node inside too."""
    home = tmp_path / "home"
    real_bin = node_at(home / ".nvm" / "versions" / "node" / "v22")
    (tmp_path / "opt").mkdir()
    (tmp_path / "opt" / "node").symlink_to(real_bin / "node")
    script = home / "tool" / "cli.js"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{tmp_path / 'opt' / 'node'}\n")
    script.chmod(0o755)
    found = installed.find(str(script), "", home)
    assert (real_bin / "node", tmp_path / "opt" / "node") in found.binds
    assert (real_bin.parent, real_bin.parent) in found.binds
    assert found.programs == (("cli.js", script),)


def test_claude_with_commands_needs_socat_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """claude refuses to start its Bash sandbox without socat: the pre-flight says so first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_bytes(b"\x7fELF")
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with_commands = registry.Agent(
        id="c", cmd="/bin/true", version=">=0", capabilities=("x",), args=(), env=(),
        timeouts=None, cli="claude", commands=("pytest",),
    )  # fmt: skip
    with pytest.raises(Halted, match=r"needs socat on the host \(apt-get install socat\)"):
        with_commands.install(tmp_path / "repo")
    assert agent("claude").install(tmp_path / "repo") is not None  # no commands: no socat
    (bin_dir / "socat").write_bytes(b"\x7fELF")
    (bin_dir / "socat").chmod(0o755)
    assert with_commands.install(tmp_path / "repo") is not None
