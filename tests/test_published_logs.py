"""`repro records fetch-logs`: published logs by pinned URL + sha256 into the cache; offline --from; report lookup."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.errors import CheckFailed, InputError
from pipeline.records.model import load_record
from pipeline.records.published import fetch_published_logs, published_logs_dir
from tests.helpers_http import Fault, FileServer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "fixtures" / "upstream-sample"
NAME = "2025-09-23_MuonCustomSizing"
FOLDER = f"records/track_1_short/{NAME}"
COMMIT = "f411b3d346aa52d3504324ca93c230fd84c6c07f"


def imported_registry(tmp_path: Path, base_url: str) -> Path:
    """The sample imported into a fresh registry, its URL template pointed at the local server."""
    reg = tmp_path / "reg"
    shutil.copytree(ROOT / "manifests" / "environments", reg / "environments")
    (reg / "records").mkdir()
    res = CliRunner().invoke(cli, ["--registry", str(reg), "records", "import", str(SAMPLE), "--commit", COMMIT])
    assert res.exit_code == 0, res.output
    path = reg / "records" / f"{NAME}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["upstream"]["raw_url_template"] = base_url + "/raw/{commit}/{folder}/{file}"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return reg


def served_files() -> dict[str, bytes]:
    return {f"/raw/{COMMIT}/{FOLDER}/{p.name}": p.read_bytes() for p in (SAMPLE / FOLDER).glob("*.txt")}


def test_fetch_verifies_caches_and_refetches_nothing(tmp_path):
    with FileServer(served_files()) as server:
        reg = imported_registry(tmp_path, server.base)
        res = CliRunner().invoke(cli, ["--root", str(tmp_path / "ws"), "--registry", str(reg), "records",
                                       "fetch-logs", NAME, "--json"])
        assert res.exit_code == 0, res.output
        fetched = json.loads(res.output)
        assert len(fetched) == 4 and {f["source"] for f in fetched} == {"url"}
        cached = tmp_path / "ws" / "cache" / "record-logs" / NAME
        for f in fetched:
            assert (cached / f["file"]).read_bytes() == (SAMPLE / FOLDER / f["file"]).read_bytes()
        served = server.bytes_served
        record = load_record(NAME, reg / "records")
        again = fetch_published_logs(record, tmp_path / "ws" / "cache")
        assert {f.source for f in again} == {"cache"} and server.bytes_served == served
        assert published_logs_dir(record, tmp_path / "ws" / "cache") == cached


def test_a_wrong_byte_is_refused_and_removed(tmp_path):
    files = served_files()
    with FileServer(files) as server:
        reg = imported_registry(tmp_path, server.base)
        record = load_record(NAME, reg / "records")
        bad = next(iter(files))
        server.fault(bad, Fault("wrong", times=-1))
        with pytest.raises(CheckFailed, match="1 of 4 published log"):
            fetch_published_logs(record, tmp_path / "cache")
        assert not (tmp_path / "cache" / "record-logs" / NAME / bad.rsplit("/", 1)[1]).exists()
        assert published_logs_dir(record, tmp_path / "cache") is None  # an incomplete cache is not used


def test_offline_from_a_folder_and_record_logs_option(tmp_path):
    reg = imported_registry(tmp_path, "http://127.0.0.1:9")  # nothing listens: offline only
    record = load_record(NAME, reg / "records")
    got = fetch_published_logs(record, tmp_path / "cache", source_dir=SAMPLE / FOLDER)
    assert {f.source for f in got} == {"folder"} and len(got) == 4
    assert published_logs_dir(record, tmp_path / "elsewhere", record_logs=SAMPLE / FOLDER) == SAMPLE / FOLDER
    with pytest.raises(InputError):
        published_logs_dir(record, tmp_path / "cache", record_logs=tmp_path / "empty")


def test_unreachable_source_is_a_missing_dependency(tmp_path):
    reg = imported_registry(tmp_path, "http://127.0.0.1:9")
    record = load_record(NAME, reg / "records")
    with pytest.raises(Exception) as caught:
        fetch_published_logs(record, tmp_path / "cache", timeout=2)
    assert getattr(caught.value, "exit_code", None) == 4 and "--from DIR" in caught.value.fix


def test_report_never_reads_shared():
    for path in (ROOT / "pipeline" / "report").rglob("*.py"):
        assert "../shared" not in path.read_text() and "REPRO_RECORD_LOGS" not in path.read_text()


def test_report_uses_record_logs_or_the_fetched_cache(tmp_path):
    """`repro report`: --record-logs DIR when given, else the cache `fetch-logs` filled, else the manifest only."""
    from tests.test_bundle import make_run

    run = make_run(tmp_path, "20261129T105700Z-aaaa", loss=3.2790)
    base = ["--root", str(tmp_path / "ws"), "report", str(run), "--record", NAME, "--json"]
    res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "no published logs on this machine" in json.loads(res.output)["published_source"]
    res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "b"), "--record-logs", str(SAMPLE / FOLDER)])
    assert json.loads(res.output)["published_source"] == "the record's published logs (4 files)"
    # the committed manifest pins the real logs' sha256: the trimmed fixtures must not pass as them
    res = CliRunner().invoke(cli, ["--root", str(tmp_path / "ws"), "records", "fetch-logs", NAME,
                                   "--record-logs", str(SAMPLE / FOLDER)])
    assert res.exit_code != 0 and isinstance(res.exception, CheckFailed)
    assert not list((tmp_path / "ws" / "cache" / "record-logs" / NAME).glob("*.txt"))


def test_from_a_flat_folder_finds_a_log_that_sits_in_a_subfolder_upstream(tmp_path):
    """2026-07-17's logs sit under this_pr/ upstream; a flat copy of one of them (as tests/fixtures keeps it) was
    "not in" the folder: 13 of 13 failed. Now it is found by its name and checked by its sha256 as before."""
    record = load_record("2026-07-17_FP8DownProjection", ROOT / "manifests" / "records")
    (log,) = (ROOT / "tests" / "fixtures" / "record-logs" / "2026-07-17_FP8DownProjection").glob("*.txt")
    assert any(entry.file == f"this_pr/{log.name}" for entry in record.logs)
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(log, flat / log.name)
    with pytest.raises(CheckFailed, match=f"{len(record.logs) - 1} of {len(record.logs)} published log"):
        fetch_published_logs(record, tmp_path / "cache", source_dir=flat)
    assert any((tmp_path / "cache").rglob(log.name))  # the one found is in the cache, verified
