"""The bundles from the GPU device runs (docs/device-runs/) still verify with this checkout's code and registry,
on a Python without the `cryptography` package (like the device's own): an unsigned bundle needs no crypto."""

import subprocess
import sys
import tarfile

import pytest
import yaml

from tests.paths import REPO_ROOT

BUNDLES = sorted((REPO_ROOT / "docs" / "device-runs").glob("*/*.tar.gz"))
NO_CRYPTO = ("import sys; sys.modules['cryptography'] = None; from pipeline.cli import main; "
             "main(['--root', sys.argv[1], 'bundle', 'verify', sys.argv[2]])")


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_device_bundle_verifies_without_cryptography(bundle, tmp_path):
    done = subprocess.run([sys.executable, "-c", NO_CRYPTO, str(tmp_path), str(bundle)], capture_output=True,
                          text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.startswith("integrity only: unsigned")
    assert "verdict: smoke-passed" in done.stdout and "bundle verified" in done.stdout


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_fa3_standin_is_a_deviation_exactly_where_the_runs_used_it(bundle, tmp_path):
    """The record's program ran on the FlexAttention stand-in (run.yaml fa3_standin: true) in one of the two
    device bundles: its verdict lists that deviation (test above: `bundle verify` recomputes the verdict from the
    runs and finds the same); the native trainer's does not."""
    with tarfile.open(bundle) as tar:
        used = {yaml.safe_load(tar.extractfile(m))["fa3_standin"] for m in tar.getmembers()
                if m.name.endswith("/run.yaml")}
    assert len(used) == 1
    done = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(tmp_path), "bundle", "show", str(bundle)],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("deviation: attention: FA3 could not be imported" in done.stdout) == used.pop()


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_verify_on_the_smoke_runs_passes_with_exit_0(bundle, tmp_path):
    """`repro verify` and `bundle verify` agree on which outcomes pass: smoke-passed exits 0 in both."""
    with tarfile.open(bundle) as tar:
        tar.extractall(tmp_path / "bundle", filter="data")
    runs = sorted(p for p in (tmp_path / "bundle").glob("*/runs/*") if p.is_dir())
    assert runs
    done = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(tmp_path), "verify", *map(str, runs)],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert "verdict: smoke-passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


ANYRECORD = REPO_ROOT / "docs" / "device-runs" / "2026-12-01-h200-anyrecord"
# folder -> (the verdict, what `bundle show` must name as its reason): 2026-12-01's three records of three eras
OUTCOMES = {"fp8down": ("smoke-failed", "CUBLAS_STATUS_NOT_SUPPORTED"),
            "shortwindow": ("smoke-failed", "Loop-carried variable max_val"),
            "muon": ("smoke-passed", "val loss 10.8258 -> 3.8875 over 40 steps"),
            "warm-start": ("smoke-passed", "over 40 steps")}


@pytest.mark.parametrize("folder", sorted(OUTCOMES))
def test_any_record_bundles_verify_and_name_their_outcome(folder, tmp_path):
    """Issue 27's proof: a failed smoke run is a verified bundle whose verdict names the program's own error."""
    verdict, reason = OUTCOMES[folder]
    bundles = sorted((ANYRECORD / folder).glob("*.tar.gz"))
    assert bundles
    for bundle in bundles:
        done = subprocess.run([sys.executable, "-c", NO_CRYPTO, str(tmp_path), str(bundle)], capture_output=True,
                              text=True, cwd=REPO_ROOT)
        assert done.returncode == 0 and f"verdict: {verdict}" in done.stdout, done.stdout[-2000:] + done.stderr
        shown = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(tmp_path), "bundle", "show",
                                str(bundle)], capture_output=True, text=True, cwd=REPO_ROOT)
        assert shown.returncode == 0 and reason in shown.stdout, shown.stdout[-3000:]


NEWEST = REPO_ROOT / "docs" / "device-runs" / "2026-12-02-h200-history-4" / "2026-07-17_FP8DownProjection"


def test_the_newest_record_smoke_passed_on_torch_2_11_with_its_fp8_scales_declared(tmp_path):
    """Issue 35's fourth lease: 2026-07-17 on torch 2.11.0+cu130 verifies against this checkout's registry, and
    its bundle says both ways the run differed from the program's own torch: FP8 scales handed aligned, floats
    typed fp32 (pipeline/runs/fp8_scales.py, float_args.py)."""
    (bundle,) = NEWEST.glob("*.tar.gz")
    done = subprocess.run([sys.executable, "-c", NO_CRYPTO, str(tmp_path), str(bundle)], capture_output=True,
                          text=True, cwd=REPO_ROOT)
    assert done.returncode == 0 and "verdict: smoke-passed" in done.stdout, done.stdout[-2000:] + done.stderr
    shown = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(tmp_path), "bundle", "show", str(bundle)],
                           capture_output=True, text=True, cwd=REPO_ROOT)
    assert "deviation: FP8 scales: each one-element scale" in shown.stdout, shown.stdout[-3000:]
    assert "deviation: inductor: the program's Python float kernel arguments were typed fp32" in shown.stdout
