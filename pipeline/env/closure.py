"""Which of a lock's files an environment needs: the closure of its manifest's requirements.

    needed, extra = required_files(files, wheels, requirements, marker_env)

A lock lists files with their sha256, and `pip install --no-deps` installs exactly what it is given, so an
entry that no requirement leads to (a hand-added line, a lock edited after resolving) would be installed
with nothing to say it does not belong. The closure is computed from the wheels themselves: each wheel's
METADATA names its dependencies (Requires-Dist), whose markers are evaluated for the Python that will
run them (`marker_environment`), extras included. A wheel's METADATA is read in bounded memory.
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from pipeline.env.lock import LockedFile
from pipeline.errors import InputError, MissingDependency

METADATA_LIMIT = 4 << 20  # a wheel's METADATA is kilobytes (it may carry the long description)

_MARKER_ENV = r"""
import json, os, platform, sys
iv = sys.implementation.version
version = f"{iv.major}.{iv.minor}.{iv.micro}"
if iv.releaselevel != "final":
    version += f"{iv.releaselevel[0]}{iv.serial}"
print(json.dumps({"implementation_name": sys.implementation.name, "implementation_version": version,
                  "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
                  "platform_system": platform.system(), "platform_version": platform.version(),
                  "python_full_version": platform.python_version(),
                  "platform_python_implementation": platform.python_implementation(),
                  "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform}))
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def marker_environment(python: Path) -> dict[str, str]:
    """PEP 508's marker variables as `python` sees them (the venv's interpreter, not this one)."""
    try:
        done = subprocess.run([str(python), "-c", _MARKER_ENV], capture_output=True, text=True, timeout=60)
        return json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise MissingDependency(f"cannot ask {python} for its platform ({exc})", "check the venv's Python") from None


def requires_dist(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                raise InputError(f"{wheel.name} has {len(names)} .dist-info/METADATA files, not one",
                                 "this is not a wheel pip built; do not use its source")
            info = archive.getinfo(names[0])
            if info.file_size > METADATA_LIMIT:
                raise InputError(f"{wheel.name}: its METADATA is {info.file_size} bytes", "do not use its source")
            text = archive.read(info).decode("utf-8", errors="replace")
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"{wheel.name} is not a readable wheel ({exc})", "fetch it again") from None
    return Parser().parsestr(text, headersonly=True).get_all("Requires-Dist") or []


def _parse(line: str, where: str) -> Requirement:
    try:
        return Requirement(line)
    except InvalidRequirement as exc:
        raise InputError(f"{where}: requirement {line!r} does not parse ({exc})", "fix the requirement") from None


def required_files(files: tuple[LockedFile, ...], wheels: dict[str, Path], requirements: tuple[str, ...],
                   marker_env: dict[str, str]) -> tuple[tuple[LockedFile, ...], tuple[LockedFile, ...]]:
    """(the files the requirements lead to, in the lock's order; the others). `wheels`: filename -> local file."""
    by_name = {canonical(f.name): f for f in files}
    wanted: dict[str, set[str]] = {}  # canonical name -> extras asked of it
    queue = [(_parse(line, "the environment manifest"), "") for line in requirements]
    while queue:
        req, extra = queue.pop()
        if req.marker is not None and not req.marker.evaluate({**marker_env, "extra": extra}):
            continue
        name = canonical(req.name)
        known = wanted.get(name)
        if known is not None and set(req.extras) <= known:
            continue
        wanted[name] = (known or set()) | set(req.extras)
        locked = by_name.get(name)
        if locked is None:
            continue  # a requirement the lock does not hold: pip's --require-hashes install says so by name
        for line in requires_dist(wheels[locked.filename]):
            dep = _parse(line, locked.filename)
            for asked in ["", *sorted(wanted[name])]:
                queue.append((dep, asked))
    needed = tuple(f for f in files if canonical(f.name) in wanted)
    return needed, tuple(f for f in files if canonical(f.name) not in wanted)

