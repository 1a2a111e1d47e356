"""Paths a user gives are read only when they are regular files, and never past their kind's size (issue 30).

Real special files: a FIFO made with mkfifo (opening one for reading blocks until a writer appears) and
/dev/zero (a read of it never ends). Every command runs as a subprocess with a time limit, so a hang fails
the test instead of hanging the suite.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.workspace import CHECKOUT_ROOT
from tests.test_bundle import make_bundle, three_runs

LIMIT_S = 60  # each command answers in a second or two; a FIFO read would block forever


def repro(root: Path, *args) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "pipeline", "--root", str(root), *map(str, args)],
                              capture_output=True, text=True, cwd=CHECKOUT_ROOT, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"`repro {' '.join(map(str, args))}` hung for {LIMIT_S} s") from None


def refused(done: subprocess.CompletedProcess, path: Path, kind: str, code: int = 3) -> None:
    assert done.returncode == code, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert f"{path}" in done.stderr + done.stdout and kind in done.stderr + done.stdout, done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_data_verify_reports_a_fifo_and_a_device_named_like_shards_and_goes_on(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "fineweb_train_000001.bin")
    (data / "fineweb_val_000000.bin").symlink_to("/dev/zero")
    done = repro(tmp_path, "data", "verify", data)
    assert done.returncode == 1, done.stderr
    assert "is a FIFO (named pipe), not a regular file" in done.stdout
    assert "is a character device, not a regular file" in done.stdout
    assert "0 of 2 files ok" in done.stdout


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_public_key_that_is_no_regular_file_is_refused_at_once(tmp_path, fifo, special):
    key = fifo if special == "fifo" else Path(special)
    bundle = make_bundle(three_runs(tmp_path), tmp_path / "bundles")
    done = repro(tmp_path, "bundle", "verify", bundle, "--pubkey", key)
    refused(done, key, "not a regular file")


def _errors_of(code: str, *args: Path) -> list[str]:
    """What `code` (reading sys.argv[1:] with repro's readers) prints, run in a subprocess with a time limit."""
    try:
        done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                              cwd=CHECKOUT_ROOT, timeout=LIMIT_S, env={**os.environ, "PYTHONPATH": str(CHECKOUT_ROOT)})
    except subprocess.TimeoutExpired:
        raise AssertionError(f"reading {args} hung for {LIMIT_S} s") from None
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_signing_key_that_is_no_regular_file_or_too_large_is_refused_at_once(tmp_path, fifo):
    big = tmp_path / "big.pem"
    big.write_bytes(b"-----BEGIN PRIVATE KEY-----\n" + b"A" * (1 << 20))
    code = ("import sys\nfrom pipeline.errors import ReproError\nfrom pipeline.bundle.trust import load_private_key\n"
            "for path in sys.argv[1:]:\n"
            "    try:\n        load_private_key(path)\n    except ReproError as exc:\n        print(exc.what)\n")
    errors = _errors_of(code, Path("/dev/zero"), fifo, big)
    assert len(errors) == 3, errors
    for error, words in zip(errors, ("is a character device", "is a FIFO", "is larger than 64 KiB")):
        assert f"the signing key {words}" in error, error
    runs = three_runs(tmp_path)
    done = repro(tmp_path, "archive", runs[0], "--record", "2025-09-23_MuonCustomSizing", "--sign-key", "/dev/zero",
                 "--out", tmp_path / "out")
    refused(done, Path("/dev/zero"), "not a regular file")


@pytest.mark.parametrize("command", ["verify", "show"])
def test_a_bundle_path_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path, fifo, command):
    for special, kind in ((fifo, "FIFO"), (Path("/dev/zero"), "character device")):
        refused(repro(tmp_path, "bundle", command, special), special, kind)


def test_a_log_or_a_manifest_that_is_a_fifo_is_refused_at_once(tmp_path, fifo):
    code = ("import sys\nfrom pipeline.errors import ReproError\nfrom pipeline.records.logparse import parse_log\n"
            "from pipeline.yamlio import load_file\n"
            "for read in (parse_log, load_file):\n"
            "    try:\n        read(sys.argv[1])\n    except ReproError as exc:\n        print(exc.what)\n")
    assert _errors_of(code, fifo) == [
        f"{fifo}: the log is a FIFO (named pipe), not a regular file (it is not read: a pipe or a device could block "
        "or never end)",
        f"{fifo}: the manifest is a FIFO (named pipe), not a regular file (it is not read: a pipe or a device could "
        "block or never end)"]
    registry = tmp_path / "registry"
    (registry / "records").mkdir(parents=True)
    os.mkfifo(registry / "records" / "fifo-record.yaml")
    done = subprocess.run([sys.executable, "-m", "pipeline", "--registry", str(registry), "records", "show",
                           "fifo-record"], capture_output=True, text=True, cwd=CHECKOUT_ROOT, timeout=LIMIT_S)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr


# ---- bundle show checks what it shows ----------------------------------------------------------------

def test_bundle_show_of_a_truncated_or_changed_bundle_exits_non_zero_and_says_so(tmp_path):
    good = make_bundle(three_runs(tmp_path), tmp_path / "bundles")
    shown = repro(tmp_path, "bundle", "show", good)
    assert shown.returncode == 0 and "NOT intact" not in shown.stdout, shown.stderr
    raw = gzip.decompress(good.read_bytes())
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(gzip.compress(raw[: len(raw) * 2 // 3]))  # cut inside a later member
    changed = tmp_path / "changed.tar.gz"
    at = raw.index(b"step:") + 5  # one byte of a run's log, not of the manifest
    changed.write_bytes(gzip.compress(raw[:at] + (b"9" if raw[at:at + 1] != b"9" else b"8") + raw[at + 1:]))
    cut_gzip = tmp_path / "cut-gzip.tar.gz"
    cut_gzip.write_bytes(good.read_bytes()[:-200])
    for bad, words in ((truncated, "truncated"), (changed, "sha256 differs"), (cut_gzip, "damaged or truncated")):
        shown = repro(tmp_path, "bundle", "show", bad)
        assert shown.returncode == 1, f"{bad.name}: exit {shown.returncode}\n{shown.stdout}"  # not intact, either way
        if shown.returncode == 1:
            assert "bundle NOT intact" in shown.stdout and words in shown.stdout, shown.stdout
        else:  # the manifest itself was cut off: nothing to show
            assert "no readable manifest.yaml" in shown.stderr, shown.stderr
        as_json = repro(tmp_path, "bundle", "show", "--json", bad)
        if as_json.returncode == 1:
            assert json.loads(as_json.stdout)["intact"] is False
