"""Inputs for tests that build real images without a registry: a base image, wheels and a package index.

    from tests.docker_base import ensure_test_base, make_wheel, local_index
    tag = ensure_test_base(docker_client)          # "repro-test-base:bookworm", built when missing

ensure_test_base makes the base from Debian packages only: tests/ci/build-test-base.sh debootstraps
bookworm (python3, python3-venv) into a tarball cached under /var/cache/repro-test-base/, and the
Docker SDK imports it. The image carries the tarball's sha256 as a label, so a changed tarball is
re-imported instead of silently reused. make_wheel writes real, installable pure-Python wheels
(deterministic bytes: fixed zip dates), local_index serves a PEP 503 index over http on 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.server
import os
import subprocess
import threading
import zipfile
from pathlib import Path

BASE_REPOSITORY, BASE_TAG = "repro-test-base", "bookworm"
BASE_IMAGE = f"{BASE_REPOSITORY}:{BASE_TAG}"
BASE_SCRIPT = Path(__file__).resolve().parent / "ci" / "build-test-base.sh"
ROOTFS_LABEL = "io.repro.test-base.rootfs-sha256"
BASE_PYTHON = "3.11.2"  # bookworm's python3; the base's glibc is 2.36
ZIP_DATE = (2020, 1, 1, 0, 0, 0)


def _api(client):
    return getattr(client, "api", client)  # accept docker.DockerClient or docker.APIClient


def _rootfs_tarball() -> Path:
    proc = subprocess.run(["bash", str(BASE_SCRIPT)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{BASE_SCRIPT} failed (exit {proc.returncode}); it needs root and Debian's mirror:\n"
                           f"{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def ensure_test_base(client) -> str:
    """The tag of a bookworm + python3 image on this engine, imported from the cached rootfs if missing."""
    import docker

    api = _api(client)
    tarball = _rootfs_tarball()  # cheap when cached: the script only checks the file
    rootfs_sha = Path(str(tarball) + ".sha256").read_text().split()[0]
    try:
        labels = api.inspect_image(BASE_IMAGE)["Config"].get("Labels") or {}
        if labels.get(ROOTFS_LABEL) == rootfs_sha:
            return BASE_IMAGE
    except docker.errors.ImageNotFound:
        pass
    changes = ["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "ENV LANG=C.UTF-8",
               'CMD ["python3"]', f"LABEL {ROOTFS_LABEL}={rootfs_sha}"]
    api.import_image(src=str(tarball), repository=BASE_REPOSITORY, tag=BASE_TAG, changes=changes)
    labels = api.inspect_image(BASE_IMAGE)["Config"].get("Labels") or {}
    if labels.get(ROOTFS_LABEL) != rootfs_sha:
        raise RuntimeError(f"importing {tarball} did not produce {BASE_IMAGE} with label {ROOTFS_LABEL}")
    return BASE_IMAGE


# --- wheels -----------------------------------------------------------------------------------------------------

def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = (),
               modules: dict | None = None) -> Path:
    """A pure-Python wheel (py3-none-any) with real METADATA, WHEEL and RECORD; same inputs, same bytes."""
    dist = name.replace("-", "_")
    modules = modules if modules is not None else {f"{dist}/__init__.py": f'__version__ = "{version}"\n'}
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    files = dict(modules)
    files[f"{info}/METADATA"] = metadata
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: repro-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{path},{_record_hash(text.encode())},{len(text.encode())}\n" for path, text in files.items())
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    path = Path(directory) / f"{dist}-{version}-py3-none-any.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, text in files.items():
            entry = zipfile.ZipInfo(member, ZIP_DATE)
            entry.external_attr = 0o644 << 16
            zf.writestr(entry, text)
    return path


# --- a PEP 503 simple index on 127.0.0.1 --------------------------------------------------------------------------

def write_simple_index(root: Path, wheels: list[Path], announce: dict | None = None) -> Path:
    """root/simple/<project>/index.html linking root/files/<wheel>#sha256=…; announce overrides a hash."""
    announce = announce or {}
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        project = wheel.name.split("-")[0].lower().replace("_", "-")
        projects.setdefault(project, []).append(wheel)
        target = root / "files" / wheel.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wheel.read_bytes())
    for project, files in projects.items():
        sha = {w.name: announce.get(w.name) or hashlib.sha256(w.read_bytes()).hexdigest() for w in files}
        links = "".join(f'<a href="../../files/{w.name}#sha256={sha[w.name]}">{w.name}</a>\n' for w in files)
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    (root / "simple" / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n" + "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects))
        + "</body></html>\n")
    return root


def alpha_beta_index(tmp_path: Path):
    """(workspace, tmp_path): an empty registry under tmp_path/manifests, wheels alpha (needs beta>=2) and beta
    built into tmp_path/built and listed in a simple index at tmp_path/index (serve it with local_index)."""
    from pipeline.workspace import Workspace

    (tmp_path / "manifests" / "environments").mkdir(parents=True)
    ws = Workspace.resolve(root=tmp_path / "root", registry=tmp_path / "manifests")
    built = tmp_path / "built"
    wheels = [make_wheel(built, "alpha", "1.0", requires=("beta>=2",)), make_wheel(built, "beta", "2.1")]
    write_simple_index(tmp_path / "index", wheels)
    return ws, tmp_path


def make_cutlass_repo(tmp_path: Path) -> Path:
    """A one-commit git repository standing in for FA3's cutlass submodule (include/cutlass.h)."""
    cutlass = tmp_path / "cutlass"
    (cutlass / "include").mkdir(parents=True)
    (cutlass / "include" / "cutlass.h").write_text("#pragma once\n")
    git(tmp_path, "init", "-q", str(cutlass))
    git(cutlass, "add", ".")
    git(cutlass, "commit", "-q", "-m", "cutlass")
    return cutlass


GIT = ["git", "-c", "user.name=repro-tests", "-c", "user.email=tests@repro.invalid", "-c",
       "protocol.file.allow=always", "-c", "init.defaultBranch=main"]


def git(cwd: Path, *args: str) -> str:
    """git with a fixed identity (test repositories need commits, whatever the machine's config)."""
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def local_index(root: Path):
    """Serve root over http on 127.0.0.1 (a free port); yields the simple index URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def running_as_root() -> bool:
    return os.geteuid() == 0
