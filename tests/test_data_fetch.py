"""`repro data fetch` against real HTTP servers on 127.0.0.1: resume, retries, corruption, hub, lock."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.data.fetch import Options, fetch, plan
from pipeline.data.manifest import load_dataset
from pipeline.data.shards import shard_bytes, write_shard
from pipeline.data.verify import read_local_lock, verify_dir
from pipeline.records.model import load_record
from pipeline.registry import Registry
from tests.helpers_http import Fault, FileServer, HubServer
from tests.paths import REPO_ROOT

REPO = "someone/toy-shards"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHARDS = {"fineweb_val_000000.bin": 150_000, "fineweb_train_000001.bin": 150_000,
          "fineweb_train_000002.bin": 90_000}


def write_manifest(root: Path, files: dict[str, bytes], locked: bool, revision: str = COMMIT,
                   wrong_sha: str | None = None) -> Path:
    """manifests/datasets/toy.yaml for the shards in `files` (lock filled or empty)."""
    lines = []
    for name, data in files.items():
        sha = wrong_sha or hashlib.sha256(data).hexdigest()
        lines.append(f"  {name}: {{size: {len(data)}, sha256: {sha}}}" if locked else f"  {name}: {{size: , sha256: }}"
                     + "  # filled by --lock")
    path = root / "datasets" / "toy.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""schema_version: 1
name: toy
source:
  hub: {{repo_id: {REPO}, repo_type: dataset, revision: {revision}}}
format: {{magic: 20240520, version: 1, header_ints: 256, token_dtype: uint16, tokens_per_shard: 150000, bos: 50256}}
splits:
  val: {{pattern: "fineweb_val_{{index:06d}}.bin", first: 0, count: 1}}
  train: {{pattern: "fineweb_train_{{index:06d}}.bin", first: 1, count: 2}}
# the lock stays last
lock:
""" + "\n".join(lines) + "\n")
    return path


@pytest.fixture
def shards(tmp_path) -> dict[str, bytes]:
    rng = np.random.default_rng(7)
    out = {}
    for name, n in SHARDS.items():
        path = tmp_path / "src" / name
        path.parent.mkdir(exist_ok=True)
        write_shard(path, rng.integers(0, 50257, n))
        out[name] = path.read_bytes()
    return out


@pytest.fixture
def manifests(tmp_path, shards, monkeypatch) -> Path:
    root = tmp_path / "manifests"
    write_manifest(root, shards, locked=True)
    monkeypatch.setenv("REPRO_REGISTRY", str(root))
    return root


def quick(**kw) -> Options:
    return Options(backoff_s=0.01, quiet=True, timeout_s=10, **kw)


def fetch_all(root: Path, out: Path, source: str, **kw):
    return fetch(load_dataset("toy", root), list(SHARDS), out, source, quick(**kw))


def test_plan_defaults_come_from_the_record():
    record = load_record(Registry.DEFAULT_RECORD, REPO_ROOT / "manifests" / "records")
    manifest, names = plan(None, record, None, None, registry=REPO_ROOT / "manifests")
    assert manifest.name == "fineweb10B-gpt2" and manifest.hub.repo_id == "kjj0/fineweb10B-gpt2"
    assert names == ["fineweb_val_000000.bin"] + [f"fineweb_train_{i:06d}.bin" for i in range(1, 10)]
    assert all(manifest.lock[n].sha256 and manifest.lock[n].size == shard_bytes(10**8) for n in names)


def test_hub_download_resumes_dropped_connections_without_refetching(tmp_path, shards, manifests, monkeypatch):
    total = sum(map(len, shards.values()))
    with HubServer(REPO, shards, commit=COMMIT) as hub:
        # Every response of this blob dies after 100 kB: only ranged resumes can finish it.
        hub.fault_blob("fineweb_val_000000.bin", Fault("drop", after=100_000, times=-1))
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = fetch_all(manifests, tmp_path / "out", "hub")
        ranged = [r.range for r in hub.cdn.requests if r.path == hub.blob_path("fineweb_val_000000.bin")]
    assert result.ok, result.failures
    assert hub.bytes_served == total  # nothing was downloaded twice
    assert ranged[0] is None and ranged[1:] == [f"bytes={100_000 * i}-" for i in range(1, len(ranged))]
    for f in result.files:
        assert (tmp_path / "out" / f.name).read_bytes() == shards[f.name]
        assert {"sha256:lock", "sha256:server", "header"} <= set(f.checked)
        assert f.source == f"hf://datasets/{REPO}@{COMMIT}/{f.name} (endpoint {hub.endpoint})"
    assert not list((tmp_path / "out" / ".partial").glob("*.part"))
    assert verify_dir(tmp_path / "out").ok


def test_hub_token_goes_to_the_hub_only_and_into_no_file(tmp_path, shards, manifests, monkeypatch):
    secret = "hf_" + "s3cr3t" * 6
    monkeypatch.setenv("HF_TOKEN", secret)
    with HubServer(REPO, shards, commit=COMMIT) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = fetch_all(manifests, tmp_path / "out", "hub")
        # (huggingface_hub itself also GETs /api/agent-harnesses, anonymously: not a file request)
        hub_auth = {r.headers.get("authorization") for r in hub.requests if "/resolve/" in r.path}
        cdn_headers = [r.headers for r in hub.cdn.requests]
    assert result.ok and hub_auth == {f"Bearer {secret}"}
    assert cdn_headers and not any("authorization" in h for h in cdn_headers)
    assert secret not in (tmp_path / "out" / "data.lock.yaml").read_text()
    assert secret not in repr(result)


def test_interrupted_process_resumes_from_its_partial_file(tmp_path, shards, manifests):
    name = "fineweb_val_000000.bin"
    out = tmp_path / "out"
    part = out / ".partial" / f"{name}.part"
    with FileServer({f"/m/{n}": d for n, d in shards.items()}) as mirror:
        mirror.fault(f"/m/{name}", Fault("stall", after=120_000, seconds=30))
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "data", "fetch", "--dataset", "toy", "--file", name,
             "--source", mirror.url("/m/{filename}"), "--dir", str(out), "--json"],
            cwd=REPO_ROOT, env={**os.environ, "REPRO_REGISTRY": str(manifests)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not (part.exists() and part.stat().st_size >= 120_000):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
        assert proc.returncode == 130, stderr
        assert "interrupted" in stderr and not (out / name).exists()
        assert part.stat().st_size == 120_000

        mirror.reset_counts()
        result = fetch(load_dataset("toy", manifests), [name], out, mirror.url("/m/{filename}"), quick())
        assert result.ok, result.failures
        assert mirror.bytes_served == len(shards[name]) - 120_000  # only what was missing
        assert mirror.requests[0].range == "bytes=120000-"
    assert (out / name).read_bytes() == shards[name]


def test_wrong_bytes_are_caught_and_never_get_a_final_name(tmp_path, shards, manifests):
    name = "fineweb_train_000001.bin"
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        mirror.fault(f"/{name}", Fault("wrong", times=-1))
        result = fetch_all(manifests, tmp_path / "out", mirror.url("/{filename}"))
    assert [f.name for f in result.failures] == [name]
    failure = result.failures[0]
    assert failure.kind == "bad" and "sha256" in failure.what and "2 times" in failure.what
    assert not (tmp_path / "out" / name).exists()
    assert not (tmp_path / "out" / ".partial" / f"{name}.part").exists()
    assert {f.name for f in result.files} == set(SHARDS) - {name}  # the others still arrived
    assert name not in read_local_lock(tmp_path / "out").files


def test_wrong_bytes_once_are_fetched_again(tmp_path, shards, manifests):
    name = "fineweb_train_000002.bin"
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        mirror.fault(f"/{name}", Fault("wrong", times=1))
        result = fetch_all(manifests, tmp_path / "out", mirror.url("/{filename}"))
        assert mirror.served[f"/{name}"] == 2 * len(shards[name])
    assert result.ok and (tmp_path / "out" / name).read_bytes() == shards[name]


def test_hub_detects_corruption_by_its_declared_hash_when_the_lock_has_none(tmp_path, shards, monkeypatch):
    root = tmp_path / "manifests"
    write_manifest(root, shards, locked=False)
    name = "fineweb_val_000000.bin"
    with HubServer(REPO, shards, commit=COMMIT) as hub:
        hub.fault_blob(name, Fault("wrong", at=5000, times=-1))
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = fetch_all(root, tmp_path / "out", "hub")
    assert [f.name for f in result.failures] == [name] and "(server)" in result.failures[0].what
    assert not (tmp_path / "out" / name).exists()


def test_http_errors_404_500_and_retries(tmp_path, shards, manifests):
    val, t1, t2 = SHARDS
    with FileServer({f"/{n}": d for n, d in shards.items() if n != t2}) as mirror:
        mirror.fault(f"/{val}", Fault("status", status=500, times=2))  # transient: retried
        mirror.fault(f"/{t1}", Fault("status", status=503, times=-1))  # never recovers
        result = fetch_all(manifests, tmp_path / "out", mirror.url("/{filename}"), retries=2)
        counts = {n: sum(r.path == f"/{n}" for r in mirror.requests) for n in SHARDS}
    failures = {f.name: f for f in result.failures}
    assert [f.name for f in result.files] == [val]
    assert failures[t1].kind == "unreachable" and "503" in failures[t1].what
    assert failures[t2].kind == "input" and "404" in failures[t2].what
    assert counts == {val: 3, t1: 3, t2: 1}  # 404 is final at once; 503 gets 1 + 2 retries


def test_cli_exit_codes_name_every_failed_file(tmp_path, shards, manifests):
    with FileServer({f"/{n}": d for n, d in list(shards.items())[:1]}) as mirror:
        proc = subprocess.run(
            [sys.executable, "-m", "pipeline", "data", "fetch", "--dataset", "toy", "--train-shards", "2",
             "--val-shards", "1", "--source", mirror.url("/{filename}"), "--dir", str(tmp_path / "out"),
             "--json", "--retries", "0"],
            cwd=REPO_ROOT, env={**os.environ, "REPRO_REGISTRY": str(manifests)}, capture_output=True, text=True,
            timeout=60)
    assert proc.returncode == 3, proc.stderr
    report = json.loads(proc.stdout)
    assert [f["name"] for f in report["failures"]] == list(SHARDS)[1:]
    assert "fineweb_train_000001.bin" in proc.stderr and "fineweb_train_000002.bin" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hub_refuses_other_revisions_and_disagreeing_hashes(tmp_path, shards, monkeypatch):
    root = tmp_path / "manifests"
    write_manifest(root, shards, locked=True, revision="f" * 40)
    with HubServer(REPO, shards, commit=COMMIT) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = fetch_all(root, tmp_path / "out", "hub")
        assert {f.kind for f in result.failures} == {"input"} and "no revision" in result.failures[0].what

    write_manifest(root, shards, locked=True)
    declared = {n: "ab" * 32 for n in shards}
    with HubServer(REPO, shards, commit=COMMIT, declared_sha256=declared) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = fetch_all(root, tmp_path / "out", "hub")
        assert hub.bytes_served == 0  # refused before downloading anything
    assert len(result.failures) == 3 and all(f.kind == "bad" for f in result.failures)
    assert "declares sha256" in result.failures[0].what


def test_existing_files_are_rehashed_kept_when_good_replaced_when_bad(tmp_path, shards, manifests):
    out = tmp_path / "out"
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        assert fetch_all(manifests, out, mirror.url("/{filename}")).ok
        mirror.reset_counts()
        bad = out / "fineweb_train_000001.bin"
        data = bytearray(bad.read_bytes())
        data[-10] ^= 1
        bad.write_bytes(bytes(data))
        result = fetch_all(manifests, out, mirror.url("/{filename}"))
        assert result.ok and mirror.bytes_served == len(shards[bad.name])
    assert [f.name for f in result.files if not f.reused] == [bad.name]
    assert bad.read_bytes() == shards[bad.name]


def test_a_partial_file_of_another_version_is_not_resumed(tmp_path, shards, manifests):
    name = "fineweb_val_000000.bin"
    partial = tmp_path / "out" / ".partial"
    partial.mkdir(parents=True)
    (partial / f"{name}.part").write_bytes(b"x" * 5000)
    (partial / f"{name}.part.json").write_text(json.dumps({"size": None, "sha256": "cd" * 32}))
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        result = fetch(load_dataset("toy", manifests), [name], tmp_path / "out", mirror.url("/{filename}"), quick())
        assert mirror.requests[0].range is None
    assert result.ok and (tmp_path / "out" / name).read_bytes() == shards[name]


def test_folder_source_checks_the_folder_lock(tmp_path, shards, manifests):
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        assert fetch_all(manifests, tmp_path / "first", mirror.url("/{filename}")).ok
    write_manifest(manifests, shards, locked=False)  # only the folder's data.lock.yaml vouches now
    result = fetch_all(manifests, tmp_path / "second", str(tmp_path / "first"))
    assert result.ok and all("sha256:server" in f.checked for f in result.files)
    assert result.lock_digest == fetch_all(manifests, tmp_path / "first", str(tmp_path / "first")).lock_digest


def test_lock_needs_a_declared_hash(tmp_path, shards, monkeypatch):
    root = tmp_path / "manifests"
    write_manifest(root, shards, locked=False)
    with FileServer({f"/{n}": d for n, d in shards.items()}) as mirror:
        plain = fetch_all(root, tmp_path / "a", mirror.url("/{filename}"))
        locking = fetch_all(root, tmp_path / "b", mirror.url("/{filename}"), lock=True)
    assert plain.ok and set(plain.unhashed) == set(SHARDS)  # header and size only: reported, not hidden
    assert len(locking.failures) == 3 and "vouches for a sha256" in locking.failures[0].what
    assert not list((tmp_path / "b").glob("*.bin"))


def test_cli_lock_records_the_hub_hashes_through_hf_endpoint(tmp_path, shards):
    root = tmp_path / "manifests"
    path = write_manifest(root, shards, locked=False)
    env = {**os.environ, "REPRO_REGISTRY": str(root), "HF_HOME": str(tmp_path / "hf")}
    with HubServer(REPO, shards, commit=COMMIT) as hub:
        env["HF_ENDPOINT"] = hub.endpoint
        proc = subprocess.run([sys.executable, "-m", "pipeline", "data", "fetch", "--dataset", "toy",
                               "--train-shards", "2", "--val-shards", "1", "--dir", str(tmp_path / "out"),
                               "--lock", "--json"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(proc.stdout)["locked"]) == sorted(SHARDS)
    manifest = load_dataset(path)
    for name, data in shards.items():
        assert manifest.lock[name].sha256 == hashlib.sha256(data).hexdigest()
        assert manifest.lock[name].size == len(data)
    assert path.read_text().count("# filled by --lock") == 3 and "# the lock stays last" in path.read_text()


def test_the_hub_look_alike_serves_hf_hub_download_through_hf_endpoint(tmp_path, shards):
    name = "fineweb_train_000001.bin"
    code = ("import sys; from huggingface_hub import hf_hub_download; "
            f"print(hf_hub_download({REPO!r}, {name!r}, repo_type='dataset', revision={COMMIT!r}, "
            "local_dir=sys.argv[1]))")
    with HubServer(REPO, shards, commit=COMMIT) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf")}
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "local")], env=env, capture_output=True,
                              text=True, timeout=60)
        file_requests = [(r.method, r.status) for r in hub.requests if "/resolve/" in r.path]
        blob_requests = [(r.method, r.status) for r in hub.cdn.requests]
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).read_bytes() == shards[name]
    assert file_requests == [("HEAD", 302)] and blob_requests == [("GET", 200)]
