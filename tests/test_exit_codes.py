"""The README's exit-code table, executed: every command run into each code it can end with.

The cheap cases run in this process through `pipeline.cli.run` (the one place an Outcome or an error
becomes a code); a failing training run (5) and an interrupted download (130) run as real processes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cli import run
from pipeline.outcome import ExitCode
from tests.paths import REPO_ROOT

RECORD = "2025-09-23_MuonCustomSizing"
RECORD_LOGS = sorted((REPO_ROOT / "tests" / "fixtures" / "record-logs" / RECORD).glob("*.txt"))
DEMO_LOGS = sorted((REPO_ROOT / "manifests" / "records" / "demo-cpu-synth").glob("*.txt"))
HOSTS = REPO_ROOT / "tests" / "fixtures" / "hosts"
BUNDLE = sorted((REPO_ROOT / "docs" / "device-runs").glob("*/*.tar.gz"))[0]
NO_ENGINE = "unix:///nonexistent/docker.sock"

# (command, argv after `repro --root ROOT`, expected code); {tmp} is the test's folder, {synth} generated shards.
CASES = [
    ("records", ["records", "list"], 0),
    ("records", ["records", "show"], 2),
    ("records", ["records", "show", "no-such-record"], 3),
    ("records", ["records", "fingerprint", "{tmp}/no-program.txt"], 3),
    ("verify", ["verify", "--record", RECORD, *RECORD_LOGS], 0),
    ("verify", ["verify", "--record", RECORD, *DEMO_LOGS], 1),
    ("verify", ["verify", "--no-such-option", *RECORD_LOGS], 2),
    ("verify", ["verify", "--record", "no-such-record", *RECORD_LOGS], 3),
    # a path click refuses is bad input, as where the command checks it itself (data verify, bundle verify)
    ("verify", ["verify", "--record", RECORD, "{tmp}/absent.txt"], 3),
    ("data", ["data", "verify", "{synth}"], 0),
    ("data", ["data", "verify", "{tmp}/corrupt"], 1),
    ("data", ["data", "verify", "--jobs", "0", "{synth}"], 2),
    ("data", ["data", "verify", "{tmp}"], 3),
    ("data", ["data", "fetch", "--dataset", "docs-v1-x4", "--source", "http://127.0.0.1:9/{{filename}}",
              "--dir", "{tmp}/fetched", "--retries", "0", "--max-retry-time", "0", "--json"], 4),
    ("env", ["env", "check-dockerfile"], 0),
    ("env", ["env", "check-dockerfile", "{tmp}/Dockerfile.unpinned"], 1),
    ("env", ["env", "build", "--max-jobs", "x"], 2),
    ("env", ["env", "lock", "--env", "no-such-environment"], 3),
    ("env", ["env", "verify", "--env", "pypi-torch-2.8", "--image", "repro/absent:0"], 4),
    ("preflight", ["preflight", "--from-dir", HOSTS / "h100-8gpu-nvlink"], 0),
    ("preflight", ["preflight", "--from-dir", HOSTS / "h100-mig"], 1),
    ("preflight", ["preflight", "--runtime", "kubernetes"], 2),
    ("preflight", ["preflight", "--record", "no-such-record", "--from-dir", HOSTS / "h100-8gpu-nvlink"], 3),
    # no Docker daemon: 4 here as in `env build` and `reproduce`, not a failed check (1)
    ("preflight", ["preflight", "--record", "demo-cpu-synth", "--runtime", "docker"], 4),
    ("train", ["train", "--trainer", "native", "--runtime", "host", "--preset", "tiny", "--data-dir", "{synth}",
               "--dry-run"], 0),
    ("train", ["train", "--trainer", "no-such-trainer"], 2),
    ("train", ["train", "--trainer", "native", "--runtime", "host", "--data-dir", "{tmp}/absent", "--dry-run"], 3),
    ("archive", ["archive", "--no-such-option"], 2),
    ("archive", ["archive", "--record", "no-such-record", "{tmp}"], 3),
    ("bundle", ["bundle", "verify", BUNDLE], 0),
    ("bundle", ["bundle", "verify", "{tmp}/truncated.tar.gz"], 1),
    ("bundle", ["bundle", "verify"], 2),
    ("report", ["report", "--record", "demo-cpu-synth", "--out", "{tmp}/report", *DEMO_LOGS], 0),
    ("report", ["report"], 2),
    ("report", ["report", "--record", "no-such-record", *DEMO_LOGS], 3),
    ("reproduce", ["reproduce", "--runs", "0"], 2),
    ("reproduce", ["reproduce", "--demo", "--set", "nosuchkey=1"], 2),
    ("reproduce", ["reproduce", "--demo", "--trainer", "record"], 2),
    ("reproduce", ["reproduce", "--record", RECORD, "--set", "num_layers=8", "--plan"], 2),
    ("reproduce", ["reproduce", "--record", "no-such-record"], 3),
    ("campaign", ["campaign", "status"], 2),
    ("campaign", ["campaign", "status", "{tmp}/not-a-campaign"], 3),
]


def documented_codes() -> set[int]:
    table = (REPO_ROOT / "README.md").read_text().split("| code | meaning |", 1)[1].split("\n\n", 1)[0]
    return {int(code) for code in re.findall(r"^\| (\d+) \|", table, flags=re.M)}


def test_the_readme_table_is_the_exit_code_list():
    assert documented_codes() == {int(code) for code in ExitCode}


def test_every_command_and_every_code_has_a_case():
    from pipeline.cli import SUBCOMMANDS

    assert {command for command, _, _ in CASES} == set(SUBCOMMANDS)
    covered = {code for _, _, code in CASES} | {ExitCode.RUN_FAILED, ExitCode.INTERRUPTED,
                                                ExitCode.OUTPUT_CLOSED}  # the three below
    assert covered == set(ExitCode)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("codes")
    assert run(["--root", str(tmp), "data", "synth", "--out", str(tmp / "synth"), "--train-tokens", "65536",
                "--val-tokens", "16384"]) == 0
    shutil.copytree(tmp / "synth", tmp / "corrupt")
    shard = sorted((tmp / "corrupt").glob("*_train_*.bin"))[0]
    with open(shard, "r+b") as f:
        f.seek(2048)
        f.write(b"\xff\xff\xff\xff")
    (tmp / "no-program.txt").write_text("step:1/10 val_loss:10.8258 train_time:0ms step_avg:nanms\n")
    (tmp / "Dockerfile.unpinned").write_text("FROM ubuntu:22.04\nRUN pip install torch\n")
    (tmp / "truncated.tar.gz").write_bytes(BUNDLE.read_bytes()[: BUNDLE.stat().st_size // 2])
    return tmp


@pytest.mark.parametrize("case", CASES, ids=[f"{c}-{code}-{i}" for i, (c, _, code) in enumerate(CASES)])
def test_command_exits_with_the_documented_code(case, folder, monkeypatch, capsys):
    command, argv, code = case
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    args = [str(a).format(tmp=folder, synth=folder / "synth") for a in argv]
    got = run(["--root", str(folder), *args])
    said = capsys.readouterr()
    assert "Traceback" not in said.err, said.err
    assert got == code, f"{command} {args}: exit {got}, documented {code}\n{said.out[-1500:]}{said.err[-1500:]}"


def test_a_failed_training_run_exits_5(folder):
    done = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(folder), "train", "--trainer", "native",
                           "--runtime", "host", "--preset", "tiny", "--data-dir", str(folder / "synth"),
                           "--set", "model_dim=7"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert done.returncode == ExitCode.RUN_FAILED, done.stdout[-2000:] + done.stderr[-2000:]
    assert "the run failed" in done.stderr


def test_an_interrupted_download_exits_130(folder):
    """A source that accepts the connection and never answers: SIGTERM ends the fetch like Ctrl-C."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline", "--root", str(folder), "data", "fetch",
                                 "--dataset", "docs-v1-x4", "--source", f"http://127.0.0.1:{port}/{{filename}}",
                                 "--dir", str(folder / "hanging"), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        server.settimeout(120)
        connection, _ = server.accept()  # the fetch is waiting on us now
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        connection.close()
    finally:
        server.close()
    assert proc.returncode == ExitCode.INTERRUPTED, out[-1500:] + err[-1500:]
    assert "Traceback" not in err, err


def test_make_targets_say_the_tools_own_code():
    """make ends every failure with 2; the target's last lines carry the tool's code (README, exit codes)."""
    venv = Path(sys.prefix)
    done = subprocess.run(["make", "-s", "-o", f"{venv}/.installed", f"VENV={venv}", "reproduce",
                           "RECORD=no-such-record"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "$ bin/repro reproduce --record no-such-record --runs 4" in done.stdout
    assert "make: bin/repro exited 3 (README.md, exit codes)" in done.stderr, done.stderr


def test_bin_repro_through_a_link_on_path_finds_its_clone(tmp_path):
    """A link to bin/repro (~/bin/repro) took the link's folder for the clone: ".../.venv is not set up" named
    the wrong folder. Without a .venv the message must name this clone."""
    clone = tmp_path / "clone"
    (clone / "bin").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "bin" / "repro", clone / "bin" / "repro")
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "repro").symlink_to(clone / "bin" / "repro")
    done = subprocess.run([str(tmp_path / "path" / "repro"), "--version"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 4 and f"error: {clone}/.venv is not set up" in done.stderr, done.stderr


def test_a_reader_that_leaves_early_is_141_not_a_check_that_said_no():
    """`repro records list | head -1` exited 1, the code of a check that said no: click turns the closed pipe
    (EPIPE) into exit 1. Here the reader is gone before the first line is written."""
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "records", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO_ROOT)
    proc.stdout.close()  # long before the child has imported enough to write
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == ExitCode.OUTPUT_CLOSED == 141 and "Traceback" not in err, err
