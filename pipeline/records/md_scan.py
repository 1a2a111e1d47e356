"""Markdown links in README text, found in time linear in the text (no backtracking regular expression).

    links_to_text("see [the log](a/b.txt) here")         # "see the log here"
    link_target("| [log](records/x/y.txt) |", "[log](")  # "records/x/y.txt"

A README is anyone's text. A regular expression such as `\\[([^\\]]*)\\]\\([^)]*\\)` tries every `[` as a start
and scans to the end of the line from each one, so a line of 200,000 `[` takes minutes (issue 38: 84 s for
one crafted line). Here each scan remembers where it stopped: every start that lies before that point ends
at the same place, so it is skipped, and the text is passed over a bounded number of times.
"""

from __future__ import annotations


def links_to_text(text: str) -> str:
    """Each `[label](target)` replaced by its label: what `re.sub(r"\\[([^\\]]*)\\]\\([^)]*\\)", r"\\1", text)`
    gives."""
    out, copied, i = [], 0, 0
    close = paren = -1  # the next "]" / ")" at or after the last place looked from (cached: each found once)
    while (i := text.find("[", i)) >= 0:
        if close < i:
            close = text.find("]", i)
            if close < 0:
                break  # no "]" after here: no link can start at a later "[" either
        if not text.startswith("(", close + 1):
            i = close + 1  # every "[" before this "]" closes at it, and none is followed by "(": skip them all
            continue
        if paren < close + 2:
            paren = text.find(")", close + 2)
            if paren < 0:
                break  # no ")" after here: no later link either
        out += [text[copied:i], text[i + 1:close]]
        copied = i = paren + 1
    out.append(text[copied:])
    return "".join(out)


def link_target(text: str, opener: str, schemes: tuple[str, ...] = (), start: int = 0,
                stop: int | None = None) -> str | None:
    """The first target after `opener` (matched ignoring case) that runs, without blanks, to a ")":
    `re.search(re.escape(opener) + r"([^)\\s]+)\\)", text, re.I)`; with `schemes`, only a target starting with
    one of them, and more after it, counts. Only an opener starting in text[start:stop] is looked at."""
    n, size, i = len(text), len(opener), start
    stop = n if stop is None else stop
    lowered = opener.lower()
    end = -1  # where the last scanned run of target characters stopped
    while (i := text.find(opener[0], i, stop)) >= 0:
        if text[i:i + size].lower() != lowered:
            i += 1
            continue
        start = i + size
        if start > end:  # a start inside the last run stops where it stopped: not scanned again
            end = start
            while end < n and text[end] != ")" and not text[end].isspace():
                end += 1
        if end >= n or text[end] != ")":
            i = end  # every start within this run stops at the same blank or end: none of them is a link
            continue
        head = text[start:start + 16].lower()
        scheme = next((len(x) for x in schemes if head.startswith(x)), None) if schemes else 0
        if scheme is not None and end > start + scheme:
            return text[start:end]  # sliced once, when found
        i += 1
    return None
