"""pipeline/docker_engine.py and pipeline/probe.py on the real engine: no container is ever left behind,
"no engine" is one clear error (exit 4), and the runtime probe gives one facts type everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline.docker_engine import EngineUnavailable, connect, run_snippet
from pipeline.errors import InputError, RunFailed
from pipeline.probe import RuntimeProbe, parse_probe, probe_image, probe_interpreter
from tests.conftest import docker_client_or_skip
from tests.docker_base import ensure_test_base


def _ours(client, role: str) -> list:
    return client.containers.list(all=True, filters={"label": f"io.repro.role={role}"})


@pytest.fixture(scope="module")
def engine():
    client = docker_client_or_skip()
    return client, ensure_test_base(client)


@pytest.mark.docker
@pytest.mark.parametrize("argv, code, out", [
    (["python3", "-c", "print('hello')"], 0, "hello\n"),
    (["python3", "-c", "import sys; print('failing'); sys.exit(3)"], 3, "failing\n"),
])
def test_a_snippet_leaves_no_container_whatever_its_exit(engine, argv, code, out):
    client, base = engine
    done = run_snippet(base, argv, labels={"io.repro.role": "engine-test"}, client=client)
    assert done.exit_code == code and done.stdout == out
    assert _ours(client, "engine-test") == []  # (other engineers' containers on this engine are not counted)


@pytest.mark.docker
def test_gpus_asked_for_on_an_engine_without_them_still_run_and_say_why(engine):
    client, base = engine
    info = client.info()
    if "nvidia" in (info.get("Runtimes") or {}):
        pytest.skip("this engine can give containers GPUs")
    done = run_snippet(base, ["python3", "-c", "print(1)"], gpus=True, labels={"io.repro.role": "engine-test"},
                       client=client)
    assert done.exit_code == 0 and done.stdout == "1\n" and done.gpu_access_error
    assert _ours(client, "engine-test") == []  # neither the refused GPU container nor the second one stays


@pytest.mark.docker
def test_a_snippet_past_its_time_is_stopped_and_removed(engine):
    client, base = engine
    with pytest.raises(RunFailed, match="did not finish within 2 s"):
        run_snippet(base, ["python3", "-c", "import time; time.sleep(60)"], timeout_s=2,
                    labels={"io.repro.role": "engine-test"}, client=client)
    assert _ours(client, "engine-test") == []


@pytest.mark.docker
def test_an_absent_image_is_bad_input_and_leaves_nothing(engine):
    client, _ = engine
    with pytest.raises(InputError, match="is not on this Docker engine"):
        run_snippet("sha256:" + "0" * 64, ["true"], labels={"io.repro.role": "engine-test"}, client=client)
    assert _ours(client, "engine-test") == []


@pytest.mark.docker
def test_probe_in_an_image_reads_what_is_there(engine):
    client, base = engine
    facts = probe_image(base, gpus=False, packages=True, client=client)
    assert isinstance(facts, RuntimeProbe) and facts.where == f"docker: {base}"
    assert facts.python == "3.11.2" and facts.machine == "x86_64" and facts.libc.startswith("glibc 2.36")
    assert facts.torch is None and "No module named 'torch'" in facts.errors["torch"]
    assert facts.error.startswith("import torch failed") and facts.flash_attention is None
    assert _ours(client, "probe") == []


def test_no_engine_is_exit_4_naming_docker_host_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.raises(EngineUnavailable) as err:
        connect(timeout=5, alternative="use --runtime host")
    assert err.value.exit_code == 4 and f"unix://{tmp_path}/absent.sock" in err.value.what
    assert "make docker-engine" in err.value.fix and "DOCKER_HOST" in err.value.fix
    assert "--runtime host" in err.value.fix


def test_credentials_in_docker_host_are_not_repeated(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://admin:hunter2-secret@127.0.0.1:9")
    with pytest.raises(EngineUnavailable) as err:
        connect(timeout=2)
    assert "hunter2-secret" not in str(err.value) and "127.0.0.1:9" in err.value.what


def test_probe_of_this_interpreter_has_one_set_of_keys():
    facts = probe_interpreter(sys.executable)
    assert facts.executable == sys.executable and facts.python == ".".join(map(str, sys.version_info[:3]))
    data = facts.to_dict()
    assert set(data) == {f for f in RuntimeProbe.__dataclass_fields__}
    assert json.loads(json.dumps(data)) == data  # plain JSON: what run.yaml and preflight.json hold


def test_saved_outputs_of_the_older_snippets_read_into_the_same_type():
    old = json.dumps({"python": "3.12.3 (main, Jun 18 2025) [GCC 13.3.0]", "torch": "2.11.0+cu130", "cuda": "13.0",
                      "cudnn": 91900, "nccl": [2, 28, 9], "cuda_available": True, "device_count": 1,
                      "devices": ["NVIDIA H200"], "triton": "3.6.0"})
    facts = parse_probe(old, "saved torch-env.json")
    assert (facts.python, facts.torch_cuda, facts.cudnn, facts.nccl) == ("3.12.3", "13.0", "9.19.0", "2.28.9")
    host_runtime_old = json.dumps({"python": "3.10.12", "torch": "2.8.0", "torch_cuda": "12.8", "cuda_devices": 8})
    assert parse_probe(host_runtime_old, "x").device_count == 8
    with pytest.raises(InputError, match="did not print a JSON object"):
        parse_probe("Traceback (most recent call last):\n", "host: python")


def test_env_cli_without_engine_exits_4(tmp_path):
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/absent.sock"}
    done = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(tmp_path), "env", "verify", "--image", "x"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 4 and "no Docker engine answers" in done.stderr and "Traceback" not in done.stderr
