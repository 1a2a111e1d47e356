"""FA3's source as a file: so an offline build compiles exactly the pinned commit without git access.

    repro env lock --env record-2025-09 --wheelhouse DIR    (writes DIR/flash-attention-<commit>.tar)

git clones the pinned repository, checks out the commit, fetches the cutlass submodule and checks
that it sits at the pinned commit; the tree (without .git) is packed with sorted names, zero mtimes
and no owners, so the same commit always gives the same bytes and one sha256 in the lock.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

from pipeline.errors import MissingDependency, RunFailed

CUTLASS_PATH = "csrc/cutlass"  # where the FA3 tree keeps its cutlass submodule (docker/Dockerfile agrees)


def source_filename(commit: str) -> str:
    return f"flash-attention-{commit}.tar"


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd)
    except FileNotFoundError:
        raise MissingDependency("git is not installed",
                                "install git (apt-get install git) to lock FA3's source") from None
    if proc.returncode != 0:
        raise RunFailed(f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[-500:]}",
                        "check the FA3 repository URL and commit in the record manifest, and the network")
    return proc.stdout.strip()


def _normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
    return info


def archive_source(pin: dict, dest_dir: Path) -> Path:
    """dest_dir/flash-attention-<commit>.tar from git at the pinned commits (kept if already there)."""
    dest = Path(dest_dir) / source_filename(pin["commit"])
    if dest.is_file():
        return dest
    with tempfile.TemporaryDirectory(prefix="repro-fa3-") as tmp:
        src = Path(tmp) / "src"
        _git("clone", "--no-checkout", "--quiet", pin["repository"], str(src))
        _git("checkout", "--quiet", "--detach", pin["commit"], cwd=src)
        # a local path or file:// submodule (tests, mirrors) needs git's explicit consent since 2.38
        allow = ["-c", "protocol.file.allow=always"] if "://" not in pin["repository"] or \
            pin["repository"].startswith("file://") else []
        _git(*allow, "submodule", "update", "--init", "--quiet", CUTLASS_PATH, cwd=src)
        cutlass = _git("rev-parse", "HEAD", cwd=src / CUTLASS_PATH)
        if cutlass != pin["cutlass_commit"]:
            raise RunFailed(f"FA3 {pin['commit'][:12]} carries cutlass {cutlass}, the pin says {pin['cutlass_commit']}",
                            "correct software.flash_attention.cutlass_commit in the record manifest")
        from pipeline.atomic import atomic_open

        dest.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(dest) as tar_file, tarfile.open(fileobj=tar_file, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for root, dirs, files in os.walk(src):
                dirs[:] = sorted(d for d in dirs if d != ".git")
                for name in sorted(dirs) + sorted(f for f in files if f != ".git"):
                    path = Path(root) / name
                    tar.add(path, arcname=str(path.relative_to(src)), recursive=False, filter=_normalised)
    return dest
