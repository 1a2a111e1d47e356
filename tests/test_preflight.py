"""Preflight end to end: collection on this very machine, `repro preflight` as a subprocess, the Docker path.

    .venv/bin/python -m pytest -q tests/test_preflight.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.preflight.collect import HostSources, SavedSources, SourceMissing, collect
from pipeline.preflight.run import (
    SCHEMA_VERSION,
    PreflightReport,
    default_locations,
    preflight,
    read_report,
    write_report,
)
from pipeline.records.model import load_record
from pipeline.workspace import CHECKOUT_ROOT as REPO_ROOT
from tests.conftest import docker_client_or_skip

FIXTURES = Path(__file__).parent / "fixtures"
HOSTS = FIXTURES / "hosts"
RECORD_NAME = "2025-09-23_MuonCustomSizing"
RECORD_LOGS = FIXTURES / "record-logs" / RECORD_NAME
SECRETS = ("hunter2", "hf_secret_do_not_record", "AWS_SECRET_ACCESS_KEY", "NCCL_SECRET_KEY", "0000000000000")


def repro(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="module")
def this_machine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("node")
    locations = default_locations(load_record(RECORD_NAME), tmp / "data", tmp / "runs")
    return collect(HostSources(), runtime="host", locations=locations)


def test_this_machine_is_read_without_a_traceback(this_machine):
    torch = pytest.importorskip("torch")
    facts = this_machine
    if shutil.which("nvidia-smi") is None:
        assert facts.gpus == () and facts.missing_reason("nvidia-smi -q -x") == "nvidia-smi not found on PATH"
        assert facts.missing_reason("nvidia-smi topo -m") is None  # not asked: one missing entry says why
    else:
        assert facts.gpus and facts.driver
    # the runtime that will train (--runtime host) is this interpreter
    assert facts.runtime.torch == torch.__version__ and facts.runtime.where == f"host: {sys.executable}"
    assert facts.runtime.python == sys.version.split()[0]
    meminfo = Path("/proc/meminfo").read_text().split()
    assert facts.memory.total_kib == int(meminfo[meminfo.index("MemTotal:") + 1])
    assert {d.label for d in facts.disks} >= {"data", "runs", "shm"}
    assert facts.disk("data").path.endswith("data") and facts.disk("data").free_bytes > 0
    assert facts.cpu.logical_cpus and facts.os.kernel


def test_host_sources_report_failures_as_missing_sources():
    sources = HostSources(timeout_s=1)
    with pytest.raises(SourceMissing, match="not found on PATH"):
        sources._run(["no-such-tool-xyz"])
    with pytest.raises(SourceMissing, match="exited 9: driver not loaded"):
        sources._run(["sh", "-c", "echo driver not loaded >&2; exit 9"])
    with pytest.raises(SourceMissing, match="did not answer within 1 s"):
        sources._run(["sleep", "5"])
    with pytest.raises(SourceMissing) as leaked:
        sources._run(["sh", "-c", "echo cannot reach tcp://admin:s3cr3t@10.0.0.1:2376 >&2; exit 1"])
    assert "s3cr3t" not in leaked.value.reason and "tcp://[REDACTED]@10.0.0.1" in leaked.value.reason


def test_saved_folder_with_only_some_files_carries_on(tmp_path):
    shutil.copy(HOSTS / "h100-mig" / "nvidia-smi-q.xml", tmp_path)
    (tmp_path / "nvidia-smi-topo.txt").write_text("garbled\n")
    facts = collect(SavedSources(tmp_path), runtime="docker", locations={"shm": (Path("/dev/shm"), None)})
    assert len(facts.gpus) == 1 and facts.topology is None
    assert facts.missing_reason("nvidia-smi topo -m").startswith("unreadable: nvidia-smi topo -m: no GPU0")
    assert facts.missing_reason("docker") == "docker-info.json not saved in " + str(tmp_path)
    with pytest.raises(InputError, match="not a folder of saved outputs"):
        SavedSources(tmp_path / "absent")


def test_cli_on_this_machine_host_runtime(tmp_path):
    """What `repro preflight --runtime host --json` does here: a clean report, the documented exit code."""
    out = tmp_path / "preflight.json"
    done = repro("preflight", "--runtime", "host", "--json", "--output", str(out),
                 "--data-dir", str(tmp_path / "data"), "--runs-dir", str(tmp_path / "runs"))
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert report == json.loads(out.read_text())
    assert report["schema_version"] == SCHEMA_VERSION and report["runtime"] == "host"
    visible = next(c for c in report["checks"] if c["name"] == "gpus_visible")
    if shutil.which("nvidia-smi") is None:
        assert done.returncode == 4, done.stderr
        assert visible["status"] == "fail" and "nvidia-smi not found" in visible["reason"]
        assert "no GPU visible" in done.stderr and "fix:" in done.stderr
    else:
        assert done.returncode in (0, 1) and visible["status"] == "pass"
    # without Docker's help: the host runtime never needs the daemon
    assert next(c for c in report["checks"] if c["name"] == "docker")["status"] == "skip"


def test_cli_h200_fixture_warns_and_strict_fails():
    folder = HOSTS / "h200-1gpu"
    done = repro("preflight", "--runtime", "host", "--from-dir", str(folder))
    assert done.returncode == 0, done.stderr
    assert "WARN  gpu_count         1 GPU(s); the record used 8" in done.stdout
    assert "outcome: warn: 0 failed, 8 warned" in done.stdout
    strict = repro("preflight", "--runtime", "host", "--from-dir", str(folder), "--strict")
    assert strict.returncode == 1
    assert "preflight failed: gpu_count, gpu_model, driver, cuda_driver, software" in strict.stderr


def test_cli_record_node_fixture_passes_and_writes_no_secret(tmp_path):
    out = tmp_path / "run" / "preflight.json"
    done = repro("preflight", "--from-dir", str(HOSTS / "h100-8gpu-nvlink"), "--strict", "--output", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "outcome: pass: 0 failed, 0 warned" in done.stdout
    report = read_report(out)
    assert report.outcome == "pass" and report.facts.environment["NCCL_IB_HCA"] == "mlx5"
    text = out.read_text()
    assert not [s for s in SECRETS if s in text]


def test_cli_failures_exit_one():
    done = repro("preflight", "--runtime", "host", "--from-dir", str(HOSTS / "h100-throttled"))
    assert done.returncode == 1 and "preflight failed: throttling" in done.stderr


def test_cli_record_log_header():
    log = sorted(RECORD_LOGS.glob("*.tail.txt"))[0]
    done = repro("preflight", "--from-log", str(log), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "warn" and report["facts_from"].startswith("run log ")
    assert [c["name"] for c in report["checks"] if c["status"] == "warn"] == ["interconnect"]


@pytest.mark.parametrize("args, code, message", [
    (["--record", "1999-01-01_Nothing"], 3, "unknown record '1999-01-01_Nothing'"),
    (["--from-dir", "/nonexistent/folder"], 3, "does not exist"),
    (["--from-dir", str(HOSTS / "h100-mig"), "--from-log", __file__], 2, "not both"),
    (["--runtime", "podman"], 2, "'podman' is not one of"),
])
def test_cli_bad_input(args, code, message):
    done = repro("preflight", *args)
    assert done.returncode == code and message in done.stderr and "Traceback" not in done.stderr


def test_report_schema_is_checked(tmp_path):
    report = preflight(load_record(RECORD_NAME), "host", sources=SavedSources(HOSTS / "h100-mig"), locations={})
    path = write_report(report, tmp_path / "preflight.json")
    again = read_report(path)
    assert isinstance(again, PreflightReport) and again == report  # one typed model, written and read back
    assert again.facts.gpus[0].mig_mode == "Enabled"
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="schema_version 99"):
        read_report(path)


@pytest.mark.parametrize("change, words", [
    (lambda d: d["checks"][0].pop("reason"), "field 'checks[0].reason': is missing"),
    (lambda d: d["facts"]["gpus"][0].update(index="zero"), "field 'facts.gpus[0].index': must be int"),
    (lambda d: d.update(outcome="great"), "field 'outcome': is 'great'"),
    (lambda d: d.update(colour="red"), "field 'colour' is not a known field"),
    (lambda d: d["facts"].update(gpus={"a": 1}), "field 'facts.gpus': must be a list"),
])
def test_a_bad_preflight_json_names_the_field(tmp_path, change, words):
    report = preflight(load_record(RECORD_NAME), "host", sources=SavedSources(HOSTS / "h100-mig"), locations={})
    path = write_report(report, tmp_path / "preflight.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        read_report(path)
    assert str(path) in str(err.value) and words in str(err.value) and "fix:" in str(err.value)


def test_a_preflight_json_that_is_a_list_or_not_json(tmp_path):
    path = tmp_path / "preflight.json"
    for text, words in (("[1, 2]", "must be a JSON object"), ("{nope", "not valid JSON")):
        path.write_text(text)
        with pytest.raises(InputError, match=words):
            read_report(path)


@pytest.mark.docker
@pytest.mark.slow
def test_docker_runtime_runs_the_snippet_in_the_recorded_image(tmp_path):
    client = docker_client_or_skip()
    from pipeline.env.image import save_image_state, state_from_image
    from tests.docker_base import ensure_test_base

    locations = {"shm": (Path("/dev/shm"), None)}
    facts = collect(HostSources(state_dir=tmp_path / "state"), runtime="docker", locations=locations)
    assert facts.docker is not None and facts.docker.server_version
    assert "no image recorded" in facts.missing_reason("runtime")  # no image yet: a missing source, no crash

    tag = ensure_test_base(client)  # bookworm + python3, no torch
    save_image_state(state_from_image(client.api, tag, "build"), tmp_path / "state")
    facts = collect(HostSources(state_dir=tmp_path / "state"), runtime="docker", locations=locations)
    rt = facts.runtime
    assert rt.where.startswith("docker: sha256:") and rt.python.startswith("3.11")
    assert rt.error.startswith("import torch failed")
    if not facts.docker.nvidia_runtime:
        assert rt.gpu_access_error  # this engine cannot give containers GPUs, and says why


def test_a_cpu_record_needs_no_gpu(tmp_path):
    """The demo record trains on the CPU: no GPU is a pass there, and the exit code is 0, not 4."""
    if shutil.which("nvidia-smi") is not None:
        pytest.skip("this machine has GPUs")
    done = repro("preflight", "--record", "demo-cpu-synth", "--runtime", "host", "--json",
                 "--output", str(tmp_path / "p.json"), "--data-dir", str(tmp_path), "--runs-dir", str(tmp_path))
    visible = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "gpus_visible")
    assert visible["status"] == "pass" and "none needed" in visible["reason"]
    assert done.returncode == 0, done.stderr


def test_a_hostile_preflight_json_is_bad_input_not_a_crash(tmp_path):
    """Too large, nested thousands deep, or not UTF-8: each a clear InputError naming the file."""
    from pipeline.preflight.run import MAX_REPORT_BYTES

    path = tmp_path / "preflight.json"
    for data, words in ((b"[" * 100_000 + b"]" * 100_000, "not valid JSON"), (b"\xff\xfe{}", "not UTF-8"),
                        (b" " * (MAX_REPORT_BYTES + 1), "larger than")):
        path.write_bytes(data)
        with pytest.raises(InputError, match=words) as err:
            read_report(path)
        assert str(path) in str(err.value)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has GPUs")
def test_reproduce_on_a_machine_without_a_gpu_exits_4_as_preflight_does(tmp_path):
    done = repro("--root", str(tmp_path), "reproduce", "--runs", "1")
    assert done.returncode == 4, done.stderr
    assert "no GPU visible" in done.stderr and "fix:" in done.stderr and "Traceback" not in done.stderr
