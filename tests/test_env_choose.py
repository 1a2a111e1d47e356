"""choose_environment: the record's environment, then its declared fallbacks; a lock resolved on the node
(trust on first use) kept in the work folder; never silent. Real indexes on 127.0.0.1, real pip."""

from __future__ import annotations

import types

import pytest

from pipeline.env.choose import choose_environment
from pipeline.env.lock import Lock, load_lock, lock_to_yaml, resolve_lock
from pipeline.env.manifest import load_environment
from pipeline.errors import MissingDependency
from pipeline.verdict.render import render
from pipeline.workspace import Workspace
from tests.docker_base import alpha_beta_index, local_index, write_simple_index

MANIFEST = """schema_version: 1
name: {name}
description: Test environment {name}.
{extra}dockerfile: docker/test.Dockerfile
bases:
  runtime: debian:bookworm@sha256:{digest}
python: 3.11.2
platform: {{glibc: "2.36", arch: x86_64}}
index_url: {index}
requirements: [alpha==1.0]
components: [python, packages]
"""
RECORD = types.SimpleNamespace(name="test-record", environment="rec")  # what choose_environment reads of a Record


@pytest.fixture
def world(tmp_path):
    """rec (complete lock, files on an index that can go away) with fallback fb (an unresolved placeholder lock)."""
    return alpha_beta_index(tmp_path)


def _write(ws, name, index, extra=""):
    (ws.environments_dir / f"{name}.yaml").write_text(
        MANIFEST.format(name=name, index=index, digest="cd" * 32, extra=extra))
    return load_environment(ws, name)


def _placeholder_lock(env) -> None:
    """A lock written offline: nothing resolved, as the record's nightly lock ships."""
    lock = Lock(environment=env.name, manifest_sha256=env.manifest_sha256, resolved_by="not resolved: offline",
                python=env.python, bases=dict(env.bases), packages=(), build_packages=(), flash_attention=None,
                expect=env.expected, deviations=env.deviations(), path=env.lock_path, unresolved=("alpha==1.0",))
    env.lock_path.write_text(lock_to_yaml(lock))


def _setup(ws, url, fallback_index=None):
    rec = _write(ws, "rec", url, extra="fallbacks: [fb]\n")
    resolve_lock(rec)  # complete, its URLs on this index
    fb = _write(ws, "fb", fallback_index or url, extra="deviation: the test's stand-in\n")
    _placeholder_lock(fb)
    return rec, fb


def test_the_records_own_environment_when_its_files_are_still_served(world):
    ws, tmp = world
    lines = []
    with local_index(tmp / "index") as url:
        rec, _ = _setup(ws, url)
        choice = choose_environment(ws, RECORD, work=tmp / "work", say=lines.append)
    assert choice.environment.name == "rec" and choice.source == "record" and not choice.resolved_on_node
    assert choice.deviations == () and choice.tried == () and choice.lock_path == rec.lock_path
    assert any(line.startswith("environment: rec") for line in lines)


def test_gone_files_fall_back_and_an_unresolved_lock_is_resolved_on_the_node(world):
    ws, tmp = world
    with local_index(tmp / "index") as url:
        _setup(ws, url, fallback_index="http://127.0.0.1:9/simple")
    # the record's index is gone now (a pruned nightly); the fallback resolves from a second, live index
    write_simple_index(tmp / "index2", sorted((tmp / "built").glob("*.whl")))
    lines = []
    with local_index(tmp / "index2") as url2:
        fb_path = ws.environments_dir / "fb.yaml"
        fb_path.write_text(fb_path.read_text().replace("http://127.0.0.1:9/simple", url2))
        _placeholder_lock(load_environment(ws, "fb"))
        choice = choose_environment(ws, RECORD, work=tmp / "work", say=lines.append, today="2026-11-30")
    assert choice.environment.name == "fb" and choice.source == "fallback" and choice.resolved_on_node
    assert choice.lock_path == tmp / "work" / "environments" / "fb.lock.yaml" and choice.lock_path.is_file()
    assert [(f.name, f.version) for f in choice.lock.packages] == [("alpha", "1.0"), ("beta", "2.1")]
    assert "resolved on this node on 2026-11-30" in choice.lock.notes
    assert [d.code for d in choice.deviations] == ["environment.fallback", "environment.lock_resolved_on_node"]
    assert all(d.severity == "deviation" for d in choice.deviations)
    assert render(choice.deviations[1]).startswith("lock of fb resolved on this node, 2026-11-30")
    assert choice.tried and choice.tried[0].startswith("rec: its lock names files")
    # said on screen, never silently: what was passed over, the resolution, the choice
    assert any("passed over: rec" in line for line in lines)
    assert any("resolving it on this node now (trust on first use)" in line for line in lines)
    assert any(line.startswith("environment: fb (FALLBACK") for line in lines)
    # the committed placeholder is untouched: the resolved lock lives only in the work folder
    assert load_lock(load_environment(ws, "fb")).unresolved == ("alpha==1.0",)

    # a second call reuses the lock resolved earlier, with every index gone
    again = choose_environment(ws, RECORD, work=tmp / "work", say=lines.append, today="2027-01-01")
    assert again.lock.sha256 == choice.lock.sha256 and again.resolved_on_node
    assert again.deviations[1].data["date"] == "2026-11-30"


def test_a_wheelhouse_keeps_the_records_environment_usable_offline(world):
    ws, tmp = world
    with local_index(tmp / "index") as url:
        rec = _write(ws, "rec", url, extra="fallbacks: [fb]\n")
        resolve_lock(rec, wheelhouse=tmp / "wheelhouse")
        _placeholder_lock(_write(ws, "fb", url))
    choice = choose_environment(ws, RECORD, work=tmp / "work", wheelhouse=tmp / "wheelhouse", say=lambda line: None)
    assert choice.environment.name == "rec" and choice.deviations == ()


def test_nothing_usable_names_every_candidate_and_exits_4(world):
    ws, tmp = world
    with local_index(tmp / "index") as url:
        _setup(ws, url, fallback_index="http://127.0.0.1:9/simple")
    with pytest.raises(MissingDependency) as err:
        choose_environment(ws, RECORD, work=tmp / "work", say=lambda line: None)
    assert err.value.exit_code == 4
    assert "rec: its lock names files" in err.value.what and "fb: resolving its lock on this node failed" \
        in err.value.what
    assert "--wheelhouse" in err.value.fix
    with pytest.raises(MissingDependency) as off:
        choose_environment(ws, RECORD, work=tmp / "work", say=lambda line: None, resolve_on_node=False)
    assert "resolving on this node is off" in off.value.what


def test_cli_venv_without_env_chooses_and_shows_the_deviations(world):
    """`repro env venv` on a node: the record's environment is gone, the fallback is resolved here and built."""
    import json
    import subprocess
    import sys

    ws, tmp = world
    record = (Workspace.resolve().records_dir / "2025-09-23_MuonCustomSizing.yaml").read_text()
    (ws.registry / "records").mkdir()
    (ws.registry / "records" / "2025-09-23_MuonCustomSizing.yaml").write_text(
        record.replace("\nenvironment: record-2025-09\n", "\nenvironment: rec\n"))
    with local_index(tmp / "index") as url:
        _setup(ws, url)  # rec's files on this index, which goes away below
    write_simple_index(tmp / "index2", sorted((tmp / "built").glob("*.whl")))
    with local_index(tmp / "index2") as url2:
        fb = _write(ws, "fb", url2, extra="deviation: the test's stand-in\n")
        _placeholder_lock(fb)
        done = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(ws.root), "--registry",
                               str(ws.registry), "env", "venv", "--python", sys.executable],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        as_json = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(ws.root), "--registry",
                                  str(ws.registry), "env", "venv", "--python", sys.executable, "--json"],
                                 capture_output=True, text=True, timeout=300)
    assert "passed over: rec" in done.stdout and "environment: fb (FALLBACK" in done.stdout
    assert "DEVIATION: environment fb stands in for the record's rec" in done.stderr
    assert "DEVIATION: lock of fb resolved on this node" in done.stderr
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    out = json.loads(as_json.stdout)
    assert out["reused"] and out["environment"] == "fb" and out["choice"]["resolved_on_node"]
    assert (ws.work / "2025-09-23_MuonCustomSizing" / "environments" / "fb.lock.yaml").is_file()


def test_a_stable_release_named_for_a_nightly_is_declared_as_a_deviation(world):
    """A record whose own environment pins the nearest stable release for its nightly: not silent."""
    ws, tmp = world
    nightly = types.SimpleNamespace(name="test-record", environment="rec",
                                    software=types.SimpleNamespace(torch="2.10.0.dev20251210+cu126"))
    with local_index(tmp / "index") as url:
        resolve_lock(_write(ws, "rec", url, extra="expect: {torch: 2.10.0+cu128}\n"))
        choice = choose_environment(ws, nightly, work=tmp / "work", say=lambda line: None)
        exact = choose_environment(ws, types.SimpleNamespace(
            name="r", environment="rec", software=types.SimpleNamespace(torch="2.10.0+cu128")),
            work=tmp / "work", say=lambda line: None)
    assert choice.source == "record" and [d.code for d in choice.deviations] == ["environment.stand_in"]
    assert "PyTorch 2.10.0+cu128 (rec) stands in for the record's 2.10.0.dev20251210+cu126" in render(
        choice.deviations[0])
    assert exact.deviations == ()
