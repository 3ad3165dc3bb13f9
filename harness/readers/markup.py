"""The report page's HTML: its content policy and style, and the blocks it is built of, every
string escaped on its way in; and how numbers, costs and times are written on it."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from harness.base import clock

CSP = "default-src 'none'; style-src 'unsafe-inline'"

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em 2em;
color:#1b1f24;background:#fff}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin:1.4em 0 .4em}
h3{font-size:1.1em;margin:1em 0 .3em}h4{font-size:1em;margin:1em 0 .3em}
h5{font-size:.95em;margin:.8em 0 .2em}
table{border-collapse:collapse;width:100%;margin:.4em 0}
th,td{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}
code,pre{font:12px/1.4 ui-monospace,monospace}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:6px;overflow-x:auto;
white-space:pre-wrap;word-break:break-all;margin:.3em 0}
.audit{border:2px solid;border-radius:6px;padding:.5em 1em;margin:1em 0}
.audit.clean{border-color:#1a7f37;background:#dafbe1}
.audit.findings{border-color:#cf222e;background:#ffebe9}
.blocked{color:#cf222e;font-weight:bold}.error{color:#cf222e}
.status-done,.outcome-completed{color:#1a7f37}
.status-failed,.status-blocked,.outcome-failed{color:#cf222e}
.status-running,.status-pending,.outcome-in{color:#9a6700}
.track{position:relative;background:#eaeef2;height:12px;min-width:200px}
.bar{position:absolute;top:0;height:12px;background:#0969da}
.subtask{border-top:1px solid #d0d7de;margin-top:1.5em}
.add{color:#1a7f37}.del{color:#cf222e}.hunk{color:#8250df}
details{margin:.3em 0}summary{cursor:pointer}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dd{margin:0}
"""


def esc(value: object) -> str:
    """Escaped text: quotes too, so it is safe inside attributes as well."""
    return "-" if value is None else html.escape(str(value), quote=True)


def duration(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:g} s"
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} m {secs} s" if hours else f"{minutes} m {secs} s"


def epoch_seconds(ts: str) -> float:
    return clock.parse(ts).timestamp()


def figure(value: float) -> str:
    return f"{value:g}"


def _cost(value: float) -> str:
    return f"${value:.4f}"


def total_cost(known: float, unknown: int) -> str:
    """The cost reported, and that it is only part of it while some calls reported none."""
    if not unknown:
        return _cost(known)
    return f"{_cost(known)} (partial: {unknown} call(s) reported no cost)"


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of already-escaped cells."""
    out = ["<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>"]
    out.append("<tbody>")
    out += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    out.append("</tbody></table>")
    return "".join(out)


def pre(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<pre{attr}>{esc(text)}</pre>"


def diff(text: str) -> str:
    """A patch as text, each line coloured by its kind; every line escaped."""
    lines = []
    for line in text.splitlines():
        kind = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else ""
        )
        lines.append(f'<span class="{kind}">{esc(line)}</span>' if kind else esc(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"
