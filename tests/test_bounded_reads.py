"""One bounded reader for every file the tool is given or finds (pipeline/regular_file.py), issue 38.

The first test greps pipeline/ for `open(`, `read_text(` and `read_bytes(` outside regular_file.py; each
place left is listed below with why it is not a file the tool is given or finds. A new read of a user's
file through any other path fails here. The others give the tool the files the hostile set used: a FIFO,
/dev/zero and a sparse file of gigabytes, each refused by name in seconds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

PIPELINE = REPO_ROOT / "pipeline"
CALL = re.compile(r"(?<![\w])(?:open|read_text|read_bytes)\(")

# (file under pipeline/, a piece of the line) -> why it is not an unbounded read of a file the tool is given
ALLOWED = {
    ("records/log_cache.py", "path.read_bytes())"): "the tool's own source files, hashed into the memo's key",
    ("atomic.py", "fd = os.open(folder, os.O_RDONLY)"): "a folder opened to fsync it",
    ("atomic.py", "f = open(tmp, mode"): "writes the tool's own temporary file",
    ("campaign/owner.py", "os.open(path, os.O_RDWR | os.O_CREAT"): "the campaign's owner lock (flock), not read",
    ("campaign/owner.py", "os.open(path, os.O_RDWR | os.O_CLOEXEC)"): "the same lock, taken again",
    ("campaign/engines.py", "with open(log, \"ab\") as out:"): "appends a job's output to the tool's own log",
    ("campaign/work.py", "fh = open(lock, \"a\")"): "a lock file (flock), never read",
    ("campaign/status.py", "with open(path / \"stdout.txt\", \"ab\")"): "appends to a run's stdout",
    ("http.py", "with open(path, \"rb\") as f:  # hash what is already there"):
        "the tool's own partial download (.part), resumed; its size is bounded by the download's limit",
    ("http.py", "with open(self.path, \"rb\") as f:"): "the first bytes of the tool's own .part file",
    ("http.py", "self.handle = open(self.path, \"ab\""): "appends to the tool's own .part file",
    ("bundle/archive.py", "tarfile.open(fileobj=gz, mode=\"w\""): "writes the bundle",
    ("preflight/parse.py", "Path(\"nvidia-smi-q.xml\").read_text()"): "docstring example",
    ("preflight/parse.py", "Path(\"nvidia-smi-topo.txt\").read_text()"): "docstring example",
    ("preflight/collect.py", "return Path(path).read_text()"): "/proc/meminfo and /etc/os-release of this machine",
    ("env/compare.py", "tarfile.open(fileobj=layer_stream, mode=\"r|\")"): "a stream from the Docker engine",
    ("env/compare.py", "tarfile.open(fileobj=_ChunkReader("): "a stream from the Docker engine",
    ("env/venv.py", "with tarfile.open(archive) as tar:"):
        "a wheelhouse archive whose sha256 was checked against the lock first (sha256_file: regular files only)",
    ("env/venv.py", "with open(path.parent / f\".{key}.lock\", \"w\")"): "a lock file (flock), never read",
    ("env/fa3.py", "tarfile.open(fileobj=tar_file, mode=\"w\""): "writes the FA3 source archive",
    ("data/verify.py", "os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))"): "non-blocking open to test access",
    ("data/fetch.py", "with open(path, \"rb\") as f:"): "the tool's own finished download, opened to fsync it",
    ("data/shards.py", "self.file = open(self.tmp, \"wb\")"): "writes a shard",
    ("runs/launch.py", "self._file = open(path, \"ab\")"): "appends to a run's own output file",
    ("runs/runtime_host.py", "Path(entry.path, \"stat\").read_text()"): "/proc/<pid>/stat of this machine",
    ("probe.py", "open(\"/etc/repro/fa3.json\")"): "the image's own build record, read inside the image",
    ("probe.py", "open(\"/etc/repro/environment.json\")"): "the image's own build record, read inside the image",
    ("pages/page.py", "joinpath(\"package_data\", \"plotly.min.js\").read_bytes()"):
        "the installed plotly package's file (pinned by sha256 in requirements.lock)",
    ("folderlock.py", "fd = os.open(self.path, os.O_RDWR | os.O_CREAT"): "a lock file (flock), never read",
}


def _calls() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PIPELINE.rglob("*.py")):
        rel = path.relative_to(PIPELINE).as_posix()
        if rel == "regular_file.py":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if CALL.search(line):
                found.append((rel, line.strip()))
    return found


def test_every_read_of_a_file_goes_through_regular_file_or_is_listed_with_its_reason():
    calls = _calls()
    unlisted = [f"{rel}: {line}" for rel, line in calls
                if not any(rel == f and piece in line for f, piece in ALLOWED)]
    assert not unlisted, "read through pipeline/regular_file.py, or list it in ALLOWED with why:\n" + \
        "\n".join(unlisted)
    stale = [key for key in ALLOWED if not any(rel == key[0] and key[1] in line for rel, line in calls)]
    assert not stale, f"ALLOWED lists places that are gone: {stale}"


def repro(*args, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "REPRO_HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


@pytest.fixture
def hostile(tmp_path):
    """A FIFO, a link to /dev/zero and a 6 GiB sparse file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(6 << 30)
    return {"fifo": fifo, "zero": zero, "sparse": sparse}


def _timed(*args, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = repro(*args, cwd=cwd)
    return done, time.monotonic() - start


@pytest.mark.parametrize("kind", ["fifo", "zero", "sparse"])
def test_a_state_file_that_is_not_a_file_is_refused_by_name(tmp_path, hostile, kind):
    """`report --html WORK` and `reproduce --work WORK` with reproduce-state.json a FIFO, /dev/zero or 6 GiB."""
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    (work / "reproduce-state.json").symlink_to(hostile[kind])
    done, took = _timed("report", "--html", work, "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 3 and took < 30, (done.returncode, took, done.stderr)
    assert "reproduce-state.json" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "zero", "sparse"])
def test_a_check_file_or_program_source_that_is_not_a_file_is_refused_by_name(tmp_path, hostile, kind):
    done, took = _timed("records", "site", "--out", tmp_path / "site", "--check", hostile[kind], cwd=tmp_path)
    assert done.returncode == 3 and took < 30 and "Traceback" not in done.stderr, (took, done.stderr)
    assert str(hostile[kind]) in done.stderr
    done, took = _timed("reproduce", "--record", "2026-07-17_FP8DownProjection", "--plan", "--program-source",
                        hostile[kind], cwd=tmp_path)
    assert done.returncode == 1 and took < 30 and "Traceback" not in done.stderr, (took, done.stderr)
    refusal = next(line for line in done.stdout.splitlines() if "cannot: program: " in line)  # names the file
    assert "not a regular file" in refusal or "larger than 64 MiB" in refusal, refusal


def test_a_huge_readme_is_refused_before_it_is_read(tmp_path):
    clone = tmp_path / "clone"
    (clone / "records").mkdir(parents=True)
    with open(clone / "README.md", "wb") as f:
        f.truncate(2 << 30)
    done, took = _timed("--registry", tmp_path / "reg", "records", "import", clone, "--commit", "a" * 40,
                        "--dry-run", cwd=tmp_path)
    (tmp_path / "reg" / "records").mkdir(parents=True, exist_ok=True)
    done, took = _timed("--registry", tmp_path / "reg", "records", "import", clone, "--commit", "a" * 40, cwd=tmp_path)
    assert done.returncode == 3 and took < 30, (took, done.stderr)
    assert "README" in done.stderr and "larger than" in done.stderr and "Traceback" not in done.stderr


def test_a_sparse_run_log_is_judged_in_bounded_memory(tmp_path, hostile):
    """A 6 GiB sparse log.txt: streamed in bounded lines (never read whole), the run judged invalid."""
    from tests.test_bundle import three_runs

    runs = three_runs(tmp_path / "w")
    (runs[0] / "log.txt").unlink()
    (runs[0] / "log.txt").symlink_to(hostile["sparse"])
    for args in (("verify", *runs), ("report", "--html", *runs, "--out", tmp_path / "out")):
        done = subprocess.run(["/usr/bin/time", "-f", "PEAK_KB %M", sys.executable, "-m", "pipeline", *map(str, args)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={**os.environ, "REPRO_HOME": str(tmp_path)})
        peak_kb = int(done.stderr.rsplit("PEAK_KB ", 1)[1].split()[0])
        assert "Traceback" not in done.stderr and peak_kb < 1 << 20, (args[0], peak_kb, done.stderr[-2000:])
        assert done.returncode in (0, 1), (args[0], done.returncode, done.stderr[-2000:])
    assert "invalid" in repro("verify", *runs, cwd=tmp_path).stdout


def test_fetch_logs_from_a_folder_checks_before_it_copies(tmp_path, hostile):
    """A 2 GiB file where a pinned log belongs: refused by its size, nothing copied into the cache."""
    record = "2025-09-23_MuonCustomSizing"
    source = tmp_path / "from"
    source.mkdir()
    for name in ("b067b4ac-72a6-4436-a6f8-ea51c1efeef3.txt", "b5ac44e6-704e-4fb3-a383-cfe5fcad9db1.txt"):
        with open(source / name, "wb") as f:
            f.truncate(2 << 30)
    done, took = _timed("records", "fetch-logs", record, "--from", source, cwd=tmp_path)
    assert done.returncode == 1 and took < 30 and "Traceback" not in done.stderr, (took, done.stderr)
    assert "b067b4ac-72a6-4436-a6f8-ea51c1efeef3.txt: the log is larger than 64 MiB" in done.stderr
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size > 1 << 20
                and source not in p.parents and p != hostile["sparse"]]


def test_a_60_mb_pinned_program_is_refused_before_it_is_parsed(tmp_path):
    """A manifest may pin anything: a 60 MB program passes its sha256 but is never parsed (gigabytes)."""
    import dataclasses

    from pipeline.errors import CheckFailed
    from pipeline.hashing import sha256_bytes
    from pipeline.records.model import load_record
    from pipeline.records.program import resolve_program

    program = b"x = 1\n" * (10 << 20)  # 60 MiB of valid Python
    record = load_record("2025-09-23_MuonCustomSizing", REPO_ROOT / "manifests" / "records")
    logs = (dataclasses.replace(record.logs[0], program_sha256=sha256_bytes(program), files=()),) + record.logs[1:]
    record = dataclasses.replace(record, logs=logs, program=dataclasses.replace(record.program, fingerprint=""))
    source = tmp_path / "train_gpt.py"
    source.write_bytes(program)
    start = time.monotonic()
    with pytest.raises(CheckFailed, match="larger than the 8 MiB any record's program could be"):
        resolve_program(record, str(source))
    assert time.monotonic() - start < 20
