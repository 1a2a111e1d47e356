"""Every option is checked before anything is paid for (issue 37): a --set the native trainer refuses ends
`reproduce` with exit 2 and the trainer's own message, in seconds, with no work folder, run or report written."""

from __future__ import annotations

import time

from pipeline.cli import run


def test_an_unknown_set_key_exits_2_before_any_stage(tmp_path, capsys):
    started = time.monotonic()
    code = run(["--root", str(tmp_path), "reproduce", "--demo", "--set", "nosuchkey=1", "--runs", "1"])
    seconds = time.monotonic() - started
    said = capsys.readouterr()
    assert code == 2 and seconds < 5, (code, seconds)
    assert "--set nosuchkey: unknown key; known keys: steps," in said.err  # train/config.py's words
    assert "nothing ran" in said.err and "Traceback" not in said.err
    assert not (tmp_path / "work").exists() and not (tmp_path / "runs").exists()
    assert not (tmp_path / "bundles").exists()


def test_a_bad_value_and_the_record_trainer_are_refused_by_name(tmp_path, capsys):
    assert run(["--root", str(tmp_path), "reproduce", "--demo", "--set", "num_layers=seven"]) == 2
    assert "--set num_layers=seven: expected an integer" in capsys.readouterr().err
    assert run(["--root", str(tmp_path), "reproduce", "--demo", "--trainer", "record"]) == 2
    said = capsys.readouterr().err
    assert "--demo --trainer record" in said and "--preset" not in said and "--steps" not in said
    assert run(["--root", str(tmp_path), "reproduce", "--record", "2025-09-23_MuonCustomSizing", "--trainer",
                "record", "--set", "num_layers=8"]) == 2
    said = capsys.readouterr().err
    assert "--set num_layers=8: the native trainer's options" in said and "--steps" not in said
    assert not (tmp_path / "work").exists()


def test_one_run_says_up_front_why_it_cannot_be_reproduced(tmp_path, capsys):
    code = run(["--root", str(tmp_path), "reproduce", "--demo", "--runs", "1", "--record", "no-such-record"])
    said = capsys.readouterr()
    assert code == 3  # the record lookup fails after the note: nothing ran
    assert "--runs 1 alone cannot end `reproduced`" in said.out and "at least 2 runs" in said.out


def test_make_demo_honours_runs():
    """`make demo RUNS=4` ran 2 (issue 37); the demo's own default stays 2."""
    import subprocess

    from tests.paths import REPO_ROOT

    def command(*args: str) -> str:
        lines = subprocess.run(["make", "--no-print-directory", "-n", "-o", ".venv/.installed", "demo", *args],
                               cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
        return lines[-1]  # under `make test` a nested make would add "Leaving directory" lines without the flag

    assert command("RUNS=4").endswith("reproduce --demo --runs 4")
    assert command().endswith("reproduce --demo --runs 2")


def test_a_record_given_as_an_argument_is_told_to_use_record(tmp_path, capsys):
    """`repro reproduce NAME --plan` (as `repro records show NAME` takes it) said only "Got unexpected extra argument
    (NAME)": where the command takes the record as --record, the message says so."""
    for argv in (["reproduce", "2026-07-17_FP8DownProjection", "--plan"], ["preflight", "demo-cpu-synth"]):
        assert run(["--root", str(tmp_path), *argv]) == 2
        said = capsys.readouterr().err
        assert f"Got unexpected extra argument ({argv[1]})" in said, said
        assert f"the record is an option here: --record {argv[1]}" in said and "Traceback" not in said, said
    assert run(["--root", str(tmp_path), "bundle", "verify", "a.tar.gz", "b"]) == 2  # no --record there: no hint
    assert "--record" not in capsys.readouterr().err


def test_the_demo_refuses_a_gpu_record(tmp_path, capsys):
    """`reproduce --demo --record 2025-09-23_MuonCustomSizing --plan` planned "runs as below": the demo preset on
    generated data judged against a GPU record's 3.28, costed at the record's 149.7 s a run on 8 x H100. --demo's
    help says it takes another CPU record only; a GPU record is refused by name before anything runs."""
    code = run(["--root", str(tmp_path), "reproduce", "--demo", "--record", "2025-09-23_MuonCustomSizing", "--plan"])
    said = capsys.readouterr()
    assert code == 2 and said.out == "" and "Traceback" not in said.err, said
    assert "--demo --record 2025-09-23_MuonCustomSizing: " in said.err and "is not a CPU record" in said.err
    assert "repro reproduce --record 2025-09-23_MuonCustomSizing" in said.err
    assert run(["--root", str(tmp_path), "reproduce", "--demo", "--record", "demo-cpu-synth", "--plan"]) == 0
    assert list(tmp_path.iterdir()) == []
