"""`repro train --trainer record`: the program fetched from a real HTTP server, cut, hash-checked and run.

The "record" is tests/standin/record.py's synthetic one: its published log is the stand-in program
(tests/standin/train_gpt.py) + separator + output, pinned by sha256 in a temporary manifests/ copy,
served on 127.0.0.1 at the URL the manifest's raw_url_template names. Runs use the host runtime:
the real torchrun of this venv starts the stand-in, which writes logs/<uuid>.txt like the record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline.errors import CheckFailed, InputError, MissingDependency
from pipeline.records.model import load_record_file
from pipeline.records.program import cut_program, resolve_program
from tests.helpers_http import FileServer
from tests.logfactory import make_log
from tests.standin.record import (
    FOLDER,
    LOG_FILE,
    NAME,
    program_bytes,
    repro_env,
    standin_log,
    standin_manifests,
    url_path,
    write_data,
)

REPRO = [sys.executable, "-m", "pipeline"]


@pytest.fixture
def served(tmp_path):
    """(server, manifests dir) with the stand-in record's log at its pinned URL."""
    with FileServer({url_path(): standin_log()}) as server:
        yield server, standin_manifests(tmp_path, server.base)


def _record(manifests: Path):
    return load_record_file(manifests / "records" / f"{NAME}.yaml")


def _train(tmp_path, manifests, *args, data=None, **run):
    data = data or write_data(tmp_path / "data")
    return subprocess.run(REPRO + ["train", "--record", NAME, "--runtime", "host", "--data-dir", str(data),
                                   "--runs-dir", str(tmp_path / "runs"), *args],
                          env=repro_env(manifests, tmp_path / "state"), capture_output=True, text=True,
                          timeout=180, **run)


def _only_run(tmp_path) -> Path:
    runs = list((tmp_path / "runs" / NAME).iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def test_cut_program_is_the_bytes_before_the_first_separator():
    program = program_bytes()
    log = standin_log()
    assert cut_program(log) == program
    assert cut_program(make_log(program=None).encode()) is None  # output only: no program to cut
    # a separator inside the run output (the second one) does not move the cut
    assert cut_program(log + b"\n" + b"=" * 100 + b"\n") == program


def test_resolves_from_the_pinned_url(served):
    server, manifests = served
    program = resolve_program(_record(manifests))
    assert program.text == program_bytes() and program.log_file == LOG_FILE
    assert program.source == server.url(url_path())
    assert [r.path for r in server.requests] == [url_path()]


def test_tampered_log_is_refused(served):
    server, manifests = served
    server.files[url_path()] = standin_log().replace(b"val_loss:3.2750", b"val_loss:3.2700")
    with pytest.raises(CheckFailed, match="is not the record's log") as err:
        resolve_program(_record(manifests))
    assert _record(manifests).logs[0].sha256 in str(err.value)


def test_missing_log_says_where_and_what_to_do(served):
    server, manifests = served
    del server.files[url_path()]
    with pytest.raises(MissingDependency, match="the pinned log is not at http://127.0.0.1:.*404") as err:
        resolve_program(_record(manifests))
    assert "--program-source" in err.value.fix


def test_tampered_program_is_refused(served, tmp_path):
    _, manifests = served
    record = _record(manifests)
    changed = tmp_path / "train_gpt.py"
    changed.write_bytes(program_bytes().replace(b"89.1", b"44.5"))
    with pytest.raises(CheckFailed, match="none of the 1 programs"):
        resolve_program(record, str(changed))
    # a log whose own sha256 is pinned but whose program is not: the manifest contradicts itself
    bad = standin_manifests(tmp_path / "bad", "http://127.0.0.1:9", program_sha256="0" * 64)
    with pytest.raises(CheckFailed, match="none of the 1 programs"):
        resolve_program(_record(bad), str(_write(tmp_path / "log.txt", standin_log())))
    # a comment-only change keeps the code fingerprint but is still not the program that ran
    comment = tmp_path / "comment.py"
    comment.write_bytes(program_bytes() + b"# a comment\n")
    with pytest.raises(CheckFailed, match="none of the 1 programs"):
        resolve_program(record, str(comment))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_local_sources(served, tmp_path):
    _, manifests = served
    record = _record(manifests)
    clone = tmp_path / "clone"
    (clone / FOLDER).mkdir(parents=True)
    _write(clone / FOLDER / LOG_FILE, standin_log())
    assert resolve_program(record, str(clone)).log_file == LOG_FILE
    assert resolve_program(record, str(clone / FOLDER / LOG_FILE)).text == program_bytes()
    assert resolve_program(record, str(Path(__file__).parent / "standin" / "train_gpt.py")).log_file is None
    with pytest.raises(InputError, match="none of .* logs is in"):
        resolve_program(record, str(tmp_path / "manifests"))  # a folder, but no clone of the record
    with pytest.raises(InputError, match="neither a URL, a file nor a folder"):
        resolve_program(record, str(tmp_path / "nothing-here"))
    other_log = _write(tmp_path / "other.txt", make_log().encode())
    with pytest.raises(CheckFailed, match="looks like a run log"):
        resolve_program(record, str(other_log))


def test_cli_refusals_create_no_run(served, tmp_path):
    server, manifests = served
    server.files[url_path()] = standin_log() + b"extra"
    done = _train(tmp_path, manifests)
    assert done.returncode == 1, done.stderr
    assert "is not the record's log" in done.stderr and "Traceback" not in done.stderr
    del server.files[url_path()]
    done = _train(tmp_path, manifests)
    assert done.returncode == 4 and "the pinned log is not at" in done.stderr and "--program-source" in done.stderr
    done = _train(tmp_path, manifests, "--preset", "tiny")
    assert done.returncode == 3 and "native trainer only" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_host_run_happy_path_then_verify(served, tmp_path):
    server, manifests = served
    dry = _train(tmp_path, manifests, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["command"][1:] == ["--standalone", "--nproc_per_node=1", "train_gpt.py"]
    assert Path(plan["command"][0]).name == "torchrun" and not (tmp_path / "runs").exists()

    done = _train(tmp_path, manifests, "--nproc", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    run = _only_run(tmp_path)
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["run.yaml", "status", "log.txt", "stdout.txt", "metrics.jsonl", "preflight.json"])
    assert (run / "status").read_text() == "succeeded\n"
    meta = yaml.safe_load((run / "run.yaml").read_text())
    assert meta["trainer"] == "record" and meta["runtime"] == "host" and meta["world_size"] == 2
    assert meta["exit_code"] == 0 and meta["program_sha256"] == _record(manifests).logs[0].program_sha256
    assert meta["program_source"] == server.url(url_path())
    assert meta["host_environment"]["torch"] and meta["image_id"] is None
    log = (run / "log.txt").read_bytes()
    assert cut_program(log) == program_bytes()  # the program printed itself first, like the record
    assert b"(stand-in: 2 process(es)" in log and log.count(b"step:20/20 val_loss") == 1
    assert b"step:7/20 train_time" in (run / "stdout.txt").read_bytes()  # streamed output kept
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 20 + 2 and metrics[-1]["val_loss"] == 3.275
    assert json.loads((run / "preflight.json").read_text())["schema_version"] == 1

    verdict = subprocess.run(REPRO + ["verify", "--record", NAME, "--json", str(run)], capture_output=True,
                             text=True, env=repro_env(manifests, tmp_path / "state"), timeout=120)
    assessed = json.loads(verdict.stdout)["runs"][0]
    assert assessed["completed"] and assessed["final_val_loss"] == 3.275 and assessed["status"] == "succeeded"
    assert assessed["program"]["status"] == "identical" and assessed["trainer"] == "record"


def test_failing_run_keeps_its_logs(served, tmp_path):
    _, manifests = served
    data = write_data(tmp_path / "data", fail_at=4, exit_code=3)
    done = _train(tmp_path, manifests, data=data)
    # torchrun itself exits 1 when a worker fails; the worker's own code is in its failure summary
    assert done.returncode == 5 and "the run failed with exit code 1" in done.stderr
    run = _only_run(tmp_path)
    assert (run / "status").read_text() == "failed\n"
    assert yaml.safe_load((run / "run.yaml").read_text())["exit_code"] == 1
    assert b"step:4/20 train_time" in (run / "log.txt").read_bytes()
    stdout = (run / "stdout.txt").read_bytes()
    assert b"failing at step 4" in stdout and b"exitcode  : 3" in stdout
    assert not (run / "work").exists()


def test_a_program_that_does_not_make_its_logs_folder_finds_one(served, tmp_path):
    _, manifests = served
    done = _train(tmp_path, manifests, data=write_data(tmp_path / "data", makes_logs=False))
    assert done.returncode == 0, done.stdout + done.stderr
    run = _only_run(tmp_path)
    assert b"step:20/20 val_loss" in (run / "log.txt").read_bytes() and not (run / "work").exists()


def _processes_under(path: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd").startswith(str(path)):
                found.append(int(proc.name))
        except OSError:
            pass
    return found


def test_sigint_aborts_and_stops_the_workers(served, tmp_path):
    _, manifests = served
    data = write_data(tmp_path / "data", steps=200, step_s=0.5)
    proc = subprocess.Popen(REPRO + ["train", "--record", NAME, "--runtime", "host", "--nproc", "2",
                                     "--data-dir", str(data), "--runs-dir", str(tmp_path / "runs")],
                            env=repro_env(manifests, tmp_path / "state"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    seen = b""
    deadline = time.monotonic() + 120
    while b"step:2/200 train_time" not in seen and time.monotonic() < deadline:
        seen += proc.stdout.readline()
    run = _only_run(tmp_path)
    assert _processes_under(run), "the stand-in workers should be running in the run's work folder"
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, (seen + rest).decode()[-2000:]
    assert (run / "status").read_text() == "aborted\n"
    assert yaml.safe_load((run / "run.yaml").read_text())["status"] == "aborted"
    assert b"interrupted: stopping the training processes" in (run / "stdout.txt").read_bytes()
    assert b"step:2/200" in (run / "log.txt").read_bytes()
    assert _processes_under(run) == []
