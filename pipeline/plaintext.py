"""Untrusted text made plain before it is stored or shown: `plain(text)`, `plain(text, lines=True)`.

A README, a log's file name or a table cell is written by someone else; printed as it is, it can drive the
reader's terminal (an ANSI colour, an OSC 8 hyperlink or OSC 52 clipboard write) or reverse what the reader sees
(U+202E RIGHT-TO-LEFT OVERRIDE and the other bidirectional controls). Whole escape sequences are removed (not
only their ESC, which would leave `]8;;http://…` behind), then every control, format, private-use or unassigned
character and every separator but the space (and, with lines=True, newline and tab).
"""

from __future__ import annotations

import re
import unicodedata

# CSI, OSC (ended by BEL or ST, or by the end of the text), and two-character escapes; the same in their C1 forms.
# Each alternative is one pass over adjacent, disjoint character classes: linear on any input.
_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]?|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?"
                       r"|\x9b[0-?]*[ -/]*[@-~]?|\x9d[^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?")


def _kept(ch: str, lines: bool) -> bool:
    if ch == " " or (lines and ch in "\n\t"):
        return True
    category = unicodedata.category(ch)
    return category[0] not in "CZ" or category == "Zs"


def plain(text: str, lines: bool = False) -> str:
    text = _SEQUENCE.sub("", text)
    return "".join(ch for ch in text if _kept(ch, lines))
