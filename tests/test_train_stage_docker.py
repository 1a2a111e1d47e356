"""`repro train --runtime docker` against a real Docker engine, with the stand-in image (tests/standin/).

The image is the test base (Debian + python3, no registry) plus a stand-in `torchrun`; the program is
the stand-in record's, fetched from a real HTTP server and hash-checked like the record's. GPUs are
not requested (`--gpus none`: this machine has none); the memlock limit is lowered to what this
engine may set when it cannot raise it (an unprivileged daemon), and the container reports back the
limits it got.
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline.records.program import cut_program
from pipeline.runs.launch import Launch, Mount
from pipeline.runs.runtime_docker import STACK_BYTES, cache_volume_name, container_spec
from tests.conftest import docker_client_or_skip
from tests.helpers_http import FileServer
from tests.paths import REPO_ROOT
from tests.standin.record import NAME, program_bytes, repro_env, standin_log, standin_manifests, url_path, write_data

pytestmark = pytest.mark.docker
REPRO = [sys.executable, "-m", "pipeline"]
STANDIN = Path(__file__).parent / "standin"
IMAGE_TAG = "repro-test-standin:latest"


@pytest.fixture(scope="module")
def engine():
    """(client, stand-in image) — the image built FROM the test base through the SDK."""
    from tests.docker_base import ensure_test_base

    client = docker_client_or_skip()
    base = ensure_test_base(client)
    image, _ = client.images.build(path=str(STANDIN), tag=IMAGE_TAG, buildargs={"BASE": base}, rm=True)
    volume = cache_volume_name(image.id, program_sha256=_program_sha())
    _remove_volume(client, volume)
    yield client, image
    _remove_volume(client, volume)


def _program_sha() -> str:
    import hashlib

    return hashlib.sha256(program_bytes()).hexdigest()


def _remove_volume(client, name):
    import docker

    try:
        client.volumes.get(name).remove(force=True)
    except docker.errors.NotFound:
        pass


def _memlock_args() -> list[str]:
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    return [] if hard == resource.RLIM_INFINITY else ["--memlock", str(hard)]


@pytest.fixture
def served(tmp_path):
    with FileServer({url_path(): standin_log()}) as server:
        yield standin_manifests(tmp_path, server.base)


def _cmd(tmp_path, data, *extra):
    return REPRO + ["train", "--record", NAME, "--runtime", "docker", "--gpus", "none", "--image", IMAGE_TAG,
                    "--data-dir", str(data), "--runs-dir", str(tmp_path / "runs"), *_memlock_args(), *extra]


def _runs(tmp_path) -> list[Path]:
    return sorted((tmp_path / "runs" / NAME).iterdir())


def _containers_of(client, run_id: str) -> list:
    return client.containers.list(all=True, filters={"label": f"io.repro.run-id={run_id}"})


def test_runs_streams_and_finds_its_compile_cache_again(engine, served, tmp_path):
    client, image = engine
    data = write_data(tmp_path / "data", steps=12, step_s=0.05)
    env = repro_env(served, tmp_path / "state")
    first = subprocess.run(_cmd(tmp_path, data), env=env, capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "compile cache: 0 earlier run(s) in /cache/inductor" in first.stdout
    assert "compile cache volume repro-cache-" in first.stdout and ": new" in first.stdout
    second = subprocess.run(_cmd(tmp_path, data), env=env, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "compile cache: 1 earlier run(s) in /cache/inductor" in second.stdout and ": reused" in second.stdout

    run = _runs(tmp_path)[0]
    meta = yaml.safe_load((run / "run.yaml").read_text())
    assert meta["image_id"] == image.id and meta["environment"] == "standin" and meta["runtime"] == "docker"
    assert meta["compile_cache"] == cache_volume_name(image.id, _program_sha()) and meta["exit_code"] == 0
    assert meta["command"] == ["torchrun", "--standalone", "--nproc_per_node=1", "train_gpt.py"]
    log = (run / "log.txt").read_bytes()
    assert cut_program(log) == program_bytes() and b"step:12/12 val_loss:3.2750" in log
    assert f"stack {STACK_BYTES}".encode() in log  # the ulimits reached the training process
    assert (run / "status").read_text() == "succeeded\n" and not (run / "work").exists()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["event"] == "step"] == list(range(1, 13))
    volume = client.volumes.get(meta["compile_cache"])
    assert volume.attrs["Labels"]["io.repro.program-sha256"] == _program_sha()
    assert _containers_of(client, meta["run_id"]) == []


def test_a_failing_container_keeps_logs_and_exit_code(engine, served, tmp_path):
    client, _ = engine
    data = write_data(tmp_path / "data", fail_at=3, exit_code=7)
    done = subprocess.run(_cmd(tmp_path, data, "--nproc", "2"), env=repro_env(served, tmp_path / "state"),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 5 and "exit code 7" in done.stderr, done.stdout + done.stderr
    run = _runs(tmp_path)[0]
    meta = yaml.safe_load((run / "run.yaml").read_text())
    assert meta["exit_code"] == 7 and meta["status"] == "failed" and meta["world_size"] == 2
    assert (run / "status").read_text() == "failed\n"
    assert b"step:3/20 train_time" in (run / "log.txt").read_bytes()
    assert b"failing at step 3 as asked" in (run / "stdout.txt").read_bytes()
    assert _containers_of(client, meta["run_id"]) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_and_removes_the_container(engine, served, tmp_path, signum):
    client, _ = engine
    data = write_data(tmp_path / "data", steps=400, step_s=0.25)
    proc = subprocess.Popen(_cmd(tmp_path, data), env=repro_env(served, tmp_path / "state"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen, deadline = b"", time.monotonic() + 120
    while b"step:3/400 train_time" not in seen and time.monotonic() < deadline:
        seen += proc.stdout.readline()  # the steps arrive while the container runs: streamed live
    run = _runs(tmp_path)[0]
    running = _containers_of(client, run.name)
    assert [c.status for c in running] == ["running"], seen.decode()[-2000:]
    proc.send_signal(signum)  # Ctrl-C, or a scheduler's kill: both end the run cleanly
    rest, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, (seen + rest).decode()[-2000:]
    assert _containers_of(client, run.name) == []
    assert (run / "status").read_text() == "aborted\n"
    assert yaml.safe_load((run / "run.yaml").read_text())["status"] == "aborted"
    stdout = (run / "stdout.txt").read_bytes()
    assert b"interrupted: stopping container" in stdout
    assert b"got signal 15" in stdout  # printed while stopping, collected after the stream was cut
    assert b"step:3/400" in (run / "log.txt").read_bytes() and b"val_loss:3.2750" not in (run / "log.txt").read_bytes()


def test_dry_run_prints_the_container_and_runs_nothing(engine, served, tmp_path):
    client, image = engine
    data = write_data(tmp_path / "data")
    done = subprocess.run(_cmd(tmp_path, data, "--dry-run", "--json"), env=repro_env(served, tmp_path / "state"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    spec = json.loads(done.stdout)["container"]
    assert spec["image"] == image.id and spec["ipc_mode"] == "host" and spec["gpus"] == 0
    assert spec["ulimits"]["stack"] == STACK_BYTES
    mounts = {m["target"]: m for m in spec["mounts"]}
    data_mount = mounts["/workspace/data/fineweb10B"]
    assert data_mount == {"source": str(data.resolve()), "target": data_mount["target"], "read_only": True,
                          "type": "bind"}
    assert mounts["/cache"]["type"] == "volume" and not mounts["/workspace"]["read_only"]
    assert spec["environment"]["TORCHINDUCTOR_CACHE_DIR"] == "/cache/inductor"
    assert not (tmp_path / "runs").exists()

    if (REPO_ROOT / "train" / "__main__.py").is_file():  # the native trainer: train/ and the run dir mounted
        native = subprocess.run(_cmd(tmp_path, data, "--trainer", "native", "--preset", "tiny", "--dry-run", "--json"),
                                env=repro_env(served, tmp_path / "state"), capture_output=True, text=True, timeout=120)
        assert native.returncode == 0, native.stderr
        spec = json.loads(native.stdout)["container"]
        mounts = {m["target"]: (m["source"], m["read_only"]) for m in spec["mounts"]}
        assert mounts["/opt/repro/train"] == (str(REPO_ROOT / "train"), True)
        assert mounts["/repro/data"] == (str(data.resolve()), True) and mounts["/repro/run"][1] is False
        assert spec["command"][3:7] == ["-m", "train", "--preset", "tiny"] and spec["working_dir"] == "/opt/repro"
        assert "--log-file" in spec["command"] and "/repro/run/log.txt" in spec["command"]

    missing = subprocess.run(_cmd(tmp_path, data, "--image", "repro-no-such-image:0"),
                             env=repro_env(served, tmp_path / "state"), capture_output=True, text=True, timeout=120)
    assert missing.returncode == 3 and "repro env build" in missing.stderr


def test_all_gpus_become_one_device_request(tmp_path):
    """What the engine receives for `--gpus all` (no GPU here to run it): every GPU, capability gpu."""
    launch = Launch(("torchrun", "x.py"), "/workspace", {}, (Mount(tmp_path, "/data", True),))
    kwargs = container_spec(launch, "sha256:" + "a" * 64, "repro-x", "repro-cache-x", -1, {}).create_kwargs()
    (request,) = kwargs["device_requests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    assert kwargs["ipc_mode"] == "host" and {u["Name"]: u["Hard"] for u in kwargs["ulimits"]} == {
        "memlock": -1, "stack": STACK_BYTES}
    assert kwargs["mounts"][0]["ReadOnly"] is True and kwargs["mounts"][1]["Target"] == "/cache"
    assert "device_requests" not in container_spec(launch, "i", "n", "v", 0, {}).create_kwargs()


def test_a_two_file_hub_program_runs_in_a_container_with_the_standins_mounted(engine, tmp_path):
    """The newest records' shape in a container: both files written, `kernels` found in repro's stand-in."""
    from tests.standin.record import multifile_program, served_record

    program = multifile_program()
    data = write_data(tmp_path / "data", show_kernels=True)
    with served_record(tmp_path, program) as env:
        done = subprocess.run(_cmd(tmp_path, data), env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kernels from /opt/repro-standins/hub/kernels/__init__.py" in done.stdout
    run = _runs(tmp_path)[0]
    meta = yaml.safe_load((run / "run.yaml").read_text())
    assert meta["hub_standin"] is True and meta["fa3_standin"] is True
    assert cut_program((run / "log.txt").read_bytes()) == program
