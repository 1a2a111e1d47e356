"""Which carried files go with which device call, when they do not fit one: each call sends the working tree (tracked
and untracked-not-ignored files) and at most 8 carried paths, 64 MiB in all. Used to bring a session's packed
compile artifacts (benchmarks/device_session.sh, .devcarry/artifacts-<GPU>/) back onto a fresh machine before the
table: each call but the last runs `nvidia-smi -L; bash benchmarks/lease.sh stash`, which keeps its files outside
the tree the next call re-syncs and lists all kept so far; the last carries the shards and starts the session
(lease.sh start adds the stash to its copy of the tree).

    python3 benchmarks/carry_calls.py .devcarry/docs-v1.txz .devcarry/artifacts-H100
        # one line per call: the JSON list for run's carry; the last holds the first file named (the shards), so
        # that the call that starts the session carries what it reads first. Exit 2: a file cannot fit any call.
    python3 benchmarks/carry_calls.py --lease T0 DEVICE_S .devcarry/docs-v1.txz .devcarry/artifacts-H100
        # the same calls with the command each runs ({"carry": [...], "command": "..."}): the stashes, then the
        # table's start with LEASE_T0=T0 (`date +%s` just before the first call) and LEASE_DEVICE_S=DEVICE_S
        # (status's budget_left_s then), written out so that neither is typed by hand
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CALL_BYTES, CALL_PATHS = 64 * 1024 * 1024, 8
SLACK = 1024 * 1024  # the tree changes by a commit or a log between the plan and the calls


def tree_bytes(repo: Path) -> int:
    """What every call sends before its carried paths: tracked files and untracked files git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=True).stdout.split(b"\0")
    paths = [repo / name.decode() for name in listed if name]
    return sum(path.stat().st_size for path in paths if path.is_file())


def files_of(repo: Path, paths: list[str]) -> list[tuple[str, int]]:
    """The named files, and each folder's files in name order, with their sizes."""
    out = []
    for path in paths:
        full = repo / path
        members = sorted(f for f in full.iterdir() if f.is_file()) if full.is_dir() else [full]
        out += [(str(f.relative_to(repo)), f.stat().st_size) for f in members]
    return out


def calls(files: list[tuple[str, int]], room: int) -> list[list[str]]:
    """The files in as few calls of at most `room` bytes and CALL_PATHS paths as first-fit by decreasing size gives;
    the first file (the one the session needs with the start) goes in the last call, which the others fill only where
    no earlier call has room. ValueError: a file larger than a call's room."""
    for name, size in files:
        if size > room:
            raise ValueError(f"{name}: {size} bytes, more than a call carries beside the tree ({room})")
    last: list[tuple[str, int]] = files[:1]
    earlier: list[list[tuple[str, int]]] = []
    for name, size in sorted(files[1:], key=lambda f: -f[1]):  # stable: equal sizes keep their order
        call = next((g for g in [*earlier, last] if sum(s for _, s in g) + size <= room and len(g) < CALL_PATHS), None)
        if call is None:
            earlier.append(call := [])
        call.append((name, size))
    return [[name for name, _ in group] for group in [*earlier, last] if group]


STASH = "nvidia-smi -L; bash benchmarks/lease.sh stash"
START = ("LEASE_DEVICE_S={device_s} LEASE_T0={t0} bash benchmarks/lease.sh start 540 "
         "bash benchmarks/device_session.sh /tmp/lease/ds one")


def lease_calls(groups: list[list[str]], t0: int, device_s: int) -> list[dict]:
    """Each call's carry and command: every call but the last stashes what it carried; the last starts the table's
    session, its clock counted from the first call (t0) with the device time left then."""
    return [{"carry": group, "command": START.format(device_s=device_s, t0=t0) if i == len(groups) - 1 else STASH}
            for i, group in enumerate(groups)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="files or folders under the repository, the one needed first first")
    ap.add_argument("--lease", nargs=2, type=int, metavar=("T0", "DEVICE_S"),
                    help="print each call's command too: LEASE_T0 and LEASE_DEVICE_S of the table's start")
    a = ap.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    room = CALL_BYTES - tree_bytes(repo) - SLACK
    try:
        groups = calls(files_of(repo, a.paths), room)
    except (ValueError, FileNotFoundError) as exc:
        print(f"carry_calls.py: {exc}", file=sys.stderr)
        return 2
    for line in lease_calls(groups, *a.lease) if a.lease else groups:
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
