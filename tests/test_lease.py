"""benchmarks/lease.sh: a long command detached from a copy of the tree, waited on and collected by device calls.

    .venv/bin/python -m pytest -q tests/test_lease.py

Run here with a real detached process (setsid), as the device runs it; benchmarks/lever_lease.sh's use of it is in
tests/test_lever_ab.py.
"""

import os
import subprocess
import tarfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def lease(tmp_path: Path, *args: str, timeout: int = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, OUT=str(tmp_path / "out"), LEASE_TREE=str(tmp_path / "tree"),
               LEASE_DIR=str(tmp_path / "lease"), LEASE_NAME="table", **(env or {}))
    (tmp_path / "out").mkdir(exist_ok=True)
    return subprocess.run(["bash", "benchmarks/lease.sh", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def archived(tmp_path: Path) -> dict[str, bytes]:
    with tarfile.open(tmp_path / "out" / "table.tgz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def test_the_command_runs_in_the_copy_and_its_results_come_back_without_caches(tmp_path):
    script = ('pwd > "$LEASE_DIR/where.txt"; mkdir -p "$LEASE_DIR/ds/cache"; echo big > "$LEASE_DIR/ds/cache/x";'
              'echo big > "$LEASE_DIR/ds/artifacts-record.bin"; echo row > "$LEASE_DIR/ds/summary.md"; exit 4')
    done = lease(tmp_path, "start", "30", "bash", "-c", script)
    assert done.returncode == 0, done.stderr
    assert "session rc 4" in done.stdout and "all-done" in done.stdout  # the wait ended with it, not at 30 s
    files = archived(tmp_path)
    assert files["lease/where.txt"].decode().strip() == str(tmp_path / "tree")  # the copy, not the checkout
    assert files["lease/ds/summary.md"] == b"row\n"
    assert not [name for name in files if "cache" in name or name.endswith(".bin")]
    assert (tmp_path / "tree" / "benchmarks" / "lease.sh").is_file() and not (tmp_path / "tree" / ".venv").exists()


def test_a_session_that_fails_shows_its_own_output(tmp_path):
    """2026-12-05: device_session.sh refuses an H100 on its stderr, before it has a results folder; the call that
    started it must say why, not only "session rc 3". A session that succeeds shows its progress alone."""
    refused = lease(tmp_path, "start", "30", "bash", "-c", 'echo "phase one does not fit on an H100" >&2; exit 3')
    assert "session rc 3" in refused.stdout and "does not fit on an H100" in refused.stdout
    done = lease(tmp_path, "start", "30", "bash", "-c", "echo chatter")
    assert "session rc 0" in done.stdout and "chatter" not in done.stdout


def test_the_carried_shards_are_unpacked_into_the_copy(tmp_path):
    """docs-v1 travels as .devcarry/docs-v1.txz (the tree and the carry share one call's 64 MiB): the command finds
    the shards as .devcarry/docs-v1 in the copy, byte for byte."""
    src = tmp_path / "src"
    (src / "shards").mkdir(parents=True)
    shard = os.urandom(4096)
    (src / "shards" / "fineweb_val_000000.bin").write_bytes(shard)
    (src / ".devcarry").mkdir()
    subprocess.run(["tar", "-cJf", str(src / ".devcarry" / "docs-v1.txz"), "-C", str(src / "shards"), "."], check=True)
    script = ('cmp -s .devcarry/docs-v1/fineweb_val_000000.bin shards/fineweb_val_000000.bin'
              ' && echo same > "$LEASE_DIR/x"')
    done = lease(tmp_path, "start", "30", "bash", "-c", script, env={"LEASE_SRC": str(src)})
    assert done.returncode == 0 and "session rc 0" in done.stdout, done.stdout + done.stderr
    assert archived(tmp_path)["lease/x"] == b"same\n"


def test_a_poll_waits_for_a_running_session_and_says_so_on_a_fresh_machine(tmp_path):
    done = lease(tmp_path, "start", "5", "bash", "-c", 'sleep 15; echo late > "$LEASE_DIR/late.txt"')
    assert done.returncode == 0 and "all-done" not in done.stdout, done.stdout  # back after its 5 s, still running
    polled = lease(tmp_path, "poll", "40")
    assert polled.returncode == 0 and "session rc 0" in polled.stdout, polled.stdout
    assert archived(tmp_path)["lease/late.txt"] == b"late\n"
    fresh = lease(tmp_path / "out", "poll", "540")  # another LEASE_DIR: nothing started there
    assert fresh.returncode == 3 and "no lease session on this machine" in fresh.stderr


def test_a_start_without_a_command_is_refused(tmp_path):
    done = lease(tmp_path, "start", "30")
    assert done.returncode == 2 and "usage: lease.sh start SECONDS COMMAND" in done.stderr


def test_the_start_gives_the_command_what_the_lease_held_and_a_poll_shows_nested_progress(tmp_path):
    """LEASE_T0 (the caller's clock at its device call) becomes LEASE_HELD_S, the session's measured start; a T0
    that cannot be a start is ignored with a line saying so. The command's own progress.txt, in a results folder
    below LEASE_DIR as device_session.sh keeps it, is what the call prints (on 2026-12-04 it printed "(no progress
    yet)" for 18 minutes)."""
    script = 'mkdir -p "$LEASE_DIR/ds"; echo "held ${LEASE_HELD_S:-none}" > "$LEASE_DIR/ds/progress.txt"'
    t0 = int(time.time()) - 40
    done = lease(tmp_path, "start", "30", "bash", "-c", script, env={"LEASE_T0": str(t0)})
    assert done.returncode == 0, done.stderr
    held = int(done.stdout.split("held ")[1].split()[0])
    assert 40 <= held <= 45 and "(no progress yet)" not in done.stdout
    stale = lease(tmp_path, "start", "30", "bash", "-c", script, env={"LEASE_T0": str(t0 - 3600)})
    assert "held none" in stale.stdout and "LEASE_T0 is 36" in stale.stdout


def test_parts_come_back_four_a_call_beside_the_tarball_never_inside_it(tmp_path):
    """device_session.sh packs compile artifacts into parts of 16 MB under a folder named parts; one call brings back
    64 MiB at most, so each collection copies the next four to $OUT and moves them to parts-sent/."""
    script = ('mkdir -p "$LEASE_DIR/ds/parts"; for i in 0 1 2 3 4 5; do '
              'echo "$i" > "$LEASE_DIR/ds/parts/a.xz.part-0$i"; done; echo sums > "$LEASE_DIR/ds/parts/SHA256SUMS"')
    done = lease(tmp_path, "start", "30", "bash", "-c", script)
    assert done.returncode == 0 and "parts sent: 4; left: 3" in done.stdout, done.stdout + done.stderr
    first = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert first == ["SHA256SUMS", "a.xz.part-00", "a.xz.part-01", "a.xz.part-02", "table.tgz"]
    assert not [name for name in archived(tmp_path) if "part" in name or "SHA256SUMS" in name]
    for f in (tmp_path / "out").iterdir():
        f.unlink()
    done = lease(tmp_path, "poll", "5")
    assert done.returncode == 0 and "parts sent: 3; left: 0" in done.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "a.xz.part-03", "a.xz.part-04", "a.xz.part-05", "table.tgz"]
    assert (tmp_path / "out" / "a.xz.part-04").read_text() == "4\n"
    done = lease(tmp_path, "poll", "5")
    assert "parts sent" not in done.stdout


def test_a_poll_returns_as_soon_as_parts_are_packed(tmp_path):
    """A machine taken back loses what it has not sent (2026-12-05: a 540 s poll lost with its machine): a wait ends
    at the first part packed, not at its full length, while the session runs on."""
    script = 'sleep 3; mkdir -p "$LEASE_DIR/ds/parts"; echo 0 > "$LEASE_DIR/ds/parts/a.xz.part-00"; sleep 60'
    began = time.monotonic()
    done = lease(tmp_path, "start", "50", "bash", "-c", script)
    assert done.returncode == 0 and "parts sent: 1; left: 0" in done.stdout, done.stdout + done.stderr
    assert time.monotonic() - began < 20 and "all-done" not in done.stdout


def test_files_stashed_by_earlier_calls_join_the_copy_under_what_the_start_carried(tmp_path):
    """Compile artifacts need several calls (64 MiB a call, the tree 46 MB): each carry call stashes its .devcarry/
    outside the tree the next call re-syncs, and the start adds the stash to its copy. A file the start's own call
    carried is not overwritten by an older stashed one."""
    stash = {"LEASE_STASH": str(tmp_path / "stash")}
    first, second = tmp_path / "call1", tmp_path / "call2"
    (first / ".devcarry" / "artifacts-H100").mkdir(parents=True)
    (first / ".devcarry" / "artifacts-H100" / "native.part-00").write_bytes(b"n" * 1000)
    (first / ".devcarry" / "artifacts-H100" / "SHA256SUMS").write_text("old\n")
    listed = lease(tmp_path, "stash", env={**stash, "LEASE_SRC": str(first)})
    assert listed.returncode == 0, listed.stderr
    assert "1000 .devcarry/artifacts-H100/native.part-00" in listed.stdout
    (second / ".devcarry" / "artifacts-H100").mkdir(parents=True)
    (second / ".devcarry" / "artifacts-H100" / "SHA256SUMS").write_text("new\n")
    script = 'ls .devcarry/artifacts-H100 > "$LEASE_DIR/x"; cat .devcarry/artifacts-H100/SHA256SUMS >> "$LEASE_DIR/x"'
    done = lease(tmp_path, "start", "30", "bash", "-c", script, env={**stash, "LEASE_SRC": str(second)})
    assert "session rc 0" in done.stdout, done.stdout + done.stderr
    assert archived(tmp_path)["lease/x"] == b"SHA256SUMS\nnative.part-00\nnew\n"
    empty = lease(tmp_path, "stash", env={**stash, "LEASE_SRC": str(tmp_path / "nothing")})
    assert empty.returncode == 2 and "nothing to stash" in empty.stderr
