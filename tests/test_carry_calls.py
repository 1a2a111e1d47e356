"""benchmarks/carry_calls.py: carried files split over device calls (64 MiB a call with the tree, 8 paths).

    .venv/bin/python -m pytest -q tests/test_carry_calls.py
"""

import json
import subprocess
import sys

import pytest

from benchmarks import carry_calls as cc
from tests.paths import REPO_ROOT

MB = 1_000_000


def test_parts_go_one_call_each_when_only_one_fits_and_the_first_file_goes_last():
    """2026-12-05: the tree took 44 MB, so a call had about 21.9 MB for its carried files: one 16 MB part each, and
    the shards (7.4 MB, the file the session reads first) with the start call."""
    files = [("docs.txz", 7_400_000)] + [(f"p{i}", 16 * MB) for i in range(3)] + [("p3", 4 * MB)]
    assert cc.calls(files, 21_946_086) == [["p0", "p3"], ["p1"], ["p2"], ["docs.txz"]]
    assert cc.calls(files, 40 * MB) == [["p2", "p3"], ["docs.txz", "p0", "p1"]]  # the shards ride with parts


def test_the_h100s_artifacts_take_two_calls_not_three():
    """2026-12-06's H100 artifacts (xz) beside a 46.9 MB tree: about 19.2 MB a call. In name order the calls were
    three (native's part and the sums, the record's two parts, the shards); by size, two: the record's parts with
    the sums, then the shards with native's part."""
    room = cc.CALL_BYTES - 46_908_998 - cc.SLACK
    files = [("docs-v1.txz", 7_396_320), ("PARTS.sha256", 294), ("SHA256SUMS", 174), ("native.part-00", 5_697_696),
             ("record.part-00", 16_000_000), ("record.part-01", 1_275_828)]
    assert cc.calls(files, room) == [["record.part-00", "record.part-01", "PARTS.sha256", "SHA256SUMS"],
                                     ["docs-v1.txz", "native.part-00"]]


DOCS_V1_TXZ = 7_396_320  # .devcarry/docs-v1.txz, the shards a table's session reads (tar -cJ of data/docs-v1)


def test_one_call_beside_this_tree_carries_the_shards_and_every_kept_artifact_part():
    """The table's start call carries the shards and the kept compile artifacts (benchmarks/kept_artifacts.json;
    the parts' sizes from the commit that holds them). With the run logs uncompressed the tree was 51 MB on
    2026-12-06 and a 16 MB part fitted no call at all: compress a new lease's logs (docs/device-runs/README.md)."""
    kept = json.loads((REPO_ROOT / "benchmarks" / "kept_artifacts.json").read_text())
    room = cc.CALL_BYTES - cc.tree_bytes(REPO_ROOT) - cc.SLACK
    for gpu, entry in kept.items():
        sizes = [int(subprocess.run(["git", "cat-file", "-s", f"{entry['commit']}:{entry['path']}/{name}"],
                                    cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout)
                 for name in entry["files"]]
        files = [("docs-v1.txz", DOCS_V1_TXZ)] + list(zip(entry["files"], sizes))
        assert len(cc.calls(files, room)) == 1, (gpu, room, sum(sizes))
    assert "H100" in kept


def test_every_call_but_the_last_stashes_and_the_last_starts_the_table_with_the_first_calls_clock():
    """2026-12-06: a LEASE_T0 typed by hand was 54 s late; written out from `date +%s`, it is what was given."""
    two = cc.lease_calls([["record.part-00"], ["docs-v1.txz", "native.part-00"]], 1796535006, 1800)
    assert [c["carry"] for c in two] == [["record.part-00"], ["docs-v1.txz", "native.part-00"]]
    assert two[0]["command"] == "nvidia-smi -L; bash benchmarks/lease.sh stash"
    assert two[1]["command"] == ("LEASE_DEVICE_S=1800 LEASE_T0=1796535006 bash benchmarks/lease.sh start 540 "
                                 "bash benchmarks/device_session.sh /tmp/lease/ds one")
    (only,) = cc.lease_calls([["docs-v1.txz"]], 5, 6)  # nothing but the shards: the start is the one call
    assert only["command"].startswith("LEASE_DEVICE_S=6 LEASE_T0=5 ")


def test_no_call_gets_more_than_eight_paths_and_a_file_too_large_is_named():
    many = [(f"f{i}", 10) for i in range(20)]
    groups = cc.calls(many, 10**9)
    assert sorted(len(group) for group in groups) == [4, 8, 8] and groups[-1][0] == "f0"
    assert sorted(sum(groups, [])) == sorted(name for name, _ in many)
    with pytest.raises(ValueError, match="big: 100 bytes, more than a call carries beside the tree"):
        cc.calls([("big", 100)], 99)


def test_the_command_line_lists_a_folders_files_in_order_and_sizes_the_real_tree(tmp_path):
    folder = REPO_ROOT / ".devcarry" / "carry-calls-test"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for name in ("b.part-01", "a.part-00"):
            (folder / name).write_bytes(b"x" * 100)
        done = subprocess.run([sys.executable, "benchmarks/carry_calls.py", ".devcarry/carry-calls-test"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert [json.loads(line) for line in done.stdout.splitlines()] == [[
            ".devcarry/carry-calls-test/a.part-00", ".devcarry/carry-calls-test/b.part-01"]]
        assert 0 < cc.tree_bytes(REPO_ROOT) < cc.CALL_BYTES
        lease = subprocess.run([sys.executable, "benchmarks/carry_calls.py", "--lease", "7", "1500",
                                ".devcarry/carry-calls-test"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        (call,) = [json.loads(line) for line in lease.stdout.splitlines()]
        assert call["carry"] == [".devcarry/carry-calls-test/a.part-00", ".devcarry/carry-calls-test/b.part-01"]
        assert "LEASE_DEVICE_S=1500 LEASE_T0=7 bash benchmarks/lease.sh start" in call["command"]
        missing = subprocess.run([sys.executable, "benchmarks/carry_calls.py", ".devcarry/nothing-here"],
                                 cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert missing.returncode == 2 and "nothing-here" in missing.stderr
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
