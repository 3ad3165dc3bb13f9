"""Text for a terminal: what a worker wrote is shown, never acted on."""

from __future__ import annotations

# C0 and C1 controls (newline too: one record stays one line), DEL, and the bidi
# embeddings, overrides and isolates that reorder what a reader sees (CVE-2021-42574).
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0)]
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {
    **{code: f"\\x{code:02x}" for code in _CONTROLS},
    **{code: f"\\u{code:04x}" for code in _BIDI},
    # doubled, so that an escape in the output means one thing only
    ord("\\"): "\\\\",
}


def printable(text: str) -> str:
    """`text` with controls and bidi controls escaped as \\xNN and \\uNNNN."""
    return text.translate(_ESCAPES)


def one_line(text: str) -> str:
    """`text` with controls and bidi controls escaped, backslashes left as they are: for a
    name kept in a message that is escaped again (`printable`) when it is shown."""
    return text.translate({k: v for k, v in _ESCAPES.items() if k != ord("\\")})
