"""Text from outside (a README, a log, a manifest, a bundle) made safe to print and to put into a page.

    plain_text("Fast\u202eevil")        # "Fastevil": one line, no control or format character, stripped
    without_controls("a\x1b[2Jb\nc")    # "a[2Jb\nc": lines kept, nothing a terminal or a browser acts on
    plain("a\x1b]8;;http://x\x07b")     # "ab": whole escape sequences removed, not only their ESC

A right-to-left override (U+202E) reverses what a terminal or a browser shows after it, so a record name
or a loss can be made to read as another; an escape sequence (ESC, CSI) moves the cursor, clears the screen
or sets the window title. Every character of Unicode's "other" categories (control, format, private use,
unassigned, surrogate: Cc, Cf, Co, Cn, Cs) and the line and paragraph separators (Zl, Zp) is removed; tab
and newline are kept by `without_controls`, which keeps the text's lines. The one function the tool uses for
this (issue 38): the CLI's output, the JSON it prints, and the HTML pages.
"""

from __future__ import annotations

import re
import unicodedata

_KEPT = frozenset("\n\t")


def _unsafe(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] == "C" or category in ("Zl", "Zp")


def without_controls(text: str) -> str:
    """`text` without control or format characters, its newlines and tabs kept."""
    if text.isascii() and text.isprintable():
        return text  # the common case, in one C-speed check
    return "".join(ch for ch in text if ch in _KEPT or not _unsafe(ch))


def plain_text(text: str) -> str:
    """One line: `without_controls`, every other space character as a plain space, stripped."""
    return "".join(" " if ch in _KEPT or unicodedata.category(ch) == "Zs" else ch
                   for ch in without_controls(text)).strip()


def escaped_controls(text: str) -> str:
    """JSON text with every control or format character inside its strings written as a \\u escape (what
    `ensure_ascii` does, for these characters only): the output stays valid JSON and prints as plain text."""
    if text.isascii():
        return text  # json.dumps already escaped the ASCII controls
    return "".join(_escape(ch) if ch not in _KEPT and _unsafe(ch) else ch for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP: JSON writes the UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


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
    """Whole escape sequences (an OSC 8 link leaves nothing behind), then every control, format, private-use or
    unassigned character and every separator but the space (newline and tab kept with lines=True)."""
    if text.isascii() and (text.replace("\n", "").replace("\t", "") if lines else text).isprintable():
        return text  # the common case (every CLI line goes through here), in one C-speed check
    text = _SEQUENCE.sub("", text)
    return "".join(ch for ch in text if _kept(ch, lines))
