"""Each log read once (issue 39): the log reader's memo and the import memo change no output, and are never
trusted over the bytes. Runs on tests/fixtures/history-sample (real upstream logs, trimmed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.records import identity, importer, log_cache, logfacts, logparse
from pipeline.records.identity import program_fingerprint

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "fixtures" / "history-sample"
COMMIT = "f411b3d346aa52d3504324ca93c230fd84c6c07f"


def run(*args: str, verdict: bool = False) -> tuple[int, str]:
    """(exit code, output); with `verdict`, a command whose CheckFailed is its answer (some records fail)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=verdict)
    return result.exit_code, result.output


def registry(folder: Path) -> Path:
    for name in ("environments", "datasets"):
        shutil.copytree(ROOT / "manifests" / name, folder / name)
    (folder / "records").mkdir()
    return folder


def loop(root: Path, reg: Path, site: Path) -> dict[str, str | bytes]:
    """A reviewer's loop (import both tracks, check, site with plans); every output, by name."""
    base = ["--root", str(root), "--registry", str(reg)]
    out: dict[str, str | bytes] = {}
    for track in ("1", "2"):
        code, out[f"import {track}"] = run(*base, "records", "import", str(SAMPLE), "--commit", COMMIT,
                                           "--track", track, "--json")
        assert code == 0, out[f"import {track}"]
    _, out["check"] = run(*base, "records", "check", "--from", str(SAMPLE), "--json", verdict=True)
    code, _ = run(*base, "records", "site", "--from", str(SAMPLE), "--plans", "--out", str(site))
    assert code == 0
    out.update({f"site/{p.relative_to(site)}": p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()})
    out.update({f"manifest/{p.name}": p.read_bytes() for p in sorted((reg / "records").glob("*.yaml"))})
    return out


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cold")
    return tmp / "root", loop(tmp / "root", registry(tmp / "reg"), tmp / "site")


def test_check_site_and_manifests_are_the_same_cold_and_warm(cold, tmp_path, monkeypatch):
    root, before = cold
    memo = sorted(p.name for p in (root / "cache" / "log-reader").iterdir())
    assert len(memo) == 2 and memo[0].startswith("log-reader-") and memo[1].startswith("parsed-"), memo
    # warm: the same workspace, a new registry and site. No log is parsed and no program walked again.
    monkeypatch.setattr(logparse, "parse_stream", lambda *a, **k: pytest.fail("a log was parsed again"))
    monkeypatch.setattr(logparse._Scan, "run", lambda *a: pytest.fail("a log was scanned again"))
    monkeypatch.setattr(identity, "program_fingerprint", lambda *a: pytest.fail("a program was walked"))
    after = loop(root, registry(tmp_path / "reg"), tmp_path / "site")
    assert after.keys() == before.keys()
    assert [k for k in before if before[k] != after[k]] == []
    assert json.loads(after["check"])  # the check said something: rows for every record


def test_the_loop_without_any_memo_says_what_it_says_with_one(cold, tmp_path, monkeypatch):
    """Every command reading the bytes itself (no memo folder: no facts kept, no parsed log with its steps packed as
    columns) writes the same check, site and manifests as the loop whose check and site read the import's memo."""
    _, before = cold
    use_folder = log_cache.use_folder
    monkeypatch.setattr(log_cache, "use_folder", lambda folder: use_folder(None))
    after = loop(tmp_path / "root", registry(tmp_path / "reg"), tmp_path / "site")
    assert not (tmp_path / "root" / "cache" / "log-reader").exists()
    assert after.keys() == before.keys()
    assert [k for k in before if before[k] != after[k]] == []


def test_a_log_the_import_read_comes_back_from_the_memo_as_its_own_reading(tmp_path):
    """The importer keeps each log without its steps (logparse.parse_text_unread: where they start); what `records
    check` and `verify` read back from the memo is, step for step, the log as the line reading parses it, and the
    steps are read from the file's bytes once: the memo is written again with them."""
    import io

    logs = sorted(p for p in SAMPLE.rglob("*") if p.suffix in (".txt", ".log") and p.is_file())
    assert len(logs) > 10
    log_cache.use_folder(tmp_path / "memo")
    try:
        for path in logs:
            logfacts.read_log_facts(path)
        parsed = list((tmp_path / "memo").glob("parsed-*/*.pickle"))
        assert len(parsed) >= len(logs) - 1  # a log whose bytes another log repeats is kept once
        programs = [p for p in map(logparse.parse_text, map(Path.read_bytes, logs)) if p.program]
        kept = b"".join(p.read_bytes() for p in parsed)
        assert len(programs) > 10 and not [p.path for p in programs if p.program in kept]  # sliced from the log
        with_steps, read = 0, []
        def read_steps(raw: bytes, at: int):
            read.append(at)
            return logparse.step_columns(raw, at)

        for path in logs:
            kept = log_cache.parsed_log(path, lambda p=path: pytest.fail(f"{p} was parsed again"),
                                        read_steps=read_steps)
            fresh = logparse.parse_stream(io.BytesIO(path.read_bytes()), str(path))
            assert repr(kept) == repr(fresh), path  # repr: a nan step average equals itself
            assert log_cache.parsed_log(path, pytest.fail, steps=False).program == fresh.program
            with_steps += bool(kept.steps)
        assert with_steps > len(logs) // 2 and len(read) == with_steps  # the import read no step's numbers
        for path in logs:  # read again: the steps come from the memo now
            assert repr(log_cache.parsed_log(path, pytest.fail, read_steps=pytest.fail)) == repr(
                logparse.parse_stream(io.BytesIO(path.read_bytes()), str(path)))
    finally:
        log_cache.use_folder(None)


def test_a_corrupt_memo_is_ignored_and_written_again(cold, tmp_path):
    root, before = cold
    work = tmp_path / "root"
    shutil.copytree(root, work)
    folder = work / "cache" / "log-reader"
    memo = next(folder.glob("log-reader-*.json"))
    doc = json.loads(memo.read_text())
    for entry in doc["facts"].values():
        entry["val_loss"] = "3.28"  # wrong type: not trusted
    for key in doc["fingerprints"]:
        doc["fingerprints"][key] = {"fingerprint": 1}
    memo.write_text(json.dumps(doc))
    parsed = sorted(next(folder.glob("parsed-*")).iterdir())
    parsed[0].write_bytes(b"\x80\x04not a pickle")
    parsed[1].write_bytes(parsed[1].read_bytes()[:100])  # truncated
    after = loop(work, registry(tmp_path / "reg"), tmp_path / "site")
    assert [k for k in before if before[k] != after[k]] == []
    fixed = json.loads(memo.read_text())
    assert all(isinstance(e["val_loss"], (float, type(None))) for e in fixed["facts"].values())
    assert all(isinstance(e.get("fingerprint", ""), str) for e in fixed["fingerprints"].values())
    assert log_cache._read_parsed(parsed[0], parsed[0].stem) is not None  # rewritten from the bytes


def test_a_planted_pickle_builds_nothing_but_the_readers_classes(tmp_path):
    import pickle

    class Planted:
        def __reduce__(self):
            return (print, ("planted",))

    entry = tmp_path / "x.pickle"
    entry.write_bytes(pickle.dumps(Planted()))
    assert log_cache._read_parsed(entry, "0" * 64) is None


def test_the_memo_is_keyed_on_the_reader_version(monkeypatch):
    key = log_cache.reader_key()
    monkeypatch.setattr(log_cache, "READER_VERSION", log_cache.READER_VERSION + 1)
    monkeypatch.delitem(log_cache._state, "key")
    assert log_cache.reader_key() != key
    monkeypatch.delitem(log_cache._state, "key")


def test_every_log_fact_can_be_checked_on_the_way_back():
    """A field of a type the memo cannot check would make every log a miss: add its type to log_cache._check."""
    assert log_cache.checkable(logfacts.LogFacts)


def test_a_reimport_where_nothing_changed_stops_after_hashing(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    shutil.copytree(SAMPLE, clone)
    reg = registry(tmp_path / "reg")
    args = ["--root", str(tmp_path / "root"), "--registry", str(reg), "records", "import", str(clone),
            "--commit", COMMIT]
    from pipeline.records import import_memo

    key = import_memo.import_key
    monkeypatch.setattr(import_memo, "import_key", lambda *a: pytest.fail("nothing to recall, all to write: no key"))
    first = run(*args)  # an empty registry and no memo: the clone's logs are not hashed for a key
    monkeypatch.setattr(import_memo, "import_key", key)
    second = run(*args)  # writes nothing: remembered
    assert first[0] == second[0] == 0 and "unchanged 0" not in second[1]
    real = importer.import_records
    monkeypatch.setattr(importer, "import_records", lambda *a, **k: pytest.fail("imported again"))
    assert run(*args) == second
    log = next((clone / "records" / "track_1_short" / "2024-12-04_ValueEmbed").glob("*.txt"))
    log.write_bytes(log.read_bytes() + b"\n")  # a changed log: a new key, and a real import
    monkeypatch.setattr(importer, "import_records", real)
    code, out = run(*args)
    assert code == 0 and out != second[1]


def test_an_older_readers_memo_is_removed_when_the_memo_is_written(tmp_path):
    (tmp_path / "parsed-0123456789abcdef").mkdir()
    (tmp_path / "log-reader-0123456789abcdef.json").write_text("{}")
    log_cache.use_folder(tmp_path)
    try:
        assert log_cache.program_fingerprint(b"x = 1\n", program_fingerprint).startswith("ast1-")
        log_cache.flush()
    finally:
        log_cache.use_folder(None)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"log-reader-{log_cache.reader_key()}.json"]


def test_an_edited_dataset_manifest_is_a_new_import_key(tmp_path):
    """The shard size is read only when the import runs: the dataset manifests are in the key as files."""
    from pipeline.records.import_memo import ImportInputs, import_key

    reg = registry(tmp_path / "reg")
    inputs = ImportInputs(clone=SAMPLE, records_dir=reg / "records", environments_dir=reg / "environments", track=1,
                          commit=COMMIT, repository="r", dry_run=False, datasets_dir=reg / "datasets")
    before = import_key(inputs)
    assert import_key(inputs) == before
    manifest = next((reg / "datasets").glob("*.yaml"))
    manifest.write_text(manifest.read_text().replace("tokens_per_shard:", "tokens_per_shard: 1", 1))
    assert import_key(inputs) != before


def test_a_programs_data_need_is_derived_once_and_its_refusal_remembered(tmp_path, monkeypatch):
    from pipeline.errors import CheckFailed
    from pipeline.records import data_need

    program = next((ROOT / "tests" / "fixtures" / "record-program").rglob("train_gpt.py")).read_bytes()
    log_cache.use_folder(tmp_path)
    try:
        first = data_need.remembered_data_need(program, world_size=8, tokens_per_shard=100_000_000)
        with pytest.raises(CheckFailed) as refused:
            data_need.remembered_data_need(b"x = 1\n", world_size=8, tokens_per_shard=100_000_000)
        log_cache.flush()
        log_cache.use_folder(tmp_path)  # a new command: what it knows is read from the file
        monkeypatch.setattr(data_need, "data_need", lambda *a, **k: pytest.fail("derived again"))
        assert data_need.remembered_data_need(program, world_size=8, tokens_per_shard=100_000_000) == first
        with pytest.raises(CheckFailed) as again:
            data_need.remembered_data_need(b"x = 1\n", world_size=8, tokens_per_shard=100_000_000)
        assert (again.value.what, again.value.fix) == (refused.value.what, refused.value.fix)
        memo = next(tmp_path.glob("log-reader-*.json"))
        doc = json.loads(memo.read_text())
        for key, entry in doc["needs"].items():
            if "train_shards" in entry:
                doc["needs"][key] = {**entry, "train_shards": "9"}  # not an int: never trusted
        memo.write_text(json.dumps(doc))
        log_cache.use_folder(tmp_path)
        with pytest.raises(pytest.fail.Exception, match="derived again"):
            data_need.remembered_data_need(program, world_size=8, tokens_per_shard=100_000_000)
    finally:
        log_cache.use_folder(None)
