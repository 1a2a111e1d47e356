"""Issue 14: hostile and unlucky bundles. Bounded memory and time, no member name on disk, no traceback."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from pipeline.bundle.archive import RUN_FILES, archive
from pipeline.records.model import load_record
from pipeline.workspace import CHECKOUT_ROOT
from tests.test_bundle import (
    RECORD,
    RECORDS,
    SOURCES,
    entry,
    make_data_dir,
    make_run,
    read_all,
    repro,
    three_runs,
    verify_bundle,
    write_all,
)
from tests.test_bundle_trust import rebuilt

BOMB = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
                 + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]) + "\n"

# Runs `repro bundle verify` in a child with an address-space cap and prints its peak RSS (KiB) last.
MEASURE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from pipeline.cli import main
try:
    main(sys.argv[1:])
finally:
    # VmHWM starts afresh at exec; ru_maxrss would carry pytest's high-water mark over from the fork
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(f"peak-rss-kib {int(hwm.split()[1])}", file=sys.stderr)
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    return archive(load_record(RECORD, RECORDS), three_runs(root), root / "bundles", sources=SOURCES, environ={},
                   work_dir=root).path


def test_alias_bomb_in_bundle_manifest(bundle, tmp_path):
    def bomb(files):
        files["manifest.yaml"] = BOMB.encode() + b"schema_version: 2\n"

    bad = rebuilt(bundle, tmp_path / "bomb.tar.gz", bomb)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", MEASURE, "bundle", "verify", str(bad)], capture_output=True,
                          text=True, cwd=CHECKOUT_ROOT, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}, timeout=300)
    seconds = time.monotonic() - started
    rss_mib = int(done.stderr.rsplit("peak-rss-kib ", 1)[1].split()[0]) / 1024
    print(f"alias bomb: exit {done.returncode}, {seconds:.1f} s, peak RSS {rss_mib:.0f} MiB")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "manifest.yaml: " in done.stdout and "anchors and aliases are not accepted" in done.stdout
    assert rss_mib < 400


def test_member_over_name_max(bundle, tmp_path):
    top = bundle.name[:-len(".tar.gz")]
    long_run = "r" * 300
    members = read_all(bundle) + [entry(f"{top}/runs/{long_run}/log.txt", b"step:1/1 val_loss:3.0\n"),
                                  entry(f"{top}/{'n' * 256}", b"x")]
    bad = write_all(tmp_path / "long.tar.gz", members)
    result = repro("bundle", "verify", bad)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "OSError" not in result.stderr
    assert f"runs/{long_run}/log.txt: a path component is 300 bytes, over NAME_MAX (255)" in result.stdout
    assert "a path component is 256 bytes, over NAME_MAX (255)" in result.stdout
    # the bundle's own file name over NAME_MAX: a message and exit 3, not a traceback
    too_long = repro("bundle", "verify", tmp_path / ("b" * 300 + ".tar.gz"))
    assert too_long.returncode == 3 and "too long" in too_long.stderr and "Traceback" not in too_long.stderr


def huge_member_bundle(path: Path, declared: int, fmt: int) -> Path:
    """A small file whose tar stream really holds a `declared`-byte member: gzip members of zeros, repeated."""
    info = tarfile.TarInfo("b/runs/20261129T105700Z-aaaa/log.txt")
    info.size, info.mode = declared, 0o644
    head = tarfile.TarInfo("b/SHA256SUMS")
    head.size = 0
    chunk = 1 << 20
    zeros = gzip.compress(bytes(chunk), compresslevel=9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head.tobuf(fmt) + info.tobuf(fmt)))
        for _ in range(declared // chunk):
            f.write(zeros)
    return path


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=["pax", "gnu-base256"])
def test_huge_member_rejected_fast(tmp_path, fmt):
    path = huge_member_bundle(tmp_path / "huge.tar.gz", 20 << 30, fmt)
    size_mb = path.stat().st_size / 1e6
    assert 15 < size_mb < 30  # the case: ~21 MB on disk, 20 GiB inside
    started = time.monotonic()
    check = verify_bundle(path)
    seconds = time.monotonic() - started
    print(f"{size_mb:.0f} MB bundle with a 20 GiB member rejected in {seconds * 1000:.0f} ms")
    assert seconds < 0.5
    assert any(p.member == "runs/20261129T105700Z-aaaa/log.txt" and p.problem.startswith(
        f"{20 << 30} bytes, over the {256 << 20}-byte member limit (checked against its header before reading")
        for p in check.problems)
    assert not check.ok and check.recomputed_outcome is None


def test_total_size_cap(bundle):
    check = verify_bundle(bundle, max_total_bytes=100_000)
    assert any(p.member == "(archive)" and "total limit" in p.problem for p in check.problems)


def test_oversized_pax_header_is_refused(tmp_path):
    info = tarfile.TarInfo("b/x")
    info.pax_headers = {"comment": "c" * (1 << 17)}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(b""))
    path = tmp_path / "pax.tar.gz"
    path.write_bytes(gzip.compress(buf.getvalue()))
    check = verify_bundle(path)
    assert any("over the 65536-byte limit for names and attributes" in p.problem for p in check.problems)


def test_nothing_is_written_under_member_names(bundle, tmp_path, monkeypatch):
    """Verification writes only generated names (r00000/log.txt ...), whatever the members are called."""
    import pipeline.bundle.judging as judging

    seen: list[str] = []
    real = Path.write_bytes

    def spy(self, data):
        seen.append(str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", spy)
    assert verify_bundle(bundle).ok
    assert seen and all("/repro-judge-" in p or "/repro-lock-" in p or "/repro-bundled-record-" in p for p in seen)
    assert not any("20261129T" in p for p in seen)  # run ids never reach the file system
    assert set(judging.JUDGE_INPUTS) <= set(RUN_FILES)  # fixed names, never a member's


def test_bundle_has_no_absolute_paths(tmp_path):
    home = tmp_path / "home" / "someone"
    home.mkdir(parents=True)
    data = make_data_dir(tmp_path)
    runs = [make_run(tmp_path, "20261129T105700Z-aaaa", loss=3.2790, data_dir=data,
                     stdout=f"cwd {tmp_path}/runs\ncache {home}/.cache/torch\n"),
            make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2799, data_dir=data, ended_at="2026-11-29T11:08:00Z")]
    for run in runs:
        meta = yaml.safe_load((run / "run.yaml").read_text())
        meta["command"] = ["python", f"{tmp_path}/train.py", f"--cache={home}/.cache"]
        meta["compile_cache"] = f"{CHECKOUT_ROOT}/.cache/inductor"
        (run / "run.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        report = json.loads((run / "preflight.json").read_text())
        report["facts"]["data_dir"] = str(data)
        (run / "preflight.json").write_text(json.dumps(report))
    result = archive(load_record(RECORD, RECORDS), runs, tmp_path / "bundles", sources=SOURCES, work_dir=tmp_path,
                     environ={"HOME": str(home), "PATH": "/usr/bin"})
    with tarfile.open(result.path) as tar:
        blobs = {i.name: tar.extractfile(i).read() for i in tar.getmembers()}
    for name, blob in blobs.items():
        for local in (str(tmp_path), str(home), str(CHECKOUT_ROOT)):
            assert local.encode() not in blob, f"{local} in {name}"
    meta = yaml.safe_load(blobs[f"{result.name}/runs/20261129T105700Z-aaaa/run.yaml"])
    assert meta["data_dir"] == "data/synth" and meta["command"][1:] == ["train.py", "--cache=<home>/.cache"]
    assert meta["compile_cache"] == "<repro>/.cache/inductor"
    assert verify_bundle(result.path).ok


def test_archive_on_a_full_disk_names_the_path_and_leaves_nothing(tmp_path):
    """A real full file system (a 64 KiB tmpfs): DiskFull (exit 4) naming the path, no staging left."""
    disk = tmp_path / "small"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.decode().strip()}); needs root")
    try:
        runs = three_runs(tmp_path)
        result = repro("archive", *runs, "--record", RECORD, "--out", disk, "--json")
        assert result.returncode == 4 and "Traceback" not in result.stderr, result.stderr
        assert "the disk is full" in result.stderr and str(disk) in result.stderr
        assert os.listdir(disk) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_endless_header_records_stop_at_the_member_cap(tmp_path):
    """Thousands of pax records and no member: reading stops at the cap instead of decompressing forever."""
    record = tarfile.TarInfo("b/x")
    record.pax_headers = {"comment": "c" * 100}
    pax = record.tobuf(tarfile.PAX_FORMAT)
    pax_only = pax[:len(pax) - 512]  # the pax header blocks without the member header that follows them
    path = tmp_path / "pax-flood.tar.gz"
    path.write_bytes(gzip.compress(pax_only * 30_000))
    check = verify_bundle(path)
    assert any(p.member == "(archive)" and "more than 20000 members" in p.problem for p in check.problems)


@pytest.mark.parametrize("member", ["data/data.lock.yaml", "runs/20261129T105700Z-aaaa/run.yaml"])
def test_alias_bomb_in_other_bundle_yaml(bundle, tmp_path, member):
    """The data lock and a run.yaml inside a bundle go through the same safe loader: refused, named, no blow-up."""
    def bomb(files):
        files[member] = BOMB.encode()

    check = verify_bundle(rebuilt(bundle, tmp_path / "bomb.tar.gz", bomb))
    assert not check.ok
    text = "\n".join(f"{p} {p.fix}" for p in check.problems)
    assert member in text and "anchors and aliases are not accepted" in text


def test_a_negative_pax_size_is_refused_before_anything_is_read(tmp_path):
    """`size=-1` in a pax record made the reader call read(-1): the whole rest of the stream into memory (a 1 MB
    bundle of 1 GiB of zeros took 2 GB, and --max-total-mb did not stop it)."""
    record = b"11 size=-1\n"  # 11 bytes: the record's length counts its own digits
    pax, member = tarfile.TarInfo("b/PaxHeaders/x"), tarfile.TarInfo("b/x")
    pax.type, pax.size = tarfile.XHDTYPE, len(record)
    raw = (pax.tobuf(tarfile.USTAR_FORMAT) + record.ljust(512, b"\0") + member.tobuf(tarfile.USTAR_FORMAT)
           + b"A" * (4 << 20))
    path = tmp_path / "negpax.tar.gz"
    path.write_bytes(gzip.compress(raw))
    check = verify_bundle(path, max_total_bytes=1 << 20)
    assert any("pax size '-1' is not a size in bytes" in p.problem for p in check.problems)


@pytest.mark.parametrize("damage", ["cut", "appended", "appended-gzip"])
def test_a_bundle_cut_in_its_gzip_trailer_or_with_bytes_after_it_is_not_verified(bundle, tmp_path, damage):
    """The reader stopped at the end-of-archive block: a bundle missing its last 20 bytes (the gzip CRC and
    length) or with bytes appended verified. Now the stream is read to its end."""
    raw = bundle.read_bytes()
    data = {"cut": raw[:-20], "appended": raw + os.urandom(512),
            "appended-gzip": raw + gzip.compress(b"x" * 1000)}[damage]
    path = tmp_path / f"{damage}.tar.gz"
    path.write_bytes(data)
    assert verify_bundle(bundle).ok
    check = verify_bundle(path)
    assert not check.ok and any(p.member == "(archive)" for p in check.problems)


@pytest.mark.parametrize("name", ["a\nproblem: none", "a\x1b]0;PWNED\x07\x1b[2Jb"], ids=["newline", "osc"])
def test_a_member_name_with_control_characters_is_a_problem_printed_escaped(bundle, tmp_path, name):
    top = bundle.name[:-len(".tar.gz")]
    path = write_all(tmp_path / "esc.tar.gz", read_all(bundle) + [entry(f"{top}/runs/{name}/log.txt", b"x")])
    done = repro("bundle", "verify", path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "a control or format character in the name" in done.stdout
    assert "\x1b" not in done.stdout and "\nproblem: none" not in done.stdout
    assert ascii(name)[1:-1] in done.stdout  # shown as repr shows it, on one line


@pytest.mark.parametrize("name, why", [("n" * 300, "is 300 characters long, over 121"),
                                       (".hidden", "does not start with a letter or a digit"),
                                       ("ok\n", "has characters other than")])
def test_a_bundle_name_is_checked_before_it_is_looked_up(tmp_path, name, why):
    """A 300-character --name into an existing --out folder raised ENAMETOOLONG from the look-up (a traceback);
    "ok\\n" passed NAME_RE's `$`."""
    runs = three_runs(tmp_path)
    (tmp_path / "bundles").mkdir()
    done = repro("archive", *runs, "--out", tmp_path / "bundles", "--name", name)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    assert why in done.stderr and not any((tmp_path / "bundles").iterdir())


def test_members_past_where_reading_stopped_are_unread_not_removed(bundle, tmp_path):
    """A bundle cut in half listed every member after the cut as 'removed after archiving'."""
    cut = tmp_path / "half.tar.gz"
    cut.write_bytes(bundle.read_bytes()[:len(bundle.read_bytes()) // 2])
    check = verify_bundle(cut)
    unread = [p for p in check.problems if "not read: the archive stopped before it" in p.problem]
    assert unread and not any("removed after archiving" in p.problem for p in check.problems)
