"""benchmarks/kept_artifacts.py: a lease's compile artifacts kept in git history, out of the working tree (CPU).

    .venv/bin/python -m pytest -q tests/test_kept_artifacts.py
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import pytest

from benchmarks import kept_artifacts as ka


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with the compile's inputs committed and a lease's parts in .devcarry/artifacts-H100/."""
    for var, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                       ("GIT_COMMITTER_EMAIL", "t@t")):
        monkeypatch.setenv(var, value)
    root = tmp_path / "repo"
    for path in ka.INPUTS:
        f = root / path / "x.py" if "." not in path.rsplit("/", 1)[-1] else root / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"# {path}\n")
    (root / ".gitignore").write_text("/.devcarry/\n")
    git(root.parent, "init", "-q", str(root))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "inputs")
    parts = root / ".devcarry" / "artifacts-H100"
    parts.mkdir(parents=True)
    blobs = {"artifacts-record.bin.xz.part-00": os.urandom(3000), "artifacts-record.bin.xz.part-01": os.urandom(10),
             "artifacts-native.bin.xz.part-00": os.urandom(2000)}
    for name, blob in blobs.items():
        (parts / name).write_bytes(blob)
    (parts / "SHA256SUMS").write_text("ab" * 32 + "  artifacts-record.bin\n" + "cd" * 32 + "  artifacts-native.bin\n")
    (parts / "PARTS.sha256").write_text("".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in blobs.items()))
    return root


def test_kept_artifacts_leave_the_tree_stay_in_history_and_come_back_byte_for_byte(repo):
    before = {p.name: p.read_bytes() for p in (repo / ".devcarry" / "artifacts-H100").iterdir()}
    built = git(repo, "rev-parse", "HEAD")
    holder = ka.keep(repo, "H100", built)
    assert git(repo, "rev-list", "--count", "HEAD") == "3"  # inputs, the keeping commit, the one taking them out
    assert git(repo, "rev-parse", "HEAD~1") == holder
    assert not (repo / "benchmarks" / "kept-artifacts").exists()
    assert "kept-artifacts" not in git(repo, "ls-files")  # what a device call carries: not them
    assert git(repo, "status", "--porcelain") == ""
    kept = json.loads((repo / ka.KEPT).read_text())["H100"]
    assert kept["commit"] == holder and kept["built_at"] == built and sorted(kept["files"]) == sorted(before)

    shutil.rmtree(repo / ".devcarry")  # a new session's checkout
    assert ka.main(["restore", "H100", "--repo", str(repo)]) == 0
    after = {p.name: p.read_bytes() for p in (repo / ".devcarry" / "artifacts-H100").iterdir()}
    assert after == before


def test_restore_refuses_artifacts_whose_compile_inputs_changed_and_names_them(repo, capsys):
    ka.keep(repo, "H100", "HEAD")
    (repo / "train" / "x.py").write_text("# changed\n")
    git(repo, "commit", "-q", "-am", "train changed")
    assert ka.main(["restore", "H100", "--repo", str(repo)]) == 1
    err = capsys.readouterr().err
    assert "since then train changed: they would miss" in err and "Traceback" not in err
    assert not (repo / ".devcarry" / "artifacts-H100.tmp").exists()


def test_a_changed_note_in_an_input_folder_does_not_void_the_artifacts(repo):
    """A lease's numbers go into train/BENCHMARKS.md after the lease: documentation, not an input of the compile."""
    (repo / "train" / "BENCHMARKS.md").write_text("# before\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "notes")
    ka.keep(repo, "H100", "HEAD")
    (repo / "train" / "BENCHMARKS.md").write_text("# the lease's numbers\n")
    git(repo, "commit", "-q", "-am", "numbers")
    shutil.rmtree(repo / ".devcarry")
    assert ka.main(["restore", "H100", "--repo", str(repo)]) == 0
    (repo / "train" / "y.py").write_text("# new code\n")  # a new code file is a change
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "code")
    assert ka.main(["restore", "H100", "--repo", str(repo)]) == 1


def test_restore_says_when_nothing_is_kept_or_the_commit_is_not_in_this_clone(repo, capsys):
    assert ka.main(["restore", "H100", "--repo", str(repo)]) == 1
    assert "no H100 artifacts kept" in capsys.readouterr().err
    ka.keep(repo, "H100", "HEAD")
    kept = json.loads((repo / ka.KEPT).read_text())
    kept["H100"]["commit"] = "0" * 40
    (repo / ka.KEPT).write_text(json.dumps(kept))
    assert ka.main(["restore", "H100", "--repo", str(repo)]) == 1
    assert "is not in this clone's history" in capsys.readouterr().err


def test_keep_refuses_a_parts_folder_that_is_not_whole(repo, capsys):
    part = repo / ".devcarry" / "artifacts-H100" / "artifacts-record.bin.xz.part-01"
    part.write_bytes(b"truncated")
    assert ka.main(["keep", "H100", "--built-at", "HEAD", "--repo", str(repo)]) == 1
    assert "part-01: missing, or its sha256 differs" in capsys.readouterr().err
    assert git(repo, "rev-list", "--count", "HEAD") == "1"  # nothing committed


def test_keep_refuses_to_write_over_a_keep_that_stopped_half_way(repo, capsys):
    (repo / "benchmarks" / "kept-artifacts" / "H100").mkdir(parents=True)
    assert ka.main(["keep", "H100", "--built-at", "HEAD", "--repo", str(repo)]) == 1
    err = capsys.readouterr().err
    assert "kept-artifacts/H100 exists (an earlier keep that stopped half-way?)" in err and "Traceback" not in err
    assert git(repo, "rev-list", "--count", "HEAD") == "1"
