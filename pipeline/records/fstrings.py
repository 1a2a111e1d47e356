"""Python 3.12 f-strings (PEP 701), read by the tool's own Python 3.11.

    text = backport('print(f"{d.get("a", "b")}")')   # 'print(f"{d.get(\'a\', \'b\')}")', or None

Since Python 3.12 a replacement field may reuse the quote of the f-string around it (`f"{x["a"]}"`). Records
that ran on 3.12 use this (track 2's 2025-04-16_Record7 and 2025-04-22_Record8 log their program with one such
line, and `Running Python 3.12.9`). The tool runs on 3.11, whose parser refuses those lines, yet it only needs
the syntax tree to find the smoke fields and to fingerprint the code; the program itself is identified by its
pinned sha256 first and runs on the record's own Python.

So the text is rewritten, for parsing only: a string literal inside a replacement field that uses a quote of an
enclosing f-string gets the other quote. The swap keeps every byte's position (one quote for another) and gives
the same syntax tree Python 3.12 builds from the original (a string's value does not depend on its quotes), so
positions, the smoke cut and the fingerprint are those of the record's own text. A literal the swap cannot
serve (its text holds the other quote, a triple-quoted one, nesting that uses both quotes) gives None and the
caller reports the original SyntaxError. The scan is bounded: nesting deeper than MAX_NESTING gives None.
"""

from __future__ import annotations

import re

MAX_NESTING = 16
_START = re.compile(r"([rRbBuUfF]{0,2})('''|\"\"\"|'|\")")
_OTHER = {"'": '"', '"': "'"}


class _Unserved(Exception):
    """The text needs more than a quote swap."""


class _Scan:
    def __init__(self, text: str):
        self.s = text
        self.swaps: list[int] = []  # positions of quote characters to swap

    def string(self, i: int, enclosing: str, depth: int) -> int:
        """The literal starting at i (prefix included); the index just after it."""
        if depth > MAX_NESTING:
            raise _Unserved
        m = _START.match(self.s, i)
        prefix, quote = m.group(1).lower(), m.group(2)
        swap = quote[0] in enclosing
        if swap and (len(quote) == 3 or _OTHER[quote[0]] in enclosing):
            raise _Unserved
        j = m.end()
        inner = enclosing + (_OTHER[quote[0]] if swap else quote[0])
        while True:
            if j >= len(self.s) or (len(quote) == 1 and self.s[j] == "\n"):
                raise _Unserved  # unterminated: a real syntax error, left to the parser
            if self.s.startswith(quote, j):
                break
            ch = self.s[j]
            if swap and ch == _OTHER[quote[0]]:
                raise _Unserved
            if ch == "\\":
                j += 2
            elif "f" in prefix and ch == "{" and not self.s.startswith("{{", j):
                j = self.field(j + 1, inner, depth + 1)
            else:
                j += 2 if "f" in prefix and self.s.startswith(("{{", "}}"), j) else 1
        if swap:
            self.swaps += [m.start(2), j]
        return j + len(quote)

    def field(self, j: int, enclosing: str, depth: int) -> int:
        """A replacement field's expression (and format spec) from j; the index just after its `}`."""
        brackets = 0
        while j < len(self.s):
            ch = self.s[j]
            if ch in "([{":
                brackets += 1
            elif ch in ")]" or (ch == "}" and brackets):
                brackets -= 1
            elif ch == "}":
                return j + 1
            elif ch == ":" and not brackets:
                return self.spec(j + 1, enclosing, depth)
            elif (m := _START.match(self.s, j)) and self._starts_literal(j, m):
                j = self.string(j, enclosing, depth)
                continue
            j += 1
        raise _Unserved

    def spec(self, j: int, enclosing: str, depth: int) -> int:
        """A format spec: text with nested fields, up to the field's closing `}`."""
        while j < len(self.s):
            if self.s[j] == "}":
                return j + 1
            j = self.field(j + 1, enclosing, depth + 1) if self.s[j] == "{" else j + 1
        raise _Unserved

    def _starts_literal(self, j: int, m: re.Match) -> bool:
        """A prefix only counts at the start of a token (not the `f` ending a name like `elif`)."""
        return not m.group(1) or j == 0 or not (self.s[j - 1].isalnum() or self.s[j - 1] == "_")

    def module(self) -> None:
        j = 0
        while j < len(self.s):
            ch = self.s[j]
            if ch == "#":
                end = self.s.find("\n", j)
                j = len(self.s) if end < 0 else end
            elif (m := _START.match(self.s, j)) and self._starts_literal(j, m):
                j = self.string(j, "", 0)
            else:
                j += 1


def backport(text: str) -> str | None:
    """The text with the quotes Python 3.11 cannot read inside f-strings swapped; None when that cannot serve."""
    scan = _Scan(text)
    try:
        scan.module()
    except _Unserved:
        return None
    if not scan.swaps:
        return None
    chars = list(text)
    for at in scan.swaps:
        chars[at] = _OTHER[chars[at]]
    return "".join(chars)
