"""What one sandboxed command may consume: [sandbox.limits] in ai/harness.toml, and an
agent's own in its registry entry. The sandbox holds each command to them (sandbox.py); a
command over one fails, in a line naming the limit and the setting that raises it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from harness.base.errors import InvalidInput

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
UNITS = {"": 1, "B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "TiB": TIB}
SIZE = re.compile(r"(\d{1,19})\s*(B|KiB|MiB|GiB|TiB)?")
MOST = 1 << 62  # far past any machine, and within what setrlimit takes
UNLIMITED = "unlimited"


@dataclass(frozen=True)
class Limits:
    """Each limit, None when the user lifted it ("unlimited"). Sizes are bytes."""

    # Resident memory (anonymous and shared) of all its processes together, as init
    # samples it. Not an address space: the agent CLIs reserve far more than they touch.
    memory: int | None = 8 * GIB
    processes: int | None = 4096  # processes and threads alive at once, as the kernel counts
    file_size: int | None = 4 * GIB  # any one file it writes (RLIMIT_FSIZE)
    cpu_s: int | None = 3600  # CPU seconds of any one process (RLIMIT_CPU)
    tmp: int | None = 2 * GIB  # the size of its /tmp, and of its /dev/shm
    disk: int | None = 16 * GIB  # how far the free space of its copy's or home's disk may fall

    def merged(self, over: Mapping[str, int | None]) -> Limits:
        """These limits with those `over` names replaced."""
        return replace(self, **over)

    def within(self, most: Limits) -> Limits:
        """Each limit no higher than `most`'s."""
        kept = {}
        for name in NAMES:
            mine, top = getattr(self, name), getattr(most, name)
            kept[name] = top if mine is None else mine if top is None else min(mine, top)
        return Limits(**kept)


NAMES = tuple(f.name for f in fields(Limits))
SIZES = frozenset({"memory", "file_size", "tmp", "disk"})
# What each limit is, said in the line that names it when a command goes over.
WHAT = {
    "memory": "memory: its processes held more than {}",
    "processes": "processes: it had {} processes and threads at once",
    "file_size": "file size: it wrote a file past {}",
    "cpu_s": "CPU time: one of its processes ran {} on the CPU",
    "tmp": "tmp: it filled its /tmp or /dev/shm of {}",
    "disk": "disk: the free space of the disk holding its copy or home fell by more than {}",
}


def parse(table: Mapping[str, object], where: str) -> dict[str, int | None]:
    """The limits a table names, each a positive number (sizes in bytes, or "512MiB",
    "8GiB") or "unlimited"; anything else is one InvalidInput line naming `where`."""
    found: dict[str, int | None] = {}
    for name, value in table.items():
        if name not in NAMES:
            raise InvalidInput(f"{where}: no limit named {name!r} (limits: {', '.join(NAMES)})")
        found[name] = _value(name, value, f"{where}.{name}")
    return found


def _value(name: str, value: object, where: str) -> int | None:
    if value == UNLIMITED:
        return None
    number = value
    if isinstance(value, str) and name in SIZES:
        matched = SIZE.fullmatch(value.strip())
        if matched is not None:
            number = int(matched.group(1)) * UNITS[matched.group(2) or ""]
    if isinstance(number, int) and not isinstance(number, bool) and 0 < number < MOST:
        return number
    form = 'bytes, as a number or "512MiB", "8GiB"' if name in SIZES else "a whole number"
    raise InvalidInput(f"{where}: {value!r} is no limit: {form} above 0, or {UNLIMITED!r}")


def shown(name: str, value: int | None) -> str:
    """A limit's value as a person writes it: 8GiB, 4096, 3600s."""
    if value is None:
        return UNLIMITED
    if name == "cpu_s":
        return f"{value}s"
    if name not in SIZES:
        return str(value)
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if value % UNITS[unit] == 0:
            return f"{value // UNITS[unit]}{unit}"
    return f"{value}B"


def message(name: str, limits: Limits, agent: str | None = None) -> str:
    """The one line a command over the limit `name` fails with: the limit, and the
    setting that raises it."""
    what = WHAT[name].format(shown(name, getattr(limits, name)))
    setting = f"[sandbox.limits] {name} in ai/harness.toml"
    if agent is not None:
        entry = f'"limits": {{"{name}": …}} of agent {agent} in ai/agents/registry.json'
        setting = f"{entry}, or {setting}"
    return f"over its limit of {what} (raise it with {setting})"
