"""The `sha256sum` list format, written and read in one place: a bundle's SHA256SUMS, an image tarball's
.sha256 sidecar. One line per file, `<64 hex digits><two spaces><name>`, names sorted when written.

Reading reports every malformed or repeated line instead of stopping at the first, so a checker can
name them all; the text comes from a member already read under a size limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")


def format_sums(digests: Mapping[str, str]) -> str:
    return "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))


@dataclass(frozen=True)
class Sums:
    digests: dict[str, str]  # name -> sha256, the first listing of each name
    problems: tuple[str, ...]  # lines that are not `<sha256>  <name>`, names listed twice


def parse_sums(text: str) -> Sums:
    digests: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        match = LINE.match(line)
        if not match:
            problems.append(f"line {number} is not '<sha256>  <name>': {line[:80]!r}")
            continue
        digest, name = match.groups()
        if name in digests:
            problems.append(f"lists {name[:200]} twice")
            continue
        digests[name] = digest
    return Sums(digests, tuple(problems))
