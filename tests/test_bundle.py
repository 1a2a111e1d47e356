"""repro archive / bundle verify / bundle show on run directories generated per the run-directory contract."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import subprocess
import sys
import tarfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from pipeline.bundle.archive import ArchiveSources, archive
from pipeline.bundle.verify import verify_bundle as _verify_bundle
from pipeline.data.verify import LockEntry, write_local_lock
from pipeline.hashing import sha256_file
from pipeline.preflight.run import preflight_log, write_report
from pipeline.records.model import load_record
from pipeline.workspace import CHECKOUT_ROOT
from tests.logfactory import make_log
from tests.paths import REPO_ROOT

RECORD = "2025-09-23_MuonCustomSizing"
RECORDS = CHECKOUT_ROOT / "manifests" / "records"  # the verifier's registry in these tests: the checkout's
OUTCOME = "reproduced-with-deviations"  # the test logs carry no program text: code identity unverified
HF_TOKEN = "hf_PlantedTokenAbcdefghijklmnop1234"
PASSWORD = "s3cret-Passw0rd-planted"


def make_data_dir(root: Path) -> Path:
    data = root / "data" / "synth"
    data.mkdir(parents=True)
    for name, size in (("fineweb_val_000000.bin", 1024 + 2 * 512), ("fineweb_train_000001.bin", 1024 + 2 * 4096)):
        (data / name).write_bytes(bytes(size))
    write_local_lock(data, "fineweb10B-gpt2",
                     [LockEntry(name=p.name, size=p.stat().st_size, sha256="ab" * 32, tokens=None, source="synth")
                                               for p in sorted(data.glob("*.bin"))])
    return data


def make_run(root: Path, run_id: str, *, loss: float = 3.2795, status: str = "succeeded", exit_code: int | None = 0,
             cut_after_step: int | None = None, step_ms: float = 89.1, stdout: str = "", data_dir: Path | None = None,
             ended_at: str | None = "2026-11-29T11:00:00Z", trainer: str = "record") -> Path:
    """A run directory as pipeline/runs/rundir.py writes it (notes/rundir-contract.md)."""
    run = root / "runs" / RECORD / run_id
    run.mkdir(parents=True)
    (run / "log.txt").write_text(make_log(None, final_loss=loss, step_ms=step_ms, cut_after_step=cut_after_step))
    (run / "stdout.txt").write_text(f"launching {run_id}\n{stdout}")
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "val_loss": 10.8}) + "\n")
    report = preflight_log(run / "log.txt", load_record(RECORD, RECORDS))  # the node's facts, from the log header
    write_report(dataclasses.replace(report, created_utc="2026-11-29T10:56:00Z"), run / "preflight.json")
    (run / "status").write_text(status + "\n")
    meta = {"schema_version": 1, "run_id": run_id, "record": RECORD, "trainer": trainer, "runtime": "docker",
            "preset": None, "overrides": [], "world_size": 8, "command": ["torchrun", "--nproc_per_node=8", "train.py"],
            "image_id": "sha256:" + "1" * 64, "environment": "record-2025-09", "environment_lock_sha256": None,
            "program_sha256": "2" * 64, "program_fingerprint": None, "data_dir": str(data_dir or root / "nodata"),
            "data_lock_sha256": None, "started_at": "2026-11-29T10:57:00Z", "ended_at": ended_at,
            "exit_code": exit_code, "status": status, "host_environment": None}
    (run / "run.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return run


def three_runs(tmp_path: Path) -> list[Path]:
    data = make_data_dir(tmp_path)
    return [make_run(tmp_path, "20261129T105700Z-aaaa", loss=3.2790, data_dir=data),
            make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2801, step_ms=89.2, data_dir=data,
                     ended_at="2026-11-29T11:08:00Z"),
            make_run(tmp_path, "20261129T111300Z-cccc", loss=3.2794, step_ms=89.0, data_dir=data,
                     ended_at="2026-11-29T11:16:00Z")]


@pytest.fixture
def runs(tmp_path) -> list[Path]:
    return three_runs(tmp_path)


@pytest.fixture(scope="module")
def shared_bundle(tmp_path_factory) -> Path:
    """One bundle of three good runs, for the tests that only read or copy it."""
    root = tmp_path_factory.mktemp("shared-bundle")
    return make_bundle(three_runs(root), root / "bundles")


SOURCES = ArchiveSources(pip_freeze="numpy==2.1.0\ntorch==2.9.0\n", image_state={"image_id": "sha256:" + "1" * 64})


def make_bundle(runs, out: Path, **kw) -> Path:
    kw.setdefault("sources", SOURCES)
    kw.setdefault("environ", {})
    kw.setdefault("work_dir", Path(runs[0]).parents[2])
    return archive(load_record(RECORD, RECORDS), runs, out, **kw).path


def verify_bundle(path: Path, **kw):
    return _verify_bundle(path, RECORDS, **kw)


def repro(*args, env=None):
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env)


def test_archive_layout_metadata_and_manifest(runs, tmp_path):
    path = make_bundle(runs, tmp_path / "bundles")
    assert path.name == f"{RECORD}-20261129T111600Z-3runs.tar.gz" and not list(path.parent.glob("*.partial"))
    raw = path.read_bytes()
    assert raw[:3] == b"\x1f\x8b\x08" and raw[3] & 0x08 == 0 and raw[4:8] == b"\0\0\0\0"  # no FNAME, mtime 0
    with tarfile.open(path) as tar:
        infos = tar.getmembers()
    top = path.name[:-len(".tar.gz")]
    names = [i.name.removeprefix(top + "/") for i in infos]
    assert names[:2] == ["manifest.yaml", "SHA256SUMS"] and names[2:] == sorted(names[2:])
    for rel in ("report.md", "plots/val_loss.png", "plots/step_time.png", "preflight.json", "data/data.lock.yaml",
                "environment/pip-freeze.txt", "environment/image.json", f"manifests/records/{RECORD}.yaml",
                "manifests/records/2025-09-21_DropAttn.yaml", "runs/20261129T105700Z-aaaa/log.txt",
                "runs/20261129T105700Z-aaaa/status", "runs/20261129T105700Z-aaaa/run.yaml",
                "runs/20261129T105700Z-aaaa/stdout.txt", "runs/20261129T105700Z-aaaa/metrics.jsonl"):
        assert rel in names
    end = int(datetime(2026, 11, 29, 11, 16, tzinfo=timezone.utc).timestamp())  # the last run's end
    assert {(i.uid, i.gid, i.uname, i.gname, i.mode, i.mtime, i.type) for i in infos} == \
        {(0, 0, "", "", 0o644, end, tarfile.REGTYPE)}
    with tarfile.open(path) as tar:
        manifest = yaml.safe_load(tar.extractfile(f"{top}/manifest.yaml").read())
        sums = tar.extractfile(f"{top}/SHA256SUMS").read().decode()
    assert manifest["schema_version"] == 2 and manifest["record"]["name"] == RECORD
    assert manifest["verdict"]["outcome"] == OUTCOME and manifest["schema_version"] == 2
    assert [r["id"] for r in manifest["runs"]] == [r.name for r in runs]
    assert [r["final_val_loss"] for r in manifest["runs"]] == [3.2790, 3.2801, 3.2794]
    assert manifest["runs"][0]["status"] == "succeeded" and manifest["runs"][0]["exit_code"] == 0
    assert manifest["environment"]["image_ids"] == ["sha256:" + "1" * 64]
    assert manifest["environment"]["pip_freeze"] == "environment/pip-freeze.txt"
    assert manifest["hardware"]["facts"]["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert [s["name"] for s in manifest["data"]["shards"]] == ["fineweb_train_000001.bin", "fineweb_val_000000.bin"]
    assert len(manifest["data"]["lock_sha256"]) == 64
    assert len(sums.splitlines()) == len(names) - 1  # every member but SHA256SUMS itself


def test_two_archives_of_the_same_runs_are_byte_identical(runs, tmp_path):
    first = make_bundle(runs, tmp_path / "a")
    second = make_bundle(list(reversed(runs)), tmp_path / "b")
    assert first.name == second.name and first.read_bytes() == second.read_bytes()


def test_verify_accepts_an_untouched_bundle(shared_bundle):
    path = shared_bundle
    check = verify_bundle(path)
    assert check.ok, check.problems
    assert check.recomputed_outcome == check.manifest_outcome == OUTCOME
    result = repro("bundle", "verify", path)
    assert result.returncode == 0 and "bundle verified" in result.stdout
    shown = repro("bundle", "show", path)
    assert shown.returncode == 0 and f"verdict  {OUTCOME}" in shown.stdout and "20261129T110500Z-bbbb" in shown.stdout
    data = json.loads(repro("bundle", "verify", "--json", path).stdout)
    assert data["ok"] and data["problems"] == []


# ---- tampering: rewrite the archive member by member ------------------------------------------------

def read_all(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tar:
        return [(i, tar.extractfile(i).read() if i.isreg() else b"") for i in tar.getmembers()]


def write_all(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def entry(name: str, data: bytes = b"", kind=tarfile.REGTYPE, link: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    return info, data


def flip_byte(members, rel):
    out = []
    for info, data in members:
        if info.name.endswith("/" + rel):
            at = len(data) // 2
            data = data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]
        out.append((info, data))
    return out


TAMPERING = {
    "changed byte": (lambda m, top: flip_byte(m, "runs/20261129T105700Z-aaaa/log.txt"),
                     "runs/20261129T105700Z-aaaa/log.txt: sha256 differs from SHA256SUMS"),
    "added file": (lambda m, top: m + [entry(f"{top}/runs/20261129T105700Z-aaaa/extra.txt", b"hello\n")],
                   "runs/20261129T105700Z-aaaa/extra.txt: not listed in SHA256SUMS (added after archiving)"),
    "removed file": (lambda m, top: [x for x in m if not x[0].name.endswith("/report.md")],
                     "report.md: listed in SHA256SUMS but not in the bundle (removed after archiving)"),
    "dot-dot member": (lambda m, top: m + [entry(f"{top}/../../etc/evil", b"x")],
                       "/../../etc/evil: '..' in the path"),
    "symlink member": (lambda m, top: m + [entry(f"{top}/runs/link", kind=tarfile.SYMTYPE, link="/etc/passwd")],
                       "runs/link: symbolic link (to '/etc/passwd')"),
    "hardlink member": (lambda m, top: m + [entry(f"{top}/runs/hard", kind=tarfile.LNKTYPE, link="/etc/passwd")],
                        "runs/hard: hard link"),
    "absolute member": (lambda m, top: m + [entry("/tmp/evil", b"x")], "/tmp/evil: absolute path"),
    "device member": (lambda m, top: m + [entry(f"{top}/dev0", kind=tarfile.CHRTYPE)], "dev0: device file"),
    "fifo member": (lambda m, top: m + [entry(f"{top}/pipe", kind=tarfile.FIFOTYPE)], "pipe: fifo"),
    "duplicate member": (lambda m, top: m + [entry(f"{top}/report.md", b"# other\n")],
                         "report.md: appears twice in the archive"),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_each_tampering_is_named(shared_bundle, tmp_path, case):
    path = shared_bundle
    edit, expected = TAMPERING[case]
    top = path.name[:-len(".tar.gz")]
    bad = write_all(tmp_path / "bad.tar.gz", edit(read_all(path), top))
    check = verify_bundle(bad)
    assert not check.ok
    assert any(expected in str(p) for p in check.problems), [str(p) for p in check.problems]
    if case in ("changed byte", "dot-dot member", "symlink member"):  # the command line too (a subprocess each)
        result = repro("bundle", "verify", bad)
        assert result.returncode == 1 and expected in result.stdout and "Traceback" not in result.stderr


def test_every_problem_is_reported_not_only_the_first(shared_bundle, tmp_path):
    path = shared_bundle
    top = path.name[:-len(".tar.gz")]
    members = flip_byte(read_all(path), "runs/20261129T110500Z-bbbb/stdout.txt")
    members = [x for x in members if not x[0].name.endswith("/plots/step_time.png")]
    members += [entry(f"{top}/notes.txt", b"added"), entry(f"{top}/ln", kind=tarfile.SYMTYPE, link="x")]
    check = verify_bundle(write_all(tmp_path / "bad.tar.gz", members))
    text = "\n".join(map(str, check.problems))
    for expected in ("runs/20261129T110500Z-bbbb/stdout.txt: sha256 differs", "plots/step_time.png: listed in",
                     "notes.txt: not listed", "ln: symbolic link"):
        assert expected in text
    # nothing is extracted, so even beside a symlink member the verdict is recomputed (in memory)
    assert check.recomputed_outcome == OUTCOME


def test_oversized_member_is_refused(shared_bundle):
    check = verify_bundle(shared_bundle, max_member_bytes=60_000)
    assert any("over the 60000-byte member limit (checked against its header before reading" in p.problem
               for p in check.problems)
    assert check.recomputed_outcome is None and any("not recomputed" in n for n in check.notes)


def test_a_rewritten_verdict_is_caught_even_with_fresh_hashes(shared_bundle, tmp_path):
    """Whoever edits the manifest and recomputes SHA256SUMS still cannot change what the logs say."""
    import hashlib

    path = shared_bundle
    members = read_all(path)
    files = {i.name.split("/", 1)[1]: d for i, d in members}
    manifest = yaml.safe_load(files["manifest.yaml"])
    manifest["verdict"]["outcome"] = "reproduced"
    manifest["runs"][1]["final_val_loss"] = 3.2700
    files["manifest.yaml"] = yaml.safe_dump(manifest, sort_keys=False).encode()
    files["SHA256SUMS"] = "".join(f"{hashlib.sha256(files[n]).hexdigest()}  {n}\n"
                                  for n in sorted(files) if n != "SHA256SUMS").encode()
    rebuilt = [(info, files[info.name.split("/", 1)[1]]) for info, _ in members]
    check = verify_bundle(write_all(tmp_path / "forged.tar.gz", rebuilt))
    text = "\n".join(map(str, check.problems))
    assert f"verdict outcome says 'reproduced', but the logs inside give '{OUTCOME}'" in text
    assert "runs[20261129T110500Z-bbbb].final_val_loss is 3.27" in text


def test_garbage_and_missing_bundles(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a bundle at all")
    result = repro("bundle", "verify", junk)
    assert result.returncode == 1 and "(archive): not a readable tar.gz" in result.stdout
    missing = repro("bundle", "verify", tmp_path / "nope.tar.gz")
    assert missing.returncode == 3 and "not found" in missing.stderr and "Traceback" not in missing.stderr
    not_runs = repro("archive", tmp_path, "--record", RECORD, "--out", tmp_path / "b")
    assert not_runs.returncode == 3 and "neither a status file nor run.yaml" in not_runs.stderr


# ---- secrets ------------------------------------------------------------------------------------------

def test_planted_secrets_appear_nowhere_in_the_bundle(tmp_path):
    data = make_data_dir(tmp_path)
    leaky = make_run(tmp_path, "20261129T105700Z-aaaa", data_dir=data,
                     stdout=f"env: HF_TOKEN={HF_TOKEN} DB_PASSWORD={PASSWORD}\nhf_AnotherTokenNotInEnv0123456789\n")
    meta = yaml.safe_load((leaky / "run.yaml").read_text())
    meta["command"].append(f"--token={HF_TOKEN}")
    (leaky / "run.yaml").write_text(yaml.safe_dump(meta))
    log = (leaky / "log.txt").read_text()
    (leaky / "log.txt").write_text(log.replace("Running Python", f"password {PASSWORD}\nRunning Python", 1))
    other = make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2799, data_dir=data)
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": HF_TOKEN, "DB_PASSWORD": PASSWORD, "HOME": str(tmp_path)}
    result = repro("archive", leaky, other, "--out", tmp_path / "bundles", "--json", env=env)
    assert result.returncode == 0, result.stderr
    path = Path(json.loads(result.stdout)["path"])
    if not path.is_absolute():
        path = REPO_ROOT / path
    blobs = [path.read_bytes(), gzip.decompress(path.read_bytes())]
    with tarfile.open(path) as tar:
        blobs += [tar.extractfile(i).read() for i in tar.getmembers()]
    for blob in blobs:
        for secret in (HF_TOKEN, PASSWORD, "hf_AnotherTokenNotInEnv0123456789"):
            assert secret.encode() not in blob
    with tarfile.open(path) as tar:
        top = path.name[:-len(".tar.gz")]
        manifest = yaml.safe_load(tar.extractfile(f"{top}/manifest.yaml").read())
        stdout = tar.extractfile(f"{top}/runs/20261129T105700Z-aaaa/stdout.txt").read().decode()
    assert "HF_TOKEN=[REDACTED] DB_PASSWORD=[REDACTED]" in stdout
    counts = {r["member"]: r["count"] for r in manifest["redactions"]}
    assert counts["runs/20261129T105700Z-aaaa/stdout.txt"] == 3
    assert counts["runs/20261129T105700Z-aaaa/run.yaml"] == 1 and counts["runs/20261129T105700Z-aaaa/log.txt"] == 1
    assert verify_bundle(path).ok


# ---- crashed and aborted runs ------------------------------------------------------------------------------

def test_crashed_and_aborted_runs_are_archived_with_status_logs_and_reasons(tmp_path):
    data = make_data_dir(tmp_path)
    good = make_run(tmp_path, "20261129T105700Z-aaaa", data_dir=data)
    crashed = make_run(tmp_path, "20261129T110500Z-bbbb", status="failed", exit_code=1, cut_after_step=700,
                       stdout="Traceback (most recent call last):\nRuntimeError: CUDA error: illegal memory access\n",
                       data_dir=data)
    aborted = make_run(tmp_path, "20261129T111300Z-cccc", status="aborted", exit_code=130, cut_after_step=40,
                       stdout="^C interrupted\n", data_dir=data)
    result = archive(load_record(RECORD, RECORDS), [good, crashed, aborted], tmp_path / "bundles", sources=SOURCES,
                     environ={})
    assert result.outcome == "invalid"
    assert "runs/20261129T110500Z-bbbb: run status is failed (exit code 1)" in result.reasons
    assert any(r.startswith("runs/20261129T110500Z-bbbb: ") and "last step reached is 700 of 1680" in r
               for r in result.reasons)
    assert any(r.startswith("runs/20261129T111300Z-cccc: run status is aborted (exit code 130)")
               for r in result.reasons)
    with tarfile.open(result.path) as tar:
        top = result.name
        assert tar.extractfile(f"{top}/runs/20261129T110500Z-bbbb/status").read() == b"failed\n"
        stdout = tar.extractfile(f"{top}/runs/20261129T110500Z-bbbb/stdout.txt").read()
        assert b"CUDA error: illegal memory access" in stdout
        assert tar.extractfile(f"{top}/runs/20261129T111300Z-cccc/status").read() == b"aborted\n"
        assert b"step:40/1680" in tar.extractfile(f"{top}/runs/20261129T111300Z-cccc/log.txt").read()
        manifest = yaml.safe_load(tar.extractfile(f"{top}/manifest.yaml").read())
        report = tar.extractfile(f"{top}/report.md").read().decode()
    assert {"code": "run.status", "severity": "problem", "data": {
        "run": "runs/20261129T110500Z-bbbb", "status": "failed", "exit_code": 1}} in manifest["verdict"]["findings"]
    rows = {r["id"]: r for r in manifest["runs"]}
    assert rows["20261129T110500Z-bbbb"]["status"] == "failed" and rows["20261129T110500Z-bbbb"]["exit_code"] == 1
    assert rows["20261129T111300Z-cccc"]["status"] == "aborted" and rows["20261129T111300Z-cccc"]["steps"] == "40/1680"
    assert "## Verdict: **invalid**" in report and "| 20261129T111300Z-cccc | aborted |" in report
    check = verify_bundle(result.path)
    assert check.ok and check.recomputed_outcome == "invalid"


# ---- signatures ---------------------------------------------------------------------------------------------

def write_keys(folder: Path, stem: str) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private, public = folder / f"{stem}.pem", folder / f"{stem}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def test_signed_bundle_checks_with_the_right_key_only(runs, tmp_path):
    private, public = write_keys(tmp_path, "signer")
    _, stranger = write_keys(tmp_path, "stranger")
    path = make_bundle(runs, tmp_path / "bundles", sign_key=private)
    assert make_bundle(runs, tmp_path / "again", sign_key=private).read_bytes() == path.read_bytes()
    good = verify_bundle(path, pubkey=public)
    assert good.ok and good.signature.status == "valid"
    wrong = verify_bundle(path, pubkey=stranger)
    assert not wrong.ok and wrong.signature.status == "invalid"
    assert any(p.member == "SHA256SUMS.sig" for p in wrong.problems)
    unsigned = make_bundle(runs, tmp_path / "plain")
    missing = verify_bundle(unsigned, pubkey=public)
    assert any("SHA256SUMS.sig: missing, although --pubkey" in str(p) for p in missing.problems)
    cli = repro("bundle", "verify", path, "--pubkey", public)
    assert cli.returncode == 0 and "signature valid" in cli.stdout
    bad_key = repro("archive", *runs, "--out", tmp_path / "x", "--sign-key", public)
    assert bad_key.returncode == 3 and "not an unencrypted PEM private key" in bad_key.stderr


def test_attempts_are_archived_outside_the_verdict(tmp_path):
    data = make_data_dir(tmp_path)
    crashed = make_run(tmp_path, "20261129T105700Z-aaaa", status="failed", exit_code=1, cut_after_step=300,
                       data_dir=data)
    good = [make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2792, data_dir=data),
            make_run(tmp_path, "20261129T111300Z-cccc", loss=3.2797, data_dir=data, ended_at="2026-11-29T11:16:00Z")]
    result = archive(load_record(RECORD, RECORDS), good, tmp_path / "bundles", sources=SOURCES, environ={},
                     attempts=[crashed])
    assert result.outcome == OUTCOME and "attempts/20261129T105700Z-aaaa/status" in result.members
    manifest = yaml.safe_load(tarfile.open(result.path).extractfile(f"{result.name}/manifest.yaml").read())
    (attempt,) = manifest["attempts"]
    assert attempt["status"] == "failed" and attempt["steps"] == "300/1680"
    assert {"code": "run.status", "severity": "problem", "data": {
        "run": "attempts/20261129T105700Z-aaaa", "status": "failed", "exit_code": 1}} in attempt["findings"]
    assert verify_bundle(result.path).ok
    # an attempt quietly dropped from the listing (with fresh hashes) is still found
    import hashlib

    members = read_all(result.path)
    files = {i.name.split("/", 1)[1]: d for i, d in members}
    doctored = yaml.safe_load(files["manifest.yaml"])
    doctored["attempts"] = []
    files["manifest.yaml"] = yaml.safe_dump(doctored, sort_keys=False).encode()
    files["SHA256SUMS"] = "".join(f"{hashlib.sha256(files[n]).hexdigest()}  {n}\n"
                                  for n in sorted(files) if n != "SHA256SUMS").encode()
    check = verify_bundle(write_all(tmp_path / "x.tar.gz", [(i, files[i.name.split("/", 1)[1]]) for i, _ in members]))
    assert any("attempts/20261129T105700Z-aaaa: in the bundle but not listed" in str(p) for p in check.problems)


def test_host_runs_get_the_interpreters_package_list_without_its_path(tmp_path):
    """pip freeze runs the interpreter the run.yaml names (its real path); the bundle keeps only a placeholder."""
    data = make_data_dir(tmp_path)
    runs = [make_run(tmp_path, "20261129T105700Z-aaaa", data_dir=data),
            make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2799, data_dir=data)]
    for run in runs:
        meta = yaml.safe_load((run / "run.yaml").read_text())
        meta.update(runtime="host", image_id=None, host_environment={"executable": sys.executable, "python": "3.11"})
        (run / "run.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    result = archive(load_record(RECORD, RECORDS), runs, tmp_path / "bundles", environ={}, work_dir=tmp_path)
    with tarfile.open(result.path) as tar:
        manifest = yaml.safe_load(tar.extractfile(f"{result.name}/manifest.yaml").read())
        freeze = tar.extractfile(f"{result.name}/environment/pip-freeze.txt").read().decode()
    assert any(line.startswith("pytest==") for line in freeze.splitlines())
    source = manifest["environment"]["pip_freeze_source"]
    assert source.endswith("/bin/python -m pip freeze") and sys.prefix not in source and source.startswith("<")
    assert verify_bundle(result.path).ok


def test_a_bundle_is_never_rewritten_under_its_name(runs, tmp_path):
    """Issue 37: a second archive of the same runs gets the next -vN; an explicit name that exists is refused."""
    first = make_bundle(runs, tmp_path / "bundles")
    digest = sha256_file(first)
    second = make_bundle(runs, tmp_path / "bundles")
    assert second.name == first.name.replace(".tar.gz", "-v2.tar.gz") and sha256_file(first) == digest
    refused = repro("archive", "--record", RECORD, "--out", tmp_path / "bundles", "--name", first.name[:-7], *runs)
    assert refused.returncode == 3 and "a bundle is never rewritten" in refused.stderr, refused.stderr
    assert sha256_file(first) == digest
