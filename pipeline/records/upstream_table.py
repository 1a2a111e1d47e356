"""The records tables of the upstream README: one row per record, read into typed rows.

    rows, warnings = read_track_table(readme_text, track=1)
    rows[0].number, rows[0].claimed_time_s, rows[0].date, rows[0].log_link, rows[0].record_name

A table is a header line `| # | Record time | Description | Date | Log | Contributors |`, its `| - |`
line, and rows `N | time | description | MM/DD/YY | [log](path) | who`. The track-N table is the one
whose log links point into `records/track_N_…/`. Rows without a log link (`none`, `-`, a PR link only)
are kept with `log_link = ""`, so the importer can say which rows it could not import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from pipeline.errors import InputError
from pipeline.plain_text import plain
from pipeline.records.md_scan import link_target, links_to_text

_HEADER = re.compile(r"^\|?\s*#\s*\|\s*Record time\s*\|", re.I)
_ROW = re.compile(r"^\|?\s*(\d+)\s*\|")
_TIME = re.compile(r"^\s*([\d.]+)\s*(second|sec|s|minute|min|hour|h)s?\b", re.I)
_UNIT_S = {"second": 1, "sec": 1, "s": 1, "minute": 60, "min": 60, "hour": 3600, "h": 3600}


@dataclass(frozen=True, kw_only=True)
class TableRow:
    line: int  # 1-based line in the README
    number: str  # the table's "#" (re-timings repeat a number)
    claimed_time: str  # as written: "2.495 minutes"
    claimed_time_s: float | None
    description: str  # markdown links reduced to their text
    date: str  # ISO 8601, "" when unreadable
    log_link: str  # repository-relative path of the log (or its folder); "" when the row has none
    track_folder: str  # "records/track_1_short"; "" when the row has no link into records/
    contributors: str = ""  # the last column (re-timings say there what they re-time)

    @property
    def record_name(self) -> str:
        """The record's folder under the track folder: its name in the registry."""
        if not self.track_folder:
            return ""
        rest = self.log_link[len(self.track_folder) + 1:]
        return rest.split("/", 1)[0]


@dataclass(frozen=True)
class TrackTerms:
    """What the README states above a track's table: its target and the hardware it is run on."""

    target_val_loss: float
    gpu_count: int
    statement: str  # the sentence the target was read from


TRACK1_TERMS = TrackTerms(3.28, 8, "")  # the speedrun's original task, when the README states none
_TARGET_LE = re.compile(r"≤\s*(\d+\.\d+)")
_TARGET_LOSS = re.compile(r"target loss", re.I)
_TO_NUMBER = re.compile(r"\bto (\d+\.\d+)", re.I)
_GPUS = re.compile(r"\b(\d+)\s*x\s*NVIDIA", re.I)


def track_terms(text: str, track: int) -> TrackTerms:
    """The target loss and GPU count stated between the track's heading and its table (track 2's section
    says its target is lowered to 2.92 and "all other rules remain the same": the GPU count carries over)."""
    lines = text.splitlines()
    tables = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    rows = read_track_table(text, track)
    at = max((i for i in tables if rows and i < rows[0].line - 1), default=None)  # this track's header line
    if at is None:
        return TRACK1_TERMS
    start = max((i for i, line in enumerate(lines[:at]) if line.startswith("## ")), default=0)
    section = "\n".join(lines[start:at])
    m = _TARGET_LE.search(section) or _target_to(section)
    gpus = _GPUS.search(section) or _GPUS.search(text)
    statement = ""
    if m:
        statement = section[max(0, section.rfind("\n", 0, m.start()) + 1):section.find("\n", m.end())].strip()
    return TrackTerms(float(m.group(1)) if m else TRACK1_TERMS.target_val_loss,
                      int(gpus.group(1)) if gpus else TRACK1_TERMS.gpu_count, statement)


def plain_text(text: str) -> str:
    """Text safe to store and print: control and format characters (a right-to-left override that reverses
    what a terminal shows, escape sequences) are removed."""
    return plain(text).strip()  # whole escape sequences too (an OSC 8 link leaves nothing behind)


def _target_to(section: str) -> re.Match | None:
    """"target loss ... to N.NN" on one line, in linear time: the first mention on a line is the only start
    looked from (what `target loss[^\n]*?\bto (\\d+\\.\\d+)` matched, without retrying every later mention)."""
    at = 0
    while (mention := _TARGET_LOSS.search(section, at)):
        line_end = section.find("\n", mention.end())
        line_end = len(section) if line_end < 0 else line_end
        if (m := _TO_NUMBER.search(section, mention.end(), line_end)):
            return m
        at = line_end + 1
    return None


def _seconds(text: str) -> float | None:
    m = _TIME.match(text.replace("*", ""))
    if not m:
        return None
    return round(float(m.group(1)) * _UNIT_S[m.group(2).lower()], 3)


def _iso_date(text: str) -> str:
    for fmt in ("%m/%d/%y", "%m/%d/%Y", "%Y-%m-%d"):
        try:
            return datetime.strptime(text.strip(), fmt).date().isoformat()
        except ValueError:
            continue
    return ""


def _row(line_no: int, line: str) -> TableRow:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    cells += [""] * (6 - len(cells))
    number, time_text, description, date_text, log_cell = cells[:5]
    path = (link_target(log_cell, "[log](") or "").strip("/")  # linear time: pipeline/records/md_scan.py
    track = re.match(r"^(records/track_[^/]+)/", path)
    return TableRow(line=line_no, number=number, claimed_time=time_text, claimed_time_s=_seconds(time_text),
                    description=plain_text(links_to_text(description)), date=_iso_date(date_text),
                    log_link=path, track_folder=track.group(1) if track else "",
                    contributors=plain_text(links_to_text(cells[5])))


def _tables(text: str) -> list[list[TableRow]]:
    tables, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if _HEADER.match(line):
            current = []
            tables.append(current)
        elif current is not None and "|" in line:
            if _ROW.match(line):
                current.append(_row(number, line))
        elif current is not None and line.strip():
            current = None
    return tables


def read_track_table(text: str, track: int) -> list[TableRow]:
    """The rows of the track-`track` records table, in table order."""
    prefix = f"records/track_{track}_"
    for rows in _tables(text):
        if any(r.log_link.startswith(prefix) for r in rows):
            return rows
    raise InputError(f"the README has no records table whose logs are under {prefix}…",
                     "point the importer at a clone of modded-nanogpt (its README.md lists the records), "
                     "or pick another --track")
