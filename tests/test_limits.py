"""[sandbox.limits] and an agent's own: what a setting may say, and the line a command over
one fails with."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import InvalidInput
from harness.spec import config, limits
from harness.spec.limits import GIB, MIB, Limits

WHERE = "ai/harness.toml: $.sandbox.limits"


def test_the_defaults_are_those_the_docs_give() -> None:
    assert Limits() == Limits(
        memory=8 * GIB, processes=4096, file_size=4 * GIB, cpu_s=3600, tmp=2 * GIB, disk=16 * GIB
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1), (4096, 4096), ("512MiB", 512 * MIB), ("8GiB", 8 * GIB), ("3 KiB", 3072),
     ("7", 7), ("1TiB", 1 << 40), ("unlimited", None)],
)  # fmt: skip
def test_a_size_is_bytes_or_a_binary_unit(value: object, expected: int | None) -> None:
    assert limits.parse({"memory": value}, WHERE) == {"memory": expected}


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ({"memory": "8GB"}, "$.sandbox.limits.memory: '8GB' is no limit: bytes, as a number or"),
        ({"memory": "0MiB"}, "$.sandbox.limits.memory: '0MiB' is no limit"),
        ({"tmp": -1}, "$.sandbox.limits.tmp: -1 is no limit"),
        ({"disk": 1.5}, "$.sandbox.limits.disk: 1.5 is no limit"),
        ({"disk": True}, "$.sandbox.limits.disk: True is no limit"),
        ({"processes": "4096"}, "$.sandbox.limits.processes: '4096' is no limit: a whole number"),
        ({"cpu_s": "1GiB"}, "$.sandbox.limits.cpu_s: '1GiB' is no limit: a whole number"),
        ({"cpu_s": 0}, "$.sandbox.limits.cpu_s: 0 is no limit"),
        ({"memory": "9" * 20 + "TiB"}, "is no limit"),
        ({"memory": "4194304TiB"}, "'4194304TiB' is no limit"),  # 2**62
        ({"memory": 1 << 63}, "is no limit"),
        ({"ram": 1}, "$.sandbox.limits: no limit named 'ram' (limits: memory, processes,"),
    ],
)
def test_a_value_no_limit_can_have_is_refused_in_one_line(
    table: dict[str, object], said: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        limits.parse(table, WHERE)
    assert said in str(caught.value) and "\n" not in str(caught.value)


@given(st.sampled_from(limits.NAMES), st.integers(min_value=1, max_value=(1 << 62) - 1))
def test_a_limit_shown_reads_back_as_itself(name: str, value: int) -> None:
    written = limits.shown(name, value)
    if name == "cpu_s":
        written = written.removesuffix("s")
    told: object = written if name in limits.SIZES else int(written)
    assert limits.parse({name: told}, WHERE) == {name: value}


def test_an_agents_own_limits_replace_only_those_it_names() -> None:
    mine = Limits().merged({"memory": 16 * GIB, "tmp": None})
    assert mine == Limits(memory=16 * GIB, tmp=None)


def test_within_keeps_each_limit_no_higher_than_the_most() -> None:
    asked = Limits(memory=None, processes=10, tmp=64 * GIB)
    assert asked.within(Limits()) == Limits(processes=10)
    assert Limits().within(Limits(memory=None)) == Limits()


def test_the_line_names_the_limit_and_the_setting_that_raises_it() -> None:
    line = limits.message("memory", Limits())
    assert line == (
        "over its limit of memory: its processes held more than 8GiB "
        "(raise it with [sandbox.limits] memory in ai/harness.toml)"
    )
    line = limits.message("processes", Limits(processes=300), agent="claude")
    assert "it had 300 processes and threads at once" in line
    assert '"limits": {"processes": …} of agent claude in ai/agents/registry.json' in line
    assert "[sandbox.limits] processes in ai/harness.toml" in line


def test_the_config_reads_its_limits_and_a_records_are_held_to_the_defaults(
    tmp_path: Path,
) -> None:
    toml = tmp_path / "ai" / "harness.toml"
    toml.parent.mkdir()
    toml.write_text('[sandbox.limits]\nmemory = "32GiB"\nprocesses = 100\ntmp = "unlimited"\n')
    read = config.load(toml).sandbox_limits
    assert read == Limits(memory=32 * GIB, processes=100, tmp=None)
    # A record's config is anyone's (replay --verify): it may lower a limit, never raise one.
    assert config.load(toml).boxed().sandbox_limits == Limits(processes=100)
    assert config.load(toml).loosened() == ["limits above the defaults"]
    toml.write_text("[sandbox]\nmode = 'bwrap'\n")
    assert config.load(toml).sandbox_limits == Limits()
    assert config.load(toml).loosened() == []
