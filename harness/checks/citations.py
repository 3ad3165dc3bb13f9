"""Review findings must cite `path:line` or `path:start-end` inside the files given as inputs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# The lookbehind keeps a citation from starting mid-token, so `https://host:8080` or
# `a:b.py:3` do not yield a bogus path; the lookahead demands a '.' or '/' in the path
# so prose like `note:3` or `step:2` is not taken for a citation.
CITE = re.compile(
    r"(?<![A-Za-z0-9_./:-])"
    r"(?P<path>(?=[A-Za-z0-9_-]*[./])[A-Za-z0-9_./-]+)"
    r":(?P<start>\d+)(?:-(?P<end>\d+))?(?!\d)"
)


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _problem(path: str, start: int, end: int, inputs: Mapping[str, int]) -> str | None:
    text = f"{path}:{start}" if start == end else f"{path}:{start}-{end}"
    # A reviewer may write `./src/x.py`; inputs are keyed by repository-relative paths.
    key = path[2:] if path.startswith("./") else path
    if key not in inputs:
        return f"cites {text}, not an input"
    if start > end:
        return f"cites {text}, an empty range"
    if start < 1 or end > inputs[key]:
        return f"cites {text} but it has {_lines(inputs[key])}"
    return None


def check_findings(findings: Sequence[str], inputs: Mapping[str, int]) -> list[str]:
    """One problem line per finding lacking a citation or citing outside the inputs.

    `inputs` maps each input path to its number of lines at the base. A finding with several
    bad citations gets one line listing them all, joined by '; '. [] when all are good.
    """
    problems: list[str] = []
    for number, finding in enumerate(findings, start=1):
        cites = list(CITE.finditer(finding))
        if not cites:
            problems.append(f"finding {number}: no path:line citation")
            continue
        bad: list[str] = []
        for m in cites:
            start = int(m["start"])
            end = int(m["end"]) if m["end"] else start
            if (problem := _problem(m["path"], start, end, inputs)) and problem not in bad:
                bad.append(problem)
        if bad:
            problems.append(f"finding {number}: {'; '.join(bad)}")
    return problems
