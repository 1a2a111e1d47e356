"""Issue 14, the data stage: hostile and unlucky input through the real CLI, against real servers on 127.0.0.1.

Each test is named after a finding of the issue. Every one checks the documented exit code, one clear
message (never a traceback) and that nothing was written outside the target folder.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.data.shards import write_shard
from tests.helpers_http import Fault, FileServer
from tests.paths import REPO_ROOT

SHARDS = {"fineweb_val_000000.bin": 1024, "fineweb_train_000001.bin": 1024}  # tokens: 3,072-byte shards
BOMB = ('l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n'
        + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
        + 'description: [*l8, *l8]\n')


@pytest.fixture
def shards(tmp_path) -> dict[str, bytes]:
    rng = np.random.default_rng(1)
    out = {}
    for name, n in SHARDS.items():
        write_shard(tmp_path / name, rng.integers(0, 50257, n))
        out[name] = (tmp_path / name).read_bytes()
        (tmp_path / name).unlink()
    return out


def write_registry(root: Path, shards: dict[str, bytes], locked: bool = True, pattern: str | None = None,
                   extra_lock: str = "", first: int = 1, text: str | None = None) -> Path:
    lines = []
    for name, data in shards.items():
        lines.append(f"  {name}: {{size: {len(data)}, sha256: {hashlib.sha256(data).hexdigest()}}}" if locked
                     else f"  {name}: {{size: , sha256: }}")
    path = root / "datasets" / "toy.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    train = pattern or "fineweb_train_{index:06d}.bin"
    path.write_text(text if text is not None else f"""schema_version: 1
name: toy
source:
  hub: {{repo_id: someone/toy, repo_type: dataset, revision: 0123456789abcdef0123456789abcdef01234567}}
format: {{magic: 20240520, version: 1, header_ints: 256, token_dtype: uint16, tokens_per_shard: 1024, bos: 50256}}
splits:
  val: {{pattern: "fineweb_val_{{index:06d}}.bin", first: 0, count: 1}}
  train: {{pattern: "{train}", first: {first}, count: 1}}
lock:
""" + "\n".join(lines) + "\n" + extra_lock)
    return path


def _without_permission_override() -> None:
    """As root, drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH before exec, so file permissions apply to it too."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


# The CLI runs under a small launcher that reports its child's peak RSS: a child forked straight from pytest
# would inherit pytest's own high-water mark (Linux keeps it across exec), so it is measured one level down.
LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
sys.stderr.write(f"\\nmaxrss_kib={usage.ru_maxrss}\\n")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def repro(tmp_path: Path, *args, registry: Path | None = None, timeout: float = 120, permissions: bool = False):
    """Run the CLI; returns (returncode, stdout, stderr, peak RSS of the CLI process in MiB)."""
    cmd = [sys.executable, "-m", "pipeline", "--root", str(tmp_path / "ws"),
           "--registry", str(registry or tmp_path / "reg"), *map(str, args)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-c", LAUNCHER, *cmd], cwd=REPO_ROOT, capture_output=True, text=True,
                              env=env, timeout=timeout, start_new_session=True,
                              preexec_fn=_without_permission_override if permissions and os.geteuid() == 0 else None)
    except subprocess.TimeoutExpired:
        pytest.fail(f"repro {' '.join(map(str, args))} ran past {timeout} s")
    stderr, _, rss_line = proc.stderr.rpartition("\nmaxrss_kib=")
    assert rss_line, proc.stderr
    assert "Traceback" not in stderr, stderr
    return proc.returncode, proc.stdout, stderr, int(rss_line.strip()) / 1024


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# ---- writes outside the data folder ----------------------------------------------------------------------

def test_lock_key_dotdot_cannot_write_outside_out(tmp_path, shards):
    write_registry(tmp_path / "reg", shards, extra_lock="  ../../evil.bin: {size: 3072, sha256: }\n")
    before = files_under(tmp_path)
    with FileServer({f"/{n}": d for n, d in shards.items()} | {"/../../evil.bin": b"x"}) as mirror:
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out",
                                "--source", mirror.url("/{filename}"))
    assert code == 3 and "lock.../../evil.bin" in err and "not a plain file name" in err
    assert files_under(tmp_path) == before  # nothing written anywhere, the output folder included

    # the same key in the data folder's own data.lock.yaml
    write_registry(tmp_path / "reg", shards)
    out = tmp_path / "deep" / "out"
    out.mkdir(parents=True)
    (out / "data.lock.yaml").write_text("schema_version: 1\ndataset: toy\nfiles:\n"
                                        "  ../../evil.bin: {size: 3072, sha256: " + "0" * 64 + "}\n")
    before = files_under(tmp_path)
    for args in (("data", "verify", out), ("data", "fetch", "--dataset", "toy", "--dir", out, "--source", out)):
        code, _, err, _ = repro(tmp_path, *args)
        assert code == 3 and "files.../../evil.bin" in err, err
    assert not list(tmp_path.rglob("evil.bin")) and files_under(tmp_path) - before <= {"ws"}


@pytest.mark.parametrize("pattern, first", [("../escape_{index:06d}.bin", 1), ("/tmp/abs_{index:06d}.bin", 1),
                                            ("x{index:c}evil.bin", 47)],
                         ids=["dotdot", "absolute", "formats-to-a-slash"])
def test_name_pattern_that_formats_to_a_slash_cannot_write_outside_out(tmp_path, shards, pattern, first):
    write_registry(tmp_path / "reg", shards, pattern=pattern, first=first)
    before = files_under(tmp_path)
    with FileServer({}) as mirror:
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out",
                                "--source", mirror.url("/{filename}"))
        assert not mirror.requests
    assert code == 3 and "splits.train.pattern" in err
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("command", ["synth", "tokenize"])
def test_shard_prefix_cannot_write_outside_out(tmp_path, command):
    (tmp_path / "in.txt").write_text("hello world\n")
    args = ("--train-tokens", "1000", "--val-tokens", "10") if command == "synth" else (tmp_path / "in.txt",)
    before = files_under(tmp_path)
    code, _, err, _ = repro(tmp_path, "data", command, *args, "--out", tmp_path / "deep" / "out",
                            "--prefix", "../../escaped", registry=REPO_ROOT / "manifests")
    assert code == 3 and "--prefix '../../escaped'" in err and "path separator" in err
    assert not list(tmp_path.rglob("escaped*")) and not {f for f in files_under(tmp_path) - before
                                                           if not f.startswith(("deep", "ws"))}


def test_dataset_name_dotdot_reads_nothing_outside_the_registry(tmp_path, shards):
    write_registry(tmp_path / "reg", shards)
    code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "../../etc/hostname", "--dir", tmp_path / "out")
    assert code == 3 and "dataset name" in err and not (tmp_path / "out").exists()


# ---- memory blow-ups: YAML alias bombs ---------------------------------------------------------------------

def test_alias_bomb_in_dataset_manifest_is_refused(tmp_path, shards):
    write_registry(tmp_path / "reg", shards, text="schema_version: 1\nname: toy\n" + BOMB)
    code, _, err, peak_mib = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out")
    print(f"peak RSS refusing a 9-level alias bomb (9^9 = 387 M nodes expanded): {peak_mib:.0f} MiB")
    assert code == 3 and "toy.yaml: line 3: an anchor (&l0)" in err and "aliases are not accepted" in err
    assert peak_mib < 200 and not (tmp_path / "out").exists()


def test_alias_bomb_in_data_lock_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "data.lock.yaml").write_text("schema_version: 1\ndataset: toy\n" + BOMB.replace("description", "files"))
    code, _, err, peak_mib = repro(tmp_path, "data", "verify", out, registry=REPO_ROOT / "manifests")
    print(f"peak RSS refusing an alias bomb in data.lock.yaml: {peak_mib:.0f} MiB")
    assert code == 3 and "data.lock.yaml: line 3: an anchor (&l0)" in err and peak_mib < 200


def test_duplicate_keys_in_a_dataset_manifest_are_refused(tmp_path, shards):
    path = write_registry(tmp_path / "reg", shards)
    path.write_text(path.read_text().replace("name: toy\n", "name: toy\nname: toy\n", 1))
    code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out")
    assert code == 3 and "toy.yaml: line 3: duplicate key 'name' (first at line 2)" in err


# ---- fetches that do not stop ------------------------------------------------------------------------------

def test_malformed_206_restarts_once_then_fails(tmp_path, shards):
    write_registry(tmp_path / "reg", shards)
    name = "fineweb_val_000000.bin"
    with FileServer({f"/{name}": shards[name]}) as mirror:
        mirror.fault(f"/{name}", Fault("drop", after=1000, times=-1))
        mirror.broken_ranges[f"/{name}"] = "wrong"
        start = time.monotonic()
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--file", name,
                                "--dir", tmp_path / "out", "--source", mirror.url("/{filename}"), "--backoff", "0.01")
        seconds = time.monotonic() - start
    assert code == 1 and mirror.base in err and "breaks the HTTP range protocol" in err and seconds < 30
    assert not (tmp_path / "out" / name).exists()


def test_endless_body_stops_at_expected_size(tmp_path, shards):
    write_registry(tmp_path / "reg", shards)
    name = "fineweb_val_000000.bin"
    with FileServer({f"/{name}": shards[name]}) as mirror:
        mirror.fault(f"/{name}", Fault("endless", seconds=60, times=-1))
        start = time.monotonic()
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--file", name,
                                "--dir", tmp_path / "out", "--source", mirror.url("/{filename}"), "--backoff", "0.01")
        seconds = time.monotonic() - start
    largest = max((p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file()), default=0)
    assert largest <= 3072  # the lock's size: never a byte more on disk
    assert code == 1 and "more than the expected 3072 bytes" in err and seconds < 30


def test_total_retry_time_is_bounded_by_an_option(tmp_path, shards):
    write_registry(tmp_path / "reg", shards)
    name = "fineweb_val_000000.bin"
    with FileServer({f"/{name}": shards[name]}) as mirror:
        mirror.fault(f"/{name}", Fault("status", status=503, times=-1))
        start = time.monotonic()
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--file", name, "--dir", tmp_path / "o",
                                "--source", mirror.url("/{filename}"), "--retries", "1000", "--backoff", "0.2",
                                "--max-retry-time", "2")
        seconds = time.monotonic() - start
    assert code == 4 and "retrying for more than 2 s" in err and seconds < 20


def test_unreachable_source_exits_4(tmp_path, shards):
    write_registry(tmp_path / "reg", shards)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "o",
                            "--source", f"http://127.0.0.1:{port}/{{filename}}", "--retries", "1", "--backoff", "0.01")
    assert code == 4 and "cannot reach" in err


def test_lock_never_records_a_mirror_etag(tmp_path, shards):
    path = write_registry(tmp_path / "reg", shards, locked=False)
    manifest_before = path.read_bytes()
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        for n, d in shards.items():  # a mirror vouching for its own bytes: ETag and Digest both "match"
            mirror.headers[f"/{n}"] = {"ETag": f'"{hashlib.sha256(d).hexdigest()}"',
                                       "X-Linked-Etag": f'"{hashlib.sha256(d).hexdigest()}"'}
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out",
                                "--source", mirror.url("/{filename}"), "--lock")
        assert code == 3 and "a mirror's own ETag or Digest header is not trusted" in err
        # and with the files already present (fetched without --lock first), --lock still asks the mirror in vain
        assert repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out",
                     "--source", mirror.url("/{filename}"))[0] == 0
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out",
                                "--source", mirror.url("/{filename}"), "--lock")
    assert code == 3 and "vouches for no sha256" in err
    assert path.read_bytes() == manifest_before


# ---- tracebacks where a message was promised ---------------------------------------------------------------

def test_a_directory_where_a_part_or_a_shard_belongs_is_a_clear_error(tmp_path, shards):
    write_registry(tmp_path / "reg", shards)
    name = "fineweb_val_000000.bin"
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        (tmp_path / "a" / name).mkdir(parents=True)
        code, out, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "a",
                                  "--source", mirror.url("/{filename}"))
        assert code == 3 and f"{tmp_path / 'a' / name} is a directory where the shard belongs" in err
        assert "ok   fineweb_train_000001.bin" in out  # the other file is not held up
        code, out, _, _ = repro(tmp_path, "data", "verify", tmp_path / "a")
        assert code == 1 and "is a directory where a shard belongs" in out

        (tmp_path / "b" / ".partial" / f"{name}.part").mkdir(parents=True)
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "b",
                                "--source", mirror.url("/{filename}"))
        assert code == 3 and f"{name}.part is a directory where a partial download belongs" in err


def test_unreadable_shard_manifest_or_output_folder_is_a_clear_error(tmp_path, shards):
    manifest = write_registry(tmp_path / "reg", shards)
    manifest.chmod(0o000)
    code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tmp_path / "out",
                            permissions=True)
    assert code == 3 and f"{manifest}: permission denied" in err
    manifest.chmod(0o644)

    data = tmp_path / "data"
    data.mkdir()
    for n, d in shards.items():
        (data / n).write_bytes(d)
    (data / "fineweb_val_000000.bin").chmod(0o000)
    code, out, _, _ = repro(tmp_path, "data", "verify", data, permissions=True)
    assert code == 1 and "fineweb_val_000000.bin" in out and "cannot be read (Permission denied)" in out

    locked_out = tmp_path / "readonly"
    locked_out.mkdir(mode=0o555)
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", locked_out,
                                "--source", mirror.url("/{filename}"), permissions=True)
    assert code == 3 and f"cannot write into {locked_out}: permission denied" in err
    assert list(locked_out.iterdir()) == []


# ---- full disks and memory not bounded by input ------------------------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path):
    """A real 512 KiB file system (tmpfs; root only): ENOSPC for real."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_enospc_during_fetch_reports_full_disk(tmp_path, tiny_disk):
    rng = np.random.default_rng(2)
    big = {}
    for name in SHARDS:
        write_shard(tmp_path / name, rng.integers(0, 50257, 200_000))  # 400 KB each: two do not fit in 512 KiB
        big[name] = (tmp_path / name).read_bytes()
    write_registry(tmp_path / "reg", big)
    reg = tmp_path / "reg" / "datasets" / "toy.yaml"
    reg.write_text(reg.read_text().replace("tokens_per_shard: 1024", "tokens_per_shard: 200000"))
    with FileServer({f"/{n}": d for n, d in big.items()}) as mirror:
        code, _, err, _ = repro(tmp_path, "data", "fetch", "--dataset", "toy", "--dir", tiny_disk,
                                "--source", mirror.url("/{filename}"), "--jobs", "2")
    assert code == 4 and "the disk is full" in err and "check the network" not in err
    assert "partial downloads" in err and not (tiny_disk / ".partial").exists()


def test_enospc_during_synth_reports_full_disk_and_leaves_nothing(tmp_path, tiny_disk):
    code, _, err, _ = repro(tmp_path, "data", "synth", "--out", tiny_disk / "s", "--train-tokens", "1000000",
                            "--val-tokens", "1000", "--shard-tokens", "100000", registry=REPO_ROOT / "manifests")
    assert code == 4 and "the disk is full" in err and str(tiny_disk / "s") in err
    assert list((tiny_disk / "s").iterdir()) == []  # no partial shard, no finished shards of an incomplete set


def test_synth_at_the_largest_vocab_runs_in_bounded_memory(tmp_path):
    # A dense (vocab+1)^2 transition matrix at --vocab 50255 is 20 GB; the sparse chain is ~10 MB.
    code, out, err, peak_mib = repro(tmp_path, "data", "synth", "--out", tmp_path / "v", "--vocab", "50255",
                                     "--train-tokens", "2000000", "--val-tokens", "100000", timeout=300,
                                     registry=REPO_ROOT / "manifests")
    print(f"peak RSS of synth --vocab 50255: {peak_mib:.0f} MiB")
    assert code == 0, err
    assert peak_mib < 400


def test_synth_memory_does_not_grow_with_the_token_count(tmp_path):
    peaks = {}
    for tokens in (8_000_000, 32_000_000):  # both above one block (4096 walks x 1024 steps)
        code, _, err, peaks[tokens] = repro(tmp_path, "data", "synth", "--out", tmp_path / f"t{tokens}",
                                            "--train-tokens", str(tokens), "--val-tokens", "100000", timeout=300,
                                            registry=REPO_ROOT / "manifests")
        assert code == 0, err
    print(f"peak RSS of synth: {peaks[8_000_000]:.0f} MiB for 8M tokens, {peaks[32_000_000]:.0f} MiB for 32M")
    # holding 24M more tokens (int64 walk states, a whole-shard buffer) would add over 250 MiB; blocks add nothing
    assert peaks[32_000_000] - peaks[8_000_000] < 40
