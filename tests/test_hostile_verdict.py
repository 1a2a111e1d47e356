"""Issue 14, the verdict's share: hostile and unlucky logs, values, record names and run files.

Each test is named after the issue's bullet. Every one runs the real CLI (`python -m pipeline`) as a
subprocess and checks the documented exit code, one clear message and no traceback.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.errors import InputError, ManifestError
from pipeline.records.identity import fingerprint, identify
from pipeline.records.model import load_record, load_record_file
from pipeline.workspace import CHECKOUT_ROOT
from tests.logfactory import make_log

RECORD = "2025-09-23_MuonCustomSizing"
RECORDS = CHECKOUT_ROOT / "manifests" / "records"


def repro(*args, cwd: Path | None = None, permissions_apply: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pipeline", *map(str, args)]
    if permissions_apply and os.geteuid() == 0:
        # root reads any file: drop the capabilities that let it, so a mode-000 file is unreadable as for a user
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: file permissions cannot be made to apply")
        argv = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", *argv]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd or CHECKOUT_ROOT, timeout=600)


def clean_failure(done: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert done.returncode == code, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr + done.stdout
    for w in words:
        assert w in done.stderr + done.stdout, (w, done.stderr[-2000:])


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, which Python's json would otherwise accept."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def registry(tmp_path) -> Path:
    """A private copy of the registry's records, to break."""
    root = tmp_path / "registry"
    shutil.copytree(RECORDS, root / "records")
    return root


def write_log(folder: Path, name: str, **kw) -> Path:
    path = folder / name
    path.write_text(make_log(None, **kw))
    return path


# ---- Writes outside the data folder: "A record name of `../../outside` read a manifest outside the
# registry, and so did a `parent:` of `../../../../etc/hostname`." -----------------------------------

def test_a_record_name_of_dotdot_outside_reads_no_manifest_outside_the_registry(tmp_path, registry):
    outside = tmp_path / "outside.yaml"  # a valid manifest where ../../outside would land
    shutil.copy(RECORDS / f"{RECORD}.yaml", outside)
    log = write_log(tmp_path, "a.txt")
    for name in ("../../outside", "../outside", "/etc/hostname", "records/x", "..", ""):
        with pytest.raises(InputError, match="is not a record name"):
            load_record(name, registry / "records")
    done = repro("--registry", registry, "verify", "--record", "../../outside", log)
    clean_failure(done, 3, "'../../outside' is not a record name", "fix:")


def test_a_parent_of_etc_hostname_is_refused_before_anything_is_opened(tmp_path, registry):
    path = registry / "records" / f"{RECORD}.yaml"
    path.write_text(path.read_text().replace("parent: 2025-09-21_DropAttn", "parent: ../../../../etc/hostname"))
    with pytest.raises(ManifestError, match="field 'parent'"):
        load_record_file(path)
    done = repro("--registry", registry, "verify", "--record", RECORD, write_log(tmp_path, "a.txt"))
    clean_failure(done, 3, "field 'parent'", "not a record name", "fix:")


# ---- Tracebacks: "NaN, inf or 1e400 losses in a log ... and `--json` with NaN printing invalid JSON" ---

@pytest.mark.parametrize("loss", ["nan", "inf", "1e400", "-inf", "NaN"])
def test_nan_inf_or_1e400_losses_in_a_log_make_the_run_invalid_with_the_reason(tmp_path, loss):
    good = [write_log(tmp_path, f"good-{i}.txt", final_loss=v) for i, v in enumerate([3.2790, 3.2795])]
    bad = tmp_path / "bad.txt"
    bad.write_text(make_log(None, final_loss=3.2791).replace("val_loss:3.2791", f"val_loss:{loss}"))
    assert f"val_loss:{loss}" in bad.read_text()
    human = repro("verify", *good, bad)
    clean_failure(human, 1, "verdict: invalid", "non-finite values: val_loss", "bad.txt")
    data = strict_json(repro("verify", "--json", *good, bad).stdout)
    assert data["outcome"] == "invalid"
    finding = next(f for f in data["findings"] if f["code"] == "run.non_finite")
    assert finding["severity"] == "problem" and finding["data"]["run"].endswith("bad.txt")
    bad_run = next(r for r in data["runs"] if r["source"].endswith("bad.txt"))
    assert bad_run["final_val_loss"] is None


def test_json_with_nan_prints_valid_json(tmp_path):
    """Every float of the verdict is finite or null, even when every run is broken in its numbers."""
    logs = []
    for i in range(2):
        text = make_log(None, final_loss=3.2791).replace("val_loss:3.2791", "val_loss:nan")
        text = text.replace("step_avg:89.10ms", "step_avg:infms")
        logs.append(tmp_path / f"nan-{i}.txt")
        logs[-1].write_text(text)
    done = repro("verify", "--json", *logs)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    data = strict_json(done.stdout)

    def floats(value):
        if isinstance(value, float):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from floats(v)
        elif isinstance(value, list):
            for v in value:
                yield from floats(v)

    assert all(math.isfinite(v) for v in floats(data))
    assert {f["code"] for f in data["findings"]} >= {"run.non_finite"}


def test_a_zero_train_time_in_a_log_is_invalid_not_a_division_by_zero(tmp_path):
    text = make_log(None, final_loss=3.2790)
    last = [line for line in text.splitlines() if line.startswith("step:1680/1680 val_loss")][0]
    zeroed = last.split(" train_time:")[0] + " train_time:0ms step_avg:0.00ms"
    logs = [tmp_path / "zero.txt", write_log(tmp_path, "ok.txt", final_loss=3.2795)]
    logs[0].write_text(text.replace(last, zeroed))
    done = repro("verify", "--json", *logs)
    data = strict_json(done.stdout)
    assert done.returncode == 1 and data["outcome"] == "invalid"
    assert any(f["code"] == "run.time_not_positive" for f in data["findings"])


# ---- "a program of 3,000 nested terms (`RecursionError` in the fingerprint)" ----------------------

def test_a_program_of_3000_nested_terms_is_a_clear_verdict_not_a_recursion_error(tmp_path):
    program = "x = " + "+".join(["1"] * 3000) + "\n"
    log = tmp_path / "deep.txt"
    log.write_text(make_log(program))
    assert identify(program.encode(), frozenset(), "ast1-x").status == "unparsable"
    done = repro("verify", "--json", log)
    data = strict_json(done.stdout)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    finding = next(f for f in data["findings"] if f["code"] == "program.unparsable")
    assert "nests too deeply" in finding["data"]["error"]
    clean_failure(repro("records", "fingerprint", log), 3, "cannot be fingerprinted", "nests too deeply", "fix:")
    # what Python's parser does accept is fingerprinted without recursion (the walk is iterative)
    assert fingerprint("x = " + "+".join(["1"] * 2000)).startswith("ast1-")


def test_the_iterative_fingerprint_still_matches_the_pinned_record_fingerprint():
    program = CHECKOUT_ROOT / "tests" / "fixtures" / "record-program" / RECORD / "train_gpt.py"
    assert fingerprint(program.read_bytes()) == load_record(RECORD).program.fingerprint


# ---- "a `run.yaml` that is a list" -----------------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    ("- a\n- b\n", "must be a mapping"),
    ("just a string\n", "must be a mapping"),
    ("schema_version: 1\nrun_id: [\n", "line"),
    ("schema_version: 1\nrun_id: r\n", "field 'record': is missing"),
    ("schema_version: 1\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: many\n"
     "started_at: x\n", "field 'world_size': must be an integer"),
])
def test_a_run_yaml_that_is_a_list_or_garbage_is_bad_input_naming_it(tmp_path, text, words):
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "log.txt").write_text(make_log(None))
    (run / "status").write_text("succeeded\n")
    (run / "run.yaml").write_text(text)
    done = repro("verify", run)
    clean_failure(done, 3, str(run / "run.yaml"), words, "fix:")


def test_verify_run_dir_takes_the_record_from_run_yaml(tmp_path):
    """`repro verify RUN_DIR` judges against the record its run.yaml names, not the default H100 record."""
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "log.txt").write_text(make_log(None, steps=40))
    (run / "status").write_text("succeeded\n")
    (run / "run.yaml").write_text(yaml.safe_dump({
        "schema_version": 1, "run_id": "run-1", "record": "demo-cpu-synth", "trainer": "native",
        "runtime": "host", "world_size": 1, "command": ["python", "-m", "train"], "started_at": "2026-11-29T10:00:00Z",
        "status": "succeeded", "exit_code": 0}))
    data = strict_json(repro("verify", "--json", run).stdout)
    assert data["record"] == "demo-cpu-synth"


# ---- "an unreadable shard, manifest or output folder (`PermissionError`)"; "a directory where a file
# should be"; names over NAME_MAX -------------------------------------------------------------------

def test_an_unreadable_log_or_run_yaml_is_bad_input_with_the_path(tmp_path):
    log = write_log(tmp_path, "secret.txt")
    log.chmod(0o000)
    # a path given on the command line is checked by click first: a usage error naming it
    clean_failure(repro("verify", log, permissions_apply=True), 3, str(log), "is not readable")
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "log.txt").write_text(make_log(None))
    (run / "log.txt").chmod(0o000)
    done = repro("verify", run, permissions_apply=True)
    clean_failure(done, 3, str(run / "log.txt"), "permission denied", "fix:")
    (run / "run.yaml").write_text("schema_version: 1\n")
    (run / "run.yaml").chmod(0o000)
    done = repro("verify", run, permissions_apply=True)
    clean_failure(done, 3, str(run / "run.yaml"), "permission denied", "fix:")


def test_a_directory_where_the_log_or_run_yaml_should_be(tmp_path):
    run = tmp_path / "run-1"
    (run / "log.txt").mkdir(parents=True)
    done = repro("verify", run)
    clean_failure(done, 1, "verdict: invalid", "no log at")
    (run / "run.yaml").mkdir()
    clean_failure(repro("verify", run), 3, str(run / "run.yaml"), "is a directory")


def test_names_over_name_max_are_a_message_not_a_traceback(tmp_path):
    long_name = "x" * 300
    clean_failure(repro("verify", tmp_path / f"{long_name}.txt"), 3, "")  # click: the path does not exist, bad input
    clean_failure(repro("verify", "--record", long_name, write_log(tmp_path, "a.txt")), 3, "is not a record name")


# ---- "Accepted without a word: ... `target_val_loss: .nan`, a negative time tolerance, and train times
# of 0" -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, field", [
    ("target_val_loss: 3.28", "target_val_loss: .nan", "rules.target_val_loss"),
    ("target_val_loss: 3.28", "target_val_loss: .inf", "rules.target_val_loss"),
    ("time_tolerance: 0.02", "time_tolerance: -0.5", "rules.time_tolerance"),
    ("time_tolerance: 0.02", "time_tolerance: .nan", "rules.time_tolerance"),
    ("mean_time_s: 149.6905", "mean_time_s: 0", "published.mean_time_s"),
    ("mean_time_s: 149.6905", "mean_time_s: -149.6905", "published.mean_time_s"),
    ("times_s: [149.775", "times_s: [0", "published.times_s[0]"),
    ("losses: [3.2792", "losses: [.nan", "published.losses[0]"),
    ("p_value_max: 0.01", "p_value_max: .nan", "rules.p_value_max"),
])
def test_zero_or_negative_times_non_finite_target_and_negative_tolerance_are_refused_on_load(
        tmp_path, registry, old, new, field):
    path = registry / "records" / f"{RECORD}.yaml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ManifestError, match=re.escape(f"field '{field}'")):
        load_record_file(path)
    done = repro("--registry", registry, "verify", "--record", RECORD, write_log(tmp_path, "a.txt"))
    clean_failure(done, 3, f"field '{field}'", "fix:")


def test_an_unknown_rules_version_is_refused_with_a_fix(tmp_path, registry):
    path = registry / "records" / f"{RECORD}.yaml"
    path.write_text(path.read_text().replace("  version: 1\n", "  version: 9\n", 1))
    done = repro("--registry", registry, "verify", "--record", RECORD, write_log(tmp_path, "a.txt"))
    clean_failure(done, 3, "rules.version 9 is not one this tool judges by", "fix: upgrade repro")


# ---- Memory blow-ups: "A 1 GiB log also killed `repro verify`: the parser holds everything in memory." -----

# Peak RSS of this process image: VmHWM, which starts afresh at exec (ru_maxrss would carry pytest's own
# high-water mark over from the fork).
PEAK_RSS = """
import sys
from pipeline.cli import main
try:
    main(sys.argv[1:])
finally:
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    sys.stderr.write("PEAK_RSS_KIB %d\\n" % int(hwm.split()[1]))
"""


@pytest.mark.slow
def test_a_1_gib_log_completes_repro_verify_in_bounded_memory(tmp_path):
    big = tmp_path / "big.txt"
    header = make_log(None, steps=10).split("step:0/")[0]
    lines = "".join(f"step:{s}/1680 train_time:{s * 89}ms step_avg:89.00ms\n" for s in range(1, 1681))
    block = (lines * (1 + (1 << 20) // len(lines))).encode()
    with open(big, "wb") as f:
        f.write(header.encode())
        while f.tell() < 1 << 30:
            f.write(block)
    size = big.stat().st_size
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, "verify", "--json", str(big)], capture_output=True,
                          text=True, cwd=CHECKOUT_ROOT, timeout=900)
    peak_kib = int(done.stderr.rsplit("PEAK_RSS_KIB ", 1)[1].split()[0])
    print(f"repro verify on a {size / 2**30:.2f} GiB log: peak RSS {peak_kib / 1024:.0f} MiB")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    data = strict_json(done.stdout)
    assert data["outcome"] == "invalid"
    assert any(f["data"].get("issue") == "too_many_points" for f in data["findings"])
    # streamed: ~110 MiB (interpreter, numpy/scipy, at most MAX_POINTS points), whatever the log's size; the
    # margin leaves room for imports other stages may add, never for holding the file
    assert peak_kib * 1024 < size / 2


def test_a_status_file_without_a_status_word_is_a_problem_not_a_good_run(tmp_path):
    """A run folder whose status file held garbage was judged like a good run by `verify` (reproduced), while
    `archive` named its bundle '0runs-1failed'."""
    from pipeline.records.model import load_record
    from pipeline.verdict.judge import verify_runs
    from tests.test_bundle import RECORD, RECORDS, three_runs

    runs = three_runs(tmp_path)
    assert verify_runs(load_record(RECORD, RECORDS), runs).outcome.startswith("reproduced")
    (runs[0] / "status").write_bytes(b"\x00garbage" * 100)
    verdict = verify_runs(load_record(RECORD, RECORDS), runs)
    assert verdict.outcome == "invalid"
    assert any("run status is unreadable" in reason for reason in verdict.reasons), verdict.reasons
