"""Where `reproduce` takes the record's program from (pipeline/records/program.py): `--program-source` when
given; else a selected run's log in the workspace cache (`repro records fetch-logs NAME --from DIR`, what an
offline GPU node relies on); else the pinned raw URL. Always one of the manifest's selected runs, always
checked against the pinned sha256. The record is the stand-in (tests/standin/record.py) pinning a real,
trimmed 2026 log (two files, scheduled + extension steps); its pinned URL is unreachable."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from pipeline.errors import CheckFailed, MissingDependency
from pipeline.records.model import Imported, load_record
from pipeline.records.program import cut_program, resolve_program
from tests.paths import FIXTURES
from tests.standin.record import LOG_FILE, NAME, repro, repro_env, standin_manifests

LOG = (FIXTURES / "program-layouts/2026-07-13_PrefixTokenPrediction.txt").read_bytes()
UNREACHABLE = "http://127.0.0.1:9"


@pytest.fixture
def offline(tmp_path):
    """(the record, its subprocess environment, the workspace cache) for the stand-in pinning LOG."""
    registry = standin_manifests(tmp_path, UNREACHABLE, log=LOG, program=cut_program(LOG))
    env = repro_env(registry, tmp_path / "home" / "state")
    return load_record(NAME, registry / "records"), env, tmp_path / "home" / "cache"


def test_an_offline_node_takes_the_program_from_the_cache_fetch_logs_filled(offline, tmp_path):
    record, env, cache = offline
    with pytest.raises(MissingDependency, match="cannot reach"):
        resolve_program(record, None, cache)  # nothing cached yet: the pinned URL, unreachable here
    given = tmp_path / "from"
    given.mkdir()
    (given / LOG_FILE).write_bytes(LOG)
    done = repro(env, "records", "fetch-logs", NAME, "--from", str(given))
    assert done.returncode == 0, done.stderr
    found = resolve_program(record, None, cache)
    assert found.text == cut_program(LOG) and found.source.startswith(str(cache))
    plan = repro(env, "reproduce", "--record", NAME, "--plan", "--json", "--smoke", "20", "--dataset", "docs-v1-x4")
    shown = json.loads(plan.stdout)
    assert shown["program"]["here"] and shown["program"]["source"].startswith(str(cache))
    assert [c["field"] for c in shown["patch"]["changes"]][:2] == ["num_scheduled_iterations",
                                                                    "num_extension_iterations"]
    (cache / "record-logs" / NAME / LOG_FILE).write_bytes(LOG + b"tampered\n")
    with pytest.raises(CheckFailed, match="it is not the record's log"):
        resolve_program(record, None, cache)  # the cache is checked against the pin like any source


def test_another_log_of_the_pinned_program_serves_and_a_left_out_run_is_named(offline, tmp_path):
    record, _, _ = offline
    linked = tmp_path / "linked.txt"  # the table's linked log: not a selected run, but the pinned program
    linked.write_bytes(LOG.replace(b"step_avg:", b"step_avg: ", 1))
    assert resolve_program(record, str(linked)).sha256 == record.logs[0].program_sha256
    one_gpu = LOG.replace(b"num_extension_iterations: int = 10", b"num_extension_iterations: int = 11")
    (tmp_path / "one-gpu.txt").write_bytes(one_gpu)
    left = {"file": "prefix-1375/x.txt", "reason": "other-hardware", "detail": "in prefix-1375/, run on 1 GPU(s)",
            "sha256": hashlib.sha256(one_gpu).hexdigest()}
    imported = Imported(commit="f" * 40, row="88", claimed_time="", claimed_time_s=None, linked_log="",
                        environment_family="unknown", mean_time_source="logs", left_out=(left,))
    with pytest.raises(CheckFailed, match=r"left it out of the record's runs: in prefix-1375/, run on 1 GPU"):
        resolve_program(dataclasses.replace(record, imported=imported), str(tmp_path / "one-gpu.txt"))


def test_the_folder_of_the_selected_runs_serves_as_a_program_source(offline, tmp_path):
    """A table may link the folder of the runs (2026-04-22_MuddFormer links this_pr_v3, where its selected runs
    lie): given as --program-source, it is searched for the selected runs by name."""
    record, _, _ = offline
    record = dataclasses.replace(record, logs=(dataclasses.replace(record.logs[0], file=f"this_pr_v3/{LOG_FILE}"),))
    runs = tmp_path / "this_pr_v3"
    runs.mkdir()
    (runs / LOG_FILE).write_bytes(LOG)
    assert resolve_program(record, str(runs)).source == str(runs / LOG_FILE)
