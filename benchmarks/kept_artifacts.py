"""A lease's compile artifacts kept in this repository's history, out of its working tree.

The compile artifacts a cold lease packs (benchmarks/device_session.sh pack_artifacts: xz parts, 23 MB for an H100)
make the next lease on that GPU's kind warm: no 10-minute compile of the record, and the whole table fits one lease.
But .devcarry/ is ignored, so they die with the checkout that fetched them, and the working tree cannot hold them:
every device call carries the tree (49 MB on 2026-12-06) and 64 MiB at most in all. So `keep` commits them once and
takes them out again in the next commit. Their blobs stay in history, the tree stays small, and KEPT (tracked) names
the commit that holds them and a hash of the compile's inputs (their code, not their docs) at the commit the lease
ran.

    python3 benchmarks/kept_artifacts.py keep H100 --built-at COMMIT   # .devcarry/artifacts-H100/ into history
    python3 benchmarks/kept_artifacts.py restore H100                  # back into .devcarry/artifacts-H100/

restore checks every part against PARTS.sha256. It refuses (exit 1, naming the paths) when an input of the compile
has changed since the lease, because the artifacts would then miss: the plan would be warm and the compile cold.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KEPT = Path("benchmarks") / "kept_artifacts.json"
# what the two programs' compiled graphs and kernels come from (benchmarks/sidebyside.py writes the record's patched
# program from the fixture; native is train/), by path in the repository
INPUTS = ("train", "benchmarks/sidebyside.py", "benchmarks/record_patch.py", "benchmarks/compile_artifacts",
          "pipeline/runs/fa3_standin", "tests/fixtures/record-program/2025-09-23_MuonCustomSizing/train_gpt.py")


class KeepError(Exception):
    """One clear message; exit 1."""


def git(repo: Path, *args: str, data: bool = False) -> str | bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if done.returncode != 0:
        raise KeepError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout if data else done.stdout.decode().strip()


def carried_dir(repo: Path, gpu: str) -> Path:
    return repo / ".devcarry" / f"artifacts-{gpu}"


def check_parts(folder: Path) -> list[str]:
    """The folder's files, once every part matches PARTS.sha256 and SHA256SUMS is there."""
    sums = folder / "PARTS.sha256"
    if not sums.is_file() or not (folder / "SHA256SUMS").is_file():
        raise KeepError(f"{folder}: no PARTS.sha256 or SHA256SUMS (a lease's parts/ folder, whole)")
    for line in sums.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        part = folder / name.lstrip("*")
        if not part.is_file() or hashlib.sha256(part.read_bytes()).hexdigest() != digest:
            raise KeepError(f"{part}: missing, or its sha256 differs from PARTS.sha256")
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def input_hashes(repo: Path, commit: str) -> dict[str, str]:
    """Each input path -> the sha256 of its files' names and blobs at commit, documentation (*.md) left out: nothing
    compiles from train/BENCHMARKS.md, and a lease's numbers written there must not void the artifacts it made."""
    hashes = {}
    for path in INPUTS:
        listing = git(repo, "ls-tree", "-r", commit, "--", path)
        if not listing:
            raise KeepError(f"{path}: not in commit {commit[:7]} (an input of the compile)")
        code = [line for line in listing.splitlines() if not line.endswith(".md")]
        hashes[path] = hashlib.sha256("\n".join(code).encode()).hexdigest()
    return hashes


def read_kept(repo: Path) -> dict:
    path = repo / KEPT
    return json.loads(path.read_text()) if path.is_file() else {}


def keep(repo: Path, gpu: str, built_at: str) -> str:
    """Commit .devcarry/artifacts-GPU/ under benchmarks/kept-artifacts/, then remove it with KEPT naming that commit.
    Returns the commit that holds them."""
    source = carried_dir(repo, gpu)
    names = check_parts(source)
    built_at = git(repo, "rev-parse", "--verify", f"{built_at}^{{commit}}")
    tracked = Path("benchmarks") / "kept-artifacts" / gpu
    if (repo / tracked).exists():
        raise KeepError(f"{repo / tracked} exists (an earlier keep that stopped half-way?): remove it, then keep again")
    shutil.copytree(source, repo / tracked)
    git(repo, "add", "--", str(tracked))
    git(repo, "commit", "-q", "-m", f"artifacts: the {gpu} compile artifacts of {built_at[:7]}'s lease, in history",
        "-m", f"Taken out of the tree in the next commit; {KEPT} names this one, and benchmarks/kept_artifacts.py "
              f"restore {gpu} brings them back into .devcarry/.", "--", str(tracked))
    holder = git(repo, "rev-parse", "HEAD")
    git(repo, "rm", "-q", "-r", "--", str(tracked))
    kept = read_kept(repo)
    kept[gpu] = {"commit": holder, "path": str(tracked), "built_at": built_at, "files": names,
                 "inputs": input_hashes(repo, built_at)}
    (repo / KEPT).write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    git(repo, "add", "--", str(KEPT))
    git(repo, "commit", "-q", "-m", f"artifacts: the {gpu} artifacts out of the tree, kept at {holder[:7]}",
        "-m", "Every device call carries the working tree; these stay in history only.", "--", str(tracked), str(KEPT))
    return holder


def restore(repo: Path, gpu: str) -> Path:
    """The kept parts of GPU into .devcarry/artifacts-GPU/, checked; KeepError when none are kept, their commit is not
    in this clone, or an input of the compile changed since their lease."""
    entry = read_kept(repo).get(gpu)
    if entry is None:
        raise KeepError(f"{KEPT}: no {gpu} artifacts kept (keep them after a cold lease on an {gpu})")
    changed = [p for p, h in input_hashes(repo, "HEAD").items() if entry["inputs"].get(p) != h]
    if changed:
        raise KeepError(f"the {gpu} artifacts were compiled at {entry['built_at'][:7]}, and since then "
                        f"{', '.join(changed)} changed: they would miss (a cold lease on an {gpu} makes new ones)")
    try:
        git(repo, "cat-file", "-e", f"{entry['commit']}^{{commit}}")
    except KeepError:
        raise KeepError(f"commit {entry['commit'][:7]} (the {gpu} artifacts) is not in this clone's history") from None
    target = carried_dir(repo, gpu)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in entry["files"]:
        (tmp / name).write_bytes(git(repo, "show", f"{entry['commit']}:{entry['path']}/{name}", data=True))
    check_parts(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)  # whole or not at all: device_session.sh plans warm on what it finds there
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    k = sub.add_parser("keep", help="commit .devcarry/artifacts-GPU/ into history and out of the tree")
    k.add_argument("--built-at", required=True, help="the commit the lease that compiled them ran")
    r = sub.add_parser("restore", help="bring the kept artifacts back into .devcarry/artifacts-GPU/")
    for q in (k, r):
        q.add_argument("gpu", choices=("H100", "H200"))
        q.add_argument("--repo", type=Path, default=REPO)
    a = ap.parse_args(argv)
    try:
        if a.command == "keep":
            print(f"kept at {keep(a.repo, a.gpu, a.built_at)}")
        else:
            print(f"restored into {restore(a.repo, a.gpu)}")
    except KeepError as exc:
        print(f"kept_artifacts: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
