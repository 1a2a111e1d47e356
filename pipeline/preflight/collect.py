"""Collect HostFacts from a source: this machine (HostSources) or a folder of saved outputs (SavedSources).

    facts = collect(HostSources(), runtime="host", locations={"data": Path("data"), ...})
    facts = collect(SavedSources(Path("tests/fixtures/hosts/h200-1gpu")), runtime="host", locations={})

A source that is absent or unreadable (no nvidia-smi, no Docker daemon, no image built yet) is
recorded in HostFacts.missing with the reason, and collection carries on: preflight must report on
any machine, including one without a GPU. Both source kinds feed the same parsers with real text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from pipeline.errors import InputError, ReproError
from pipeline.preflight.facts import DiskFacts, HostFacts, MissingSource
from pipeline.preflight.parse import (
    allowed_environment,
    parse_docker_info,
    parse_lscpu,
    parse_meminfo,
    parse_nvidia_smi_xml,
    parse_os_release,
    parse_runtime_versions,
    parse_topology,
)
from pipeline.redact import URL_CREDENTIALS
from pipeline.regular_file import read_text_bounded

# Saved outputs: what a folder such as tests/fixtures/hosts/h200-1gpu holds for each source.
SAVED_FILES = {
    "nvidia-smi -q -x": "nvidia-smi-q.xml",
    "nvidia-smi topo -m": "nvidia-smi-topo.txt",
    "lscpu": "lscpu.txt",
    "/proc/meminfo": "meminfo.txt",
    "/etc/os-release": "os-release.txt",
    "uname -r": "uname.txt",
    "runtime": "torch-env.json",
    "docker": "docker-info.json",
    "disk": "disk.json",
    "environment": "environ.json",
}
# Error texts can quote URLs (DOCKER_HOST, proxies); a password inside one must not reach preflight.json.
_URL_CREDENTIALS = URL_CREDENTIALS  # pipeline/redact.py: the one pattern
_COMMANDS = {"nvidia-smi -q -x": ["nvidia-smi", "-q", "-x"], "nvidia-smi topo -m": ["nvidia-smi", "topo", "-m"],
             "lscpu": ["lscpu"]}


class SourceMissing(Exception):
    def __init__(self, reason: str):
        reason = _URL_CREDENTIALS.sub("[REDACTED]", reason)
        super().__init__(reason)
        self.reason = reason


class HostSources:
    """This machine: subprocesses, /proc and /etc, statvfs, the Docker SDK."""

    def __init__(self, timeout_s: float = 60.0, python: str = sys.executable, image: str | None = None,
                 state_dir: Path | None = None):
        # the docker runtime's image: given, else the one `repro env build` recorded in state_dir (ws.state)
        self.timeout_s, self.python, self.image, self.state_dir = timeout_s, python, image, state_dir
        self.description = "this machine"

    def _run(self, argv: list[str], timeout_s: float | None = None) -> str:
        if shutil.which(argv[0]) is None:
            raise SourceMissing(f"{argv[0]} not found on PATH")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s or self.timeout_s,
                                  env={**os.environ, "LC_ALL": "C"})
        except subprocess.TimeoutExpired:
            raise SourceMissing(f"`{' '.join(argv[:3])}` did not answer within {timeout_s or self.timeout_s:.0f} s") \
                from None
        except OSError as exc:
            raise SourceMissing(f"`{argv[0]}` could not start: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise SourceMissing(f"`{' '.join(argv[:3])}` exited {done.returncode}: {said[-1] if said else 'no output'}")
        return done.stdout

    def text(self, source: str) -> str:
        if source in _COMMANDS:
            return self._run(_COMMANDS[source])
        if source == "uname -r":
            return os.uname().release
        paths = {"/proc/meminfo": ["/proc/meminfo"], "/etc/os-release": ["/etc/os-release", "/usr/lib/os-release"]}
        for path in paths[source]:
            try:
                return Path(path).read_text()
            except OSError:
                continue
        raise SourceMissing(f"{source} is not readable here")

    def environment(self) -> Mapping[str, str]:
        return os.environ

    def docker_info(self) -> dict:
        client = _docker_client()
        try:
            return client.info()
        finally:
            client.close()

    def disk(self, label: str, path: Path, present: Path | None) -> DiskFacts:
        # The folder may not exist yet (no data fetched): measure the file system it will be created on.
        probe = Path(path).absolute()
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            st = os.statvfs(probe)
        except OSError as exc:
            raise SourceMissing(f"statvfs({probe}) failed: {exc}") from None
        present_bytes = None
        if present is not None and present.is_dir():
            present_bytes = sum(f.stat().st_size for f in present.rglob("*") if f.is_file())
        return DiskFacts(label=label, path=str(path), total_bytes=st.f_blocks * st.f_frsize,
                         free_bytes=st.f_bavail * st.f_frsize, present_bytes=present_bytes)

    def runtime(self, runtime: str) -> tuple[str, str, str | None]:
        """(the runtime probe's output, where it ran, why GPUs were not given) in the runtime that will train."""
        from pipeline.probe import interpreter_argv

        if runtime == "host":
            return self._run(interpreter_argv(self.python), timeout_s=180), f"host: {self.python}", None
        image = self._image_reference()
        try:
            from pipeline.docker_engine import run_snippet

            # a throwaway container, removed whatever happens (pipeline/docker_engine.py)
            done = run_snippet(image, interpreter_argv("python3"), gpus=True, timeout_s=180,
                               labels={"io.repro.role": "preflight"}, client=_docker_client())
        except ReproError as exc:
            raise SourceMissing(f"could not run {image}: {exc.what[:200]}") from None
        return done.stdout, f"docker: {image}", done.gpu_access_error

    def _image_reference(self) -> str:
        if self.image:
            return self.image
        from pipeline.env.image import load_image_state  # written by `repro env build`

        if self.state_dir is None:
            raise SourceMissing("no image given and no state folder to find the one `repro env build` recorded")
        try:
            return load_image_state(self.state_dir).image_id
        except ReproError as exc:
            raise SourceMissing(f"no usable image: {exc.what}") from None


def _docker_client():
    from pipeline.docker_engine import connect

    try:
        return connect(timeout=10)
    except ReproError as exc:
        raise SourceMissing(f"Docker daemon not reachable ({exc.what[:200]})") from None


class SavedSources:
    """A folder of saved outputs (file names in SAVED_FILES); an absent file is a missing source."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.description = f"saved outputs in {self.folder}"
        if not self.folder.is_dir():
            raise InputError(f"{self.folder} is not a folder of saved outputs",
                             f"give a folder holding files named {', '.join(sorted(SAVED_FILES.values()))}")

    def _read(self, source: str) -> str:
        path = self.folder / SAVED_FILES[source]
        if not path.is_file():
            raise SourceMissing(f"{path.name} not saved in {self.folder}")
        return read_text_bounded(path, 16 << 20, "saved preflight output", "run `repro preflight` again")

    def _json(self, source: str):
        try:
            return json.loads(self._read(source))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, an int of 5,000 digits, deep nesting
            raise InputError(f"{self.folder / SAVED_FILES[source]}: not valid JSON ({str(exc)[:120]})",
                             "save it again") from None

    def text(self, source: str) -> str:
        return self._read(source).strip() if source == "uname -r" else self._read(source)

    def environment(self) -> Mapping[str, str]:
        try:
            return self._json("environment")
        except SourceMissing:
            return {}

    def docker_info(self) -> dict:
        return self._json("docker")

    def disk(self, label: str, path: Path, present: Path | None) -> DiskFacts:
        saved = self._json("disk").get(label)
        if not isinstance(saved, dict):
            raise SourceMissing(f"no {label!r} entry in {SAVED_FILES['disk']}")
        return DiskFacts(label=label, path=str(saved.get("path", path)), total_bytes=int(saved["total_bytes"]),
                         free_bytes=int(saved["free_bytes"]), present_bytes=saved.get("present_bytes"))

    def runtime(self, runtime: str) -> tuple[str, str, str | None]:
        return self._read("runtime"), f"{runtime}: saved {SAVED_FILES['runtime']}", None


def collect(sources, runtime: str, locations: Mapping[str, tuple[Path, Path | None]]) -> HostFacts:
    """Read every source; `locations` maps a disk label to (folder, what of it is already ours)."""
    missing: list[MissingSource] = []

    def attempt(source: str, read: Callable):
        try:
            return read()
        except SourceMissing as exc:
            missing.append(MissingSource(source, exc.reason))
        except InputError as exc:
            missing.append(MissingSource(source, _URL_CREDENTIALS.sub("[REDACTED]", f"unreadable: {exc.what}")))
        return None

    gpus, driver, cuda = attempt("nvidia-smi -q -x", lambda: parse_nvidia_smi_xml(sources.text("nvidia-smi -q -x"))) \
        or ((), None, None)
    topology = None
    if len(gpus) > 0:  # without nvidia-smi there is no topology to ask for; one missing entry says why
        topology = attempt("nvidia-smi topo -m", lambda: parse_topology(sources.text("nvidia-smi topo -m")))
    docker = attempt("docker", lambda: parse_docker_info(sources.docker_info()))
    disk_places = dict(locations)
    if runtime == "docker" and docker is not None and docker.root_dir:
        disk_places.setdefault("image", (Path(docker.root_dir), None))
    disks = [attempt(f"disk:{label}", lambda label=label, p=p: sources.disk(label, p[0], p[1]))
             for label, p in disk_places.items()]
    kernel = attempt("uname -r", lambda: sources.text("uname -r").strip())
    return HostFacts(
        gpus=gpus, driver=driver, cuda_driver=cuda, topology=topology,
        runtime=attempt("runtime", lambda: parse_runtime_versions(*sources.runtime(runtime))),
        cpu=attempt("lscpu", lambda: parse_lscpu(sources.text("lscpu"))),
        memory=attempt("/proc/meminfo", lambda: parse_meminfo(sources.text("/proc/meminfo"))),
        os=attempt("/etc/os-release", lambda: parse_os_release(sources.text("/etc/os-release"), kernel)),
        disks=tuple(d for d in disks if d is not None), docker=docker,
        environment=allowed_environment(sources.environment()), missing=tuple(missing))
