"""`make setup` installs only files the locks pin by sha256 (issue 37): torch included.

tools/setup_venv.sh runs every pip install with --require-hashes (the project itself aside, installed editable
from this clone without a build download) and keeps pip's report of each step in the venv; these tests read the
Makefile, the script and the reports of the venv they run in, the one `make setup` built.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "tools" / "setup_venv.sh"
LOCKS = ["requirements.lock", "requirements-torch-cpu.lock", "requirements-torch-pypi.lock",
         "requirements-triton.lock"]
STEPS = {"orchestrator", "torch", "triton", "project"}


def _pinned_hashes() -> set[str]:
    return {digest for lock in LOCKS
            for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", (REPO_ROOT / lock).read_text())}


def test_the_setup_recipe_installs_through_the_script_only():
    recipe = subprocess.run(["make", "-n", "-B", "setup", "VENV=/nonexistent-venv"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True).stdout
    assert "tools/setup_venv.sh" in recipe
    assert "pip" not in recipe.replace("tools/setup_venv.sh", "")


def test_every_pip_install_of_the_script_checks_hashes():
    installs = [line for line in SCRIPT.read_text().splitlines() if line.startswith("pip_install ")]
    assert {line.split()[1] for line in installs} == STEPS
    for line in installs:
        if line.split()[1] == "project":
            assert "--no-build-isolation" in line and "--no-deps" in line, line
        else:
            assert "--require-hashes" in line, line


def test_every_lock_pins_each_requirement_to_one_version_with_hashes():
    for lock in LOCKS:
        text = (REPO_ROOT / lock).read_text().replace("\\\n", " ")
        entries = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert entries, lock
        for entry in entries:
            assert re.match(r"^[A-Za-z0-9_.-]+==\S+", entry), f"{lock}: not pinned: {entry[:80]}"
            assert "--hash=sha256:" in entry, f"{lock}: no hash: {entry[:80]}"


def test_the_local_cpu_build_is_the_pinned_one():
    """This project's machines hold torch's CPU build in pip's find-links; its sha256 is the lock's."""
    lock = (REPO_ROOT / "requirements-torch-cpu.lock").read_text()
    assert "torch==2.13.0+cpu" in lock
    wheel = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    if wheel.is_file():
        import hashlib
        digest = hashlib.sha256()
        with wheel.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        assert digest.hexdigest() in lock


def test_this_venv_holds_only_pinned_files():
    """pip's own reports of the build: every file it installed has a sha256 one of the locks pins."""
    reports = Path(sys.prefix) / "setup-reports"
    assert {p.stem for p in reports.glob("*.json")} == STEPS, f"{reports}: not built by `make setup`"
    pinned = _pinned_hashes()
    installed = []
    for path in sorted(reports.glob("*.json")):
        for item in json.loads(path.read_text())["install"]:
            name, info = item["metadata"]["name"], item["download_info"]
            if path.stem == "project":
                assert info.get("dir_info", {}).get("editable") and info["url"] == REPO_ROOT.as_uri(), info
                continue
            digest = info.get("archive_info", {}).get("hash", "")
            assert digest.startswith("sha256=") and digest[7:] in pinned, f"{path.stem}: {name} {digest}"
            installed.append(name.lower())
    assert "torch" in installed and "triton" in installed


def test_a_second_setup_waits_for_the_first_and_says_so(tmp_path):
    """Issue 37: `make demo` started while another builds .venv waited on nothing and died in pip."""
    venv = tmp_path / "venv"
    holder = subprocess.Popen(["flock", f"{venv}.lock", "sleep", "60"])
    try:
        deadline = time.monotonic() + 30
        while not Path(f"{venv}.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        second = subprocess.run(["timeout", "5", str(SCRIPT), sys.executable, str(venv), "cpu"], cwd=REPO_ROOT,
                                capture_output=True, text=True)
    finally:
        holder.kill()
        holder.wait()
    assert second.returncode == 124, second.stdout + second.stderr  # still waiting when timeout ended it
    assert f"another make is building {venv} now" in second.stdout and "waiting for it" in second.stdout
    assert not venv.exists()  # it touched nothing while the other held the lock


def test_a_torch_without_a_lock_is_told_the_choices():
    """`make setup TORCH=gpu` stopped on make's "No rule to make target 'requirements-torch-gpu.lock'": the script's
    "not a choice: TORCH=cpu (default) or TORCH=pypi" was never reached, the lock being a prerequisite."""
    done = subprocess.run(["make", "-n", "setup", "TORCH=gpu", "VENV=/nonexistent-venv"], cwd=REPO_ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "No rule to make target" not in done.stderr, done.stderr
    assert "TORCH=gpu is not a choice: TORCH=cpu (default) or TORCH=pypi" in done.stderr, done.stderr
