"""A virtualenv from an environment's lock, for the host runtime (nodes that are containers, no Docker).

    repro env venv [--env NAME] [--wheelhouse DIR] [--index-url URL] [--python PATH]
    identity = build_venv(ws, env, lock, log=print)   # VenvIdentity: key, lock sha256, python, path

The same lock the image installs, with the same rule: every file is named by the lock and checked
against its sha256 (`pip install --require-hashes --no-deps` from a requirements file written from
the lock), so nothing unpinned enters. Files come from the lock's own URLs, from a local folder
(--wheelhouse, no network) or from another index (--index-url: a mirror; the hashes still decide).
They are fetched (and hash-checked) before anything is installed, and only those that the environment
manifest's requirements lead to are installed (pipeline/env/closure.py): a lock entry nothing requires
is left out, and the build says so.

The venv lives in ws.cache/venvs/<key>, key = sha256 of (lock sha256, the base Python's exact
version, its platform): a second call with the same inputs finds it complete and reuses it without
installing anything. A venv is not relocatable (its scripts name their own path), so it is built in
place; a marker file written last (repro-venv.json) says it is complete, and a folder without it
is an interrupted build, removed and built again. A file lock keeps two builders apart.

FA3, in this order: a flash_attn wheel in the wheelhouse (installed --no-deps, its sha256 recorded);
with --build-fa3, the lock's pinned source (the wheelhouse's archive, checked against the lock's
sha256, or git at the pinned commits) compiled once in this venv against its torch, with no build
isolation and the pin's build environment; the wheel is cached in ws.cache/fa3-wheels/<key> (key:
FA3 commit, cutlass commit, build environment and the venv's key) and reused by every later venv
of the same key. Otherwise the venv has no FA3 and says so: the record's program then runs on the
FlexAttention stand-in, a declared deviation.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline.env.lock import Lock, LockedFile
from pipeline.env.manifest import Environment
from pipeline.errors import InputError, MissingDependency, RunFailed
from pipeline.findings import Finding, deviations_from_list
from pipeline.hashing import sha256_bytes, sha256_file
from pipeline.regular_file import read_text_bounded
from pipeline.workspace import Workspace

MARKER = "repro-venv.json"
SCHEMA_VERSION = 2  # 2: deviations are findings (a version-1 marker's sentences are still read)


@dataclass(frozen=True, kw_only=True)
class VenvIdentity:
    """What a run records about the venv it trained in (as a docker run records its image id)."""

    key: str
    environment: str
    lock_sha256: str
    python: str  # the venv's interpreter: what trains
    python_version: str
    platform: str
    path: str
    packages: int  # files installed from the lock
    fa3_wheel: str | None  # "<filename> sha256:<hex>" or None when the venv has no FA3
    deviations: tuple[Finding, ...]
    reused: bool = False

    def to_dict(self) -> dict:
        data = asdict(self)
        data["deviations"] = [d.to_dict() for d in self.deviations]
        return data

    @classmethod
    def from_dict(cls, data: dict, where: str) -> VenvIdentity:
        """As a marker or run.yaml stores it; InputError (naming `where`) when a field is missing or mistyped."""
        fields = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(data, dict) or set(data) - set(fields):
            raise InputError(f"{where}: not a venv identity (fields: {', '.join(fields)})",
                             "the file was not written by this tool or was edited; build the venv again")
        try:
            return cls(**{**data, "deviations": deviations_from_list(data.get("deviations"), f"{where}.deviations")})
        except TypeError as exc:
            raise InputError(f"{where}: {exc}", "the file was not written by this tool or was edited; build the "
                             "venv again") from None


def _base_facts(python: str) -> tuple[str, str]:
    """(exact version, platform tag) of the interpreter the venv is made from."""
    code = "import platform, sys; print(platform.python_version()); print(sys.platform + '-' + platform.machine())"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingDependency(f"cannot run the base Python {python}: {exc}",
                                "give --python PATH to a CPython of the environment's version") from None
    if done.returncode != 0:
        raise MissingDependency(f"the base Python {python} does not start: {done.stderr.strip()[-200:]}",
                                "give --python PATH to a working CPython")
    version, plat = done.stdout.split()
    return version, plat


def find_base_python(env: Environment, python: str | None = None) -> str:
    """--python, else python<major.minor> of the environment on PATH, else this Python if it is that version."""
    if python:
        return python
    minor = ".".join(env.python.split(".")[:2])
    found = shutil.which(f"python{minor}")
    if found:
        return found
    if platform.python_version().startswith(minor + "."):
        return sys.executable
    raise MissingDependency(f"no Python {minor} here (environment {env.name} pins Python {env.python})",
                            f"install Python {minor} (e.g. `apt-get install python{minor}-venv`) or give --python PATH")


def venv_key(lock_sha256: str, python_version: str, plat: str) -> str:
    return sha256_bytes(json.dumps([lock_sha256, python_version, plat]).encode())[:16]


def requirements_text(files: tuple[LockedFile, ...], source: str) -> str:
    """One line per locked file: by URL (`lock`), or name==version for a --find-links folder or an index."""
    if source == "lock":
        return "".join(f.requirement() + "\n" for f in files)
    return "".join(f"{f.name}=={f.version} --hash=sha256:{f.sha256}\n" for f in files)


def _pip_install(python: Path, args: list[str], log: Callable[[str], None], verb: str = "install") -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}  # the machine's pip config stays out
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    cmd = [str(python), "-m", "pip", verb, "--no-cache-dir", "--no-deps", "--only-binary=:all:", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    from pipeline.redact import scrub_urls

    for line in done.stdout.splitlines():
        if line.startswith(("Successfully installed", "Installing")):
            log(f"    {scrub_urls(line)}")
    if done.returncode != 0:
        said = scrub_urls(done.stderr.strip())
        fix = "check the index or wheelhouse, then run `repro env venv` again"
        if "DO NOT MATCH THE HASHES" in said:
            fix = ("a file's bytes do not match the lock's sha256: do not use that source until it is explained "
                   "(never edit the lock to match a file)")
        raise RunFailed(f"{'installing' if verb == 'install' else 'fetching'} the lock's files for the venv "
                        f"failed:\n{said[-1500:]}", fix)


def _fetch(python: Path, files: tuple[LockedFile, ...], wheelhouse: Path | None, index_url: str | None, stage: Path,
           log: Callable[[str], None]) -> Path:
    """A folder holding every file of `files` by its filename, hashes checked: the wheelhouse, or `stage` filled
    by `pip download` (so that their METADATA can be read before anything is installed)."""
    if wheelhouse is not None:
        folder = Path(wheelhouse)
    else:
        stage.mkdir(parents=True, exist_ok=True)
        requirements = stage / "repro-download.txt"
        requirements.write_text(requirements_text(files, "lock" if index_url is None else "name"))
        args = ["--require-hashes", "-r", str(requirements), "-d", str(stage)]
        log(f"  fetching {len(files)} locked files (hashes enforced) from "
            + ("the lock's URLs" if index_url is None else "the index"))
        _pip_install(python, (["--index-url", index_url] if index_url else []) + args, log, verb="download")
        folder = stage
    missing = [f.filename for f in files if not (folder / f.filename).is_file()]
    if missing:
        raise InputError(f"{folder} lacks {missing[0]}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1
                                                             else ""),
                         "fill the wheelhouse with `repro env lock --wheelhouse DIR`")
    return folder


def _needed(env: Environment, lock: Lock, with_fa3: bool, folder: Path, python: Path,
            log: Callable[[str], None]) -> tuple[LockedFile, ...]:
    """The lock's files that the manifest's requirements lead to; any other entry is left out, and said."""
    from pipeline.env.closure import marker_environment, required_files

    files = lock.files if with_fa3 else lock.packages  # FA3's build packages only where FA3 is
    asked = env.requirements + (env.build_requirements if with_fa3 else ())
    needed, extra = required_files(files, {f.filename: folder / f.filename for f in files}, asked,
                                   marker_environment(python))
    if extra:
        log(f"  leaving out {len(extra)} lock entr{'y' if len(extra) == 1 else 'ies'} that no requirement of "
            f"{env.name} leads to: {', '.join(f'{f.name} {f.version}' for f in extra)}")
    return needed


def _fa3_wheel(wheelhouse: Path | None) -> Path | None:
    if wheelhouse is None:
        return None
    wheels = sorted(wheelhouse.glob("flash_attn*.whl"))
    return wheels[-1] if wheels else None


def read_identity(path: Path) -> VenvIdentity | None:
    """The marker of a complete venv, or None (absent, or from another schema: built again)."""
    marker = Path(path) / MARKER
    try:
        data = json.loads(read_text_bounded(marker, 1 << 20, "venv marker", "remove the venv; it is built again"))
        if data.pop("schema_version", None) not in (1, SCHEMA_VERSION):
            return None
        return VenvIdentity.from_dict(data, str(marker))
    except (OSError, ValueError, InputError):
        return None


def _fa3_source(lock: Lock, wheelhouse: Path | None, into: Path) -> Path:
    """The pinned FA3 tree unpacked into `into`: the wheelhouse's archive (checked) or one packed from git."""
    from pipeline.env.fa3 import archive_source, source_filename

    pin = lock.flash_attention
    archive = Path(wheelhouse) / pin.get("source_file", source_filename(pin["commit"])) if wheelhouse else None
    if archive is not None and archive.is_file():
        actual = sha256_file(archive)
        if actual != pin.get("source_sha256"):
            raise InputError(f"wheelhouse file {archive}: sha256 is {actual}, the lock says "
                             f"{pin.get('source_sha256') or 'nothing'}",
                             "replace it with `repro env lock --wheelhouse DIR` (it packs the pinned commit)")
    else:
        archive = archive_source(pin, into.parent / "archive")  # git at the pinned commits, cutlass checked
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / pin["subdirectory"]


def fa3_build_key(lock: Lock, venv_key: str) -> str:
    pin = lock.flash_attention
    return sha256_bytes(json.dumps([pin["commit"], pin["cutlass_commit"], sorted(pin["build_env"].items()),
                                    venv_key]).encode())[:16]


def build_fa3(ws: Workspace, lock: Lock, venv_python: Path, venv_key: str, wheelhouse: Path | None,
              log: Callable[[str], None]) -> Path:
    """FA3's wheel for this venv: built once from the pinned source, then taken from ws.cache/fa3-wheels/<key>."""
    key = fa3_build_key(lock, venv_key)
    cached = ws.cache / "fa3-wheels" / key
    done = sorted(cached.glob("flash_attn*.whl")) if (cached / "built.json").is_file() else []
    if done:
        log(f"  FA3: reusing the wheel built earlier ({done[-1].name}, key {key})")
        return done[-1]
    pin = lock.flash_attention
    log(f"  FA3: building {pin['commit'][:12]} ({pin['subdirectory']}/) against this venv's torch, once "
        f"(a real FA3 compiles for a long time; key {key})")
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="repro-fa3-build-", dir=cached.parent) as tmp:
        source = _fa3_source(lock, wheelhouse, Path(tmp) / "src")
        out = Path(tmp) / "wheels"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env.update({**pin["build_env"], "PIP_CONFIG_FILE": os.devnull, "MAX_JOBS": env.get("MAX_JOBS") or
                    str(os.cpu_count() or 1), "PATH": f"{venv_python.parent}{os.pathsep}{env.get('PATH', '')}"})
        proc = subprocess.run([str(venv_python), "-m", "pip", "wheel", "--no-cache-dir", "--no-build-isolation",
                               "--no-deps", "--no-index", "-w", str(out), str(source)],
                              capture_output=True, text=True, env=env)
        wheels = sorted(out.glob("flash_attn*.whl"))
        if proc.returncode != 0 or not wheels:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise RunFailed(f"building FA3 {pin['commit'][:12]} failed (exit {proc.returncode}):\n{tail}",
                            "FA3 needs the CUDA toolkit (nvcc, CUDA_HOME) and a Hopper build; or put a flash_attn "
                            "wheel built elsewhere into --wheelhouse, or leave out --build-fa3 (FlexAttention "
                            "stand-in)")
        staged = Path(tmp) / "staged"
        staged.mkdir()
        shutil.move(str(wheels[-1]), staged / wheels[-1].name)
        from pipeline.atomic import write_json

        write_json(staged / "built.json", {"commit": pin["commit"], "cutlass_commit": pin["cutlass_commit"],
                                           "build_env": pin["build_env"], "venv_key": venv_key,
                                           "wheel": wheels[-1].name,
                                           "sha256": sha256_file(staged / wheels[-1].name)})
        if cached.exists():
            shutil.rmtree(cached)  # an earlier build that never wrote built.json
        staged.rename(cached)
    return cached / wheels[-1].name


def build_venv(ws: Workspace, env: Environment, lock: Lock, *, wheelhouse: Path | None = None,
               index_url: str | None = None, python: str | None = None, build_fa3_from_source: bool = False,
               log: Callable[[str], None] = lambda line: None) -> VenvIdentity:
    """The venv of this lock for this Python, reused when complete, else built with every hash enforced.

    The lock's files come from the lock's URLs, or `wheelhouse` (a folder holding them, no network), or
    `index_url` (a mirror: the lock's hashes still decide); `python` is the base interpreter (default
    find_base_python); `build_fa3_from_source` compiles FA3 when no wheel of it is at hand."""
    lock.require_complete(env)
    if wheelhouse is not None and index_url is not None:
        raise InputError("--wheelhouse and --index-url both name where the files come from", "give one of them")
    if wheelhouse is not None and not Path(wheelhouse).is_dir():
        raise InputError(f"wheelhouse {wheelhouse} is not a folder", "give the folder `repro env lock --wheelhouse` "
                                                                   "filled")
    base = find_base_python(env, python)
    version, plat = _base_facts(base)
    if version.rsplit(".", 1)[0] != env.python.rsplit(".", 1)[0]:
        raise InputError(f"{base} is Python {version}; environment {env.name} pins Python {env.python} and its "
                         "wheels are built for it", f"give --python PATH to a Python {env.python}")
    key = venv_key(lock.sha256, version, plat)
    path = ws.cache / "venvs" / key
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{key}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # another builder of the same key: wait for it, then reuse
        found = read_identity(path)
        if found is not None and Path(found.python).is_file():
            log(f"venv {key} is complete: reusing {path}")
            return dataclasses.replace(found, reused=True)
        if path.exists():
            log(f"removing an incomplete venv at {path} (an interrupted build)")
            shutil.rmtree(path)
        return _build(ws, env, lock, base=base, version=version, plat=plat, path=path, wheelhouse=wheelhouse,
                      index_url=index_url, build_fa3_from_source=build_fa3_from_source, log=log)


def _build(ws: Workspace, env: Environment, lock: Lock, *, base: str, version: str, plat: str, path: Path,
           wheelhouse: Path | None, index_url: str | None, build_fa3_from_source: bool,
           log: Callable[[str], None]) -> VenvIdentity:
    """The venv at `path` (its name is its key), made by `base` (the interpreter, its exact version and platform
    tag) and filled from the lock's files (build_venv's `wheelhouse`, `index_url`, `build_fa3_from_source`)."""
    key = path.name
    wheel_dir = Path(wheelhouse) if wheelhouse else None
    deviations = list(lock.deviations)
    if version != env.python:
        deviations.append(Finding("venv.python_differs", "deviation",
                                  {"environment": env.name, "got": version, "want": env.python}))
    log(f"building venv {key} from the lock of {env.name} ({lock.sha256[:12]}) with {base} (Python {version})")
    done = subprocess.run([base, "-m", "venv", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise MissingDependency(f"{base} -m venv failed: {done.stderr.strip()[-300:]}",
                                f"install the venv module (e.g. `apt-get install python{version[:4]}-venv`)")
    venv_python = path / "bin" / "python"
    fa3 = _fa3_wheel(wheel_dir)
    with_fa3 = bool(lock.flash_attention) and (fa3 is not None or build_fa3_from_source)
    with tempfile.TemporaryDirectory(prefix=f".{key}-files-", dir=path.parent) as stage:
        folder = _fetch(venv_python, lock.files if with_fa3 else lock.packages, wheel_dir, index_url,
                        Path(stage), log)
        files = _needed(env, lock, with_fa3, folder, venv_python, log)
        requirements = path / "repro-requirements.txt"
        requirements.write_text(requirements_text(files, "name"))
        log(f"  installing {len(files)} locked files (hashes enforced) from "
            + (f"wheelhouse {wheelhouse}" if wheelhouse else "the files fetched"))
        _pip_install(venv_python, ["--no-index", "--find-links", str(folder), "--require-hashes", "-r",
                                   str(requirements)], log)
    fa3_wheel = None
    if fa3 is None and with_fa3:
        fa3 = build_fa3(ws, lock, venv_python, key, wheel_dir, log)
    if fa3 is not None:
        sha = sha256_file(fa3)
        log(f"  installing FA3 from {fa3.name} (sha256 {sha})")
        _pip_install(venv_python, [f"{fa3}"], log)
        fa3_wheel = f"{fa3.name} sha256:{sha}"
    elif lock.flash_attention:
        deviations.append(Finding("venv.no_fa3", "deviation", {"environment": env.name}))
    identity = VenvIdentity(key=key, environment=env.name, lock_sha256=lock.sha256, python=str(venv_python),
                            python_version=version, platform=plat, path=str(path), packages=len(files),
                            fa3_wheel=fa3_wheel, deviations=tuple(deviations))
    from pipeline.atomic import write_json

    write_json(path / MARKER, {"schema_version": SCHEMA_VERSION, **identity.to_dict()})  # last: complete
    log(f"venv {key} ready: {venv_python}")
    return identity


def compile_cache_dir(cache: Path, software: str, program_sha256: str) -> Path:
    """Inductor and Triton caches for the host runtime under `cache` (ws.cache), keyed as the docker volume is:
    the software that compiles (a venv key, or the probed interpreter) and the program's sha256."""
    return Path(cache) / "compile-cache" / ("host-" + sha256_bytes((software + program_sha256).encode())[:16])


def load_identity(venv: Path) -> VenvIdentity:
    """The identity of a venv `repro env venv` built (its folder, or its bin/python): what a run records."""
    folder = Path(venv)
    if folder.is_file():  # .../bin/python
        folder = folder.parent.parent
    found = read_identity(folder)
    if found is None:
        raise InputError(f"{venv} is not a complete venv built by `repro env venv` (no valid {MARKER})",
                         "build it with `repro env venv --env NAME` and pass the folder or python it prints")
    return found
