"""README text is parsed in time linear in its length (issue 38): no backtracking regular expression on
untrusted text, and no step that is quadratic in the number of rows.

Each hostile line is timed at two sizes 100x apart: linear code takes about 100x as long on the larger; the
regular expressions it replaced took 10,000x (a crafted markdown link line took 84 s)."""

from __future__ import annotations

import re
import time

import pytest

from pipeline.records.importer import _names
from pipeline.records.md_scan import link_target, links_to_text
from pipeline.records.quoted_stats import quoted_statistics
from pipeline.records.upstream_table import TableRow, read_track_table, track_terms

HEADER = "| # | Record time | Description | Date | Log | Contributors |\n| - | - | - | - | - | - |\n"
GOOD_ROW = "1 | 1.5 minutes | fine | 07/17/26 | [log](records/track_1_short/2026-07-17_X/a.txt) | @a\n"


def _table_with(cell: str) -> str:
    return HEADER + GOOD_ROW + f"2 | 1.4 minutes | {cell} | 07/18/26 | {cell} | @b\n"


def _seconds(fn, text: str, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


# (what, the function, a piece repeated to make a hostile line); the size is 2,000 and 200,000 pieces
CASES = [
    ("description link brackets", lambda t: read_track_table(_table_with(t), 1), "["),
    ("description unclosed links", lambda t: read_track_table(_table_with(t), 1), "[a]("),
    ("log links without end", lambda t: read_track_table(_table_with(t), 1), "[log]("),
    ("target mentions", lambda t: track_terms("## Track 1\n" + t + "\n" + _table_with("x"), 1), "target loss "),
    ("gpu digits", lambda t: track_terms("## Track 1\n" + t + "\n" + _table_with("x"), 1), "1 "),
    ("significance links", lambda t: quoted_statistics(t), "statistical significance ](http://"),
    ("significance no link", lambda t: quoted_statistics(t), "statistical significance "),
    ("losses lists", lambda t: quoted_statistics(t), "losses = [1,"),
]


@pytest.mark.parametrize("what, fn, piece", CASES, ids=[c[0] for c in CASES])
def test_a_100x_longer_hostile_line_takes_about_100x_as_long(what, fn, piece):
    small, large = piece * 2_000, piece * 200_000
    t_small, t_large = _seconds(fn, small, repeat=5), _seconds(fn, large)
    # about 100x; the slack (20x, and a second) absorbs a small input's cache effects and a busy machine, while
    # a quadratic scan takes 10,000x (minutes at this size)
    assert t_large < 20 * 100 * t_small + 1.0, f"{what}: {t_small:.4f} s -> {t_large:.4f} s"


def test_the_linear_scanners_match_the_expressions_they_replace():
    md = re.compile(r"\[([^\]]*)\]\([^)]*\)")
    log = re.compile(r"\[log\]\(([^)\s]+)\)", re.I)
    web = re.compile(r"\]\((https?://[^)\s]+)\)", re.I)
    pieces = ["[", "]", "(", ")", "a", " ", "[log](", "[LOG](", "](", "http://", "HTTPS://x", "https:/", "\n"]
    import random

    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert links_to_text(text) == md.sub(r"\1", text), text
        m = log.search(text)
        assert link_target(text, "[log](") == (m.group(1) if m else None), text
        m = web.search(text)
        assert link_target(text, "](", ("http://", "https://")) == (m.group(1) if m else None), text


def test_printing_100000_skipped_rows_is_linear():
    """Rows whose folder is not in the clone are counted in one line; the others listed, in one pass."""
    from pipeline.cli.records import not_imported_text

    def rows(n: int) -> list[str]:
        return [f"row {i} (07/17/26, 'r{i}'): " + ("records/x is not in this clone" if i % 2 else "no log link")
                for i in range(n)]

    small, large = rows(1_000), rows(100_000)
    t_small, t_large = _seconds(not_imported_text, small, repeat=5), _seconds(not_imported_text, large)
    assert t_large < 20 * 100 * t_small + 1.0, (t_small, t_large)
    text = not_imported_text(small)
    assert text.startswith("  not imported: 500 row(s) whose log folder is not in this clone")
    assert text.count("\n") == 501 and "row 0 (07/17/26, 'r0'): no log link\n" in text


def _row(line: int, number: str, folder: str, date: str = "") -> TableRow:
    return TableRow(line=line, number=number, claimed_time="1 minute", claimed_time_s=60.0, description="d",
                    date=date, log_link=f"records/track_1_short/{folder}/a.txt", track_folder="records/track_1_short")


def test_rows_whose_names_collide_each_get_a_name_of_their_own():
    """Four rows, two of one folder sharing a number, one folder named like another's -rowN: four names."""
    rows = [_row(10, "3", "2026-01-01_A", "2026-01-01"), _row(11, "3", "2026-01-01_A"), _row(12, "3", "2026-01-01_A"),
            _row(13, "5", "2026-01-01_A-row3")]
    names = _names(rows)
    assert len(set(names.values())) == 4, names
    assert names[10] == "2026-01-01_A" and names[13] == "2026-01-01_A-row3"
