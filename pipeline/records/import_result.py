"""What an import says (ImportResult) and the commit it pins: apart from pipeline/records/importer.py, so that a
re-import whose inputs did not change (pipeline/records/import_memo.py) replays its result without loading the
importer and what it reads with (the rules, the selection, the manifests)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import InputError

DEFAULT_REPOSITORY = "https://github.com/KellerJordan/modded-nanogpt"


@dataclass(kw_only=True)
class ImportResult:
    commit: str
    track: int
    written: list[str] = field(default_factory=list)  # created or changed
    unchanged: list[str] = field(default_factory=list)
    changes: dict[str, list[str]] = field(default_factory=dict)  # name -> dotted fields that changed
    warnings: list[str] = field(default_factory=list)
    skipped_rows: list[str] = field(default_factory=list)
    flags: dict[str, list[str]] = field(default_factory=dict)  # name -> what the editor should decide
    kept_edits: dict[str, list[str]] = field(default_factory=dict)  # name -> edited fields kept over the import's

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def clone_head(folder: Path) -> str:
    """The commit `folder` is at when it is the top of a git clone of its own; "" otherwise (no git, not a clone,
    a clone without commits). A copy inside some other repository (this tool's own checkout, say) is not a clone
    of upstream: its HEAD is that repository's. `repro records import` and `repro records check` both ask."""
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != Path(folder).resolve():
        return ""
    return lines[1].strip()


def upstream_commit(clone: Path, commit: str | None) -> str:
    """--commit when given, else `git rev-parse HEAD` of the clone; a sample copy must say its commit."""
    if commit and not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise InputError(f"--commit {commit!r} is not a full 40-hex git commit", "pass the full sha")
    head = clone_head(clone)
    if commit:
        # a clone says which commit it is at: a --commit it contradicts would pin files it never had
        if head and head != commit:
            raise InputError(f"--commit {commit[:12]} is not the commit {clone} is at ({head[:12]})",
                             f"check out {commit[:12]} in the clone, or leave --commit out to pin {head[:12]}")
        return commit
    if not re.fullmatch(r"[0-9a-f]{40}", head):
        raise InputError(f"{clone} is not the root of a git clone, so its upstream commit is unknown",
                         "pass --commit SHA: the upstream commit this copy was taken from")
    return head
